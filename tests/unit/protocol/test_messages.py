"""Control messages (`kstream.protocol.messages`): the wire form stays what it was."""

from __future__ import annotations

import json
import logging
from typing import Any, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.protocol.counters import WorkerCounters
from kstream.protocol.identity import JobIdentity
from kstream.protocol.messages import (
    Aborted,
    Acked,
    Completed,
    ControlMessage,
    Declined,
    Initiated,
    Presence,
    Recovered,
    RestoreFailed,
    SavepointDone,
    SavepointRequested,
    Triggered,
    WorkerAlive,
    WorkerFailed,
    checkpoint_of,
    decode,
    decode_all,
    generation_of,
)

IDENTITY = {
    "format": 2,
    "parallelism": [2, 2],
    "sources": ["kafka:in"],
    "sinks": ["kafka:out"],
    "operators": ["s1.process:count"],
}

#: One message of every type, as the writers put it on the wire before the
#: messages had classes (key order included), and what it reads as.
WRITTEN: list[tuple[dict[str, Any], ControlMessage]] = [
    (
        {
            "type": "initiate",
            "checkpoint": 5121,
            "generation": 2,
            "task": "s0-0",
            "time": 1763900002.5,
        },
        Initiated(5121, 2, "s0-0", 1763900002.5),
    ),
    (
        {
            "type": "recover",
            "generation": 3,
            "checkpoint": 7,
            "reason": "worker w1 lost: killed by signal 9",
            "time": 1763900000.25,
        },
        Recovered(3, 7, "worker w1 lost: killed by signal 9", 1763900000.25),
    ),
    (
        {
            "type": "recover",
            "generation": 4,
            "checkpoint": None,
            "reason": "job started",
            "time": 1763900001.5,
            "fresh": True,
        },
        Recovered(4, None, "job started", 1763900001.5, fresh=True),
    ),
    (
        {"type": "trigger", "checkpoint": 8, "generation": 3, "time": 1763900002.0},
        Triggered(8, 3, 1763900002.0),
    ),
    (
        {
            "type": "ack",
            "checkpoint": 8,
            "generation": 3,
            "task": "s1-0",
            "size": 4096,
            "alignment_ms": 1.25,
            "sync_ms": 3.5,
            "channel_offsets": {"kstream.j.s1": {"0": 120, "1": 98}},
            "source_offsets": {},
        },
        Acked(8, 3, "s1-0", 4096, 1.25, 3.5, {"kstream.j.s1": {0: 120, 1: 98}}, {}),
    ),
    (
        {
            "type": "ack",
            "checkpoint": 8,
            "generation": 3,
            "task": "s0-1",
            "size": 0,
            "alignment_ms": 0.0,
            "sync_ms": 0.731,
            "channel_offsets": {},
            "source_offsets": {"in": {"1": 5, "3": 0}},
        },
        Acked(8, 3, "s0-1", 0, 0.0, 0.731, {}, {"in": {1: 5, 3: 0}}),
    ),
    (
        {
            "type": "ack",
            "checkpoint": 9,
            "generation": 3,
            "task": "s1-1",
            "size": 512,
            "alignment_ms": 2.5,
            "sync_ms": 1.0,
            "channel_offsets": {"kstream.j.s1": {"1": 40}},
            "source_offsets": {},
            "unaligned": True,
            "in_flight": 17,
            "marker_offsets": {"kstream.j.commits": {"1": 9}},
        },
        Acked(
            9,
            3,
            "s1-1",
            512,
            2.5,
            1.0,
            {"kstream.j.s1": {1: 40}},
            {},
            True,
            17,
            {"kstream.j.commits": {1: 9}},
        ),
    ),
    (
        {
            "type": "decline",
            "checkpoint": 9,
            "generation": 3,
            "task": "s1-1",
            "reason": "alignment abandoned",
        },
        Declined(9, 3, "s1-1", "alignment abandoned"),
    ),
    (
        {
            "type": "complete",
            "checkpoint": 8,
            "generation": 3,
            "duration_s": 0.1234,
            "size": 4096,
            "alignment_ms": 1.25,
            "time": 1763900002.5,
            "identity": IDENTITY,
        },
        Completed(8, 3, 0.1234, 4096, 1.25, 1763900002.5, JobIdentity.from_json(IDENTITY)),
    ),
    (
        {
            "type": "abort",
            "checkpoint": 9,
            "generation": 3,
            "reason": "not complete within 60s",
            "time": 1763900003.0,
        },
        Aborted(9, 3, "not complete within 60s", 1763900003.0),
    ),
    (
        {
            "type": "heartbeat",
            "worker": "w0",
            "generation": 3,
            "time": 1763900004.0,
            "process": "a1b2c3d4e5f6",
            "counters": {"in": 10, "out": 9, "dead_letters": 1},
            "dead_letter": "s0-0: in[0]@7: ValueError: bad",
        },
        WorkerAlive(
            "w0",
            3,
            1763900004.0,
            "a1b2c3d4e5f6",
            WorkerCounters(10, 9, 1),
            "s0-0: in[0]@7: ValueError: bad",
        ),
    ),
    (
        {
            "type": "heartbeat",
            "worker": "w1",
            "generation": 3,
            "time": None,
            "process": None,
            "counters": None,
            "dead_letter": "",
            "stuck": "s0-1: work() (job.py:3) has not returned for 10s on ('x'); stuck at a",
            "stuck_on": "s0-1: work() on ('x')",
        },
        WorkerAlive(
            "w1",
            3,
            stuck="s0-1: work() (job.py:3) has not returned for 10s on ('x'); stuck at a",
            stuck_on="s0-1: work() on ('x')",
        ),
    ),
    (
        {"type": "failed", "worker": "w1", "reason": "s1-0: KeyError: 'x'"},
        WorkerFailed("w1", "s1-0: KeyError: 'x'"),
    ),
    (
        {
            "type": "restore-failed",
            "worker": "w0",
            "generation": 4,
            "checkpoint": 7,
            "reason": "chk-7/s1-0: missing",
        },
        RestoreFailed("w0", 4, 7, "chk-7/s1-0: missing"),
    ),
    (
        {
            "type": "coordinator",
            "incarnation": "5f0c",
            "pid": 4242,
            "host": "host-1",
            "state_dir": "/srv/state",
            "time": 1763900005.0,
            "stopped": False,
            "every": 4.0,
        },
        Presence("5f0c", 4242, "host-1", "/srv/state", 1763900005.0, every=4.0),
    ),
    (
        {
            "type": "savepoint",
            "request": "ab12",
            "target": "s3://b/sp",
            "stop": True,
            "time": 1763900006.0,
        },
        SavepointRequested("ab12", "s3://b/sp", True, 1763900006.0),
    ),
    (
        {
            "type": "savepoint-done",
            "request": "ab12",
            "checkpoint": 9,
            "url": "s3://b/sp",
            "error": "",
            "time": 1763900007.0,
        },
        SavepointDone("ab12", 9, "s3://b/sp", "", 1763900007.0),
    ),
]


