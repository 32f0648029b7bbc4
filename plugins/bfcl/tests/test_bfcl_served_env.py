"""The `bfcl` env served from its venv, with the `bfcl` workflow, on BFCL's real entries.

Whole episodes through the env service: a scripted policy (it stands in for a model) that
writes BFCL's ground-truth calls solves multi-turn and single-turn tasks (reward 1); the bad
input of the issue (a malformed call, an unknown function, a backend exception, an episode that
never ends, an unknown task id) gives a clear error or a counted, judged failure; `miss_func`
reveals its held-out function as BFCL does; two episodes of one entry never share a backend;
exploration's state changes become tasks BFCL's checker verifies.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import attrs
import pytest
from beyondagent_plugin_bfcl.config import BFCLWorkflowConfig
from beyondagent_plugin_bfcl.workflow import BFCLWorkflow

from beyondagent_core import EnvSpec, Reward, Task, Turn, hookimpl
from beyondagent_plugin_envservice.client import EnvServiceClient, EnvServiceError
from beyondagent_core.protocols import EnvReset, EnvStep, Message
from beyondagent_core.testing.contracts import EnvContract

# --- the contract suite, through the service ----------------------------------------------------

_LOOP: Any = None


@attrs.define
class ServedConfig:
    url: str = ""
    token: str = ""


class ServedEnv:
    """The sync `Env` protocol over the env service (test plumbing, not a double: the env is real)."""

    def __init__(self, config: ServedConfig):
        self.client = EnvServiceClient(config.url, token=config.token)
        self.remote = self.client.env("bfcl")

    def reset(self, task: Task) -> EnvReset:
        return _LOOP.run(self.remote.reset(task))

    def step(self, action: Message) -> EnvStep:
        return _LOOP.run(self.remote.step(action))

    def evaluate(self) -> Reward:
        return _LOOP.run(self.remote.evaluate())

    def close(self) -> None:
        _LOOP.run(self.remote.close())
        _LOOP.run(self.client.aclose())


class ServedPlugin:
    @hookimpl
    def beyondagent_envs(self) -> list[EnvSpec]:
        return [EnvSpec(name="bfcl_served", factory=ServedEnv, config_cls=ServedConfig,
                        summary="the bfcl env through a launched env service")]


class TestServedBFCLContract(EnvContract):
    @pytest.fixture(autouse=True)
    def _served(self, register_plugin: Any, loop_thread: Any) -> None:
        global _LOOP
        _LOOP = loop_thread
        register_plugin(ServedPlugin(), name="bfcl_served")

    @pytest.fixture
    def implementation(self, server: Any) -> dict[str, Any]:
        return {"name": "bfcl_served", "url": server.url, "token": server.token}

    @pytest.fixture
    def tasks(self) -> list[Task]:
        return [Task(task_id="multi_turn_base_0", env="bfcl"), Task(task_id="simple_python_0", env="bfcl"),
                Task(task_id="multi_turn_long_context_3", env="bfcl")]


# --- whole episodes ------------------------------------------------------------------------------


class ScriptedPolicy:
    """A scripted policy (it stands in for a model): answers each call with the next message."""

    def __init__(self, replies: Sequence[str]):
        self.replies = list(replies)
        self.seen: list[list[dict[str, Any]]] = []

    async def chat(self, messages: Sequence[Message], **sampling: Any) -> Turn:
        self.seen.append([dict(m) for m in messages])
        return Turn(role="assistant", content=self.replies.pop(0) if self.replies else "Done.")


def call(name: str, **arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


# multi_turn_base_0's ground truth, turn by turn (BFCL_v4_multi_turn_base.json / possible_answer)
BASE_0 = [
    [call("cd", folder="document") + "\n" + call("mkdir", dir_name="temp") + "\n"
     + call("mv", source="final_report.pdf", destination="temp"), "Done."],
    [call("cd", folder="temp") + "\n" + call("grep", file_name="final_report.pdf", pattern="budget analysis"),
     "Found it."],
    [call("sort", file_name="final_report.pdf"), "Sorted."],
    [call("cd", folder="..") + "\n" + call("mv", source="previous_report.pdf", destination="temp") + "\n"
     + call("cd", folder="temp") + "\n"
     + call("diff", file_name1="final_report.pdf", file_name2="previous_report.pdf"), "That is the diff."],
]


async def run_episode(server: Any, task: Task, replies: Sequence[str], *, max_turns: int = 30) -> Any:
    client = EnvServiceClient(server.url, token=server.token)
    try:
        async with client.env("bfcl") as env:
            policy = ScriptedPolicy(replies)
            trajectory = await BFCLWorkflow(BFCLWorkflowConfig(max_turns=max_turns)).run(task, env, policy)
            return trajectory, policy
    finally:
        await client.aclose()


def episode(server: Any, task_id: str, replies: Sequence[str], **kwargs: Any) -> Any:
    return asyncio.run(run_episode(server, Task(task_id=task_id, env="bfcl"), replies, **kwargs))


def test_ground_truth_calls_solve_a_multi_turn_task(server: Any) -> None:
    trajectory, policy = episode(server, "multi_turn_base_0", [reply for turn in BASE_0 for reply in turn])
    reward = trajectory.reward
    assert trajectory.terminated and reward.success and reward.score == 1.0, reward.reason
    assert reward.details["official"] and reward.details["category"] == "multi_turn_base"
    assert trajectory.metrics["calls"] == 10 and trajectory.metrics["malformed_calls"] == 0
    assert trajectory.metrics["user_turns"] == 4
    system = policy.seen[0][0]
    assert system["role"] == "system" and "<tools>" in system["content"] and '"name": "mkdir"' in system["content"]
    observations = [turn.content for turn in trajectory.turns if turn.role == "user"]
    assert "<tool_response>" in observations[1] and "budget analysis" in observations[3]
    assert "Perform a detailed search using grep" in observations[2]  # the next user turn, after "Done."


def test_one_wrong_call_fails_with_bfcls_reason(server: Any) -> None:
    replies = [reply for turn in BASE_0 for reply in turn]
    replies[0] = replies[0].replace('"temp"}', '"tmp"}', 1)  # mkdir(dir_name='tmp')
    trajectory, _ = episode(server, "multi_turn_base_0", replies)
    reward = trajectory.reward
    assert not reward.success and reward.score == 0.0
    assert reward.details["error_type"] == "multi_turn:instance_state_mismatch", reward.reason


@pytest.fixture(scope="module")
def turns_server(bfcl_venv: Any) -> Any:
    """A second server whose env gives multi-turn partial credit (`reward: turns`)."""
    from beyondagent_plugin_bfcl import SERVE_ARGS

    from beyondagent_plugin_envservice.launch import LaunchedServer

    launched = LaunchedServer.start("bfcl", {"reward": "turns"}, args=list(SERVE_ARGS),
                                    python=str(bfcl_venv.python), timeout=180)
    yield launched
    launched.stop()


def test_partial_credit_is_separate_from_the_official_verdict(turns_server: Any) -> None:
    replies = [reply for turn in BASE_0[:2] for reply in turn] + [call("sort", file_name="nope.pdf"), "Done."]
    replies += BASE_0[3]
    trajectory, _ = episode(turns_server, "multi_turn_base_0", replies)
    reward = trajectory.reward
    assert not reward.success and reward.details["official"] is False
    assert reward.score == pytest.approx(0.5) and reward.details["partial"] == pytest.approx(0.5)
    solved, _ = episode(turns_server, "multi_turn_base_0", [reply for turn in BASE_0 for reply in turn])
    assert solved.reward.success and solved.reward.score == 1.0


def test_malformed_calls_are_counted_and_judged_not_raised(server: Any) -> None:
    broken = '<tool_call>\n{"name": "cd", "arguments": {"folder": "document"}\n</tool_call>'  # a brace short
    trajectory, _ = episode(server, "multi_turn_base_0", [broken, "Done.", "Done.", "Done."])
    reward = trajectory.reward
    assert trajectory.error is None and not reward.success and reward.score == 0.0
    assert trajectory.metrics["malformed_calls"] == 1 and reward.details["malformed_calls"] == 1
    assert reward.details["error_type"] == "multi_turn:empty_turn_model_response"  # BFCL: the turn made no call


def test_unknown_functions_and_backend_errors_are_observations(server: Any) -> None:
    replies = [call("rm_everything", path="/") + "\n" + call("open", file="/etc/passwd") + "\n"
               + call("cd", folder="no_such_folder") + "\n" + call("mkdir", dir_name=["not", "a", "string"]),
               "Done."]
    trajectory, _ = episode(server, "multi_turn_base_0", replies)
    observation = [turn.content for turn in trajectory.turns if turn.role == "user"][1]
    assert "Error during execution: name 'rm_everything' is not defined" in observation
    assert "Error during execution: name 'unknown_function_" in observation  # `open` never reaches a builtin
    assert "No such directory" in observation or "error" in observation.lower()
    assert trajectory.metrics["call_errors"] >= 2 and trajectory.error is None
    assert not trajectory.reward.success


def test_an_episode_that_never_ends_its_turn_is_force_quit_as_in_bfcl(server: Any) -> None:
    trajectory, _ = episode(server, "multi_turn_base_0", [call("ls")] * 40, max_turns=40)
    assert trajectory.terminated and trajectory.metrics["turns"] == 21  # BFCL: more than 20 steps in a turn
    assert trajectory.reward.details["error_type"] == "multi_turn:force_terminated"
    assert not trajectory.reward.success


def test_an_episode_cut_by_the_workflow_is_a_judged_failure(server: Any) -> None:
    trajectory, _ = episode(server, "multi_turn_base_0", BASE_0[0], max_turns=2)
    assert not trajectory.terminated and trajectory.metrics["turns"] == 2
    assert trajectory.reward.details["error_type"] == "multi_turn:force_terminated"


def test_miss_func_reveals_the_held_out_function_as_bfcl_does(server: Any) -> None:
    # multi_turn_miss_func_0 holds `sort` out until turn 3, which has no user message of its own
    trajectory, policy = episode(server, "multi_turn_miss_func_0", ["Done."] * 5)
    assert '"name": "sort"' not in policy.seen[0][0]["content"]
    revealed = [turn.content for turn in trajectory.turns if turn.role == "user" and "'name': 'sort'" in turn.content]
    assert revealed and "I have updated some more functions you can choose from" in revealed[0]


def test_a_single_turn_task_is_judged_by_bfcls_ast_checker(server: Any) -> None:
    right, _ = episode(server, "simple_python_0", [call("calculate_triangle_area", base=10, height=5)])
    assert right.reward.success and right.reward.score == 1.0, right.reward.reason
    wrong, _ = episode(server, "simple_python_0", [call("calculate_triangle_area", base=10, height=6)])
    assert not wrong.reward.success and wrong.reward.details["error_type"].startswith("value_error")
    none, _ = episode(server, "irrelevance_0", ["No function fits this question."])
    assert none.reward.success


def test_an_unknown_task_id_is_a_clear_error(server: Any) -> None:
    with pytest.raises(EnvServiceError) as error:
        episode(server, "multi_turn_base_999", ["Done."])
    assert "multi_turn_base_999" in error.value.message and "200 tasks" in error.value.message
    with pytest.raises(EnvServiceError) as typo:
        episode(server, "multi_turn_bse_1", ["Done."])
    assert "did you mean a 'multi_turn_base' task" in typo.value.message


def test_two_episodes_of_one_entry_never_share_a_backend(server: Any) -> None:
    async def both() -> list[Any]:
        client = EnvServiceClient(server.url, token=server.token)
        try:
            async with client.env("bfcl") as first, client.env("bfcl") as second:
                task = Task(task_id="multi_turn_base_0", env="bfcl")
                await first.reset(task)
                await second.reset(task)
                await first.step({"role": "assistant", "content": call("mkdir", dir_name="only_in_first")})
                seen = await second.step({"role": "assistant", "content": call("ls")})
                mine = await first.step({"role": "assistant", "content": call("ls")})
                return [seen, mine]
        finally:
            await client.aclose()

    second, first = asyncio.run(both())
    assert "only_in_first" in first.observation[0]["content"]
    assert "only_in_first" not in second.observation[0]["content"]


def test_exploration_leaves_tasks_bfcls_checker_verifies(server: Any) -> None:
    async def explore_then_solve() -> tuple[list[str], list[dict[str, Any]], Any, Any]:
        client = EnvServiceClient(server.url, token=server.token)
        try:
            async with client.env("bfcl") as env:
                await env.reset(Task(task_id="multi_turn_base_0", env="bfcl"))
                actions = await env.call("valid_actions")
                await env.step({"role": "assistant", "content": call("cd", folder="document")})
                await env.step({"role": "assistant", "content": call("mkdir", dir_name="explored")})
                goals = await env.call("describe_achieved")
            goal = goals[-1]
            task = Task(task_id="bfcl-syn-1", env="bfcl", query=goal["query"], origin="synthetic",
                        seed_task_id="multi_turn_base_0", metadata={"goal": goal["goal"]})
            solved, _ = await run_episode(server, task, [call("cd", folder="document") + "\n"
                                                         + call("mkdir", dir_name="explored"), "Done."])
            missed, _ = await run_episode(server, task, [call("cd", folder="document"), "Done."])
            return actions, goals, solved, missed
        finally:
            await client.aclose()

    actions, goals, solved, missed = asyncio.run(explore_then_solve())
    assert any('"ls"' in action for action in actions) and any('"cd"' in action for action in actions)
    assert goals and goals[-1]["goal"]["calls"] == ["cd(folder='document')", "mkdir(dir_name='explored')"]
    assert solved.reward.success, solved.reward.reason
    assert not missed.reward.success and missed.reward.details["error_type"] == "multi_turn:instance_state_mismatch"
