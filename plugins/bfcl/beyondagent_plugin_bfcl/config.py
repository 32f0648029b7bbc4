"""The BFCL categories we support, their splits, and the config classes of the components.

Kept free of `bfcl_eval` (which lives only in the plugin's venv) so the main environment's
registry, spec loader and task source can read it.

Categories are BFCL v4's file names without `BFCL_v4_` (the v3 multi-turn and AST categories
AgentEvolver reports on kept their names). Splits are stable: a task is in `val` when the
first 8 hex digits of the SHA-256 of its id, as a number, are divisible by 5 (about 20% of each
category), else in `train`; `all` is both. The rule depends on the id only, so a split never
changes when BFCL adds tasks.
"""

from __future__ import annotations

import difflib
import hashlib

import attrs

from beyondagent_core.checks import (
    CHARS_WHY,
    FRACTION_WHY,
    MAX_CHARS,
    MAX_TASKS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    MAX_TURNS,
    TASKS_WHY,
    TEMPERATURE_WHY,
    TOKENS_WHY,
    TURNS_WHY,
    number,
)

MULTI_TURN: tuple[str, ...] = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                               "multi_turn_long_context")
AST: tuple[str, ...] = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple",
                        "live_multiple", "live_parallel", "live_parallel_multiple")
RELEVANCE: tuple[str, ...] = ("irrelevance", "live_irrelevance", "live_relevance")
CATEGORIES: tuple[str, ...] = MULTI_TURN + AST + RELEVANCE
GROUPS: dict[str, tuple[str, ...]] = {"multi_turn": MULTI_TURN, "single_turn": AST + RELEVANCE, "ast": AST,
                                      "all": CATEGORIES}
EXCLUDED: dict[str, str] = {
    "web_search": "needs a live web search (SerpAPI) and the internet",
    "memory": "needs a sentence-transformers model (a download, and CUDA torch in bfcl-eval's pins)",
    "format_sensitivity": "a study of prompt formats, not a task set of its own",
    "simple_java": "Java calls, judged by BFCL's Java type converter; not a Python agent's format",
    "simple_javascript": "JavaScript calls, likewise",
}
SPLITS: tuple[str, ...] = ("train", "val", "all")
STYLES: tuple[str, ...] = ("tools", "prompting")
REWARDS: tuple[str, ...] = ("official", "turns")
MAX_STEPS_PER_TURN = 20  # BFCL's MAXIMUM_STEP_LIMIT: a turn past it force-quits the whole entry


class UnknownCategory(ValueError):
    """A category name that BFCL does not have or we do not support (says which ones there are)."""


def check_categories(names: list[str] | tuple[str, ...], where: str = "categories") -> list[str]:
    """`names` with groups (`multi_turn`, `single_turn`, `ast`, `all`) expanded, each checked."""
    if isinstance(names, str):
        names = [names]
    chosen: list[str] = []
    for name in names:
        if name in GROUPS:
            chosen += [category for category in GROUPS[name] if category not in chosen]
        elif name in CATEGORIES:
            if name not in chosen:
                chosen.append(name)
        elif name.removeprefix("BFCL_v4_").removeprefix("BFCL_v3_").removesuffix(".json") in CATEGORIES:
            bare = name.removeprefix("BFCL_v4_").removeprefix("BFCL_v3_").removesuffix(".json")
            raise UnknownCategory(f"{where}: write the category {bare!r}, not the file name {name!r}")
        elif name in EXCLUDED:
            raise UnknownCategory(f"{where}: BFCL's {name!r} category is not supported here: {EXCLUDED[name]} "
                                  "(docs/bfcl.md, 'What is covered')")
        else:
            close = difflib.get_close_matches(name, [*CATEGORIES, *GROUPS], n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UnknownCategory(f"{where}: unknown BFCL category {name!r}; {hint}categories: "
                                  f"{', '.join(CATEGORIES)}; groups: {', '.join(GROUPS)}")
    if not chosen:
        raise UnknownCategory(f"{where}: name at least one category (e.g. multi_turn_base)")
    return chosen


def category_of(task_id: str) -> str:
    """The category of a BFCL task id (`multi_turn_base_12` -> `multi_turn_base`), checked."""
    category = task_id.rsplit("_", 1)[0] if "_" in task_id else task_id
    if category not in CATEGORIES:
        close = difflib.get_close_matches(category, CATEGORIES, n=1, cutoff=0.6)
        hint = f" (did you mean a {close[0]!r} task?)" if close else ""
        raise KeyError(f"{task_id!r} is not a BFCL task id of a supported category{hint}; "
                       f"ids look like multi_turn_base_0 or simple_python_12")
    return category


def kind_of(category: str) -> str:
    """`multi_turn`, `ast` or `relevance`: how BFCL runs and scores the category."""
    return "multi_turn" if category in MULTI_TURN else "ast" if category in AST else "relevance"


def split_of(task_id: str) -> str:
    """`val` for about one id in five (by the id's SHA-256), else `train`; see the module docstring."""
    return "val" if int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) % 5 == 0 else "train"


