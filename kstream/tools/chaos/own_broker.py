"""The campaign's own broker: one it creates itself, or none.

A campaign kills, pauses and restarts its broker and starts it from empty
storage, so it must never take someone else's: a port that a setting of the
user names (``KSTREAM_BROKER_PORT``, its default 23092, ``KSTREAM_BOOTSTRAP``),
a port that answers, or a broker directory holding data no campaign created.
`refusal` decides from what `survey` found (pure); `claim` surveys, refuses
with one line or empties the directory and marks it as the campaign's
(`OWNER_FILE`), before anything of the campaign exists.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kstream.errors import ConfigurationError, KStreamError, PortInUseError
from kstream.infra.broker import DEFAULT_PORT, LocalBroker

__all__ = ["OWNER_FILE", "Survey", "claim", "named_ports", "refusal", "survey"]

#: The file in a broker directory that says a campaign created it (and may wipe it).
OWNER_FILE = "created-by-kstream-chaos"


@dataclass(frozen=True, slots=True)
class Survey:
    """What is found around `port` before a campaign takes it."""

    port: int
    #: (setting, port) of every setting that names a broker port.
    named: tuple[tuple[str, int], ...]
    #: The ports of the campaign's broker (listener, controller) that answer.
    answering: tuple[int, ...]
    #: The pid of a broker JVM running from the directory (it may not answer yet).
    running: int | None
    #: The broker directory for `port`.
    directory: Path
    #: It holds anything at all.
    holds_data: bool
    #: It carries `OWNER_FILE`: a campaign created it.
    campaigns: bool


def named_ports(env: Mapping[str, str]) -> tuple[tuple[str, int], ...]:
    """The broker ports the user's settings name: ``KSTREAM_BROKER_PORT`` (or its
    default) and each port in ``KSTREAM_BOOTSTRAP``."""
    found: list[tuple[str, int]] = []
    raw = env.get("KSTREAM_BROKER_PORT")
    if raw is None:
        found.append(("the local broker's default", DEFAULT_PORT))
    elif raw.strip().isdecimal():
        found.append(("KSTREAM_BROKER_PORT", int(raw)))
    for address in env.get("KSTREAM_BOOTSTRAP", "").split(","):
        _, _, port = address.strip().rpartition(":")
        if port.isdecimal():
            found.append(("KSTREAM_BOOTSTRAP", int(port)))
    return tuple(found)


def refusal(s: Survey) -> KStreamError | None:
    """Why the campaign must not take the broker on `s.port`, or None if it may.

    The campaign's broker listens on `port` and `port + 1`; so may any broker a
    setting names, so the two overlap when their ports are less than 2 apart.
    """
    for setting, port in s.named:
        if abs(port - s.port) <= 1:
            return ConfigurationError(
                f"--port {s.port}: the broker on port {port} ({setting}) is not the "
                "campaign's, and a campaign kills and wipes its broker; choose a --port "
                "no setting names"
            )
    if s.answering or s.running is not None:
        what = (
            f"127.0.0.1:{s.answering[0]} answers"
            if s.answering
            else f"a broker runs from {s.directory} (pid {s.running})"
        )
        left = (
            f" (a campaign's broker left running? stop it: kstream broker stop --port {s.port})"
            if s.campaigns
            else ""
        )
        return PortInUseError(
            f"--port {s.port}: {what}, and a campaign only runs on a broker it starts "
            f"itself; choose another --port{left}"
        )
    if s.holds_data and not s.campaigns:
        return ConfigurationError(
            f"--port {s.port}: {s.directory} holds a broker's data that no campaign created, "
            "and a campaign wipes its broker's data; choose another --port"
        )
    return None


def survey(port: int, env: Mapping[str, str] | None = None) -> Survey:
    """Look around `port`: connects to it, reads the broker directory (and drops a
    stale pid file from it, as `LocalBroker.pid` does)."""
    broker = LocalBroker(port)
    directory = broker.directory
    try:
        holds_data = any(directory.iterdir())
    except FileNotFoundError:
        holds_data = False
    return Survey(
        port=port,
        named=named_ports(os.environ if env is None else env),
        answering=tuple(p for p in (port, port + 1) if _answers(p)),
        running=broker.pid(),
        directory=directory,
        holds_data=holds_data,
        campaigns=(directory / OWNER_FILE).is_file(),
    )


def claim(port: int) -> LocalBroker:
    """The broker on `port`, empty and marked as the campaign's; raises `refusal`'s error.

    Nothing is deleted unless a campaign created it and no broker answers on it.
    """
    found = survey(port)
    error = refusal(found)
    if error is not None:
        raise error
    broker = LocalBroker(port)
    shutil.rmtree(broker.directory, ignore_errors=True)
    broker.directory.mkdir(parents=True)
    (broker.directory / OWNER_FILE).write_text(
        "created by kstream chaos, which wipes it at its next campaign on this port\n"
    )
    return broker


def _answers(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0
