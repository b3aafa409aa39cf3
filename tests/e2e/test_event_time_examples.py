"""The four event-time examples on real worker processes, against their references.

Each example's generated input (out of order within its bound, with planted
too-late records and a stretch of event time with nothing on one partition)
is written to Kafka, the example job runs with 2 workers while 2 random
workers are SIGKILLed, and the output read read_committed must be the
reference's exactly: every final result once, no missing one, no wrong one,
and the exact late set. A last record of a pad key far ahead in event time
on every partition moves the watermark past every window and join bound, so
everything the reference holds must have been emitted.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from kstream.audit.run import run_audit
from kstream.dataflow.job import Job
from kstream.dataflow.operators.windows import Sliding, Tumbling
from kstream.dataflow.serde import serde
from kstream.examples import (
    inputs,
    orders_payments,
    references,
    user_sessions,
    visit_enrichment,
    windowed_counts,
)
from kstream.examples.event_time import encode
from kstream.examples.references import Record
from kstream.infra.admin import Admin
from kstream.protocol.barrier import Alignment
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.names import dead_letter_topic
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner
from kstream.testing import produce, read_all, run_until_consumed, unique_name, wait_settled

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PARTITIONS = 3
PAD = "~pad"
#: How far past the input's last timestamp the pad records are: more than any
#: window, gap, join bound or out-of-orderness of the examples.
PAD_AHEAD_MS = 600_000
#: The inputs' event time moved to the last whole day before now: results carry
#: event time as their Kafka timestamp, and the generators' (November 2023)
#: would be deleted by the topics' retention. Whole days keep window alignment.
DAY_MS = 86_400_000
SHIFT_MS = (int(time.time() * 1000) - inputs.START_MS) // DAY_MS * DAY_MS


def shifted(records: list[Record]) -> list[Record]:
    return [(p, ts + SHIFT_MS, key, value) for p, ts, key, value in records]


#: The windows' jobs' out-of-orderness bound, tighter than their inputs' disorder.
JOB_OOO_MS = 300


def padded(records: list[Record], last: int) -> list[Record]:
    """`records` and one pad record per partition at `last` + PAD_AHEAD_MS, at the end."""
    return records + [(p, last + PAD_AHEAD_MS, PAD, "pad") for p in range(PARTITIONS)]


def write(bootstrap: str, topic: str, records: list[Record]) -> dict[int, int]:
    """Write each partition's records in order; the end offset of each partition."""
    by_partition: dict[int, list[tuple[bytes, bytes]]] = defaultdict(list)
    for record in records:
        by_partition[record[0]].append(encode(record))
    for partition, rows in by_partition.items():
        produce(bootstrap, topic, rows, partition=partition)
    return {p: len(rows) for p, rows in by_partition.items()}


def run_job(
    bootstrap: str,
    tmp_path: Path,
    job: Job,
    spec: str,
    params: dict[str, str],
    ends: dict[str, dict[int, int]],
    seed: int,
    alignment: Alignment = Alignment.ALIGNED,
) -> None:
    runner = Runner(
        RunConfig(
            JobRef(spec, params),
            bootstrap,
            2,
            tmp_path / "state",
            checkpoints=CoordinatorConfig(interval=0.5, timeout=60.0),
            alignment=alignment,
        ),
        job,
        say=lambda _: None,
    )
    runner.prepare()
    (first, first_ends), *others = ends.items()
    messages: list[str] = []
    kills = run_until_consumed(
        runner,
        first,
        first_ends,
        also=dict(others),
        kills=2,
        seed=seed,
        say=messages.append,
        timeout=600,
    )
    assert kills == 2, messages
    assert read_all(bootstrap, dead_letter_topic(job.name)) == []


def outputs(bootstrap: str, topic: str) -> list[Any]:
    wait_settled(bootstrap, topic)
    return [json.loads(r.value or b"null") for r in read_all(bootstrap, topic)]


