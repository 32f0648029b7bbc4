"""Our Workflow inside Trinity-RFT's own task pipeline, against the torch backend's episodes of a step.

Run in trinity's venv by test_experiences_match_torch.py, after the torch backend trained one step
of TORCH_SPEC (the same spec with `backend: torch`, `logging.episodes: all`, one episode at a time):

    python experiences_check.py WORK_DIR TORCH_SPEC TRINITY_SPEC GIGPO_SPEC

What is real: the trinity config (our mapping, composed on trinity's `Config` schema and validated by
its `check_and_update`); our Workflow and ADVANTAGE_FN registered by trinity's own plugin loader
(`TRINITY_PLUGIN_DIRS`); the step's tasks written as our taskset and read back by trinity's file
reader and `TaskFormatter` (which resolves the workflow through WORKFLOWS); `Task.to_workflow`,
`set_repeat_times` and `run_async` as trinity's workflow runner calls them; the spec's react
workflow on FrozenLake (beyondagent-plugin-gym) and its judge; trinity's `Experience`
serialization, its `grpo` ADVANTAGE_FN and its trainer's `to_data_proto` (the batch verl's actor
gets) on our Experiences; our `beyondagent` ADVANTAGE_FN with GRPO and with GiGPO.

The one stand-in: trinity's rollout model is vLLM, which does not install on this CPU machine, so
the Workflow's model is `TorchPolicyEngine`: the torch backend's own generation (its scheduler,
one episode at a time, each episode's random generator seeded as the torch backend seeds episode
`index` of a step), token in, token out, through our `TokenEngine` interface. The test then
compares each Experience with the torch backend's record of the same episode token by token.

Writes WORK_DIR/result.json.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch


class TorchPolicyEngine:
    """Stands in for trinity's vLLM model: the torch backend's generation, seeded per episode."""

    def __init__(self, llm: Any, *, model_path: str, seed: int, step: int, group_size: int):
        self.llm, self.model_path, self.seed, self.step, self.group_size = llm, model_path, seed, step, group_size
        self.episodes: dict[str, dict[str, Any]] = {}

    async def complete_tokens(self, prompt_ids: list[int], params: dict[str, Any], *,
                              request_id: str) -> tuple[list[int], list[float]]:
        from beyondagent_plugin_torch.generation import Sampling
        from beyondagent_plugin_torch.rollout import episode_seed

        _, task, run = request_id.split("/")
        index = int(task) * self.group_size + int(run)  # the torch backend's job order: group by group
        state = self.episodes.setdefault(request_id, {
            "generator": torch.Generator().manual_seed(episode_seed(self.seed, "train", self.step, index)),
            "session": object(), "turn": 0})
        sampling = Sampling(float(params.get("temperature", 1.0)), float(params.get("top_p", 1.0)),
                            int(params["max_tokens"]))
        scheduler = self.llm.scheduler
        with scheduler.episode():
            ids, logprobs = await scheduler.generate((index, state["turn"]), list(prompt_ids), sampling,
                                                     int(params["max_tokens"]), state["generator"],
                                                     session=state["session"])
        state["turn"] += 1
        return ids, logprobs

    def close(self) -> None:
        for state in self.episodes.values():
            self.llm.scheduler.end_session(state["session"])


def load_data(spec: Any) -> Any:
    from beyondagent_core.context import TrainingData
    from beyondagent_core.jsonl import BadRecords
    from beyondagent_core.pipeline import load_tasks

    bad = BadRecords("fail")
    train, val = load_tasks(spec, "tasks.train", bad), load_tasks(spec, "tasks.val", bad)
    return TrainingData(train, [], val, spec.component("mixture").create(), spec.run.seed)


async def main(work: Path, torch_spec: str, trinity_spec: str, gigpo_spec: str) -> dict[str, Any]:
    from trinity.algorithm import ADVANTAGE_FN
    from trinity.buffer.buffer import get_buffer_reader
    from trinity.common.experience import Experience
    from trinity.trainer.verl.utils import to_data_proto

    from beyondagent_core.context import RunContext, RunInfo
    from beyondagent_core.pipeline import prepare
    from beyondagent_plugin_trinity.compose import compose, resolve_model_path, validate
    from beyondagent_plugin_trinity.data import write_tasksets
    from beyondagent_plugin_trinity.mapping import RunFiles, trinity_overrides
    from beyondagent_plugin_trinity.registration import status

    timings: dict[str, float] = {}
    started = time.monotonic()
    session = prepare(trinity_spec, [])
    spec = session.spec
    config = spec.component("backend").config
    run_dir = work / "trinity_run"
    info = RunInfo(name=spec.run.name, run_dir=run_dir, seed=spec.run.seed, spec=spec.redacted())
    context = RunContext(spec=spec, info=info, manager=session.manager)
    data = load_data(spec)
    written = write_tasksets(data, run_dir / "trinity" / "data", epochs=1, total_steps=1, batch_size=config.batch_size)
    files = RunFiles(run_dir=run_dir, spec_path=Path(trinity_spec).resolve(), train_dir=written.train_dir,
                     val_dir=None)
    # our Workflow and ADVANTAGE_FN, registered by trinity's plugin loader (nothing registered by hand)
    registration = status()
    overrides = [o.as_list() for o in trinity_overrides(spec, config, files, model_path=spec.model.path)]
    model_path = resolve_model_path(spec.model.path)
    overrides = [[k, model_path if k == "model.model_path" else v, o] for k, v, o in overrides]
    trinity_config = compose(overrides)
    validate(trinity_config)
    timings["config_s"] = time.monotonic() - started

    # trinity's file reader and TaskFormatter on our taskset: the step's tasks, as the explorer reads them
    taskset = trinity_config.buffer.explorer_input.tasksets[0]
    taskset.workflow_args["records_steps"] = True  # our ADVANTAGE_FN reads the records below
    reader = get_buffer_reader(taskset)
    tasks = await reader.read(config.batch_size)
    torch_session = prepare(torch_spec, [])
    torch_backend = torch_session.spec.component("backend").create()
    experiences: list[Any] = []
    step_started = time.monotonic()
    with torch_backend.policy_llm(context) as llm:
        engine = TorchPolicyEngine(llm, model_path=model_path, seed=spec.run.seed, step=1,
                                   group_size=spec.algorithm.group_size)
        for number, task in enumerate(tasks):
            task.batch_id, task.task_id = 1, number  # as the explorer numbers a step's tasks
            workflow = task.to_workflow(model=engine)
            workflow.set_repeat_times(task.repeat_times, 0)
            for exp in await workflow.run_async():
                exp.eid.batch, exp.eid.task = task.batch_id, task.task_id  # as trinity's workflow runner does
                experiences.append(exp)
        engine.close()
    timings["episodes_s"] = time.monotonic() - step_started
    # trinity's own handling of what our Workflow returned
    experiences = Experience.deserialize_many(Experience.serialize_many(experiences))
    trinity_grpo, _ = ADVANTAGE_FN.get("grpo")(**ADVANTAGE_FN.get("grpo").default_args())(
        Experience.deserialize_many(Experience.serialize_many(experiences)))
    def ours(spec_path: str) -> list[Any]:
        return ADVANTAGE_FN.get("beyondagent")(spec_path=spec_path)(
            Experience.deserialize_many(Experience.serialize_many(experiences)))[0]
    batch = to_data_proto(trinity_grpo, pad_token_id=0, model=None, logger=None)
    # the monitor the config names (ours, through trinity's MONITOR registry), as the explorer makes and uses it
    from trinity.utils.monitor import MONITOR

    monitor = MONITOR.get(trinity_config.monitor.monitor_type)(
        project=trinity_config.project, group=trinity_config.group, name=trinity_config.name,
        role=trinity_config.explorer.name, config=trinity_config)
    monitor.log({"rollout/reward/mean": torch.tensor([e.reward for e in experiences]).mean()}, step=1)
    monitor.close()

    def plain(exp: Any) -> dict[str, Any]:
        return {"task": exp.eid.task, "run": exp.eid.run, "tokens": exp.tokens.tolist(),
                "prompt_length": exp.prompt_length, "action_mask": exp.action_mask.int().tolist(),
                "logprobs": exp.logprobs.tolist(), "reward": exp.reward, "info": exp.info,
                "advantages": None if exp.advantages is None else exp.advantages.tolist()}

    return {"registration": registration, "tasks": [t.raw_task["task_id"] for t in tasks],
            "workflow_class": f"{tasks[0].workflow.__module__}.{tasks[0].workflow.__qualname__}",
            "experiences": [plain(e) for e in experiences],
            "trinity_grpo": {f"{e.eid.task}/{e.eid.run}": e.advantages.tolist() for e in trinity_grpo},
            "our_grpo": {f"{e.eid.task}/{e.eid.run}": e.advantages.tolist() for e in ours(trinity_spec)},
            "our_gigpo": {f"{e.eid.task}/{e.eid.run}": e.advantages.tolist() for e in ours(gigpo_spec)},
            "data_proto": {"uid": batch.non_tensor_batch["uid"].tolist(),
                           "response_mask": batch.batch["response_mask"].int().tolist(),
                           "responses": batch.batch["responses"].tolist(),
                           "rollout_log_probs": batch.batch["rollout_log_probs"].tolist(),
                           "token_level_scores": batch.batch["token_level_scores"].tolist(),
                           "advantages": batch.batch["advantages"].tolist()},
            "monitor": {"class": type(monitor).__name__, "lines": monitor.path.read_text().splitlines()},
            "rewards": [e.reward for e in experiences], "timings": timings, "mode": trinity_config.mode}


if __name__ == "__main__":
    work = Path(sys.argv[1])
    result = asyncio.run(main(work, *sys.argv[2:5]))
    (work / "result.json").write_text(json.dumps(result, default=str))
    print(json.dumps({"experiences": len(result["experiences"]), **result["timings"]}))
