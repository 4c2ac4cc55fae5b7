"""Log lines as JSON: one object a line, with what a line is about."""

from __future__ import annotations

import json
import logging

import pytest

from streams import logs


def test_a_json_line_carries_its_fold_key_and_cause(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    logs.configure("json")
    try:
        logging.getLogger("streams.worker.unit").error(
            "fold failed on %s[%s]@%s", "in", 3, 42, extra=logs.about("pools", "pool-a", "in", 3, 42))
        [line] = capsys.readouterr().err.splitlines()
    finally:  # this test's stderr closes with it: later tests must not log to it
        root.handlers[:] = handlers
        root.setLevel(level)
    entry = json.loads(line)
    assert entry["message"] == "fold failed on in[3]@42" and entry["level"] == "ERROR"
    assert (entry["fold"], entry["key"], entry["cause"]) == ("pools", "pool-a",
                                                             {"topic": "in", "partition": 3, "offset": 42})
    assert entry["logger"] == "streams.worker.unit" and entry["time"].endswith("+00:00")


def test_text_stays_text() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello %s", ("world",), None)
    assert logs.formatter("text").format(record).endswith("[INFO] hello world")
    assert logs.faust_logging_config("text", "info") is None  # Faust's own lines
