"""`WorkerPorts` for a subtask opened alone, without a worker around it."""

from __future__ import annotations

from dataclasses import dataclass, field

from confluent_kafka import KafkaError, Message

from kstream.protocol.messages import ControlMessage


@dataclass
class DetachedPorts:
    """Keeps what a subtask sends or announces; nothing is pending, nothing is lost."""

    sent: list[ControlMessage] = field(default_factory=list)
    announced: list[int] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)

    def send_control(self, message: ControlMessage) -> None:
        self.sent.append(message)

    def pump(self) -> None:
        """No worker: no complete or abort to serve."""

    def raise_if_undelivered(self) -> None:
        """Lost records are kept in `lost`, for the test to look at."""

    def delivery_failed(self, err: KafkaError, msg: Message) -> None:
        self.lost.append(f"{msg.topic()}[{msg.partition()}]: {err.str()}")

    def announce(self, checkpoint: int) -> None:
        self.announced.append(checkpoint)
