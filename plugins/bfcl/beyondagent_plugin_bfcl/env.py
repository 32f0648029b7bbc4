"""The `bfcl` env: one BFCL entry per episode, the agent's calls run on BFCL's own backends.

Runs only in the plugin's venv (it imports `bfcl_eval`); the core serves it there
(`env.service: launch`). Entries come from BFCL's own loader (`load_dataset_entry`: functions
of the involved classes, held-out `miss_func` docs, the Python hint on every description), or
with `data_dir` set, from the files there, prepared the same way.

Multi-turn (`multi_turn_*`): `reset` creates fresh instances of the entry's backend classes
(BFCL's `execute_multi_turn_func_call` under an episode-unique name, so no two episodes share
one) loaded with the entry's initial state, and shows the first user turn. Each `step` reads
the calls in the assistant's message (`beyondagent_plugin_gateway.tool_calls`), runs them, and answers
with the results (errors as BFCL words them) in `<tool_response>` blocks. The backends live in
a child process of their own (`sandbox.py`: a memory cap, a deadline per step that kills a
call which never yields the GIL, the backends restored by replay); a call that breaks an
argument cap (`bounds.py`) or the step's limits is not run, and its result says why (`Error
during execution: ...`): the model's mistake, an observation, never an env error. A message with no
valid call ends the user's turn, as in BFCL's inference loop: the next turn's user message
follows, or, for a `miss_func` turn, the held-out functions with BFCL's "I have updated some
more functions" prompt (always in the message: the conversation stays append-only). More than
`max_steps_per_turn` steps in one turn force-quits the entry (BFCL's rule); the last turn ended
terminates the episode.

Single-turn (AST and relevance categories): one step; the calls are recorded and the episode ends.

`evaluate()` calls BFCL's checkers (`checking.py`): 1/0 is BFCL's own verdict; `reward: turns`
adds partial credit for multi-turn (turns passed / turns). Malformed calls are counted per step
(`info["malformed_calls"]`) and in the reward's details; they never raise.

Exploration (`explore.py`): `valid_actions()` lists calls that read the backends' state,
`describe_achieved()` turns the calls that changed it into tasks BFCL's checker can verify.
"""

from __future__ import annotations

import copy
import functools
import itertools
import os
import time
import uuid
from pathlib import Path
from typing import Any

from beyondagent_core import Reward, Task
from beyondagent_core.protocols import EnvReset, EnvStep, Message
from beyondagent_plugin_gateway.tool_calls import ParsedCalls, parse_tool_calls, tool_responses
from beyondagent_plugin_bfcl import bounds, checking, data, explore
from beyondagent_plugin_bfcl import calls as call_texts
from beyondagent_plugin_bfcl.config import BFCLConfig, category_of, kind_of, split_of
from beyondagent_plugin_bfcl.sandbox import Backends, BackendsLost, CallStopped

_episodes = itertools.count(1)
ANSWERED = "[Your answer was recorded.]"  # the last observations (the env protocol wants one)
OVER = "[The user has no more requests.]"
# What each style reads as calls, as BFCL's handlers do: Qwen FC decodes only `<tool_call>` blocks,
# the prompting handlers only a Python call list.
FORMATS = {"tools": ("hermes",), "prompting": ("python",)}


@functools.lru_cache(maxsize=32)
def _entries(category: str, root: Path | None = None) -> dict[str, dict[str, Any]]:
    """BFCL's prepared entries of `category`: bfcl_eval's own data, or the `data_dir` at `root`."""
    if root is not None:
        return {item["id"]: item for item in _entries_in(root, category)}
    from bfcl_eval.utils import load_dataset_entry

    return {item["id"]: item for item in load_dataset_entry(category)}


def _entries_in(root: Path, category: str) -> list[dict[str, Any]]:
    """The entries of `category` in the data directory `root`, prepared as BFCL's `load_dataset_entry`
    prepares its own (the involved classes' functions, the held-out `miss_func` docs, the hints)."""
    from bfcl_eval.utils import add_language_specific_hint_to_function_doc

    items = []
    for item in data.entries(root, category):
        item = copy.deepcopy(item)
        functions, held_out = data.functions_of(root, item["id"])
        item["function"] = functions
        if "missed_function" in item:
            item["missed_function"] = held_out
        items.append(item)
    return add_language_specific_hint_to_function_doc(items)


@functools.lru_cache(maxsize=32)
def _answers(category: str) -> dict[str, Any]:
    from bfcl_eval.utils import load_ground_truth_entry

    try:
        return {item["id"]: item["ground_truth"] for item in load_ground_truth_entry(category)}
    except FileNotFoundError:  # irrelevance categories have none
        return {}


