"""The network-namespace host fixture: it makes hosts that reach the bridge and
nothing else, cuts and heals their links, kills their processes, removes it all."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from netns import HostNet, NetnsUnavailableError

#: A process in a host that connects to `address:port` and prints what it got.
CONNECT = (
    "import socket,sys\n"
    "s=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=3)\n"
    "print(s.recv(16).decode())\n"
)


def _serve_once(address: str) -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind((address, 0))
    server.listen(1)
    server.settimeout(20)  # a connection that never comes fails the test, never hangs it
    return server, server.getsockname()[1]


def _connect(net: HostNet, k: int, address: str, port: int) -> subprocess.CompletedProcess[bytes]:
    proc = net.hosts[k].popen(
        [sys.executable, "-c", CONNECT, address, str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = proc.communicate(timeout=20)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_hosts_reach_the_bridge_only_and_are_removed() -> None:
    try:
        net = HostNet.create()
    except NetnsUnavailableError as exc:
        pytest.skip(str(exc))
    try:
        a = net.add_host()
        net.add_host()
        assert sorted(net.namespaces()) == [a.namespace, f"ks{net.number}h2"]
        assert a.address == f"10.213.{net.number}.11"
        server, port = _serve_once(net.address)
        with server:
            proc = a.popen(
                [sys.executable, "-c", CONNECT, net.address, str(port)],
                stdout=subprocess.PIPE,
            )
            conn, peer = server.accept()
            # The connection comes from the host's own address, over its link.
            assert peer[0] == a.address
            conn.sendall(b"hello")
            conn.close()
            out, _ = proc.communicate(timeout=20)
            assert out.decode().strip() == "hello"
        # Loopback inside a host is its own: the root namespace's listener is not there.
        server, port = _serve_once("127.0.0.1")
        with server:
            assert _connect(net, 0, "127.0.0.1", port).returncode != 0
        # No route anywhere but the bridge's subnet.
        assert _connect(net, 0, "10.0.0.1", 9).returncode != 0
        # A cut host cannot reach the bridge; healed, it can.
        a.cut()
        server, port = _serve_once(net.address)
        with server:
            assert _connect(net, 0, net.address, port).returncode != 0
        a.heal()
        server, port = _serve_once(net.address)
        with server:
            proc = a.popen(
                [sys.executable, "-c", CONNECT, net.address, str(port)],
                stdout=subprocess.PIPE,
            )
            conn, _ = server.accept()
            conn.sendall(b"again")
            conn.close()
            assert proc.communicate(timeout=20)[0].decode().strip() == "again"
        # Every process of a host dies at once.
        sleeper = a.popen([sys.executable, "-c", "import time; time.sleep(600)"])
        assert sleeper.pid in a.pids()
        assert sleeper.pid in a.kill_all()
        assert sleeper.returncode == -9
        assert a.pids() == []
        # Left running for `close` to kill.
        net.hosts[1].popen([sys.executable, "-c", "import time; time.sleep(600)"])
    finally:
        net.close()
    assert net.namespaces() == []
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f"ksbr{net.number}:" not in links
    assert f"ks{net.number}h1r" not in links
