"""Audit: exporting the log, replaying it from Kafka, verifying, explaining, reporting (SPEC §7)."""
