"""What an explorer or workflow returns is checked, and a wrong return names the component.

A third party's explorer that counts `achieved` steps from 0 used to make `beyondagent explore`
exit 0 with "summarizer: malformed N" and no tasks; it now fails the exploration with an error
naming the explorer, its plugin and the rule. The made-up plugins are real distributions on
PYTHONPATH (conftest's `make_dist`), run through the real CLI on gymnasium's FrozenLake.
"""

from __future__ import annotations

import pytest

from beyondagent_core.returns import ReturnError, check_exploration, check_trajectory
from beyondagent_core.types import Reward, Task, Trajectory, Turn

pytest.importorskip("beyondagent_plugin_gym")

EXPLORER = """
    import attrs
    from beyondagent_core import ExplorerSpec, hookimpl
    from beyondagent_core.types import Trajectory, Turn

    @attrs.define
    class WalkConfig:
        first_step: int = 0     # the bug under test: steps counted from 0
        as_dict: bool = False   # another bug: a dict instead of a Trajectory

    class Walk:
        def __init__(self, config):
            self.config = config

        async def explore(self, seed, env, llm):
            reset = await env.reset(seed)
            turns = [Turn(m["role"], m["content"]) for m in reset.messages]
            achieved = []
            for number in range(3):
                action = (await env.call("valid_actions"))[0]
                step = await env.step({"role": "assistant", "content": action})
                turns += [Turn("assistant", action)] + [Turn(m["role"], m["content"]) for m in step.observation]
                achieved.append({"step": number + self.config.first_step,
                                 "goals": await env.call("describe_achieved")})
                if step.terminated:
                    break
            if self.config.as_dict:
                return {"task": seed, "turns": turns}
            return Trajectory(task=seed, turns=turns, metrics={"achieved": achieved})

    @hookimpl
    def beyondagent_explorers():
        return [ExplorerSpec(name="walk", factory=Walk, config_cls=WalkConfig)]
"""

SPEC = """
run: {name: walk, output_dir: runs}
tasks:
  train: {name: gym_tasks, env: frozenlake, split: train, count: 2, size: 3}
env: {name: frozenlake, max_steps: 8}
explore:
  name: walk
  n: 1
  summarizer: {name: hindsight}
backend: {name: export}
"""
PLUGINS = {"BEYONDAGENT_PLUGINS": "gym,mixers,synthesis,walker"}


@pytest.fixture
def walker(make_dist, tmp_path):
    make_dist("beyondagent-plugin-walker", "walker", "walker_plugin", EXPLORER, version="0.3.0")
    (tmp_path / "spec.yaml").write_text(SPEC)


def test_steps_counted_from_zero_fail_the_exploration_naming_the_explorer(cli, walker) -> None:
    result = cli("explore", "spec.yaml", env=PLUGINS)
    assert result.code == 1, result.text
    assert "summarizer: malformed" not in result.out
    assert "explorer 'walk' from beyondagent-plugin-walker 0.3.0" in result.err
    assert "metrics['achieved'][0] with step 0" in result.err and "from 1" in result.err


def test_counted_from_one_the_same_explorer_makes_tasks(cli, walker) -> None:
    result = cli("explore", "spec.yaml", "explore.first_step=1", env=PLUGINS)
    assert result.code == 0, result.text
    kept = next(line for line in result.out.splitlines() if "kept (synthetic tasks" in line)
    assert int(kept.split()[-2]) > 0


def test_an_explorer_returning_a_dict_is_named_with_the_expected_type(cli, walker) -> None:
    result = cli("explore", "spec.yaml", "explore.as_dict=true", env=PLUGINS)
    assert result.code == 1, result.text
    assert "explorer 'walk' from beyondagent-plugin-walker 0.3.0" in result.err
    assert "explore() returned dict" in result.err and "expected a Trajectory" in result.err


SEED = Task(task_id="t")


def walked(*achieved, actions: int = 2) -> Trajectory:
    turns = [Turn("user", "start")] + [Turn("assistant", f"move {i}") for i in range(actions)]
    return Trajectory(task=SEED, turns=turns, metrics={"achieved": list(achieved)})


@pytest.mark.parametrize(("achieved", "problem"), [
    ([{"step": 0, "goals": []}], "with step 0; steps count the actions taken from 1"),
    ([{"step": 3, "goals": []}], "with step 3; steps count the actions taken from 1 (the entry after the first "
                                 "action is step 1) up to 2"),
    ([{"step": True, "goals": []}], "expected {'step': int, 'goals': list}"),
    ([{"step": 1, "goals": {"query": "x"}}], "expected {'step': int, 'goals': list}"),
    ([{"step": 1, "goals": [{"query": "", "goal": 1}]}], "['goals'][0] = {'query': '', 'goal': 1}; expected"),
    ([{"step": 1, "goals": [{"query": "reach it", "goal": {1, 2}}]}], "['goal'] = {1, 2} is not JSON"),
])
def test_a_malformed_achieved_entry_is_named(achieved, problem) -> None:
    with pytest.raises(ReturnError) as error:
        check_exploration(walked(*achieved), who="explore (explorer 'x')")
    assert str(error.value).startswith("explore (explorer 'x'): explore() returned metrics['achieved']")
    assert problem in str(error.value)


def test_a_well_formed_exploration_passes() -> None:
    trajectory = walked({"step": 1, "goals": []}, {"step": 2, "goals": [{"query": "reach 2", "goal": {"cell": 2}}]})
    assert check_exploration(trajectory, who="x") is trajectory
    assert check_exploration(Trajectory(task=SEED), who="x").metrics == {}  # no `achieved`: nothing to check


@pytest.mark.parametrize(("value", "problem"), [
    ({"turns": []}, "run() returned dict {'turns': []}; expected a Trajectory"),
    (Trajectory(task="t"), "whose task is str; expected the Task it ran"),
    (Trajectory(task=SEED, turns=({"role": "user", "content": "hi"},)), "turns are a tuple; expected a list of Turn"),
    (Trajectory(task=SEED, turns=[{"role": "user", "content": "hi"}]),
     "turns[0] = {'role': 'user', 'content': 'hi'} (dict); expected a Turn"),
    (Trajectory(task=SEED, turns=[Turn("assistant", None)]), "content of type NoneType; expected str for both"),
    (Trajectory(task=SEED, reward=1.0), "whose reward is float; expected a Reward or None"),
    (Trajectory(task=SEED, reward=Reward(1.0), metrics=[]), "whose metrics are a list; expected a dict"),
])
def test_a_wrong_trajectory_names_the_expected_type(value, problem) -> None:
    with pytest.raises(ReturnError) as error:
        check_trajectory(value, who="workflow 'w'", method="run")
    assert str(error.value).startswith("workflow 'w': run() returned")
    assert problem in str(error.value)