def real(values: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [v for v in values if v["key"] != PAD]


def late_set(values: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    """Late outputs as (side, timestamp, key, value); side None for windows."""
    return Counter((v.get("side"), v["timestamp"], v["key"], v["value"]["value"]) for v in values)


def ref_late(records: list[Record], side: str | None = None) -> Counter[tuple[Any, ...]]:
    return Counter((side, ts, key, value) for _, ts, key, value in records)


def tumbling_params(
    src: str, dst: str, late: str, name: str, lateness: int, **more: str
) -> dict[str, str]:
    """Parameters of `kstream.examples.windowed_counts` with tumbling windows, the
    job's out-of-orderness (`JOB_OOO_MS`) and `lateness` ms; `more` adds or overrides."""
    return {
        "input": src, "output": dst, "late": late, "name": name, "window": "tumbling",
        "lateness": str(lateness), "ooo": str(JOB_OOO_MS), **more,
    }  # fmt: skip


def topics(bootstrap: str, run: str, *names: str, compact: tuple[str, ...] = ()) -> list[str]:
    made = [f"{run}-{n}" for n in names]
    admin = Admin(bootstrap)
    admin.create_topics({t: PARTITIONS for t in made if t.rsplit("-", 1)[1] not in compact})
    tables = {t: PARTITIONS for t in made if t.rsplit("-", 1)[1] in compact}
    if tables:
        admin.create_topics(tables, {"cleanup.policy": "compact"})
    return made


@pytest.mark.parametrize(
    ("window", "lateness", "alignment"),
    [
        ("tumbling", 1_500, Alignment.ALIGNED),
        ("sliding", 0, Alignment.ALIGNED),
        # Recorded channel state replays timed records with their watermarks.
        ("tumbling", 1_500, Alignment.UNALIGNED),
    ],
    ids=["tumbling", "sliding", "tumbling-unaligned"],
)
def test_windowed_counts_are_the_reference_across_worker_kills(
    bootstrap: str, tmp_path: Path, window: str, lateness: int, alignment: Alignment
) -> None:
    run = unique_name(f"ex-counts-{window}")
    src, dst, late = topics(bootstrap, run, "in", "out", "late")
    records = shifted(inputs.keyed_events(7, partitions=PARTITIONS, allowed_lateness=lateness))
    ends = write(bootstrap, src, padded(records, max(r[1] for r in records)))
    params = {
        "input": src,
        "output": dst,
        "late": late,
        "name": f"c-{run}",
        "window": window,
        "lateness": str(lateness),
        # Tighter than the input's disorder (1 s): many records are late, within
        # the allowed lateness (updates) or beyond it.
        "ooo": str(JOB_OOO_MS),
    }
    job = windowed_counts.job(params)
    spec = "kstream.examples.windowed_counts:job"
    run_job(bootstrap, tmp_path, job, spec, params, {src: ends}, 3, alignment)

    assigner: Tumbling | Sliding = windowed_counts.assigner(params)
    ref = references.windowed_counts(records, assigner, JOB_OOO_MS, lateness)
    got = real(outputs(bootstrap, dst))
    assert references.final_results(got) == ref.results
    firsts = Counter((o["key"], o["start"], o["end"]) for o in got if not o["update"])
    assert all(n == 1 for n in firsts.values()), "a window fired twice"
    assert len(firsts) == len(ref.results)
    if lateness == 0:
        assert not any(o["update"] for o in got)
    assert late_set(outputs(bootstrap, late)) == ref_late(ref.late)

    if lateness == 0:
        # The same verdict from the audit: the output topic holds exactly these records.
        dumps = serde("json").dumps
        expected = tmp_path / "expected.jsonl"
        expected.write_text(
            "".join(
                json.dumps(
                    {
                        "key": k,  # each result is written with its key
                        "value": dumps(
                            {"key": k, "start": w.start, "end": w.end, "value": n, "update": False}
                        ).decode(),
                    }
                )
                + "\n"
                for (k, w), n in ref.results.items()
            )
        )
        report = run_audit(
            input_topic=src,
            output_topic=dst,
            bootstrap=bootstrap,
            check="expected",
            expected=expected,
            master="local[1]",
            report_dir=tmp_path / "report",
            progress=False,
        )
        assert report.clean


def test_user_sessions_are_the_reference_across_worker_kills(
    bootstrap: str, tmp_path: Path
) -> None:
    run = unique_name("ex-sessions")
    src, dst, late = topics(bootstrap, run, "in", "out", "late")
    lateness = 20_000
    records = shifted(inputs.clicks(5, partitions=PARTITIONS, allowed_lateness=lateness))
    ends = write(bootstrap, src, padded(records, max(r[1] for r in records)))
    params = {
        "input": src,
        "output": dst,
        "late": late,
        "name": f"s-{run}",
        "lateness": str(lateness),
        "ooo": str(JOB_OOO_MS),  # the clicks are out of order by up to 5 s
    }
    job = user_sessions.job(params)
    run_job(bootstrap, tmp_path, job, "kstream.examples.user_sessions:job", params, {src: ends}, 4)

    ref = references.sessions(records, 30_000, JOB_OOO_MS, lateness)
    got = real(outputs(bootstrap, dst))
    final = references.final_results(got, merging=True)
    assert {kw: (n, tuple(pages)) for kw, (n, pages) in final.items()} == ref.results
    assert late_set(outputs(bootstrap, late)) == ref_late(ref.late)


def test_orders_joined_with_payments_are_the_reference_across_worker_kills(
    bootstrap: str, tmp_path: Path
) -> None:
    run = unique_name("ex-join")
    orders_t, payments_t, dst, late = topics(bootstrap, run, "orders", "payments", "out", "late")
    orders, payments = map(shifted, inputs.orders_and_payments(9, partitions=PARTITIONS))
    last = max(r[1] for r in orders + payments)
    ends = {
        orders_t: write(bootstrap, orders_t, padded(orders, last)),
        payments_t: write(bootstrap, payments_t, padded(payments, last)),
    }
    params = {
        "orders": orders_t,
        "payments": payments_t,
        "output": dst,
        "late": late,
        "name": f"j-{run}",
    }
    job = orders_payments.job(params)
    run_job(bootstrap, tmp_path, job, "kstream.examples.orders_payments:job", params, ends, 5)

    ref = references.interval_join(orders, payments, 0, 60_000, orders_payments.OUT_OF_ORDERNESS_MS)
    pairs = Counter(
        (o["key"], o["left"]["value"], o["right"]["value"], o["timestamp"])
        for o in real(outputs(bootstrap, dst))
    )
    assert set(pairs) == ref.pairs
    assert all(n == 1 for n in pairs.values()), "a pair emitted twice"
    assert late_set(outputs(bootstrap, late)) == ref_late(ref.late_left, "left") + ref_late(
        ref.late_right, "right"
    )


def test_visits_enriched_from_a_profiles_table_are_the_reference_across_worker_kills(
    bootstrap: str, tmp_path: Path
) -> None:
    run = unique_name("ex-enrich")
    visits_t, profiles_t, dst, late = topics(
        bootstrap, run, "visits", "profiles", "out", "late", compact=("profiles",)
    )
    profiles, visits = map(shifted, inputs.profiles_and_visits(13, partitions=PARTITIONS))
    last = max(r[1] for r in profiles + visits)
    ends = {
        visits_t: write(bootstrap, visits_t, padded(visits, last)),
        profiles_t: write(bootstrap, profiles_t, padded(profiles, last)),
    }
    params = {
        "visits": visits_t,
        "profiles": profiles_t,
        "output": dst,
        "late": late,
        "name": f"e-{run}",
    }
    job = visit_enrichment.job(params)
    run_job(bootstrap, tmp_path, job, "kstream.examples.visit_enrichment:job", params, ends, 6)

    ref = references.enrichment(visits, profiles, visit_enrichment.OUT_OF_ORDERNESS_MS)
    rows = Counter(
        (
            o["key"],
            o["value"]["value"],
            None if o["table"] is None else o["table"]["value"],
            o["timestamp"],
        )
        for o in real(outputs(bootstrap, dst))
    )
    assert set(rows) == ref.rows
    assert all(n == 1 for n in rows.values()), "a row emitted twice"
    assert late_set(outputs(bootstrap, late)) == ref_late(ref.late_stream, "stream") + ref_late(
        ref.late_table, "table"
    )
