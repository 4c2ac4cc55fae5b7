"""Worker and CLI settings: defaults, then `TRIBUNAL_*` environment variables, then flags.

`KAFKA_BOOTSTRAP` and `ZOOKEEPER_HOSTS` are honoured too, because they are what the test fixtures
and most Kafka tooling already export.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parents[1]


def default_home() -> Path:
    """Data, logs and pid files of a local deployment: the servers `tribunal infra up` starts, and the worker's
    tables (here rather than in `streams.infra`, which only the CLI loads)."""
    return Path(os.environ.get("TRIBUNAL_HOME", REPO_ROOT / ".tribunal"))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TRIBUNAL_", extra="ignore")

    kafka_bootstrap: str = Field(
        "127.0.0.1:9092", validation_alias=AliasChoices("TRIBUNAL_KAFKA_BOOTSTRAP", "KAFKA_BOOTSTRAP"))
    zookeeper_hosts: str = Field(
        "127.0.0.1:2181", validation_alias=AliasChoices("TRIBUNAL_ZOOKEEPER_HOSTS", "ZOOKEEPER_HOSTS"))
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="How every Kafka client of tribunal connects (worker, CLI, bridge, schedulers, "
                                 "dispatcher client)")
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "SCRAM-SHA-512"
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = Field(None, description="CA certificates (PEM) the brokers' certificates must chain "
                                                      "to; default: the system's")
    ssl_certfile: Path | None = Field(None, description="This client's certificate (PEM), for brokers that ask")
    ssl_keyfile: Path | None = None
    ssl_key_password: SecretStr | None = None
    zookeeper_auth: SecretStr | None = Field(
        None, description="'user:password' for ZooKeeper digest auth; every node tribunal creates is then "
                          "writable by that user only (and readable by all)")
    app_id: str = Field("tribunal", description="Faust app id: the consumer group and table prefix")
    topic_prefix: str = Field("", description="Prepended to every topic name, e.g. 'staging.'")
    partitions: int = Field(4, ge=1, description="Partitions of the input topics (scale-out unit)")
    replication_factor: int = Field(1, ge=1)
    data_dir: Path = Field(default_factory=lambda: default_home() / "worker")
    web_host: str = "127.0.0.1"
    web_port: int = Field(6066, ge=0, le=65535)
    processing_guarantee: Literal["exactly_once", "at_least_once"] = "exactly_once"
    commit_interval: float = Field(
        0.1, gt=0, description="Seconds at most between a commit and the next: under load the worker waits "
                               "0.1 ms per record of the last batch before it writes the next, up to this, "
                               "so that fewer, larger transactions cost the broker less; a light load is "
                               "committed at once. Under exactly-once a decision is visible to read_committed "
                               "consumers once committed (see streams.worker.checkpoint)")
    max_batch: int = Field(
        5_000, ge=1, description="Records folded in memory before the agents wait for the flusher to write "
                                 "and commit them (see streams.worker.checkpoint)")
    session_timeout: float = Field(
        10.0, gt=0, description="Seconds until the group gives a dead worker's partitions to another")
    linger: float = Field(
        0.005, ge=0, description="Seconds the producers wait to fill a batch: with idempotence one batch per "
                                 "partition is in flight at a time, so batching is what lets outputs keep pace")
    kafka_patience: float = Field(
        60.0, ge=0, description="Seconds a start-up call to Kafka (making and checking topics) is retried while it "
                                "fails the way a lost broker makes it fail (a broker not ready, a partition without "
                                "a leader, a request timed out), with one log line per wait; then the process "
                                "exits with the error. A running worker rides such a loss out on its own")
    stall_timeout: float = Field(
        30.0, gt=0, description="Seconds an input partition may have records waiting without progress "
                                "before the worker restarts itself in place (see streams.worker.watchdog)")
    instance_id: str | None = Field(
        None, description="Static group membership id (KIP-345); default: app id, host name and web port. "
                          "A restarted worker with the same id takes its partitions back without a rebalance")
    record_time: Literal["broker", "producer"] = Field(
        "broker", description="Who dates the records of the folds that keep a clock (dispatcher namespaces, pools): "
                              "'broker' makes their input topics message.timestamp.type=LogAppendTime, so a "
                              "producer's skewed clock cannot move a namespace's or a pool's time; 'producer' "
                              "(CreateTime) keeps the timestamps producers set, for a log mirrored from another "
                              "cluster with its times, or tests that stamp records themselves")
    log_level: str = "info"
    metrics: bool = Field(True, description="Count records, dead letters, latencies and lag for /metrics (a dict "
                                            "increment per record; off only to measure what that costs)")
    log_format: Literal["text", "json"] = Field(
        "text", description="'json': one JSON object a line, with the fold, key and cause a line is about "
                            "(see streams.logs)")
    folds: str = Field(
        "", description="More folds beside the built-in ones (pools, groups, dispatch), as 'module:NAME' entries "
                        "separated by commas (each a `streams.core.folds.Fold`); every command registers them "
                        "before it runs, so the worker folds them and replay, verify, explain and `topics create` "
                        "know them")

    @property
    def web(self) -> str:
        """host:port of the worker's web server (its state pages)."""
        return f"{self.web_host}:{self.web_port}"

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}{name}"

    @property
    def broker_url(self) -> str:
        return ",".join(f"kafka://{h.strip()}" for h in self.kafka_bootstrap.split(","))
