"""`kstream.protocol.retention`: the kept suffix of a control topic reads as the whole."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_messages import messages as any_message

from kstream.errors import ConfigurationError
from kstream.protocol.coordinator import replay
from kstream.protocol.messages import (
    Acked,
    Completed,
    ControlMessage,
    Presence,
    Recovered,
    Triggered,
    WorkerAlive,
)
from kstream.protocol.presence import last_presence
from kstream.protocol.retention import ControlRetention, Positions, purge_points, restatement


def latest_recover(messages: list[ControlMessage]) -> tuple[int, int | None] | None:
    """What a joining worker restores: the generation and checkpoint of the latest ``recover``."""
    found = [m for m in messages if isinstance(m, Recovered)]
    return (found[-1].generation, found[-1].checkpoint) if found else None


def kept(messages: list[ControlMessage], retained: int) -> list[ControlMessage] | None:
    retention = ControlRetention(retained)
    for offset, message in enumerate(messages):
        retention.saw(offset, message)
    keep = retention.keep_from()
    return None if keep is None else messages[keep:]


#: A job's life as the runner writes it: mostly triggers, acks, completions and
#: heartbeats in order, with recoveries (some fresh) and announcements.
def _life(draw: st.DrawFn) -> list[ControlMessage]:
    out: list[ControlMessage] = []
    generation, checkpoint = 0, 0
    recover: Recovered | None = None
    for step in draw(st.lists(st.sampled_from("RrsTACHPx"), max_size=60)):
        if step == "s" and recover is not None:
            out.append(restatement(recover))  # what the runner writes to purge past it
        elif step in "Rrs" or generation == 0:
            generation += 1
            recover = Recovered(generation, checkpoint or None, fresh=step == "r")
            out.append(recover)
        elif step == "T":
            checkpoint += 1
            out.append(Triggered(checkpoint, generation))
        elif step == "A":
            out.append(Acked(checkpoint, generation, "s0-0"))
        elif step == "C":
            out.append(Completed(checkpoint, generation))
        elif step == "H":
            out.append(WorkerAlive("w0", generation))
        elif step == "P":
            out.append(Presence("i", 1, "h", "/s", float(len(out)), draw(st.booleans())))
        else:
            out.append(draw(any_message))  # anything at all, as an old or foreign writer left it
    return out


lives = st.composite(_life)()


@settings(max_examples=400)
@given(st.one_of(lives, st.lists(any_message, max_size=40)), st.integers(1, 4))
# Completions out of id order (as a foreign writer may leave them): `replay` keeps
# the largest id, so the suffix must hold it even though a smaller one came later.
@example(
    [Completed(1, 0), Recovered(0, None), Triggered(1, 0), Completed(0, 0)],
    1,
)
def test_the_kept_suffix_restarts_a_runner_and_a_worker_as_the_whole_topic_does(
    messages: list[ControlMessage], retained: int
) -> None:
    suffix = kept(messages, retained)
    if suffix is None:
        assert latest_recover(messages) is None  # never started: nothing may go
        return
    assert replay(suffix, retained) == replay(messages, retained)
    assert last_presence(suffix) == last_presence(messages)
    assert latest_recover(suffix) == latest_recover(messages)


def test_a_long_run_keeps_only_what_follows_its_oldest_retained_completion() -> None:
    messages: list[ControlMessage] = [Recovered(1, None)]
    for n in range(1, 101):
        messages += [Triggered(n, 1), Acked(n, 1, "s0-0"), Completed(n, 1)]
        messages.append(Presence("i", 1, "h", "/s", float(n), False))
    suffix = kept(messages, 3)
    assert suffix is not None
    # Recovered(1) is the latest recover: a joining worker needs it, so it stays.
    assert suffix == messages
    messages.append(Recovered(2, 100))
    messages += [Triggered(101, 2), Completed(101, 2), Presence("i", 1, "h", "/s", 101.0, False)]
    suffix = kept(messages, 3)
    assert suffix is not None
    assert suffix[0] == Completed(99, 1)  # the oldest of the three retained
    assert len(suffix) == 10


def test_a_restated_recover_lets_the_original_go() -> None:
    messages: list[ControlMessage] = [Recovered(1, None, fresh=True)]
    for n in range(1, 6):
        messages += [Triggered(n, 1), Completed(n, 1)]
    messages.append(restatement(messages[0]))  # type: ignore[arg-type]
    messages.append(Presence("i", 1, "h", "/s", 6.0, False))
    suffix = kept(messages, 2)
    assert suffix is not None
    assert suffix[0] == Completed(4, 1)
    assert replay(suffix, 2) == replay(messages, 2)
    assert latest_recover(suffix) == (1, None)


def test_retaining_no_checkpoint_is_refused() -> None:
    with pytest.raises(ConfigurationError):
        ControlRetention(0)


def test_channels_are_purged_up_to_the_earliest_retained_position() -> None:
    retained = [
        {"c": {0: 10, 1: 5}, "d": {0: 7}},
        # Concurrent snapshots: a later checkpoint may stand earlier on a channel.
        {"c": {0: 8, 1: 9}, "d": {0: 0}},
    ]
    # A partition at 0 is not purged; one some checkpoint does not name is kept.
    assert purge_points(retained) == {"c": {0: 8, 1: 5}}
    assert purge_points([{"c": {0: 3}}, {"e": {0: 4}}]) == {}
    assert purge_points([]) == {}


@given(
    st.lists(
        st.dictionaries(
            st.sampled_from("ab"),
            st.dictionaries(st.integers(0, 2), st.integers(0, 20), max_size=3),
            max_size=2,
        ),
        max_size=4,
    )
)
def test_no_retained_checkpoint_reads_before_a_purge_point(retained: list[Positions]) -> None:
    for topic, parts in purge_points(retained).items():
        for p, at in parts.items():
            assert at > 0
            assert all(at <= r[topic][p] for r in retained)
