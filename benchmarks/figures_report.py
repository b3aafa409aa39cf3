"""The figures beyond throughput in the suite's report: tables, Markdown and plots.

Each figure is the JSON form its module returns, kept under ``figures`` in
results.json: ``targets`` (`benchmarks.targets`, the throughput rows checked
against the targets), ``latency`` (`benchmarks.latency`, which also holds each
run's checkpoint statistics and bytes per input record) and ``state``
(`benchmarks.state_bench`). Each renders as a rich table, a Markdown table and
(but the targets) one PNG; a figure not measured in a run is simply absent.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from rich.table import Table

from benchmarks import targets
from benchmarks.bytes_bench import CATEGORIES

Rows = list[list[str]]


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def latency_rows(fig: dict[str, Any]) -> Rows:
    """Header and one row per checkpoint interval: latency against the target."""
    rows = [["interval s", "input words/s", "outputs", "p50 ms", "p99 ms", "max ms", "target"]]
    for r in fig["runs"]:
        lat = r["latency_ms"]
        met = "met" if r["target_met"] else "NOT met"
        rows.append(
            [
                f"{r['interval_s']:g}",
                f"{r['achieved_words_per_s'] or r['rate_words_per_s']:,.0f}",
                f"{lat['n']:,}",
                _ms(lat["p50"]),
                _ms(lat["p99"]),
                _ms(lat["max"]),
                f"p99 ≤ {r['target_p99_ms']:.0f} ms: {met}",
            ]
        )
    return rows


def checkpoint_rows(fig: dict[str, Any]) -> Rows:
    """Header and one row per interval: checkpoint duration, alignment, synchronous pause."""
    rows = [
        [
            "interval s",
            "checkpoints",
            "duration p50 ms",
            "duration p99 ms",
            "alignment p50 ms",
            "alignment p99 ms",
            "sync pause p50 ms",
            "sync pause p99 ms",
        ]
    ]
    for r in fig["runs"]:
        d, a, s = r["checkpoint_duration_ms"], r["alignment_ms"], r["sync_pause_ms"]
        rows.append(
            [
                f"{r['interval_s']:g}",
                str(d["n"]),
                _ms(d["p50"]),
                _ms(d["p99"]),
                _ms(a["p50"]),
                _ms(a["p99"]),
                _ms(s["p50"]),
                _ms(s["p99"]),
            ]
        )
    return rows


def bytes_rows(fig: dict[str, Any]) -> Rows:
    """Header and one row per interval: bytes written to Kafka per input record, by category."""
    rows = [["interval s", *CATEGORIES, "total"]]
    for r in fig["runs"]:
        per = r["bytes"]["bytes_per_input_record"]
        total = r["bytes"]["total_per_input_record"]
        rows.append(
            [
                f"{r['interval_s']:g}",
                *(f"{per.get(c, 0):.1f}" for c in CATEGORIES),
                "—" if total is None else f"{total:.1f}",
            ]
        )
    return rows


def state_rows(fig: dict[str, Any]) -> Rows:
    """Header and one row per state size: pause, recovery, RSS."""
    rows = [
        [
            "keys",
            "state MB",
            "pause p50 ms",
            "pause p99 ms",
            "pause p99 filling ms",
            "recovery s",
            "worker RSS MB",
            "peak RSS MB",
        ]
    ]
    for r in fig["sizes"]:
        size = r["state_bytes"]
        rows.append(
            [
                f"{r['keys']:,}",
                "—" if size is None else f"{size / 2**20:,.1f}",
                _ms(r["sync_pause_ms"]["p50"]),
                _ms(r["sync_pause_ms"]["p99"]),
                _ms(r["sync_pause_filling_ms"]["p99"]),
                f"{r['recovery_s']:.2f}",
                f"{r['worker_rss_mb']:.0f}",
                f"{r['worker_peak_rss_mb']:.0f}",
            ]
        )
    return rows


#: Figure key -> (title, rows of its JSON form), in report order.
SECTIONS: dict[str, list[tuple[str, Callable[[Any], Rows]]]] = {
    "targets": [("Throughput targets (ratios of words/s within this run)", targets.rows)],
    "latency": [
        ("End-to-end latency, exactly-once, at a steady input rate", latency_rows),
        ("Checkpoints in the same runs", checkpoint_rows),
        ("Bytes written to Kafka per input record (payload; markers estimated)", bytes_rows),
    ],
    "state": [("Keyed state size: synchronous pause, recovery, worker RSS", state_rows)],
}


def sections(doc: dict[str, Any]) -> list[tuple[str, Rows]]:
    """(title, rows) of every figure beyond throughput that `doc` holds."""
    figures = doc["figures"]
    return [
        (title, rows(figures[key]))
        for key, parts in SECTIONS.items()
        if figures.get(key)
        for title, rows in parts
    ]


def tables(doc: dict[str, Any]) -> list[Table]:
    """The figures beyond throughput as rich tables."""
    out = []
    for title, rows in sections(doc):
        t = Table(title=title)
        for i, col in enumerate(rows[0]):
            t.add_column(col, justify="left" if i == 0 else "right")
        for row in rows[1:]:
            t.add_row(*row)
        out.append(t)
    return out


def markdown(doc: dict[str, Any]) -> str:
    """The figures beyond throughput as Markdown tables, each under its title."""
    out = []
    for title, rows in sections(doc):
        head, *body = rows
        out.append(
            f"\n**{title}**\n\n| {' | '.join(head)} |\n|"
            + "---:|" * len(head)
            + "\n"
            + "".join(f"| {' | '.join(r)} |\n" for r in body)
        )
    return "".join(out)


def _png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def plots(doc: dict[str, Any]) -> dict[str, bytes]:
    """PNG name -> bytes for each figure beyond throughput ({} without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    out: dict[str, bytes] = {}
    lat = doc["figures"].get("latency")
    if lat and lat["runs"]:
        runs = lat["runs"]
        xs = range(len(runs))
        labels = [f"{r['interval_s']:g} s" for r in runs]
        fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
        ax = axes[0]
        for dx, q in ((-0.2, "p50"), (0.2, "p99")):
            ax.bar([x + dx for x in xs], [r["latency_ms"][q] or 0 for r in runs], 0.4, label=q)
        ax.scatter(
            [x + 0.2 for x in xs], [r["target_p99_ms"] for r in runs], marker="_", s=1500, c="red"
        )
        ax.set_xticks(list(xs), labels)
        ax.set(title="latency (red: p99 target)", xlabel="checkpoint interval", ylabel="ms")
        ax.legend()
        ax = axes[1]
        parts = [
            ("checkpoint_duration_ms", "duration"),
            ("alignment_ms", "alignment"),
            ("sync_pause_ms", "sync pause"),
        ]
        for i, (key, name) in enumerate(parts):
            ax.bar(
                [x + (i - 1) * 0.27 for x in xs],
                [r[key]["p99"] or 0 for r in runs],
                0.27,
                label=name,
            )
        ax.set_xticks(list(xs), labels)
        ax.set(title="checkpoints, p99", xlabel="checkpoint interval", ylabel="ms")
        ax.legend()
        ax = axes[2]
        bottom = [0.0] * len(runs)
        for c in CATEGORIES:
            vals = [r["bytes"]["bytes_per_input_record"].get(c, 0) for r in runs]
            ax.bar(list(xs), vals, 0.5, bottom=bottom, label=c)
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
        ax.set_xticks(list(xs), labels)
        ax.set(title="bytes to Kafka per input record", xlabel="checkpoint interval")
        ax.legend(fontsize="small")
        out["latency.png"] = _png(fig)
    state = doc["figures"].get("state")
    if state and state["sizes"]:
        sizes = state["sizes"]
        keys = [s["keys"] for s in sizes]
        fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
        series = (
            ("synchronous pause p99 (ms)", [s["sync_pause_ms"]["p99"] or 0 for s in sizes], 20),
            ("recovery (s)", [s["recovery_s"] for s in sizes], 3),
            ("worker RSS (MB)", [s["worker_rss_mb"] for s in sizes], 300),
        )
        for ax, (title, ys, target) in zip(axes, series, strict=True):
            ax.plot(keys, ys, marker="o")
            ax.axhline(target, color="red", linestyle="--", linewidth=1)
            ax.set_xscale("log")
            ax.set(title=f"{title} (red: target)", xlabel="keys in state")
        out["state.png"] = _png(fig)
    return out
