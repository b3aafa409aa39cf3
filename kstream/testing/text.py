"""Word-count input for tests and demos: lines of words with a skewed (Zipf-like)
frequency, the same list for the same seed."""

from __future__ import annotations

import random

__all__ = ["skewed_lines"]


def skewed_lines(n: int, seed: int, vocabulary: int = 200) -> list[str]:
    """`n` lines of 4 to 12 words: ``w000`` ... (`vocabulary` of them) and a few
    common words, word i drawn with weight 1/(i+1), so some words are frequent and
    most are rare, as in text. Deterministic for a given `seed`."""
    rnd = random.Random(seed)
    vocab = [f"w{i:03d}" for i in range(vocabulary)] + ["the", "a", "kafka", "stream"]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    return [" ".join(rnd.choices(vocab, weights, k=rnd.randint(4, 12))) for _ in range(n)]
