"""`LLMConfig`: where an OpenAI-compatible model is and how to call it (the spec's `llm` block).

Apart from the client (`llm.py`: asyncio, threads, the `openai` package on first use), so that a
spec, a component's config and `beyondagent plugins` read it without importing the client.
"""

from __future__ import annotations

import attrs

from beyondagent_core.checks import (
    BACKOFF_WHY,
    CONCURRENCY_WHY,
    FRACTION_WHY,
    MAX_BACKOFF,
    MAX_CONCURRENCY,
    MAX_RETRIES,
    MAX_SECONDS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    MAX_TOP_K,
    RETRIES_WHY,
    SECONDS_WHY,
    TEMPERATURE_WHY,
    TOKENS_WHY,
    TOP_K_WHY,
    number,
)

@attrs.define
class LLMConfig:
    """Where the model is and how to call it.

    `model` and `base_url` name the endpoint (`base_url` None: the openai package's own default,
    which honours `OPENAI_BASE_URL`). The key is read from the environment variable named by
    `api_key_env` (never written in the spec); an unset variable is fine for a local server.
    Sampling defaults: `temperature`, `top_p`, `top_k` (sent in the request's extra body, as vLLM
    expects), `max_tokens`; a `chat(...)` call may override each. `timeout` is per request in
    seconds; failed requests are retried `max_llm_retries` times after the first, sleeping a
    random time up to `backoff_base * 2**attempt` (at most `backoff_max`) between tries.
    `max_concurrency` caps the requests in flight from this client (per event loop).
    """

    model: str = ""
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float | None = attrs.field(default=None, validator=number(ge=0, le=MAX_TEMPERATURE,
                                                                           why=TEMPERATURE_WHY))
    top_p: float | None = attrs.field(default=None, validator=number(gt=0, le=1, why=FRACTION_WHY))
    top_k: int | None = attrs.field(default=None, validator=number(ge=-1, le=MAX_TOP_K, why=TOP_K_WHY))  # -1, 0: off
    max_tokens: int | None = attrs.field(default=None, validator=number(gt=0, le=MAX_TOKENS, why=TOKENS_WHY))
    timeout: float = attrs.field(default=60.0, validator=number(gt=0, le=MAX_SECONDS, why=SECONDS_WHY))
    max_llm_retries: int = attrs.field(default=3, validator=number(ge=0, le=MAX_RETRIES, why=RETRIES_WHY))
    backoff_base: float = attrs.field(default=0.5, validator=number(ge=0, le=MAX_BACKOFF, why=BACKOFF_WHY))
    backoff_max: float = attrs.field(default=30.0, validator=number(ge=0, le=MAX_BACKOFF, why=BACKOFF_WHY))
    max_concurrency: int = attrs.field(default=64, validator=number(gt=0, le=MAX_CONCURRENCY, why=CONCURRENCY_WHY))
