"""A job using map, list and reducing state per user, and its pure reference.

Input lines are ``"<user> <event>"``; for each, the job emits ``(user, summary)``
where the summary is computed from the user's state after the event. `reference`
computes the same summaries from the lines alone, in each user's input order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.dataflow.job import Job
from kstream.dataflow.state.api import KeyedContext


def summarize(user: str, line: str, ctx: KeyedContext) -> Iterator[tuple[str, dict[str, Any]]]:
    event = line.split()[1]
    n = ctx.get(0) + 1
    ctx.set(n)
    seen = ctx.map("seen")
    seen.put(event, seen.get(event, 0) + 1)
    history = ctx.list("history")
    history.append((n, event))  # a tuple: msgpack must bring it back as one
    longest = ctx.reducing("longest", max)
    longest.add(len(event))
    kept = list(history)
    yield (
        user,
        {
            "n": n,
            "seen": seen.get(event),
            "kinds": sorted(seen.keys()),
            "history": len(kept),
            "last": [list(x) for x in kept[-3:]],
            "tuples": all(type(x) is tuple for x in kept),
            "longest": longest.get(),
        },
    )


def job(params: dict[str, str]) -> Job:
    j = Job(params["name"])
    (
        j.source(KafkaSource(params["input"]))
        .key_by(lambda line: line.split()[0])
        .process(summarize)
        .sink(KafkaSink(params["output"], value_serde="json"))
    )
    return j


def reference(lines: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Every user's summaries, in the order the job must emit them."""
    out: dict[str, list[dict[str, Any]]] = {}
    counts: dict[str, dict[str, int]] = {}
    histories: dict[str, list[tuple[int, str]]] = {}
    for line in lines:
        user, event = line.split()
        seen = counts.setdefault(user, {})
        seen[event] = seen.get(event, 0) + 1
        history = histories.setdefault(user, [])
        history.append((len(history) + 1, event))
        out.setdefault(user, []).append(
            {
                "n": len(history),
                "seen": seen[event],
                "kinds": sorted(seen),
                "history": len(history),
                "last": [list(x) for x in history[-3:]],
                "tuples": True,
                "longest": max(len(e) for _, e in history),
            }
        )
    return out


def assert_matches(
    got: dict[str, list[Any]], expected: dict[str, list[dict[str, Any]]], context: str = ""
) -> None:
    """Assert `got` (every user's summaries read back) equals `expected`; on a
    mismatch, say per user which summaries are missing or repeated (by `n`), not
    only where the first difference is, then `context`."""
    if got == expected:
        return
    lines = []
    for user in sorted(set(got) | set(expected)):
        mine, want = got.get(user, []), expected.get(user, [])
        if mine == want:
            continue
        seen = [s.get("n") for s in mine if isinstance(s, dict)]
        missing = [s["n"] for s in want if s["n"] not in seen]
        repeated = sorted({n for n in seen if n is not None and seen.count(n) > 1})
        # Events applied twice renumber every later summary: no n is missing then,
        # but n past the expected ones appear, and contents differ at some n.
        wanted = {s["n"] for s in want}
        extra = sorted({n for n in seen if n not in wanted}, key=str)
        differs = next(
            (
                (g, w)
                for g, w in zip(mine, want, strict=False)
                if isinstance(g, dict) and g.get("n") == w["n"] and g != w
            ),
            None,
        )
        lines.append(
            f"{user}: {len(mine)} summaries, {len(want)} expected; "
            f"missing n {missing[:30]}; repeated n {repeated[:30]}; extra n {extra[:30]}"
            + (f"; first differing: got {differs[0]} expected {differs[1]}" if differs else "")
        )
    raise AssertionError("\n".join([*lines, context]))
