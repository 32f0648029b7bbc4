"""The `random` explorer's options (AgentEvolver's `strategy_args`) and the checks of their values.

Kept free of heavy imports so the registry can read it without importing the explorer. The
spec loader checks key names and types; `check_config` checks values when the explorer is
built, and its ValueError becomes a spec error naming the block.
"""

from __future__ import annotations

import attrs

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
    max_explore_step: int = 15
    max_llm_retries: int = 3
    retry_backoff: float = 1.0
    temperature: float | None = 1.0
    top_p: float | None = 1.0
    top_k: int | None = None
    max_tokens: int | None = None
    task_summary_history_length: int = 10
    seed: int = 0


def check_config(config: RandomExplorerConfig) -> None:
    if config.mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {config.mode!r}")
    if config.max_explore_step < 1:
        raise ValueError(f"max_explore_step must be at least 1, got {config.max_explore_step!r}")
    if config.max_llm_retries < 0:
        raise ValueError(f"max_llm_retries must be 0 or more, got {config.max_llm_retries!r}")
    if config.retry_backoff < 0:
        raise ValueError(f"retry_backoff must be 0 or more seconds, got {config.retry_backoff!r}")
    if config.task_summary_history_length < 1:
        raise ValueError(f"task_summary_history_length must be at least 1, got {config.task_summary_history_length!r}")
    if config.temperature is not None and config.temperature < 0:
        raise ValueError(f"temperature must be 0 or more, got {config.temperature!r}")
    if config.top_p is not None and not 0 < config.top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {config.top_p!r}")
    if config.top_k is not None and config.top_k < 1 and config.top_k != -1:
        raise ValueError(f"top_k must be at least 1 (or -1 for no limit), got {config.top_k!r}")
    if config.max_tokens is not None and config.max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {config.max_tokens!r}")
