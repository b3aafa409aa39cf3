"""The PySpark query of docs/guide/delta-spark.md, run as the page shows it.

The page's Python block that reads the table is taken from the page itself, its
table path pointed at a Delta table built here as the sink's word count leaves it
(one (word, count) row per update), and run in a process of its own, as a reader
of the page would run it: Delta's session settings take effect only in a session
created with them. Cost: one Spark start and one Delta read, ~15-40 s.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from table_audit import running_counts

# ~40-75 s (a Kafka job, then Spark with Delta's jars): extended tier; the Delta audit
# (test_delta_audit.py) and the word count into Delta (test_delta_wordcount.py) stay.
pytestmark = [pytest.mark.audit, pytest.mark.extended]

PAGE = Path(__file__).parents[2] / "docs" / "guide" / "delta-spark.md"
TABLE_LINE = 'table = "/tmp/word_counts"\n'


def page_query() -> str:
    """The page's Python block that reads a Delta table with Spark."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)
    found = [b for b in blocks if 'format("delta")' in b]
    assert len(found) == 1, f"{PAGE} should show one PySpark query, shows {len(found)}"
    assert TABLE_LINE in found[0], f"the query in {PAGE} should name its table: {TABLE_LINE}"
    return found[0]


def test_the_pages_query_prints_the_most_frequent_words(tmp_path: Path) -> None:
    text = ["to be or not to be", "that is the question", "be be be"] + [
        f"w{i % 13} w{i % 7}" for i in range(100)
    ]
    rows = running_counts(text)
    table = tmp_path / "word_counts"
    for part in (rows[: len(rows) // 2], rows[len(rows) // 2 :]):  # two commits
        words, ns = zip(*part, strict=True)
        batch = pa.table({"word": list(words), "count": pa.array(ns, pa.int64())})
        write_deltalake(table, batch, mode="append")
    code = page_query().replace(TABLE_LINE, f"table = {str(table)!r}\n")
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    counts = Counter(w for line in text for w in line.split())
    top = sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))[:10]
    assert done.stdout.splitlines() == [f"{w} {n}" for w, n in top]
