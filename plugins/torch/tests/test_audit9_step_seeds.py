"""Each training step samples its episodes with seeds of its own, and the same step samples the same
episodes again (ninth mutation audit; trainer.py's `generate`: `episode_seed(run seed, "train", step,
index)`).

A seed that left out the step would make every step replay the first step's random draws (the same
sampled moves while the policy barely changed: far less exploration), and one that depended on
anything but (run seed, step, episode) would make a resumed run sample other episodes than the
killed one. On a real Trainer the pipeline builds for the shrunk quickstart (tiny model, FrozenLake,
temperature 1), step 1's generation batch run twice is token for token the same, and step 2's
differs from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_torch_keys_reach import trainers


@pytest.fixture(scope="module")
def trainer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with trainers(tmp_path_factory.mktemp("seeds")) as build:
        yield build("seeds", "backend.max_new_tokens=8", "backend.temperature=1.0", "backend.report=false",
                    "backend.tensorboard=false")


def sampled(trainer: Any, step: int) -> list[list[int]]:
    """The model's tokens of each episode of step `step`'s first generation batch (the same tasks each time)."""
    tasks = trainer.data.epoch_tasks(0)[:1]
    episodes = trainer.generate(step, tasks, 1, first_group=0)
    assert episodes and all(episode.trajectory.error is None for episode in episodes)
    return [[token for token, trained in zip(sample.input_ids, sample.loss_mask) if trained]
            for episode in episodes for sample in episode.samples]


def test_a_step_samples_the_same_episodes_again_and_the_next_step_other_ones(trainer: Any) -> None:
    first = sampled(trainer, 1)
    assert all(first)
    assert sampled(trainer, 1) == first  # what a resumed run replays
    assert sampled(trainer, 2) != first  # a step of its own draws
    assert sampled(trainer, 3) not in (first, sampled(trainer, 2))


def test_the_run_seed_reaches_the_steps_draws(tmp_path: Path) -> None:
    with trainers(tmp_path) as build:
        other = build("other-seed", "run.seed=1", "backend.max_new_tokens=8", "backend.temperature=1.0",
                      "backend.report=false", "backend.tensorboard=false")
        same = build("same-seed", "backend.max_new_tokens=8", "backend.temperature=1.0",
                     "backend.report=false", "backend.tensorboard=false")
        assert sampled(other, 1) != sampled(same, 1)
