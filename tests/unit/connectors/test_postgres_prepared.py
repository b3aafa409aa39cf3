"""Which job, sink and subtask a prepared transaction's gid names (pure)."""

from __future__ import annotations

import datetime as dt

from kstream.connectors.postgres.prepared import Prepared

AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_a_gid_names_its_job_sink_and_subtask() -> None:
    p = Prepared.of("kstream:wc-1:postgres:public.counts:s1-0:3075:2", "db", "me", AT)
    assert p is not None
    assert (p.job, p.sink, p.subtask, p.epoch, p.generation) == (
        "wc-1", "postgres:public.counts", "s1-0", 3075, 2,
    )  # fmt: skip


def test_a_table_name_with_a_colon_stays_in_the_sink() -> None:
    p = Prepared.of('kstream:wc:postgres:"a:b":s2-1:7:1', "db", "me", AT)
    assert p is not None
    assert (p.job, p.sink, p.subtask) == ("wc", 'postgres:"a:b"', "s2-1")


def test_other_applications_transactions_are_not_the_sinks() -> None:
    for gid in ["app-42", "kstream:wc:7:1", "kstream:wc:s1-0:x:1", "other:wc:p:s1-0:7:1"]:
        assert Prepared.of(gid, "db", "me", AT) is None, gid
