"""The `appworld` env served from its venv, one worker process per episode, on a generated world.

The env contract suite runs against the served env (through a small synchronous adapter over
the env service client: the env itself cannot be built in this process, which has no
`appworld`). Then whole episodes: a scripted policy that solves each kind of generated task
(reward 1.0), one that answers wrong (a partial reward with the failed check in the details),
three concurrent episodes in three worker processes; and the bounds on the model's code: a cell
that never yields the GIL (`sum(range(10 ** 12))`) ended by the service's call timeout while
`/healthz` answers in < 1 s, a cell that runs too long (`10 ** 10 ** 11`) ended by AppWorld's own
timeout and one that asks for more memory than the worker's cap, both errors the model reads in an
episode that goes on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from appworld_testkit import CALL_TIMEOUT, CODE_TIMEOUT, LoopThread
from beyondagent_plugin_appworld.config import AppWorldReactConfig
from beyondagent_plugin_appworld.workflow import AppWorldReact

from beyondagent_core import EnvSpec, Reward, Task, Turn, hookimpl
from beyondagent_plugin_envservice.client import EnvServiceClient, EnvServiceError
from beyondagent_core.protocols import EnvReset, EnvStep, Message
from beyondagent_core.testing.contracts import EnvContract, TaskSourceContract
from beyondagent_core.testing.health import HealthPoller

# Generated ids: gen0000a_1 most_songs_playlist, gen0001a_1 playlist_count,
# gen0002a_1 add_song_to_playlist, gen0003a_1 venmo_balance (worldgen.KINDS, in order).
MOST_SONGS, PLAYLISTS, ADD_SONG, VENMO = "gen0000a_1", "gen0001a_1", "gen0002a_1", "gen0003a_1"


# --- the contract suite, through the service ----------------------------------------------------

_LOOP: LoopThread | None = None


@attrs.define
class ServedConfig:
    url: str = ""
    token: str = ""


class ServedEnv:
    """The sync `Env` protocol over the env service (test plumbing, not a double: the env is real)."""

    def __init__(self, config: ServedConfig):
        assert _LOOP is not None
        self.loop = _LOOP
        self.client = EnvServiceClient(config.url, token=config.token)
        self.remote = self.client.env("appworld")

    def reset(self, task: Task) -> EnvReset:
        return self.loop.run(self.remote.reset(task))

    def step(self, action: Message) -> EnvStep:
        return self.loop.run(self.remote.step(action))

    def evaluate(self) -> Reward:
        return self.loop.run(self.remote.evaluate())

    def close(self) -> None:
        self.loop.run(self.remote.close())
        self.loop.run(self.client.aclose())


class ServedPlugin:
    @hookimpl
    def beyondagent_envs(self) -> list[EnvSpec]:
        return [EnvSpec(name="appworld_served", factory=ServedEnv, config_cls=ServedConfig,
                        summary="the appworld env through a launched env service")]


class TestServedAppWorldContract(EnvContract):
    @pytest.fixture(autouse=True)
    def _served(self, register_plugin: Any, loop_thread: LoopThread) -> None:
        global _LOOP
        _LOOP = loop_thread
        register_plugin(ServedPlugin(), name="appworld_served")

    @pytest.fixture
    def implementation(self, server: Any) -> dict[str, Any]:
        return {"name": "appworld_served", "url": server.url, "token": server.token}

    @pytest.fixture
    def tasks(self) -> list[Task]:
        return [Task(task_id=MOST_SONGS, env="appworld"), Task(task_id=ADD_SONG, env="appworld")]


@pytest.mark.beyondagent_plugins("appworld")
class TestAppWorldTaskSource(TaskSourceContract):
    @pytest.fixture
    def implementation(self, world_root: Path) -> dict[str, Any]:
        return {"name": "appworld", "root": str(world_root), "split": "train"}


# --- whole episodes ------------------------------------------------------------------------------

class ScriptedPolicy:
    """A scripted policy (it stands in for a model): answers each call with the next message."""

    def __init__(self, replies: Sequence[str]):
        self.replies = list(replies)
        self.seen: list[list[dict[str, Any]]] = []

    async def chat(self, messages: Sequence[Message], **sampling: Any) -> Turn:
        self.seen.append([dict(m) for m in messages])
        return Turn(role="assistant", content=self.replies.pop(0) if self.replies else "I am done.")


def code(text: str) -> str:
    return f"Let me do this step.\n```python\n{text.strip()}\n```"


LOGIN = {
    "spotify": code('''
passwords = {p["account_name"]: p["password"] for p in apis.supervisor.show_account_passwords()}
profile = apis.supervisor.show_profile()
token = apis.spotify.login(username=profile["email"], password=passwords["spotify"])["access_token"]
playlists, page = [], 0
while True:
    batch = apis.spotify.show_playlist_library(access_token=token, page_index=page, page_limit=20)
    if not batch:
        break
    playlists += batch
    page += 1
print(len(playlists))
'''),
    "venmo": code('''
passwords = {p["account_name"]: p["password"] for p in apis.supervisor.show_account_passwords()}
profile = apis.supervisor.show_profile()
token = apis.venmo.login(username=profile["email"], password=passwords["venmo"])["access_token"]
'''),
}
DISCOVER = code('print(apis.api_docs.show_api_descriptions(app_name="spotify"))')

SOLUTIONS = {
    MOST_SONGS: [DISCOVER, LOGIN["spotify"], code('''
sizes = [len(apis.spotify.show_playlist(access_token=token, playlist_id=p["playlist_id"])["songs"])
         for p in playlists]
apis.supervisor.complete_task(answer=max(sizes))
''')],
    PLAYLISTS: [LOGIN["spotify"], code("apis.supervisor.complete_task(answer=len(playlists))")],
    ADD_SONG: [LOGIN["spotify"], code('''
import re
task = apis.supervisor.show_active_task()["instruction"]
song_title, playlist_title = re.findall(r'"([^"]+)"', task)
playlist = next(p for p in playlists if p["title"] == playlist_title)
song = next(s for s in apis.spotify.search_songs(query=song_title, page_limit=20) if s["title"] == song_title)
apis.spotify.add_song_to_playlist(access_token=token, playlist_id=playlist["playlist_id"], song_id=song["song_id"])
apis.supervisor.complete_task()
''')],
    VENMO: [LOGIN["venmo"], code('''
apis.supervisor.complete_task(answer=apis.venmo.show_venmo_balance(access_token=token)["venmo_balance"])
''')],
}


async def run_episode(server: Any, task_id: str, replies: Sequence[str], *, reward: str | None = None) -> Any:
    client = EnvServiceClient(server.url, token=server.token)
    try:
        async with client.env("appworld") as env:
            workflow = AppWorldReact(AppWorldReactConfig(max_turns=6))
            policy = ScriptedPolicy(replies)
            trajectory = await workflow.run(Task(task_id=task_id, env="appworld"), env, policy)
            return trajectory, policy
    finally:
        await client.aclose()


@pytest.mark.parametrize("task_id", [MOST_SONGS, PLAYLISTS, ADD_SONG, VENMO])
def test_a_scripted_policy_solves_each_generated_task(server: Any, task_id: str) -> None:
    trajectory, policy = asyncio.run(run_episode(server, task_id, SOLUTIONS[task_id]))
    reward = trajectory.reward
    assert trajectory.terminated, "complete_task should end the episode"
    assert reward.score == 1.0 and reward.success, reward.reason
    assert reward.details["failed"] == [] and reward.details["passes"] == reward.details["total"] >= 3
    system, first = policy.seen[0][0], policy.seen[0][1]
    assert system["role"] == "system" and "show_api_doc" in system["content"]
    assert first["role"] == "user" and "Task: " in first["content"] and "@" in first["content"]


def test_a_wrong_answer_gets_a_partial_reward_with_the_failed_check(server: Any) -> None:
    replies = [LOGIN["spotify"], code("apis.supervisor.complete_task(answer=len(playlists) + 7)")]
    trajectory, _ = asyncio.run(run_episode(server, PLAYLISTS, replies))
    reward = trajectory.reward
    assert trajectory.terminated and not reward.success
    assert 0.0 < reward.score < 1.0  # completed, nothing else changed, but the answer is wrong
    failed = reward.details["failed"]
    assert [f["requirement"] for f in failed] == ["the answer given to complete_task is the right one"]
    assert "AssertionError" in failed[0]["trace"] and "==" in failed[0]["trace"]
    assert "the answer given to complete_task is the right one" in reward.reason


def test_a_task_left_undone_ends_at_max_turns_with_no_success(server: Any) -> None:
    replies = ["I think I should look around first.", code("print(1 + 1)")] * 3
    trajectory, _ = asyncio.run(run_episode(server, ADD_SONG, replies))
    assert trajectory.metrics["turns"] == 6 and not trajectory.reward.success
    observations = [turn.content for turn in trajectory.turns if turn.role == "user"]
    assert "No code was run" in observations[1] and observations[2].strip() == "2"


def test_three_concurrent_episodes_run_in_three_worker_processes(server: Any) -> None:
    async def episode(task_id: str) -> tuple[int, Reward]:
        client = EnvServiceClient(server.url, token=server.token)
        try:
            async with client.env("appworld") as env:
                reset = await env.reset(Task(task_id=task_id, env="appworld"))
                for reply in SOLUTIONS[task_id]:
                    step = await env.step({"role": "assistant", "content": reply})
                assert step.terminated
                return reset.info["pid"], await env.evaluate()
        finally:
            await client.aclose()

    async def three() -> list[tuple[int, Reward]]:
        return await asyncio.gather(*(episode(task_id) for task_id in (PLAYLISTS, VENMO, MOST_SONGS)))

    results = asyncio.run(three())
    pids = [pid for pid, _ in results]
    assert len(set(pids)) == 3, f"episodes shared a worker process: {pids}"
    assert server.proc.pid not in pids
    assert all(reward.score == 1.0 for _, reward in results), [reward.reason for _, reward in results]


def test_a_cell_that_never_yields_the_gil_costs_one_episode_and_healthz_stays_fast(server: Any) -> None:
    # One C loop that never checks for signals nor yields the GIL (measured: not interrupted in 15 s),
    # so AppWorld's own timeout cannot end it: the service's call timeout kills its worker.
    async def hang_then_work() -> tuple[EnvServiceError, float, Reward, dict[str, Any]]:
        client = EnvServiceClient(server.url, token=server.token)
        try:
            env = client.env("appworld")
            await env.reset(Task(task_id=PLAYLISTS, env="appworld"))
            started = time.monotonic()
            with pytest.raises(EnvServiceError) as hung:
                await env.step({"role": "assistant", "content": code("x = sum(range(10 ** 12))")})
            waited = time.monotonic() - started
            await env.close()
            trajectory, _ = await run_episode(server, PLAYLISTS, SOLUTIONS[PLAYLISTS])
            return hung.value, waited, trajectory.reward, await client.stats()
        finally:
            await client.aclose()

    with HealthPoller(server.url) as poller:
        error, waited, reward, stats = asyncio.run(hang_then_work())
    assert len(poller.latencies) >= 10 and max(poller.latencies) < 1.0, poller.latencies
    assert error.code == "env_timeout" and "call_timeout" in error.message
    assert CALL_TIMEOUT - 1 <= waited < CALL_TIMEOUT + 30
    assert reward.score == 1.0, reward.reason
    assert stats["hung_calls"] >= 1 and stats["instances"] == "process"


def test_a_cell_that_runs_too_long_or_asks_for_too_much_memory_is_an_error_the_model_reads(server: Any) -> None:
    async def episode() -> tuple[list[str], float]:
        client = EnvServiceClient(server.url, token=server.token)
        try:
            async with client.env("appworld") as env:
                await env.reset(Task(task_id=PLAYLISTS, env="appworld"))
                started = time.monotonic()
                # BFCL's power(10, 10**11) as code: CPython's pow checks for signals between its steps
                looped = await env.step({"role": "assistant", "content": code("x = 10 ** 10 ** 11")})
                took = time.monotonic() - started
                # past the worker's memory cap (SERVE_ARGS: 4 GiB of address space): refused, never touched
                greedy = await env.step({"role": "assistant", "content": code("x = bytearray(5 * 1024 ** 3)")})
                after = await env.step({"role": "assistant", "content": code("print(1 + 1)")})
                return [step.observation[0]["content"] for step in (looped, greedy, after)], took
        finally:
            await client.aclose()

    (looped, greedy, after), took = asyncio.run(episode())
    assert f"timed out after {CODE_TIMEOUT} seconds" in looped and CODE_TIMEOUT - 1 <= took < CODE_TIMEOUT + 10
    assert "MemoryError" in greedy, greedy
    assert after.strip() == "2"  # the same world goes on
