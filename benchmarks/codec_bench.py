"""Channel batch encoding: pickle (what channels used) against kstream's codec, side by side.

Encodes and decodes the batches channels carry, as the channel writer and
reader do (`kstream.runtime.channels.format.BatchFormat`), and prints microseconds per
batch and the ratio codec / pickle (below 1: the codec is faster)::

    python benchmarks/codec_bench.py [--batch 500] [--repeat 7]

The words come from the word count's generator (`kstream.examples.inputs`),
so their lengths are those of the word count's channel batches.
"""

from __future__ import annotations

import argparse
import pickle
import random
import timeit
from collections.abc import Callable
from typing import Any

from kstream.runtime.channels.format import BatchFormat


def words(n: int) -> list[str]:
    rnd = random.Random(7)
    vocabulary = [
        "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 10)))
        for _ in range(5000)
    ]
    return [rnd.choice(vocabulary) for _ in range(n)]


def batches(n: int) -> dict[str, tuple[list[Any], bool]]:
    """name -> (batch, keyed): the shapes channels carry."""
    w = words(n)
    return {
        "word count hash edge: (word, word)": ([(x, x) for x in w], True),
        "(str, int) pairs, keyed": ([(x, i) for i, x in enumerate(w)], True),
        "(str, int) pairs, rebalance": ([(x, i) for i, x in enumerate(w)], False),
        "list of str, rebalance": (w, False),
        "dicts, rebalance": ([{"word": x, "n": i, "ok": True} for i, x in enumerate(w)], False),
        "(str, (int, float)) nested, keyed": ([(x, (i, i / 3)) for i, x in enumerate(w)], True),
    }


def best_of_both(
    a: Callable[[], object], b: Callable[[], object], repeat: int
) -> tuple[float, float]:
    """Best time of one call of `a` and of `b` in microseconds.

    Rounds alternate a, b, a, b, ...: the machine's load (shared with other
    work) then weighs on both alike, and the best round of each is kept.
    """
    ta, tb = timeit.Timer(a), timeit.Timer(b)
    number = max(ta.autorange()[0], tb.autorange()[0])
    times_a, times_b = [], []
    for _ in range(repeat):
        times_a.append(ta.timeit(number))
        times_b.append(tb.timeit(number))
    return min(times_a) / number * 1e6, min(times_b) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=500, help="stream records per batch")
    parser.add_argument("--repeat", type=int, default=15, help="alternating rounds")
    args = parser.parse_args()
    codec = BatchFormat()
    print(f"{'batch':38} {'pickle us':>10} {'codec us':>10} {'codec/pickle':>13}  bytes p/c")
    for name, (batch, keyed) in batches(args.batch).items():
        pickled = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
        fmt, body = codec.encode(batch, keyed)
        record = b"\x00\x00\x00\x00\x01" + bytes([fmt]) + body
        assert codec.decode(record, keyed) == batch

        def with_pickle(b: list[Any] = batch) -> object:
            return pickle.loads(pickle.dumps(b, protocol=pickle.HIGHEST_PROTOCOL))

        def with_codec(b: list[Any] = batch, k: bool = keyed) -> object:
            f, body = codec.encode(b, k)
            return codec.decode(b"\x00\x00\x00\x00\x01" + bytes([f]) + body, k)

        p, c = best_of_both(with_pickle, with_codec, args.repeat)
        print(f"{name:38} {p:10.1f} {c:10.1f} {c / p:13.2f}  {len(pickled)}/{len(body)}")


if __name__ == "__main__":
    main()
