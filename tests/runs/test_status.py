"""A run's status (:mod:`ablate.runs.status`): members are the words ``result.json`` has always held, and a word
read back from it finds its member by equality, in a tuple, a set or a Counter."""

from __future__ import annotations

import json
from collections import Counter

from ablate.runs.status import ENDED, SETTLED, Status


def test_result_json_holds_the_same_words_as_before():
    text = json.dumps({"status": Status.FINISHED, "others": list(Status)}, indent=2)
    assert json.loads(text) == {"status": "finished",
                                "others": ["running", "finished", "failed", "stopped", "interrupted", "pending"]}


def test_a_status_prints_as_its_word():
    assert (str(Status.INTERRUPTED), f"{Status.STOPPED}", f"{Status.FAILED:>8}") == ("interrupted", "stopped",
                                                                                    "  failed")


def test_a_word_read_back_finds_its_member_in_tuples_sets_and_counters():
    read = json.loads('["finished", "stopped", "failed", "running"]')
    assert [word in SETTLED for word in read] == [True, True, True, False]
    assert [word in ENDED for word in read] == [True, False, True, False]
    assert "finished" in {Status.FINISHED} and Status.FAILED in {"failed"}
    counts = Counter(read + [Status.FINISHED])
    assert counts[Status.FINISHED] == 2 and counts.get(Status.FAILED) == 1 and Status("stopped") is Status.STOPPED
