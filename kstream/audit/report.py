"""The audit's reports: ``report.json`` for machines, ``report.html`` for people.

The JSON holds every figure, each check's verdict, per-partition statistics of
both topics and up to `EXAMPLE_LIMIT` example violations with their topic,
partition and offset. The HTML is one self-contained page (plots embedded as
base64 PNGs, no scripts, no external files) that shows the same figures plus
three plots: violations by key, violations by offset, records per partition.
Every string that comes from the topics is escaped before it reaches the page.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kstream.audit.checks import CheckResult, PartitionStats, Violation, ViolationKind

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["REPORT_FORMAT", "AuditFacts", "to_json", "write_html", "write_json"]

#: Version of report.json's layout; bumped when a field changes meaning or goes away.
REPORT_FORMAT = 1

_COLOURS = {
    ViolationKind.DUPLICATE: "#d62728",
    ViolationKind.LOST: "#1f77b4",
    ViolationKind.UNEXPECTED: "#9467bd",
    ViolationKind.OUT_OF_ORDER: "#ff7f0e",
}


@dataclass(frozen=True, slots=True)
class AuditFacts:
    """Everything a report shows about one audit."""

    input_topic: str
    output_topic: str
    bootstrap: str
    master: str
    started_at: str
    seconds: float
    result: CheckResult
    input_partitions: tuple[PartitionStats, ...]
    output_partitions: tuple[PartitionStats, ...]
    bin_width: int

    @property
    def input_records(self) -> int:
        return sum(p.records for p in self.input_partitions)

    @property
    def output_records(self) -> int:
        return sum(p.records for p in self.output_partitions)


def _verdict(count: int | None) -> str:
    if count is None:
        return "not checked"
    return "pass" if count == 0 else "fail"


def _partitions(stats: Sequence[PartitionStats]) -> list[dict[str, Any]]:
    return [
        {
            "partition": p.partition,
            "start_offset": p.start,
            "end_offset": p.end,
            "records": p.records,
            "first_offset": p.first_offset,
            "last_offset": p.last_offset,
            "gaps": p.gaps,
        }
        for p in stats
    ]


def _violation(v: Violation) -> dict[str, Any]:
    return {
        "kind": v.kind.value,
        "topic": v.topic,
        "partition": v.partition,
        "offset": v.offset,
        "key": v.key,
        "value": v.value,
        "source": v.source,
    }


def to_json(facts: AuditFacts) -> dict[str, Any]:
    """The content of report.json (a plain, JSON-serialisable dict)."""
    r = facts.result
    checks = {
        "duplicates": r.duplicates,
        "lost": r.lost,
        "unexpected": r.unexpected,
        "out_of_order": r.out_of_order,
    }
    return {
        "format": REPORT_FORMAT,
        "check": r.check.value,
        "verdict": "clean" if r.clean else "violations",
        "started_at": facts.started_at,
        "seconds": round(facts.seconds, 3),
        "bootstrap": facts.bootstrap,
        "master": facts.master,
        "input": {
            "topic": facts.input_topic,
            "records": facts.input_records,
            "partitions": _partitions(facts.input_partitions),
        },
        "output": {
            "topic": facts.output_topic,
            "records": facts.output_records,
            "partitions": _partitions(facts.output_partitions),
        },
        "expected_outputs": r.expected,
        "violations": r.violations,
        "checks": {
            name: {"count": count, "verdict": _verdict(count)} for name, count in checks.items()
        },
        "examples": [_violation(v) for v in r.examples],
        "by_key": [
            {
                "key": k.key,
                "duplicates": k.duplicates,
                "lost": k.lost,
                "unexpected": k.unexpected,
                "out_of_order": k.out_of_order,
                "total": k.total,
            }
            for k in r.by_key
        ],
        "by_offset": {
            "bin_width": facts.bin_width,
            "bins": [
                {
                    "kind": b.kind.value,
                    "topic": b.topic,
                    "partition": b.partition,
                    "start": b.start,
                    "count": b.count,
                }
                for b in r.by_offset
            ],
        },
    }


def write_json(facts: AuditFacts, path: Path) -> Path:
    path.write_text(json.dumps(to_json(facts), indent=2, ensure_ascii=False) + "\n")
    return path


# -- plots ------------------------------------------------------------------------


def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _empty(fig: Figure, message: str) -> None:
    ax = fig.add_subplot()
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=12)
    ax.set_axis_off()


def _plot_by_key(r: CheckResult) -> str:
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(8, max(2.5, 0.35 * len(r.by_key) + 1)))
    if not r.by_key:
        _empty(fig, "no violations")
        return _png(fig)
    ax = fig.add_subplot()
    labels = ["(no key)" if k.key is None else k.key[:40] for k in reversed(r.by_key)]
    left = [0] * len(labels)
    for kind in ViolationKind:
        counts = [getattr(k, _field(kind)) for k in reversed(r.by_key)]
        if any(counts):
            ax.barh(labels, counts, left=left, color=_COLOURS[kind], label=kind.value)
            left = [a + b for a, b in zip(left, counts, strict=True)]
    ax.set_xlabel("violations")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(f"Violations by key (top {len(r.by_key)})")
    ax.legend(loc="lower right")
    return _png(fig)


def _field(kind: ViolationKind) -> str:
    return "duplicates" if kind is ViolationKind.DUPLICATE else kind.value


def _plot_by_offset(r: CheckResult, width: int) -> str:
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    series = sorted({(b.topic, b.partition) for b in r.by_offset})
    fig = Figure(figsize=(8, max(2.5, 2.0 * min(len(series), 8))))
    if not series:
        _empty(fig, "no violations at an offset")
        return _png(fig)
    shown = series[:8]  # more partitions would make unreadable slivers
    axes = fig.subplots(len(shown), 1, squeeze=False)[:, 0]
    for ax, (topic, partition) in zip(axes, shown, strict=True):
        for kind in ViolationKind:
            bins = [
                b for b in r.by_offset if (b.topic, b.partition, b.kind) == (topic, partition, kind)
            ]
            if bins:
                ax.bar(
                    [b.start for b in bins],
                    [b.count for b in bins],
                    width=width,
                    align="edge",
                    color=_COLOURS[kind],
                    label=kind.value,
                    alpha=0.8,
                )
        ax.set_title(f"{topic} partition {partition}", fontsize=9)
        ax.set_ylabel("violations")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=8)
    axes[-1].set_xlabel(f"offset (bins of {width})")
    fig.tight_layout()
    return _png(fig)


def _plot_partitions(facts: AuditFacts) -> str:
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(8, 3.5))
    axes = fig.subplots(1, 2)
    for ax, stats, name in (
        (axes[0], facts.input_partitions, facts.input_topic),
        (axes[1], facts.output_partitions, facts.output_topic),
    ):
        xs = [p.partition for p in stats]
        ax.bar(xs, [p.records for p in stats], color="#2ca02c", label="records")
        ax.bar(
            xs,
            [p.gaps for p in stats],
            bottom=[p.records for p in stats],
            color="#bbbbbb",
            label="offsets without a record",
        )
        ax.set_title(name[:50], fontsize=9)
        ax.set_xlabel("partition")
        ax.set_xticks(xs)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=8)
    axes[0].set_ylabel("offsets")
    fig.tight_layout()
    return _png(fig)


# -- the page ---------------------------------------------------------------------

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>kstream audit: {title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }}
th {{ background: #f3f3f3; }} td.text {{ text-align: left; font-family: monospace; }}
.verdict {{ font-size: 1.4em; padding: 0.5em 1em; color: white; display: inline-block; }}
.clean {{ background: #2ca02c; }} .violations {{ background: #d62728; }}
img {{ max-width: 100%; }}
</style></head><body>
<h1>kstream audit</h1>
<p>{summary}</p>
<p class="verdict {verdict_class}">{verdict}</p>
<h2>Figures</h2>
{figures}
<h2>Examples (first {example_count} of {violations})</h2>
{examples}
<h2>Violations by key</h2>
<img alt="violations by key" src="data:image/png;base64,{by_key}">
<h2>Violations by offset</h2>
<img alt="violations by offset" src="data:image/png;base64,{by_offset}">
<h2>Records per partition</h2>
<img alt="records per partition" src="data:image/png;base64,{partitions}">
<h3>Input: {input_topic}</h3>
{input_table}
<h3>Output: {output_topic}</h3>
{output_table}
<p>Offsets without a record are transaction markers and aborted records; they are never
counted as losses.</p>
</body></html>
"""


