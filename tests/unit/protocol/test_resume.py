"""`kstream.protocol.resume`: where a starting job resumes, on plain values."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kstream.protocol.coordination import History
from kstream.protocol.resume import Refuse, Resume, StartFresh, decide_resume

DONE = History(generation=4, max_checkpoint=9, completed=(7, 9))
NEW = History(generation=0, max_checkpoint=0)


def decide(history: History, fatal: list[str], changed: list[str], **how: bool) -> object:
    return decide_resume(
        history,
        fatal,
        changed,
        job="j",
        fresh=how.get("fresh", False),
        accept_changes=how.get("accept", False),
    )


def test_the_same_job_resumes_its_history() -> None:
    assert decide(DONE, [], []) == Resume(DONE)


def test_a_job_without_a_completed_checkpoint_starts_whatever_differs() -> None:
    assert decide(NEW, ["parallelism"], ["sources"]) == Resume(NEW)


def test_fresh_forgets_completions_but_keeps_the_clocks() -> None:
    decided = decide(DONE, ["parallelism"], [], fresh=True)
    assert isinstance(decided, StartFresh)
    assert decided.history == History(generation=4, max_checkpoint=9)
    assert decided.notice is not None
    assert "checkpoints 7, 9 are forgotten" in decided.notice


def test_fresh_without_completions_has_nothing_to_say() -> None:
    assert decide(NEW, [], [], fresh=True) == StartFresh(NEW, None)


def test_a_fatal_difference_is_refused_even_with_accept_changes() -> None:
    decided = decide(DONE, ["parallelism 1 -> 2"], ["sinks a -> b"], accept=True)
    assert isinstance(decided, Refuse)
    assert decided.reason.startswith("job j cannot resume checkpoint 9: parallelism 1 -> 2; sinks")
    assert "--fresh" in decided.reason


def test_a_change_is_refused_unless_accepted_then_warned() -> None:
    refused = decide(DONE, [], ["operators x -> y"])
    assert isinstance(refused, Refuse)
    assert "--accept-changes" in refused.reason
    accepted = decide(DONE, [], ["operators x -> y"], accept=True)
    assert accepted == Resume(
        DONE, "WARNING: resuming checkpoint 9 across changes: operators x -> y"
    )


@given(
    st.booleans(),
    st.booleans(),
    st.lists(st.text(max_size=3), max_size=2),
    st.lists(st.text(max_size=3), max_size=2),
    st.lists(st.integers(1, 50), max_size=3, unique=True).map(lambda xs: tuple(sorted(xs))),
)
def test_the_decision_follows_the_rules(
    fresh: bool, accept: bool, fatal: list[str], changed: list[str], completed: tuple[int, ...]
) -> None:
    history = History(3, max(completed, default=0), completed)
    decided = decide(history, fatal, changed, fresh=fresh, accept=accept)
    if fresh:
        assert isinstance(decided, StartFresh)
        assert not decided.history.completed
        assert (decided.notice is None) == (not completed)
    elif completed and (fatal or (changed and not accept)):
        assert isinstance(decided, Refuse)
    else:
        assert isinstance(decided, Resume)
        assert decided.history == history
        assert (decided.warning is not None) == bool(completed and changed)
