"""The `kafka-streams-eos` Nexmark contender's command: kstream's parallelism and interval."""

from __future__ import annotations

from pathlib import Path

from benchmarks.nexmark import bench, kafka_streams
from benchmarks.nexmark.model import QUERIES


def test_the_command_runs_nexmark_bench_with_kstreams_workers_and_interval() -> None:
    contender = bench.CONTENDERS["kafka-streams-eos"]
    argv = contender.command("b:9092", "q3", "in", "out", Path("/scratch"))
    main = argv.index("kstream.bench.NexmarkBench")
    assert argv[:2] == ["java", "-cp"]
    bootstrap, source, output, query, app_id, state, threads, commit_ms = argv[main + 1 :]
    assert (bootstrap, source, output, query) == ("b:9092", "in", "out", "q3")
    assert app_id.startswith("nexmark-q3-")
    assert state == "/scratch/state"
    assert int(threads) == bench.KSTREAM_WORKERS
    assert int(commit_ms) == round(bench.CHECKPOINT_INTERVAL_S * 1000)
    # A fresh application id per run: no committed offsets or state carried over.
    assert contender.command("b", "q3", "in", "out", Path("/s"))[main + 5] != app_id


def test_only_the_simply_mapped_queries_have_a_job() -> None:
    assert kafka_streams.STREAMS_QUERIES == ("q0", "q1", "q2", "q3")
    assert set(kafka_streams.STREAMS_QUERIES) <= set(QUERIES)
    assert bench.CONTENDERS["kafka-streams-eos"].queries == kafka_streams.STREAMS_QUERIES
