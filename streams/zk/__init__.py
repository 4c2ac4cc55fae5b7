"""ZooKeeper: the liveness source. The bridge publishes what it says; schedulers take jobs through it."""
