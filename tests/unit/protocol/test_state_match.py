"""`kstream.protocol.state_match`: which keyed state of a savepoint a job takes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kstream.protocol.state_match import StateMatch, match_states


def test_the_same_operators_restore_everything() -> None:
    m = match_states(["s1.count", "s2.sum"], ["s2.sum", "s1.count"])
    assert m == StateMatch(("s1.count", "s2.sum"), (), ())
    assert m.refusal(allow_non_restored_state=False) is None


def test_a_new_keyed_operator_starts_empty_and_is_no_refusal() -> None:
    m = match_states(["s1.count"], ["s1.count", "s1.dedupe"])
    assert m.new == ("s1.dedupe",)
    assert m.refusal(allow_non_restored_state=False) is None


def test_a_renamed_operator_without_uid_is_refused_naming_both_names() -> None:
    m = match_states(["s1.count"], ["s1.tally"])
    why = m.refusal(allow_non_restored_state=False)
    assert why is not None
    assert "s1.count" in why
    assert "s1.tally" in why
    assert ".uid(" in why
    assert "--allow-non-restored-state" in why
    # Allowed on purpose: the orphaned state is dropped.
    assert m.refusal(allow_non_restored_state=True) is None


def test_state_moved_to_another_stage_is_not_the_same_state() -> None:
    assert match_states(["s1.count"], ["s2.count"]).orphaned == ("s1.count",)


names = st.sets(st.from_regex(r"s[0-3]\.[a-c]{1,2}", fullmatch=True), max_size=6)


@given(names, names)
def test_every_name_lands_in_exactly_one_part(saved: set[str], job: set[str]) -> None:
    m = match_states(saved, job)
    assert set(m.restored) | set(m.orphaned) == saved
    assert set(m.restored) | set(m.new) == job
    assert not set(m.orphaned) & set(m.new)
    # Refused exactly when some saved state has no operator.
    assert (m.refusal(allow_non_restored_state=False) is None) == saved.issubset(job)
