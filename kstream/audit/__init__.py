"""Audit output topics for duplicates and losses with a PySpark batch job.

`run_audit` reads an input and an output topic with Spark's Kafka source
(``read_committed``, ending offsets fixed up front), runs one of the checks
defined in `kstream.audit.checks` and writes ``report.json`` and
``report.html``. `kstream audit` is its command line.

Jobs that want the lineage check add three headers to every output record,
naming the input record it was computed from: `LINEAGE_TOPIC_HEADER` (UTF-8
topic), `LINEAGE_PARTITION_HEADER` and `LINEAGE_OFFSET_HEADER` (decimal text).

pyspark (the ``audit`` extra) is imported only when an audit runs, so this
package imports without it. `run_audit` and `AuditResult` themselves load on
first access (PEP 562, as kstream's front door does): the command line, which
every worker process loads, imports `kstream.tools.cli.audit`, and a replacement
worker should not import the audit's Spark, progress and jar support before it
can restore.
"""

import importlib
from typing import TYPE_CHECKING

from kstream.audit.checks import (
    LINEAGE_OFFSET_HEADER,
    LINEAGE_PARTITION_HEADER,
    LINEAGE_TOPIC_HEADER,
)

if TYPE_CHECKING:
    from kstream.audit.run import AuditResult, run_audit

__all__ = [
    "LINEAGE_OFFSET_HEADER",
    "LINEAGE_PARTITION_HEADER",
    "LINEAGE_TOPIC_HEADER",
    "AuditResult",
    "run_audit",
]

# Hidden from type checkers, which see the import above.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        if name not in ("AuditResult", "run_audit"):
            raise AttributeError(f"module 'kstream.audit' has no attribute {name!r}")
        value = getattr(importlib.import_module("kstream.audit.run"), name)
        globals()[name] = value
        return value
