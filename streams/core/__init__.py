"""The functional core: pure folds `apply(state, record) -> (state, outputs)`.

Nothing in this package touches Faust, Kafka, ZooKeeper, the clock, randomness or any I/O, and
every iteration is over sorted keys. Time reaches it only as record fields. That is what makes a
replay of the log reproduce every recorded decision byte for byte; tests/core/test_purity.py
guards it.
"""
