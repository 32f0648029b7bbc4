"""Two naming bugs the eighth mutation audit found in the verl plugin (main venv, no verl import).

- Validation means whose data source holds a "/" (verl's GSM8K parquet names it `openai/gsm8k`) were
  dropped: `val/pass@1` and `val/reward_mean` read verl's `<section>/<source>/<var>/mean@N` as four parts.
- A gateway session started after another ended could take a live session's verl request id (ids were
  numbered by the sessions alive, not by those started), which verl's sticky routing and, with
  `full_determinism`, vLLM take as the same request.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from beyondagent_plugin_gateway.episode import GenerationSettings
from beyondagent_plugin_verl.metrics import map_step
from beyondagent_plugin_verl.verl_chat import VerlChat, VerlGenerator

from beyondagent_core.runtime.tokens import ChatTemplate

load_tokenizer = pytest.importorskip("beyondagent_plugin_torch.models").load_tokenizer


@pytest.mark.parametrize("source", ["gsm8k", "openai/gsm8k", "a/b/c"])
def test_validation_means_are_read_whatever_the_data_sources_name(source: str) -> None:
    out = map_step({f"val-core/{source}/acc/mean@1": 0.75, f"val-aux/{source}/reward/mean@1": 0.5,
                    f"val-core/{source}/acc/best@4/mean": 0.9, f"val-core/{source}/acc/std@4": 0.1})
    assert out["val/pass@1"] == 0.75 and out["val/reward_mean"] == 0.5  # best@N/mean and std@N are not means


def test_the_mean_is_over_data_sources_with_and_without_a_slash() -> None:
    out = map_step({"val-core/openai/gsm8k/acc/mean@1": 1.0, "val-core/math/acc/mean@1": 0.5})
    assert out["val/pass@1"] == 0.75


class Recording:
    """Stands in for verl's server manager: records each request id, answers one token."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict) -> SimpleNamespace:
        self.ids.append(request_id)
        return SimpleNamespace(token_ids=[5], log_probs=[-0.1], stop_reason="completed")


def test_a_new_session_never_takes_a_live_sessions_request_id() -> None:
    server = Recording()
    chat = VerlChat(server, ChatTemplate(load_tokenizer("tiny")), {}, request_id="r", prompt_length=64,
                    response_length=64, max_new_tokens=4)
    generator = VerlGenerator(chat)
    settings = GenerationSettings(1.0, 1.0, 4)

    async def calls() -> None:
        for session in ("a", "b", "c"):
            await generator.generate([1, 2], settings, session)
        generator.end_session("b")
        await generator.generate([1, 2], settings, "d")
        await generator.generate([1, 2], settings, "c")  # a live session keeps its id

    asyncio.run(calls())
    assert server.ids == ["r", "r-1", "r-2", "r-3", "r-2"]
