"""The embedding client: texts to unit vectors through any OpenAI-compatible `/embeddings` endpoint.

Synchronous (the store's `add` and `retrieve` are), through the `openai` package with its own
retries off: ours retry timeouts, dropped connections, 408, 429 and 5xx with full-jitter backoff,
`max_retries` times, and fail at once on any other status with an error naming the endpoint, the
model and the spec key to fix. Texts go `batch_size` to a request; vectors come back in the
request's order, scaled to unit length (so cosine similarity is a dot product). `encoding_format`
is `float`: some compatible servers do not speak the client's default base64.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from beyondagent_core.llm import PLACEHOLDER_API_KEY, LLMError
from beyondagent_core.logs import get_logger
from beyondagent_core.secrets import remember
from beyondagent_plugin_experience.config import EmbeddingConfig

log = get_logger("beyondagent.experience")

KEY_PATH = "experience.embedding"


class EmbeddingUnavailable(LLMError):
    """The endpoint could not be reached or kept failing after the retries (not a refusal)."""


class Embedder:
    """`embed(texts) -> float32 array (len(texts), dim)`, rows of unit length; `usage` tallies requests."""

    def __init__(self, config: EmbeddingConfig):
        self.config = config
        self._client: Any = None
        self._lock = threading.Lock()
        self.usage = {"requests": 0, "retries": 0, "texts": 0}

    @property
    def endpoint(self) -> str:
        return f"{self.config.base_url or 'the openai default endpoint'}/embeddings (model {self.config.model})"

    @property
    def identity(self) -> str:
        """What vectors are comparable across: the model and the size asked for."""
        return f"{self.config.model}|{self.config.dimensions or 'native'}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        size = self.config.batch_size
        parts = [self._request(list(texts[start:start + size])) for start in range(0, len(texts), size)]
        if len({part.shape[1] for part in parts}) > 1:
            raise LLMError(f"{self.endpoint} returned vectors of different sizes in one run", where=KEY_PATH,
                           hint="check that experience.embedding.model names one model the endpoint serves")
        vectors = np.concatenate(parts)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms > 0, norms, 1.0)

    def _request(self, texts: list[str]) -> np.ndarray:
        import openai

        request: dict[str, Any] = {"model": self.config.model, "input": texts, "encoding_format": "float"}
        if self.config.dimensions:
            request["dimensions"] = self.config.dimensions
        attempt = 0
        while True:
            self.usage["requests"] += 1
            try:
                response = self.client.embeddings.create(**request)
                break
            except openai.APIError as exc:
                status = getattr(exc, "status_code", None)
                retryable = isinstance(exc, openai.APIConnectionError) or (
                    status is not None and (status in (408, 429) or status >= 500))
                if not retryable or attempt >= self.config.max_retries:
                    raise self._error(exc, status, attempt, retryable) from exc
                ceiling = min(self.config.backoff_max, self.config.backoff_base * 2 ** attempt)
                attempt += 1
                self.usage["retries"] += 1
                log.debug("experience.embedding_retry", endpoint=self.endpoint, attempt=attempt, status=status)
                time.sleep(random.uniform(0.0, ceiling))
        rows = sorted(response.data, key=lambda item: item.index)
        if len(rows) != len(texts):
            raise LLMError(f"{self.endpoint} returned {len(rows)} vectors for {len(texts)} texts", where=KEY_PATH,
                           hint="the endpoint is not OpenAI-compatible; check experience.embedding.base_url")
        self.usage["texts"] += len(texts)
        return np.asarray([row.embedding for row in rows], dtype=np.float32)

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                from openai import OpenAI

                api_key = os.environ.get(self.config.api_key_env)
                remember(api_key)
                self._client = OpenAI(api_key=api_key or PLACEHOLDER_API_KEY, base_url=self.config.base_url,
                                      timeout=self.config.timeout, max_retries=0)
            return self._client

    def _error(self, exc: Exception, status: int | None, attempt: int, retryable: bool) -> LLMError:
        what = f"HTTP {status}" if status is not None else type(exc).__name__
        body = getattr(exc, "body", None)
        inner = body.get("error", body) if isinstance(body, dict) else None
        detail = (inner.get("message") if isinstance(inner, dict) else None) or (str(exc).splitlines() or [""])[0]
        if retryable:
            return EmbeddingUnavailable(f"embedding request to {self.endpoint} failed after {attempt + 1} attempt(s): "
                            f"{what}: {detail}", where=KEY_PATH, status=status,
                            hint="check that the endpoint is up; raise experience.embedding.max_retries or .timeout")
        if status in (401, 403):
            hint = (f"check the API key: it is read from the environment variable {self.config.api_key_env} "
                    f"(experience.embedding.api_key_env)")
        elif status == 404:
            hint = "check experience.embedding.base_url (it usually ends in /v1) and experience.embedding.model"
        else:
            hint = "the endpoint rejected the request; check experience.embedding.model and .dimensions"
        return LLMError(f"embedding request to {self.endpoint} was refused: {what}: {detail}", where=KEY_PATH,
                        hint=hint, status=status)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
