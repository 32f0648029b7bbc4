"""The shared records: JSON round trips, schema versions, and the errors for bad records."""

from __future__ import annotations

import json
from typing import Any

import pytest

from beyondagent_core.types import SCHEMA_VERSION, Reward, Task, Trajectory, Turn, count_by_origin


def through_json(data: dict[str, Any]) -> dict[str, Any]:
    """What a record looks like after a trip through a JSON-lines file."""
    return json.loads(json.dumps(data))


ORIGINAL = Task(
    task_id="gsm8k-7",
    env="math",
    query="What is 6 * 7?",
    ground_truth="42",
    judge="math",
    metadata={"data_source": "openai/gsm8k", "extra_info": {"index": 7, "split": "train"}},
)
SYNTHETIC = Task(
    task_id="syn-gsm8k-7-0",
    env="appworld",
    query="List every song in the playlist 'Road trip'.",
    ground_truth={"action_sequence": ["login()", "list_songs('Road trip')"], "answer": ["a", "b"]},
    origin="synthetic",
    open_query=True,
    seed_task_id="gsm8k-7",
    confidence=0.75,
)


def model_turns() -> list[Turn]:
    return [
        Turn(role="system", content="You are a careful agent."),
        Turn(role="user", content="What is 6 * 7?"),
        Turn(
            role="assistant",
            content="<tool>calc</tool>",
            tool_calls=[{"id": "c1", "type": "function", "function": {"name": "calc", "arguments": "{\"x\": \"6*7\"}"}}],
            token_ids=[151644, 77091, 198, 42, 151645],
            logprobs=[-0.01, -1.5, -0.0, -2.25, -0.125],
        ),
        Turn(role="tool", content="42"),
        Turn(role="assistant", content="42", token_ids=[19, 17], logprobs=[-0.5, -0.25]),
    ]


# --- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("task", [ORIGINAL, SYNTHETIC, Task(task_id="bare")], ids=["original", "synthetic", "bare"])
def test_task_round_trips_through_json(task: Task) -> None:
    data = through_json(task.to_dict())
    assert data["schema_version"] == SCHEMA_VERSION
    assert Task.from_dict(data) == task


def test_task_dict_has_every_field() -> None:
    data = SYNTHETIC.to_dict()
    assert data == {
        "schema_version": SCHEMA_VERSION,
        "task_id": "syn-gsm8k-7-0",
        "env": "appworld",
        "query": "List every song in the playlist 'Road trip'.",
        "ground_truth": {"action_sequence": ["login()", "list_songs('Road trip')"], "answer": ["a", "b"]},
        "judge": None,
        "metadata": {},
        "origin": "synthetic",
        "open_query": True,
        "seed_task_id": "gsm8k-7",
        "confidence": 0.75,
    }


def test_reward_round_trips_through_json() -> None:
    reward = Reward(score=0.5, success=True, reason="answer matches", details={"parsed": "42", "steps": [1, 2]})
    data = through_json(reward.to_dict())
    assert data["schema_version"] == SCHEMA_VERSION
    assert Reward.from_dict(data) == reward


def test_reward_score_is_always_a_float() -> None:
    reward = Reward.from_dict({"score": 1, "success": True})
    assert reward.score == 1.0
    assert isinstance(reward.score, float)


def test_turn_round_trips_through_json_with_exact_tokens_and_logprobs() -> None:
    for turn in model_turns():
        assert Turn.from_dict(through_json(turn.to_dict())) == turn
    generated = Turn.from_dict(through_json(model_turns()[2].to_dict()))
    assert generated.token_ids == [151644, 77091, 198, 42, 151645]
    assert generated.logprobs == [-0.01, -1.5, -0.0, -2.25, -0.125]


def test_trajectory_round_trips_through_json() -> None:
    trajectory = Trajectory(
        task=SYNTHETIC,
        turns=model_turns(),
        reward=Reward(score=1.0, success=True, reason="ok"),
        terminated=True,
        metrics={"steps": 2, "latency_s": 0.25},
    )
    data = through_json(trajectory.to_dict())
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["task"]["schema_version"] == SCHEMA_VERSION
    assert data["reward"]["schema_version"] == SCHEMA_VERSION
    restored = Trajectory.from_dict(data)
    assert restored == trajectory
    assert isinstance(restored.task, Task)
    assert all(isinstance(turn, Turn) for turn in restored.turns)
    assert isinstance(restored.reward, Reward)