def bfcl_entry(task_id: str, root: Path | None = None) -> dict[str, Any]:
    """BFCL's prepared entry of `task_id` (a copy); KeyError naming what ids look like."""
    category = category_of(task_id)
    found = _entries(category, root).get(task_id)
    if found is None:
        count = len(_entries(category, root))
        raise KeyError(f"BFCL has no task {task_id!r}: {category} has {count} tasks, "
                       f"{category}_0 ... in BFCL's numbering")
    return copy.deepcopy(found)


def bfcl_answer(task_id: str, root: Path | None = None) -> Any:
    if root is not None:
        return copy.deepcopy(data.answer(root, task_id))
    return copy.deepcopy(_answers(category_of(task_id)).get(task_id))


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters not shown ...]"


def additional_functions_prompt(functions: list[dict[str, Any]]) -> str:
    from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING

    return DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(functions=functions)


class BFCLEnv:
    """One BFCL entry at a time (see the module docstring)."""

    def __init__(self, config: BFCLConfig | None = None):
        self.config = config or BFCLConfig()
        # `data_dir`: BFCL's data read from there; unset, bfcl_eval's own (BFCL's loader)
        self.root = data.data_dir(self.config.data_dir) if self.config.data_dir else None
        self.backends = Backends(seconds=self.config.max_call_seconds, memory_mb=self.config.max_call_memory_mb)
        self.task: Task | None = None
        self.entry: dict[str, Any] = {}
        self.category = ""
        self.kind = ""
        self._close_episode()

    # --- the episode ---------------------------------------------------------------------

    def reset(self, task: Task) -> EnvReset:
        self._close_episode()
        world = task.seed_task_id if task.origin == "synthetic" and task.seed_task_id else task.task_id
        try:
            entry = bfcl_entry(world, self.root)
        except KeyError as exc:
            raise ValueError(f"task {task.task_id!r}: {exc.args[0]}") from None
        goal = (task.metadata or {}).get("goal")
        self.goal = explore.check_goal(goal) if goal is not None else None
        self.task, self.entry = task, entry
        self.category, self.kind = category_of(world), kind_of(category_of(world))
        self.ground_truth = bfcl_answer(world, self.root)
        questions = [list(turn) for turn in entry["question"]]
        if self.goal is not None:  # a synthetic task: the seed's world, one turn, its own query
            questions = [[{"role": "user", "content": task.query or self.goal["query"]}]]
            self.ground_truth = [self.goal["calls"]]
        elif task.query:
            questions = [[{"role": "user", "content": task.query}]]
        self.questions = questions
        self.turn, self.steps_in_turn, self.decoded = 0, 0, [[]]
        self.held_out = entry.get("missed_function", {}) if self.goal is None else {}
        self.functions = list(entry["function"])
        if self.kind == "multi_turn":
            self.episode_name = f"ba_{os.getpid()}_{next(_episodes)}_{uuid.uuid4().hex[:8]}"
            self.methods = self.backends.open({
                "initial_config": entry["initial_config"], "involved_classes": entry["involved_classes"],
                "name": self.episode_name, "entry_id": entry["id"], "long_context": "long_context" in self.category})
            self.known = set(self.methods)
            if self.goal is not None:  # goal calls run as BFCL's ground truth: methods of these backends only
                unknown = sorted({call.split("(", 1)[0] for call in self.goal["calls"]} - self.known)
                if unknown:
                    raise ValueError(f"task {task.task_id!r}: its goal calls {', '.join(unknown)}, which no backend "
                                     f"of {entry['id']} has")
        messages = [dict(message) for message in questions[0]]
        if self.config.style == "prompting":
            from bfcl_eval.model_handler.utils import system_prompt_pre_processing_chat_model

            messages = system_prompt_pre_processing_chat_model(messages, self.functions, entry["id"])
        info = {"task_id": task.task_id, "bfcl_id": entry["id"], "category": self.category, "kind": self.kind,
                "style": self.config.style, "tools": self.functions, "turns": len(questions),
                "split": split_of(entry["id"]), "pid": os.getpid()}
        return EnvReset(messages=messages, info=info)

    def step(self, action: Message) -> EnvStep:
        if self.task is None:
            raise RuntimeError("step() before reset(): open a task first")
        parsed = self._parse(action)
        self.malformed += parsed.malformed
        if self.kind != "multi_turn":
            self.answer_calls = call_texts.ast_form(parsed)
            self.finished = True
            return EnvStep(observation=[{"role": "user", "content": ANSWERED}], terminated=True,
                           info={"calls": len(parsed.calls), "malformed_calls": parsed.malformed})
        if parsed.calls:
            return self._run_calls(parsed)
        return self._end_turn(parsed)

    def evaluate(self) -> Reward:
        if self.task is None:
            return Reward(0.0, False, "no episode to evaluate: reset() was not called")
        if self.kind == "multi_turn":
            return self._evaluate_multi_turn()
        if self.kind == "relevance":
            verdict = checking.check_relevance(self.category, self.answer_calls or [])
        elif not self.finished:
            verdict = {"valid": False, "error_type": "ast_decoder:no_answer", "error": ["The episode gave no answer."]}
        else:
            verdict = checking.check_ast(self.entry, self.ground_truth, self.answer_calls, style=self.config.style)
        return self._reward(verdict, partial=None)

    def close(self) -> None:
        self._close_episode()

    # --- optional methods -----------------------------------------------------------------

    def preload(self) -> None:
        """Import BFCL's checkers once per worker, and start its backends' zygote, before episodes."""
        import bfcl_eval.eval_checker.ast_eval.ast_checker  # noqa: F401
        import bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker  # noqa: F401

        from beyondagent_plugin_bfcl.sandbox import start_zygote

        start_zygote()

    def task_ids(self, split: str) -> list[str]:
        from beyondagent_plugin_bfcl.config import CATEGORIES

        categories = [category for category in CATEGORIES  # a data_dir may hold some categories only
                      if self.root is None or (self.root / f"{data.PREFIX}{category}.json").is_file()]
        ids = [task_id for category in categories for task_id in _entries(category, self.root)]
        return ids if split == "all" else [task_id for task_id in ids if split_of(task_id) == split]

    def valid_actions(self) -> list[str]:
        """Calls (as `<tool_call>` text) that read the backends' state (`explore.py`)."""
        if self.task is None or self.kind != "multi_turn":
            return []
        try:
            return self.backends.read_actions(sorted({doc["name"] for doc in self.functions}))
        except BackendsLost:
            return []

    def describe_achieved(self) -> list[dict[str, Any]]:
        """Tasks this episode's state-changing calls achieved, each verifiable by BFCL's checker."""
        if self.task is None or self.kind != "multi_turn":
            return []
        return explore.achieved_goals(self.executed, self.entry["id"])

    # --- helpers ----------------------------------------------------------------------------

    def _parse(self, action: Message) -> ParsedCalls:
        content = str(action.get("content") or "")
        parsed = parse_tool_calls(content, formats=FORMATS[self.config.style])
        structured = action.get("tool_calls")
        if not parsed.calls and not parsed.errors and isinstance(structured, list) and structured:
            return parse_tool_calls(call_texts.hermes_text(
                [(call.get("function", {}).get("name", ""), _arguments(call)) for call in structured
                 if isinstance(call, dict)]))
        return parsed

    def _run_calls(self, parsed: ParsedCalls) -> EnvStep:
        texts = call_texts.execution_texts(parsed, self.known)
        names = [text.split("(", 1)[0] for text in texts]
        refused = [self._refusal(index, name, arguments)
                   for index, (name, arguments) in enumerate(zip(names, parsed.arguments(), strict=True))]
        to_run = [text for text, why in zip(texts, refused, strict=True) if why is None]
        outputs, changed, stopped, lost = [], False, "", ""
        if to_run:
            try:
                outputs, changed = self.backends.run(to_run, time.monotonic() + self.config.max_call_seconds)
            except CallStopped as stop:
                outputs, changed = stop.results, stop.changed
                stopped = (f"was stopped: the calls of one step may take {self.config.max_call_seconds:g} s here; "
                           "the functions' state is as it was before this call (docs/bfcl.md, 'Bounds')")
            except BackendsLost as exc:
                outputs = exc.results
                stopped = lost = f"was stopped, and the functions' state could not be restored: {exc}"
        results, recorded, position = [], [], 0  # position: among the calls sent to run
        for text, name, why in zip(texts, names, refused, strict=True):
            if why is None:
                position += 1
                if position <= len(outputs):
                    results.append(outputs[position - 1])
                    recorded.append(text)
                    continue
                why = stopped if position == len(outputs) + 1 else (
                    "was not run: the functions' state is lost" if lost else
                    f"was not run: the calls of this step already took the {self.config.max_call_seconds:g} s "
                    "they may take here")
            shown = text if len(text) <= 80 else f"{text[:77]}..."
            results.append(f"Error during execution: {shown} {why}")
            recorded.append(call_texts.not_run_text(name))
        self.decoded[self.turn].append(recorded)
        for index, (text, result) in enumerate(zip(recorded, results, strict=True)):
            ok = not result.startswith("Error during execution")
            self.executed.append({"call": text, "ok": ok, "changed": changed and ok and index == len(texts) - 1})
        self.steps_in_turn += 1
        info = {"calls": len(texts), "malformed_calls": parsed.malformed, "turn": self.turn,
                "errors": sum(result.startswith("Error during execution") for result in results),
                "not_run": sum(text != done for text, done in zip(texts, recorded, strict=True))}
        observation = tool_responses(truncate(result, self.config.max_output_chars) for result in results)
        if parsed.errors:
            observation += "\n" + "\n".join(f"Malformed call, not run: {error}" for error in parsed.errors)
        if lost:  # no functions to go on with: the episode ends, judged as BFCL judges a force-quit one
            self.force_quit = True
            info["ended_by"] = "bounds"
            observation += "\nThe functions' state is lost: the episode ends."
            return EnvStep(observation=[{"role": "user", "content": observation}], terminated=True, info=info)
        if self.steps_in_turn > self.config.max_steps_per_turn:
            self.force_quit = True
            info["ended_by"] = "step_limit"
            return EnvStep(observation=[{"role": "user", "content": observation}], terminated=True, info=info)
        return EnvStep(observation=[{"role": "user", "content": observation}], info=info)

    def _refusal(self, index: int, name: str, arguments: dict[str, Any]) -> str | None:
        """Why a call of a step must not run (the step's call count, `bounds.py`), or None."""
        if index >= self.config.max_calls_per_step:
            return f"was not run: at most {self.config.max_calls_per_step} calls of one message run here"
        why = bounds.refusal(self.methods.get(name), name, arguments) if name in self.known else None
        return f"was not run: {why}" if why else None

    def _end_turn(self, parsed: ParsedCalls) -> EnvStep:
        info: dict[str, Any] = {"calls": 0, "malformed_calls": parsed.malformed, "turn": self.turn,
                                "ended_turn": True}
        self.turn += 1
        self.steps_in_turn = 0
        if self.turn >= len(self.questions):
            self.finished = True
            return EnvStep(observation=[{"role": "user", "content": OVER}], terminated=True, info=info)
        self.decoded.append([])
        messages = [dict(message) for message in self.questions[self.turn]]
        added = self.held_out.get(str(self.turn))
        if added:
            self.functions += added
            messages = [{"role": "user", "content": additional_functions_prompt(added)}]
            info["functions_added"] = [doc["name"] for doc in added]
        return EnvStep(observation=messages, info=info)

    def _evaluate_multi_turn(self) -> Reward:
        # An episode cut in its last turn (the workflow's max_turns, a replayed reference) is judged on
        # what it did; cut in an earlier turn, it fails as BFCL fails a force-terminated entry.
        last_turn = self.turn == len(self.questions) - 1
        ended = self.finished or last_turn
        decoded = self.decoded if ended else self.decoded[: self.turn]
        try:  # BFCL's checker replays the calls: in the backends' process, within the same bounds
            verdict, passed = self.backends.check(self.entry, self.ground_truth, decoded, self.config.style,
                                                  self.force_quit or not ended, self.config.reward == "turns")
        except CallStopped:
            verdict = {"valid": False, "error_type": "multi_turn:check_stopped",
                       "error_message": f"BFCL's check of this episode (it replays the episode's calls) took more "
                                        f"than the {self.config.max_call_seconds:g} s it may take here"}
            passed = 0
        partial = passed / len(self.ground_truth) if self.config.reward == "turns" else None
        return self._reward(verdict, partial=partial)

    def _reward(self, verdict: dict[str, Any], *, partial: float | None) -> Reward:
        official = bool(verdict.get("valid"))
        error = verdict.get("error_message") or verdict.get("error") or ""
        if isinstance(error, list):
            error = "; ".join(map(str, error))
        reason = "BFCL: pass" if official else f"BFCL: fail ({verdict.get('error_type', '?')}): {str(error)[:300]}"
        details = {"official": official, "category": self.category, "bfcl_id": self.entry.get("id"),
                   "error_type": None if official else verdict.get("error_type"),
                   "malformed_calls": self.malformed, "reward": self.config.reward,
                   "turns_reached": min(self.turn + 1, len(self.questions)) if self.kind == "multi_turn" else 1}
        if self.goal is not None:
            details["goal"] = self.goal
        score = float(official)
        if partial is not None and not official:
            score = partial
            details["partial"] = partial
            reason += f"; partial credit {partial:.2f} (turns passed before the first failure)"
        return Reward(score, official, reason, details)

    def _close_episode(self) -> None:
        self.backends.close()
        self.episode_name, self.methods, self.known = None, {}, set()
        self.decoded: list[list[list[str]]] = [[]]
        self.executed: list[dict[str, Any]] = []
        self.answer_calls: list[dict[str, Any]] | None = None
        self.turn, self.steps_in_turn, self.malformed = 0, 0, 0
        self.finished, self.force_quit = False, False
        self.goal = None
        self.questions: list[list[dict[str, Any]]] = []
        self.held_out: dict[str, Any] = {}
        self.functions: list[dict[str, Any]] = []
        self.ground_truth: Any = None


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    from beyondagent_plugin_gateway.tool_calls import call_arguments

    return call_arguments(call)