def _one_of(choices: tuple[str, ...]):  # noqa: ANN202 - an attrs validator
    def check(instance: object, attribute: attrs.Attribute, value: str) -> None:
        if value not in choices:
            close = difflib.get_close_matches(str(value), choices, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"{attribute.name} must be one of {', '.join(choices)}, got {value!r}{hint}")

    return check


def _between(minimum: float, maximum: float, why: str):  # noqa: ANN202 - an attrs validator
    """A number from `minimum` to `maximum`; `why` (memory, time, meaning) says what the maximum protects."""
    return number(ge=minimum, le=maximum, why=why)


@attrs.define
class BFCLTasksConfig:
    """`bfcl` task source: the tasks of `categories` (names or groups: multi_turn, single_turn,
    ast, all) in `split` (train, val, all), the first `limit` per category (0: all), or only `ids`.
    `data_dir`: BFCL's `data/` directory ("" = the one in the plugin's venv, or `$BFCL_DATA_DIR`)."""

    categories: list[str] = attrs.field(factory=lambda: ["multi_turn_base"])
    split: str = attrs.field(default="train", validator=_one_of(SPLITS))
    limit: int = attrs.field(default=0, validator=_between(0, MAX_TASKS, TASKS_WHY))
    ids: list[str] = attrs.field(factory=list)
    data_dir: str = ""

    def __attrs_post_init__(self) -> None:
        check_categories(self.categories)


@attrs.define
class BFCLConfig:
    """`bfcl` env. `style`: how functions are shown and calls read, `tools` (Hermes `<tool_call>`
    JSON, what BFCL's FC handlers of Qwen-family models expect) or `prompting` (BFCL's own system
    prompt, calls as a Python list `[f(a=1)]`). `reward`: `official` is BFCL's pass/fail (1 or 0);
    `turns` gives multi-turn partial credit, the fraction of turns BFCL's checker passes before the
    first failing one (the official verdict stays in the reward's `success` and details).
    `max_steps_per_turn`: BFCL's limit (20); a turn past it force-quits the entry, as in BFCL.
    `max_output_chars`: a longer function result is cut with a visible marker. `data_dir`: BFCL's
    `data/` directory to read the entries and answers from ("" = bfcl_eval's own, in the venv).
    Bounds on what the model's calls may cost (docs/bfcl.md, 'Bounds'; the argument caps of
    `bounds.py` are not settings): `max_calls_per_step` calls of one message run, the rest are
    reported not run; the calls of one step (and BFCL's check of an episode) may take
    `max_call_seconds` together, in a process whose memory is capped at `max_call_memory_mb`."""

    style: str = attrs.field(default="tools", validator=_one_of(STYLES))
    reward: str = attrs.field(default="official", validator=_one_of(REWARDS))
    max_steps_per_turn: int = attrs.field(default=MAX_STEPS_PER_TURN, validator=_between(1, MAX_TURNS, TURNS_WHY))
    max_output_chars: int = attrs.field(default=4000, validator=_between(100, MAX_CHARS, CHARS_WHY))
    data_dir: str = ""
    max_calls_per_step: int = attrs.field(
        default=64, validator=_between(1, 1024, "time: BFCL's answers make at most 34 calls in a turn; each "
                                                "result can fill max_output_chars of the observation"))
    max_call_seconds: float = attrs.field(
        default=5.0, validator=_between(0.1, 25, "time: a call takes microseconds; a stopped call's step can take "
                                                 "twice this, which must stay under the env service's 60 s call "
                                                 "timeout"))
    max_call_memory_mb: int = attrs.field(
        default=1024, validator=_between(256, 65536, "memory: the backends' process needs ~35 MiB of address "
                                                     "space; more than 64 GiB is no cap"))


@attrs.define
class BFCLWorkflowConfig:
    """`bfcl` workflow: `max_turns` model turns per episode (all user turns together); `system_prompt`
    goes before the tools' text (`style: tools`); unset sampling keys use the backend's."""

    max_turns: int = attrs.field(default=60, validator=_between(1, MAX_TURNS, TURNS_WHY))
    system_prompt: str = ""
    temperature: float | None = attrs.field(default=None, validator=_between(0, MAX_TEMPERATURE, TEMPERATURE_WHY))
    top_p: float | None = attrs.field(default=None, validator=number(gt=0, le=1, why=FRACTION_WHY))
    max_tokens: int | None = attrs.field(default=None, validator=_between(1, MAX_TOKENS, TOKENS_WHY))


@attrs.define
class BFCLJudgeConfig:
    """`bfcl` judge: BFCL's own checkers through the env (set `reward` on the env)."""
