"""BFCL's own checkers, called as its evaluator calls them (runs only in the plugin's venv).

Nothing of BFCL's scoring is re-implemented: a multi-turn episode is judged by
`multi_turn_checker` (state of every backend instance and the function results, turn by turn,
against the ground-truth calls, which it executes itself), a single-turn one by `ast_checker`
after BFCL's format check, a relevance one by BFCL's rule (a decoded, non-empty call list or
not). The few lines around them mirror `eval_runner._evaluate_single_*_entry`: a force-quit or
cut-off episode fails as "force_terminated"; empty steps are dropped before checking.

The checker keeps each run's backend instances in its module's globals, named after the model
name and the entry id; every check here uses a model name of its own and removes its
instances afterwards, so checks never share state (and memory does not grow).

`model_name` decides one thing in BFCL's checkers: whether a function name with a dot was sent
with `_` instead (`underscore_to_dot`). We keep dots in both styles, as BFCL's Qwen handlers do,
and name those handlers' registry entries.
"""

from __future__ import annotations

import copy
import itertools
import os
import re
from typing import Any

from beyondagent_plugin_bfcl.config import MULTI_TURN, RELEVANCE

JUDGE_MODELS = {"tools": "Qwen/Qwen3-8B-FC", "prompting": "Qwen/Qwen3-8B"}
_checks = itertools.count()


def unique_name(style: str) -> str:
    return f"{JUDGE_MODELS[style].replace('/', '_')}_ba{os.getpid()}x{next(_checks)}"


def forget_instances(model_name: str) -> None:
    """Remove the backend instances BFCL's executor keeps in its globals for `model_name`."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    prefix = re.sub(r"[-./:]", "_", model_name)
    for key in [key for key in list(vars(multi_turn_utils)) if key.startswith(prefix)]:
        vars(multi_turn_utils).pop(key, None)


def check_multi_turn(entry: dict[str, Any], ground_truth: list[list[str]], decoded: list[list[list[str]]],
                     *, style: str, force_quit: bool = False) -> dict[str, Any]:
    """BFCL's verdict on a multi-turn episode: `decoded[turn][step]` = the call texts of each step."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import is_empty_execute_response

    category = entry["id"].rsplit("_", 1)[0]
    if force_quit or len(decoded) != len(ground_truth):
        return {"valid": False, "error_type": "multi_turn:force_terminated",
                "error_message": f"Model was force-terminated during inference phase. The length of the model "
                                 f"result turns ({len(decoded)}) does not match the length of the ground truth "
                                 f"turns ({len(ground_truth)})." if not force_quit else
                                 "Model was force-quit: a turn took more steps than BFCL's limit."}
    cleaned = [[step for step in turn if not is_empty_execute_response(step)] for turn in decoded]
    name = unique_name(style)
    try:
        return multi_turn_checker(cleaned, ground_truth, copy.deepcopy(entry), category, name)
    finally:
        forget_instances(name)


def check_ast(entry: dict[str, Any], possible_answer: list[dict[str, Any]], decoded: list[dict[str, Any]],
              *, style: str) -> dict[str, Any]:
    """BFCL's AST verdict on a single-turn answer, `decoded` in BFCL's `[{name: {arg: value}}]` form."""
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    from bfcl_eval.utils import is_function_calling_format_output

    if not is_function_calling_format_output(decoded):
        return {"valid": False, "error_type": "ast_decoder:decoder_wrong_output_format",
                "error": ["Did not output in the specified format."]}
    category = entry["id"].rsplit("_", 1)[0]
    return ast_checker(copy.deepcopy(entry["function"]), decoded, possible_answer, Language.PYTHON, category,
                       JUDGE_MODELS[style].replace("/", "_"))


def check_relevance(category: str, decoded: list[dict[str, Any]]) -> dict[str, Any]:
    """BFCL's relevance rule: irrelevance passes with no call, relevance with at least one."""
    from bfcl_eval.utils import is_empty_output

    has_call = not is_empty_output(decoded)
    if category not in RELEVANCE:
        raise ValueError(f"{category} is not a relevance category")
    if "irrelevance" in category:
        return {"valid": True} if not has_call else {
            "valid": False, "error_type": "irrelevance_error:decoder_success",
            "error": ["Valid syntax. Successfully decode AST when it should not."]}
    return {"valid": True} if has_call else {
        "valid": False, "error_type": "relevance_error:decoder_failed",
        "error": ["Invalid syntax. Failed to decode AST when it should have."]}


def turns_passed(entry: dict[str, Any], ground_truth: list[list[str]], decoded: list[list[list[str]]],
                 *, style: str) -> int:
    """Partial credit (not BFCL's score): how many turns from the start BFCL's checker passes."""
    passed = 0
    for count in range(1, min(len(decoded), len(ground_truth)) + 1):
        prefix = check_multi_turn(entry, ground_truth[:count], decoded[:count], style=style)
        if not prefix["valid"]:
            break
        passed = count
    return passed


def is_multi_turn(category: str) -> bool:
    return category in MULTI_TURN
