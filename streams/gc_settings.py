"""Garbage-collector settings for tribunal's long folding processes (the worker, replay)."""

from __future__ import annotations

import gc


def fewer_collections() -> None:
    """The folds allocate many short-lived objects and keep a few large persistent maps: at CPython's
    default young-generation threshold (700) the collector runs so often it took 60% of a group's fold
    (bench/groups_fold.py) and a tenth of a replay (bench/replay_file.py)."""
    gc.set_threshold(10_000, 10, 10)


def freeze_start_up() -> None:
    """What start-up built (modules, Faust's services, the app) lives as long as the process: a full
    collection scanned all of it (40-50 ms in the worker, a stall of every record in flight). Frozen,
    the collector scans only what was made after (and processes forked after do not touch it)."""
    gc.freeze()
