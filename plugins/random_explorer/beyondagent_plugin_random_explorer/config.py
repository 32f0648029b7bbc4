"""The `random` explorer's options (AgentEvolver's `strategy_args`) and the checks of their values.

Kept free of heavy imports so the registry can read it without importing the explorer. The
spec loader checks key names and types; `check_config` checks values when the explorer is
built, and its ValueError becomes a spec error naming the block.
"""

from __future__ import annotations

import attrs

from beyondagent_core.checks import (
    BACKOFF_WHY,
    FRACTION_WHY,
    MAX_BACKOFF,
    MAX_RETRIES,
    MAX_SEED,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    MAX_TOP_K,
    MAX_TURNS,
    RETRIES_WHY,
    SEED_WHY,
    TEMPERATURE_WHY,
    TOKENS_WHY,
    TOP_K_WHY,
    TURNS_WHY,
    number,
)

MODES: tuple[str, ...] = ("llm", "random_actions")


@attrs.define
class RandomExplorerConfig:
    """`explore: {name: random, ...}` (beside the engine's own keys: n, workers, cache...).

    `mode`: `llm` (an LLM agent maps the env) or `random_actions` (uniform draws from the
    env's `valid_actions()`; no LLM). `max_explore_step`: env steps per exploration.
    `max_llm_retries`: extra tries of a failed model call, `retry_backoff` seconds apart at
    first and doubling, with jitter (errors the LLM client already gave up on, such as
    `OpenAIChat`'s after its own retries, are not retried again). `temperature`, `top_p`,
    `top_k`, `max_tokens`: sampling for the explorer's calls (None: the client's default).
    `task_summary_history_length` is accepted for AgentEvolver spec compatibility; the
    summarizer has its own. `seed`: with the seed task's id and how many explorations of it
    came before, fixes each exploration's random draws.
    """

    mode: str = "llm"
    max_explore_step: int = attrs.field(default=15, validator=number(ge=1, le=MAX_TURNS, why=TURNS_WHY))
    max_llm_retries: int = attrs.field(default=3, validator=number(ge=0, le=MAX_RETRIES, why=RETRIES_WHY))
    retry_backoff: float = attrs.field(default=1.0, validator=number(ge=0, le=MAX_BACKOFF, why=BACKOFF_WHY))
    temperature: float | None = attrs.field(default=1.0, validator=number(ge=0, le=MAX_TEMPERATURE,
                                                                          why=TEMPERATURE_WHY))
    top_p: float | None = attrs.field(default=1.0, validator=number(gt=0, le=1, why=FRACTION_WHY))
    top_k: int | None = attrs.field(default=None, validator=number(ge=-1, le=MAX_TOP_K, why=TOP_K_WHY))
    max_tokens: int | None = attrs.field(default=None, validator=number(ge=1, le=MAX_TOKENS, why=TOKENS_WHY))
    task_summary_history_length: int = attrs.field(default=10, validator=number(ge=1, le=MAX_TURNS, why=TURNS_WHY))
    seed: int = attrs.field(default=0, validator=number(ge=0, le=MAX_SEED, why=SEED_WHY))


def check_config(config: RandomExplorerConfig) -> None:
    if config.mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {config.mode!r}")
    if config.top_k == 0:  # each number's range is its field's validator
        raise ValueError(f"top_k must be at least 1 (or -1 for no limit), got {config.top_k!r}")
