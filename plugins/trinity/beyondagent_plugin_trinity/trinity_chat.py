"""The `llm` a workflow gets inside Trinity-RFT: the core's `TokenChat` on a `TokenEngine`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from beyondagent_core.runtime.token_chat import TokenChat
from beyondagent_core.runtime.tokens import ChatTemplate
from beyondagent_plugin_trinity.engines import TokenEngine


class TrinityChat(TokenChat):
    engine = "Trinity-RFT's rollout model"
    prompt_limit = "trinity's model.max_prompt_tokens"
    response_limit = "model.max_response_tokens"

    def __init__(self, token_engine: TokenEngine, template: ChatTemplate, sampling_params: dict[str, Any], *,
                 request_id: str, prompt_length: int, response_length: int, max_new_tokens: int):
        super().__init__(template, sampling_params, prompt_length=prompt_length, response_length=response_length,
                         max_new_tokens=max_new_tokens)
        self.token_engine = token_engine
        self.request_id = request_id

    async def complete(self, prompt_ids: Sequence[int], params: dict[str, Any]) -> tuple[list[int], list[float] | None]:
        return await self.token_engine.complete_tokens(list(prompt_ids), params, request_id=self.request_id)
