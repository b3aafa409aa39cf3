"""The broker-free harness (`kstream.testing.harness`): jobs run through their real
chains, state, watermarks, channel serde and error policy, checked against values
computed here independently."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import kstream
import kstream.testing
from kstream import Job, JobFailedError, KafkaSink, KafkaSource, KeyedContext
from kstream.examples import windowed_counts, wordcount
from kstream.protocol.names import ERROR_HEADER, dead_letter_topic
from kstream.testing import Record, TestRun, run_job

WORDS = ["kafka", "stream", "state", "window", "timer", "barrier"]


def test_the_word_count_counts_every_word_in_order() -> None:
    rnd = random.Random(5)
    lines = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randrange(1, 6))) for _ in range(200)]
    outputs = run_job(wordcount.job, {"words": [Record(line) for line in lines]})
    seen: Counter[str] = Counter()
    expected = []
    for line in lines:
        for word in line.split():
            seen[word] += 1
            expected.append((word, str(seen[word])))
    assert [(r.key, r.value) for r in outputs["word-counts"]] == expected
    assert outputs[dead_letter_topic("wordcount-words-word-counts")] == []


def _event(key: str, ts: int) -> Record:
    return Record({"key": key, "ts": ts, "value": 1})


def _window_counts(events: list[tuple[str, int]], size: int) -> dict[tuple[str, int], int]:
    """(key, window start) -> records in the tumbling window of `size` ms."""
    return dict(Counter((key, ts - ts % size) for key, ts in events))


def test_windowed_counts_fire_once_the_watermark_passes_the_window() -> None:
    rnd = random.Random(11)
    # In order and below 2_000: the source's own watermark (1 s of disorder) stays
    # below 1_000, the end of the first windows, and no record is late.
    events = sorted(((rnd.choice("abc"), rnd.randrange(0, 2_000)) for _ in range(60)), key=at)
    expected = _window_counts(events, 1_000)
    params = {"input": "events", "output": "counts", "size": "1000"}
    with TestRun(windowed_counts.job, params=params) as run:
        run.send("events", [_event(k, ts) for k, ts in events])
        assert run.output("counts") == []
        run.advance_watermark(1_000)
        assert _fired(run.output("counts")) == {w: n for w, n in expected.items() if w[1] == 0}
        run.advance_watermark(2_000)
        assert _fired(run.output("counts")) == expected
        assert len(run.output("counts")) == len(expected)
        # Behind the watermark now: late, to the late topic.
        run.send("events", [_event("a", 10)])
        assert [r.value["timestamp"] for r in run.output("counts-late")] == [10]
        assert len(run.output("counts")) == len(expected)
        assert run.dead_letters() == []


def at(event: tuple[str, int]) -> int:
    return event[1]


def _fired(outputs: list[Record]) -> dict[tuple[str, int], int]:
    return {(r.value["key"], r.value["start"]): r.value["value"] for r in outputs}


def test_run_job_fires_every_window_at_the_end() -> None:
    rnd = random.Random(12)
    events = [(rnd.choice("xy"), rnd.randrange(0, 20_000)) for _ in range(100)]
    events.sort(key=at)  # in order: none late
    outputs = run_job(
        windowed_counts.job,
        {"events": [_event(k, ts) for k, ts in events]},
        params={"input": "events", "output": "counts", "size": "2000"},
    )
    assert _fired(outputs["counts"]) == _window_counts(events, 2_000)
    # A result's timestamp is its window's end (its timer's time).
    assert all(r.timestamp == r.value["end"] for r in outputs["counts"])


def distinct_pages(user: str, page: str, ctx: KeyedContext) -> Iterator[tuple[str, int]]:
    """Per user, how many distinct pages so far (a map state) and visits (a list)."""
    pages, visits = ctx.map("pages"), ctx.list("visits")
    pages.put(page, True)
    visits.append(page)
    yield user, len(list(pages.keys())) * 1000 + len(list(visits))


def state_job() -> Job:
    j = Job("visits")
    (
        j.source(KafkaSource("clicks"))
        .map(str.split)
        .key_by(lambda pair: pair[0])
        .process(lambda user, pair, ctx: distinct_pages(user, pair[1], ctx), name="pages")
        .sink(KafkaSink("pages", value_serde="json"))
    )
    return j


def test_keyed_state_lives_in_the_state_store_across_sends() -> None:
    rnd = random.Random(3)
    clicks = [(f"u{rnd.randrange(4)}", f"p{rnd.randrange(5)}") for _ in range(120)]
    expected = []
    pages: dict[str, set[str]] = {}
    visits: Counter[str] = Counter()
    for user, page in clicks:
        pages.setdefault(user, set()).add(page)
        visits[user] += 1
        expected.append((user, len(pages[user]) * 1000 + visits[user]))
    with TestRun(state_job()) as run:
        # Two sends: the state written by the first is read back by the second.
        run.send("clicks", [Record(f"{u} {p}") for u, p in clicks[:60]])
        run.send("clicks", [Record(f"{u} {p}") for u, p in clicks[60:]])
        assert [(r.key, r.value) for r in run.output("pages")] == expected
        assert run.dead_letters() == []


def remind(user: str, _: str, ctx: KeyedContext) -> None:
    """Count a user's events; the first one sets a processing-time timer 1 s later."""
    n = ctx.get(0)
    if n == 0:
        ctx.timers.register_processing(ctx.now() + 1_000)
    ctx.set(n + 1)


