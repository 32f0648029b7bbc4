"""The settings of the llm plugin's components, apart from the components: listing plugins and checking
a spec read only these (the components import the OpenAI client, asyncio and the filter machinery).

`LLMJudgeConfig` (`llm_judge`), `LLMSummarizerConfig` (the `llm` summarizer), `LLMFeasibilityConfig`
(`feasibility`, which adds the `llm` solver to beyondagent-plugin-synthesis's replay).
"""

from __future__ import annotations

import string
from typing import Any

import attrs

from beyondagent_core.checks import (
    MAX_TEMPERATURE,
    MAX_TOKENS,
    MAX_TURNS,
    TEMPERATURE_WHY,
    TOKENS_WHY,
    TURNS_WHY,
    number,
)
from beyondagent_core.llm_config import LLMConfig
from beyondagent_plugin_synthesis.config import FeasibilityConfig

MODES = ("binary", "score")
PLACEHOLDERS = ("query", "reference", "transcript", "instructions")


def _check_mode(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if value not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {value!r}")


_check_k = number(ge=1, le=1000, why="time: each judgement is an LLM call for every episode")
_check_threshold = number(ge=0, le=1, why="meaning: a judgement's score is from 0 to 1")


def _check_prompt(instance: Any, attribute: attrs.Attribute, value: str | None) -> None:
    if value is None:
        return
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(value) if name is not None}
    except ValueError as exc:
        raise ValueError(f"prompt is not a valid template ({exc}); write literal braces as {{{{ and }}}}") from None
    unknown = sorted(fields - set(PLACEHOLDERS))
    if unknown:
        raise ValueError(f"prompt has unknown placeholder(s) {', '.join('{' + f + '}' for f in unknown)}; "
                         f"available: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}")
    if "transcript" not in fields:
        raise ValueError("prompt must contain {transcript}, or the judge never sees the episode")


@attrs.define
class LLMJudgeConfig:
    """`llm`: the judge's endpoint and sampling (unset: the spec's `llm`). `mode`: `binary` (yes/no) or `score` (0..1).

    `k` judgements are averaged; `success` is `score >= threshold`. `cache` keeps rewards by
    task + trajectory + these settings. `prompt` replaces the user prompt: a template with
    `{query}`, `{reference}`, `{transcript}` and `{instructions}` (the verdict format for `mode`).
    """

    llm: LLMConfig | None = None
    mode: str = attrs.field(default="binary", validator=_check_mode)
    k: int = attrs.field(default=1, validator=_check_k)
    threshold: float = attrs.field(default=0.5, validator=_check_threshold)
    cache: bool = True
    prompt: str | None = attrs.field(default=None, validator=_check_prompt)


@attrs.define
class LLMSummarizerConfig:
    """`task_summary_history_length`: how many of the last action/observation pairs the LLM sees
    (0: all). `max_tasks`: the most tasks kept from one exploration. `entities`, `operations`,
    `difficulty`: an optional profile of the environment, put in the prompt. `temperature`,
    `max_tokens`: sampling for the summarizer call (None: the client's). `llm`: a model of its
    own; None uses the LLM the exploration stage hands in (the explorer's).
    """

    task_summary_history_length: int = attrs.field(default=10, validator=number(ge=0, le=MAX_TURNS, why=TURNS_WHY))
    max_tasks: int = attrs.field(default=3, validator=number(ge=1, le=MAX_TURNS, why="time: every task is checked "
                                                                                     "and explored"))
    entities: list[str] = attrs.field(factory=list)
    operations: list[str] = attrs.field(factory=list)
    difficulty: str | None = None
    temperature: float | None = attrs.field(default=None, validator=number(ge=0, le=MAX_TEMPERATURE,
                                                                           why=TEMPERATURE_WHY))
    max_tokens: int | None = attrs.field(default=None, validator=number(ge=1, le=MAX_TOKENS, why=TOKENS_WHY))
    llm: LLMConfig | None = None


SOLVERS: tuple[str, ...] = ("llm", "replay")


def _solver(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if value not in SOLVERS:
        raise ValueError(f"{attribute.name} must be one of {', '.join(SOLVERS)}, got {value!r}")


def _hint_template(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if "{reference}" not in value:
        raise ValueError(f"{attribute.name} must contain '{{reference}}', got {value!r}")


@attrs.define
class LLMFeasibilityConfig(FeasibilityConfig):
    """`solver`: `llm` (solve with the reference as a hint) or `replay` (replay the reference,
    no LLM). `attempts`: runs per task; one success keeps it. `rewrite_reference`: replace a
    kept task's reference with the successful run's actions. `concurrency`: episodes at once.
    `hint`: appended to the query for the `llm` solver; `{reference}` is the reference.
    """

    solver: str = attrs.field(default="llm", validator=_solver)
    hint: str = attrs.field(default="\n\nHint: a reference solution is:\n{reference}", validator=_hint_template)
