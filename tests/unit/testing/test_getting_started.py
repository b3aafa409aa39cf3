"""The word count tested without a broker: docs/getting-started.md shows this file."""

from kstream.examples import wordcount
from kstream.testing import Record, run_job


def test_the_word_count_counts_each_word_so_far() -> None:
    outputs = run_job(wordcount.job, {"words": [Record("to be or not to be")]})

    counts = [(r.key, r.value) for r in outputs["word-counts"]]
    assert counts == [
        ("to", "1"),
        ("be", "1"),
        ("or", "1"),
        ("not", "1"),
        ("to", "2"),
        ("be", "2"),
    ]
