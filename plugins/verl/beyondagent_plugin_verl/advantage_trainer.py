"""Our advantage estimators in verl's trainer: `backend.advantage: {name: gigpo | adca | ...}`.

verl 0.9.1's pluggable estimators see token rewards, the response mask and the group id only;
ours need each episode's steps (token spans, observation and action text), outcome and task
(`beyondagent_core.advantages`). The agent loop puts them in each output's `extra_fields`
(`beyondagent_advantage`, see `advantage_records.py`), which verl keeps with the sample in
its transfer queue. This trainer is verl's synchronous V1 trainer registered under a name of
ours (verl's `register_trainer`; the mapping sets `trainer.v1.trainer_mode`): verl computes GRPO
as usual (KL in reward, rollout corrections), then the spec's estimator replaces the
advantages, written back under the same keys. Its metrics are logged as `advantage/<name>`, as
the torch backend does.

Loaded in verl's processes through `VERL_USE_EXTERNAL_MODULES` (verl imports it on `import verl`),
which the launcher sets only when the estimator is not GRPO.
"""

from __future__ import annotations

from typing import Any

import torch

from beyondagent_core.advantages import AdvantageBatch, check_advantages
from beyondagent_core.metric_names import ADVANTAGE_PREFIX
from beyondagent_plugin_verl import cpu_platform, episode_spool
from beyondagent_plugin_verl.advantage_records import response_advantages, scored_from_record
from beyondagent_plugin_verl.mapping import ADVANTAGE_RECORD as RECORD_KEY
from beyondagent_plugin_verl.mapping import ADVANTAGE_TRAINER

# verl imports this module before its `verl.plugins` entry points, and its trainer modules ask for
# the platform when imported: `backend.device: cpu` needs ours registered first
cpu_platform.register()

import transfer_queue as tq  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl.trainer.ppo.v1.trainer_base import register_trainer  # noqa: E402
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync  # noqa: E402


@register_trainer(ADVANTAGE_TRAINER)
class EstimatorTrainer(PPOTrainerSync):
    """verl's synchronous trainer, with the spec's advantage estimator after verl's GRPO."""

    _estimator: Any = None

    def runtime(self) -> Any:
        """The run's spec and context, built once per process (agent_loop's cache)."""
        from beyondagent_plugin_verl.agent_loop import runtime_of_config

        return runtime_of_config(self.config)

    def estimator(self) -> Any:
        if self._estimator is None:
            self._estimator = self.runtime().context.advantage_estimator()
        return self._estimator

    def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
        batch = super()._compute_advantage(batch, metrics)
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                               select_fields=["uid", "response_mask", "extra_fields"])
        # non-tensor fields come back as a list subclass, a NonTensorStack or an array: list() reads them all
        extras = list(data["extra_fields"])
        missing = [i for i, extra in enumerate(extras) if RECORD_KEY not in (extra or {})]
        if missing:
            raise RuntimeError(f"{len(missing)} of {len(extras)} samples carry no `{RECORD_KEY}` record; the "
                               "beyondagent agent loop writes one when backend.advantage is not grpo")
        records = [extra[RECORD_KEY] for extra in extras]
        uids = list(data["uid"])
        episodes = tuple(scored_from_record(record, uid) for record, uid in zip(records, uids, strict=True))
        advantage_batch = AdvantageBatch(episodes=episodes, step=int(self.global_steps),
                                         total_steps=int(self.total_training_steps),
                                         norm_by_std=bool(self.config.algorithm.get("norm_adv_by_std_in_grpo", True)))
        result = check_advantages(self.estimator().estimate(advantage_batch), advantage_batch,
                                  who="advantage estimator (backend.advantage)")
        lengths = data["response_mask"].offsets().diff().tolist()
        pieces = [torch.from_numpy(piece) for piece in response_advantages(result.per_token, records, lengths)]
        advantages = torch.nested.as_nested_tensor(pieces, layout=torch.jagged)
        batch = tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id,
                                fields=TensorDict({"advantages": advantages}, batch_size=len(batch)))
        metrics.update({f"{ADVANTAGE_PREFIX}{name}": float(value) for name, value in result.metrics.items()})
        self.spool_for_viewer(records, pieces, result.per_step)
        return batch

    def spool_for_viewer(self, records: list[dict], pieces: list[torch.Tensor], per_step: list | None) -> None:
        """Each episode's advantages and step values, for its `episodes.jsonl` record (episode_spool)."""
        run_dir = self.runtime().context.info.run_dir
        values = [{"id": record.get("id"), "advantages": piece.tolist(),
                   "step_values": None if per_step is None or per_step[i] is None else per_step[i].tolist()}
                  for i, (record, piece) in enumerate(zip(records, pieces, strict=True))]
        episode_spool.spool_advantages(run_dir, int(self.global_steps), values)
