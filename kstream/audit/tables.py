"""Tables as audit outputs: a sink's table read by Spark, seen as records.

The checks of `kstream.audit.checks` look at records (partition, offset, key,
value). A table becomes such records through a `TableAudit`: its declared key
columns form the key, its value columns the value (one column: its text; several:
a JSON array of their texts), every row sits in partition 0, and rows are numbered
0..n-1 in the order of the key columns and then the value columns, in the
table's own types. A table has no order of its own, so that numbering is what
"earlier" means for duplicates; a running count stored as a number therefore
never shows as out of order.

A `TableReader` knows one kind of table: how to check it before Spark starts
(reachable, table and columns exist: one line in seconds otherwise), which jars
and session settings reading it needs (a Delta reader: its SQL extension and
catalog), and how to load it. `PostgresTable` reads
PostgreSQL through Spark's JDBC source with the PostgreSQL JDBC driver, resolved
with mvn like the Kafka connector; `DeltaLakeTable` reads a Delta table with
Delta's own Spark connector (``format("delta")``), its jars resolved the same way.
`IcebergTable` reads an Iceberg table without Iceberg's Spark connector, whose
runtime exists only for Spark 4.0: pyiceberg plans the current snapshot's scan
and Spark reads exactly the Parquet files it names.

The loaded rows are cached (read once: the check's passes see the same rows
even while the table changes) and numbered with one window over all rows,
which runs on a single task: fine for tables of millions of rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, urlsplit

from kstream.audit.jars import SPARK_VERSION
from kstream.errors import ConfigurationError, DatabaseError, DependencyResolutionError
from kstream.infra.maven import resolve_maven_classpath
from kstream.infra.paths import cache_dir, deploy_dir

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "DELTA_SPARK_CONFIG",
    "DELTA_SPARK_VERSION",
    "POSTGRESQL_JDBC_VERSION",
    "DeltaLakeTable",
    "IcebergScan",
    "IcebergTable",
    "PostgresTable",
    "TableAudit",
    "TableReader",
    "delta_spark_jars",
    "jdbc_url",
    "postgresql_jdbc_jars",
    "redact",
]

#: The PostgreSQL JDBC driver: equal to `postgresql.version` in
#: deploy/spark/postgresql-jdbc.pom.xml. It does not depend on the Spark release.
POSTGRESQL_JDBC_VERSION = "42.7.14"
#: Delta Lake's Spark connector: equal to `delta.version` in deploy/spark/delta-spark.pom.xml.
#: Its artifact is built for one Spark release (``delta-spark_<major.minor>_2.13``).
DELTA_SPARK_VERSION = "4.4.0"
#: The session settings Delta's reads need: its SQL extension and its catalog
#: (Delta refuses to read without them). Static settings: they take effect when a
#: session is created, which `kstream.audit.spark.spark_session` does for each audit.
DELTA_SPARK_CONFIG = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Delta replays the table's log in this many tasks before the first read: its
    # default, 50, is sized for clusters, and made a small table's read 3-4 times
    # slower on 2 cores (14-28 s against 5-7 s with 2).
    "spark.databricks.delta.snapshotPartitions": "8",
}
#: A table's database must answer within this many seconds: a typo should fail fast.
CONNECT_TIMEOUT_S = 5


class TableReader(Protocol):
    """One kind of table the audit can read with Spark."""

    @property
    def label(self) -> str:
        """How reports and messages name the table (no secrets)."""
        ...

    def columns(self) -> list[str]:
        """The table's columns in their order; one-line error if unreachable or absent."""
        ...

    def jars(self, log: Callable[[str], None]) -> list[Path]:
        """Local jars Spark needs on driver and executors to read this table."""
        ...

    def spark_config(self) -> dict[str, str]:
        """Settings the Spark session needs to read this table (extensions, catalogs)."""
        ...

    def load(self, spark: SparkSession, columns: Sequence[str]) -> DataFrame:
        """The table's rows, only `columns`."""
        ...


