"""The contenders: how each is prepared (installed, built) and started as its own process.

Every contender reads the suite's input topic from the beginning and writes the
workload's output (see `benchmarks.workloads`) to a fresh topic, and runs until
terminated. `prepare` runs once per suite run, before any timing; a contender
that cannot be prepared (no network for PyPI or Maven Central, no Java) is
skipped with the reason rather than failing the suite.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.workloads import WORKLOADS, EventTime, Workload
from kstream.errors import KStreamError
from kstream.infra.maven import resolve_maven_classpath
from kstream.infra.paths import cache_dir

__all__ = ["CONTENDERS", "Contender", "ContenderUnavailableError", "Context"]

ROOT = Path(__file__).resolve().parent
#: Quix Streams release the suite installs (its own venv: it pins an older confluent-kafka).
QUIX_VERSION = "3.28.1"
#: Kafka Streams release: the local broker's Kafka (deploy/kafka/pom.xml).
KAFKA_STREAMS_VERSION = "4.1.1"
#: Kafka Streams stream threads (the issue's comparison: 2 threads on 2 cores).
KAFKA_STREAMS_THREADS = 2
#: kstream worker processes (plus the `kstream run` coordinator process).
KSTREAM_WORKERS = 2
#: pip needs minutes on a slow mirror; beyond this PyPI counts as unreachable.
PIP_TIMEOUT_S = 600.0


class ContenderUnavailableError(Exception):
    """A contender cannot run on this machine (its reason is reported, the suite goes on)."""


@dataclass(frozen=True)
class Context:
    """What a contender's command needs: the cluster, its topics, a scratch directory,
    the consumer group (or application id) to use, and the windowed input's timing."""

    bootstrap: str
    input: str
    output: str
    workload: Workload
    scratch: Path
    group: str
    timing: EventTime | None = None

    @property
    def window_ms(self) -> int:
        return self.timing.window_ms if self.timing else 0

    @property
    def grace_ms(self) -> int:
        return self.timing.grace_ms if self.timing else 0


@dataclass(frozen=True)
class Contender:
    """One system under test, with one processing guarantee."""

    #: Short name for `--contenders`.
    key: str
    name: str
    #: OS processes it runs (threads in brackets in `processes_note`).
    processes: int
    processes_note: str
    workloads: tuple[Workload, ...]
    command: Callable[[Context], list[str]]
    prepare: Callable[[Callable[[str], None]], None] = lambda _: None
    #: Needs a download (PyPI, Maven Central) the first time: left out of the default run
    #: of the test suite.
    needs_network: bool = False
    #: Closes windows by stream time (the largest timestamp seen), not by watermarks per
    #: input partition: its flush lines are appended only once its group committed every
    #: data line (`benchmarks.workloads`, "Nothing is late").
    stream_time: bool = False


def _loop(kind: str) -> Callable[[Context], list[str]]:
    def command(ctx: Context) -> list[str]:
        return [
            sys.executable,
            "-m",
            "benchmarks.loops",
            kind,
            "--bootstrap-servers",
            ctx.bootstrap,
            "--input",
            ctx.input,
            "--output",
            ctx.output,
            "--workload",
            ctx.workload,
            "--window-ms",
            str(ctx.window_ms or 1),
            "--group",
            ctx.group,
        ]

    return command


#: Checkpoint interval of `kstream-alo-nocp`, s: longer than any run, so none starts.
CHECKPOINTS_OFF_S = 86400.0


def _kstream(guarantee: str, interval: float = 1.0) -> Callable[[Context], list[str]]:
    def command(ctx: Context) -> list[str]:
        spec = (
            "kstream.examples.wordcount:job"
            if ctx.workload == "wordcount"
            else f"{ROOT / 'jobs.py'}:{ctx.workload}"
        )
        window = ["-p", f"size={ctx.window_ms}"] if ctx.workload == "windowed" else []
        return [
            sys.executable,
            "-m",
            "kstream",
            "run",
            spec,
            "-p",
            f"input={ctx.input}",
            "-p",
            f"output={ctx.output}",
            "-p",
            f"name=bench-{uuid.uuid4().hex[:10]}",
            *window,
            "--workers",
            str(KSTREAM_WORKERS),
            "--guarantee",
            guarantee,
            "--checkpoint-interval",
            f"{interval:g}",
            "--state-dir",
            str(ctx.scratch / "state"),
            "--bootstrap-servers",
            ctx.bootstrap,
        ]

    return command


# --- Quix Streams -------------------------------------------------------------------------


def quix_python() -> Path:
    """The interpreter of the suite's Quix Streams virtualenv (in kstream's cache)."""
    return cache_dir() / "bench" / f"quixstreams-{QUIX_VERSION}" / "bin" / "python"


def install_peer(python: Path, package: str, say: Callable[[str], None], size: str = "") -> None:
    """Create, once, the virtualenv whose interpreter is `python` and pip-install
    `package` (``name==version``) into it; `ContenderUnavailableError` in one line
    when PyPI does not deliver it. A marker file says the install finished, so an
    interrupted one is redone."""
    venv = python.parents[1]
    marker = venv / ".complete"
    if marker.is_file():
        return
    say(f"installing {package} into {venv} (once{', ' + size if size else ''})")
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    name = package.split("==")[0]
    try:
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", package],
            capture_output=True,
            text=True,
            timeout=PIP_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ContenderUnavailableError(
            f"pip could not install {name} within {PIP_TIMEOUT_S:.0f}s: is PyPI reachable?"
        ) from exc
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        detail = lines[-1].strip() if lines else f"exit code {done.returncode}"
        raise ContenderUnavailableError(f"pip could not install {package}: {detail}")
    marker.write_text(package)


