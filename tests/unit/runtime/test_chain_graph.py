"""`kstream.runtime.worker.chain` for graph stages: a co-process over two inputs sharing
the key's state, and side outputs, compiled and driven without Kafka."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kstream import Job, KafkaSink, KafkaSource, RecordError, Tagged, ValueState
from kstream.dataflow.graph import Node
from kstream.runtime.state.store import StateStore
from kstream.runtime.worker.chain import End, compile_chain, has_process, input_pushes


class Ends:
    """Recording sinks and edges by name, in the order the chain opened them."""

    def __init__(self) -> None:
        self.received: dict[str, list[Any]] = {}

    def open(self, node: Node) -> End:
        got: list[Any] = []
        target = node.edge_to
        self.received[node.name or f"edge to {target.index if target else None}"] = got
        return got.append


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "db")
    yield s
    s.close()


def first(value: str) -> str:
    return value.split(":")[0]


def side(name: str) -> Any:
    def fn(key: str, value: str, state: ValueState) -> Iterator[Any]:
        seen = (*state.get(()), name)
        state.set(seen)
        yield f"{key}:{''.join(seen)}"
        if name == "b":
            yield Tagged("from-b", value)

    return fn


def connected() -> Job:
    j = Job("co")
    a = j.source(KafkaSource("a")).key_by(first)
    b = j.source(KafkaSource("b")).key_by(first)
    out = a.connect(b).process(side("a"), side("b"), name="both")
    out.sink(KafkaSink("out"))
    out.side_output("from-b").map(str.upper).sink(KafkaSink("side"))
    return j


def compile_stage(job: Job, index: int, state: StateStore) -> tuple[list[Any], Ends]:
    ends = Ends()
    stage = job.stages[index]
    push = compile_chain(
        stage.root, stage_index=index, state=state, open_sink=ends.open, open_edge=ends.open
    )
    return input_pushes(stage, push), ends


def test_both_sides_share_the_keys_state_and_each_calls_its_own_function(
    store: StateStore,
) -> None:
    j = connected()
    assert has_process(j.stages[2].root)
    (on_a, on_b), ends = compile_stage(j, 2, store)
    on_a("x", "x:1")
    on_b("x", "x:2")
    on_b("y", "y:1")
    on_a("x", "x:3")
    assert ends.received["kafka:out"] == ["x:a", "x:ab", "y:b", "x:aba"]
    assert ends.received["kafka:side"] == ["X:2", "Y:1"]


def test_the_shared_state_survives_a_flush_and_reopen(tmp_path: Path) -> None:
    j = connected()
    db = tmp_path / "db"
    s = StateStore(db)
    (on_a, on_b), _ = compile_stage(j, 2, s)
    on_a("x", "x:1")
    on_b("x", "x:2")
    s.flush()
    s.close()
    s = StateStore(db)
    (on_a, _), ends = compile_stage(j, 2, s)
    on_a("x", "x:3")
    s.close()
    assert ends.received["kafka:out"] == ["x:aba"]


def test_a_union_stage_pushes_every_input_the_same_way(store: StateStore) -> None:
    j = Job("u")
    a = j.source(KafkaSource("a")).key_by(first)
    b = j.source(KafkaSource("b")).key_by(first)
    a.union(b).process(side("a"), name="count").sink(KafkaSink("out"))
    pushes, ends = compile_stage(j, 2, store)
    assert len(pushes) == 2
    pushes[0]("x", "x:1")
    pushes[1]("x", "x:2")
    assert ends.received["kafka:out"] == ["x:a", "x:aa"]


def test_a_tag_nobody_consumes_is_a_record_error_not_a_silent_loss(store: StateStore) -> None:
    j = Job("t")

    def tagging(key: str, value: str, state: ValueState) -> Iterator[Any]:
        yield value
        yield Tagged("nowhere", value)

    out = j.source(KafkaSource("a")).key_by(first).process(tagging, name="tagging")
    out.sink(KafkaSink("out"))
    out.side_output("elsewhere").sink(KafkaSink("side"))
    ends = Ends()
    push = compile_chain(
        j.stages[1].root, stage_index=1, state=store, open_sink=ends.open, open_edge=ends.open
    )
    with pytest.raises(RecordError, match=r"tagging yielded Tagged\('nowhere', \.\.\.\) but no"):
        push("x", "x:1")
    assert ends.received["kafka:out"] == ["x:1"]
    assert ends.received["kafka:side"] == []


def test_without_side_outputs_a_tagged_value_is_refused_too(store: StateStore) -> None:
    j = Job("t")
    j.source(KafkaSource("a")).key_by(first).process(
        lambda k, v, s: [Tagged("x", v)], name="p"
    ).sink(KafkaSink("out"))
    ends = Ends()
    push = compile_chain(
        j.stages[1].root, stage_index=1, state=store, open_sink=ends.open, open_edge=ends.open
    )
    with pytest.raises(RecordError, match="no side_output"):
        push("k", "v")
    assert ends.received["kafka:out"] == []


def test_fan_out_reaches_every_sink_and_edge_in_order(store: StateStore) -> None:
    j = Job("fan")
    s = j.source(KafkaSource("a")).map(str.strip)
    s.sink(KafkaSink("raw"))
    s.key_by(first).process(side("a")).sink(KafkaSink("keyed"))
    s.rebalance().sink(KafkaSink("spread"))
    ends = Ends()
    push = compile_chain(
        j.stages[0].root, stage_index=0, state=None, open_sink=ends.open, open_edge=ends.open
    )
    push(" x:1 ")
    push(" y:2")
    assert ends.received == {
        "kafka:raw": ["x:1", "y:2"],
        "edge to 1": ["x:1", "y:2"],
        "edge to 2": ["x:1", "y:2"],
    }
