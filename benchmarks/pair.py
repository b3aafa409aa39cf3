"""A benchmark pair: kstream's throughput in two checkouts, runs interleaved, one broker.

    python -m benchmarks.pair BEFORE_DIR AFTER_DIR [--rounds 5] [--words 1000000]

Each checkout needs its own virtualenv (``DIR/.venv``, ``pip install -e .``). The
runs alternate (before, after, before, ...) so that a change in the machine's load
lands on both sides; each run is ``python -m benchmarks`` of that checkout with
the exactly-once contender only, and what is compared is the median of the
"while flowing" rate (input words per second once the first output appeared:
start-up is left out, it is not what a refactoring of the hot path moves). The
1-minute load average is printed beside every run.

Prints one table: per workload, the medians, every run, and after ÷ before.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WORKLOADS = ("wordcount", "windowed")


def _run(checkout: Path, words: int, bootstrap: str, out: Path) -> dict[str, float]:
    """One benchmark run of `checkout`: words/s while flowing (or overall) per workload."""
    subprocess.run(
        [
            str(checkout / ".venv" / "bin" / "python"),
            "-m",
            "benchmarks",
            "--contenders",
            "kstream-eos",
            "--workloads",
            ",".join(WORKLOADS),
            "--figures",
            "throughput",
            "--words",
            str(words),
            "--bootstrap-servers",
            bootstrap,
            "--out",
            str(out),
        ],
        cwd=checkout,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    rows = json.loads((out / "results.json").read_text())["figures"]["throughput"]
    rates: dict[str, float] = {}
    for row in rows:
        if not row["verified"]:
            raise SystemExit(f"{checkout}: {row['workload']} output not verified: {row['reason']}")
        rates[row["workload"]] = row["flowing_words_per_s"] or row["words_per_s"]
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--words", type=int, default=1_000_000)
    parser.add_argument(
        "--bootstrap-servers", default=os.environ.get("KSTREAM_BOOTSTRAP", "127.0.0.1:23092")
    )
    args = parser.parse_args()
    runs: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.rounds):
            for side in ("before", "after"):
                load = os.getloadavg()[0]
                rates = _run(
                    getattr(args, side),
                    args.words,
                    args.bootstrap_servers,
                    Path(tmp) / f"{side}-{n}",
                )
                for workload, rate in rates.items():
                    runs[side].setdefault(workload, []).append(rate)
                shown = ", ".join(f"{w} {r:,.0f}/s" for w, r in rates.items())
                print(f"round {n + 1} {side:6}: {shown} (load {load:.1f})", file=sys.stderr)
    print(f"{'workload':10} {'before (median)':>16} {'after (median)':>16} {'after / before':>15}")
    for workload in WORKLOADS:
        before = statistics.median(runs["before"][workload])
        after = statistics.median(runs["after"][workload])
        print(f"{workload:10} {before:16,.0f} {after:16,.0f} {after / before:15.3f}")
        for side in ("before", "after"):
            print(f"  {side:6} runs: " + ", ".join(f"{r:,.0f}" for r in runs[side][workload]))


if __name__ == "__main__":
    main()
