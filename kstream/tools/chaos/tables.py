"""The tables a sink workload writes, and the checker's own reads of them.

A sink workload (``postgres``, ``delta``, ``iceberg``) runs the word count into
a table instead of the output topic, in insert mode: every update is a row
``(word, count)``, so a duplicate or a loss shows in the table (an upsert would
hide duplicates). A `SinkTable` knows where the table lives, makes it fresh
before the job starts (`prepare`), names the job's parameters for it, and reads
every row back with the sink's client library alone (psycopg, deltalake,
pyiceberg), nothing of kstream's connectors: the judge must not share a bug
with the sink.

`TableReader` stands where `reader.OutputReader` stands for a topic: it reads
the whole table now and then while the campaign runs, to place each row in the
fault window it became visible in and to tell when the job caught up; the
verdict judges a fresh read at the end (`TableReader.final`). A table's rows
have no order, so nothing is ever *out of order*.

`sink_table` checks, before anything is created, that the sink's extra is
installed and (PostgreSQL) that the server answers, each a one-line error.
"""

from __future__ import annotations

import importlib.util
import shutil
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from kstream.errors import ConfigurationError, DatabaseError, ToolMissingError
from kstream.infra.postgres import LocalPostgres
from kstream.tools.chaos.verdict import Output

__all__ = [
    "DEFAULT_POSTGRES_URL",
    "SINKS",
    "DeltaTableAt",
    "IcebergTableAt",
    "PostgresTable",
    "SinkTable",
    "TableReader",
    "sink_table",
]

#: The server ``kstream postgres start`` runs by default.
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:25432/postgres"
#: Sink workloads and the module each needs, with the extra that installs it.
SINKS = {"postgres": "psycopg", "delta": "deltalake", "iceberg": "pyiceberg"}
#: The Iceberg table's name in its catalog.
ICEBERG_TABLE = "chaos.word_counts"
#: Seconds a connection attempt to PostgreSQL may take.
CONNECT_TIMEOUT_S = 5
#: The live reader reads at most this often, and spends at most a fifth of the time reading.
POLL_S = 1.0
READ_SHARE = 0.2


class SinkTable(Protocol):
    """Where a sink workload's table lives; `rows` reads all of it, independently."""

    @property
    def location(self) -> str: ...

    @property
    def params(self) -> dict[str, str]: ...

    def prepare(self) -> None: ...

    def rows(self) -> list[tuple[str, int]]: ...


def _missing(sink: str) -> None:
    if importlib.util.find_spec(SINKS[sink]) is None:
        raise ToolMissingError(
            f"--workload {sink} needs the {sink} extra: pip install 'kstream[{sink}]'"
        )


@dataclass(frozen=True)
class PostgresTable:
    """Table `name` (created by `prepare`, which refuses one that exists) on the server at
    `url`; `server` is the local server (`kstream postgres start`) serving it, which the
    ``postgres-restart`` fault restarts, or None for any other server."""

    url: str
    name: str
    server: LocalPostgres | None = field(default=None, compare=False)

    @property
    def location(self) -> str:
        return f"{self.url} table {self.name}"

    @property
    def params(self) -> dict[str, str]:
        return {"sink": "postgres", "url": self.url, "table": self.name}

    def _connect(self, autocommit: bool = False) -> Any:
        import psycopg

        try:
            return psycopg.connect(
                self.url, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT_S
            )
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DatabaseError(
                f"cannot reach PostgreSQL at {self.url} ({first}); start one with "
                "`kstream postgres start` or name another with --postgres"
            ) from None

    def check(self) -> None:
        """Raises `DatabaseError` (one line) when the server does not answer, and
        `ConfigurationError` when the table exists already."""
        with self._connect(autocommit=True) as conn:
            self._refuse_existing(conn)

    def _refuse_existing(self, conn: Any) -> None:
        if conn.execute("SELECT to_regclass(%s)", (self.name,)).fetchone()[0] is not None:
            raise ConfigurationError(
                f"table {self.name} already exists at {self.url}; a campaign writes a new "
                "table: name another with --table"
            )

    def prepare(self) -> None:
        with self._connect(autocommit=True) as conn:
            self._refuse_existing(conn)
            conn.execute(f"CREATE TABLE {self.name} (word text NOT NULL, count bigint NOT NULL)")

    def rows(self) -> list[tuple[str, int]]:
        with self._connect() as conn:
            return [(w, int(n)) for w, n in conn.execute(f"SELECT word, count FROM {self.name}")]


