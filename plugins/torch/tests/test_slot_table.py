"""`kv_layout: slots` at its edges: which slot a new episode takes, a session ended mid-turn, a turn
that fills its slot exactly, and a turn whose whole prompt the slot already holds.

- With every slot owned, a new episode takes the slot of the least recently used idle session (the
  one whose turn ended longest ago), so the sessions still playing keep their caches.
- An episode that ends while its turn is being decoded (the gateway closes an episode mid-call)
  keeps its slot until that turn is done: freeing it then would leave the slot's ids out of step
  with what the turn fed, and the whole decode pass would fail.
- A prompt of `capacity - max_tokens + 1` tokens fits a slot of `capacity` (its prompt and every
  sampled token but the last); one more does not.
- A session that asks again with a prompt its slot holds whole (a retry of the same turn) still
  feeds its last prompt token: that token's logits are the first new token's.
Real `SlotTable` and the tiny model's `SlotScheduler`, as in test_slots.py.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
import torch
from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
from beyondagent_plugin_torch.slots import SlotScheduler, SlotTable

GREEDY = Sampling(temperature=0.0, top_p=1.0, max_tokens=4)


def turn_of(session, ids) -> SimpleNamespace:
    """What `SlotTable.take` reads of a request: its session and its prompt ids."""
    return SimpleNamespace(session=session, prompt_ids=list(ids))


def play_turn(table: SlotTable, session, ids, fed) -> int:
    """One whole turn of `session` through the table: take a slot, release it holding `fed`."""
    ((slot, _),) = table.take([turn_of(session, ids)])
    table.release(slot, session, list(fed))
    return slot


def test_a_new_episode_takes_the_least_recently_used_idle_slot() -> None:
    table = SlotTable(2, capacity=64)
    slot_a = play_turn(table, "a", [1, 2], [1, 2, 3])
    slot_b = play_turn(table, "b", [4, 5], [4, 5, 6])
    assert play_turn(table, "a", [1, 2, 3, 7], [1, 2, 3, 7, 8]) == slot_a  # a plays again: b is now the older
    ((slot_c, reused),) = table.take([turn_of("c", [9, 9])])
    assert (slot_c, reused) == (slot_b, 0) and table.stats.evictions == 1
    assert table.slots[slot_a].owner == "a" and table.slots[slot_a].ids == [1, 2, 3, 7, 8]
    # a's next turn still finds its ids in its slot
    ((slot, reused),) = table.take([turn_of("a", [1, 2, 3, 7, 8, 10])])
    assert (slot, reused) == (slot_a, 5)


def test_ending_a_session_mid_turn_keeps_its_slot_until_the_turn_is_done() -> None:
    table = SlotTable(2, capacity=64)
    ((slot, _),) = table.take([turn_of("a", [1, 2, 3])])
    table.slots[slot].ids = [1, 2, 3]  # what the prefill wrote
    table.drop("a")  # the episode ended while its turn decodes
    assert table.slots[slot].owner == "a" and table.slots[slot].ids == [1, 2, 3] and table.slots[slot].busy
    table.release(slot, "a", [1, 2, 3, 4])
    table.drop("a")  # once the turn is done its slot is freed
    assert table.slots[slot].owner is None and len(table) == 0


@pytest.mark.parametrize("layout", ["slots", "sessions"])
def test_a_session_ended_mid_turn_fails_no_episode_of_the_pass(policy, layout: str) -> None:
    """Two episodes decode in one pass; one ends while its turn is still decoding: both get their tokens,
    and the ended one keeps no cache (a slot or a stored prefix) once its turn is done."""
    model, tokenizer = policy
    options = {"eos_token_ids": [], "pad_token_id": tokenizer.pad_token_id, "max_batch_size": 2}
    # no stop token: each turn samples its max_tokens
    slots = (SlotScheduler(model, capacity=64, **options) if layout == "slots"
             else ChatScheduler(model, batching="continuous", **options))

    def busy_a() -> bool:  # a's turn is decoding: submitted, no longer waiting
        return "a" in slots._turns and all(request.session != "a" for request in slots._waiting)

    async def both():
        async def turn(order, ids, max_tokens, session):
            with slots.episode():
                return await slots.generate((order, 0), ids, GREEDY, max_tokens, torch.Generator().manual_seed(order),
                                            session=session)

        async def end_a_mid_turn() -> bool:
            for _ in range(100_000):  # a bound, not a clock: the decode loop yields between its steps
                if busy_a():
                    slots.end_session("a")
                    return True
                await asyncio.sleep(0)
            return False

        return await asyncio.gather(turn(0, [5, 6, 7], 3, "a"), turn(1, [5, 8, 9, 10], 6, "b"), end_a_mid_turn(),
                                    return_exceptions=True)

    a, b, ended_mid_turn = asyncio.run(both())
    assert ended_mid_turn is True
    assert not isinstance(a, BaseException) and len(a[0]) == 3
    assert not isinstance(b, BaseException) and len(b[0]) == 6
    # the ended episode's cache is freed once its turn is done (not kept for a next turn that cannot come)
    if layout == "slots":
        assert [slot.owner for slot in slots.kv.slots if slot.owner is not None] == ["b"]
    else:
        assert "a" not in slots.kv._prefixes and "b" in slots.kv._prefixes
    assert not slots._turns and not slots._ended


def test_a_turn_that_fills_its_slot_exactly_is_sampled(policy) -> None:
    model, tokenizer = policy
    slots = SlotScheduler(model, eos_token_ids=[], pad_token_id=tokenizer.pad_token_id, capacity=16,
                          max_batch_size=2)

    async def turn(ids):
        with slots.episode():
            return await slots.generate((0, 0), ids, GREEDY, 4, torch.Generator().manual_seed(0))

    tokens, logprobs = asyncio.run(turn([5] * 13))  # 13 prompt tokens + 3 fed samples = 16
    assert len(tokens) == 4 and len(logprobs) == 4
    with pytest.raises(ValueError, match="do not fit a slot of 16 tokens"):
        asyncio.run(turn([5] * 14))


def test_the_same_prompt_again_samples_what_it_sampled_the_first_time(policy) -> None:
    """Greedy: a session that repeats its turn's prompt (the slot holds all of it, and more) gets the same reply."""
    model, tokenizer = policy
    slots = SlotScheduler(model, eos_token_ids=[], pad_token_id=tokenizer.pad_token_id, capacity=64,
                          max_batch_size=2)
    prompt = tokenizer.encode("Which way to the exit?")

    async def turn():
        with slots.episode():
            return await slots.generate((0, 0), prompt, GREEDY, 4, torch.Generator().manual_seed(0),
                                        session="episode")

    first = asyncio.run(turn())
    again = asyncio.run(turn())
    assert again[0] == first[0]
    torch.testing.assert_close(torch.tensor(again[1]), torch.tensor(first[1]), rtol=1e-4, atol=1e-5)
    assert slots.kv.stats.reused_tokens == len(prompt) - 1  # every prompt token but the last, which is fed
