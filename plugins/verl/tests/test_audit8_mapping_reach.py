"""Two spec facts reach verl through mapping.py as they should (eighth audit, mutants E01 and E04).

- `backend.val_temperature` alone decides whether verl samples in validation
  (`rollout.val_kwargs.do_sample`), in both directions, whatever `backend.temperature` is;
- a synchronous run whose `backend.verl` names our own trainer mode (`beyondagent_sync`) by hand is
  still failure-aware: our estimator writes its advantages (the agent loop records each episode's
  steps), exactly as when the mode is left to us; a native V1 mode hands them to verl's estimator.

From the eighth mutation audit. Main venv only (verl is not imported).
"""

from __future__ import annotations

from pathlib import Path

from beyondagent_plugin_verl.mapping import OUR_TRAINER, failure_aware, our_advantages
from test_mapping import mapped, spec_of

VAL = "actor_rollout_ref.rollout.val_kwargs"


def test_greedy_validation_follows_val_temperature_not_the_training_temperature(tmp_path: Path) -> None:
    greedy = mapped(spec_of(tmp_path, {"val_temperature": 0.0, "temperature": 1.0}), tmp_path)
    assert greedy[f"{VAL}.temperature"] == 0.0 and greedy[f"{VAL}.do_sample"] is False
    sampled = mapped(spec_of(tmp_path, {"val_temperature": 0.5, "temperature": 0.0}), tmp_path)
    assert sampled[f"{VAL}.temperature"] == 0.5 and sampled[f"{VAL}.do_sample"] is True
    assert sampled["actor_rollout_ref.rollout.temperature"] == 0.0


def test_naming_our_trainer_mode_by_hand_keeps_the_run_failure_aware(tmp_path: Path) -> None:
    left_to_us = spec_of(tmp_path, {})
    by_hand = spec_of(tmp_path, {"verl": {"trainer.v1.trainer_mode": OUR_TRAINER}})
    native = spec_of(tmp_path, {"verl": {"trainer.v1.trainer_mode": "colocate_async"}})
    assert failure_aware(left_to_us) and our_advantages(left_to_us)
    assert failure_aware(by_hand) and our_advantages(by_hand)  # the same run as left_to_us
    assert mapped(by_hand, tmp_path)["trainer.v1.trainer_mode"] == OUR_TRAINER
    assert not failure_aware(native) and not our_advantages(native)  # verl's estimator; group_gate gates failures