def _fresh_directory(path: Path, ours: bool) -> None:
    """Empty `path` if it is the campaign's default (`ours`); refuse a user's that exists."""
    if path.exists():
        if not ours:
            raise ConfigurationError(
                f"{path} already exists; a campaign writes a new table: name another with --table"
            )
        shutil.rmtree(path)


@dataclass(frozen=True)
class DeltaTableAt:
    """A Delta table in directory `path` (the sink creates it); `ours`: the default
    under the campaign's directory, emptied at the start."""

    path: Path
    ours: bool = True

    @property
    def location(self) -> str:
        return str(self.path)

    @property
    def params(self) -> dict[str, str]:
        return {"sink": "delta", "table": str(self.path)}

    def prepare(self) -> None:
        _fresh_directory(self.path, self.ours)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def rows(self) -> list[tuple[str, int]]:
        from deltalake import DeltaTable

        if not (self.path / "_delta_log").is_dir():
            return []  # the sink has not created it yet
        t = DeltaTable(str(self.path)).to_pyarrow_table(columns=["word", "count"])
        return list(zip(t.column("word").to_pylist(), t.column("count").to_pylist(), strict=True))


@dataclass(frozen=True)
class IcebergTableAt:
    """Iceberg table `ICEBERG_TABLE` of a SQL catalog (SQLite file ``catalog.db``) with
    its warehouse (``warehouse/``), both in directory `root`; `ours` as for Delta."""

    root: Path
    ours: bool = True

    @property
    def location(self) -> str:
        return f"{self.root} table {ICEBERG_TABLE}"

    @property
    def catalog(self) -> dict[str, str]:
        return {
            "type": "sql",
            "uri": f"sqlite:///{self.root / 'catalog.db'}",
            "warehouse": f"file://{self.root / 'warehouse'}",
        }

    @property
    def params(self) -> dict[str, str]:
        c = self.catalog
        return {
            "sink": "iceberg",
            "catalog": c["uri"],
            "warehouse": c["warehouse"],
            "table": ICEBERG_TABLE,
        }

    def prepare(self) -> None:
        from pyiceberg.catalog import load_catalog
        from pyiceberg.schema import Schema
        from pyiceberg.types import LongType, NestedField, StringType

        _fresh_directory(self.root, self.ours)
        (self.root / "warehouse").mkdir(parents=True)
        catalog = load_catalog("default", **self.catalog)
        catalog.create_namespace_if_not_exists(ICEBERG_TABLE.split(".")[0])
        catalog.create_table(
            ICEBERG_TABLE,
            Schema(
                NestedField(1, "word", StringType(), required=False),
                NestedField(2, "count", LongType(), required=True),
            ),
        )

    def rows(self) -> list[tuple[str, int]]:
        from pyiceberg.catalog import load_catalog

        table = load_catalog("default", **self.catalog).load_table(ICEBERG_TABLE)
        t = table.scan(selected_fields=("word", "count")).to_arrow()
        return list(zip(t.column("word").to_pylist(), t.column("count").to_pylist(), strict=True))


def _local_server(url: str) -> LocalPostgres | None:
    """The `kstream postgres start` server at `url`, if that is what serves it."""
    parts = urlsplit(url)
    if parts.hostname not in ("127.0.0.1", "localhost") or parts.port is None:
        return None
    try:
        server = LocalPostgres(parts.port)
    except ConfigurationError:
        return None
    return server if server.pid() is not None else None


