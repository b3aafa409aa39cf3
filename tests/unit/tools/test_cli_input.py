"""Bad command-line input is refused with one clear `KStreamError` (pure parts)."""

from __future__ import annotations

import socket
import sys
import typing
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from kstream.dataflow.plan import MAX_INTERNAL_PARTITIONS, plan, started_with
from kstream.errors import ConfigurationError, KStreamError, MissingParameterError, SpecError
from kstream.examples.wordcount import job as wordcount
from kstream.infra.admin import _refusing
from kstream.infra.cluster import bootstrap_servers
from kstream.tools.cli import app
from kstream.tools.spec import load_job

# -- numeric options -----------------------------------------------------------


def numeric_options(t: typer.Typer, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """(command path..., option, type name) of every int/float option of every command."""
    for command in t.registered_commands:
        callback = command.callback
        assert callback is not None
        hints = typing.get_type_hints(callback, include_extras=True)
        for name, hint in hints.items():
            if typing.get_origin(hint) is not typing.Annotated:
                continue
            base, *meta = typing.get_args(hint)
            kind = {int: "int", float: "float", float | None: "float"}.get(base)
            info = next((m for m in meta if isinstance(m, typer.models.OptionInfo)), None)
            if kind is None or info is None:
                continue
            default = info.default
            option = default if isinstance(default, str) else "--" + name.replace("_", "-")
            yield (*path, command.name or callback.__name__, option, kind)
    for group in t.registered_groups:
        assert group.typer_instance is not None
        assert group.name is not None
        yield from numeric_options(group.typer_instance, (*path, group.name))


#: What else each command needs to get as far as parsing every option.
REQUIRED = {
    "run": {"": "x:job"},
    "worker": {"": "x:job", "--worker": "0", "--workers": "1"},
    "checkpoints": {"--job-name": "x"},
}
OPTIONS = list(numeric_options(app))


def test_the_numeric_options_are_found() -> None:
    found = {(o[-3], o[-2]) for o in OPTIONS}
    assert {("run", "--checkpoint-interval"), ("run", "--workers"), ("start", "--port")} <= found
    assert len(OPTIONS) >= 14


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (o, v)
        for o in OPTIONS
        for v in (["nan", "inf", "-inf", "-1"] if o[-1] == "float" else ["-1"])
    ],
    ids=lambda x: " ".join(x) if isinstance(x, tuple) else x,
)
def test_every_numeric_option_refuses_nonsense_when_parsed(
    where: tuple[str, ...], value: str
) -> None:
    *command, option, _ = where
    others = REQUIRED.get(command[-1], {})
    rest = [a for k, v in others.items() if k != option for a in ((k, v) if k else (v,))]
    args = [*command, option, value, *rest]
    # An unreachable cluster, in case a value got through and the command ran.
    result = CliRunner().invoke(app, args, env={"KSTREAM_BOOTSTRAP": "127.0.0.1:9"})
    assert isinstance(result.exception, ConfigurationError), (args, result.output)
    assert str(result.exception).startswith(f"{option} must be"), str(result.exception)


def test_zero_is_refused_where_it_means_nothing() -> None:
    for args in (
        ["run", "x:job", "--workers", "0"],
        ["run", "x:job", "--checkpoint-interval", "0"],
    ):
        result = CliRunner().invoke(app, args)
        assert isinstance(result.exception, ConfigurationError), result.output


def test_an_empty_bootstrap_is_refused() -> None:
    for empty in ("", "  "):
        with pytest.raises(ConfigurationError, match="--bootstrap-servers is empty"):
            bootstrap_servers(empty)


def test_a_refused_connection_is_told_at_once() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        assert "refused" in (_refusing(f"127.0.0.1:{port}") or "").lower()
        s.listen()
        assert _refusing(f"127.0.0.1:{port}") is None
        assert _refusing(f"127.0.0.1:1,127.0.0.1:{port}") is None  # one answers
    assert _refusing("no-port-given") is None  # left to librdkafka


# -- job specs -----------------------------------------------------------------


@pytest.fixture
def job_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], str]:
    """Write a job module in a fresh current directory; return its module name."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    written: list[str] = []

    def write(name: str, text: str) -> str:
        (tmp_path / f"{name}.py").write_text(text)
        written.append(name)
        return name

    yield write
    for name in written:
        sys.modules.pop(name, None)


JOB = """
from kstream.dataflow.job import Job
from kstream.connectors.kafka import KafkaSink, KafkaSource

