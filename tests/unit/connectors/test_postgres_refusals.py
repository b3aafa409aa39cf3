"""The bisection that finds the rows of a batch PostgreSQL refuses (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from kstream.connectors.postgres.refusals import isolate, refuses_rows


def table_refusing(bad: set[int], calls: list[int]):  # type: ignore[no-untyped-def]
    """An `attempt` writing a part unless it holds a bad row; counts its calls."""
    written: list[int] = []

    def attempt(part: Sequence[int]) -> str | None:
        calls.append(len(part))
        hit = [r for r in part if r in bad]
        if hit:
            return f"refused {hit[0]}"
        written.extend(part)
        return None

    return attempt, written


@given(st.integers(1, 300), st.sets(st.integers(0, 299), max_size=8))
def test_exactly_the_bad_rows_are_refused_and_the_rest_written_in_order(
    n: int, bad: set[int]
) -> None:
    calls: list[int] = []
    attempt, written = table_refusing(bad, calls)
    rows = list(range(n))
    got = isolate(rows, attempt)
    good = [r for r in rows if r not in bad]
    assert list(got.accepted) == good == written
    assert got.refused == tuple((r, f"refused {r}") for r in rows if r in bad)
    # No refusal: one attempt; k refusals: O(k log n) attempts.
    refused = len(got.refused)
    if refused == 0:
        assert len(calls) == (1 if n else 0)
    assert len(calls) <= 1 + 2 * refused * max(1, n.bit_length())


def test_of_two_rows_that_clash_the_later_is_refused() -> None:
    """A UNIQUE clash: each row alone is fine, together the second is refused."""
    written: list[str] = []

    def attempt(part: Sequence[str]) -> str | None:
        keys = [*written, *part]
        if len(set(keys)) < len(keys):
            return "duplicate key"
        written.extend(part)
        return None

    got = isolate(["a", "b", "a", "c"], attempt)
    assert got.accepted == ("a", "b", "c")
    assert got.refused == (("a", "duplicate key"),)


def test_nothing_to_send_sends_nothing() -> None:
    calls: list[int] = []
    attempt, _ = table_refusing(set(), calls)
    assert isolate([], attempt).accepted == ()
    assert calls == []


def test_only_data_and_constraint_errors_are_a_rows() -> None:
    assert refuses_rows("23514")  # check_violation
    assert refuses_rows("23505")  # unique_violation
    assert refuses_rows("22P02")  # invalid_text_representation
    assert not refuses_rows("57P01")  # admin_shutdown
    assert not refuses_rows("40P01")  # deadlock_detected
    assert not refuses_rows("08006")  # connection_failure
    assert not refuses_rows(None)  # a client-side error
    assert refuses_rows(None, client_data_error=True)  # a value psycopg cannot send
    assert not refuses_rows("08006", client_data_error=True)
