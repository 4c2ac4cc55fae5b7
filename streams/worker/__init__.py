"""Faust agents: the thin shell that feeds Kafka records to `streams.core` folds."""
