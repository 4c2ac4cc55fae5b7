"""Scheduler groups beyond the fold (`streams.core.groups`): the bridge that publishes what ZooKeeper says of a
group, the scheduler client that takes jobs through it, and `rebalance`, which evens a group's load."""
