"""The gateway in front of the tiny policy, for tests that drive it with the real `openai` client.

`policy_endpoint()` gives a started gateway episode whose generator is the torch backend's
ChatScheduler on the tiny model, running on an event loop in a thread of its own (as the rollout's
loop is while an agent runs), and its endpoint: the base URL and the key an OpenAI client uses
(`client(endpoint)`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
from beyondagent_plugin_torch.policy_chat import PolicyChat
from beyondagent_plugin_torch.trainer import stop_token_ids
from tiny_and_real import loaded_policy

from beyondagent_plugin_gateway.server import Endpoint, Gateway
from beyondagent_core.runtime.tokens import ChatTemplate


class LoopThread:
    """An asyncio event loop running in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Any, timeout: float = 120) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def tiny_chat(*, tokenizer: Any = None, max_tokens: int = 8, max_episode_tokens: int = 1024, seed: int = 0,
              batching: str = "lockstep") -> PolicyChat:
    model, tiny_tokenizer = loaded_policy("tiny")
    tokenizer = tokenizer or tiny_tokenizer
    template = ChatTemplate(tokenizer)
    scheduler = ChatScheduler(model, eos_token_ids=stop_token_ids(model, tokenizer, template),
                              pad_token_id=tokenizer.pad_token_id, batching=batching)
    return PolicyChat(scheduler, template, Sampling(1.0, 1.0, max_tokens), episode=0,
                      max_episode_tokens=max_episode_tokens, seed=seed)


def client(endpoint: Endpoint, **options: Any) -> Any:
    """The real `openai` client on an episode's endpoint (its base URL and key), no retries."""
    import openai

    return openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, **{"max_retries": 0, "timeout": 60,
                                                                                   **options})


def auth(endpoint: Endpoint) -> dict[str, str]:
    """The header an OpenAI client sends with the endpoint's key, for raw HTTP requests."""
    return {"Authorization": f"Bearer {endpoint.api_key}"}


@contextlib.contextmanager
def policy_endpoint(chat: PolicyChat | None = None, *, gateway: Gateway | None = None,
                    **limits: int) -> Iterator[tuple[Any, Endpoint, Gateway]]:
    """(the gateway episode, its endpoint, the gateway); the gateway stops afterwards. `limits`:
    the episode's (`max_calls`, `max_concurrent_calls`, `max_n`)."""
    chat = chat or tiny_chat()
    loop = LoopThread()
    gateway = gateway or Gateway()
    episode = chat.gateway_episode(**limits)
    endpoint = gateway.open(episode, loop.loop)
    try:
        yield episode, endpoint, gateway
    finally:
        gateway.close(endpoint.episode_id)
        gateway.stop()
        loop.stop()
