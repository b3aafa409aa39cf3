"""`kstream.dataflow.describe` and `kstream plan`: a job's plan as text."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from kstream import Job, KafkaSink, KafkaSource, Tagged
from kstream.dataflow.describe import describe
from kstream.dataflow.plan import plan
from kstream.tools.cli import app

JOB = """
from kstream import Job, KafkaSink, KafkaSource, Tagged


def first(value):
    return value[0]


def on_a(key, value, state):
    yield value


def on_b(key, value, state):
    yield Tagged("odd", value)


def job(params):
    j = Job(params.get("name", "shop"))
    a = j.source(KafkaSource("orders")).key_by(first)
    b = j.source(KafkaSource("payments")).key_by(str.lower)
    out = a.connect(b).process(on_a, on_b, name="match")
    out.sink(KafkaSink("matched"))
    out.side_output("odd").map(str.upper).sink(KafkaSink("odd"))
    return j
"""


def first(value: str) -> str:
    return value[0]


def test_a_plan_names_stages_inputs_channels_operators_and_sinks() -> None:
    j = Job("u", parallelism=2)
    a = j.source(KafkaSource("a"), parallelism=3).map(str.strip, name="strip")
    b = j.source(KafkaSource("b"))
    merged = a.union(b)
    merged.sink(KafkaSink("all"))
    merged.key_by(first).process(lambda k, v, s: [Tagged("t", v)], name="tag").side_output(
        "t"
    ).sink(KafkaSink("tagged"))
    assert describe(plan(j, 4)) == [
        "job u: 4 stages on 4 workers",
        "stage 0 (parallelism 3)",
        "  source kafka:a: topic a, start earliest",
        "  map strip (str.strip)",
        "    -> stage 2 input 0",
        "stage 1 (parallelism 2)",
        "  source kafka:b: topic b, start earliest",
        "  -> stage 2 input 1",
        "stage 2 (parallelism 2)",
        "  input 0: round-robin from stage 0, channel kstream.u.s2 (6 partitions)",
        "  input 1: round-robin from stage 1, channel kstream.u.s2.i1 (4 partitions)",
        "  sink kafka:all",
        "  -> stage 3 input 0",
        "stage 3 (parallelism 2)",
        "  input 0: keyed by first from stage 2, channel kstream.u.s3 (4 partitions)",
        "  process tag (test_a_plan_names_stages_inputs_channels_operators_and_sinks.<locals>"
        ".<lambda>)",
        "    side output 't'",
        "      sink kafka:tagged",
    ]


def test_kstream_plan_prints_the_plan_of_a_spec(tmp_path: Path) -> None:
    spec = tmp_path / "shop.py"
    spec.write_text(JOB)
    result = CliRunner().invoke(app, ["plan", f"{spec}:job", "--workers", "3"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "job shop: 3 stages on 3 workers"
    assert (
        "  input 1: keyed by str.lower from stage 1, side 1, channel kstream.shop.s2.i1 "
        "(9 partitions)" in lines
    )
    assert "  co_process match (on_a, on_b)" in lines
    assert lines[-3:] == [
        "    side output 'odd'",
        "      map (str.upper)",
        "        sink kafka:odd",
    ]


def test_kstream_plan_refuses_a_graph_that_cannot_run_with_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "bad.py"
    # The first connect spent b: connecting it again cannot run.
    spec.write_text(JOB.replace("    out.sink(", "    a.connect(b)\n    out.sink("))
    result = subprocess.run(
        [sys.executable, "-m", "kstream", "plan", f"{spec}:job"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert "already united or connected; use the result" in result.stderr
