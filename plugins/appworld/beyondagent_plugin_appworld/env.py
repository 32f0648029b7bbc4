"""The `appworld` env: one AppWorld task world per episode, code actions, AppWorld's own grading.

Runs only in the plugin's venv (it imports `appworld`, which pins pydantic 1) and only one per
process: AppWorld allows one open world per process and freezes the process clock while it is
open, so the env service hosts each instance in its own worker (`--instances process`). The
world is opened with AppWorld's own code timeout (`code_timeout`: a signal, so only where the
env runs on its process's main thread, as in those workers): a cell that runs too long ends with
a traceback the model reads (`10 ** 10 ** 11` too: CPython's pow checks for signals between its
steps). A cell that never checks for signals (`sum(range(10 ** 12))` is one C loop) cannot be
interrupted that way; the service's per-call timeout kills its worker from outside, and the worker's memory cap (`--process-memory-mb`) turns a huge allocation into
a MemoryError (docs/appworld.md, 'Bounds').

- `reset(task)` opens `AppWorld(task_id, experiment_name=<unique>, timeout_seconds=...)`; the
  observation is the supervisor (name, e-mail, phone, as the task gives them) and the
  instruction (the task's own `query` instead when it has one: a synthetic task on the seed
  task's world);
- `step(action)` runs the first ```python block of the message with `world.execute`; the
  episode ends when the code completes the task (`apis.supervisor.complete_task`) or after
  `max_turns` steps;
- `evaluate()` runs AppWorld's `evaluate_task`: passed checks / all checks (`reward: partial`)
  or 1/0 (`sparse`), with the failed checks as text in the reward's details;
- `valid_actions()` and `describe_achieved()` (`explore.py`) let `random_actions` exploration
  and the `hindsight` summarizer make verifiable synthetic tasks: a task whose
  `metadata["goal"]` is one of those goals is graded here on the answer it completes with.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import threading
import uuid
from typing import Any

from beyondagent_core import Reward, Task
from beyondagent_core.protocols import EnvReset, EnvStep, Message
from beyondagent_plugin_appworld.config import AppWorldConfig, data_root, split_ids
from beyondagent_plugin_appworld.explore import Explorer, check_goal, same_answer

CODE_BLOCK = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
NO_CODE = ("No code was run: write the Python code to run in one ```python ... ``` block "
           "(and call apis.supervisor.complete_task(...) when the task is done).")
_episodes = itertools.count(1)


def extract_code(text: str) -> str | None:
    """The first fenced code block of a message (```python, ```py or a bare ```), else None."""
    match = CODE_BLOCK.search(text or "")
    return match.group(1).strip() if match else None


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... output truncated: {len(text) - limit} more characters not shown; print less ...]"


def task_message(instruction: str, supervisor: dict[str, Any]) -> str:
    name = f"{supervisor.get('first_name', '')} {supervisor.get('last_name', '')}".strip()
    return (f"Supervisor: {name}\nE-mail: {supervisor.get('email', '')}\n"
            f"Phone number: {supervisor.get('phone_number', '')}\n\nTask: {instruction}")


class AppWorldEnv:
    """One AppWorld world at a time (see the module docstring)."""

    def __init__(self, config: AppWorldConfig | None = None):
        self.config = config or AppWorldConfig()
        self.root = data_root(self.config.root)
        os.environ["APPWORLD_ROOT"] = str(self.root)  # AppWorld reads its paths from here
        self.world: Any = None
        self.task: Task | None = None
        self.turns = 0
        self.completed = False
        self.goal: dict[str, Any] | None = None
        self.explorer = Explorer()

    # --- the episode ---------------------------------------------------------------------

    def reset(self, task: Task) -> EnvReset:
        goal = check_goal(task.metadata["goal"]) if "goal" in (task.metadata or {}) else None
        self._close_world()
        from appworld import AppWorld, update_root

        update_root(str(self.root))
        experiment = f"beyondagent-{os.getpid()}-{next(_episodes)}-{uuid.uuid4().hex[:8]}"
        # a synthetic task (its own id) replays its seed task's world with a new query
        world_id = task.seed_task_id if task.origin == "synthetic" and task.seed_task_id else task.task_id
        # AppWorld times a cell out with SIGALRM, which only the main thread may set
        on_main_thread = threading.current_thread() is threading.main_thread()
        self.world = AppWorld(task_id=world_id, experiment_name=experiment,
                              timeout_seconds=self.config.code_timeout if on_main_thread else None)
        self.task, self.turns, self.completed, self.goal = task, 0, False, goal
        self.explorer = Explorer()
        supervisor = {key: self.world.task.supervisor.get(key, "")
                      for key in ("first_name", "last_name", "email", "phone_number")}
        instruction = task.query or self.world.task.instruction
        info = {"task_id": task.task_id, "world": world_id, "instruction": instruction, "supervisor": supervisor,
                "experiment": experiment, "pid": os.getpid(), "max_turns": self.config.max_turns}
        return EnvReset(messages=[{"role": "user", "content": task_message(instruction, supervisor)}], info=info)

    def step(self, action: Message) -> EnvStep:
        if self.world is None:
            raise RuntimeError("step() before reset(): open a task first")
        self.turns += 1
        code = extract_code(str(action.get("content") or ""))
        if code is None:
            output = NO_CODE
        else:
            output = self.world.execute(code)
            self.explorer.record(output)
            self.completed = self.completed or bool(self.world.task_completed())
        terminated = self.completed or self.turns >= self.config.max_turns
        info = {"ran_code": code is not None, "completed": self.completed, "turn": self.turns,
                "output_chars": len(output)}
        if terminated and not self.completed:
            info["ended_by"] = "max_turns"
        observation = truncate(output, self.config.max_output_chars)
        return EnvStep(observation=[{"role": "user", "content": observation}], terminated=terminated, info=info)

    def evaluate(self) -> Reward:
        if self.world is None or self.task is None:
            return Reward(0.0, False, "no episode to evaluate: reset() was not called")
        if self.goal is not None:
            return self._evaluate_goal(self.goal)
        if self.task.query and self.task.query != self.world.task.instruction:
            # a synthetic task on this world: AppWorld has no ground truth for its query
            return Reward(0.0, False, "a synthetic AppWorld task has no ground truth: judge it with llm_judge",
                          {"ground_truth": False, "completed": self.completed})
        tracker = self.world.evaluate(suppress_errors=True)
        passes, total = tracker.pass_count, tracker.num_tests
        failed = [{"requirement": failure["requirement"], "trace": failure["trace"]} for failure in tracker.failures]
        success = bool(tracker.success)
        score = (passes / total if total else 0.0) if self.config.reward == "partial" else float(success)
        reason = f"{passes}/{total} checks passed"
        if failed:
            reason += "; failed: " + "; ".join(failure["requirement"] for failure in failed)
        details = {"passes": passes, "total": total, "reward": self.config.reward, "completed": self.completed,
                   "failed": failed, "failed_text": "\n\n".join(f"{f['requirement']}\n{f['trace']}" for f in failed)}
        return Reward(float(score), success, reason, details)

    def close(self) -> None:
        self._close_world()

    # --- optional methods -----------------------------------------------------------------

    def preload(self) -> None:
        """Import AppWorld and every app's models and APIs (~10 s on a busy 2-core machine).

        The env service's process workers call this once before they take episodes, so an
        episode's start pays for opening a world, not for imports.
        """
        from appworld import AppWorld  # noqa: F401
        from appworld.apps import get_all_apps
        from appworld.common.utils import import_apis_module, import_models_module

        for app in get_all_apps():
            import_models_module(app)
            import_apis_module(app)

    def task_ids(self, split: str) -> list[str]:
        return split_ids(self.root, split)

    def valid_actions(self) -> list[str]:
        """Read-only code actions that find out more about this world (`explore.py`)."""
        return self.explorer.actions() if self.world is not None else []

    def describe_achieved(self) -> list[dict[str, Any]]:
        """Questions whose answers this episode has found, with those answers (`explore.py`)."""
        return self.explorer.goals() if self.world is not None else []

    def _evaluate_goal(self, goal: dict[str, Any]) -> Reward:
        active = self.world.requester.request("supervisor", "show_active_task", track=False)
        given, completed = active.get("answer"), active.get("status") == "success"
        right = completed and same_answer(given, goal["answer"])
        failed = []
        if not completed:
            failed.append({"requirement": "the task is marked complete through apis.supervisor.complete_task",
                           "trace": f"status: {active.get('status')!r}"})
        if not same_answer(given, goal["answer"]):
            failed.append({"requirement": "the answer given to complete_task is the right one",
                           "trace": f"answer given: {given!r}, expected: {goal['answer']!r}"})
        passes = 2 - len(failed)
        score = passes / 2 if self.config.reward == "partial" else float(right)
        reason = f"{passes}/2 checks passed" + ("; failed: " + "; ".join(f["requirement"] for f in failed) if failed else "")
        return Reward(float(score), right, reason,
                      {"passes": passes, "total": 2, "reward": self.config.reward, "completed": completed,
                       "goal": goal, "failed": failed,
                       "failed_text": "\n\n".join(f"{f['requirement']}\n{f['trace']}" for f in failed)})

    # --- helpers ----------------------------------------------------------------------------

    def _close_world(self) -> None:
        world, self.world = self.world, None
        if world is None:
            return
        output = getattr(world, "base_output_directory", None)  # experiments/outputs/<experiment>
        try:
            world.close()
        finally:
            if output and not self.config.keep_outputs:
                shutil.rmtree(output, ignore_errors=True)
