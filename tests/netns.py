"""Hosts for tests: Linux network namespaces on a bridge of their own.

A `HostNet` is one test run's network: a bridge ``ksbr<n>`` with ``10.213.<n>.1/24``
in the root namespace and, per host ``k``, a namespace ``ks<n>h<k>`` joined to the
bridge by a veth pair, with ``10.213.<n>.<10+k>/24`` inside. A host has no default
route: it reaches the bridge's subnet (the other hosts, and what listens on the
bridge address in the root namespace, such as a test's own broker) and nothing
else. Its loopback is its own: a job run there must name the bridge address.

``n`` is the first number whose bridge does not exist yet, taken by creating the
bridge (creation is atomic), so parallel runs never share one; a bridge left by a
run that died (its owner process gone) is reclaimed. `close` removes every
namespace, link and process it made, and runs also when a test fails.

Needs root and iproute2's ``ip``; `require_netns` says in one line why not
otherwise (the fixture then skips).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The first two bytes of every address a `HostNet` gives out.
SUBNET = "10.213"
#: Where a run notes which process owns bridge ``n`` (for reclaiming a dead run's).
OWNERS = Path("/run/kstream-netns")


class NetnsUnavailableError(Exception):
    """Network namespaces cannot be made here (the one line says why)."""


def _ip(
    *args: str, netns: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    cmd = ["ip", *(["-n", netns] if netns else []), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip() or done.returncode}")
    return done


def require_netns() -> None:
    """Raise `NetnsUnavailableError` unless this process may make network namespaces."""
    if os.geteuid() != 0:
        raise NetnsUnavailableError("network-namespace hosts need root")
    if shutil.which("ip") is None:
        raise NetnsUnavailableError("network-namespace hosts need iproute2's `ip`")
    probe = f"ksprobe{os.getpid()}"
    done = _ip("netns", "add", probe, check=False)
    if done.returncode != 0:
        raise NetnsUnavailableError(f"cannot make a network namespace: {done.stderr.strip()}")
    _ip("netns", "del", probe, check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: A healed link is up and forwarding within this (it takes milliseconds).
HEAL_WAIT_S = 10.0


@dataclass(frozen=True)
class Host:
    """One namespace host: its namespace, its address and the root side of its link."""

    net: HostNet
    index: int
    namespace: str
    address: str
    #: The veth end in the root namespace (on the bridge); ``eth0`` is inside.
    link: str

    def popen(self, cmd: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start `cmd` inside this host: ``ip netns exec`` execs it, so the returned
        process is the command itself (its pid, its signals, its exit code)."""
        proc = subprocess.Popen(["ip", "netns", "exec", self.namespace, *cmd], **kwargs)
        self.net.processes.append(proc)
        self._entered(proc)
        return proc

    def _entered(self, proc: subprocess.Popen[bytes]) -> None:
        """Return once `proc` is inside this host's namespace (or has ended).

        ``ip`` enters the namespace after the fork; until then the process is in
        the root namespace, where `pids` and `kill_all` would miss it.
        """
        want = os.stat(f"/run/netns/{self.namespace}").st_ino
        deadline = time.monotonic() + 10
        while proc.poll() is None:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                if os.stat(f"/proc/{proc.pid}/ns/net").st_ino == want:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.namespace}: pid {proc.pid} never entered it")
            time.sleep(0.005)  # a fork-and-setns takes a few milliseconds

    def pids(self) -> list[int]:
        """Every process whose network namespace is this host's."""
        done = _ip("netns", "pids", self.namespace, check=False)
        return [int(p) for p in done.stdout.split()]

    def kill_all(self) -> list[int]:
        """SIGKILL every process in this host, as a power cut would; the pids killed.

        Returns once they are gone (reaped, if this process started them).
        """
        pids = self.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for proc in self.net.processes:
            if proc.pid in pids:
                proc.wait()
        deadline = time.monotonic() + 10
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.05)  # the kernel tears the killed processes down
        return pids

    def cut(self) -> None:
        """Partition this host: its link goes down; its processes live on, unreachable."""
        _ip("link", "set", self.link, "down")

    def heal(self) -> None:
        """Undo `cut`; returns once both ends of the link carry traffic again.

        A connection tried while cut leaves a failed neighbour (ARP) entry on
        either side, and until it expires every new connection fails at once
        with "No route to host": the entries are flushed. Then it waits (up
        to `HEAL_WAIT_S`) for both ends to report the link up and the bridge
        port to forward.
        """
        _ip("link", "set", self.link, "up")
        _ip("neigh", "flush", "dev", self.net.bridge, check=False)
        _ip("neigh", "flush", "dev", "eth0", netns=self.namespace, check=False)
        deadline = time.monotonic() + HEAL_WAIT_S
        while not self._carries():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.link} of {self.namespace} is not up after a heal")
            time.sleep(0.05)  # polling the kernel's link state, not waiting blind

    def _carries(self) -> bool:
        root = _ip("-o", "link", "show", self.link, check=False).stdout
        inside = _ip("-o", "link", "show", "eth0", netns=self.namespace, check=False).stdout
        port = _ip("-o", "-d", "link", "show", self.link, check=False).stdout
        return "state UP" in root and "state UP" in inside and "state forwarding" in port


