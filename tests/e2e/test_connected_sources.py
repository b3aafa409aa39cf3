"""Two Kafka sources connected into one keyed co-process, on real worker processes
with real SIGKILLs: the read_committed output equals a reference computed from the
inputs, record for record."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from kstream.infra.admin import Admin
from kstream.protocol.coordination import CoordinatorConfig
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner, RunningJob
from kstream.testing import Feeder, read_all, run_until_consumed, unique_name, wait_settled
from kstream.tools.spec import load_job

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

JOB = Path(__file__).with_name("connected_job.py")
PARTITIONS = 3
#: A multiple of PARTITIONS: value i (key i % KEYS) goes to partition i % PARTITIONS,
#: so each key's records of one side are in one partition, in a known order.
KEYS = 30


def _inputs(side: str, count: int) -> list[str]:
    step = 3 if side == "a" else 5
    return [f"k{i % KEYS} {i} {i % step + 1}" for i in range(count)]


def test_a_connected_co_process_over_two_sources_is_exactly_once_across_kills(
    bootstrap: str, tmp_path: Path
) -> None:
    admin = Admin(bootstrap)
    a_topic, b_topic, out_topic = unique_name("co-a"), unique_name("co-b"), unique_name("co-out")
    ones_topic, all_topic = unique_name("co-ones"), unique_name("co-all")
    admin.create_topics(
        {a_topic: PARTITIONS, b_topic: PARTITIONS, out_topic: 2, ones_topic: 1, all_topic: 2}
    )
    inputs = {"a": _inputs("a", 12_000), "b": _inputs("b", 8_000)}
    # Fed while the job runs, so that the kills hit work in flight on both sides.
    feeders = {
        "a": Feeder(bootstrap, a_topic, [v.encode() for v in inputs["a"]], PARTITIONS, 3000.0),
        "b": Feeder(bootstrap, b_topic, [v.encode() for v in inputs["b"]], PARTITIONS, 2000.0),
    }
    params = {
        "a": a_topic,
        "b": b_topic,
        "output": out_topic,
        "ones": ones_topic,
        "all": all_topic,
        "name": unique_name("connected"),
    }
    spec = f"{JOB}:job"
    runner = Runner(
        RunConfig(
            JobRef(spec, params),
            bootstrap,
            2,
            tmp_path / "state",
            checkpoints=CoordinatorConfig(interval=0.3),
        ),
        load_job(spec, params),
        say=lambda _: None,
    )
    runner.prepare()

    def feed(_: RunningJob) -> None:
        for f in feeders.values():
            f.feed()

    kills = run_until_consumed(
        runner,
        a_topic,
        feeders["a"].ends,
        also={b_topic: feeders["b"].ends},
        kills=2,
        seed=7,
        say=lambda _: None,
        chaos=feed,
    )
    assert kills == 2
    assert runner.stats.recoveries >= 2
    wait_settled(bootstrap, out_topic)
    wait_settled(bootstrap, ones_topic)
    wait_settled(bootstrap, all_topic)

    # The reference: per key and side, the inputs in their partition's order.
    expected: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for side, values in inputs.items():
        for v in values:
            key, seq, amount = v.split(" ")
            expected[key, side].append((int(seq), int(amount)))
    amount_of = {(s, seq): amount for (_, s), rows in expected.items() for seq, amount in rows}

    outputs: dict[str, list[str]] = defaultdict(list)
    for r in read_all(bootstrap, out_topic):  # partition order; a key is in one partition
        outputs[(r.key or b"").decode()].append((r.value or b"").decode())
    assert sorted(outputs) == sorted({k for k, _ in expected})
    for key, rows in outputs.items():
        seen: dict[str, list[tuple[int, int]]] = {"a": [], "b": []}
        amount_sum = 0
        for position, row in enumerate(rows, start=1):
            side, n, seq, total, total_amount = row.split(" ")
            seen[side].append((int(seq), amount_of[side, int(seq)]))
            amount_sum += amount_of[side, int(seq)]
            # Each side's own count, and the totals the two sides share, are
            # exactly what one pass over this interleaving gives: no record was
            # applied twice or lost, on either side.
            assert int(n) == len(seen[side]), (key, row)
            assert (int(total), int(total_amount)) == (position, amount_sum), (key, row)
        assert seen["a"] == expected[key, "a"], key
        assert seen["b"] == expected[key, "b"], key

    # The side output: every record of amount 1, once, with each key's records of
    # one side in input order.
    ones: dict[tuple[str, str], list[int]] = defaultdict(list)
    for r in read_all(bootstrap, ones_topic):
        side, seq = (r.value or b"").decode().split(" ")
        ones[(r.key or b"").decode(), side].append(int(seq))
    assert ones == {
        k: [seq for seq, amount in rows if amount == 1]
        for k, rows in expected.items()
        if any(amount == 1 for _, amount in rows)
    }

    # The union of both topics: every input record exactly once.
    united = sorted((r.value or b"").decode() for r in read_all(bootstrap, all_topic))
    assert united == sorted(f"{side} {v}" for side, values in inputs.items() for v in values)
