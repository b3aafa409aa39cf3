"""`kstream.tools.chaos.own_broker.refusal`: which brokers a campaign may take."""

from __future__ import annotations

from pathlib import Path

import pytest

from kstream.errors import ConfigurationError, PortInUseError
from kstream.tools.chaos.own_broker import Survey, named_ports, refusal

DIR = Path("/cache/broker-24000")


def survey(**changes: object) -> Survey:
    base: dict[str, object] = {
        "port": 24000,
        "named": (("KSTREAM_BROKER_PORT", 23092),),
        "answering": (),
        "running": None,
        "directory": DIR,
        "holds_data": False,
        "campaigns": False,
    }
    return Survey(**{**base, **changes})  # type: ignore[arg-type]


def test_a_free_port_with_no_data_or_a_campaigns_data_is_taken() -> None:
    assert refusal(survey()) is None
    assert refusal(survey(holds_data=True, campaigns=True)) is None


@pytest.mark.parametrize("named", [23999, 24000, 24001])
def test_a_port_overlapping_a_named_broker_is_refused(named: int) -> None:
    error = refusal(survey(named=(("KSTREAM_BOOTSTRAP", named),)))
    assert isinstance(error, ConfigurationError)
    assert str(error).startswith(f"--port 24000: the broker on port {named} (KSTREAM_BOOTSTRAP)")


def test_a_named_port_two_away_is_no_overlap() -> None:
    assert refusal(survey(named=(("KSTREAM_BROKER_PORT", 24002),))) is None


def test_an_answering_port_or_a_running_broker_is_refused_even_if_a_campaign_made_it() -> None:
    error = refusal(survey(answering=(24001,), holds_data=True, campaigns=True))
    assert isinstance(error, PortInUseError)
    assert "127.0.0.1:24001 answers" in str(error)
    assert "kstream broker stop --port 24000" in str(error)
    error = refusal(survey(running=4242, holds_data=True))
    assert isinstance(error, PortInUseError)
    assert f"a broker runs from {DIR} (pid 4242)" in str(error)
    assert "kstream broker stop" not in str(error)


def test_data_no_campaign_created_is_refused() -> None:
    error = refusal(survey(holds_data=True))
    assert isinstance(error, ConfigurationError)
    assert str(error) == (
        f"--port 24000: {DIR} holds a broker's data that no campaign created, and a "
        "campaign wipes its broker's data; choose another --port"
    )


def test_the_settings_that_name_ports() -> None:
    assert named_ports({}) == (("the local broker's default", 23092),)
    assert named_ports(
        {"KSTREAM_BROKER_PORT": "23220", "KSTREAM_BOOTSTRAP": "h1:9092, 127.0.0.1:23192,junk"}
    ) == (("KSTREAM_BROKER_PORT", 23220), ("KSTREAM_BOOTSTRAP", 9092), ("KSTREAM_BOOTSTRAP", 23192))
