"""The contract suite of experience stores: subclass `ExperienceStoreContract`, give it `implementation`.

    from beyondagent_core.testing.experience_contract import ExperienceStoreContract

    @pytest.mark.beyondagent_plugins("experience")
    class TestMyStore(ExperienceStoreContract):
        @pytest.fixture
        def implementation(self, tmp_path):
            return {"name": "experience", "path": str(tmp_path / "x.sqlite")}

`implementation` is the spec's `experience` block (the store must work without a run: give it a
path; in a run, `bind(run)` is called first when the store defines it). Checked: what is added
comes back, duplicates are kept once, retrieval prefers the relevant record and honours `k`,
`exclude_own=True` (a rollout that is scored) returns no record learned on that task — not under
its id, nor the same problem under another id when the record names it (`task_key`) — records
persist (a new store from the same config finds them: a store must persist), `summarize`
returns `Experience` records without adding them, `stats` are numbers; and, for a store that
defines `examples_of` (prefix sampling), that a summarized success of a task comes back for that
task only, with its model turns in order.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from beyondagent_core.experience import Experience, same_task, task_key
from beyondagent_core.registry import Registry
from beyondagent_core.spec import select_component
from beyondagent_core.types import Reward, Task, Trajectory, Turn

RECORDS = [
    Experience(text="To light the lamp, turn the brass key before pressing the switch.", task_id="lamp",
               query="light the lamp"),
    Experience(text="The ferry leaves from the north pier; buy the ticket first.", task_id="ferry",
               query="cross the river by ferry"),
    Experience(text="Water the plants in the greenhouse only in the morning.", task_id="plants",
               query="water the plants"),
]


def winning_trajectory() -> Trajectory:
    task = Task(task_id="lamp", query="light the lamp")
    turns = [Turn("user", "A dark room."), Turn("assistant", "turn key", token_ids=[1]),
             Turn("user", "Click."), Turn("assistant", "press switch", token_ids=[2])]
    return Trajectory(task=task, turns=turns, reward=Reward(score=1.0, success=True))


class ExperienceStoreContract:
    """What every experience store must do."""

    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        raise pytest.UsageError(f"{type(self).__name__} must define the fixture `implementation`")

    @pytest.fixture
    def make_store(self, plugin_manager: Any, implementation: dict[str, Any]) -> Any:
        def make() -> Any:
            return select_component(Registry(plugin_manager), "experience_store", dict(implementation),
                                    key_path="experience").create()
        return make

    def test_what_is_added_comes_back_once(self, make_store: Any) -> None:
        store = make_store()
        assert store.add(RECORDS) == 3
        assert store.add([Experience(text=RECORDS[0].text.upper() + "  ")]) == 0  # the same lesson
        found = store.retrieve(Task(task_id="x", query="how do I light the lamp"), 3)
        assert found and found[0].text == RECORDS[0].text
        store.close()

    def test_k_bounds_the_answer(self, make_store: Any) -> None:
        store = make_store()
        store.add(RECORDS)
        assert len(store.retrieve(Task(task_id="x", query="lamp ferry plants"), 2)) <= 2
        assert store.retrieve(Task(task_id="x", query="lamp"), 0) == []
        store.close()

    def test_records_outlive_the_store_object(self, make_store: Any) -> None:
        first = make_store()
        first.add(RECORDS[:1])
        first.close()
        second = make_store()
        assert [e.text for e in second.retrieve(Task(task_id="x", query="light the lamp"), 1)] == [RECORDS[0].text]
        second.close()

    def test_summarize_returns_experiences_without_adding_them(self, make_store: Any) -> None:
        store = make_store()
        made = asyncio.run(store.summarize([winning_trajectory()], step=1))
        assert all(isinstance(e, Experience) and e.text for e in made)
        assert store.retrieve(Task(task_id="other", query="light the lamp"), 3) == []
        store.close()

    def test_a_scored_task_never_gets_its_own_records(self, make_store: Any) -> None:
        store = make_store()
        lamp = Task(task_id="lamp", query="light the lamp")
        twin = Task(task_id="lamp-again", query="light the lamp")  # the same problem under another id
        store.add([*RECORDS, Experience(text="Press the switch twice, the lamp is stubborn.", task_id="lamp-again",
                                        query="light the lamp", metadata={"task_key": task_key(twin)})])
        assert any(same_task(e, lamp) for e in store.retrieve(lamp, 3))  # in training a task's own may come back
        for scored in (lamp, twin):
            found = store.retrieve(scored, 3, exclude_own=True)
            assert not any(same_task(e, scored) for e in found), [e.text for e in found]
        store.close()

    def test_examples_of_a_task_are_its_successes_with_their_turns(self, make_store: Any) -> None:
        store = make_store()
        if not callable(getattr(store, "examples_of", None)):
            store.close()
            pytest.skip("this store does not keep trajectories for prefix sampling (no examples_of)")
        store.add(asyncio.run(store.summarize([winning_trajectory()], step=1)))
        (example,) = store.examples_of(Task(task_id="lamp", query="light the lamp"))
        assert [turn["content"] for turn in example.metadata["turns"]] == ["turn key", "press switch"]
        assert store.examples_of(Task(task_id="ferry", query="cross the river by ferry")) == []
        store.close()

    def test_stats_are_numbers(self, make_store: Any) -> None:
        store = make_store()
        store.add(RECORDS)
        assert all(isinstance(value, (int, float)) for value in store.stats().values())
        store.close()