def sink_table(
    sink: str, out: Path, seed: int, *, postgres: str = DEFAULT_POSTGRES_URL, table: str = ""
) -> SinkTable:
    """The table of sink workload `sink`: `table` names it (PostgreSQL: a table name,
    default ``chaos_s<seed>_<8 random hex digits>``; Delta: its directory, default
    ``<out>/delta-table``; Iceberg: the catalog's and warehouse's directory, default
    ``<out>/iceberg``). Raises `ToolMissingError` (the extra is missing) or
    `DatabaseError` (PostgreSQL does not answer), one line each."""
    if sink not in SINKS:
        raise ConfigurationError(f"{sink!r} is no sink workload; one of {', '.join(SINKS)}")
    _missing(sink)
    if sink == "postgres":
        name = table or f"chaos_s{seed}_{uuid.uuid4().hex[:8]}"
        if not name.replace("_", "").isalnum() or not name[0].isalpha():
            raise ConfigurationError(
                f"--table must be a plain SQL name for postgres; got {table!r}"
            )
        pg = PostgresTable(postgres, name.lower(), _local_server(postgres))
        pg.check()
        return pg
    if table and Path(table).exists():
        raise ConfigurationError(
            f"{table} already exists; a campaign writes a new table: name another with --table"
        )
    if sink == "delta":
        return DeltaTableAt(Path(table).resolve() if table else out / "delta-table", not table)
    return IcebergTableAt(Path(table).resolve() if table else out / "iceberg", not table)


class TableReader:
    """Reads the whole of `table` every `POLL_S` seconds at most (less often when a read
    takes long), noting when each row was first seen; `latest` is each word's highest
    count so far, as the output reader's last value per key."""

    def __init__(self, table: SinkTable, started: float) -> None:
        self.table = table
        self.started = started
        #: Every row seen, with the time it was first seen (a second copy of a row counts).
        self.records: list[tuple[str, int, float]] = []
        self.latest: dict[bytes | None, bytes | None] = {}
        #: The table's reads that failed (the server restarting): the next one catches up.
        self.failed_reads = 0
        #: Kept for the report's figure of the topic checker; a table read needs no reconnect.
        self.reconnects = 0
        self._seen: Counter[tuple[str, int]] = Counter()
        self._next = 0.0

    def now(self) -> float:
        return time.monotonic() - self.started

    def poll(self, timeout: float) -> int:
        """Read the table if due, else wait `timeout` (the pace of the campaign's round);
        the number of rows new since the last read."""
        if self.now() < self._next:
            time.sleep(timeout)
            return 0
        began = self.now()
        try:
            rows = self.table.rows()
        except Exception:  # any failure of a live read: the next read catches up
            self.failed_reads += 1
            self._next = self.now() + POLL_S
            return 0
        seen = self.now()
        self._next = seen + max(POLL_S, (seen - began) / READ_SHARE)
        got = 0
        for row, n in Counter(rows).items():
            for _ in range(n - self._seen[row]):
                self.records.append((row[0], row[1], seen))
                got += 1
            self._seen[row] = max(self._seen[row], n)
            word = row[0].encode()
            if int(self.latest.get(word) or b"0") < row[1]:
                self.latest[word] = str(row[1]).encode()
        return got

    def final(self, now: float) -> tuple[list[Output], int]:
        """Every row now, read afresh, as outputs seen when this reader first saw them (rows
        it never saw at `now`); the second value counts those. Offsets follow (word, count),
        one partition: a table has no order to judge."""
        first: dict[tuple[str, int], list[float]] = {}
        for word, count, at in self.records:
            first.setdefault((word, count), []).append(at)
        out: list[Output] = []
        missed = 0
        for i, (word, count) in enumerate(sorted(self.table.rows())):
            times = first.get((word, count))
            if times:
                at = times.pop(0)
            else:
                at, missed = now, missed + 1
            out.append(Output(0, i, word.encode(), str(count).encode(), at))
        return out, missed

    def close(self) -> None:
        """Nothing stays open between reads."""
