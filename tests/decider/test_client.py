"""The decider's client live: reports, policies and observations written; decisions heard, typed, at most once
per process; a client that starts late knows the desired instances at once, from `pool-instances`; a pool whose
decisions carry what they changed (issue 49) keeps the same desired state."""

from __future__ import annotations

import asyncio
from typing import Any

from schemas.decisions import ScalingDecision
from streams import kafka
from streams.decider import DeciderClient
from tests.decider.conftest import Loop, policy
from tests.helpers import eventually, tribunal


async def following(client: DeciderClient) -> tuple[list[ScalingDecision], asyncio.Task[Any]]:
    """The decisions `client` hears from now on, and its running follower, once it has caught up."""
    heard: list[ScalingDecision] = []
    client.on_decision(heard.append)
    ready = asyncio.Event()
    task = asyncio.create_task(client.run(ready))
    await asyncio.wait_for(ready.wait(), 60)
    return heard, task


def test_a_pool_whose_decisions_carry_what_they_changed_has_the_same_desired_state(loop: Loop) -> None:
    """Before the test below, which forges records on the loop's topics (`replay --verify` reads them all)."""
    async def scenario() -> None:
        async with DeciderClient(loop.settings, "c2") as client:
            heard, follower = await following(client)
            # Each written once the one before is decided: the three go to three topics, whose records the worker
            # may fold in any order between them.
            await client.apply_policy(policy().model_copy(update={"decisions": "changes"}))
            await eventually(lambda: len(heard) >= 1, "the policy's decision")
            await client.report("web", 90)
            await eventually(lambda: len(heard) >= 2, "the report's decision")
            await client.observe("batch", 2)
            await eventually(lambda: len(heard) >= 3, "the policy's decision, the report's and the observation's")
            assert [(d.form, dict(d.instances)) for d in heard] == [
                ("changes", {"web": 1, "batch": 1}), ("changes", {"web": 5}), ("changes", {"batch": 2})]
            assert client.desired().instances == {"web": 5, "batch": 2} and client.desired().seq == 3
            verified = await asyncio.to_thread(tribunal, "audit", "replay", "--from-kafka", "--verify", env=loop.env)
            assert "agree" in verified.stdout, verified.stdout
            follower.cancel()
        async with DeciderClient(loop.settings, "c2", group_id=None) as late:
            _, follower = await following(late)
            assert (late.desired().instances, late.desired().seq) == ({"web": 5, "batch": 2}, 3)
            follower.cancel()

    asyncio.run(scenario())


def test_the_client_writes_hears_each_decision_once_and_a_late_one_starts_from_the_desired_state(loop: Loop) -> None:
    async def scenario() -> None:
        async with DeciderClient(loop.settings, "c1") as client:
            heard, follower = await following(client)
            assert client.desired().seq == 0
            await client.apply_policy(policy())
            await eventually(lambda: len(heard) >= 1, "the policy's decision")  # before the report: another topic
            await client.report("web", 90)
            await eventually(lambda: len(heard) >= 2, "the policy's decision and the report's")
            assert [(d.seq, d.outcome, d.trigger.kind) for d in heard] == [(1, "policy", "policy"),
                                                                          (2, "scaled", "metric")]
            assert client.desired().instances == {"web": 5, "batch": 1} and client.desired().seq == 2
            await client.observe("web", 3)
            await eventually(lambda: len(heard) >= 3, "the observation's decision")
            assert heard[2].trigger.kind == "observed" and [d.seq for d in heard] == [1, 2, 3]
            assert client.desired().instances == {"web": 3, "batch": 1}
            verified = await asyncio.to_thread(tribunal, "audit", "replay", "--from-kafka", "--verify", env=loop.env)
            assert "agree" in verified.stdout, verified.stdout  # pool-instances among what is compared

            producer = kafka.producer(loop.settings.kafka_bootstrap)
            await producer.start()
            topic = loop.settings.topic("scaling-decisions")
            await producer.send_and_wait(topic, b"not json", key=b"c1")
            await producer.send_and_wait(topic, heard[1].model_dump_json().encode(), key=b"c1")  # a duplicate
            await producer.send_and_wait(topic, heard[2].model_dump_json().encode(), key=b"c1")  # and the last
            await producer.stop()
            await eventually(lambda: client.unreadable == 1, "the unreadable record counted")
            await asyncio.sleep(0.5)
            assert [d.seq for d in heard] == [1, 2, 3] and client.desired().seq == 3
            follower.cancel()

        async with DeciderClient(loop.settings, "c1", group_id=None) as late:
            replayed, follower = await following(late)
            assert (late.desired().instances, late.desired().seq) == ({"web": 3, "batch": 1}, 3)
            await asyncio.sleep(1.0)
            assert replayed == []  # started from the desired state: no decision read again
            await late.report("batch", 90)
            await eventually(lambda: len(replayed) >= 1, "the next decision")
            assert replayed[0].seq == 4 and late.desired().instances == {"web": 3, "batch": 5}
            follower.cancel()

    asyncio.run(scenario())