def _table(
    header: Sequence[str], rows: Sequence[Sequence[object]], text: Sequence[int] = ()
) -> str:
    """An HTML table; columns numbered in `text` are left-aligned text. All cells escaped."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            shown = "" if cell is None else html.escape(str(cell))
            cells.append(f'<td class="text">{shown}</td>' if i in text else f"<td>{shown}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _partition_table(stats: Sequence[PartitionStats]) -> str:
    return _table(
        ["partition", "start", "end", "records", "first offset", "last offset", "gaps"],
        [
            (p.partition, p.start, p.end, p.records, p.first_offset, p.last_offset, p.gaps)
            for p in stats
        ],
    )


def render_html(facts: AuditFacts) -> str:
    """The HTML page of report.html."""
    r = facts.result
    figures = _table(
        ["figure", "count", "verdict"],
        [
            ("input records", facts.input_records, ""),
            ("output records", facts.output_records, ""),
            ("expected outputs", r.expected, ""),
            ("duplicates", r.duplicates, _verdict(r.duplicates)),
            ("lost", r.lost, _verdict(r.lost)),
            ("unexpected", r.unexpected, _verdict(r.unexpected)),
            ("out of order", r.out_of_order, _verdict(r.out_of_order)),
        ],
        text=(0,),
    )
    examples = _table(
        ["kind", "topic", "partition", "offset", "key", "value", "source"],
        [
            (v.kind.value, v.topic, v.partition, v.offset, v.key, v.value, v.source)
            for v in r.examples
        ],
        text=(0, 1, 4, 5, 6),
    )
    summary = (
        f"Check <b>{html.escape(r.check.value)}</b> of output topic "
        f"<code>{html.escape(facts.output_topic)}</code> against input topic "
        f"<code>{html.escape(facts.input_topic)}</code> on {html.escape(facts.bootstrap)}, "
        f"started {html.escape(facts.started_at)}, took {facts.seconds:.1f} s "
        f"(Spark master {html.escape(facts.master)})."
    )
    return _PAGE.format(
        title=html.escape(f"{r.check.value} of {facts.output_topic}"),
        summary=summary,
        verdict_class="clean" if r.clean else "violations",
        verdict="clean" if r.clean else f"{r.violations} violations",
        figures=figures,
        example_count=len(r.examples),
        violations=r.violations,
        examples=examples,
        by_key=_plot_by_key(r),
        by_offset=_plot_by_offset(r, facts.bin_width),
        partitions=_plot_partitions(facts),
        input_topic=html.escape(facts.input_topic),
        output_topic=html.escape(facts.output_topic),
        input_table=_partition_table(facts.input_partitions),
        output_table=_partition_table(facts.output_partitions),
    )


def write_html(facts: AuditFacts, path: Path) -> Path:
    path.write_text(render_html(facts), encoding="utf-8")
    return path
