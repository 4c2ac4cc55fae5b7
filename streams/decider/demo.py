"""`tribunal demo`: the loop closed in a minute (load, decision, instances, observed), on a running stack.

Pool `demo` gets a two-app policy; an actuator with the `process` target keeps `sleep` copies of each app on
this machine; a load curve goes through `DeciderClient.report` (web climbs, holds, falls; batch stays busy),
and part way one of web's copies is killed, to show it put back. At the end the copies stop and the CLI writes
the pool's report, whose first figure draws load, decided and running instances on one time axis.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from schemas.policy import DeciderPolicy
from streams.decider.actuator import Actuator
from streams.decider.client import DeciderClient
from streams.decider.targets.process import ProcessTarget
from streams.errors import TribunalError
from streams.settings import Settings

SPEC = [{"Metrical": [0, 20], "Number": -10}, {"Metrical": [20, 40], "Number": -1},
        {"Metrical": [40, 60], "Number": 0}, {"Metrical": [60, 80], "Number": 1},
        {"Metrical": [80, 100], "Number": 2}]
APPS = ("web", "batch")


def policy(version: str) -> DeciderPolicy:
    """Ten instances between web (priority 1) and batch (priority 2); busy apps grow by one or two a report, an
    idle one gives all but its minimum back at once."""
    return DeciderPolicy.model_validate({
        "kind": "decider", "version": version, "capacity": 10, "initial": {"web": 1, "batch": 1},
        "apps": [{"App": "web", "Priority": 1, "MinNum": 1, "Spec": SPEC, "release": "eager"},
                 {"App": "batch", "Priority": 2, "MinNum": 1, "Spec": SPEC, "release": "eager"}]})


def load_at(fraction: float) -> dict[str, float]:
    """The curve: web 30 rising to 95 by a third of the run, held, then 10 from 60%; batch at 70 throughout."""
    web = 30 + 65 * min(1.0, fraction * 3) if fraction < 0.6 else 10.0
    return {"web": round(web, 1), "batch": 70.0}


async def run(settings: Settings, seconds: float, pool: str, state_dir: Path, say: Callable[[str], None]) -> None:
    target = ProcessTarget("sleep 3600", state_dir, grace=1.0)
    actuator = Actuator(settings, pool, target, interval=0.2, election=False)
    ready = asyncio.Event()
    actuating = asyncio.create_task(actuator.run(ready))
    try:
        await asyncio.wait_for(ready.wait(), 60)
        async with DeciderClient(settings, pool) as client:
            await client.apply_policy(policy(f"demo-{int(time.time())}"))
            await _decided(actuator)
            loop = asyncio.get_running_loop()
            start, killed = loop.time(), False
            while (elapsed := loop.time() - start) < seconds:
                load = load_at(elapsed / seconds)
                for app, metrical in load.items():
                    await client.report(app, metrical, pool)
                if not killed and elapsed >= 0.45 * seconds:
                    killed = _kill_one(target, pool, "web", say)
                decided = actuator.client.desired(pool).instances
                running = await target.observe(pool, APPS)
                say(f"{elapsed:5.1f} s  load " + "  ".join(f"{a} {load[a]:5.1f}" for a in APPS)
                    + "  | decided " + "  ".join(f"{a} {decided.get(a, 0):2d}" for a in APPS)
                    + "  | running " + "  ".join(f"{a} {running[a]:2d}" for a in APPS))
                await asyncio.sleep(1.0)
    finally:
        actuator.stop()
        await asyncio.gather(actuating, return_exceptions=True)
        await target.stop_all(pool)


async def _decided(actuator: Actuator, timeout: float = 30.0) -> None:
    """Until the policy's decision arrives: no worker, no decision (say so rather than wait forever)."""
    deadline = time.monotonic() + timeout
    while actuator.client.desired(actuator.pool).seq == 0:
        if time.monotonic() > deadline:
            raise TribunalError(f"no decision for pool {actuator.pool} within {timeout:g} s: is a worker running "
                                "(`make run` in another shell)?")
        await asyncio.sleep(0.1)


def _kill_one(target: ProcessTarget, pool: str, app: str, say: Callable[[str], None]) -> bool:
    copies = target.copies.get((pool, app), {})
    if not copies:
        return False
    index = max(copies)
    os.kill(copies[index].pid, signal.SIGKILL)
    say(f"         killed copy {index} of {app} (pid {copies[index].pid}): the actuator puts it back")
    return True
