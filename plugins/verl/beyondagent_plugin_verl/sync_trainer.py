"""verl's synchronous trainer with our parts: advantage estimators and experience-guided rollouts.

Advantage estimators (`backend.advantage: {name: gigpo | adca | ...}`, and in a synchronous run
every estimator, verl's own included, so that failed episodes leave their groups' statistics):

verl 0.9.1's pluggable estimators see token rewards, the response mask and the group id only;
ours need each episode's steps (token spans, observation and action text), outcome and task
(`beyondagent_core.advantages`). The agent loop puts them in each output's `extra_fields`
(`beyondagent_advantage`, see `advantage_records.py`), which verl keeps with the sample in
its transfer queue. This trainer is verl's synchronous V1 trainer registered under a name of
ours (verl's `register_trainer`; the mapping sets `trainer.v1.trainer_mode`): verl computes GRPO
as usual (KL in reward, rollout corrections), then the spec's estimator replaces the
advantages, written back under the same keys. Its metrics are logged as `advantage/<name>`, as
the torch backend does. As there, a failed episode (an error, a gateway split verl cannot train)
is left out of its group's statistics and gets advantage 0 (`advantages.estimate_finished`).

Experience-guided rollouts (`experience`): the agent loop shows the lessons and returns stripped
samples (`agent_loop.py`); each carries `beyondagent_guidance`. Before verl's GRPO this trainer
gives each off-policy sample its sampling log-probs as the old policy's and marks it in the field
`beyondagent_off_policy`, which the actor's loss reads (`off_policy_loss.py`, set on the actor
workers before the first update). After it, the step's trajectories are summarized into the
store (`Guidance.learn`, every `summarize_every` steps) and `experience/*` metrics are logged.

Loaded in verl's processes through `VERL_USE_EXTERNAL_MODULES` (verl imports it on `import verl`),
which the launcher sets when the spec needs it (`mapping.own_trainer`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import torch

from beyondagent_core.advantages import AdvantageBatch, estimate_finished, load_estimator, save_estimator
from beyondagent_core.metric_names import ADVANTAGE_PREFIX, EXPERIENCE_PREFIX
from beyondagent_core.runtime.guidance import Guidance
from beyondagent_core.types import Trajectory
from beyondagent_plugin_verl import cpu_platform, episode_spool
from beyondagent_core.advantage_records import response_advantages, scored_from_record
from beyondagent_plugin_verl.mapping import ADVANTAGE_RECORD as RECORD_KEY
from beyondagent_plugin_verl.mapping import GUIDANCE_RECORD, OUR_TRAINER, our_advantages

# verl imports this module before its `verl.plugins` entry points, and its trainer modules ask for
# the platform when imported: `backend.device: cpu` needs ours registered first
cpu_platform.register()

import transfer_queue as tq  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl.trainer.ppo.v1.trainer_base import register_trainer  # noqa: E402
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402

from beyondagent_plugin_verl.off_policy_loss import OFF_POLICY_FIELD, OffPolicyLoss  # noqa: E402


@register_trainer(OUR_TRAINER)
class BeyondAgentTrainer(PPOTrainerSync):
    """verl's synchronous trainer, with the spec's advantage estimator after verl's GRPO and its
    experience-guided samples trained off-policy."""

    _estimator: Any = None
    _loss_set = False

    def runtime(self) -> Any:
        """The run's spec and context, built once per process (agent_loop's cache)."""
        from beyondagent_plugin_verl.agent_loop import runtime_of_config

        return runtime_of_config(self.config)

    def estimator(self) -> Any:
        if self._estimator is None:
            self._estimator = self.runtime().context.advantage_estimator()
        return self._estimator

    def step_folder(self) -> Path:
        """The `global_step_N` folder of verl's checkpoint of this step (verl's layout)."""
        return Path(self.config.trainer.default_local_dir) / f"global_step_{self.global_steps}"

    def _save_checkpoint(self) -> None:
        # an estimator's state across steps (rae's baselines) beside verl's: written first, so a checkpoint
        # verl's tracker names always has it
        if our_advantages(self.runtime().context.spec):
            save_estimator(self.estimator(), self.step_folder())
        super()._save_checkpoint()

    def _load_checkpoint(self) -> None:
        super()._load_checkpoint()
        if self.global_steps and our_advantages(self.runtime().context.spec):  # resumed: the state it kept
            load_estimator(self.estimator(), self.step_folder(), who="the advantage estimator (backend.advantage)")

    def guidance(self) -> Guidance | None:
        """The run's experience store and settings (None without an experience block)."""
        return self.runtime().guidance

    def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
        guidance = self.guidance()
        if guidance is not None:
            records = self.guidance_records(batch)
            self.mark_off_policy(batch, [bool(record["off_policy"]) for record in records])
        batch = super()._compute_advantage(batch, metrics)
        if our_advantages(self.runtime().context.spec):
            batch = self.replace_advantages(batch, metrics)
        if guidance is not None:
            metrics.update(self.learn(guidance, batch, records))
        return batch

    def _update_actor(self, batch: Any, metrics: dict) -> Any:
        guidance = self.guidance()
        if guidance is not None and not self._loss_set:  # once: the workers keep their loss function
            block = guidance.block
            loss = OffPolicyLoss(omega_conf_to_dataclass(self.config.actor_rollout_ref.actor),
                                 off_clip_high=block.off_clip_high, dual_clip=block.dual_clip)
            self.actor_rollout_wg.set_loss_fn(loss)
            self._loss_set = True
        return super()._update_actor(batch, metrics)

    def guidance_records(self, batch: Any) -> list[dict]:
        extras = list(tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                                      select_fields=["extra_fields"])["extra_fields"])
        missing = [i for i, extra in enumerate(extras) if GUIDANCE_RECORD not in (extra or {})]
        if missing:
            raise RuntimeError(f"{len(missing)} of {len(extras)} samples carry no `{GUIDANCE_RECORD}` record; the "
                               "beyondagent agent loop writes one when the spec has an experience block")
        return [extra[GUIDANCE_RECORD] for extra in extras]

    def mark_off_policy(self, batch: Any, off_policy: list[bool]) -> None:
        """Off-policy samples: the sampling log-probs stand for the old policy's (the policy that
        sampled them saw the lessons); the flags go to the actor's loss."""
        fields = {OFF_POLICY_FIELD: torch.tensor(off_policy, dtype=torch.float32)}
        if any(off_policy):
            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                                   select_fields=["old_log_probs", "rollout_log_probs"])
            pieces = [rollout if off else old for off, old, rollout in
                      zip(off_policy, data["old_log_probs"].unbind(), data["rollout_log_probs"].unbind(), strict=True)]
            fields["old_log_probs"] = torch.nested.as_nested_tensor(pieces, layout=torch.jagged)
        tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id,
                        fields=TensorDict(fields, batch_size=len(batch)))

    def learn(self, guidance: Guidance, batch: Any, records: list[dict]) -> dict[str, float]:
        """The step's trajectories summarized into the store; `experience/*` metrics of the step."""
        uids = list(tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["uid"])["uid"])
        trajectories = [Trajectory.from_dict(record["trajectory"]) for record in records]
        added = asyncio.run(guidance.learn([t for t in trajectories if t.error is None], int(self.global_steps)))
        retrieved: dict[Any, int] = {}  # per group (uid): the lessons its guided samples were shown
        for uid, record in zip(uids, records, strict=True):
            retrieved[uid] = max(retrieved.get(uid, 0), int(record["retrieved"]))
        success = [bool(t.reward is not None and t.reward.success) for t in trajectories]
        out = guidance.metrics([bool(record["guided"]) for record in records], success, added,
                               retrieved_per_group=list(retrieved.values()),
                               prefixed=[int(record.get("prefixed") or 0) for record in records])
        # the success rates are the launcher's (every episode's facts); the trainer logs the store's numbers
        return {name: value for name, value in out.items() if name.startswith(EXPERIENCE_PREFIX)}

    def replace_advantages(self, batch: Any, metrics: dict) -> Any:
        """The spec's estimator's advantages, in place of verl's GRPO ones."""
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                               select_fields=["uid", "response_mask", "extra_fields"])
        # non-tensor fields come back as a list subclass, a NonTensorStack or an array: list() reads them all
        extras = list(data["extra_fields"])
        missing = [i for i, extra in enumerate(extras) if RECORD_KEY not in (extra or {})]
        if missing:
            raise RuntimeError(f"{len(missing)} of {len(extras)} samples carry no `{RECORD_KEY}` record; the "
                               "beyondagent agent loop writes one when our estimator runs (mapping.our_advantages)")
        records = [extra[RECORD_KEY] for extra in extras]
        uids = list(data["uid"])
        episodes = tuple(scored_from_record(record, uid) for record, uid in zip(records, uids, strict=True))
        advantage_batch = AdvantageBatch(episodes=episodes, step=int(self.global_steps),
                                         total_steps=int(self.total_training_steps),
                                         norm_by_std=bool(self.config.algorithm.get("norm_adv_by_std_in_grpo", True)))
        # failed episodes (their records' `failure`) stay out of the groups' statistics, advantage 0
        result = estimate_finished(self.estimator(), advantage_batch, who="advantage estimator (backend.advantage)")
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
