"""`PostgresSink` and its writer against a real PostgreSQL server, driven as the
runtime drives a sink (recover, epochs of write/pre_commit, commit or abort)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from test_server import free_port

from kstream.connectors.postgres import PostgresSink
from kstream.connectors.postgres.writer import BATCH_ROWS
from kstream.dataflow.outputs import SinkContext, SinkSnapshot, SinkWriter
from kstream.errors import (
    ConfigurationError,
    DatabaseError,
    ProducerFencedError,
    RecordError,
    RecordRefusedError,
)
from kstream.infra.postgres import LocalPostgres

pytestmark = [pytest.mark.postgres]


def context(
    generation: int = 1,
    task: str = "s1-0",
    pump: Callable[[], None] = lambda: None,
    refused: Callable[[Any, RecordError], None] | None = None,
) -> SinkContext:
    ctx = SinkContext(
        "nowhere:9092", "pg-test", task, generation, producer=None,  # type: ignore[arg-type]
        pump=pump,
    )  # fmt: skip
    return ctx if refused is None else dataclasses.replace(ctx, refused=refused)


def rows(url: str, table: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return sorted(conn.execute(f"SELECT * FROM {table}").fetchall())


def prepared(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT gid FROM pg_prepared_xacts").fetchall()]


def upserts(url: str, table: str) -> PostgresSink:
    return PostgresSink(url, table, ("word", "count"), key=("word",))


def test_an_epoch_is_invisible_when_prepared_and_visible_once_committed(
    postgres_url: str, table: str
) -> None:
    sink = upserts(postgres_url, table)
    sink.check("")
    w = sink.open(context())
    w.recover(None, None)
    w.begin_epoch(1)
    for v in [("a", 1), ("b", 1), ("a", 2)]:
        w.write(v)
    kept = w.pre_commit(5)
    assert rows(postgres_url, table) == []
    assert kept.meta["prepared"] == ["kstream:pg-test:postgres:" + table + ":s1-0:5:1"]
    assert kept.meta["prepared"][0] in prepared(postgres_url)
    w.commit(5)
    assert rows(postgres_url, table) == [("a", 2), ("b", 1)]
    assert not [g for g in prepared(postgres_url) if table in g]
    w.close()


def test_recovery_commits_what_the_checkpoint_kept_and_rolls_back_the_rest(
    postgres_url: str, table: str
) -> None:
    sink = PostgresSink(postgres_url, table, ("word", "count"))  # inserts
    w = sink.open(context(generation=1))
    w.recover(None, None)
    w.write(("kept", 1))
    kept = w.pre_commit(5)  # checkpoint 5 completes, but the process dies before commit
    # Processes of generation 1 (as zombies of it would) prepare epoch 7, whose
    # checkpoint never completes, and leave epoch 8's transaction open.
    later = sink.open(context(generation=1))
    later.write(("later", 1))
    later.pre_commit(7)
    still_open = sink.open(context(generation=1))
    still_open.write(("open", 1))
    still_open._flush()  # type: ignore[attr-defined]
    # A successor (generation 2) restores checkpoint 5.
    successor = sink.open(context(generation=2))
    successor.recover(5, kept)
    assert rows(postgres_url, table) == [("kept", 1)]
    assert not [g for g in prepared(postgres_url) if table in g]
    # Generation 1 can neither write nor finish anything any more.
    with pytest.raises(DatabaseError):  # its session was terminated
        still_open.pre_commit(8)
    with pytest.raises(ProducerFencedError):  # the successor rolled it back
        later.commit(7)
    # The successor committed it, and terminated the old sessions.
    with pytest.raises((ProducerFencedError, DatabaseError)):
        w.commit(5)
    fresh_zombie = sink.open(context(generation=1))
    fresh_zombie.write(("zombie", 1))
    with pytest.raises(ProducerFencedError):  # the fence names generation 2
        fresh_zombie.pre_commit(9)
    successor.write(("new", 1))
    successor.pre_commit(11)
    successor.commit(11)
    assert rows(postgres_url, table) == [("kept", 1), ("new", 1)]
    successor.recover(5, kept)  # idempotent: the kept gid is gone, nothing else prepared
    assert rows(postgres_url, table) == [("kept", 1), ("new", 1)]
    for writer in (w, later, still_open, fresh_zombie, successor):
        writer.close()


def test_an_aborted_checkpoints_rows_go_on_with_the_next_epoch(
    postgres_url: str, table: str
) -> None:
    w = upserts(postgres_url, table).open(context())
    w.recover(None, None)
    w.write(("a", 1))
    w.pre_commit(3)
    w.abort(3)
    w.write(("a", 2))
    w.write(("b", 1))
    kept = w.pre_commit(4)
    assert len(kept.meta["prepared"]) == 1
    w.commit(4)
    assert rows(postgres_url, table) == [("a", 2), ("b", 1)]
    w.close()


def test_a_later_epoch_waits_for_the_prepared_one_to_commit(postgres_url: str, table: str) -> None:
    """Epoch 2 upserts the row epoch 1's prepared transaction locked: it must not
    block on the lock but serve the completion (pump) first."""
    served: list[int] = []
    holder: list[SinkWriter] = []

    def pump() -> None:
        served.append(1)
        holder[0].commit(1)

    w = upserts(postgres_url, table).open(context(pump=pump))
    holder.append(w)
    w.recover(None, None)
    w.write(("a", 1))
    w.pre_commit(1)
    w.write(("a", 2))
    w.pre_commit(2)
    assert served
    w.commit(2)
    assert rows(postgres_url, table) == [("a", 2)]
    w.close()


def test_bad_results_are_record_errors(postgres_url: str, table: str) -> None:
    w = upserts(postgres_url, table).open(context())
    w.recover(None, None)
    for bad in [("a",), "a", ("a", None), {"word": "a"}]:
        with pytest.raises(RecordError):
            w.write(bad)
    w.write({"word": "a", "count": 3})
    w.pre_commit(1)
    w.commit(1)
    assert rows(postgres_url, table) == [("a", 3)]
    w.close()


def test_without_an_error_policy_a_refused_row_fails_the_epoch_with_the_databases_message(
    postgres_url: str, table: str
) -> None:
    w = PostgresSink(postgres_url, table, ("word", "count")).open(context())
    w.recover(None, None)
    w.write(("dup", 1))
    w.write(("dup", 2))  # inserts into a primary key: the second one violates it
    with pytest.raises(RecordRefusedError, match=r"refused row \('dup', 2\): duplicate key"):
        w.pre_commit(1)
    w.close()
    assert rows(postgres_url, table) == []


def refusing_table(url: str, table: str) -> None:
    """`table` refuses counts of 1000 and more, and words starting with "bad"."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT small CHECK (count < 1000), "
            "ADD CONSTRAINT good CHECK (word NOT LIKE 'bad%')"
        )


