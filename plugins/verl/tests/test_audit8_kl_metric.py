"""`actor/kl` in a verl run's metrics.jsonl means what the torch backend's does (eighth audit, mutant
E15): the KL to the reference policy that the loss penalizes (verl's `actor/kl_loss`); verl's
`actor/ppo_kl` (old vs current policy within an update) stands in only when verl logged no KL loss or
a non-finite one. Both are kept under `verl/` as they are.

From the eighth mutation audit.
"""

from __future__ import annotations

from beyondagent_plugin_verl import metrics as metric_map


def test_actor_kl_is_the_kl_loss_when_verl_logs_both() -> None:
    ours = metric_map.map_step({"actor/ppo_kl": 0.5, "actor/kl_loss": 0.02})
    assert ours["actor/kl"] == 0.02
    assert ours["verl/actor/ppo_kl"] == 0.5 and ours["verl/actor/kl_loss"] == 0.02


def test_actor_kl_falls_back_to_ppo_kl_only_without_a_finite_kl_loss() -> None:
    assert metric_map.map_step({"actor/ppo_kl": 0.5})["actor/kl"] == 0.5
    assert metric_map.map_step({"actor/ppo_kl": 0.5, "actor/kl_loss": float("nan")})["actor/kl"] == 0.5
