"""The PostgreSQL sink's gids and what a recovery commits or rolls back (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.connectors.postgres.gids import (
    MAX_GID_BYTES,
    Gid,
    application_name,
    check_head,
    head,
    resolve,
)
from kstream.errors import ConfigurationError

names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30)
numbers = st.integers(0, 2**63 - 1)


@given(names, names, names, numbers, numbers)
def test_a_gid_parses_back_to_its_parts(job: str, sink: str, task: str, e: int, g: int) -> None:
    h = head(job, sink, task)
    assert Gid.parse(str(Gid(h, e, g))) == Gid(h, e, g)


@pytest.mark.parametrize(
    "text",
    ["", "kstream", "other:j:s:t:1:2", "kstream:j:s:t:1", "kstream:j:s:t:x:2",
     "kstream:j:s:t:1:+2", "kstream:j:s:t:٣:2", "kstream:j:s:t:1: 2"],
)  # fmt: skip
def test_what_is_not_a_gid_of_kstreams_parses_to_none(text: str) -> None:
    assert Gid.parse(text) is None


def test_a_subtasks_prefix_never_matches_another_subtask() -> None:
    one, ten = head("j", "postgres:t", "s1-1"), head("j", "postgres:t", "s1-10")
    plan = resolve([f"{ten}:5:1", f"{one}:5:1"], one, [])
    assert plan.rollback == (f"{one}:5:1",)


@given(
    st.sets(st.tuples(st.sampled_from(["s1-0", "s1-1", "s1-10"]), numbers, st.integers(0, 5))),
    st.data(),
)
def test_recovery_commits_exactly_the_kept_gids_of_its_subtask(
    found: set[tuple[str, int, int]], data: st.DataObject
) -> None:
    mine = head("job", "postgres:t", "s1-1")
    prepared = [str(Gid(head("job", "postgres:t", t), e, g)) for t, e, g in found]
    kept = data.draw(st.lists(st.sampled_from(prepared)) if prepared else st.just([]))
    kept += data.draw(st.lists(st.just(f"{mine}:99:9")))  # committed already: not prepared
    plan = resolve([*prepared, "someone-else's"], mine, kept)
    ours = {p for p in prepared if Gid.parse(p) and Gid.parse(p).head == mine}  # type: ignore[union-attr]
    assert set(plan.commit) == ours & set(kept)
    assert set(plan.rollback) == ours - set(kept)
    assert not set(plan.commit) & set(plan.rollback)


def test_a_head_too_long_for_postgres_is_refused_in_one_line() -> None:
    check_head(head("j" * 60, "postgres:" + "t" * 60, "s12-345"))
    with pytest.raises(ConfigurationError, match=str(MAX_GID_BYTES)) as info:
        check_head(head("j" * 100, "postgres:" + "t" * 60, "s1-0"))
    assert "\n" not in str(info.value)


def test_application_names_fit_postgres_and_differ_by_subtask_and_generation() -> None:
    a = application_name(head("j" * 150, "postgres:t", "s1-0"), 2**40)
    assert len(a.encode()) <= 63
    assert a != application_name(head("j" * 150, "postgres:t", "s1-1"), 2**40)
    assert a != application_name(head("j" * 150, "postgres:t", "s1-0"), 2**40 + 1)