def _prepare_quix(say: Callable[[str], None]) -> None:
    """Create the Quix Streams virtualenv once; `ContenderUnavailableError` without PyPI."""
    install_peer(quix_python(), f"quixstreams=={QUIX_VERSION}", say)


def _quix(guarantee: str) -> Callable[[Context], list[str]]:
    def command(ctx: Context) -> list[str]:
        return [
            str(quix_python()),
            str(ROOT / "quix_job.py"),
            ctx.bootstrap,
            ctx.input,
            ctx.output,
            ctx.workload,
            guarantee,
            str(ctx.scratch / "state"),
            ctx.group,
            str(ctx.window_ms),
            str(ctx.grace_ms),
        ]

    return command


# --- Kafka Streams ------------------------------------------------------------------------


def _streams_home() -> Path:
    return cache_dir() / "bench" / f"kafka-streams-{KAFKA_STREAMS_VERSION}"


def streams_libs() -> Path:
    """Where the Kafka Streams jars are resolved to: named by the pom's hash, so a pom
    that gained a dependency is resolved again."""
    digest = hashlib.sha256(_STREAMS_POM.read_bytes()).hexdigest()[:12]
    return _streams_home() / f"libs-{digest}"


def prepare_streams(say: Callable[[str], None]) -> None:
    """Resolve Kafka Streams with mvn and compile the programs (`StreamsBench`, the
    word-count suite's, and `NexmarkBench`) with javac, once."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            raise ContenderUnavailableError(f"`{tool}` is not on PATH (Kafka Streams needs a JDK)")
    try:
        jars = resolve_maven_classpath(
            _STREAMS_POM,
            streams_libs(),
            properties={"kafka.version": KAFKA_STREAMS_VERSION},
            what=f"Kafka Streams {KAFKA_STREAMS_VERSION}",
            log=say,
        )
    except KStreamError as exc:
        raise ContenderUnavailableError(str(exc)) from exc
    classes = streams_classes()
    marker = classes / ".complete"
    if marker.is_file():
        return
    say("compiling the Kafka Streams programs with javac")
    sources = [str(path) for path in _streams_sources()]
    done = subprocess.run(
        ["javac", "-d", str(classes), "-cp", ":".join(map(str, jars)), *sources],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"javac failed: {done.stderr.strip()}")
    marker.write_text("\n".join(sources))


_STREAMS_POM = ROOT / "kafka-streams" / "pom.xml"


def _streams_sources() -> list[Path]:
    return sorted((ROOT / "kafka-streams" / "src" / "main" / "java").rglob("*.java"))


def streams_classes() -> Path:
    """Where the programs are compiled to: named by their sources' hash, so checkouts with
    different versions of them never run each other's classes."""
    digest = hashlib.sha256()
    for path in _streams_sources():
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return _streams_home() / f"classes-{digest.hexdigest()[:16]}"


def streams_classpath() -> str:
    """The `java -cp` of the compiled programs and their jars."""
    return f"{streams_classes()}:{streams_libs()}/*"


def _streams(ctx: Context) -> list[str]:
    return [
        "java",
        "-cp",
        streams_classpath(),
        "kstream.bench.StreamsBench",
        ctx.bootstrap,
        ctx.input,
        ctx.output,
        ctx.workload,
        ctx.group,
        str(ctx.scratch / "state"),
        str(KAFKA_STREAMS_THREADS),
        str(ctx.window_ms),
        str(ctx.grace_ms),
    ]


_KSTREAM_NOTE = f"{KSTREAM_WORKERS + 1} (coordinator + {KSTREAM_WORKERS} workers)"

CONTENDERS: tuple[Contender, ...] = (
    Contender("plain", "plain loop", 1, "1", WORKLOADS, _loop("plain")),
    Contender("eos-loop", "EOS loop", 1, "1", WORKLOADS, _loop("eos")),
    Contender(
        "quix-eos",
        "Quix Streams exactly-once",
        1,
        "1",
        WORKLOADS,
        _quix("exactly-once"),
        _prepare_quix,
        needs_network=True,
        stream_time=True,
    ),
    Contender(
        "quix-alo",
        "Quix Streams at-least-once",
        1,
        "1",
        ("wordcount", "windowed"),
        _quix("at-least-once"),
        _prepare_quix,
        needs_network=True,
        stream_time=True,
    ),
    Contender(
        "kafka-streams",
        "Kafka Streams EOS v2",
        1,
        f"1 JVM ({KAFKA_STREAMS_THREADS} stream threads)",
        WORKLOADS,
        _streams,
        prepare_streams,
        needs_network=True,
        stream_time=True,
    ),
    Contender(
        "kstream-eos", "kstream exactly-once", 3, _KSTREAM_NOTE, WORKLOADS, _kstream("exactly-once")
    ),
    Contender(
        "kstream-alo",
        "kstream at-least-once",
        3,
        _KSTREAM_NOTE,
        ("wordcount", "windowed"),
        _kstream("at-least-once"),
    ),
    Contender(
        # Checkpoints' cost (`benchmarks.targets`): the same job with none in the run.
        "kstream-alo-nocp",
        "kstream at-least-once, checkpoints off",
        3,
        _KSTREAM_NOTE,
        ("wordcount",),
        _kstream("at-least-once", CHECKPOINTS_OFF_S),
    ),
    Contender(
        "kstream-amo",
        "kstream at-most-once",
        3,
        _KSTREAM_NOTE,
        ("wordcount", "windowed"),
        _kstream("at-most-once"),
    ),
)
