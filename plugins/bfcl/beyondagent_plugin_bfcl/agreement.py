"""Agreement with BFCL itself: our env + judge against BFCL's own evaluator, per category.

Runs in the plugin's venv (`beyondagent bfcl agree`, or `python -m beyondagent_plugin_bfcl.agreement`)
and prints one JSON object. For every task of each category (or the first `--limit`):

- `ground_truth`: BFCL's ground-truth answer, written as a model would write it (`<tool_call>`
  blocks, or a Python call list with `--style prompting`), replayed through our env (the calls
  run on BFCL's backends) and judged by our judge; `gt_pass` counts the score-1 episodes.
- `one_call_changed`: the same answer with one argument of one call changed (a string gets a
  suffix, a number +1, a boolean flipped); our verdict and BFCL's own evaluator's
  (`eval_runner._evaluate_single_*_entry` with the Qwen handler that decodes that format) on
  the same text, `changed_fail` counting BFCL's zeros and `changed_agree` the equal verdicts.
With `--episodes FILE` (an eval's `episodes.jsonl`) it scores recorded episodes with BFCL's own
evaluator instead, split into turns as BFCL's inference loop splits them, and prints BFCL's
accuracy per category beside ours.

- `scripted`: a scripted policy's outputs, right, wrong (one call changed), malformed (a broken
  `<tool_call>` block), a call to an unknown function, and no call at all, each judged both ways;
  `agreement` = equal verdicts / outputs.

A multi-turn turn is one step with the turn's calls and a closing message without calls (BFCL's
loop ends a turn on a message it decodes to no call); a turn whose ground truth is empty gets
only the closing message.
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from beyondagent_core import Task
from beyondagent_plugin_bfcl import checking
from beyondagent_plugin_bfcl.calls import call_text, hermes_text, python_text
from beyondagent_plugin_bfcl.config import BFCLConfig, check_categories, kind_of
from beyondagent_plugin_bfcl.env import BFCLEnv, bfcl_answer, bfcl_entry

DONE = "Done."  # a closing message: no call, so the turn ends
EPISODES_AT_ONCE = 4
MALFORMED = '<tool_call>\n{"name": "ls", "arguments": {"a": true}\n</tool_call>'  # one brace short
Calls = list[tuple[str, dict[str, Any]]]


# --- answers as a model would write them ---------------------------------------------------------


def bind_call(text: str, methods: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A ground-truth call's text (`sort('a.pdf')`, positional arguments allowed) as name + keyword arguments."""
    import ast

    node = ast.parse(text, mode="eval").body
    name = ast.unparse(node.func)
    args = [ast.literal_eval(arg) for arg in node.args]
    kwargs = {keyword.arg: ast.literal_eval(keyword.value) for keyword in node.keywords}
    if args:
        bound = inspect.signature(methods[name]).bind(*args, **kwargs)
        kwargs = dict(bound.arguments)
    return name, kwargs


def pick(options: Any) -> tuple[bool, Any]:
    """One value BFCL's possible answer accepts: (present, value); absent when "" (optional) is accepted."""
    if isinstance(options, list):
        chosen = [option for option in options if option != ""]
        if not chosen:  # only "" (optional: leave it out) or nothing accepted
            return False, None
        return True, resolve(chosen[0])
    return True, resolve(options)