def reminded(user: str, ts: int, ctx: KeyedContext) -> Iterator[tuple[str, str]]:
    yield user, f"{ctx.get(0)}@{ts}"


def timer_job() -> Job:
    j = Job("reminders")
    (
        j.source(KafkaSource("events", timestamps="kafka"))
        .key_by(lambda user: user)
        .process(remind, on_timer=reminded, name="remind")
        .sink(KafkaSink("reminders"))
    )
    return j


def test_processing_time_timers_fire_only_when_the_clock_is_moved() -> None:
    with TestRun(timer_job()) as run:
        run.send("events", [Record(u, timestamp=1_000) for u in ["a", "b", "a"]])
        run.advance_watermark(10**12)  # event time fires nothing processing-timed
        assert run.output("reminders") == []
        run.advance_processing_time(500)
        run.send("events", [Record(u, timestamp=2_000) for u in ["c", "a"]])  # c's: 1_500
        run.advance_processing_time(999)
        assert run.output("reminders") == []
        run.advance_processing_time(1_000)
        assert [(r.key, r.value) for r in run.output("reminders")] == [
            ("a", "3@1000"),
            ("b", "1@1000"),
        ]
        run.advance_processing_time(1_500)
        assert [(r.key, r.value) for r in run.output("reminders")][2:] == [("c", "1@1500")]
        with pytest.raises(kstream.ConfigurationError, match="forward"):
            run.advance_processing_time(1_000)


def test_run_job_fires_no_processing_time_timer() -> None:
    assert run_job(timer_job(), {"events": [Record("a", timestamp=5)]})["reminders"] == []


def parse_amount(line: str) -> tuple[str, int]:
    user, amount = line.split()
    return user, int(amount)


def totals_job(on_error: Any = "dead-letter") -> Job:
    j = Job("totals", on_error=on_error)
    (
        j.source(KafkaSource("payments"))
        .map(parse_amount)
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .map(lambda kv: (kv[0], kv[1][1]))
        .sink(KafkaSink("totals"))
    )
    return j


def test_a_record_that_raises_goes_to_the_dead_letters() -> None:
    lines = ["a 5", "b 7", "a x", "a 3", "oops"]
    with TestRun(totals_job()) as run:
        run.send("payments", [Record(line, key=f"k{i}") for i, line in enumerate(lines)])
        assert [(r.key, r.value) for r in run.output("totals")] == [
            ("a", "5"),
            ("b", "7"),
            ("a", "8"),
        ]
        dead = run.dead_letters()
        assert [(d.key, d.value) for d in dead] == [(b"k2", b"a x"), (b"k4", b"oops")]
        assert [(d.header("kstream.src.topic"), d.header("kstream.src.offset")) for d in dead] == [
            (b"payments", b"2"),
            (b"payments", b"4"),
        ]
        error = dead[0].header(ERROR_HEADER) or b""
        assert error.startswith(b"ValueError: invalid literal for int()")
        assert run.outputs()[dead_letter_topic("totals")] == dead


