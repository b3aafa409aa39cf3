"""The input and the rows of the table-audit tests (PostgreSQL, Delta Lake).

A small input with odd separators, the rows a running word count writes for it
in insert mode (one ``(word, count)`` per update), and the input topic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from kstream.infra.admin import Admin
from kstream.testing import produce, unique_name

LINES = ["to be or not to be", "that is the question", "to\tbe\u3000sure", "be be be"]


def running_counts(lines: Sequence[str]) -> list[tuple[str, int]]:
    """The word count's rows for `lines`, in processing order."""
    counts: Counter[str] = Counter()
    rows = []
    for line in lines:
        for word in line.split():
            counts[word] += 1
            rows.append((word, counts[word]))
    return rows


#: The rows a table written exactly once holds for `LINES`.
GOOD = running_counts(LINES)


def input_topic_of_lines(bootstrap: str, prefix: str) -> str:
    """A new 2-partition topic holding `LINES`, committed in one transaction."""
    name = unique_name(prefix)
    Admin(bootstrap).create_topics({name: 2})
    produce(bootstrap, name, [(None, s.encode()) for s in LINES], transactional_id=name)
    return name
