"""`kstream.tools.spec`: ``-p`` parameters and loading a job from a module or a file.

(Errors raised by the user's own code are covered in ``test_cli_input.py``.)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kstream.dataflow.job import Job
from kstream.errors import ConfigurationError, MissingParameterError, SpecError
from kstream.tools.spec import Params, load_job, parse_params

JOB = """
from kstream.dataflow.job import Job
from kstream.connectors.kafka import KafkaSink, KafkaSource

def job(params):
    j = Job(params.get("name", "spec-probe"))
    j.source(KafkaSource("in")).sink(KafkaSink("out"))
    return j

ready = job({"name": "ready"})
number = 42

def strict(params):
    from kstream.errors import ConfigurationError
    raise ConfigurationError("the job refuses: " + params.get("why", "no reason"))
"""


@pytest.fixture
def write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], Path]]:
    """Write a job module into a fresh current directory; return its path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    written: list[str] = []

    def write(name: str) -> Path:
        path = tmp_path / f"{name}.py"
        path.write_text(JOB)
        written.append(name)
        return path

    yield write
    for name in written:
        sys.modules.pop(name, None)
        sys.modules.pop(f"kstream_job_{name}", None)


# -- parameters ---------------------------------------------------------------------


def test_parameters_split_at_the_first_equals_sign() -> None:
    assert parse_params(["a=1", "url=x=y", "empty="]) == {"a": "1", "url": "x=y", "empty": ""}
    assert parse_params([]) == {}


@pytest.mark.parametrize("second", ["a=2", "a=1"])
def test_a_parameter_given_twice_is_refused(second: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_params(["a=1", "b=3", second])
    assert str(caught.value) == (
        f"parameter 'a' is given twice (-p a=1 and -p {second}): give each parameter once"
    )


@pytest.mark.parametrize("item", ["novalue", "=value", ""])
def test_a_parameter_that_is_not_key_value_is_refused(item: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_params(["ok=1", item])
    assert str(caught.value) == f"parameter {item!r} must look like KEY=VALUE"


def test_a_missing_parameter_is_a_key_error_that_says_how_to_pass_it() -> None:
    params = Params({"input": "words"})
    assert params["input"] == "words"
    assert params.get("output", "default") == "default"
    with pytest.raises(KeyError) as caught:
        params["output"]
    assert isinstance(caught.value, MissingParameterError)
    assert str(caught.value) == ("the job needs parameter 'output': pass it with -p output=VALUE")


# -- specs ---------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["module", ":job", "module:", "file.py", ""])
def test_a_spec_without_module_and_attribute_is_refused(spec: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_job(spec, {})
    assert str(caught.value) == (f"job spec {spec!r} must be module:attribute or path.py:attribute")


def test_a_module_spec_calls_the_function_with_the_parameters(
    write: Callable[[str], Path],
) -> None:
    write("spec_mod")
    job = load_job("spec_mod:job", {"name": "from-params"})
    assert isinstance(job, Job)
    assert job.name == "from-params"


def test_a_file_spec_loads_the_file_wherever_it_is(
    write: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write("spec_file")
    monkeypatch.chdir("/")
    assert load_job(f"{path}:job", {}).name == "spec-probe"
    assert "kstream_job_spec_file" in sys.modules


def test_a_job_object_is_taken_as_it_is(write: Callable[[str], Path]) -> None:
    write("spec_ready")
    assert load_job("spec_ready:ready", {}).name == "ready"


def test_a_job_object_takes_no_parameters(write: Callable[[str], Path]) -> None:
    write("spec_ready_p")
    with pytest.raises(SpecError) as caught:
        load_job("spec_ready_p:ready", {"name": "x"})
    assert str(caught.value) == (
        "spec_ready_p:ready is a Job, not a function: it takes no -p parameters"
    )


def test_a_missing_attribute_is_named(write: Callable[[str], Path]) -> None:
    path = write("spec_attr")
    with pytest.raises(SpecError, match=r"^spec_attr has no attribute 'jbo'$"):
        load_job("spec_attr:jbo", {})
    with pytest.raises(SpecError) as caught:
        load_job(f"{path}:jbo", {})
    assert str(caught.value) == f"{path} has no attribute 'jbo'"


def test_an_attribute_that_is_neither_job_nor_function_is_refused(
    write: Callable[[str], Path],
) -> None:
    write("spec_number")
    with pytest.raises(SpecError) as caught:
        load_job("spec_number:number", {})
    assert str(caught.value) == (
        "spec_number:number is a int, not a Job or a function returning one"
    )


def test_a_job_file_that_does_not_exist_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.py"
    with pytest.raises(SpecError) as caught:
        load_job(f"{missing}:job", {})
    assert str(caught.value) == f"job file {missing} does not exist"


def test_a_kstream_error_of_the_job_function_passes_unchanged(
    write: Callable[[str], Path],
) -> None:
    write("spec_strict")
    with pytest.raises(ConfigurationError) as caught:
        load_job("spec_strict:strict", {"why": "bad input"})
    assert not isinstance(caught.value, SpecError)
    assert str(caught.value) == "the job refuses: bad input"


def test_every_spec_error_is_a_configuration_error() -> None:
    # The CLI prints a KStreamError as one line; a wrong spec is the user's input.
    assert issubclass(SpecError, ConfigurationError)
    assert issubclass(MissingParameterError, SpecError)
