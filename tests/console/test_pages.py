"""The console's pieces without a broker: the feed folds the output records it reads into a bounded view and
tells the pages concerned, the pages paginate, escape what records say, and offer actions only to who may act."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from streams.console import pages
from streams.console.feed import KEPT, Feed, Update
from streams.console.server import _decision_rows, _instances_plot
from streams.settings import Settings


def message(value: dict[str, Any] | None, key: str, offset: int = 0) -> Any:
    return SimpleNamespace(key=key.encode(), value=None if value is None else json.dumps(value).encode(),
                           offset=offset, partition=0, timestamp=1_000 + offset)


def test_the_feed_folds_what_it_reads_and_tells_the_page_concerned() -> None:
    feed = Feed(Settings(topic_prefix="p."))
    heard: list[Update] = []
    feed.subscribe(heard.append)
    feed._read("p.pool-instances", message({"pool": "a", "app": "ats", "instances": 8}, "a/ats"))
    feed._read("p.pool-instances", message({"pool": "a", "app": "hadoop", "instances": 2}, "a/hadoop"))
    feed._read("p.pool-instances", message(None, "a/hadoop"))  # compacted away: the app left
    for seq in range(1, KEPT + 20):
        feed._read("p.scaling-decisions", message({"type": "ScalingDecision", "pool": "a", "seq": seq}, "a", seq))
    feed._read("p.dispatcher-health", message({"namespace": "ns", "running": 1, "max": 2}, "ns"))
    feed._read("p.job-outcomes", message({"type": "JobFailedFinally", "namespace": "ns", "uuid": "u", "at": 5_000},
                                         "ns"))
    feed._read("p.rejection-limits", message({"group": "g", "scheduler": "A", "N": 3}, "g/A"))
    feed._read("p.shard-plans", message({"job_set": "js", "epoch": 2}, "js"))
    feed._read("p.plugin_decider.dlq", message({"reason_code": "bad_metric", "reason": "no"}, "a"))
    feed._read("p.plugin_decider.dlq", message(None, "a"))  # no value: nothing to count
    v = feed.view
    assert v.instances == {"a": {"ats": 8}}
    assert len(v.decisions["a"]) == KEPT and v.decisions["a"][-1]["seq"] == KEPT + 19  # bounded, newest kept
    assert v.health["ns"]["max"] == 2 and v.failed_last_hour("ns", 5_000 + 60_000) == 1
    assert v.failed_last_hour("ns", 5_000 + 3_600_001) == 0
    assert v.limits == {"g": {"A": {"group": "g", "scheduler": "A", "N": 3}}} and v.plans["js"]["epoch"] == 2
    assert v.letters == {("p.plugin_decider.dlq", "bad_metric"): 1}
    kinds = {(u.kind, u.key) for u in heard}
    assert kinds == {("pool", "a"), ("namespace", "ns"), ("group", "g"), ("job_set", "js"),
                     ("dlq", "p.plugin_decider.dlq")}


@given(st.integers(0, 500), st.integers(-3, 20))
def test_a_long_table_is_shown_a_page_at_a_time(rows: int, asked: int) -> None:
    shown, page, count = pages.page_of(list(range(rows)), asked)
    assert count == max(1, -(-rows // pages.PAGE_SIZE)) and 1 <= page <= count
    assert len(shown) <= pages.PAGE_SIZE and shown == list(range(rows))[(page - 1) * pages.PAGE_SIZE:][:len(shown)]
    assert (rows == 0) or shown  # a page asked past the end shows the last one, not nothing


def test_what_a_record_says_is_escaped_and_actions_are_offered_only_to_who_may() -> None:
    job = {"uuid": "u1", "external_id": "<script>alert(1)</script>", "worker": "w1", "status": "pending",
           "attempt": 0, "acceptable_start": 1, "assigned_by": "ops"}
    common = {"title": "Namespace ns", "stream": "kind=namespace&key=ns", "who": None, "local": True, "csrf": "c",
              "namespace": "ns", "health": None, "failed": 0, "jobs": [job], "page": 1, "pages": 1, "shown": 1,
              "held": 1, "error": None, "events": []}
    admin = pages.render("namespace", **common, admin=True, can_cancel=True)
    tenant = pages.render("namespace", **common, admin=False, can_cancel=True)
    reader = pages.render("namespace", **common, admin=False, can_cancel=False)
    assert "<script>alert(1)</script>" not in admin and "&lt;script&gt;" in admin
    assert admin.count("<form") == 3 and 'name="csrf" value="c"' in admin
    assert tenant.count("<form") == 1 and "/jobs/u1/cancel" in tenant  # its own jobs' cancel, no cap
    assert "<form" not in reader and "ops" in reader


def test_a_pools_rows_and_plot_read_both_forms_of_decision() -> None:
    decisions = [{"type": "ScalingDecision", "seq": 1, "outcome": "policy", "trigger": {"app": None},
                  "instances": {"ats": 5, "hadoop": 5}, "moves": [], "cause": {"timestamp": 1_000}, "reason": "p"},
                 {"type": "ScalingDecision", "seq": 2, "form": "changes", "outcome": "partial",
                  "trigger": {"app": "ats", "metrical": 75}, "instances": {"ats": 8, "hadoop": 2}, "granted": 3,
                  "requested": 5, "moves": [{"from": "hadoop", "to": "ats", "count": 3}],
                  "cause": {"timestamp": 2_000}, "reason": "r"}]
    rows = _decision_rows(decisions)
    assert [r["seq"] for r in rows] == [2, 1] and rows[0]["moves"] == "3 hadoop->ats" and rows[1]["trigger"] == "-"
    plot = _instances_plot(decisions, 3_000)
    assert plot is not None and plot.startswith("<svg") and plot.count("<path") > 10
    assert _instances_plot([], 0) is None


def test_a_page_hears_of_an_update_told_between_its_render_and_its_stream() -> None:
    """The live script subscribes only after the page has loaded: a record read in between must still refresh it
    (the stream tells of it at once, from the `since` the page was drawn with), and a page drawn after it must not
    be told again."""
    import asyncio
    import contextlib
    import re

    from aiohttp.test_utils import TestClient, TestServer

    from streams.console.server import Console

    console = Console(Settings(topic_prefix="p."), "http://127.0.0.1:1", None)
    dlq = "p.plugin_decider.dlq"

    async def first_event(client: TestClient, since: str) -> str:
        response = await client.get("/events", params={"kind": "dlq", "key": dlq, "since": since})
        events = []

        async def read() -> None:
            async for line in response.content:
                if line.startswith(b"event: "):
                    events.append(line.decode().split()[1])
                    if len(events) == 2:
                        return
        with contextlib.suppress(TimeoutError):  # a stream with nothing more to tell stays open
            await asyncio.wait_for(read(), 1.0)
        response.close()
        return ",".join(events)

    async def scenario() -> tuple[str, str, str]:
        async with TestClient(TestServer(console.app())) as client:
            html = await (await client.get(f"/dead-letters/{dlq}/bad_metric")).text()
            since = re.search(r'data-since="(\d+)"', html)
            assert since is not None, html
            console.feed._read(dlq, message({"reason_code": "bad_metric", "reason": "no"}, "a"))  # before it listens
            missed = await first_event(client, since.group(1))
            redrawn = re.search(r'data-since="(\d+)"', await (await client.get("/dead-letters")).text())
            assert redrawn is not None
            return missed, await first_event(client, redrawn.group(1)), await first_event(client, "")

    missed, current, unknown = asyncio.run(scenario())
    assert missed == "ready,update"  # told at once of the letter it missed
    assert current == "ready"  # a page drawn after it: nothing to catch up
    assert unknown == "ready"  # a page from before this version of the console: as before
