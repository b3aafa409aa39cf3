"""Each sink's declared `Sink.commit_markers`, as the resume check uses it.

The runner decides what a resumed checkpoint reads of the commit-marker topic
from the sink's declaration alone (`kstream.protocol.resume_check.marker_need`),
not from the shape of what its snapshot kept. Here every sink of the package
meets a snapshot of the kind its own writer keeps: a wrong declaration either
lets a Kafka sink resume without the markers that tell it which epochs are
published (they would be published again) or refuses every resume of a table
sink (its marker partition is never written).
"""

from __future__ import annotations

from typing import Any

import pytest

from kstream.connectors.delta import DeltaSink
from kstream.connectors.iceberg import IcebergSink
from kstream.connectors.kafka import KafkaSink
from kstream.connectors.postgres import PostgresSink
from kstream.dataflow.outputs import Sink
from kstream.protocol.resume_check import Need, marker_need, unmet
from kstream.testing.kafka import RecordingSink

#: Each sink with the snapshot meta its writer keeps with two epochs pending.
KEPT: list[tuple[Sink, dict[str, Any]]] = [
    # The transactional writer: epoch numbers, and its newest committed marker.
    (KafkaSink("out"), {"pending": [8, 9], "marker": [3, 90]}),
    # Prepared transactions, by gid.
    (
        PostgresSink("postgresql://h/db", "counts", ("word", "n")),
        {"prepared": ["kstream:j:s1-0:8:2", "kstream:j:s1-0:9:2"]},
    ),
    # Add actions of the epochs' files.
    (
        DeltaSink("/tmp/t", {"word": "string", "n": "long"}),
        {"pending": [{"epoch": 8, "files": ["part-0.parquet"]}, {"epoch": 9, "files": []}]},
    ),
    # (epoch, its data files) pairs.
    (
        IcebergSink({"uri": "sqlite:///c.db"}, "ns.counts", ("word", "n")),
        {"pending": [[8, ["file:///w/8-0.parquet"]], [9, ["file:///w/9-0.parquet"]]]},
    ),
    (RecordingSink(), {}),
]


@pytest.mark.parametrize(("sink", "kept"), KEPT, ids=lambda x: getattr(x, "name", ""))
def test_only_the_kafka_sink_confirms_its_epochs_by_commit_markers(
    sink: Sink, kept: dict[str, Any]
) -> None:
    assert sink.commit_markers is isinstance(sink, KafkaSink)


@pytest.mark.parametrize(("sink", "kept"), KEPT, ids=lambda x: getattr(x, "name", ""))
def test_a_resume_reads_markers_only_for_a_sink_that_writes_them(
    sink: Sink, kept: dict[str, Any]
) -> None:
    need = marker_need("j.commits", 3, kept, markers=sink.commit_markers)
    # An emptied marker topic (deleted and created again) refuses the Kafka
    # sink's resume and no other's.
    emptied = {"j.commits": {3: (0, 0)}}
    if isinstance(sink, KafkaSink):
        assert need == Need("j.commits", 3, 90, 93, "commit markers")
        assert unmet([need], emptied) is not None
    else:
        assert need is None
