"""Keyed operators through the compiled chain: named state in `process`, and
`KeyedStream.reduce`, `.aggregate` and `.count`, with state in a real RocksDB."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.dataflow.job import Job
from kstream.dataflow.state.api import KeyedContext
from kstream.dataflow.stream import KeyedStream
from kstream.runtime.state.store import StateStore
from kstream.runtime.worker.chain import compile_chain


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "db")
    yield s
    s.close()


def run(keyed: KeyedStream, job: Job, store: StateStore, values: list[Any]) -> list[Any]:
    """Push `values` (keyed by their first element) through stage 1; what reaches its sink."""
    out: list[Any] = []
    push = compile_chain(
        job.stages[1].root,
        stage_index=1,
        state=store,
        open_sink=lambda _: out.append,
        open_edge=lambda _: out.append,
    )
    for i, v in enumerate(values):
        push(v[0], v)
        if i % 2:
            store.flush()  # results must not depend on when state is flushed
    return out


def keyed_job() -> tuple[Job, KeyedStream]:
    job = Job("j")
    return job, job.source(KafkaSource("in")).key_by(lambda v: v[0])


def test_reduce_emits_the_running_reduction_per_key(store: StateStore) -> None:
    job, keyed = keyed_job()
    keyed.reduce(lambda a, b: (a[0], a[1] + b[1])).sink(KafkaSink("out"))
    got = run(keyed, job, store, [("a", 1), ("b", 5), ("a", 2), ("a", 3)])
    assert got == [("a", ("a", 1)), ("b", ("b", 5)), ("a", ("a", 3)), ("a", ("a", 6))]


def test_aggregate_starts_from_a_fresh_copy_of_initial(store: StateStore) -> None:
    job, keyed = keyed_job()

    def add(acc: list[int], v: tuple[str, int]) -> list[int]:
        acc.append(v[1])
        return acc

    keyed.aggregate([], add).sink(KafkaSink("out"))
    got = run(keyed, job, store, [("a", 1), ("b", 2), ("a", 3)])
    assert got == [("a", [1]), ("b", [2]), ("a", [1, 3])]


def test_count_counts_per_key(store: StateStore) -> None:
    job, keyed = keyed_job()
    keyed.count().sink(KafkaSink("out"))
    got = run(keyed, job, store, [("a",), ("b",), ("a",), ("a",), ("b",)])
    assert got == [("a", 1), ("b", 1), ("a", 2), ("a", 3), ("b", 2)]


def test_process_uses_named_map_list_and_reducing_state(store: StateStore) -> None:
    job, keyed = keyed_job()

    def sessionize(key: str, value: tuple[str, str], ctx: KeyedContext) -> Iterator[Any]:
        seen = ctx.map("seen")
        seen.put(value[1], seen.get(value[1], 0) + 1)
        ctx.list("order").append(value[1])
        total = ctx.reducing("total", lambda a, b: a + b)
        total.add(1)
        ctx.set(value[1])  # the default value state still works
        yield key, dict(seen.items()), list(ctx.list("order")), total.get()

    keyed.process(sessionize).sink(KafkaSink("out"))
    got = run(keyed, job, store, [("a", "x"), ("a", "y"), ("b", "x"), ("a", "x")])
    assert got == [
        ("a", {"x": 1}, ["x"], 1),
        ("a", {"x": 1, "y": 1}, ["x", "y"], 2),
        ("b", {"x": 1}, ["x"], 1),
        ("a", {"x": 2, "y": 1}, ["x", "y", "x"], 3),
    ]
    ctx = store.context("s1.process")
    ctx.key = b"a"
    assert ctx.get() == "x"