def job(params):
    j = Job("probe")
    j.source(KafkaSource(params["input"])).sink(KafkaSink(params.get("output", "out")))
    return j
"""


def test_a_module_in_the_current_directory_is_found(job_dir: Callable[[str, str], str]) -> None:
    name = job_dir("probe_wc_here", JOB)
    assert load_job(f"{name}:job", {"input": "words"}).name == "probe"


def test_a_missing_parameter_says_how_to_pass_it(job_dir: Callable[[str, str], str]) -> None:
    name = job_dir("probe_needs_input", JOB)
    with pytest.raises(MissingParameterError) as caught:
        load_job(f"{name}:job", {})
    assert str(caught.value) == (
        f"{name}:job: the job needs parameter 'input': pass it with -p input=VALUE"
    )


def test_a_job_may_still_catch_the_missing_parameter(job_dir: Callable[[str, str], str]) -> None:
    text = JOB.replace('params["input"]', 'params["input"] if "x" in params else _default(params)')
    text += '\ndef _default(params):\n    try:\n        return params["input"]\n'
    text += '    except KeyError:\n        return "fallback"\n'
    name = job_dir("probe_catches", text)
    assert load_job(f"{name}:job", {}).name == "probe"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("def job(params:\n    pass\n", "SyntaxError at "),
        (
            "import no_such_module_xyz\n",
            "ModuleNotFoundError: No module named 'no_such_module_xyz'",
        ),
        ("raise RuntimeError('boom')\n", "failed to import: RuntimeError: boom ("),
        ("def job():\n    pass\n", "must take one argument, the -p parameters"),
        ("def job(params):\n    return 1 / 0\n", "raised ZeroDivisionError: division by zero ("),
        ("def job(params):\n    return 42\n", "returned int, not a kstream Job"),
    ],
)
def test_errors_in_the_users_code_are_one_line(
    job_dir: Callable[[str, str], str], text: str, message: str
) -> None:
    name = job_dir("probe_broken", text)
    for spec in (f"{name}:job", f"{name}.py:job"):
        with pytest.raises(SpecError) as caught:
            load_job(spec, {})
        assert message in str(caught.value)
        assert "\n" not in str(caught.value)
        sys.modules.pop(name, None)


def test_an_unknown_module_says_where_it_looked(job_dir: Callable[[str, str], str]) -> None:
    job_dir("unrelated", "")
    with pytest.raises(SpecError, match=r"searched the current directory .* path/to/file\.py"):
        load_job("probe_nowhere:job", {})


# -- worker counts -------------------------------------------------------------


def test_a_worker_count_beyond_what_kafka_creates_names_the_largest_that_fits() -> None:
    job = wordcount({})
    # Word count on W workers: a W x W channel, W commit partitions, control and dead letters.
    assert sum(plan(job, 99).internal_topics().values()) == 99 * 99 + 99 + 2
    assert 99 * 99 + 99 + 2 <= MAX_INTERNAL_PARTITIONS < 100 * 100 + 100 + 2
    for workers in (100, 128):
        with pytest.raises(ConfigurationError) as caught:
            plan(job, workers)
        assert f"--workers {workers} needs" in str(caught.value)
        assert "use --workers 99 or fewer" in str(caught.value)
    # Beyond the max parallelism (128 key groups), that is said first.
    for workers in (200, 5000):
        with pytest.raises(ConfigurationError, match="more than its max parallelism 128"):
            plan(job, workers)


def test_a_job_restarted_with_another_worker_count_is_told_what_to_do() -> None:
    job = wordcount({"name": "wc"})
    existing = plan(job, 2).internal_topics()
    assert started_with(job, existing, 2) is None
    assert started_with(job, {}, 5) is None  # a new job
    problem = started_with(job, existing, 3)
    assert problem == (
        "job wc was started with 2 workers (kstream.wc.s1 has 4 partitions, 9 with 3 workers); "
        "run it again with --workers 2, or start it under a new --job-name; it has no "
        "checkpoint with key groups to rescale"
    )


def test_every_kstream_error_here_is_one_line() -> None:
    assert issubclass(MissingParameterError, KeyError)
    assert issubclass(MissingParameterError, KStreamError)
