"""Shared by the end-to-end tests of the running word count."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from kstream.tools.demo import WordcountOutcome, wordcount_demo


def run_wordcount(bootstrap: str, messages: list[str], **options: Any) -> WordcountOutcome:
    """The demo's word count with 3 workers, quiet, its messages collected in `messages`."""
    defaults: dict[str, Any] = {
        "workers": 3,
        "bootstrap": bootstrap,
        "say": messages.append,
        "console": Console(quiet=True),
    }
    return wordcount_demo(**{**defaults, **options})


def assert_exactly_once(outcome: WordcountOutcome) -> None:
    """Every word's outputs, read with read_committed, are exactly 1..N in order."""
    check = outcome.check
    assert check.words > 1000
    assert check.wrong_final == []
    assert check.duplicates == 0
    assert check.missing == 0
    assert check.out_of_order == 0
    assert check.outputs == outcome.words