@pytest.mark.parametrize(("wire", "message"), WRITTEN, ids=lambda v: str(getattr(v, "TYPE", "")))
def test_messages_as_written_before_read_and_write_the_same(
    wire: dict[str, Any], message: ControlMessage
) -> None:
    assert decode(wire) == message
    # Same keys, same values, same order: the same bytes on the topic.
    assert json.dumps(message.to_dict()) == json.dumps(wire)


def test_every_type_has_a_sample_and_a_name_of_its_own() -> None:
    classes = get_args(ControlMessage)
    assert {type(m) for _, m in WRITTEN} == set(classes)
    assert len({c.TYPE for c in classes}) == len(classes)


def test_what_older_and_shorter_messages_read_as() -> None:
    # Statistics, times and identities are optional; a bad identity or counters
    # object costs only that field, never the message.
    assert decode({"type": "complete", "checkpoint": 1, "generation": 1}) == Completed(1, 1)
    bad_identity = {"type": "complete", "checkpoint": 1, "generation": 1, "identity": {"x": 1}}
    assert decode(bad_identity) == Completed(1, 1)
    beat = {"type": "heartbeat", "worker": "w0", "generation": 2, "counters": {"in": -1}}
    assert decode(beat) == WorkerAlive("w0", 2)
    # Heartbeats of earlier versions never said "restoring": their workers had joined.
    older = {"type": "heartbeat", "worker": "w0", "generation": 2}
    assert decode(older) == WorkerAlive("w0", 2, restoring=False)
    assert decode({**beat, "restoring": "yes"}) == WorkerAlive("w0", 2)
    assert decode({"type": "ack", "checkpoint": 1, "generation": 1, "task": "t"}) == Acked(
        1, 1, "t"
    )


MALFORMED: list[object] = [
    {"type": "initiate", "checkpoint": 5121, "generation": 2},
    {"type": "initiate", "checkpoint": 0, "generation": 2, "task": "s0-0"},
    {"type": "initiate", "checkpoint": "5121", "generation": 2, "task": "s0-0"},
    {"type": "recover", "reason": "no generation"},
    {"type": "trigger", "generation": 2},
    {"type": "abort", "checkpoint": "x", "generation": 2},
    {"type": "complete", "checkpoint": True, "generation": 1},
    {"type": "ack", "checkpoint": 1, "generation": 1},
    {"type": "ack", "checkpoint": 1, "generation": 1, "task": "t", "channel_offsets": [1]},
    {"type": "ack", "checkpoint": 1, "generation": 1, "task": "t", "size": "big"},
    {"type": "heartbeat", "worker": "w0"},
    {"type": "failed", "reason": "who?"},
    {
        "type": "coordinator",
        "incarnation": "a",
        "pid": "42",
        "host": "h",
        "state_dir": "/",
        "time": 1,
    },
    {"type": "telemetry", "x": 1},
    {"no": "type"},
    ["not", "an", "object"],
    "text",
]