@dataclass(frozen=True, slots=True)
class TableAudit:
    """Which table is audited, and which columns are its key and its value.

    `key` are the columns identifying what a row says (the word of a word count);
    `value` the columns checked against the expected output (its count). Empty
    `value` means every other column, in the table's order.
    """

    reader: TableReader
    key: tuple[str, ...]
    value: tuple[str, ...] = ()

    def resolve(self) -> TableAudit:
        """Check the columns against the table (before Spark starts); fill in `value`."""
        if not self.key:
            raise ConfigurationError("a table audit needs its key columns: --key COL[,COL...]")
        have = self.reader.columns()
        unknown = [c for c in (*self.key, *self.value) if c not in have]
        if unknown:
            raise ConfigurationError(
                f"{self.reader.label} has no column {', '.join(unknown)}; "
                f"its columns: {', '.join(have)}"
            )
        value = self.value or tuple(c for c in have if c not in self.key)
        if not value:
            raise ConfigurationError(
                f"{self.reader.label}: every column is a key column; name the value with --value"
            )
        return TableAudit(self.reader, self.key, value)

    def records(self, spark: SparkSession) -> DataFrame:
        """The rows as the checks' records: ``partition``, ``offset``, ``key``, ``value``."""
        from pyspark.sql import Window
        from pyspark.sql import functions as sf

        rows = self.reader.load(spark, [*self.key, *self.value])
        order = Window.orderBy(*(sf.col(c).asc_nulls_first() for c in (*self.key, *self.value)))
        return rows.select(
            sf.lit(0).alias("partition"),
            (sf.row_number().over(order) - 1).cast("long").alias("offset"),
            _text(self.key).alias("key"),
            _text(self.value).alias("value"),
        )


def _text(columns: Sequence[str]) -> Column:
    from pyspark.sql import functions as sf

    if len(columns) == 1:
        return sf.col(columns[0]).cast("string")
    return sf.to_json(sf.array(*(sf.col(c).cast("string") for c in columns)))


def redact(url: str) -> str:
    """`url` without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username}:***@{host}").geturl()


def jdbc_url(url: str) -> tuple[str, dict[str, str]]:
    """A ``postgresql://`` URL as a JDBC URL and its user/password properties."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres") or not parts.hostname:
        raise ConfigurationError(
            f"not a PostgreSQL URL: {redact(url)} (expected postgresql://user@host:port/db)"
        )
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    port = f":{parts.port}" if parts.port else ""
    database = parts.path.lstrip("/") or "postgres"
    query = f"?{parts.query}" if parts.query else ""
    props = {}
    if parts.username:
        props["user"] = unquote(parts.username)
    if parts.password is not None:
        props["password"] = unquote(parts.password)
    return f"jdbc:postgresql://{host}{port}/{database}{query}", props


def postgresql_jdbc_jars(log: Callable[[str], None] = lambda _: None) -> list[Path]:
    """Resolve (once) and return the PostgreSQL JDBC driver jar."""
    libs = cache_dir() / f"spark-jdbc-postgresql-{POSTGRESQL_JDBC_VERSION}" / "libs"
    jars = resolve_maven_classpath(
        deploy_dir() / "spark" / "postgresql-jdbc.pom.xml",
        libs,
        properties={"postgresql.version": POSTGRESQL_JDBC_VERSION},
        what=f"PostgreSQL JDBC driver {POSTGRESQL_JDBC_VERSION}",
        log=log,
    )
    return [j for j in jars if j.name == f"postgresql-{POSTGRESQL_JDBC_VERSION}.jar"]


@dataclass(frozen=True, slots=True)
class PostgresTable:
    """A PostgreSQL table (``schema.table`` or ``table``) at `url` (``postgresql://``)."""

    url: str
    table: str

    @property
    def label(self) -> str:
        parts = urlsplit(self.url)
        return f"table {self.table} at {parts.hostname}:{parts.port or 5432}{parts.path}"

    def columns(self) -> list[str]:
        import psycopg

        jdbc_url(self.url)  # a malformed URL is refused before connecting
        try:
            with psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT_S) as conn:
                rows = conn.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) "
                    "AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                    (self.table,),
                ).fetchall()
        except psycopg.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise DatabaseError(f"cannot read {self.label}: {first}") from None
        if not rows:
            raise ConfigurationError(f"{self.label} does not exist")
        return [str(r[0]) for r in rows]

    def jars(self, log: Callable[[str], None]) -> list[Path]:
        return postgresql_jdbc_jars(log)

    def spark_config(self) -> dict[str, str]:
        return {}  # Spark's JDBC source is built in

    def load(self, spark: SparkSession, columns: Sequence[str]) -> DataFrame:
        url, props = jdbc_url(self.url)
        # One query, so one snapshot of the table: Spark's JDBC source reads it in a
        # single task unless given a numeric partition column, which a sink's table
        # need not have.
        return (
            spark.read.format("jdbc")
            .option("url", url)
            .option("dbtable", self.table)
            .option("driver", "org.postgresql.Driver")
            .option("fetchsize", "10000")
            .options(**props)
            .load()
            .select(*(_quoted(c) for c in columns))
        )


