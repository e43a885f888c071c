"""How the Slurm backend reads the queue (no cluster: ``squeue``'s answers are given)."""

from __future__ import annotations

from ablate.sweep import slurm_backend


def test_a_job_submitted_after_the_last_look_at_the_queue_is_looked_up_again(monkeypatch):
    """One squeue call serves every wait for a few seconds; a job missing from that snapshot may have been submitted
    after it, and is looked up again rather than taken for ended (which failed a sequential sweep's later looks)."""
    answers = iter([{"7": "RUNNING"}, {"7": "RUNNING", "8": "PENDING"}, {"7": "RUNNING"}, {"7": "RUNNING"}])
    monkeypatch.setattr(slurm_backend, "queue_states", lambda: next(answers))
    queue = slurm_backend._Queue()
    assert queue.state("7") == "RUNNING"
    assert queue.state("8") == "PENDING"  # not in the first snapshot: asked again
    assert queue.state("8") == "PENDING"  # the snapshot serves the waits until it is POLL_EVERY old
    queue.at -= slurm_backend.POLL_EVERY
    assert queue.state("8") is None  # gone from the next answer, and from the one after it: ended


def test_a_queue_that_does_not_answer_is_not_taken_for_an_empty_one(monkeypatch):
    monkeypatch.setattr(slurm_backend, "queue_states", lambda: None)
    assert slurm_backend._Queue().state("7") == "?"
