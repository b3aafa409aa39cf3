"""`WorkerPorts` for a subtask opened alone, without a worker around it."""

from __future__ import annotations

from dataclasses import dataclass, field

from kstream.protocol.messages import ControlMessage


@dataclass
class DetachedPorts:
    """Keeps what a subtask sends or announces; nothing is pending, nothing is lost."""

    sent: list[ControlMessage] = field(default_factory=list)
    announced: list[int] = field(default_factory=list)

    def send_control(self, message: ControlMessage) -> None:
        self.sent.append(message)

    def pump(self) -> None:
        """No worker: no complete or abort to serve."""

    def raise_if_undelivered(self) -> None:
        """No delivery errors are collected here."""

    def announce(self, checkpoint: int) -> None:
        self.announced.append(checkpoint)