@pytest.mark.parametrize("upsert", [False, True], ids=["insert", "upsert"])
def test_refused_rows_go_to_the_error_policy_and_the_others_are_written(
    postgres_url: str, table: str, upsert: bool
) -> None:
    """Refused rows (constraints, a value of the wrong type) among more than a batch of
    good ones, with an aborted checkpoint (whose rows are sent again: a refused row
    is handed over once)."""
    refusing_table(postgres_url, table)
    refused: list[tuple[Any, str]] = []
    ctx = context(refused=lambda value, exc: refused.append((value, str(exc))))
    sink = PostgresSink(postgres_url, table, ("word", "count"), key=("word",) if upsert else ())
    w = sink.open(ctx)
    w.recover(None, None)
    good = [(f"w{i}", i % 1000) for i in range(BATCH_ROWS + 500)]
    bad = {
        BATCH_ROWS - 1: ("bad-a", 1),
        BATCH_ROWS + 3: ("big", 5000),
        7: ("bad-b", 2),
        20: ("typo", "x"),  # not a bigint: refused by the server (COPY) or by psycopg
    }
    for i, row in enumerate(good):
        if i in bad:
            w.write(bad[i])
        w.write(row)
    w.pre_commit(1)
    w.abort(1)
    w.write(("later", 1))
    w.write(("bad-c", 1))
    w.pre_commit(2)
    w.commit(2)
    assert sorted(v for v, _ in refused) == sorted([*bad.values(), ("bad-c", 1)])
    messages = dict(refused)
    assert messages[("big", 5000)] == (
        f"{table} refused row ('big', 5000): new row for relation \"{table}\" violates check "
        'constraint "small" (Failing row contains (big, 5000).)'
    )
    assert rows(postgres_url, table) == sorted([*good, ("later", 1)])
    w.close()


def test_an_error_that_is_not_a_rows_fails_the_epoch(postgres_url: str, table: str) -> None:
    """A lost session is not a row's fault: no row is handed to the policy."""
    refused: list[Any] = []
    w = PostgresSink(postgres_url, table, ("word", "count")).open(
        context(refused=lambda value, exc: refused.append(value))
    )
    w.recover(None, None)
    w.write(("a", 1))
    w.pre_commit(1)
    w.commit(1)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name "
            "LIKE 'kstream-%' AND pid <> pg_backend_pid()"
        )
    w.write(("b", 1))
    with pytest.raises(DatabaseError, match="writing 1 rows"):
        w.pre_commit(2)
    assert refused == []
    w.close()


def test_start_up_checks_refuse_in_one_line(postgres_url: str, table: str) -> None:
    checks: list[tuple[PostgresSink, str]] = [
        (PostgresSink(postgres_url, "no_such_table", ("a",)), "does not exist"),
        (PostgresSink(postgres_url, table, ("word", "n")), "has no column n"),
        (PostgresSink(postgres_url, table, ("word",)), "needs a value for count"),
        (PostgresSink(postgres_url, table, ("word", "count"), key=("count",)), "no unique"),
        (PostgresSink("postgresql://u:secret@127.0.0.1:1/x", table, ("a",)), "cannot reach"),
    ]
    for sink, message in checks:
        with pytest.raises((ConfigurationError, DatabaseError), match=message) as info:
            sink.check("")
        assert "\n" not in str(info.value)
        assert "secret" not in str(info.value)
    with pytest.raises(ConfigurationError, match="not among columns"):
        PostgresSink(postgres_url, table, ("word",), key=("count",))


def test_a_server_without_prepared_transactions_is_refused(table: str) -> None:
    """A server of its own (PostgreSQL's default: max_prepared_transactions = 0)."""
    server = LocalPostgres(free_port())
    try:
        server.start()
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET max_prepared_transactions = 0")
            conn.execute(f"CREATE TABLE {table} (word text PRIMARY KEY, count bigint)")
        server.stop()
        server.start()
        with pytest.raises(ConfigurationError, match="max_prepared_transactions = 0") as info:
            upserts(server.url, table).check("")
        assert "\n" not in str(info.value)
    finally:
        server.stop()
        server.wipe()


def test_at_least_once_commits_at_the_barrier(postgres_url: str, table: str) -> None:
    ctx = SinkContext("x", "pg-test", "s1-0", 1, None, guarantee="at-least-once")  # type: ignore[arg-type]
    w = upserts(postgres_url, table).open(ctx)
    w.recover(None, SinkSnapshot())
    w.write(("a", 1))
    w.pre_commit(1)
    assert rows(postgres_url, table) == [("a", 1)]
    w.close()
