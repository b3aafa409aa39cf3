"""Free TCP ports on 127.0.0.1 for a test's or a benchmark's own servers."""

from __future__ import annotations

import socket

from kstream.errors import EnvironmentSetupError

__all__ = ["free_ports"]

#: Attempts before giving up: another process may take a port between two probes.
_ATTEMPTS = 50


def free_ports(n: int = 1) -> int:
    """A port P such that P .. P+n-1 on 127.0.0.1 are all free now (bound and
    released, so a server started soon after can take them; nothing holds them).
    Raises `EnvironmentSetupError` when no such run is found."""
    for _ in range(_ATTEMPTS):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base: int = probe.getsockname()[1]
        if base + n > 65536:
            continue
        held: list[socket.socket] = []
        try:
            for port in range(base, base + n):
                held.append(socket.socket())
                held[-1].bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise EnvironmentSetupError(f"no {n} consecutive free ports on 127.0.0.1")
