"""A planned job as text: what `kstream plan` prints.

Pure: it reads a `Plan` and returns lines, so what the command shows is what
the workers will run (they compute the same plan from the same spec).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kstream.dataflow.graph import Input, Node
from kstream.dataflow.inputs import Source
from kstream.dataflow.plan import Plan, input_topic

__all__ = ["describe"]

#: Indentation of one level of the operator tree.
_INDENT = "  "


def describe(p: Plan) -> list[str]:
    """The stages of `p` in order, each with its parallelism, its source or inputs
    (kind, key function, channel topic and partitions) and its fused operators as
    a tree (fan-out is a node with several children), down to sinks and edges."""
    job = p.job
    lines = [
        f"job {job.name}: {len(job.stages)} stage{'s' if len(job.stages) != 1 else ''} "
        f"on {p.workers} worker{'s' if p.workers != 1 else ''}"
    ]
    for stage in job.stages:
        timed = ", event time" if stage.timed else ""
        head = f", iterate {stage.iterate}" if stage.iterate is not None else ""
        lines.append(f"stage {stage.index} (parallelism {p.parallelism[stage.index]}{timed}{head})")
        if stage.source is not None:
            src = stage.source
            stamps = "" if src.timestamps is None else f", timestamps {_timestamps(src)}"
            lines.append(
                f"{_INDENT}source {src.name}: topic {src.topic}, start {src.start}{stamps}"
            )
        connected = any(c.kind == "co_process" for c in stage.root.children)
        for inp in stage.inputs:
            lines.append(_INDENT + _input(p, inp, stage.index, connected))
        lines += _tree(stage.root, 1)
    return lines


def _timestamps(src: Source) -> str:
    """Where a source's timestamps come from, and its watermark settings."""
    origin = "kafka" if src.timestamps == "kafka" else _name(src.timestamps)
    c = src.watermark_config()
    return (
        f"{origin} (out of order {c.out_of_orderness} ms, idle after {c.idle_timeout} ms, "
        f"future {c.max_future} ms)"
    )


def _input(p: Plan, inp: Input, stage: int, connected: bool) -> str:
    kind = f"keyed by {_name(inp.key_fn)}" if inp.key_fn is not None else "round-robin"
    topic = input_topic(p.job.name, stage, inp)
    partitions = p.parallelism[inp.upstream.index] * p.parallelism[stage]
    side = f", side {inp.side}" if connected else ""
    loop = ", loop (logged, not aligned)" if inp.loop else ""
    return (
        f"input {inp.index}: {kind} from stage {inp.upstream.index}{side}{loop}, "
        f"channel {topic} ({partitions} partitions)"
    )


def _tree(node: Node, depth: int) -> list[str]:
    """`node`'s children (then side outputs), one per line, indented by depth."""
    lines = []
    for child in node.children:
        lines.append(_INDENT * depth + _operator(child))
        lines += _tree(child, depth + 1)
    for tag in sorted(node.side_outputs):
        lines.append(_INDENT * depth + f"side output {tag!r}")
        lines += _tree(node.side_outputs[tag], depth + 1)
    return lines


def _operator(node: Node) -> str:
    match node.kind:
        case "sink":
            return f"sink {node.name}"
        case "edge":
            target = node.edge_to.index if node.edge_to is not None else "?"
            loop = node.edge_to is not None and node.edge_to.inputs[node.edge_input].loop
            return f"-> stage {target} input {node.edge_input}{' (loop)' if loop else ''}"
        case "co_process":
            timers = f", on_timer {_name(node.on_timer)}" if node.on_timer is not None else ""
            return f"co_process {node.name} ({', '.join(_name(f) for f in node.fns)}{timers})"
        case _:
            label = node.kind if node.name in ("", node.kind) else f"{node.kind} {node.name}"
            parts = [] if node.fn is None or _name(node.fn) == node.name else [_name(node.fn)]
            if node.on_timer is not None:
                parts.append(f"on_timer {_name(node.on_timer)}")
            return f"{label} ({', '.join(parts)})" if parts else label


def _name(fn: Callable[..., Any] | None) -> str:
    """A function's qualified name (``<lambda>`` for lambdas), or its repr."""
    return str(getattr(fn, "__qualname__", None) or repr(fn))
