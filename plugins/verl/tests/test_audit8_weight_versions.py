"""Which policy versions an episode was generated with (`VerlChat.weight_versions`, eighth audit,
mutant E10): verl's V1 trainer measures a sample's staleness from the first version it began with
and the last one it ended with (`min_global_steps` / `max_global_steps`), so a multi-turn episode
whose weights changed between turns must report its first turn's first version and its last turn's
last version, not the first turn's twice; an episode whose server reported none gets the fallback.

`VersionedServer` stands in for verl's server manager and tags each answer with a weights version.
From the eighth mutation audit.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from beyondagent_plugin_verl.verl_chat import VerlChat

from beyondagent_core.runtime.tokens import ChatTemplate

load_tokenizer = pytest.importorskip("beyondagent_plugin_torch.models").load_tokenizer


class VersionedServer:
    """Stands in for verl's server manager: answer k carries `extra_fields[k]` (verl's version fields)."""

    def __init__(self, extra_fields: list[dict]):
        self.extra_fields = list(extra_fields)

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict) -> SimpleNamespace:
        return SimpleNamespace(token_ids=[7, 8], log_probs=[-0.5, -0.25], stop_reason="completed",
                               extra_fields=self.extra_fields.pop(0))


def versions_of(extra_fields: list[dict], fallback: int | None) -> tuple[int | None, int | None]:
    chat = VerlChat(VersionedServer(extra_fields), ChatTemplate(load_tokenizer("tiny")), {}, request_id="r",
                    prompt_length=64, response_length=64, max_new_tokens=4)

    async def turns() -> None:
        for turn in range(len(extra_fields)):
            await chat.generate("r", [1, 2, 3 + turn], {"max_tokens": 4})

    asyncio.run(turns())
    return chat.weight_versions(fallback)


def test_a_multi_turn_episode_spans_its_first_to_its_last_weights_version() -> None:
    assert versions_of([{"global_steps": 3}, {"global_steps": 4}, {"global_steps": 5}], fallback=0) == (3, 5)
    # verl's partial rollouts: a turn resumed with new weights carries both of its versions
    assert versions_of([{"min_global_steps": 2, "max_global_steps": 3}, {},
                        {"min_global_steps": 6, "max_global_steps": 7}, {}], fallback=0) == (2, 7)


def test_an_episode_without_versions_gets_the_fallback_step() -> None:
    assert versions_of([{}, {}], fallback=9) == (9, 9)
    assert versions_of([], fallback=None) == (None, None)
