"""Clock jumps cannot fire a timeout: durations are measured on the monotonic clock.

The wall clock (which NTP, a VM migration or an operator may jump) is read only
to stamp messages and reports for people, and in the one decision that must
compare clocks of two machines. This test finds every wall-clock read in the
package and fails on one that is not one of those, so a timeout written with
`time.time()` cannot slip in. (The decisions themselves are pure state machines
that take `now` as an argument: `kstream.protocol.coordinator`, `recovery`,
`presence`, and they are tested with any `now` the tests choose.)
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

WALL_CLOCK = {("time", "time"), ("time", "time_ns"), ("datetime", "now"), ("datetime", "utcnow")}

#: Calls whose arguments are timestamps shown to people, never compared with a deadline.
STAMPED = {
    "Triggered",
    "Initiated",
    "Aborted",
    "Recovered",
    "Completed",
    "Owner",
    "Presence",
    "WorkerAlive",
}

#: (file, function) reading the wall clock on purpose, and why.
ALLOWED = {
    # Another runner's last heartbeat carries its wall-clock time: only a wall
    # clock compares across machines. A jump delays a start by at most `wait_s` or
    # lets it skip that wait; the state directory's lock still refuses a second
    # runner of the same directory.
    ("kstream/runtime/runner/takeover.py", "refuse_if_coordinated_elsewhere"),
    # `kstream savepoint` asks whether the job's runner is alive by the same heartbeat.
    ("kstream/tools/cli/savepoint.py", "savepoint_command"),
    # `kstream status` ages the control topic's stamps (heartbeats, completions,
    # presences: wall-clock times of other hosts) against the time it reads them.
    ("kstream/tools/cli/status.py", "status"),
    # The dashboard ages the same stamps against the time it builds its view.
    ("kstream/tools/ui/server.py", "document"),
    # Adoption compares the workers' last heartbeats (wall-clock stamps of their
    # hosts) with the time the control topic was read: only a wall clock compares
    # across machines. A jump makes live workers look silent (a rollback, as
    # before adoption existed) or dead ones alive until the liveness timeout.
    ("kstream/runtime/runner/runner.py", "_start"),
    # The presence heartbeat's time stamp (see above), taken once for the message.
    ("kstream/runtime/runner/running.py", "_announce"),
    # Processing time (`ctx.now()`, processing-time timers) is the wall clock by
    # definition, documented as not reproducible; idleness uses the monotonic one.
    ("kstream/runtime/state/element.py", "now_ms"),
    # A fault campaign's start on the wall clock: its report places the control
    # topic's (wall-clock) checkpoint stamps on its own timeline.
    ("kstream/tools/chaos/campaign.py", "__init__"),
    # The audit report's "started at", for people.
    ("kstream/audit/run.py", "run_audit"),
    # An output's event time against the broker's wall clock, which is what the
    # topic's message.timestamp.after.max.ms judges it by.
    ("connectors/kafka/rows.py", "guard"),
    # Delta's log stamps a file's modification time and a transaction's lastUpdated
    # with the writer's wall clock, as every Delta writer does.
    ("connectors/delta/writer.py", "stamp_ms"),
    # Time retention deletes by the wall clock: the input's event time is judged
    # against it to warn that results would be deleted.
    ("kstream/runtime/runner/preflight.py", "_warn_of_retention"),
    # An object store stamps objects with its wall clock (LastModified): the sweep's
    # age rule compares against it, with a margin of a minute beyond the checkpoint
    # timeout for skew.
    ("kstream/runtime/checkpoint/objects.py", "_sweep"),
    # A liveness file's age: the file system stamps its modification time with the
    # wall clock, and the probe reading it runs on the same host.
    ("kstream/runtime/runner/alive.py", "age"),
}


def wall_clock_reads() -> list[tuple[str, str, int]]:
    """(file, enclosing function, line) of each wall-clock read outside a message stamp."""
    found = []
    for path in sorted(
        [*ROOT.joinpath("kstream").rglob("*.py"), *ROOT.joinpath("connectors").rglob("*.py")]
    ):
        tree = ast.parse(path.read_text(), str(path))
        rel = path.relative_to(ROOT).as_posix()
        parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[child] = node
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else None
            if (name, node.func.attr) not in WALL_CLOCK:
                continue
            parent = parents.get(node)
            if isinstance(parent, ast.keyword) and parent.arg == "time":
                continue  # time=... of a message or report
            if (
                isinstance(parent, ast.Call)
                and isinstance(parent.func, ast.Name)
                and parent.func.id in STAMPED
            ):
                continue
            function = "<module>"
            up: ast.AST | None = parent
            while up is not None:
                if isinstance(up, ast.FunctionDef | ast.AsyncFunctionDef):
                    function = up.name
                    break
                up = parents.get(up)
            found.append((rel, function, node.lineno))
    return found


def test_the_wall_clock_is_read_only_for_stamps_and_the_cross_machine_check() -> None:
    unexpected = [(f, fn, line) for f, fn, line in wall_clock_reads() if (f, fn) not in ALLOWED]
    assert unexpected == [], (
        "wall-clock reads outside message stamps; measure durations and deadlines with "
        f"time.monotonic(), or add the read to ALLOWED with the reason: {unexpected}"
    )


def test_the_allow_list_has_no_stale_entries() -> None:
    used = {(f, fn) for f, fn, _ in wall_clock_reads()}
    assert not ALLOWED - used, ALLOWED - used