def test_under_the_fail_policy_a_record_that_raises_stops_the_run() -> None:
    with TestRun(totals_job("fail")) as run:
        run.send("payments", [Record("a 1")])
        with pytest.raises(JobFailedError, match="invalid literal"):
            run.send("payments", [Record("a x")])


class Opaque:
    """A class the job did not declare: channels cannot carry it."""

    def __init__(self, n: int) -> None:
        self.n = n


def opaque_job(on_error: Any = "dead-letter") -> Job:
    j = Job("opaque", on_error=on_error)
    (
        j.source(KafkaSource("numbers"))
        .map(lambda s: Opaque(int(s)) if s == "3" else int(s))
        .key_by(lambda v: "all")
        .reduce(lambda a, b: a + b)
        .map(lambda kv: kv[1])
        .sink(KafkaSink("sums"))
    )
    return j


def test_a_record_the_channel_serde_cannot_carry_is_refused_between_stages() -> None:
    with TestRun(opaque_job()) as run:
        run.send("numbers", [Record(s) for s in ["1", "2", "3", "4"]])
        assert [r.value for r in run.output("sums")] == ["1", "3", "7"]
        (dead,) = run.dead_letters()
        assert (dead.header(ERROR_HEADER) or b"").startswith(b"UnsupportedTypeError")
        assert b"channel_serde" in (dead.header(ERROR_HEADER) or b"")
        assert b"Opaque object" in (dead.value or b"")  # its repr
    with TestRun(opaque_job("fail")) as run, pytest.raises(JobFailedError, match="Opaque"):
        run.send("numbers", [Record("3")])


def test_a_value_the_source_cannot_decode_is_a_dead_letter() -> None:
    outputs = run_job(wordcount.job, {"words": [Record(b"\xff\xfe"), Record("fine")]})
    assert [(r.key, r.value) for r in outputs["word-counts"]] == [("fine", "1")]
    (dead,) = outputs[dead_letter_topic("wordcount-words-word-counts")]
    assert dead.value == b"\xff\xfe"
    assert (dead.header(ERROR_HEADER) or b"").startswith(b"DecodeError")


def test_unknown_topics_are_named() -> None:
    with TestRun(wordcount.job) as run:
        with pytest.raises(kstream.ConfigurationError, match=r"reads \['words'\]"):
            run.send("nope", [])
        with pytest.raises(kstream.ConfigurationError, match="word-counts"):
            run.output("nope")


def test_every_name_of_the_kafka_tools_is_still_importable_from_kstream_testing() -> None:
    from kstream.testing import kafka

    for name in kafka.__all__:
        assert getattr(kstream.testing, name) is getattr(kafka, name)
    assert {"Record", "TestRun", "run_job"} <= set(kstream.testing.__all__)


def fails_on_timer(user: str, ts: int, ctx: KeyedContext) -> Iterator[tuple[str, str]]:
    raise RuntimeError(f"no reminder for {user}")


def test_a_timer_that_raises_goes_to_the_dead_letters_with_its_key_and_time() -> None:
    j = Job("failing-reminders")
    (
        j.source(KafkaSource("events", timestamps="kafka"))
        .key_by(lambda user: user)
        .process(remind, on_timer=fails_on_timer, name="remind")
        .sink(KafkaSink("reminders"))
    )
    with TestRun(j) as run:
        run.send("events", [Record("a", timestamp=1)])
        run.advance_processing_time(1_000)
        (dead,) = run.dead_letters()
        assert dead.value == repr(("a", 1_000)).encode()
        assert dead.header(ERROR_HEADER) == b"RuntimeError: no reminder for a"
        assert run.output("reminders") == []
