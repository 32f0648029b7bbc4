"""What our Workflow generates with inside Trinity-RFT: token ids in, sampled ids and log-probs out.

A `TokenEngine` is anything with `async complete_tokens(prompt_ids, params, *, request_id) ->
(ids, logprobs)`; `request_id` names the episode (trinity's run id: batch/task/run), the same for
each of its turns.
Trinity-RFT hands a workflow its rollout model as a `ModelWrapper` over vLLM; our mapping turns on
that model's OpenAI server (`explorer.rollout_model.enable_openai_api`), and `VllmServerEngine`
posts the episode's prompt ids to its `/v1/completions` (`return_token_ids`, `logprobs`): the
engine never re-tokenizes, and the server shares the engine trinity syncs the trainer's weights
into. A model object that is itself a `TokenEngine` (it has `complete_tokens`) is used as it is:
the way another engine plugs in, and what the CPU tests use in place of vLLM (no vLLM here).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

# what the server is sent of a turn's params; stop_token_ids: the template's end of turn besides eos
SAMPLING = ("temperature", "top_p", "max_tokens", "stop", "stop_token_ids")
REQUEST_TIMEOUT_S = 600


class TokenEngine(Protocol):
    async def complete_tokens(self, prompt_ids: Sequence[int], params: dict[str, Any], *,
                              request_id: str) -> tuple[list[int], list[float] | None]: ...


class VllmServerEngine:
    """The OpenAI server of trinity's vLLM rollout model, token in, token out."""

    def __init__(self, model: Any):
        self.model = model  # trinity's ModelWrapper

    async def complete_tokens(self, prompt_ids: Sequence[int], params: dict[str, Any], *,
                              request_id: str) -> tuple[list[int], list[float] | None]:
        import httpx

        if self.model.api_address is None:
            await self.model.prepare()  # asks the engine for its server's address and waits for it
        body: dict[str, Any] = {"model": self.model.model_path, "prompt": [int(t) for t in prompt_ids],
                                "logprobs": 1, "return_token_ids": True, "n": 1}
        body.update({key: value for key, value in params.items() if key in SAMPLING and value is not None})
        # a client per request: a workflow object lives for one task, and nothing is left open after it
        async with httpx.AsyncClient(base_url=str(self.model.api_address).rstrip("/"), timeout=REQUEST_TIMEOUT_S,
                                     headers={"Authorization": f"Bearer {self.model.api_key}"}) as client:
            reply = await client.post("/v1/completions", json=body, headers={"X-Request-Id": request_id})
        if reply.status_code != 200:
            raise RuntimeError(f"Trinity-RFT's vLLM server answered {reply.status_code}: {reply.text[:500]}")
        choice = reply.json()["choices"][0]
        ids = [int(t) for t in choice["token_ids"]]
        logprobs = (choice.get("logprobs") or {}).get("token_logprobs")
        return ids, [float(x) for x in logprobs] if logprobs is not None else None


def engine_of(model: Any) -> TokenEngine:
    """The engine of the model trinity gave the workflow: itself when it is one, else its vLLM server."""
    if callable(getattr(model, "complete_tokens", None)):
        return model
    return VllmServerEngine(model)
