"""The demonstrations behind `kstream demo`."""

from __future__ import annotations

from collections.abc import Callable

from kstream.admin import Admin
from kstream.cluster import bootstrap_servers
from kstream.testing import produce, read_all, unique_name

__all__ = ["smoke"]


def smoke(records: int, bootstrap: str | None, say: Callable[[str], None]) -> bool:
    """Commit one transaction and abort another; read back with read_committed.

    Returns True when exactly the committed records, in order, are read back.
    """
    servers = bootstrap_servers(bootstrap, say)
    admin = Admin(servers)
    admin.check_reachable()
    topic = unique_name("kstream-smoke")
    admin.create_topics({topic: 1})
    committed = [(f"k{i}".encode(), f"committed-{i}".encode()) for i in range(records)]
    aborted = [(f"k{i}".encode(), f"aborted-{i}".encode()) for i in range(records)]
    tid = unique_name("kstream-smoke-tx")
    produce(servers, topic, committed, transactional_id=tid)
    produce(servers, topic, aborted, transactional_id=tid, abort=True)
    say(f"wrote {records} records in a committed transaction and {records} in an aborted one")
    seen = read_all(servers, topic)
    uncommitted = read_all(servers, topic, isolation="read_uncommitted")
    ok = [(r.key, r.value) for r in seen] == committed
    say(
        f"read_committed read {len(seen)} records, read_uncommitted {len(uncommitted)}; "
        f"committed records {'all' if ok else 'NOT'} read back exactly once, aborted ones hidden"
    )
    admin.delete_topics([topic])
    return ok
