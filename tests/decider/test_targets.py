"""The targets on their own (no broker): real commands, a real HTTP server, real processes."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from streams.decider.actuator import BACKOFF_FIRST, Actuator
from streams.decider.targets import ActuationFailed, Change, TargetOptions, build
from streams.decider.targets.command import CommandTarget
from streams.decider.targets.process import ProcessTarget
from streams.decider.targets.webhook import SIGNATURE, WebhookTarget
from streams.errors import ConfigError
from streams.processes.proc import start_time
from streams.settings import Settings
from tests.decider.test_reconcile import Journal


def decided(seq: int, **counts: int) -> list[dict[str, Any]]:
    """`pool-instances` records of pool p, as the fold writes them (what an actuator starts from)."""
    return [{"type": "PoolInstances", "pool": "p", "app": app, "instances": n, "seq": seq} for app, n in counts.items()]


def change(seq: int = 7, **instances: int) -> Change:
    return Change("p", seq, instances, {"web": 1, "batch": 2, **instances})


def test_exec_fills_each_argument_runs_no_shell_and_reports_failures_and_timeouts(tmp_path: Path) -> None:
    out = tmp_path / "calls"
    script = f"import sys; open({str(out)!r}, 'a').write(repr(sys.argv[1:]) + '\\n'); sys.exit(sys.argv[2] == '9')"
    target = CommandTarget(f"{sys.executable} -c \"{script}\" {{app}} {{instances}} {{pool}}:{{seq}}", timeout=5)
    asyncio.run(target.apply(change(**{"web": 3, "a b; touch x": 2})))
    assert out.read_text().splitlines() == ["['a b; touch x', '2', 'p:7']", "['web', '3', 'p:7']"]
    assert not (tmp_path / "x").exists()
    with pytest.raises(ActuationFailed) as failed:
        asyncio.run(target.apply(change(web=9, batch=4)))
    assert failed.value.failed == {"web": "exit 1: "} and "web: exit 1" in str(failed.value)
    slow = CommandTarget("sleep 5", timeout=0.2)
    with pytest.raises(ActuationFailed, match="timed out"):
        asyncio.run(slow.apply(change(web=1)))
    missing = CommandTarget("/nonexistent/kubectl scale {app}")
    with pytest.raises(ActuationFailed, match="exit 127"):
        asyncio.run(missing.apply(change(web=1)))


def test_exec_observes_through_its_command_and_leaves_out_what_it_cannot_read() -> None:
    script = "import sys; print({'web': 4}.get(sys.argv[1], 'x'))"  # braces of its own, left alone
    target = CommandTarget("true", f"{sys.executable} -c \"{script}\" {{app}}")
    assert asyncio.run(target.observe("p", ["web", "batch"])) == {"web": 4}
    assert asyncio.run(CommandTarget("true").observe("p", ["web"])) == {}


def test_the_webhook_signs_keys_and_sends_the_same_bytes_and_fails_on_anything_but_2xx(tmp_path: Path) -> None:
    from aiohttp import web

    secret = tmp_path / "secret"
    secret.write_bytes(b"s3cret\n")
    seen: list[tuple[dict[str, str], bytes]] = []
    answers = [500, 200, 200]
    journal = Journal()

    async def hook(request: web.Request) -> web.Response:
        seen.append((dict(request.headers), await request.read()))
        return web.Response(status=answers[len(seen) - 1], text="nope")

    async def scenario() -> None:
        app = web.Application()
        app.router.add_post("/hook", hook)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        target = WebhookTarget(f"http://127.0.0.1:{port}/hook", secret, timeout=5)
        act = Actuator(Settings(), "p", target, election=False, journal=journal)
        try:  # through the actuator's passes: the first POST refused, retried after the backoff, then the next seq
            act.client.learn(decided(7, web=3, batch=2))
            assert await act.reconcile() == BACKOFF_FIRST and "500 nope" in journal.written[-1].failed["web"]
            assert await act.reconcile() == act.interval and journal.written[-1].applied == {"web": 3, "batch": 2}
            act.client.learn(decided(8, web=4))
            await act.reconcile()
        finally:
            await target.close()
            await runner.cleanup()
        unreachable = WebhookTarget(f"http://127.0.0.1:{port}/hook", timeout=2)
        with pytest.raises(ActuationFailed) as failed:
            await unreachable.apply(change(web=1))
        await unreachable.close()
        assert list(failed.value.failed) == ["web"] and "ClientConnectorError" in failed.value.failed["web"]

    asyncio.run(scenario())
    (h1, b1), (h2, b2), (h3, b3) = seen
    assert b1 == b2 and h1["Idempotency-Key"] == h2["Idempotency-Key"] == "p:7" and h3["Idempotency-Key"] == "p:8"
    assert json.loads(b1) == {"pool": "p", "seq": 7, "instances": {"batch": 2, "web": 3}}
    assert json.loads(b3) == {"pool": "p", "seq": 8, "instances": {"batch": 2, "web": 4}}
    for headers, body in seen:
        expected = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers[SIGNATURE], f"sha256={expected}")


def test_process_copies_outlive_their_actuator_are_adopted_and_a_stubborn_one_is_killed(tmp_path: Path) -> None:
    command = "sh -c 'trap \"\" TERM; while :; do sleep 0.1; done'"  # ignores SIGTERM: SIGKILL after the grace

    async def scenario() -> None:
        first = ProcessTarget(command, tmp_path, grace=0.3)
        await first.apply(change(web=3))
        assert await first.observe("p", ["web", "batch"]) == {"web": 3, "batch": 0}
        pids = {i: c.pid for i, c in first.copies[("p", "web")].items()}
        again = ProcessTarget(command, tmp_path, grace=0.3)  # an actuator started after the first died
        assert await again.observe("p", ["web"]) == {"web": 3}
        await again.apply(change(web=1))
        await again.close()
        assert await again.observe("p", ["web"]) == {"web": 1} and again.copies[("p", "web")][0].pid == pids[0]
        assert all(start_time(pids[i]) is None for i in (1, 2))
        await again.stop_all("p")
        assert start_time(pids[0]) is None
        assert await ProcessTarget(command, tmp_path).observe("p", ["web"]) == {"web": 0}
        for child in first.copies[("p", "web")].values():
            if child.child is not None:
                child.child.wait()

    asyncio.run(scenario())
    assert (tmp_path / "p" / "web" / "0.log").exists()


def _until(target: ProcessTarget, app: str, check: Any, seconds: float = 10.0) -> Any:
    """Observe `app` of pool p (as the actuator's passes do) until `check(target)` holds."""
    async def wait() -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while not check(target):
            assert loop.time() < deadline, f"not within {seconds} s: {target.crashes}"
            await target.observe("p", [app])
            await asyncio.sleep(0.02)
    return wait()


def test_a_copy_that_dies_young_again_and_again_is_a_crash_loop_restarted_ever_later_and_not_counted(
        tmp_path: Path) -> None:
    from streams.decider.metrics import ActuatorMetrics

    target = ProcessTarget("sh -c 'exit 3'", tmp_path, start_seconds=5.0, max_backoff=1.0)
    metrics = ActuatorMetrics()
    target.instrument(metrics)

    def restarts() -> float:
        return metrics.registry.get_sample_value("tribunal_actuator_restarts_total", {"pool": "p", "app": "web"}) or 0

    async def scenario() -> None:
        await target.apply(change(web=1))  # the first start: not a restart, and the copy counts until it dies
        await _until(target, "web", lambda t: t.crashes[("p", "web")].get(0, None) is not None)
        assert target.crashes[("p", "web")][0].count == 1  # one quick death: an accident, started again at once
        await target.apply(change(web=1))
        assert restarts() == 1 and len(target.copies[("p", "web")]) == 1
        await _until(target, "web", lambda t: t.crashes[("p", "web")][0].count == 2)
        assert await target.observe("p", ["web"]) == {"web": 0}
        with pytest.raises(ActuationFailed) as failed:  # waiting out its back-off: not started, not put right
            await target.apply(change(web=1))
        why = failed.value.failed["web"]
        assert why == "crash loop: copy 0 exited with status 3 " + why.split("status 3 ")[1]
        assert "(2 in a row, restarts 0.5 s apart)" in why and 0 < failed.value.retry_after <= 0.5
        assert restarts() == 1 and target.copies[("p", "web")] == {}
        assert metrics.registry.get_sample_value("tribunal_actuator_restart_backoff_seconds",
                                                 {"pool": "p", "app": "web"}) == 0.5
        await asyncio.sleep(failed.value.retry_after)
        with pytest.raises(ActuationFailed) as again:  # started again, but not put right until it has run 5 s
            await target.apply(change(web=1))
        assert restarts() == 2 and again.value.failed["web"] == why and again.value.retry_after > 4
        await _until(target, "web", lambda t: t.crashes[("p", "web")][0].count == 3)
        assert target.crashes[("p", "web")][0].backoff == 1.0  # doubled, and no longer than max_backoff
        await target.apply(change(web=0))  # no longer wanted: the history goes with the copy
        assert target.crashes[("p", "web")] == {}
        await target.apply(change(web=1))  # wanted again: started at once
        assert restarts() == 2 and len(target.copies[("p", "web")]) == 1
        await target.stop_all("p")

    asyncio.run(scenario())


def test_a_copy_that_has_run_its_start_seconds_is_no_longer_crashing_and_one_that_dies_late_starts_at_once(
        tmp_path: Path) -> None:
    flag = tmp_path / "broken"
    flag.touch()
    target = ProcessTarget(f"sh -c 'test -e {flag} && exit 3; exec sleep 600'", tmp_path, start_seconds=1.0)

    async def scenario() -> None:
        await target.apply(change(web=1))
        await _until(target, "web", lambda t: t.crashes[("p", "web")].get(0, None) is not None)
        await target.apply(change(web=1))
        await _until(target, "web", lambda t: t.crashes[("p", "web")][0].count == 2)
        flag.unlink()  # the release fixed
        await asyncio.sleep(0.6)  # its back-off
        with pytest.raises(ActuationFailed):
            await target.apply(change(web=1))  # started again: runs, but has not yet run its second
        assert len(target.copies[("p", "web")]) == 1
        assert await target.observe("p", ["web"]) == {"web": 0}
        await _until(target, "web", lambda t: t.crashes[("p", "web")] == {}, seconds=5)
        assert await target.observe("p", ["web"]) == {"web": 1}
        await target.apply(change(web=1))  # nothing to do, nothing failing
        os.killpg(target.copies[("p", "web")][0].pid, signal.SIGKILL)  # dies after its start seconds: at once
        await _until(target, "web", lambda t: t.copies[("p", "web")] == {})
        assert target.crashes[("p", "web")][0].count == 0 and "was killed by SIGKILL after" in \
            target.crashes[("p", "web")][0].last
        await target.apply(change(web=1))
        assert await target.observe("p", ["web"]) == {"web": 1}
        await target.stop_all("p")

    asyncio.run(scenario())


def test_a_target_is_named_by_kind_or_by_module_and_says_what_it_lacks() -> None:
    assert build("exec", TargetOptions(command="true")).name == "exec"
    with pytest.raises(ConfigError, match="--url"):
        build("webhook", TargetOptions())
    with pytest.raises(ConfigError, match="unknown target"):
        build("kubernetes", TargetOptions())
    made: Any = build("tests.decider.test_targets:Custom", TargetOptions(command="x"))
    assert isinstance(made, Custom) and made.options.command == "x"


class Custom:
    name = "custom"

    def __init__(self, options: TargetOptions) -> None:
        self.options = options
