"""The public surface is deliberate: changing it must be a visible decision."""

import kstream
import kstream.errors


def test_top_level_exports() -> None:
    assert sorted(kstream.__all__) == [
        "AggregatingState",
        "ChannelSerde",
        "ConfigurationError",
        "ConnectedStreams",
        "DecodeError",
        "Guarantee",
        "IterationHead",
        "Job",
        "JobFailedError",
        "KStreamError",
        "KafkaSink",
        "KafkaSource",
        "KeyedContext",
        "KeyedStream",
        "LATE",
        "Lateness",
        "ListState",
        "MapState",
        "Producer",
        "RecordError",
        "RecordTooLargeError",
        "RecordType",
        "ReducingState",
        "Serde",
        "Session",
        "Sink",
        "SinkContext",
        "SinkSnapshot",
        "SinkWriter",
        "Sliding",
        "Source",
        "StartPosition",
        "StateSerde",
        "Stream",
        "Tagged",
        "TimeWindow",
        "Tumbling",
        "ValueState",
        "WindowedStream",
        "__version__",
        "lateness",
        "request_snapshot",
        "session",
        "sliding",
        "tumbling",
    ]


def test_every_export_resolves() -> None:
    for name in kstream.__all__:
        assert getattr(kstream, name) is not None, name
    assert set(kstream.__all__) <= set(dir(kstream))


def test_window_assigners_come_from_the_front_door_and_their_module() -> None:
    from kstream.dataflow.operators import windows

    assert (kstream.tumbling, kstream.sliding, kstream.session) == (
        windows.tumbling,
        windows.sliding,
        windows.session,
    )
    assert kstream.tumbling(60_000) == windows.Tumbling(60_000)


def test_exports_are_the_objects_of_their_layers() -> None:
    from kstream.connectors.kafka import KafkaSink
    from kstream.dataflow.job import Job
    from kstream.dataflow.outputs import SinkWriter
    from kstream.dataflow.types import LATE

    assert kstream.Job is Job
    assert kstream.KafkaSink is KafkaSink
    assert kstream.SinkWriter is SinkWriter
    assert kstream.LATE is LATE


def test_the_cli_only_names_stay_out_of_the_front_door() -> None:
    assert not hasattr(kstream, "GUARANTEES")


def test_every_error_descends_from_the_root() -> None:
    for name in kstream.errors.__all__:
        cls = getattr(kstream.errors, name)
        assert issubclass(cls, kstream.errors.KStreamError), name
        assert name.endswith("Error"), name
