"""A stage's fused operator chain, compiled to nested closures.

`compile_chain` turns the operator tree of one stage (`kstream.dataflow.graph.Node`)
into one function that pushes a value through every operator: no per-record
dispatch on operator kinds, one Python call per operator. What the chain's
ends become is the caller's: `open_sink` and `open_edge` are called once per
sink and edge node, in the order the tree is compiled (children first, left to
right, so a stage's sinks are numbered the same way in every run), and return
the function that receives the values reaching that end. The chain itself does
no I/O, so it is tested without Kafka.

A keyed stage's chain (its root is an ``input`` node followed by ``process``)
is called as ``push(key, value)``; a connected stage's (``co_process``) as
``push(key, value, side)``, `side` being the `Input.side` of the record's
input (`input_pushes` binds it per input); every other chain as
``push(value)``. A process function's `Tagged` outputs go to the side output
of their tag; a tag without one raises `RecordError`. Exceptions raised by
user functions pass out of ``push`` unchanged: the error policy
(`kstream.runtime.worker.dead_letters`) is applied by the caller, per record.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from zlib import crc32

from kstream.dataflow.graph import Node, Stage, children
from kstream.dataflow.state.timers import TimerDomain
from kstream.dataflow.types import Tagged
from kstream.errors import ConfigurationError, RecordError
from kstream.protocol.key_groups import group_prefixes
from kstream.runtime.state.element import ElementContext
from kstream.runtime.state.keyed import KeyedStateContext
from kstream.runtime.state.store import StateStore, key_bytes
from kstream.runtime.state.timers import KeyTimers, OperatorTimers

__all__ = [
    "End",
    "TimerOperator",
    "compile_chain",
    "fire_due",
    "has_process",
    "input_pushes",
    "keyed_context",
]

#: What receives the values reaching a sink or an edge.
End = Callable[[Any], None]


@dataclass(frozen=True, slots=True)
class TimerOperator:
    """A keyed operator's timers and how to fire one: ``fire(key_bytes, key, ts)``."""

    timers: OperatorTimers
    fire: Callable[[bytes, Any, int], None]


def compile_chain(
    root: Node,
    *,
    stage_index: int,
    state: StateStore | None,
    open_sink: Callable[[Node], End],
    open_edge: Callable[[Node], End],
    element: ElementContext | None = None,
    timer_operators: list[TimerOperator] | None = None,
    key_bytes: Callable[[Any], bytes] = key_bytes,
) -> Callable[..., None]:
    """Compile the chain rooted at `root` (stage `stage_index`) into one push function.

    `state` holds the stage's keyed state; it must not be None if the chain
    has a ``process`` node (`has_process`). `key_bytes` encodes keys for it
    (the key format of the checkpoint the task resumes). Each process node keeps its values
    under its own name, ``s<stage_index>.<node name>``, the name snapshots
    store them under, and its timers with them; each is appended to
    `timer_operators` (if given) so the caller can fire them. `element` is the
    subtask's event-time context (the caller sets it before each push and
    fire; an untimed one if None).
    """
    element = element if element is not None else ElementContext(timed=False)

    def compile_node(node: Node) -> Callable[..., None]:
        kids = [compile_node(c) for c in node.children]
        sides = {t: compile_node(node.side_outputs[t]) for t in sorted(node.side_outputs)}
        if not kids:
            emit: End = _discard
        elif len(kids) == 1:
            emit = kids[0]
        else:

            def emit(value: Any, _kids: list[End] = kids) -> None:
                for k in _kids:
                    k(value)

        # Checked inline where a process function's outputs are emitted: a
        # wrapper would cost every output one more Python call.
        to_side = _side_outputs(sides, node.name)
        fn = node.fn
        if node.kind in ("source", "input", "side"):
            return emit
        if node.kind == "map":
            assert fn is not None
            return lambda v: emit(fn(v))
        if node.kind == "filter":
            assert fn is not None

            def keep(v: Any) -> None:
                if fn(v):
                    emit(v)

            return keep
        if node.kind == "flat_map":
            assert fn is not None

            def flat(v: Any) -> None:
                for x in fn(v):
                    emit(x)

            return flat
        if node.kind == "process":
            assert fn is not None
            assert state is not None, "a chain with a process node needs a state store"
            ctx = keyed_context(state, stage_index, node)
            _timers(state, stage_index, node, ctx, element, emit, to_side, timer_operators)

            # Key format 3: the key's group goes before its bytes (`keyed`),
            # computed here once per record: a crc32, a modulo, an index.
            k = state.max_parallelism
            groups = group_prefixes(k) if k else ()

            def process(key: Any, value: Any) -> None:
                # Every key format encodes a str as its UTF-8 (`key_encoder`): no call for it.
                kb = key.encode() if type(key) is str else key_bytes(key)
                ctx.key = groups[crc32(kb) % k] + kb if k else kb
                ctx.key_object = key
                out = fn(key, value, ctx)
                if out is not None:
                    for x in out:
                        if type(x) is Tagged:
                            to_side(x)
                        else:
                            emit(x)

            return process
        if node.kind == "co_process":
            assert state is not None, "a chain with a co_process node needs a state store"
            # One state for both sides: what one side's function sets, the other's reads.
            shared = keyed_context(state, stage_index, node)
            _timers(state, stage_index, node, shared, element, emit, to_side, timer_operators)
            fns = node.fns
            ck = state.max_parallelism
            co_groups = group_prefixes(ck) if ck else ()

            def co_process(key: Any, value: Any, side: int) -> None:
                kb = key_bytes(key)
                shared.key = co_groups[crc32(kb) % ck] + kb if ck else kb
                shared.key_object = key
                out = fns[side](key, value, shared)
                if out is not None:
                    for x in out:
                        if type(x) is Tagged:
                            to_side(x)
                        else:
                            emit(x)

            return co_process
        if node.kind == "sink":
            return open_sink(node)
        if node.kind == "edge":
            return open_edge(node)
        raise ConfigurationError(f"unknown operator kind {node.kind}")

    return compile_node(root)


