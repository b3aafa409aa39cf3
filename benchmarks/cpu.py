"""CPU-seconds of the processes a benchmark involves: a contender's process tree, the
broker, and the whole machine (what everything else took meanwhile).

A process's CPU time is only readable while it lives, so a tree is sampled
(`TreeCpu.sample`) while it runs and each process keeps the largest figure
seen: the CPU a child used after the last sample before it exited is lost
(kstream's workers and Flink's JVM live for the whole run, so this is small).
"""

from __future__ import annotations

import psutil

__all__ = ["TreeCpu", "broker_process", "machine_busy_s", "process_cpu_s"]


def process_cpu_s(proc: psutil.Process) -> float:
    """User + system CPU-seconds of `proc` so far (its reaped children's not counted)."""
    t = proc.cpu_times()
    return float(t.user + t.system)


class TreeCpu:
    """CPU-seconds of a process and all its descendants, sampled."""

    def __init__(self, pid: int) -> None:
        self._root = psutil.Process(pid)
        #: (pid, create time) -> largest CPU-seconds seen; pids are reused, the pair is not.
        self._seen: dict[tuple[int, float], float] = {}

    def sample(self) -> None:
        """Read every live process of the tree (the ones gone by now are skipped)."""
        try:
            procs = [self._root, *self._root.children(recursive=True)]
        except psutil.Error:
            return
        for p in procs:
            try:
                key = (p.pid, p.create_time())
                self._seen[key] = max(self._seen.get(key, 0.0), process_cpu_s(p))
            except psutil.Error:
                continue

    @property
    def processes(self) -> int:
        """How many processes the tree had in all, so far."""
        return len(self._seen)

    @property
    def cpu_s(self) -> float:
        return sum(self._seen.values())


def broker_process(bootstrap: str) -> psutil.Process | None:
    """The local process listening on the first address's port of `bootstrap`, or None
    (a broker in a container or on another host: its CPU is not measured here)."""
    port_text = bootstrap.split(",")[0].rsplit(":", 1)[-1]
    if not port_text.isdigit():
        return None
    port = int(port_text)
    try:
        conns = psutil.net_connections(kind="tcp")
    except psutil.Error:
        return None
    for c in conns:
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
            try:
                return psutil.Process(c.pid)
            except psutil.Error:
                return None
    return None


def machine_busy_s() -> float:
    """CPU-seconds every core spent busy since boot (all processes)."""
    t = psutil.cpu_times()
    return float(sum(t) - t.idle - getattr(t, "iowait", 0.0))