def delta_spark_jars(log: Callable[[str], None] = lambda _: None) -> list[Path]:
    """Resolve (once) and return the jars of Delta's Spark connector for this Spark.

    Delta, its storage layer and kernel and the Unity Catalog client it links
    against; everything pyspark ships is excluded in the pom.
    """
    spark = ".".join(SPARK_VERSION.split(".")[:2])
    artifact = f"delta-spark_{spark}_2.13"
    libs = cache_dir() / f"spark-delta-{spark}-{DELTA_SPARK_VERSION}" / "libs"
    jars = resolve_maven_classpath(
        deploy_dir() / "spark" / "delta-spark.pom.xml",
        libs,
        properties={"delta.artifact": artifact, "delta.version": DELTA_SPARK_VERSION},
        what=f"Delta Lake {DELTA_SPARK_VERSION} Spark connector",
        log=log,
    )
    if not any(j.name == f"{artifact}-{DELTA_SPARK_VERSION}.jar" for j in jars):
        raise DependencyResolutionError(
            f"no {artifact}-{DELTA_SPARK_VERSION}.jar in {libs}; delete {libs.parent} "
            "to resolve again"
        )
    return jars


@dataclass(frozen=True, slots=True)
class DeltaLakeTable:
    """A Delta table on a local file system: a directory path or a ``file://`` URI.

    Spark reads it with Delta's connector at the version that is current when the
    read starts (one snapshot). Before Spark starts, delta-rs (``deltalake``, the
    ``delta`` extra) reads its schema: a path that holds no Delta table is one line.
    Object-store URIs (``s3://``) are refused: Spark's jars have no file system for
    them.
    """

    location: str

    @property
    def label(self) -> str:
        return f"Delta table {self.location}"

    @property
    def uri(self) -> str:
        """The table's absolute location, as Spark and delta-rs are given it."""
        scheme = urlsplit(self.location).scheme
        if scheme == "file":
            return self.location
        if len(scheme) > 1:  # a one-letter "scheme" is a Windows drive
            raise ConfigurationError(
                f"{self.label}: the audit reads Delta tables on a local file system "
                "(a path or a file:// URI); Spark has no file system for "
                f"{scheme}:// in its jars"
            )
        return str(Path(self.location).absolute())

    def columns(self) -> list[str]:
        try:
            from deltalake import DeltaTable
            from deltalake.exceptions import DeltaError, TableNotFoundError
        except ImportError:
            raise ConfigurationError(
                f"{self.label}: auditing a Delta table needs deltalake to check it "
                "before Spark starts: pip install 'kstream[audit,delta]'"
            ) from None
        uri = self.uri
        try:
            schema = DeltaTable(uri).schema()
        except TableNotFoundError:
            raise ConfigurationError(f"no Delta table at {self.location}") from None
        except (DeltaError, OSError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise DatabaseError(f"cannot read {self.label}: {first}") from None
        return [f.name for f in schema.fields]

    def jars(self, log: Callable[[str], None]) -> list[Path]:
        return delta_spark_jars(log)

    def spark_config(self) -> dict[str, str]:
        return dict(DELTA_SPARK_CONFIG)

    def load(self, spark: SparkSession, columns: Sequence[str]) -> DataFrame:
        # Only the named columns are read from the Parquet files (column pruning).
        return spark.read.format("delta").load(self.uri).select(*(_quoted(c) for c in columns))


@dataclass(frozen=True, slots=True)
class IcebergScan:
    """What one snapshot of an Iceberg table holds: its id (None: the table has no
    snapshot yet), its columns in order, and its data files (local Parquet files)."""

    snapshot_id: int | None
    columns: tuple[str, ...]
    files: tuple[str, ...]


#: Characters Spark's file reader expands as a glob pattern in a path.
_GLOB = frozenset("*?[]{}\\")


@dataclass(frozen=True, slots=True)
class IcebergTable:
    """Iceberg table `table` (``namespace.name``) of the pyiceberg catalog `catalog`
    (its properties: `kstream.connectors.iceberg.sql_catalog` builds a SQL catalog's).

    Read without Iceberg's Spark connector: its runtime is built for Spark 4.0 only
    (``iceberg-spark-runtime-4.0_2.13``), and fails to load in this Spark. Instead
    pyiceberg (the ``iceberg`` extra) loads the table from its catalog and plans
    the scan of the snapshot current when the read starts, and Spark reads exactly
    the Parquet files that scan names (``spark.read.parquet``), in parallel.

    That is correct only for plain append tables, so `scan` refuses in one line,
    before Spark starts and again when the read starts: a snapshot with delete
    files (Spark would read the deleted rows), a table whose schema changed since
    its first (Spark maps Parquet columns by name, Iceberg by field id), data files
    that are not Parquet, and files off the local file system (Spark's jars have no
    file system for ``s3://``). A table without a snapshot (created, never written)
    holds no rows and audits as empty, as does a snapshot without data files.
    """

    catalog: Mapping[str, str]
    table: str
    catalog_name: str = field(default="default")

    @property
    def label(self) -> str:
        return f"Iceberg table {self.table}"

    def scan(self) -> IcebergScan:
        """Plan the current snapshot's scan with pyiceberg; one-line error for an
        unreachable catalog, an unknown table, or a table this reading would get wrong."""
        table = self._load()
        metadata = table.metadata
        if len(metadata.schemas) > 1:
            raise ConfigurationError(
                f"{self.label}: its schema changed ({len(metadata.schemas)} schemas in its "
                "metadata); the audit reads Parquet columns by name, Iceberg by field id, "
                "so it audits tables whose schema never changed"
            )
        self._local(metadata.location)
        columns = tuple(f.name for f in table.schema().fields)
        snapshot = table.current_snapshot()
        if snapshot is None:
            return IcebergScan(None, columns, ())
        from pyiceberg.manifest import FileFormat

        append_only = "the audit reads data files as they are, so it audits append-only tables"
        try:
            tasks = list(table.scan(snapshot_id=snapshot.snapshot_id).plan_files())
        except Exception as exc:
            if "equality deletes" in str(exc):  # pyiceberg cannot plan them (a ValueError)
                raise ConfigurationError(
                    f"{self.label}: snapshot {snapshot.snapshot_id} has equality delete "
                    f"files; {append_only}"
                ) from None
            raise DatabaseError(
                f"{self.label}: cannot plan snapshot {snapshot.snapshot_id}: {_first_line(exc)}"
            ) from None
        files = []
        for task in tasks:
            if task.delete_files:
                raise ConfigurationError(
                    f"{self.label}: snapshot {snapshot.snapshot_id} has delete files "
                    f"(e.g. {next(iter(task.delete_files)).file_path}); {append_only}"
                )
            path = task.file.file_path
            if task.file.file_format != FileFormat.PARQUET:
                raise ConfigurationError(
                    f"{self.label}: {path} is {task.file.file_format.name}; the audit "
                    "reads Parquet data files only"
                )
            self._local(path)
            files.append(path)
        return IcebergScan(snapshot.snapshot_id, columns, tuple(files))

    def columns(self) -> list[str]:
        return list(self.scan().columns)

    def jars(self, log: Callable[[str], None]) -> list[Path]:
        return []  # Spark's Parquet reader is built in

    def spark_config(self) -> dict[str, str]:
        return {}

    def load(self, spark: SparkSession, columns: Sequence[str]) -> DataFrame:
        scan = self.scan()  # the snapshot current now, checked again
        selected = [_quoted(c) for c in columns]
        if not scan.files:
            # No rows: the checks cast every column to text, so text columns do.
            return spark.createDataFrame([], ", ".join(f"{c} string" for c in selected))
        # Only the named columns are read from the files (column pruning).
        return spark.read.parquet(*scan.files).select(*selected)

    def _load(self) -> Any:
        try:
            from pyiceberg.catalog import load_catalog
            from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
        except ImportError:
            raise ConfigurationError(
                f"{self.label}: auditing an Iceberg table needs pyiceberg to plan its "
                "scan: pip install 'kstream[audit,iceberg]'"
            ) from None
        uri = str(self.catalog.get("uri", ""))
        where = urlsplit(uri)
        if where.scheme.startswith("sqlite") and where.path not in ("", "/", "/:memory:"):
            # SQLAlchemy would create an empty catalog file rather than fail.
            db = Path(unquote(where.path[1:]))
            if not db.is_file():
                raise ConfigurationError(f"no SQLite catalog at {db} (from {uri})")
        try:
            catalog = load_catalog(self.catalog_name, **dict(self.catalog))
        except Exception as exc:  # pyiceberg raises many kinds (ValueError, SQLAlchemy's)
            raise DatabaseError(
                f"cannot open the Iceberg catalog {redact(uri) or self.catalog_name}: "
                f"{_first_line(exc)}"
            ) from None
        try:
            return catalog.load_table(self.table)
        except (NoSuchTableError, NoSuchNamespaceError):
            raise ConfigurationError(
                f"no {self.label} in the catalog {redact(uri) or self.catalog_name}"
            ) from None
        except Exception as exc:
            raise DatabaseError(f"cannot load {self.label}: {_first_line(exc)}") from None

    def _local(self, location: str) -> None:
        scheme = urlsplit(location).scheme
        if scheme not in ("", "file"):
            raise ConfigurationError(
                f"{self.label}: {location} is not on a local file system; the audit reads "
                f"the table's Parquet files with Spark, whose jars have no file system for "
                f"{scheme}://"
            )
        if _GLOB.intersection(location):
            raise ConfigurationError(
                f"{self.label}: {location} holds a glob character (* ? [ ] {{ }} \\\\), "
                "which Spark's file reader would expand"
            )


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _quoted(column: str) -> str:
    # Spark column names with dots or backticks need backticks.
    return "`" + column.replace("`", "``") + "`"
