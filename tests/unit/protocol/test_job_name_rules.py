"""`kstream.protocol.names.check_job_name`: which names a job can have, and why."""

from __future__ import annotations

import os

import pytest

from kstream.errors import ConfigurationError
from kstream.protocol import names
from kstream.protocol.names import JOB_NAME_MAX, check_job_name


def derived_topics(job: str) -> list[str]:
    """Every topic a job of that name may have, with stage and input numbers far
    beyond any real job's."""
    big = 10**9
    return [
        names.channel_topic(job, big),
        names.channel_topic(job, big, big),
        names.loop_topic(job, big),
        names.control_topic(job),
        names.dead_letter_topic(job),
        names.commit_topic(job),
    ]


def test_the_longest_name_keeps_every_topic_within_kafkas_limit_and_is_a_file_name(
    tmp_path: os.PathLike[str],
) -> None:
    longest = "j" * JOB_NAME_MAX
    assert check_job_name(longest) == longest
    for topic in derived_topics(longest):
        assert len(topic) <= 249, topic
    os.mkdir(os.path.join(tmp_path, longest))  # a directory of the state dir


@pytest.mark.parametrize("name", ["a", "wordcount-in-out", "A.b_c-9", "..."])
def test_kafkas_topic_characters_are_accepted(name: str) -> None:
    assert check_job_name(name) == name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "the job name is empty; give a name such as wordcount-1"),
        (
            "j" * (JOB_NAME_MAX + 1),
            f"job name '{'j' * 40}...' has 201 characters; at most 200, so every topic "
            "of the job fits Kafka's 249",
        ),
        (
            "wörter",
            "job name 'wörter' holds 'ö'; only ASCII letters, digits, '.', '_' and '-' "
            "(Kafka's topic characters) are allowed",
        ),
        ("a b+c d", "job name 'a b+c d' holds ' +'; only ASCII letters"),
        (".", "job name '.' names no directory of its own; choose another"),
        ("..", "job name '..' names no directory of its own; choose another"),
    ],
)
def test_a_name_no_job_can_have_is_one_line(name: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        check_job_name(name)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)
