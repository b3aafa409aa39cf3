"""A job's identity computed from its plan: the value itself, and what may differ on
resume, are `kstream.protocol.identity`'s; this module reads them off a planned job.
"""

from __future__ import annotations

from kstream.dataflow.graph import Node, children
from kstream.dataflow.job import Job
from kstream.dataflow.plan import Plan
from kstream.protocol.identity import FORMAT_VERSION, JobIdentity

__all__ = ["identity_of", "state_names"]


def identity_of(p: Plan) -> JobIdentity:
    """The identity of planned job `p` (see `JobIdentity`)."""
    sources: list[str] = []
    sinks: list[str] = []
    operators: list[str] = []
    for stage in p.job.stages:
        if stage.source is not None:
            sources.append(stage.source.name)

        def walk(node: Node, stage_index: int = stage.index) -> None:
            if node.kind == "sink" and node.sink is not None:
                sinks.append(node.sink.name)
            elif node.kind not in ("source", "input"):
                operators.append(f"s{stage_index}.{node.kind}:{node.name}")
            for child in children(node):
                walk(child)

        walk(stage.root)
    return JobIdentity(
        FORMAT_VERSION,
        p.parallelism,
        tuple(sources),
        tuple(sinks),
        tuple(operators),
        _edges(p.job),
        p.job.max_parallelism,
    )


def state_names(job: Job) -> tuple[str, ...]:
    """The names the keyed operators of `job` store their state under,
    ``s<stage>.<uid or name>`` (`Node.state_name`), sorted."""
    names: set[str] = set()
    for stage in job.stages:

        def walk(node: Node, stage_index: int = stage.index) -> None:
            if node.kind in ("process", "co_process"):
                names.add(f"s{stage_index}.{node.state_name}")
            for child in children(node):
                walk(child)

        walk(stage.root)
    return tuple(sorted(names))


def _edges(job: Job) -> tuple[str, ...]:
    """The stage inputs of `job` (see `JobIdentity.edges`); empty for a line."""
    edges = tuple(
        f"s{i.upstream.index}>s{s.index}.i{i.index}:{'keyed' if i.key_fn else 'round-robin'}"
        + (f"/side{i.side}" if i.side else "")
        for s in job.stages
        for i in s.inputs
    )
    feeds = [[i.upstream.index for i in s.inputs] for s in job.stages]
    line = all(f == ([n - 1] if n else []) for n, f in enumerate(feeds))
    return () if line else edges