@pytest.mark.parametrize("wire", MALFORMED)
def test_unknown_and_malformed_records_are_no_message_and_say_so(
    wire: object, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="kstream.control"):
        assert decode(wire) is None
    assert caplog.records, "a skipped record is logged"


def test_decode_all_keeps_the_messages_in_order() -> None:
    wires = [wire for wire, _ in WRITTEN]
    assert decode_all([MALFORMED[0], *wires, MALFORMED[-1]]) == [m for _, m in WRITTEN]


# -- any message survives its wire form -----------------------------------------

ints = st.integers(min_value=0, max_value=2**53)
floats = st.floats(allow_nan=False, allow_infinity=False)
texts = st.text(max_size=30)
offsets = st.dictionaries(texts, st.dictionaries(ints, ints, max_size=4), max_size=3)
identities = st.builds(
    JobIdentity,
    ints,
    st.lists(ints, max_size=4).map(tuple),
    st.lists(texts, max_size=3).map(tuple),
    st.lists(texts, max_size=3).map(tuple),
    st.lists(texts, max_size=3).map(tuple),
)
counters = st.builds(WorkerCounters, ints, ints, ints)

messages: st.SearchStrategy[ControlMessage] = st.one_of(
    st.builds(
        Recovered, ints, st.none() | ints, texts, st.none() | floats, st.booleans(), st.booleans()
    ),
    st.builds(Triggered, ints, ints, st.none() | floats),
    st.builds(
        Acked, ints, ints, texts, ints, floats, floats, offsets, offsets, st.booleans(), ints
    ),
    st.builds(Declined, ints, ints, texts, texts),
    st.builds(
        Completed,
        ints,
        ints,
        st.none() | floats,
        st.none() | ints,
        st.none() | floats,
        st.none() | floats,
        st.none() | identities,
    ),
    st.builds(Aborted, ints, ints, texts, st.none() | floats),
    st.builds(
        WorkerAlive,
        texts,
        ints,
        st.none() | floats,
        st.none() | texts,
        st.none() | counters,
        texts,
        st.booleans(),
    ),
    st.builds(WorkerFailed, texts, texts),
    st.builds(RestoreFailed, texts, ints, st.none() | ints, texts),
    st.builds(Presence, texts, ints, texts, texts, floats, st.booleans()),
    st.builds(SavepointRequested, texts, texts, st.booleans(), st.none() | floats),
    st.builds(SavepointDone, texts, st.none() | ints, texts, texts, st.none() | floats),
)


@given(messages)
def test_every_message_round_trips_through_json(message: ControlMessage) -> None:
    wire = json.loads(json.dumps(message.to_dict()))
    assert wire["type"] == message.TYPE
    assert decode(wire) == message
    # The dict is already in its JSON form (partition keys are strings).
    assert wire == message.to_dict()


@given(messages)
def test_generation_and_checkpoint_are_read_off_any_message(message: ControlMessage) -> None:
    wire = message.to_dict()
    assert generation_of(message) == wire.get("generation")
    assert checkpoint_of(message) == wire.get("checkpoint")


def test_a_heartbeats_alignment_report_round_trips_and_is_bounded() -> None:
    from kstream.protocol.worker_alive import MAX_CHANNELS, SubtaskAlignment

    many = [(f"t[{p}]", p) for p in range(MAX_CHANNELS + 5)]
    report = SubtaskAlignment.of("s1-0", 40, 7, many, 6, [("t[1]", 3)])
    assert len(report.arrived) == MAX_CHANNELS
    beat = WorkerAlive("w0", 2, 1.0, "p", alignment=(report,))
    wire = json.loads(json.dumps(beat.to_dict()))
    assert wire["alignment"][0]["recording"] == {"t[1]": 3}
    assert decode(wire) == beat
    # Absent when empty (a heartbeat keeps the bytes it had); malformed reads as none.
    assert "alignment" not in WorkerAlive("w0", 2).to_dict()
    assert decode({**wire, "alignment": "x"}) == WorkerAlive("w0", 2, 1.0, "p")
    odd = {**wire, "alignment": [{"task": 3}, {"task": "s0-0", "arrived": {"a": "b"}}]}
    assert decode(odd) == WorkerAlive("w0", 2, 1.0, "p", alignment=(SubtaskAlignment("s0-0", 0),))
