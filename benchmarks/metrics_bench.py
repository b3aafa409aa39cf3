"""What the metrics cost: the word count over a backlog with the endpoints off, and on
and scraped every second, runs interleaved.

    python -m benchmarks.metrics_bench [--lines 300000] [--rounds 3] [--workers 2]
        [--scrape-interval 1.0] [--bootstrap-servers B]

One input topic is written first (generated lines, fixed seed, 3 partitions);
then each round runs the word count over it twice, on the same broker, each
time with a fresh output topic and job name: once without metrics, once with
``metrics_port`` set (the runner and every worker serve) and a thread scraping
every endpoint each `--scrape-interval` seconds, as Prometheus would. The order
alternates between rounds, so a change of the machine's load lands on both
sides. A run's rate is input lines per second *while flowing*: from the first
completed checkpoint that covers any input to the first that covers it all
(start-up is left out: it is not what metrics change). Prints every run with
the 1-minute load average, the medians, on ÷ off and the median of each
round's on ÷ off (target ≥ 0.98).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from benchmarks.flow_bench import PARTITIONS, WORDCOUNT, write_backlog
from kstream.infra.admin import Admin
from kstream.infra.cluster import bootstrap_servers
from kstream.infra.metrics import serve
from kstream.protocol.coordination import CoordinatorConfig
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner
from kstream.testing import free_ports, unique_name
from kstream.tools.demo import _generate
from kstream.tools.spec import load_job


@dataclass(frozen=True)
class Run:
    metrics: bool
    lines_per_s: float
    scrapes: int
    load: float


class _Scraper:
    """Scrapes every endpoint each `interval` seconds on its own thread, as Prometheus."""

    def __init__(self, ports: list[int], interval: float) -> None:
        self.ports, self.interval = ports, interval
        self.scrapes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            for p in self.ports:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{p}/metrics", timeout=5) as r:
                        r.read()
                    self.scrapes += 1
                except OSError:
                    pass  # a worker not serving yet

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def one_run(
    bootstrap: str,
    src: str,
    ends: dict[int, int],
    *,
    metrics: bool,
    workers: int,
    interval: float,
    timeout: float = 900.0,
) -> Run:
    """The word count over the backlog in `src`, until a checkpoint covers it."""
    dst = unique_name("metrics-out")
    Admin(bootstrap).create_topics({dst: PARTITIONS})
    params = {"input": src, "output": dst, "name": unique_name("metrics-bench")}
    job = load_job(WORDCOUNT, params)
    port = free_ports(workers + 1) if metrics else 0
    total = sum(ends.values())
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as state:
        runner = Runner(
            RunConfig(
                JobRef(WORDCOUNT, params),
                bootstrap,
                workers,
                Path(state),
                checkpoints=CoordinatorConfig(interval=0.5),
                metrics_port=port,
                metrics_address="127.0.0.1",
            ),
            job,
            say=lambda _: None,
        )
        runner.prepare()
        server = serve(runner.metrics.registry, port, "127.0.0.1") if metrics else None
        scraper = _Scraper(list(range(port, port + workers + 1)), interval) if metrics else None
        running = runner.start()
        first: tuple[float, int] | None = None
        started = time.perf_counter()
        try:
            while True:
                running.step()
                now = time.perf_counter()
                offsets = runner.stats.source_offsets.get(src, {})
                covered = sum(min(offsets.get(p, 0), e) for p, e in ends.items())
                if first is None and covered > 0:
                    first = (now, covered)
                if covered >= total:
                    break
                if now - started > timeout:
                    raise TimeoutError(f"the word count did not finish within {timeout:.0f}s")
        finally:
            running.stop()
            if scraper is not None:
                scraper.stop()
            if server is not None:
                server.close()
    assert first is not None
    rate = (total - first[1]) / max(now - first[0], 1e-9)
    return Run(metrics, rate, scraper.scrapes if scraper else 0, load)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scrape-interval", type=float, default=1.0)
    parser.add_argument("--bootstrap-servers", default=None)
    args = parser.parse_args()
    bootstrap = bootstrap_servers(args.bootstrap_servers)
    lines = _generate(args.lines, seed=25)
    src, ends = write_backlog(bootstrap, lines)
    runs: list[Run] = []
    for n in range(args.rounds):
        for metrics in (False, True) if n % 2 == 0 else (True, False):
            r = one_run(
                bootstrap,
                src,
                ends,
                metrics=metrics,
                workers=args.workers,
                interval=args.scrape_interval,
            )
            runs.append(r)
            print(
                f"round {n + 1} metrics {'on ' if metrics else 'off'}: "
                f"{r.lines_per_s:>9.0f} lines/s while flowing, {r.scrapes} scrapes, "
                f"load {r.load:.2f}",
                flush=True,
            )
    off = statistics.median(r.lines_per_s for r in runs if not r.metrics)
    on = statistics.median(r.lines_per_s for r in runs if r.metrics)
    # Each round's own ratio too: its two runs met about the same load.
    offs = [r.lines_per_s for r in runs if not r.metrics]
    ons = [r.lines_per_s for r in runs if r.metrics]
    paired = statistics.median(a / b for a, b in zip(ons, offs, strict=True))
    print(
        f"median off {off:.0f} lines/s, on {on:.0f} lines/s; on / off = {on / off:.3f}; "
        f"median of the rounds' on / off = {paired:.3f}"
    )


if __name__ == "__main__":
    main()
