"""Our episodes inside Trinity-RFT: a Workflow that runs the spec's workflow, env and judges.

Runs in trinity's venv, in its explorer's workflow runners (Ray actors). It is registered in
trinity's WORKFLOWS registry as `beyondagent` by `registration.register()`, which trinity's own
plugin loader runs in each of its processes (`TRINITY_PLUGIN_DIRS` -> `trinity_plugin/`); the
composed config's tasksets name it (`default_workflow_type: beyondagent`) with these
`workflow_args`:

    spec_path: runs/x/trinity/spec.yaml   # the user's spec (secrets stay as `${oc.env:...}`)
    run_dir: runs/x
    cwd: /where/beyondagent/run/started
    max_new_tokens: 64                    # a model turn's budget (backend.max_new_tokens)
    max_prompt_tokens: 2048               # the first prompt's (backend.max_prompt_tokens)
    max_response_tokens: 8192             # everything after it (backend.max_response_tokens)
    records_steps: false                  # true: an estimator of ours reads each episode's steps

For a task (one row of our taskset: the serialized `Task`) trinity asks for `repeat_times`
episodes (`algorithm.group_size`); each gets a `TrinityChat` (token in, token out through the
rollout model, `engines.py`), runs through our `EpisodeRunner` (workflow + env + the task's judge)
and becomes one `Experience` (`experiences.py`): the exact ids, an assistant-only action mask, the
sampling log-probs and the judge's score; `eid.run` numbers it in its group.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from trinity.common.experience import EID, Experience
from trinity.common.workflows.workflow import Task as TrinityTask
from trinity.common.workflows.workflow import Workflow

from beyondagent_core.runtime.tokens import ChatTemplate
from beyondagent_core.types import Task
from beyondagent_plugin_trinity.engines import engine_of
from beyondagent_plugin_trinity.experiences import experience_fields
from beyondagent_plugin_trinity.runtime import runtime, tokenizer_of
from beyondagent_plugin_trinity.trinity_chat import TrinityChat

TASK_COLUMN = "task"  # our taskset's column holding the serialized Task (data.py writes it)


def task_of(row: dict[str, Any]) -> Task:
    """Our Task from a row of our taskset."""
    if not isinstance(row, dict) or TASK_COLUMN not in row:
        raise ValueError(f"the `beyondagent` workflow runs rows of the taskset `beyondagent run` writes (a "
                         f"{TASK_COLUMN!r} column); this row has {sorted(row) if isinstance(row, dict) else row!r}")
    return Task.from_dict(json.loads(row[TASK_COLUMN]))


class BeyondAgentWorkflow(Workflow):
    """Trinity-RFT Workflow running a BeyondAgent spec's workflow, env and judges for one task."""

    is_async = True
    can_repeat = True

    def __init__(self, *, task: TrinityTask, model: Any, auxiliary_models: Any = None):
        super().__init__(task=task, model=model, auxiliary_models=auxiliary_models)
        args = dict(task.workflow_args or {})
        missing = [key for key in ("spec_path", "run_dir") if not args.get(key)]
        if missing:
            raise ValueError(f"the `beyondagent` workflow needs workflow_args {', '.join(missing)}: run it through "
                             "`beyondagent run` (which writes the trinity config), not a hand-written taskset")
        self.args = args
        self.runtime = runtime(args["spec_path"], args["run_dir"], args.get("cwd"))
        self.engine = engine_of(model)
        self.template = ChatTemplate(tokenizer_of(str(model.model_path)))
        self.our_task = task_of(task.raw_task)
        self.repeat_times = int(task.repeat_times or task.rollout_args.n or 1)
        rollout = task.rollout_args
        self.sampling = {key: value for key, value in (("temperature", rollout.temperature), ("top_p", rollout.top_p))
                         if value is not None}

    def set_repeat_times(self, repeat_times: int, run_id_base: int) -> None:
        self.repeat_times = int(repeat_times)
        self.run_id_base = int(run_id_base)

    async def run_async(self) -> list[Experience]:
        return list(await asyncio.gather(*(self.episode(self.run_id_base + i) for i in range(self.repeat_times))))

    async def episode(self, run: int) -> Experience:
        """One rollout of the task: run `run` of its group."""
        args = self.args
        chat = TrinityChat(self.engine, self.template, self.sampling,
                           request_id=f"{self.task.batch_id}/{self.task.task_id}/{run}",
                           prompt_length=int(args.get("max_prompt_tokens") or 2048),
                           response_length=int(args.get("max_response_tokens") or 8192),
                           max_new_tokens=int(args.get("max_new_tokens") or 512))
        trajectory = await self.runtime.runner.run(self.our_task, chat)
        tokenizer = self.template.tokenizer
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id or 0
        fields = experience_fields(chat.sequence, trajectory, response_length=chat.response_length, pad_id=int(pad),
                                   records_steps=bool(args.get("records_steps")))
        return Experience(eid=EID(run=run), **fields)
