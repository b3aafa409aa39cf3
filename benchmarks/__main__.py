"""Throughput of kstream against the alternatives, side by side on one broker and one input.

    python -m benchmarks [--words 3000000] [--contenders plain,eos-loop,...]
        [--workloads wordcount,mapfilter,windowed] [--window-ms 10000]
        [--bootstrap-servers B] [--out DIR]
        [--figures throughput,latency,state] [--latency-intervals 0.5,1]
        [--latency-seconds 30] [--latency-rate R] [--capacity-words N]
        [--state-keys 10000,1000000] [--state-value-bytes 100]
    python -m benchmarks --workloads nexmark [--queries q0,q1,...] [--events 1000000]
        [--rate 10000] [--contenders kstream-eos] [--bootstrap-servers B]

Contenders (each its own OS process): plain, eos-loop, quix-eos, quix-alo,
kafka-streams, kstream-eos, kstream-alo, kstream-alo-nocp (checkpoints off),
kstream-amo. Writes results.json, throughput.png and report.html into --out
and prints the table with the throughput targets checked; the figures
beyond throughput (`benchmarks.latency`: latency, checkpoints and bytes per
input record; `benchmarks.state_bench`: pause, recovery and RSS against state
size) add their tables and PNGs to the same report. Exit 1 if any
contender failed (crashed, timed out, wrong output); skipped ones (nothing to
install them from) do not count as failures.

``--workloads nexmark`` runs the Nexmark queries (`benchmarks.nexmark.bench`):
events/s per query and contender, every output checked against its reference,
into nexmark.json in --out; alone, it runs no word workload and no other figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from benchmarks import figures_report, latency, report, state_bench
from benchmarks.contenders import CONTENDERS
from benchmarks.nexmark import bench as nexmark_bench
from benchmarks.nexmark.model import QUERIES
from benchmarks.suite import Result, WindowedInput, run_contender, write_input
from benchmarks.workloads import (
    WINDOW_MS,
    WORKLOADS,
    EventTime,
    Expected,
    Workload,
    default_t0,
    expected,
    generate,
)
from kstream.errors import KStreamError
from kstream.infra.admin import Admin
from kstream.infra.cluster import bootstrap_servers
from kstream.infra.paths import cache_dir
from kstream.testing import unique_name


def _parse() -> argparse.Namespace:
    # The word workloads' contenders, then those that run Nexmark only (Flink, Kafka Streams).
    keys = [c.key for c in CONTENDERS]
    keys += [k for k in nexmark_bench.CONTENDERS if k not in keys]
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--words", type=int, default=3_000_000, help="input words (default 3M)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--partitions", type=int, default=3, help="of the input and output topics")
    ap.add_argument("--contenders", default=",".join(keys), help=f"comma-separated: {keys}")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--window-ms", type=int, default=WINDOW_MS, help="windowed: window size")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per contender")
    ap.add_argument("--bootstrap-servers")
    ap.add_argument("--out", type=Path, help="report folder (default: <cache>/bench/runs/<time>)")
    figures = ("throughput", "latency", "state")
    ap.add_argument("--figures", default=",".join(figures), help=f"comma-separated: {figures}")
    ap.add_argument("--latency-intervals", default="0.5,1", help="checkpoint intervals, s")
    ap.add_argument("--latency-seconds", type=float, default=30.0, help="steady input per run")
    ap.add_argument("--latency-rate", type=float, help="input words/s (default: 50%% capacity)")
    ap.add_argument("--capacity-words", type=int, default=1_000_000, help="backlog for capacity")
    ap.add_argument("--state-keys", default="10000,1000000", help="state sizes (10000000: ~1 GB)")
    ap.add_argument("--state-value-bytes", type=int, default=100)
    ap.add_argument("--queries", default=",".join(QUERIES), help="nexmark: comma-separated")
    ap.add_argument("--events", type=int, default=1_000_000, help="nexmark: input events")
    ap.add_argument("--rate", type=int, default=10_000, help="nexmark: events per s of event time")
    args = ap.parse_args()
    bad_queries = [q for q in args.queries.split(",") if q not in QUERIES]
    if bad_queries:
        ap.error(f"unknown queries {bad_queries}; choose from {list(QUERIES)}")
    if args.events < 1 or args.rate < 1:
        ap.error("--events and --rate must be at least 1")
    bad_figures = [f for f in args.figures.split(",") if f not in figures]
    if bad_figures:
        ap.error(f"unknown figures {bad_figures}; choose from {list(figures)}")
    chosen = args.contenders.split(",")
    unknown = [k for k in chosen if k not in keys]
    if unknown:
        ap.error(f"unknown contenders {unknown}; choose from {keys}")
    bad = [w for w in args.workloads.split(",") if w not in (*WORKLOADS, "nexmark")]
    if bad:
        ap.error(f"unknown workloads {bad}; choose from {[*WORKLOADS, 'nexmark']}")
    if args.words < 1:
        ap.error("--words must be at least 1")
    if args.window_ms < 1:
        ap.error("--window-ms must be at least 1")
    return args


def main() -> int:
    """Run the suite; exit 2 with one line when kstream refuses (no broker, bad address)."""
    args = _parse()
    # Wide enough for the table even when stdout is not a terminal.
    console = Console(width=max(Console().width, 150))
    try:
        return _run(args, console)
    except KStreamError as exc:
        print(f"python -m benchmarks: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, console: Console) -> int:
    bootstrap = bootstrap_servers(args.bootstrap_servers, log=console.log)
    chosen = args.workloads.split(",")
    failed = _nexmark(args, bootstrap, console) if "nexmark" in chosen else 0
    if chosen == ["nexmark"]:
        return failed
    return max(failed, _run_words(args, bootstrap, console))


def _nexmark(args: argparse.Namespace, bootstrap: str, console: Console) -> int:
    """The Nexmark queries: a table, nexmark.json in the report folder; 1 if any failed."""
    results = nexmark_bench.run(
        bootstrap,
        queries=[q for q in QUERIES if q in args.queries.split(",")],
        contenders=args.contenders.split(","),
        events=args.events,
        rate=args.rate,
        seed=args.seed,
        partitions=args.partitions,
        timeout=args.timeout,
        say=console.log,
    )
    console.print(nexmark_bench.table(results))
    out = _out_dir(args) / "nexmark.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps([r.as_json() for r in results], indent=2))
    console.print(f"nexmark results: {out}")
    return 1 if any(r.status == "failed" for r in results) else 0


def _out_dir(args: argparse.Namespace) -> Path:
    out: Path = args.out or cache_dir() / "bench" / "runs" / time.strftime(
        "%Y%m%dT%H%M%SZ", time.gmtime()
    )
    return out


def _run_words(args: argparse.Namespace, bootstrap: str, console: Console) -> int:
    contenders = [c for c in CONTENDERS if c.key in args.contenders.split(",")]
    workloads: list[Workload] = [w for w in WORKLOADS if w in args.workloads.split(",")]
    out = _out_dir(args)
    admin = Admin(bootstrap)
    lines = generate(args.words, args.seed)
    input_topic = unique_name("bench-input")
    admin.create_topics({input_topic: args.partitions})
    timing = EventTime(
        default_t0(len(lines), int(time.time() * 1000), args.window_ms), len(lines), args.window_ms
    )
    windowed = WindowedInput(lines, timing, args.partitions)
    results: list[Result] = []
    expects: dict[tuple[Workload, bool], Expected] = {}
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    try:
        with Progress(*columns, console=console) as progress:
            task = progress.add_task("writing the input", total=len(lines))
            write_input(bootstrap, input_topic, lines, lambda n: progress.update(task, completed=n))
            progress.remove_task(task)
            for workload in workloads if "throughput" in args.figures.split(",") else []:
                for c in contenders:
                    if workload not in c.workloads:
                        continue
                    # The plain loop has no state: one value "1" per word occurrence.
                    ones = c.key == "plain" and workload == "wordcount"
                    if (workload, ones) not in expects:
                        expects[workload, ones] = expected(
                            lines, workload, ones=ones, timing=timing
                        )
                    expect = expects[workload, ones]
                    with _input_of(workload, c.name, input_topic, windowed, admin, progress) as (
                        topic,
                        own,
                    ):
                        r = run_contender(
                            c,
                            bootstrap=bootstrap,
                            admin=admin,
                            input_topic=topic,
                            input_words=args.words,
                            partitions=args.partitions,
                            workload=workload,
                            expect=expect,
                            timeout=args.timeout,
                            progress=progress,
                            windowed=own,
                        )
                    results.append(r)
                    rate = f"{r.words_per_s:,.0f} words/s" if r.words_per_s else r.reason
                    progress.console.log(f"{workload}: {c.name}: {r.status} {rate}")
    finally:
        admin.delete_topics([input_topic])
    others = _other_figures(args, bootstrap, console)
    config = {
        "words": args.words,
        "lines": len(lines),
        "seed": args.seed,
        "partitions": args.partitions,
        "bootstrap": bootstrap,
        "window_ms": args.window_ms,
        "windowed_t0": timing.t0,
        "windowed_grace_ms": timing.grace_ms,
        "windowed_flush_ms": timing.flush_ms,
    }
    doc = report.document(results, config, others)
    console.print(report.table(doc))
    for extra in figures_report.tables(doc):
        console.print(extra)
    report.write(doc, out, console)
    console.print(f"report: {out / 'report.html'} (JSON: {out / 'results.json'})")
    return 1 if any(r.status == "failed" for r in results) else 0


@contextlib.contextmanager
def _input_of(
    workload: Workload,
    name: str,
    shared: str,
    windowed: WindowedInput,
    admin: Admin,
    progress: Progress,
) -> Iterator[tuple[str, WindowedInput | None]]:
    """The input topic of one contender: the shared one, or for the windowed workload a
    topic of its own holding the timed data (its flush lines are written later)."""
    if workload != "windowed":
        yield shared, None
        return
    topic = unique_name("bench-input-windowed")
    admin.create_topics({topic: windowed.partitions})
    try:
        task = progress.add_task(f"windowed input for {name}", total=len(windowed.lines))
        write_input(
            admin.bootstrap,
            topic,
            windowed.lines,
            lambda n: progress.update(task, completed=n),
            windowed,
        )
        progress.remove_task(task)
        yield topic, windowed
    finally:
        admin.delete_topics([topic])


def _other_figures(args: argparse.Namespace, bootstrap: str, console: Console) -> dict[str, object]:
    """The figures beyond throughput that `--figures` asks for, by key (kstream only)."""
    chosen = args.figures.split(",")
    out: dict[str, object] = {}
    if "latency" in chosen:
        console.log("latency: capacity, then one steady run per checkpoint interval")
        out["latency"] = latency.measure(
            bootstrap,
            intervals=[float(x) for x in args.latency_intervals.split(",")],
            seconds=args.latency_seconds,
            rate=args.latency_rate,
            capacity_words=args.capacity_words,
            say=console.log,
        )
    if "state" in chosen:
        console.log("state: pause, RSS and recovery per state size")
        out["state"] = state_bench.measure(
            bootstrap,
            [int(k) for k in args.state_keys.split(",")],
            value_bytes=args.state_value_bytes,
            say=console.log,
        )
    return out


if __name__ == "__main__":
    sys.exit(main())
