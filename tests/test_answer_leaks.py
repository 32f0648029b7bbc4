"""The leakage canary: a synthetic task's reference answer or rubric never reaches the policy's prompt
(beyondagent_core/runtime/answer_leaks.py; the `agent` workflow's gateway path is tested with the tiny
model in plugins/torch/tests/test_agent_workflow.py).

The LLM here is a recorder standing in for the policy: what is checked is what the workflow sends
it, so no model is needed to answer. The workflows are real (`math_cot`, and a workflow with the
bug the guard exists for: it renders the task's reference into its system prompt).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from beyondagent_plugin_math.config import MathCotConfig
from beyondagent_plugin_math.cot import MathCotWorkflow
from beyondagent_plugin_math.judges import MathAnswerJudge

from beyondagent_core.advantages import failure_of
from beyondagent_core.runtime.answer_leaks import MIN_CHARS, answer_material
from beyondagent_core.runtime.episodes import EpisodeRunner
from beyondagent_core.types import Reward, Task, Trajectory, Turn

CANARY = "canary-7f3a reference 4217"  # a reference no honest prompt would hold


class RecordingPolicy:
    """Stands in for the policy model: records each prompt, answers a fixed reply."""

    def __init__(self) -> None:
        self.prompts: list[list[dict[str, Any]]] = []

    async def chat(self, messages: Any, **sampling: Any) -> Turn:
        self.prompts.append([dict(m) if isinstance(m, dict) else {"role": m.role, "content": m.content}
                             for m in messages])
        return Turn(role="assistant", content="\\boxed{4217}")


class RendersTheReference:
    """A workflow with the bug: it shows the model the task's reference with the task."""

    async def run(self, task: Task, env: Any, llm: Any) -> Trajectory:
        messages = [{"role": "system", "content": "Solve it."},
                    {"role": "user", "content": f"{task.query} (Grader's answer: {task.ground_truth})"}]
        return Trajectory(task=task, turns=[await llm.chat(messages)], reward=Reward(1.0, success=True))


class InstructsWithAnAction:
    """Fixed instructions that name an action a reference may start with (as AppWorld's do)."""

    async def run(self, task: Task, env: Any, llm: Any) -> Trajectory:
        messages = [{"role": "system", "content": "Start with print(apis.api_docs.show_app_descriptions())."},
                    {"role": "user", "content": task.query}]
        turns = [await llm.chat(messages)]
        messages += [{"role": "assistant", "content": "x"},
                     {"role": "user", "content": "Traceback: print(apis.api_docs.show_app_descriptions())"}]
        turns.append(await llm.chat(messages))  # a later observation echoing code: the env's answer, not a leak
        return Trajectory(task=task, turns=turns, reward=Reward(1.0, success=True))


class ReplaysItsOwnActions:
    """Earlier assistant turns that hold the reference: a prefix replayed from a stored success."""

    async def run(self, task: Task, env: Any, llm: Any) -> Trajectory:
        messages = [{"role": "user", "content": task.query},
                    {"role": "assistant", "content": str(task.ground_truth)},
                    {"role": "user", "content": "Go on."}]
        return Trajectory(task=task, turns=[await llm.chat(messages)], reward=Reward(1.0, success=True))


def synthetic(query: str, ground_truth: Any = f"4217 ({CANARY})", **metadata: Any) -> Task:
    return Task(task_id="synthetic/1", query=query, ground_truth=ground_truth, origin="synthetic",
                seed_task_id="math/7", metadata=metadata)


def run(workflow: Any, task: Task) -> tuple[Trajectory, RecordingPolicy]:
    policy = RecordingPolicy()
    trajectory = asyncio.run(EpisodeRunner(workflow, make_env=None, judge=MathAnswerJudge()).run(task, policy))
    return trajectory, policy


def test_only_a_synthetic_tasks_distinctive_reference_and_rubric_are_guarded() -> None:
    assert answer_material(Task(task_id="o", query="q", ground_truth=CANARY)) == ()  # an original task's
    # moves and numbers are honest words; only the list as a workflow would render it is guarded
    assert answer_material(synthetic("q", ground_truth=["left", "down", 3])) == ('["left", "down", 3]',)
    assert answer_material(synthetic("q", ground_truth="x" * (MIN_CHARS - 1))) == ()
    code = ["apis.spotify.login(username='ann')", "apis.spotify.like_song(song_id=7)"]
    assert answer_material(synthetic("q", ground_truth=code))[:2] == ("apis.spotify.login(username='ann')",
                                                                       "apis.spotify.like_song(song_id=7)")
    assert "full marks only when the boxed answer is 4217" in answer_material(
        synthetic("q", rubric="Full marks only when   the boxed answer is 4217"))


def test_an_honest_workflow_never_shows_the_reference() -> None:
    trajectory, policy = run(MathCotWorkflow(MathCotConfig()), synthetic("What is 4000 + 217?"))
    assert trajectory.error is None and len(policy.prompts) == 1
    assert not any(CANARY in m["content"] for m in policy.prompts[0])


@pytest.mark.parametrize(("workflow", "query"), [
    (MathCotWorkflow(MathCotConfig()), f"What is 4000 + 217? The answer:  4217 ({CANARY.upper()})."),  # a summarizer's leak
    (RendersTheReference(), "What is 4000 + 217?"),  # a workflow's
])
def test_a_leaking_prompt_is_an_episode_error_the_model_never_sees(workflow: Any, query: str) -> None:
    trajectory, policy = run(workflow, synthetic(query))
    assert policy.prompts == []  # refused before the model was asked
    assert trajectory.error.startswith("AnswerLeak: the prompt of synthetic task synthetic/1 holds its reference")
    assert failure_of(trajectory) == "error"  # left out of its group, counted in advantage/dropped_error


def test_fixed_instructions_and_later_observations_are_not_leaks() -> None:
    task = synthetic("List my apps.", ground_truth=["print(apis.api_docs.show_app_descriptions())", "done()"])
    trajectory, policy = run(InstructsWithAnAction(), task)
    assert trajectory.error is None and len(policy.prompts) == 2


def test_the_policys_own_turns_may_hold_it_and_original_tasks_are_not_checked() -> None:
    trajectory, _ = run(ReplaysItsOwnActions(), synthetic("Solve the puzzle."))
    assert trajectory.error is None
    original = Task(task_id="o", query=f"Copy this: {CANARY}", ground_truth=CANARY)
    trajectory, policy = run(MathCotWorkflow(MathCotConfig()), original)
    assert trajectory.error is None and policy.prompts
