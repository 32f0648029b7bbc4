"""Our advantage estimators as Trinity-RFT's ADVANTAGE_FN `beyondagent` (registered by `registration.py`).

Whatever `backend.advantage` names (`grpo` when unset; `gigpo`, `adca`, `dr_grpo`, a third
party's), the mapping sets `algorithm.advantage_fn: beyondagent` with `advantage_fn_args:
{spec_path, cwd}`: for `grpo` the numbers are trinity's own `grpo`'s, but only ours leaves failed
episodes out of the groups' statistics. trinity then
calls this GroupAdvantage on each explored batch of Experiences (in its explorer's experience
pipeline, before training): the spec's estimator (built from the spec, as the torch backend
builds it) gets the batch as our `ScoredEpisode`s, rebuilt from each Experience's
`info["beyondagent_advantage"]` record (`beyondagent_core.advantage_records`), grouped by
trinity's task id; its per-token answer, cut to each Experience's response, becomes
`advantages` (and `returns`), zero off the action mask. A failed episode (its record's `failure`)
is left out of its group's statistics and gets advantage 0 (`advantages.estimate_finished`); the
estimator's metrics, the dropped counts among them, come back as `advantage/<name>`.
"""

from __future__ import annotations

from typing import Any

import torch
from trinity.algorithm.advantage_fn.advantage_fn import GroupAdvantage
from trinity.common.experience import Experience, group_by

from beyondagent_core.advantage_records import response_advantages, scored_from_record
from beyondagent_core.advantages import AdvantageBatch, estimate_finished
from beyondagent_core.metric_names import ADVANTAGE_PREFIX
from beyondagent_plugin_trinity.experiences import ADVANTAGE_RECORD


class BeyondAgentAdvantage(GroupAdvantage):
    def __init__(self, spec_path: str | None = None, cwd: str | None = None, run_dir: str | None = None) -> None:
        if not spec_path:
            raise ValueError("the `beyondagent` advantage_fn needs advantage_fn_args.spec_path: run it through "
                             "`beyondagent run`, which writes the trinity config")
        from beyondagent_plugin_trinity.runtime import runtime

        self.estimator = runtime(spec_path, run_dir or "", cwd).context.advantage_estimator()

    @classmethod
    def default_args(cls) -> dict[str, Any]:
        return {"spec_path": None, "cwd": None}

    def group_experiences(self, exps: list[Experience]) -> dict[str, list[Experience]]:
        return group_by(exps, id_type="task")

    def calculate_group_advantage(self, group_id: str, exps: list[Experience]) -> tuple[list[Experience], dict]:
        return self.estimate({group_id: exps})

    def process(self, exps: list[Experience]) -> tuple[list[Experience], dict]:
        if not exps:
            return [], {}
        groups = self.group_experiences(exps)
        _, metrics = self.estimate(groups)
        return [exp for group in groups.values() for exp in group], metrics

    def estimate(self, groups: dict[str, list[Experience]]) -> tuple[list[Experience], dict]:
        """Our estimator on every group at once (some, like GiGPO's step groups, look across a group)."""
        ordered = [(group, exp) for group, members in groups.items() for exp in members]
        missing = [exp.eid.uid for _, exp in ordered if ADVANTAGE_RECORD not in (exp.info or {})]
        if missing:
            raise ValueError(f"{len(missing)} Experience(s) carry no {ADVANTAGE_RECORD!r} record (e.g. {missing[0]}): "
                             "the `beyondagent` advantage_fn reads the episodes of the `beyondagent` workflow")
        records = [exp.info[ADVANTAGE_RECORD] for _, exp in ordered]
        batch = AdvantageBatch(episodes=tuple(scored_from_record(record, group)
                                              for (group, _), record in zip(ordered, records, strict=True)))
        answer = estimate_finished(self.estimator, batch, who="advantage estimator (backend.advantage)")
        lengths = [len(exp.tokens) - exp.prompt_length for _, exp in ordered]
        for (_, exp), values in zip(ordered, response_advantages(answer.per_token, records, lengths), strict=True):
            advantages = torch.as_tensor(values, dtype=torch.float32) * exp.action_mask.to(torch.float32)
            exp.advantages = advantages
            exp.returns = advantages.clone()
        return [exp for _, exp in ordered], {f"{ADVANTAGE_PREFIX}{name}": float(value)
                                             for name, value in answer.metrics.items()}
