"""The suite's figures: JSON, a rich table on stdout, and one HTML report with a plot.

The JSON is ``{"suite", "machine", "config", "figures": {"throughput": [...]}}``;
a windowed row also carries ``ratio_vs_own_wordcount``: the contender's
windowed throughput over its own word count's in the same run. Other figures
(latency, checkpoints, state size, recovery, RSS) go beside ``throughput``
under ``figures`` as they are measured.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import platform
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks import figures_report, targets
from benchmarks.suite import Result

#: The two baselines every throughput is compared with.
PLAIN, KSTREAM_EOS = "plain", "kstream-eos"
#: A windowed row is also compared with the same contender's running word count.
WINDOWED, WORDCOUNT = "windowed", "wordcount"


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "host": platform.node(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }


def ratios(results: list[Result]) -> list[dict[str, Any]]:
    """Each result's JSON with its throughput ratios against the plain loop and kstream EOS."""
    out = []
    for r in results:
        row = r.as_json()
        for base in (PLAIN, KSTREAM_EOS):
            ref = next((b for b in results if b.workload == r.workload and b.key == base), None)
            mine, theirs = r.words_per_s, ref.words_per_s if ref else None
            row[f"ratio_vs_{base.replace('-', '_')}"] = mine / theirs if mine and theirs else None
        if r.workload == WINDOWED:
            own = next((b for b in results if b.workload == WORDCOUNT and b.key == r.key), None)
            theirs = own.words_per_s if own else None
            row["ratio_vs_own_wordcount"] = (
                r.words_per_s / theirs if r.words_per_s and theirs else None
            )
        out.append(row)
    return out


def document(
    results: list[Result], config: dict[str, Any], figures: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The JSON document of one suite run; `figures` are those beyond throughput (by key).
    With throughput rows, ``figures["targets"]`` checks them against the targets."""
    rows = ratios(results)
    checked = {"targets": targets.check(rows)} if rows else {}
    return {
        "suite": "kstream benchmarks",
        "machine": machine(),
        "config": config,
        "figures": {"throughput": rows, **checked, **(figures or {})},
    }


def _num(x: float | None, fmt: str = "{:,.0f}") -> str:
    return "—" if x is None else fmt.format(x)


def table(doc: dict[str, Any]) -> Table:
    """The throughput figures as a rich table."""
    t = Table(
        title="Throughput (input words/s; ratios from this run)",
        caption="\n".join(
            f"{r['contender']} ({r['workload']}) {r['status']}: {r['reason']}"
            for r in doc["figures"]["throughput"]
            if r["status"] != "ok"
        ),
    )
    for col in (
        "workload",
        "contender",
        "processes",
        "words/s",
        "while flowing",
        "÷ plain",
        "÷ kstream EOS",
        "÷ its wordcount",
        "output",
        "load",
    ):
        t.add_column(col, justify="left" if col in ("workload", "contender", "output") else "right")
    for r in doc["figures"]["throughput"]:
        output = "verified" if r["status"] == "ok" else r["status"].upper()
        t.add_row(
            r["workload"],
            r["contender"],
            r["processes_note"],
            _num(r["words_per_s"]),
            _num(r["flowing_words_per_s"]),
            _num(r["ratio_vs_plain"], "{:.2f}"),
            _num(r["ratio_vs_kstream_eos"], "{:.2f}"),
            _num(r.get("ratio_vs_own_wordcount"), "{:.2f}"),
            output,
            f"{r['load_at_start']:.1f}",
        )
    return t


def markdown(doc: dict[str, Any]) -> str:
    """The throughput figures as a Markdown table (for the README), machine and load named."""
    m, c = doc["machine"], doc["config"]
    rows = doc["figures"]["throughput"]
    loads = [r["load_at_start"] for r in rows]
    if not rows:  # a run of other figures only (`--figures`)
        machine_line = (
            f"{m['cores']} cores ({m['cpu']}), {m['memory_gb']} GB, {m['os']}, "
            f"Python {m['python']}\n"
        )
        return machine_line + figures_report.markdown(doc)
    head = (
        f"{c['words']:,} words, {c['partitions']} partitions; {m['cores']} cores ({m['cpu']}), "
        f"{m['memory_gb']} GB, {m['os']}, Python {m['python']}; 1-minute load "
        f"{min(loads, default=0):.1f}-{max(loads, default=0):.1f} while contenders started\n\n"
        "| workload | contender | processes | words/s | while flowing | ÷ plain | ÷ kstream EOS "
        "| ÷ its wordcount |\n"
        "|---|---|---|---:|---:|---:|---:|---:|\n"
    )
    body = "".join(
        f"| {r['workload']} | {r['contender']} | {r['processes_note']} | "
        f"{_num(r['words_per_s'])} | {_num(r['flowing_words_per_s'])} | "
        f"{_num(r['ratio_vs_plain'], '{:.2f}')} | {_num(r['ratio_vs_kstream_eos'], '{:.2f}')} | "
        f"{_num(r.get('ratio_vs_own_wordcount'), '{:.2f}')} |"
        + ("" if r["status"] == "ok" else f" {r['status']}: {r['reason'][:80]}")
        + "\n"
        for r in rows
    )
    return head + body + figures_report.markdown(doc)


def _plot(doc: dict[str, Any]) -> bytes | None:
    """A PNG bar chart of throughput per workload and contender (None without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = [r for r in doc["figures"]["throughput"] if r["words_per_s"]]
    workloads = sorted({r["workload"] for r in rows})
    fig, axes = plt.subplots(
        1, max(len(workloads), 1), figsize=(6 * max(len(workloads), 1), 4.5), squeeze=False
    )
    for ax, w in zip(axes[0], workloads, strict=False):
        mine = [r for r in rows if r["workload"] == w]
        names = [r["contender"] for r in mine]
        ys = range(len(mine))
        # Side by side: the headline figure (start-up included) and the rate once flowing.
        ax.barh(
            [y - 0.2 for y in ys],
            [r["words_per_s"] for r in mine],
            height=0.4,
            label="incl. start-up",
        )
        ax.barh(
            [y + 0.2 for y in ys],
            [r["flowing_words_per_s"] or 0 for r in mine],
            height=0.4,
            label="while output flows",
        )
        ax.set_yticks(list(ys), names)
        ax.set_title(w)
        ax.set_xlabel("input words/s")
        ax.invert_yaxis()
        ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def write(doc: dict[str, Any], out: Path, console: Console) -> None:
    """Write results.json, results.md, throughput.png, the other figures' PNGs and
    report.html into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(doc, indent=2))
    (out / "results.md").write_text(markdown(doc))
    png = _plot(doc)
    if png:
        (out / "throughput.png").write_bytes(png)
    rec = Console(record=True, width=200, file=io.StringIO())
    rec.print(table(doc))
    for extra in figures_report.tables(doc):
        rec.print(extra)
    others = figures_report.plots(doc)
    for name, data in others.items():
        (out / name).write_bytes(data)
    body = rec.export_html(inline_styles=True, code_format="<pre>{code}</pre>")
    img = (
        f'<img alt="throughput" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
        if png
        else "<p>(matplotlib is not installed: no plot)</p>"
    )
    img += "".join(
        f'<img alt="{name}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'
        for name, data in others.items()
    )
    m = doc["machine"]
    (out / "report.html").write_text(
        "<!doctype html><meta charset=utf-8><title>kstream benchmarks</title>"
        "<h1>kstream benchmarks</h1>"
        f"<p>{html.escape(', '.join(f'{k}: {v}' for k, v in m.items()))}</p>"
        f"<p>{html.escape(json.dumps(doc['config']))}</p>{img}{body}"
    )
