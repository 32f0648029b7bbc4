"""Our episodes inside verl's rollout: an agent loop that runs the spec's workflow, env and judges.

Runs in verl's venv, in each `AgentLoopWorker` (a Ray actor). It gets there two ways, both public:
verl imports this module in every worker through the `verl.plugins` entry point (`import verl`
loads them; the `@register` below adds `beyondagent` to verl's agent-loop registry), and the
launcher writes an `agent_loop_config_path` file naming the same class with the run's settings:

    - name: beyondagent
      _target_: beyondagent_plugin_verl.agent_loop.BeyondAgentLoop
      spec_path: runs/x/spec.yaml        # the user's spec (secrets stay as `${oc.env:...}`)
      spec_overrides: []
      run_dir: runs/x
      max_new_tokens: 64

For each dataset row verl calls `run(sampling_params, **row)`: the loop rebuilds our `Task` from
the row (`extra_info.beyondagent_task`, written by the core's parquet writer), gives the workflow
a `VerlChat` (token in/out through verl's server manager), runs our `EpisodeRunner` (workflow +
env + the task's judge) and returns verl's `AgentLoopOutput`: prompt and response ids exactly as
generated, a response mask that is 1 only on model tokens, the rollout log-probs, and the judge's
score as `reward_score` (so verl's reward loop has nothing to do).
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)

from beyondagent_core.runtime.tokens import ChatTemplate
from beyondagent_core.sources.parquet import row_to_task
from beyondagent_core.types import Task, Trajectory
from beyondagent_plugin_verl.mapping import AGENT_NAME
from beyondagent_plugin_verl.verl_chat import VerlChat

# One runtime per (spec, worker process): the plugins, the run context and its env opener are
# built once, not once per episode (verl instantiates the loop for every sample).
_RUNTIMES: dict[tuple[str, tuple[str, ...], str], Any] = {}


class WorkerRuntime:
    """The spec's episode runner, built in this worker from the spec file."""

    def __init__(self, spec_path: str, overrides: tuple[str, ...], run_dir: str):
        from beyondagent_core.context import RunContext, RunInfo
        from beyondagent_core.pipeline import prepare

        session = prepare(spec_path, list(overrides))
        spec = session.spec
        info = RunInfo(name=spec.run.name, run_dir=Path(run_dir), seed=spec.run.seed, spec=spec.redacted())
        self.context = RunContext(spec=spec, info=info, manager=session.manager)
        self.runner = self.context.episode_runner()


def runtime(spec_path: str, overrides: tuple[str, ...], run_dir: str) -> WorkerRuntime:
    key = (spec_path, overrides, run_dir)
    if key not in _RUNTIMES:
        _RUNTIMES[key] = WorkerRuntime(spec_path, overrides, run_dir)
    return _RUNTIMES[key]


def task_of(row: dict[str, Any]) -> Task:
    """Our Task from a verl dataset row (the serialized task our writer put in `extra_info`)."""
    extra = row.get("extra_info")
    plain = {"extra_info": dict(extra) if extra is not None else None, "data_source": row.get("data_source"),
             "prompt": list(row.get("raw_prompt") or row.get("prompt") or []), "reward_model": row.get("reward_model")}
    return row_to_task(plain, int(row.get("index", 0) or 0))


def record_episode(run_dir: str, row: dict[str, Any], facts: dict[str, Any]) -> None:
    """Append this episode's facts to `<run_dir>/verl/episodes/<host>-<pid>.jsonl`.

    verl's step metrics have no success rate (its reward is a float); the launcher reads these
    lines and adds `train/success_rate` (and per origin) to each step, by `global_steps` (which
    verl's V1 trainer passes with every row) and the row's split.
    """
    extra = row.get("extra_info") or {}
    record = {**facts, "global_steps": _plain_int(row.get("global_steps")), "split": extra.get("split"),
              "epoch": extra.get("epoch")}
    directory = Path(run_dir) / "verl" / "episodes"
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / f"{socket.gethostname()}-{os.getpid()}.jsonl").open("a") as handle:
        handle.write(json.dumps(record, default=str) + "\n")


def _plain_int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


@register(AGENT_NAME)
class BeyondAgentLoop(AgentLoopBase):
    """verl agent loop running a BeyondAgent spec's workflow, env and judges for one dataset row."""

    def __init__(self, *args: Any, spec_path: str | None = None, spec_overrides: Any = (), run_dir: str | None = None,
                 max_new_tokens: int | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if not spec_path:
            raise ValueError("the `beyondagent` agent loop needs `spec_path` (and run_dir): run it through "
                             "`beyondagent run` (which writes rollout.agent.agent_loop_config_path), not bare verl")
        self.spec_path = str(spec_path)
        self.spec_overrides = tuple(str(o) for o in (spec_overrides or ()))
        self.run_dir = str(run_dir or Path(spec_path).parent)
        self.max_new_tokens = int(max_new_tokens or self.rollout_config.response_length)
        self.template = ChatTemplate(self.tokenizer)

    async def run(self, sampling_params: dict[str, Any], **row: Any) -> AgentLoopOutput:
        task = task_of(row)
        runner = runtime(self.spec_path, self.spec_overrides, self.run_dir).runner
        llm = VerlChat(self.server_manager, self.template, sampling_params, request_id=uuid4().hex,
                       prompt_length=self.rollout_config.prompt_length,
                       response_length=self.rollout_config.response_length, max_new_tokens=self.max_new_tokens)
        started = time.perf_counter()
        trajectory = await runner.run(task, llm)
        output = self.output(llm, trajectory, seconds=time.perf_counter() - started)
        record_episode(self.run_dir, row, output.extra_fields["beyondagent"])
        return output

    def output(self, llm: VerlChat, trajectory: Trajectory, *, seconds: float) -> AgentLoopOutput:
        prompt_ids, response_ids, response_mask, logprobs = llm.response()
        if not prompt_ids:  # the episode failed before its first prompt: a one-token stand-in, mask 0
            prompt_ids = [self._pad_id()]
        if not response_ids:  # no model turn (a failed episode): nothing to learn from, mask 0
            response_ids, response_mask, logprobs = [self._pad_id()], [0], [0.0]
        reward = trajectory.reward
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=response_mask,
            response_logprobs=logprobs,
            reward_score=float(reward.score) if reward is not None else 0.0,
            num_turns=len(trajectory.turns),
            metrics=AgentLoopMetrics(generate_sequences=0.0),
            extra_fields={
                # verl's validation reports reward_extra_info per data source; `acc` becomes its
                # core metric (val-core/<source>/acc/mean@1): our judge's success, i.e. pass@1
                "reward_extra_info": {"acc": float(bool(reward.success)) if reward is not None else 0.0},
                "beyondagent": {
                    "task_id": trajectory.task.task_id,
                    "origin": trajectory.task.origin,
                    "success": bool(reward.success) if reward is not None else False,
                    "reward": float(reward.score) if reward is not None else 0.0,
                    "model_turns": llm.sequence.model_turns,
                    "error": trajectory.error,
                    "seconds": round(seconds, 4),
                    # observation tokens after the last model turn (no learning signal) and anything past
                    # rollout.response_length, left out of the response
                    "response_tokens_dropped": max(0, len(llm.sequence) - llm.sequence.prompt_length
                                                   - len(response_ids)),
                },
            },
        )

    def _pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id or 0)
