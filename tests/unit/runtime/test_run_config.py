"""`kstream.runtime.config`: the run configuration and the JSON form workers read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.dataflow.outputs import GUARANTEES
from kstream.errors import ConfigurationError
from kstream.protocol.barrier import Alignment
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.flow import FlowConfig
from kstream.runtime.config import JobRef, RunConfig, StartOptions

text = st.text(max_size=20)
seconds = st.floats(min_value=0.001, max_value=1e6, allow_nan=False)
maybe_seconds = st.none() | seconds


@st.composite
def configs(draw: st.DrawFn) -> RunConfig:
    concurrent = draw(st.booleans())
    max_lag = draw(st.integers(0, 10_000))
    return RunConfig(
        job=JobRef(draw(text), draw(st.dictionaries(text, text, max_size=3)), draw(text)),
        bootstrap=draw(text),
        workers=draw(st.integers(1, 64)),
        state_dir=Path("/") / draw(st.from_regex(r"[a-z]{1,8}", fullmatch=True)),
        kafka_config=draw(st.none() | st.just(Path("/etc/kafka.properties"))),
        checkpoints=CoordinatorConfig(
            interval=draw(seconds),
            timeout=draw(seconds),
            max_in_flight=draw(st.integers(1, 8)),
            retained=draw(st.integers(1, 8)),
            liveness_timeout=draw(seconds),
            tolerable_timeouts=draw(st.integers(0, 5)),
            concurrent=concurrent,
        ),
        guarantee=draw(st.sampled_from(GUARANTEES)),
        transaction_timeout_s=draw(maybe_seconds),
        flow=FlowConfig(
            max_lag=max_lag,
            resume_lag=draw(st.none() | st.integers(0, max_lag)),
            stale_after_s=draw(seconds),
        ),
        alignment=draw(st.sampled_from(list(Alignment))),
        alignment_timeout_s=draw(maybe_seconds),
        alignment_hold_bytes=draw(st.integers(0, 1 << 40)),
        source_snapshot_interval_s=draw(maybe_seconds),
        start=StartOptions(
            fresh=draw(st.booleans()),
            accept_changes=False,
            create_topics=draw(st.booleans()),
            allow_feedback=draw(st.booleans()),
            spawn=draw(st.booleans()),
        ),
    )


@given(configs())
def test_the_json_form_reads_back_as_the_same_configuration(config: RunConfig) -> None:
    line = config.to_json()
    assert "\n" not in line  # one line on the worker's stdin
    assert json.loads(line)["version"] == 1
    assert RunConfig.from_json(line) == config


def a_form() -> dict[str, Any]:
    config = RunConfig(JobRef("job.py:job", {"k": "v"}, "j"), "b:9092", 2, Path("/s"))
    form: dict[str, Any] = json.loads(config.to_json())
    return form


def test_the_form_has_enums_by_value_and_paths_as_strings() -> None:
    form = a_form()
    assert form["alignment"] == "aligned"
    assert form["state_dir"] == "/s"
    assert form["kafka_config"] is None
    assert form["checkpoints"]["interval"] == 1.0
    assert form["job"] == {"spec": "job.py:job", "params": {"k": "v"}, "name": "j"}


def refusal(form: dict[str, Any]) -> str:
    with pytest.raises(ConfigurationError) as caught:
        RunConfig.from_json(json.dumps(form))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_an_unknown_key_is_refused_by_name() -> None:
    form = a_form()
    form["checkpoints"]["intervall"] = 2.0
    assert "unknown key 'checkpoints.intervall'" in refusal(form)
    form = a_form()
    form["colour"] = "red"
    assert "unknown key 'colour'" in refusal(form)


def test_a_missing_key_is_refused_by_name() -> None:
    form = a_form()
    del form["flow"]["max_lag"]
    assert "missing key 'flow.max_lag'" in refusal(form)
    form = a_form()
    del form["workers"]
    assert "missing key 'workers'" in refusal(form)


@pytest.mark.parametrize(
    ("path", "value", "said"),
    [
        (("workers",), "2", "key 'workers' must be int"),
        (("workers",), True, "key 'workers' must be int"),
        (("state_dir",), 3, "key 'state_dir' must be Path"),
        (("alignment",), "sideways", "key 'alignment' must be one of aligned, unaligned"),
        (("guarantee",), "maybe", "key 'guarantee' must be one of exactly-once"),
        (("transaction_timeout_s",), "60", "key 'transaction_timeout_s' must be"),
        (("start", "fresh"), 1, "key 'start.fresh' must be bool"),
        (("job", "params"), ["a"], "key 'job.params' must be"),
        (("job", "params", "k"), 5, "key 'job.params.k' must be str"),
        (("checkpoints",), 1.0, "'checkpoints' is not an object"),
    ],
)
def test_a_mistyped_key_is_refused_by_name(path: tuple[str, ...], value: Any, said: str) -> None:
    form = a_form()
    at = form
    for name in path[:-1]:
        at = at[name]
    at[path[-1]] = value
    assert said in refusal(form)


def test_another_version_is_refused() -> None:
    form = a_form()
    form["version"] = 2
    assert "version 2" in refusal(form)
    del form["version"]
    assert "version None" in refusal(form)


def test_a_float_duration_may_be_written_as_an_integer() -> None:
    form = a_form()
    form["checkpoints"]["interval"] = 2
    assert RunConfig.from_json(json.dumps(form)).checkpoints.interval == 2.0


def test_values_the_settings_refuse_are_refused_when_read() -> None:
    form = a_form()
    form["checkpoints"]["interval"] = 0
    assert "checkpoint interval must be > 0" in refusal(form)
    form = a_form()
    form["alignment_hold_bytes"] = -1
    assert "the alignment hold must be >= 0 bytes, got -1" in refusal(form)


def test_fresh_and_accept_changes_exclude_each_other() -> None:
    with pytest.raises(ConfigurationError, match="exclude each other"):
        StartOptions(fresh=True, accept_changes=True)