@dataclass
class HostNet:
    """A bridge and its namespace hosts (see the module's docstring)."""

    number: int
    hosts: list[Host] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def bridge(self) -> str:
        return f"ksbr{self.number}"

    @property
    def address(self) -> str:
        """The root namespace's address on the bridge: what hosts reach it by."""
        return f"{SUBNET}.{self.number}.1"

    @classmethod
    def create(cls) -> HostNet:
        """Take the first free bridge number and make the bridge."""
        require_netns()
        OWNERS.mkdir(parents=True, exist_ok=True)
        for n in range(1, 255):
            owner = OWNERS / str(n)
            with contextlib.suppress(FileNotFoundError, ValueError):
                if not _alive(int(owner.read_text())):
                    cls(n)._remove()  # a dead run's: reclaim it
            if _ip("link", "add", f"ksbr{n}", "type", "bridge", check=False).returncode != 0:
                continue  # another run's
            owner.write_text(f"{os.getpid()}\n")
            net = cls(n)
            try:
                _ip("addr", "add", f"{net.address}/24", "dev", net.bridge)
                _ip("link", "set", net.bridge, "up")
            except BaseException:
                net.close()
                raise
            return net
        raise NetnsUnavailableError(f"every bridge ksbr1..ksbr254 ({SUBNET}.*) is in use")

    def add_host(self) -> Host:
        """A new namespace host on the bridge, link up."""
        k = len(self.hosts) + 1
        name = f"ks{self.number}h{k}"
        host = Host(self, k, name, f"{SUBNET}.{self.number}.{10 + k}", f"{name}r")
        self.hosts.append(host)
        _ip("netns", "add", name)
        _ip("link", "add", host.link, "type", "veth", "peer", "name", "eth0", "netns", name)
        _ip("link", "set", host.link, "master", self.bridge)
        _ip("link", "set", host.link, "up")
        _ip("addr", "add", f"{host.address}/24", "dev", "eth0", netns=name)
        _ip("link", "set", "eth0", "up", netns=name)
        _ip("link", "set", "lo", "up", netns=name)
        return host

    def namespaces(self) -> list[str]:
        """This net's namespaces that exist now."""
        done = _ip("netns", "list", check=False)
        mine = f"ks{self.number}h"
        return [ln.split()[0] for ln in done.stdout.splitlines() if ln.startswith(mine)]

    def reset(self) -> None:
        """Kill every process in the hosts and bring every link up: hosts as new."""
        for host in self.hosts:
            host.kill_all()
            host.heal()
        for proc in self.processes:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        self.processes.clear()

    def close(self) -> None:
        """Kill every process in the hosts, then remove namespaces, links and bridge."""
        for host in self.hosts:
            host.kill_all()
        for proc in self.processes:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        self._remove()

    def _remove(self) -> None:
        for name in self.namespaces():
            for pid in Host(self, 0, name, "", "").pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            _ip("netns", "del", name, check=False)
            # Deleting the namespace deletes its veth end, and so the pair.
            _ip("link", "del", f"{name}r", check=False)
        _ip("link", "del", self.bridge, check=False)
        (OWNERS / str(self.number)).unlink(missing_ok=True)


def free_port(address: str) -> int:
    """A port free on `address` whose next one is free on 127.0.0.1 (a broker's
    controller), below Linux's ephemeral range (see `kstream.infra.broker.DEFAULT_PORT`)."""
    import random
    import socket

    rnd = random.Random()
    for _ in range(200):
        port = rnd.randrange(24000, 32000, 2)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind((address, port))
                b.bind(("127.0.0.1", port + 1))
        except OSError:
            continue
        return port
    raise RuntimeError(f"no free port pair on {address}")
