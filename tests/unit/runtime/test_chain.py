"""`kstream.runtime.worker.chain`: a stage's operators, compiled and driven without Kafka.

Jobs are built with the public API; each stage's chain is compiled with
recording ends (a list per sink or edge) and values are pushed through it.
Keyed state lives in a real `StateStore` (a local RocksDB), as in a worker.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.dataflow.graph import Node
from kstream.dataflow.job import Job
from kstream.dataflow.state.api import ValueState
from kstream.errors import ConfigurationError
from kstream.runtime.state.store import StateStore, key_bytes
from kstream.runtime.worker.chain import End, compile_chain, has_process


class Ends:
    """Recording sinks and edges, in the order the chain opened them."""

    def __init__(self) -> None:
        self.opened: list[Node] = []
        self.received: list[list[Any]] = []

    def open(self, node: Node) -> End:
        self.opened.append(node)
        got: list[Any] = []
        self.received.append(got)
        return got.append


def compile_stage(job: Job, index: int, state: StateStore | None = None) -> tuple[Any, Ends]:
    ends = Ends()
    push = compile_chain(
        job.stages[index].root,
        stage_index=index,
        state=state,
        open_sink=ends.open,
        open_edge=ends.open,
    )
    return push, ends


def words(line: str) -> list[str]:
    return line.split()


def count(key: Any, value: Any, state: ValueState) -> Iterator[tuple[Any, int]]:
    n = state.get(0) + 1
    state.set(n)
    yield key, n


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "db")
    yield s
    s.close()


def wordcount() -> Job:
    job = Job("wc")
    (
        job.source(KafkaSource("lines"))
        .map(str.lower)
        .filter(lambda line: not line.startswith("#"))
        .flat_map(words)
        .key_by(lambda w: w)
        .process(count)
        .sink(KafkaSink("counts"))
    )
    return job


def test_map_filter_flat_map_reach_the_edge_in_order() -> None:
    push, ends = compile_stage(wordcount(), 0)
    assert [n.kind for n in ends.opened] == ["edge"]
    for line in ["The cat", "# a comment", "", "SAT the"]:
        push(line)
    assert ends.received == [["the", "cat", "sat", "the"]]


def test_process_keeps_state_per_key_and_emits_to_the_sink(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    push, ends = compile_stage(wordcount(), 1, store)
    assert [n.kind for n in ends.opened] == ["sink"]
    for w in ["the", "cat", "the", "the"]:
        push(w, w)
    assert ends.received == [[("the", 1), ("cat", 1), ("the", 2), ("the", 3)]]
    store.flush()
    store.close()
    # Kept under the stage and operator name, per key's bytes: what snapshots hold.
    reopened = StateStore(tmp_path / "db")
    state = reopened.value_state("s1.process")
    state.key = key_bytes("the")
    assert state.get() == 3
    state.key = key_bytes("cat")
    assert state.get() == 1
    reopened.close()


def test_a_process_that_returns_none_emits_nothing(store: StateStore) -> None:
    job = Job("j")
    job.source(KafkaSource("in")).key_by(len).process(lambda k, v, s: None).sink(KafkaSink("o"))
    push, ends = compile_stage(job, 1, store)
    push(1, "x")
    assert ends.received == [[]]


def test_a_branching_stage_feeds_every_child_in_order_and_numbers_sinks_in_compile_order() -> None:
    job = Job("j")
    s = job.source(KafkaSource("in"))
    s.map(lambda v: v + 1).sink(KafkaSink("plus"))
    s.filter(lambda v: v % 2 == 0).sink(KafkaSink("even"))
    s.rebalance().sink(KafkaSink("after"))
    push, ends = compile_stage(job, 0)
    assert [(n.kind, n.name) for n in ends.opened] == [
        ("sink", "kafka:plus"),
        ("sink", "kafka:even"),
        ("edge", ""),
    ]
    for v in [1, 2, 3, 4]:
        push(v)
    assert ends.received == [[2, 3, 4, 5], [2, 4], [1, 2, 3, 4]]


def test_a_user_error_passes_out_of_push_unchanged() -> None:
    job = Job("j")
    job.source(KafkaSource("in")).map(lambda v: 10 // v).sink(KafkaSink("o"))
    push, ends = compile_stage(job, 0)
    push(5)
    with pytest.raises(ZeroDivisionError):
        push(0)
    push(2)
    assert ends.received == [[2, 5]]


def test_has_process_finds_a_process_node_only_where_there_is_one() -> None:
    job = wordcount()
    assert not has_process(job.stages[0].root)
    assert has_process(job.stages[1].root)


def test_an_unknown_operator_kind_is_refused() -> None:
    bad = Node("source", children=[Node("window")])  # type: ignore[arg-type]
    ends = Ends()
    with pytest.raises(ConfigurationError, match="unknown operator kind window"):
        compile_chain(bad, stage_index=0, state=None, open_sink=ends.open, open_edge=ends.open)
