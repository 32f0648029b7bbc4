"""The rollout thread starts no batch while validation has paused it (audit 7), checked without timing.

`RolloutPipeline.paused()` must keep the next batch from starting even when the weights already hold its
version. The pipeline's condition variable is a real `threading.Condition`, subclassed only to record the
predicates the rollout thread waits on and to say when it waits: inside `paused()`, after the update that
makes step 2's version available, the thread's predicate for step 2 must still be false (and nothing new
has been produced); once the pause ends, step 2 and step 3 are generated in order.
"""

from __future__ import annotations

import threading

from beyondagent_plugin_torch import async_rollout
from beyondagent_plugin_torch.async_rollout import RolloutPipeline


CONDITION = threading.Condition


class RecordingCondition(CONDITION):
    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.predicates: list = []
        self.arrived = CONDITION()

    def wait_for(self, predicate, timeout=None):
        if threading.current_thread().name == "beyondagent-rollout":
            with self.arrived:
                self.predicates.append(predicate)
                self.arrived.notify_all()
        return super().wait_for(predicate, timeout)

    def rollout_waits(self, count: int) -> None:
        """Until the rollout thread has waited `count` times (it always gets there: no timeout needed)."""
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.predicates) >= count)


def test_a_paused_pipeline_starts_no_batch_even_when_its_version_is_ready(monkeypatch) -> None:
    monkeypatch.setattr(async_rollout.threading, "Condition", RecordingCondition)
    produced: list[tuple[int, int]] = []

    def produce(step: int, version: int) -> int:
        produced.append((step, version))
        return step

    pipeline = RolloutPipeline(produce, start_step=0, total_steps=3, version_of=lambda step: step - 1)
    monkeypatch.undo()  # only the pipeline's own condition records
    condition = pipeline._changed
    assert isinstance(condition, RecordingCondition)
    try:
        condition.rollout_waits(1)  # step 1 (version 0: ready at once)
        assert pipeline.take(1)[0] == 1
        condition.rollout_waits(2)  # step 2 waits for version 1
        with pipeline.paused():
            pipeline.advance()  # the weights hold version 1 now
            with condition:
                assert not condition.predicates[-1]()  # yet the paused thread may not start step 2
                assert produced == [(1, 0)]
        assert pipeline.take(2)[0] == 2
        pipeline.advance()
        assert pipeline.take(3)[0] == 3
        assert produced == [(1, 0), (2, 1), (3, 2)]
    finally:
        pipeline.close()
