"""How each subtask joined a snapshot: `Cut`, its wire form in acks, the history,
`kstream checkpoints`' column, and which channels a source's marker reaches."""

from __future__ import annotations

from kstream.dataflow.plan import plan
from kstream.examples.seed_ring import token_ring
from kstream.protocol.checkpoint_history import checkpoint_history
from kstream.protocol.cuts import Cut, CutKind
from kstream.protocol.messages import Acked, Completed, Initiated, Triggered, decode
from kstream.tools.cli.checkpoints import cuts_text
from kstream.tools.seeds.ring import RingLayout


def test_cuts_encode_and_parse_back() -> None:
    for cut in (
        Cut(CutKind.STARTED),
        Cut(CutKind.INJECTED),
        Cut(CutKind.TIMEOUT),
        Cut.marker("kstream.j.s3.in0[1]", "s2-0"),
    ):
        assert Cut.parse(cut.encode()) == cut
    for junk in ("", "bogus", "marker", "marker s2-0", "started s1"):
        assert Cut.parse(junk) is None
    assert str(Cut.marker("t[0]", "s2-0")) == "marker from s2-0"
    assert str(Cut(CutKind.INJECTED)) == "injection"


def test_an_ack_carries_its_cut_and_an_older_ack_reads_as_none() -> None:
    ack = Acked(5, 1, "s3-0", cut_on=Cut.marker("t[0]", "s2-0").encode())
    assert decode(ack.to_dict()) == ack
    plain = Acked(5, 1, "s3-0")
    assert "cut_on" not in plain.to_dict()  # an ack without one keeps its old bytes
    assert decode(plain.to_dict()) == plain


def test_the_history_and_the_table_show_each_subtasks_cut() -> None:
    n = 3074
    marker = Cut.marker("kstream.j.s4.in0[0]", "s2-0").encode()
    history = checkpoint_history(
        [
            Initiated(n, 1, "s0-0", 1.0),
            Triggered(n, 1, 1.0),
            Acked(n, 1, "s0-0", cut_on="started"),
            Acked(n, 1, "s4-0", cut_on=marker),
            Acked(n, 1, "s3-0", cut_on="injected"),
            Acked(n, 0, "s9-0", cut_on="injected"),  # another generation's: not this one's
            Completed(n, 1, 0.1, 0, 0.0),
        ]
    )
    [record] = history
    assert record.cuts == (("s0-0", "started"), ("s4-0", marker), ("s3-0", "injected"))
    assert cuts_text(record.cuts) == "s0-0 started, s3-0 injection, s4-0 marker from s2-0"


def test_a_sources_marker_reaches_the_stages_downstream_of_it_loops_included() -> None:
    p = plan(token_ring({"p-input": "a", "q-input": "b", "name": "r"}), 1)
    ring = RingLayout.of(p)
    p_src, q_src = (p.sources().index(t) for t in (ring.p_source, ring.q_source))
    head_channels = set(p.input_writers(ring.head))
    own = {c for c, w in p.input_writers(ring.head).items() if w == ring.p_source}
    # p's head: p's source reaches both its channels (the loop through q); q's
    # source only the loop channel q→p.
    assert p.marker_paths(ring.head)[p_src] == head_channels
    assert p.marker_paths(ring.head)[q_src] == {ring.q_to_p} == head_channels - own
    # q: p's source reaches p→q, not q's own source's channel; q's source both.
    assert p.marker_paths(ring.q)[p_src] == {ring.p_to_q}
    assert p.marker_paths(ring.q)[q_src] == {ring.p_to_q, ring.q_own}