def test_failed_trajectory_without_reward_round_trips() -> None:
    trajectory = Trajectory(task=ORIGINAL, error="env step timed out after 30s")
    restored = Trajectory.from_dict(through_json(trajectory.to_dict()))
    assert restored == trajectory
    assert restored.reward is None
    assert restored.turns == []


# --- schema versions -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "record"),
    [
        (Task, {"task_id": "t1"}),
        (Reward, {"score": 0.0}),
        (Trajectory, {"task": {"task_id": "t1"}}),
    ],
)
def test_newer_schema_version_asks_to_upgrade(cls: type, record: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="upgrade") as info:
        cls.from_dict({**record, "schema_version": SCHEMA_VERSION + 1})
    assert str(SCHEMA_VERSION + 1) in str(info.value)


def test_newer_schema_version_of_a_nested_task_is_rejected() -> None:
    data = Trajectory(task=ORIGINAL).to_dict()
    data["task"]["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(ValueError, match="upgrade"):
        Trajectory.from_dict(data)


@pytest.mark.parametrize("version", [0, -1, "1", 1.5, None])
def test_invalid_schema_version_is_rejected(version: Any) -> None:
    with pytest.raises(ValueError, match="schema_version must be a positive integer"):
        Task.from_dict({"task_id": "t1", "schema_version": version})


def test_old_records_without_schema_version_still_load() -> None:
    task = Task.from_dict({"task_id": "old-1", "query": "2+2?", "ground_truth": "4"})
    assert task == Task(task_id="old-1", query="2+2?", ground_truth="4")

    trajectory = Trajectory.from_dict({
        "task": {"task_id": "old-1"},
        "turns": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}],
        "reward": {"score": 1, "success": True},
    })
    assert trajectory.task.task_id == "old-1"
    assert [turn.content for turn in trajectory.turns] == ["2+2?", "4"]
    assert trajectory.reward == Reward(score=1.0, success=True)
    assert trajectory.terminated is False


# --- bad records ---------------------------------------------------------------------------


def test_unknown_field_is_named() -> None:
    with pytest.raises(ValueError, match="unknown field") as info:
        Task.from_dict({"task_id": "t1", "qeury": "typo"})
    assert "qeury" in str(info.value)
    assert "Task" in str(info.value)


def test_unknown_field_in_a_turn_is_named() -> None:
    with pytest.raises(ValueError, match="unknown field.*tokens"):
        Turn.from_dict({"role": "assistant", "content": "hi", "tokens": [1, 2]})


def test_missing_task_id_is_named() -> None:
    with pytest.raises(ValueError, match="missing required field") as info:
        Task.from_dict({"query": "no id"})
    assert "task_id" in str(info.value)


def test_missing_reward_score_is_named() -> None:
    with pytest.raises(ValueError, match="missing required field.*score"):
        Reward.from_dict({"success": True})


@pytest.mark.parametrize("task_id", ["", 17, None])
def test_task_id_must_be_a_non_empty_string(task_id: Any) -> None:
    with pytest.raises(ValueError, match="task_id must be a non-empty string"):
        Task.from_dict({"task_id": task_id})


def test_bad_origin_is_rejected_with_the_allowed_values() -> None:
    with pytest.raises(ValueError, match="origin") as info:
        Task.from_dict({"task_id": "t1", "origin": "generated"})
    message = str(info.value)
    assert "'generated'" in message
    assert "original" in message and "synthetic" in message


def test_bad_origin_is_rejected_on_construction_too() -> None:
    with pytest.raises(ValueError, match="origin"):
        Task(task_id="t1", origin="made-up")  # type: ignore[arg-type]


@pytest.mark.parametrize("record", [["task_id", "t1"], "t1", 3, None])
def test_non_object_record_is_rejected(record: Any) -> None:
    with pytest.raises(ValueError, match="must be a JSON object"):
        Task.from_dict(record)


# --- counting ------------------------------------------------------------------------------


def test_count_by_origin() -> None:
    tasks = [ORIGINAL, SYNTHETIC, Task(task_id="o2"), Task(task_id="s2", origin="synthetic", seed_task_id="o2"),
             Task(task_id="s3", origin="synthetic", seed_task_id="o2")]
    assert count_by_origin(tasks) == {"original": 2, "synthetic": 3}
    assert count_by_origin(tuple(tasks[:1])) == {"original": 1, "synthetic": 0}


def test_count_by_origin_of_nothing_has_both_keys() -> None:
    assert count_by_origin([]) == {"original": 0, "synthetic": 0}