def resolve(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, options in value.items():
            present, chosen = pick(options)
            if present:
                out[key] = chosen
        return out
    if isinstance(value, list):
        return [resolve(item) for item in value]
    return value


def ast_answer(possible: list[dict[str, Any]], functions: list[dict[str, Any]]) -> Calls:
    """A call list BFCL's possible answer accepts: an optional parameter ("" accepted) that the
    function does not require is left out, any other gets its first accepted value."""
    docs = {doc["name"]: doc.get("parameters", {}) for doc in functions}
    calls = []
    for item in possible:
        (name, params), = item.items()
        required = set(docs.get(name, {}).get("required", []))
        arguments = {}
        for key, options in params.items():
            if isinstance(options, list) and "" in options and key not in required:
                continue
            present, chosen = pick(options)
            if present:
                arguments[key] = chosen
        calls.append((name, arguments))
    return calls


def changed(calls: Calls) -> Calls | None:
    """The calls with one argument of one call changed (None when no call has an argument)."""
    for index, (name, arguments) in enumerate(calls):
        for key, value in arguments.items():
            if isinstance(value, bool):
                new = not value
            elif isinstance(value, (int, float)):
                new = value + 1
            elif isinstance(value, str):
                new = value + "_x"
            elif isinstance(value, list):
                new = [*value, value[0]] if value else ["x"]
            else:
                continue
            out = list(calls)
            out[index] = (name, {**arguments, key: new})
            return out
    return None


def as_text(calls: Calls, style: str) -> str:
    return hermes_text(calls) if style == "tools" else python_text(calls)


# --- the two judges ------------------------------------------------------------------------------


def handler(style: str) -> Any:
    from bfcl_eval.eval_checker.eval_runner import get_handler

    return get_handler(checking.JUDGE_MODELS[style])


def ours(task_id: str, outputs: list[list[str]] | str, style: str) -> tuple[bool, float, dict[str, Any]]:
    """Our env + judge on a scripted episode: per turn, the model's messages (single-turn: one text)."""
    env = BFCLEnv(BFCLConfig(style=style))
    try:
        env.reset(Task(task_id=task_id, env="bfcl"))
        if isinstance(outputs, str):
            env.step({"role": "assistant", "content": outputs})
        else:
            for turn, messages in enumerate(outputs):
                for message in messages:
                    step = env.step({"role": "assistant", "content": message})
                    if step.terminated:
                        break
                if step.terminated:
                    break
                assert env.turn == turn + 1, f"{task_id}: turn {turn} did not end on {messages[-1]!r:.60}"
        reward = env.evaluate()
        return reward.success, reward.score, reward.details
    finally:
        env.close()


def theirs(task_id: str, outputs: list[list[str]] | str, style: str, bfcl: Any) -> bool:
    """BFCL's own evaluator on the same outputs (its result-file shape: per turn, per step)."""
    from bfcl_eval.constants.enums import Language, ReturnFormat
    from bfcl_eval.eval_checker import eval_runner

    entry, category = bfcl_entry(task_id), task_id.rsplit("_", 1)[0]
    model_name = checking.JUDGE_MODELS[style].replace("/", "_")
    kind = kind_of(category)
    if kind == "multi_turn":
        name = checking.unique_name(style)
        try:
            result = eval_runner._evaluate_single_multi_turn_entry(bfcl, task_id, outputs, bfcl_answer(task_id),
                                                                   entry, name, category)
        finally:
            checking.forget_instances(name)
    elif kind == "relevance":
        result = eval_runner._evaluate_single_relevance_entry(bfcl, task_id, outputs, entry, model_name, category)
    else:
        result = eval_runner._evaluate_single_ast_entry(bfcl, task_id, outputs, bfcl_answer(task_id), entry,
                                                        model_name, category, language=Language.PYTHON,
                                                        return_format=ReturnFormat.PYTHON)
    return bool(result["valid"])


# --- scripted outputs per task -------------------------------------------------------------------


def multi_turn_outputs(task_id: str, style: str) -> dict[str, list[list[str]]]:
    methods = backend_methods(task_id)
    turns = [[bind_call(text, methods) for text in turn] for turn in bfcl_answer(task_id)]
    right = [[as_text(calls, style), DONE] if calls else [DONE] for calls in turns]
    outputs = {"right": right, "no_call": [[DONE] for _ in turns]}
    first = next((index for index, calls in enumerate(turns) if calls), None)
    if first is not None:
        wrong_calls = changed(turns[first])
        if wrong_calls is not None:
            outputs["one_call_changed"] = [*right[:first], [as_text(wrong_calls, style), DONE], *right[first + 1:]]
        broken = MALFORMED if style == "tools" else "[ls(a=True"
        outputs["malformed"] = [*right[:first], [broken], *right[first + 1:]]
        unknown = [("no_such_function", {"x": 1}), *turns[first]]
        outputs["unknown_function"] = [*right[:first], [as_text(unknown, style), DONE], *right[first + 1:]]
    return outputs


def backend_methods(task_id: str) -> dict[str, Any]:
    """The methods of the entry's backends, to bind the ground truth's positional arguments: BFCL's
    own instances, built here (its ground truth is trusted; a model's calls run in the env's sandbox)."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

    entry, name = bfcl_entry(task_id), checking.unique_name("tools")
    try:
        _, instances = execute_multi_turn_func_call([], entry["initial_config"], entry["involved_classes"], name,
                                                    entry["id"], long_context="long_context" in task_id,
                                                    is_evaL_run=False)
        return {method_name: method for instance in instances.values()
                for method_name, method in inspect.getmembers(instance, predicate=inspect.ismethod)}
    finally:
        checking.forget_instances(name)


def single_turn_outputs(task_id: str, style: str) -> dict[str, str]:
    category = task_id.rsplit("_", 1)[0]
    entry = bfcl_entry(task_id)
    first = entry["function"][0] if entry["function"] else {"name": "no_such_function", "parameters": {}}
    if "irrelevance" in category:
        guess = (first["name"], {key: "x" for key in first["parameters"].get("required", [])})
        return {"right": "None of the functions can answer this.", "one_call_changed": as_text([guess], style),
                "malformed": MALFORMED if style == "tools" else "[f(a=1"}
    if category == "live_relevance":
        call = (first["name"], {key: "x" for key in first["parameters"].get("required", [])})
        return {"right": as_text([call], style), "no_call": "I will not call anything."}
    calls = ast_answer(bfcl_answer(task_id), entry["function"])
    outputs = {"right": as_text(calls, style), "no_call": "I cannot do that.",
               "malformed": MALFORMED if style == "tools" else "[f(a=1",
               "unknown_function": as_text([("no_such_function", {"x": 1}), *calls[1:]], style)}
    wrong = changed(calls)
    if wrong is not None:
        outputs["one_call_changed"] = as_text(wrong, style)
    return outputs


def run(categories: list[str], *, limit: int = 0, style: str = "tools",
        progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    from bfcl_eval.utils import load_dataset_entry

    bfcl = handler(style)
    report: dict[str, Any] = {"style": style, "categories": {}}
    started = time.monotonic()
    # Our multi-turn episodes mostly wait on their backends' processes (`sandbox.py`): a task's
    # episodes run side by side; BFCL's evaluator runs in this process, one output at a time.
    pool = ThreadPoolExecutor(max_workers=EPISODES_AT_ONCE, thread_name_prefix="bfcl-agree")
    for category in categories:
        ids = [item["id"] for item in load_dataset_entry(category)]
        ids = ids[:limit] if limit else ids
        row = {"tasks": len(ids), "gt_pass": 0, "gt_failures": [], "changed": 0, "changed_fail": 0,
               "changed_agree": 0, "scripted": 0, "scripted_agree": 0, "disagreements": []}
        for task_id in ids:
            outputs = (multi_turn_outputs(task_id, style) if kind_of(category) == "multi_turn"
                       else single_turn_outputs(task_id, style))
            verdicts = pool.map(lambda output, task_id=task_id: ours(task_id, copy.deepcopy(output), style),
                                outputs.values())
            for (label, output), (our_success, score, details) in zip(outputs.items(), verdicts, strict=True):
                their_success = theirs(task_id, copy.deepcopy(output), style, bfcl)
                row["scripted"] += 1
                row["scripted_agree"] += our_success == their_success
                if our_success != their_success:
                    row["disagreements"].append({"task": task_id, "output": label, "ours": our_success,
                                                 "bfcl": their_success, "why": details.get("error_type")})
                if label == "right":
                    row["gt_pass"] += score == 1.0
                    if score != 1.0:
                        row["gt_failures"].append({"task": task_id, "why": details.get("error_type")})
                if label == "one_call_changed" and kind_of(category) != "relevance":
                    row["changed"] += 1
                    row["changed_fail"] += not their_success
                    row["changed_agree"] += our_success == their_success
        row["gt_failures"], row["disagreements"] = row["gt_failures"][:10], row["disagreements"][:10]
        report["categories"][category] = row
        progress(f"{category}: {row['gt_pass']}/{row['tasks']} ground truths pass, "
                 f"{row['scripted_agree']}/{row['scripted']} verdicts agree")
    pool.shutdown()
    rows = report["categories"].values()
    scripted = sum(row["scripted"] for row in rows)
    report.update(tasks=sum(row["tasks"] for row in rows), gt_pass=sum(row["gt_pass"] for row in rows),
                  scripted=scripted, scripted_agree=sum(row["scripted_agree"] for row in rows),
                  agreement=(sum(row["scripted_agree"] for row in rows) / scripted) if scripted else None,
                  seconds=round(time.monotonic() - started, 1))
    return report


def turns_of(task_id: str, replies: list[str], bfcl: Any, max_steps: int = 20) -> list[list[str]]:
    """Recorded assistant messages split into BFCL's per-turn, per-step result shape, the way BFCL's
    inference loop splits them: a message its handler decodes to no call ends the turn."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import is_empty_execute_response

    turns: list[list[str]] = [[]]
    for reply in replies:
        turns[-1].append(reply)
        try:
            ends = is_empty_execute_response(bfcl.decode_execute(reply, has_tool_call_tag=False))
        except Exception:  # noqa: BLE001 - BFCL: "Failed to decode the model response. Proceed to next turn."
            ends = True
        if ends or len(turns[-1]) > max_steps:
            turns.append([])
    return turns[:-1] if not turns[-1] else turns


def score_episodes(path: str, style: str) -> dict[str, Any]:
    """BFCL's own accuracy per category on the episodes of an eval's `episodes.jsonl` (originals only)."""
    bfcl = handler(style)
    per: dict[str, list[bool]] = {}
    ours_per: dict[str, list[bool]] = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            trajectory, sample = record["trajectory"], record["sample"]
            task = trajectory["task"]
            if task.get("origin", "original") != "original":
                continue
            task_id = task["task_id"]
            category = task_id.rsplit("_", 1)[0]
            replies = [turn["content"] for turn in trajectory["turns"] if turn["role"] == "assistant"]
            if kind_of(category) == "multi_turn":
                outputs: Any = turns_of(task_id, replies, bfcl)
            else:
                outputs = replies[0] if replies else ""
            per.setdefault(category, []).append(theirs(task_id, outputs, style, bfcl))
            ours_per.setdefault(category, []).append(bool(sample["success"]))
    return {category: {"episodes": len(verdicts), "bfcl_accuracy": sum(verdicts) / len(verdicts),
                       "our_accuracy": sum(ours_per[category]) / len(verdicts),
                       "agree": sum(a == b for a, b in zip(verdicts, ours_per[category], strict=True))}
            for category, verdicts in sorted(per.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m beyondagent_plugin_bfcl.agreement")
    parser.add_argument("--categories", nargs="+", default=["all"])
    parser.add_argument("--limit", type=int, default=0, help="the first N tasks of each category (0: all)")
    parser.add_argument("--style", choices=("tools", "prompting"), default="tools")
    parser.add_argument("--episodes", help="an eval's episodes.jsonl: BFCL's accuracy per category on it")
    args = parser.parse_args(argv)
    import contextlib
    import io

    if args.episodes:
        with contextlib.redirect_stdout(io.StringIO()):
            scored = score_episodes(args.episodes, args.style)
        print(json.dumps(scored))
        return 0
    with contextlib.redirect_stdout(io.StringIO()):  # BFCL's code prints as it goes
        report = run(check_categories(args.categories), limit=args.limit, style=args.style,
                     progress=lambda line: print(line, file=sys.stderr))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
