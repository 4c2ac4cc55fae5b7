"""`run(settings)`: the worker process, from topics to Faust's worker loop, with its start-up rules."""

from __future__ import annotations

import logging
import time

import faust

from streams import __version__, logs
from streams.compiled import running
from streams.gc_settings import fewer_collections, freeze_start_up
from streams.settings import Settings
from streams.topics import create_topics, declare_topics
from streams.worker.app import CHANGELOG_CONFIG, create_app, keep_or_discard_local_tables

log = logging.getLogger(__name__)


def run(settings: Settings) -> None:
    """Create missing topics, build the app, and run it until stopped; the local stores are kept for recovery to
    start from, unless they cannot be trusted (`streams.worker.app.keep_or_discard_local_tables`)."""
    logs.configure(settings.log_format)  # lines before Faust's own logging starts: in the same format
    log.info("tribunal %s; the core: %s", __version__, running())
    create_topics(settings)
    fewer_collections()
    app = create_app(settings)
    # Made here rather than by Faust as each table starts: a group leader that assigned partitions moments after
    # Faust made them did not see them yet, and left every table unrecovered (tests/worker/test_scale_out.py).
    changelogs = {table.changelog_topic.get_topic_name(): CHANGELOG_CONFIG for table in app.tables.values()}
    _, changed = declare_topics(settings, changelogs)
    if changed:  # made by an earlier version, with the broker's defaults
        log.warning("changelog topics %s now have %s (streams.worker.app.CHANGELOG_CONFIG)", changed, CHANGELOG_CONFIG)
    keep_or_discard_local_tables(app, time.time())
    freeze_start_up()
    worker = faust.Worker(app, loglevel=settings.log_level, logfile=None, quiet=settings.log_format == "json",
                          logging_config=logs.faust_logging_config(settings.log_format, settings.log_level))
    # Faust's progress spinner sets the root logger to DEBUG (to spin on every record logged), so
    # every aiokafka debug call built a log record: 7% of the worker's time, measured.
    worker.spinner = None
    worker.execute_from_commandline()
