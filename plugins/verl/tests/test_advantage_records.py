"""The per-episode record an advantage estimator reads in verl's trainer (advantage_records.py).

What the agent loop writes must give the estimator exactly the episode the torch backend would
give it (`beyondagent_core.advantages.scored_episode`), and the answer must be cut to verl's
response tokens exactly. Real estimators (beyondagent-plugin-advantages) on both views.
"""

from __future__ import annotations

import numpy as np
import pytest
from beyondagent_plugin_advantages.gigpo import Gigpo
from beyondagent_plugin_advantages.grpo import Grpo
from beyondagent_core.advantage_records import advantage_record, response_advantages, scored_from_record

from beyondagent_core.advantages import AdvantageBatch, scored_episode
from beyondagent_core.types import Reward, Task, Trajectory, Turn

# prompt: tokens 0..9; model turn 1: 10..12; observation 13..17; model turn 2: 18..19
SPANS = [(10, 13), (18, 20)]


def episode(seed: int, score: float, second_action: str) -> Trajectory:
    task = Task(task_id=f"lake-{seed}", env="frozenlake", query="reach G", ground_truth=None, metadata={"seed": seed})
    turns = [Turn(role="system", content="rules"), Turn(role="user", content="P.\n.G"),
             Turn(role="assistant", content="Action: right", token_ids=[1, 2, 3]),
             Turn(role="user", content=".P\n.G"),
             Turn(role="assistant", content=second_action, token_ids=[4, 5])]
    return Trajectory(task=task, turns=turns, reward=Reward(score=score, success=score > 0))


def test_the_record_gives_the_estimator_the_episode_the_torch_backend_would() -> None:
    trajectory = episode(3, 1.0, "Action: down")
    record = advantage_record(trajectory, SPANS, prompt_length=10, response_length=10)
    assert record["length"] == 20 and record["prompt_length"] == 10
    assert scored_from_record(record, "uid-1") == scored_episode("uid-1", trajectory, SPANS, 20)


def test_spans_past_the_response_verl_kept_are_cut() -> None:
    record = advantage_record(episode(3, 0.0, "x"), SPANS, prompt_length=10, response_length=5)
    assert [step[:2] for step in record["steps"]] == [[10, 13]]
    record = advantage_record(episode(3, 0.0, "x"), SPANS, prompt_length=10, response_length=9)
    assert [step[:2] for step in record["steps"]] == [[10, 13], [18, 19]]


@pytest.mark.parametrize("estimator", [Grpo, Gigpo])
def test_an_estimator_answers_the_same_on_records_and_the_answer_is_cut_to_the_response(estimator) -> None:
    trajectories = [episode(1, 1.0, "Action: down"), episode(1, 0.0, "Action: left"),
                    episode(2, 0.0, "Action: up"), episode(2, 0.5, "Action: down")]
    groups = ["a", "a", "b", "b"]
    records = [advantage_record(t, SPANS, prompt_length=10, response_length=10) for t in trajectories]
    direct = AdvantageBatch(episodes=tuple(scored_episode(g, t, SPANS, 20) for g, t in zip(groups, trajectories)))
    via_records = AdvantageBatch(episodes=tuple(scored_from_record(r, g) for r, g in zip(records, groups)))
    expected, got = estimator().estimate(direct), estimator().estimate(via_records)
    for a, b in zip(expected.per_token, got.per_token):
        np.testing.assert_array_equal(a, b)
    pieces = response_advantages(got.per_token, records, [10] * 4)
    for piece, full in zip(pieces, got.per_token):
        np.testing.assert_array_equal(piece, full[10:20])
        assert piece[3:8].tolist() == [0.0] * 5  # the observation's tokens
    assert any(piece.any() for piece in pieces)
    with pytest.raises(ValueError, match="11 response tokens"):
        response_advantages(got.per_token[:1], records[:1], [11])


def test_a_span_starting_where_verls_response_ends_makes_no_step() -> None:
    # verl kept 10 prompt + 5 response tokens: a model turn starting at token 15 is not in the sample
    record = advantage_record(episode(3, 1.0, "Action: down"), [(10, 13), (15, 18)], prompt_length=10,
                              response_length=5)
    assert [step[:2] for step in record["steps"]] == [[10, 13]]


def test_a_seat_of_a_multi_seat_episode_is_grouped_with_the_same_seats_games() -> None:
    import attrs

    trajectory = attrs.evolve(episode(3, 1.0, "Action: down"), seat=1)
    record = advantage_record(trajectory, SPANS, prompt_length=10, response_length=10)
    assert record["seat"] == 1 and "seat" not in advantage_record(episode(3, 1.0, "x"), SPANS, prompt_length=10,
                                                                  response_length=10)
    scored = scored_from_record(record, "uid-1")
    assert scored == scored_episode(("uid-1", 1), trajectory, SPANS, 20) and scored.seat == 1
