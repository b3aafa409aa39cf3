"""The throughput targets kstream is held to, checked against one run's rows.

Each target is a ratio of two contenders' input words/s (start-up included) on
one workload of the same run, so the machine's load cancels out as far as it
can: the figures of two runs are never mixed. A target whose contenders did not
both run (not chosen, skipped, failed) is reported as not measured, never as
met.

The checkpoint cost compares kstream at-least-once with its checkpoints every
second against the same job with checkpoints off (`kstream-alo-nocp`: the
interval longer than any run). Exactly-once output is only visible through
checkpoints, so at-least-once is the guarantee under which "off" is a job at
all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["TARGETS", "Target", "check", "rows"]

Kind = Literal["ratio", "cost"]


@dataclass(frozen=True)
class Target:
    """`mine` ÷ `theirs` ≥ `bound` on each of `workloads` (a ratio), or, for a cost,
    1 - `mine` ÷ `theirs` ≤ `bound` (the share of throughput `mine` gives up)."""

    name: str
    mine: str
    theirs: str
    bound: float
    workloads: tuple[str, ...]
    kind: Kind = "ratio"


#: The issue's throughput targets (kstream with 2 workers, checkpoints every 1 s).
TARGETS: tuple[Target, ...] = (
    Target(
        "kstream EOS ÷ EOS loop",
        "kstream-eos",
        "eos-loop",
        1.2,
        ("wordcount", "mapfilter", "windowed"),
    ),
    Target(
        "kstream EOS ÷ plain loop",
        "kstream-eos",
        "plain",
        0.8,
        ("wordcount", "mapfilter", "windowed"),
    ),
    Target(
        "kstream EOS ÷ Quix Streams EOS", "kstream-eos", "quix-eos", 10.0, ("wordcount", "windowed")
    ),
    Target(
        "kstream EOS ÷ Kafka Streams EOS v2",
        "kstream-eos",
        "kafka-streams",
        2.0,
        ("wordcount", "windowed"),
    ),
    Target(
        "cost of checkpoints every 1 s (at-least-once)",
        "kstream-alo",
        "kstream-alo-nocp",
        0.05,
        ("wordcount",),
        "cost",
    ),
)


def check(
    throughput: Sequence[dict[str, Any]], targets: Sequence[Target] = TARGETS
) -> list[dict[str, Any]]:
    """One entry per target and workload that the run has rows for: the measured value
    (None when either contender has no throughput in that workload) and whether it met
    its bound (None when not measured)."""
    speed = {(r["workload"], r["key"]): r.get("words_per_s") for r in throughput}
    ran = {r["workload"] for r in throughput}
    out: list[dict[str, Any]] = []
    for t in targets:
        for w in t.workloads:
            if w not in ran:
                continue
            mine, theirs = speed.get((w, t.mine)), speed.get((w, t.theirs))
            value: float | None = None
            met: bool | None = None
            if mine and theirs:
                value = mine / theirs if t.kind == "ratio" else 1 - mine / theirs
                met = value >= t.bound if t.kind == "ratio" else value <= t.bound
            out.append(
                {
                    "target": t.name,
                    "workload": w,
                    "kind": t.kind,
                    "bound": t.bound,
                    "measured": value,
                    "met": met,
                }
            )
    return out


def rows(checked: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Header and one row per checked target, for the report's tables."""
    out = [["target", "workload", "bound", "this run", "verdict"]]
    for c in checked:
        cost = c["kind"] == "cost"
        bound = f"≤ {c['bound']:.0%}" if cost else f"≥ {c['bound']:g}x"
        value = c["measured"]
        shown = "—" if value is None else f"{value:.1%}" if cost else f"{value:.2f}x"
        verdict = {True: "met", False: "NOT met", None: "not measured"}[c["met"]]
        out.append([c["target"], c["workload"], bound, shown, verdict])
    return out