def _timers(
    state: StateStore,
    stage_index: int,
    node: Node,
    ctx: KeyedStateContext,
    element: ElementContext,
    emit: End,
    to_side: Callable[[Tagged], None],
    operators: list[TimerOperator] | None,
) -> None:
    """Give keyed operator `node` its timers (``ctx.timers``) and register how they fire."""
    timers = state.timers(f"s{stage_index}.{node.state_name}")
    ctx.attach(element, KeyTimers(ctx, timers, element, node.on_timer is not None))
    on_timer = node.on_timer
    if on_timer is None or operators is None:
        return

    def fire(kb: bytes, key: Any, ts: int) -> None:
        # A timer's outputs are stamped with its own time: never late downstream.
        element.timestamp = element.stamp = ts
        ctx.key = kb
        ctx.key_object = key
        out = on_timer(key, ts, ctx)
        if out is not None:
            for x in out:
                if type(x) is Tagged:
                    to_side(x)
                else:
                    emit(x)

    operators.append(TimerOperator(timers, fire))


def fire_due(
    operators: list[TimerOperator],
    domain: TimerDomain,
    time: int,
    on_error: Callable[[Exception, Any, int], None],
) -> int:
    """Fire every timer of `domain` due at `time` (operator by operator, each in
    firing order); return how many fired.

    A timer an ``on_timer`` registers that is already due fires in the same
    call. An exception of ``on_timer`` goes to ``on_error(exc, key, ts)`` and
    the next timer fires.
    """
    fired = 0
    for op in operators:
        while (due := op.timers.pop_due(domain, time)) is not None:
            timer, key = due
            fired += 1
            try:
                op.fire(timer.key, key, timer.timestamp)
            except Exception as exc:
                on_error(exc, key, timer.timestamp)
    return fired


def input_pushes(stage: Stage, push: Callable[..., None]) -> list[Callable[..., None]]:
    """The push function for each input of `stage` (by `Input.index`), from its chain's `push`.

    A connected stage's inputs are bound to their side; any other stage's
    inputs all share `push`.
    """
    if any(c.kind == "co_process" for c in stage.root.children):
        return [functools.partial(push, side=i.side) for i in stage.inputs]
    return [push for _ in stage.inputs]


def keyed_context(state: StateStore, stage_index: int, node: Node) -> KeyedStateContext:
    """The ``ctx`` of keyed operator `node` of stage `stage_index`: its state in `state`.

    Named ``s<stage_index>.<uid or name>`` (`Node.state_name`) in RocksDB and in
    snapshots. The caller sets ``ctx.key = key_bytes(key)`` before each call of the
    operator's function.
    """
    return state.context(f"s{stage_index}.{node.state_name}")


def has_process(node: Node) -> bool:
    """Whether the chain rooted at `node` has a ``process`` or ``co_process`` node
    (and so needs state)."""
    return node.kind in ("process", "co_process") or any(has_process(c) for c in children(node))


def _side_outputs(sides: dict[str, End], operator: str) -> Callable[[Tagged], None]:
    """Where a `Tagged` output of `operator` goes: the side output of its tag."""

    def tagged(value: Tagged) -> None:
        out = sides.get(value.tag)
        if out is None:
            raise RecordError(
                f"{operator} yielded Tagged({value.tag!r}, ...) but no side_output "
                f"({value.tag!r}) consumes it"
            )
        out(value.value)

    return tagged


def _discard(_: Any) -> None:
    """End of a chain that leads nowhere."""
