"""The `experience` block's documented defaults, its bounds exactly at and one past each limit, and the
worked example's cuts (`observation_chars`, an action's 200 characters) at their limits.

- The defaults in docs/self-evolve.md's two `experience` YAML blocks are the ones `ExperienceBlock`,
  `ExperienceStoreConfig` and `EmbeddingConfig` have (a wrong default in either is caught);
- each bounded key accepts its limit and refuses the value one step past it, naming the key;
- a worked example keeps an observation of exactly `observation_chars` whole and cuts one character
  more (marked " ..."); `observation_chars: 0` keeps the actions only; an action is cut at 200.

Real store on a sqlite file; no LLM.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import attrs
import pytest
import yaml
from beyondagent_plugin_experience.config import EmbeddingConfig, ExperienceStoreConfig
from beyondagent_plugin_experience.store import SqliteExperienceStore

from beyondagent_core.checks import FieldRangeError
from beyondagent_core.experience import ExperienceBlock
from beyondagent_core.types import Reward, Task, Trajectory, Turn

pytestmark = pytest.mark.beyondagent_plugins("experience")

DOC = Path(__file__).resolve().parents[3] / "docs" / "self-evolve.md"


def documented_blocks() -> list[dict]:
    """The YAML blocks of the doc's experience section that start with `experience:`."""
    section = DOC.read_text().split("## Experience (self-navigating)", 1)[1]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)
    return [yaml.safe_load(text)["experience"] for text in blocks if text.startswith("experience:")]


def test_the_documented_defaults_are_the_code_defaults() -> None:
    keys, embedding = documented_blocks()[:2]
    code = {**attrs.asdict(ExperienceBlock()), **attrs.asdict(ExperienceStoreConfig())}
    assert {key: value for key, value in keys.items() if key != "name"} == \
           {key: value for key, value in code.items() if key in keys and key != "name"}
    assert set(keys) - {"name"} == set(code) - {"name"}  # every key documented
    documented = {key: value for key, value in embedding["embedding"].items() if key != "model"}
    assert documented == {key: value for key, value in attrs.asdict(EmbeddingConfig(model="m")).items()
                          if key != "model"}


@pytest.mark.parametrize(("make", "key", "accepted", "refused"), [
    (ExperienceBlock, "k", [1, 64], [0, 65]),
    (ExperienceBlock, "ratio", [0.0, 1.0], [-0.01, 1.01]),
    (ExperienceBlock, "summarize_every", [1], [0]),
    (ExperienceBlock, "off_clip_high", [0.01], [0.0]),
    (ExperienceBlock, "dual_clip", [1.01], [1.0]),
    (ExperienceBlock, "prefix_fraction", [0.01, 1.0], [0.0, 1.01]),
    (ExperienceStoreConfig, "max_chars", [50], [49]),
    (ExperienceStoreConfig, "max_per_task", [1], [0]),
    (ExperienceStoreConfig, "observation_chars", [0], [-1]),
])
def test_each_bound_takes_its_limit_and_refuses_one_step_past(make, key: str, accepted: list, refused: list) -> None:
    for value in accepted:
        assert getattr(make(**{key: value}), key) == value
    for value in refused:
        with pytest.raises(FieldRangeError) as caught:
            make(**{key: value})
        assert caught.value.field == key, value


@pytest.mark.parametrize(("key", "accepted", "refused"), [
    ("min_similarity", [-1.0, 1.0], [-1.01, 1.01]),
    ("dedup_similarity", [0.01, 1.0], [0.0, 1.01]),
    ("batch_size", [1], [0]),
])
def test_each_embedding_bound_takes_its_limit_and_names_the_key_in_its_block(key: str, accepted: list,
                                                                            refused: list) -> None:
    for value in accepted:
        assert getattr(EmbeddingConfig(model="m", **{key: value}), key) == value
    for value in refused:
        with pytest.raises(FieldRangeError) as caught:
            EmbeddingConfig(model="m", **{key: value})
        assert caught.value.field == f"embedding.{key}", value


def test_prefix_ratio_is_refused_with_mode_all_and_taken_with_the_others() -> None:
    with pytest.raises(FieldRangeError, match="must be 0 with experience.mode all") as caught:
        ExperienceBlock(mode="all", prefix_ratio=0.25)
    assert caught.value.field == "prefix_ratio"
    assert ExperienceBlock(mode="all", prefix_ratio=0.0).mode == "all"
    assert ExperienceBlock(mode="woexp", prefix_ratio=1.0).prefix_ratio == 1.0


@pytest.mark.parametrize(("key", "value"), [("mode", "some"), ("training", "mixed"), ("val_mode", "mixed")])
def test_a_mode_outside_its_choices_is_refused_naming_them(key: str, value: str) -> None:
    with pytest.raises(FieldRangeError, match="must be one of") as caught:
        ExperienceBlock(**{key: value})
    assert caught.value.field == key


# --- a worked example's cuts -------------------------------------------------------------------


def solved(observation: str, action: str = "north") -> Trajectory:
    task = Task(task_id="walk-0", query="walk to the exit")
    turns = [Turn("system", "You walk a maze."), Turn("user", observation), Turn("assistant", action, token_ids=[1]),
             Turn("user", "done")]
    return Trajectory(task=task, turns=turns, reward=Reward(score=1.0, success=True))


def example_lines(tmp_path: Path, trajectory: Trajectory, **config) -> list[str]:
    store = SqliteExperienceStore(ExperienceStoreConfig(summarizer="trajectory", **config),
                                  path=tmp_path / "x.sqlite")
    (example,) = asyncio.run(store.summarize([trajectory], step=1))
    store.close()
    return example.text.splitlines()[1:]


@pytest.mark.parametrize(("length", "shown"), [(40, "o" * 40), (41, "o" * 40 + " ..."), (39, "o" * 39)])
def test_an_observation_of_exactly_observation_chars_is_kept_whole(tmp_path: Path, length: int, shown: str) -> None:
    assert example_lines(tmp_path, solved("o" * length), observation_chars=40) == [f"Observation 1: {shown}",
                                                                                    "Action 1: north"]


def test_observation_chars_zero_keeps_the_actions_only_and_the_default_is_300(tmp_path: Path) -> None:
    assert example_lines(tmp_path, solved("o" * 300)) == [f"Observation 1: {'o' * 300}", "Action 1: north"]
    assert example_lines(tmp_path, solved("o" * 301))[0] == f"Observation 1: {'o' * 300} ..."
    assert example_lines(tmp_path, solved("o" * 30), observation_chars=0) == ["Action 1: north"]


@pytest.mark.parametrize("summarizer", ["trajectory", "hindsight"])
def test_an_action_is_cut_at_200_characters(tmp_path: Path, summarizer: str) -> None:
    store = SqliteExperienceStore(ExperienceStoreConfig(summarizer=summarizer), path=tmp_path / "x.sqlite")
    whole, cut = "a" * 200, "b" * 201
    made = asyncio.run(store.summarize([solved("start", whole),
                                        attrs.evolve(solved("start", cut), task=Task(task_id="walk-1"))], step=1))
    store.close()
    assert whole in made[0].text
    assert "b" * 200 in made[1].text and "b" * 201 not in made[1].text
