"""The `experience` store's own keys (the spec's `experience` block besides the core's `ExperienceBlock`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from beyondagent_core.checks import (
    BACKOFF_WHY,
    CHARS_WHY,
    MAX_BACKOFF,
    MAX_CHARS,
    MAX_RETRIES,
    MAX_SECONDS,
    RETRIES_WHY,
    SECONDS_WHY,
    FieldRangeError,
    number,
)

COSINE_WHY = "meaning: a cosine similarity is from -1 to 1"
from beyondagent_core.llm_config import LLMConfig

SUMMARIZERS = ("hindsight", "llm", "trajectory")
RANKINGS = ("vector", "hybrid")
ON_MODEL_CHANGE = ("reembed", "refuse")


Validator = Callable[[Any, attrs.Attribute, Any], None]


def under(block: str, check: Validator) -> Validator:
    """A validator whose error names the field inside `block` (the spec loader adds `experience.`)."""

    def wrapped(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        try:
            check(instance, attribute, value)
        except FieldRangeError as exc:
            raise FieldRangeError(f"{block}.{exc.field}", exc.message) from None
        except ValueError as exc:  # attrs' in_() validator
            raise FieldRangeError(f"{block}.{attribute.name}", f"must be one of {_choices(check)}, got {value!r}") \
                from exc

    wrapped.bounds = getattr(check, "bounds", None)  # type: ignore[attr-defined] # what `checks.bounds_of` reads
    return wrapped


def _choices(check: Any) -> str:
    options = getattr(check, "options", None)
    return ", ".join(map(str, options)) if options else "the documented values"


def one_of(*choices: str) -> Validator:
    """A validator whose error names the field and the choices (the spec loader adds `experience.`)."""

    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value not in choices:
            raise FieldRangeError(attribute.name, f"must be one of {', '.join(choices)}, got {value!r}")

    return check


def _named(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if not value or not value.strip():
        raise FieldRangeError(attribute.name, "must name the embedding model the endpoint serves (`GET /v1/models`)")


@attrs.define
class EmbeddingConfig:
    """Embedding retrieval: any OpenAI-compatible `/embeddings` endpoint, vectors in sqlite-vec.

    `model`, `base_url`, `api_key_env`, `timeout`, `max_retries`, `backoff_base`, `backoff_max`:
    as in `LLMConfig` (the key is read from the environment variable, never the spec).
    `dimensions`: asked of models that can shorten their vectors (unset: the model's own).
    `batch_size`: texts per request. `ranking`: `vector` (cosine similarity) or `hybrid`
    (reciprocal-rank fusion of the vector and BM25 rankings). `min_similarity`: a record less
    similar to the task (cosine) is not retrieved. `dedup_similarity`: a new experience at least
    this similar to a stored one is a near duplicate and not added (1.0: only identical vectors).
    `on_model_change`: a store whose vectors came from another model (or size) is `reembed`ded
    at open, or `refuse`d with an error.
    """

    model: str = attrs.field(default="", validator=under("embedding", _named))
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    dimensions: int | None = attrs.field(default=None, validator=under("embedding", number(
        ge=1, le=65536, why="memory: every experience keeps a vector this long")))
    batch_size: int = attrs.field(default=64, validator=under("embedding", number(
        ge=1, le=2048, why="memory: texts embedded in one request")))
    timeout: float = attrs.field(default=30.0, validator=under("embedding", number(gt=0, le=MAX_SECONDS,
                                                                                  why=SECONDS_WHY)))
    max_retries: int = attrs.field(default=3, validator=under("embedding", number(ge=0, le=MAX_RETRIES,
                                                                                  why=RETRIES_WHY)))
    backoff_base: float = attrs.field(default=0.5, validator=under("embedding", number(ge=0, le=MAX_BACKOFF,
                                                                                       why=BACKOFF_WHY)))
    backoff_max: float = attrs.field(default=30.0, validator=under("embedding", number(ge=0, le=MAX_BACKOFF,
                                                                                       why=BACKOFF_WHY)))
    ranking: str = attrs.field(default="vector", validator=under("embedding", attrs.validators.in_(RANKINGS)))
    min_similarity: float = attrs.field(default=0.0, validator=under("embedding", number(ge=-1, le=1, why=COSINE_WHY)))
    dedup_similarity: float = attrs.field(default=0.97, validator=under("embedding", number(gt=0, le=1,
                                                                                            why=COSINE_WHY)))
    on_model_change: str = attrs.field(default="reembed",
                                       validator=under("embedding", attrs.validators.in_(ON_MODEL_CHANGE)))


@attrs.define
class ExperienceStoreConfig:
    """`path`: the sqlite file (unset: experiences.sqlite in the run directory; set it to share
    experiences across runs). `summarizer`: `hindsight` (offline: the action sequence of a
    successful episode), `trajectory` (offline: successful episodes kept whole, shown as worked
    examples: the task, each observation and action, the outcome) or `llm` (lessons from
    successes, failures and their comparison, written by `llm`, unset: the spec's `llm`).
    `max_chars`: an experience's text is cut there. `max_per_task`: at most this many lessons
    (examples) from one task's group per summary. `observation_chars`: a worked example's
    observations are cut there (0: actions only). `embedding`: unset, retrieval is BM25; set, by
    embedding similarity (`EmbeddingConfig`)."""

    path: str | None = None
    summarizer: str = attrs.field(default="hindsight", validator=one_of(*SUMMARIZERS))
    llm: LLMConfig | None = None
    max_chars: int = attrs.field(default=1200, validator=number(ge=50, le=MAX_CHARS, why=CHARS_WHY))
    max_per_task: int = attrs.field(default=3, validator=number(ge=1, le=100_000, why="memory: every experience "
                                                                                         "kept is held and searched"))
    observation_chars: int = attrs.field(default=300, validator=number(ge=0, le=MAX_CHARS, why=CHARS_WHY))
    embedding: EmbeddingConfig | None = None
