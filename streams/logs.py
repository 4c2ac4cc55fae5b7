"""How the worker and tribunal's daemons log: text lines for a terminal, or one JSON object a line for a log
pipeline (`--log-format json`, `TRIBUNAL_LOG_FORMAT=json`).

A JSON line has `time`, `level`, `logger`, `process` and `message`, and whatever a call site adds as `extra`:
the fold and key a line is about (`fold`, `key`: a pool, a group, a namespace, a job set) and its cause
(`cause`: input topic, partition, offset), so a pipeline can select one pool's lines without parsing text.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal

LogFormat = Literal["text", "json"]
TEXT = "[%(asctime)s] [%(process)d] [%(levelname)s] %(message)s"
_JSON_FIELDS = "%(levelname)s %(name)s %(process)d %(message)s"
_RENAMED = {"levelname": "level", "name": "logger"}


def formatter(log_format: LogFormat) -> logging.Formatter:
    if log_format == "json":
        from pythonjsonlogger.json import JsonFormatter

        return JsonFormatter(_JSON_FIELDS, rename_fields=_RENAMED, timestamp="time")  # ISO 8601, UTC
    return logging.Formatter(TEXT)


def faust_logging_config(log_format: LogFormat, level: str) -> dict[str, Any] | None:
    """The `logging_config` Faust's worker applies (None: Faust's own colored lines)."""
    if log_format == "text":
        return None
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "streams.logs.formatter", "log_format": "json"}},
        "handlers": {"default": {"class": "logging.StreamHandler", "stream": "ext://sys.stdout",
                                 "formatter": "json", "level": level.upper()}},
        "root": {"level": level.upper(), "handlers": ["default"]},
    }


def configure(log_format: LogFormat) -> None:
    """Logging for a daemon that runs outside Faust (the bridge, schedulers, the ticker, the dispatcher API)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(log_format))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)


def cause(topic: str, partition: int, offset: int) -> dict[str, Any]:
    """A log call's `extra` naming the input record a line is about (JSON lines show it; text lines do not)."""
    return {"cause": {"topic": topic, "partition": partition, "offset": offset}}


def about(fold: str, key: str | None, topic: str, partition: int, offset: int) -> dict[str, Any]:
    """A log call's `extra`: the fold, the key and the input record a line is about."""
    return {"fold": fold, "key": key, **cause(topic, partition, offset)}
