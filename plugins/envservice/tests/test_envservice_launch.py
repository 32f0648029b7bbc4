"""`env.service: launch` and URLs: the run's env opener, and the `envservice` task source.

`remote_opener(..., "launch")` starts the real `beyondagent env serve` child process for the
gym plugin's FrozenLake; episodes run through it from several event loops in turn (as
backends call `asyncio.run` per step); `aclose()` stops it.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from envservice_testkit import ROOT, cli_environment, wait_until

from beyondagent_plugin_envservice.client import TOKEN_VAR, RemoteEnv
from beyondagent_plugin_envservice.openers import remote_opener
from beyondagent_core.errors import DataError, RunError, SpecError
from beyondagent_core.jsonl import BadRecords
from beyondagent_core.spec import select_component
from beyondagent_core.types import Task

WHERE = "spec.yaml, key env.service"


@pytest.fixture(scope="module")
def launched():
    opener = remote_opener("frozenlake", "launch", where=WHERE, config={"size": 5, "max_steps": 9})
    yield opener
    asyncio.run(opener.aclose())
    assert not opener.launched.running  # stopped, not left behind
    assert not opener.launched.log_path.exists()  # its temporary log too, once it stopped cleanly


async def episode(opener, task_id: str) -> tuple[dict, float]:
    env = await opener.open()
    assert isinstance(env, RemoteEnv)
    async with env:
        reset = await env.reset(Task(task_id=task_id, env="frozenlake"))
        await env.step({"role": "assistant", "content": "Action: down"})
        return reset.info, (await env.evaluate()).score


def test_launch_serves_the_env_with_the_spec_config(launched) -> None:
    for step in range(2):  # two event loops in turn, one opener
        results = asyncio.run(_gather(launched, [f"frozenlake-train-{step * 4 + i}" for i in range(4)]))
        for info, score in results:
            assert info["max_steps"] == 9 and len(info["metadata"]["map"]) == 5
            assert isinstance(score, float)
    stats = asyncio.run(launched.client.stats())
    assert stats["created"] == 8 and stats["live"] == 0


async def _gather(opener, task_ids: list[str]) -> list:
    return await asyncio.gather(*(episode(opener, task_id) for task_id in task_ids))


@pytest.mark.beyondagent_plugins("envservice")
def test_a_url_opener_and_the_task_source(launched, monkeypatch, registry) -> None:
    url, token = launched.client.url, launched.launched.token
    with pytest.raises(RunError):  # no token: the service says 401 on the first episode
        opener = remote_opener("frozenlake", url, where=WHERE, config={})
        asyncio.run(episode(opener, "frozenlake-val-0"))
    monkeypatch.setenv(TOKEN_VAR, token)
    opener = remote_opener("frozenlake", url, where=WHERE, config={})
    info, _ = asyncio.run(episode(opener, "frozenlake-val-0"))
    assert info["task_id"] == "frozenlake-val-0"
    asyncio.run(opener.aclose())

    monkeypatch.setenv("MY_SERVICE_TOKEN", token)
    component = select_component(registry, "task_source", {
        "name": "envservice", "url": url, "env_type": "frozenlake", "split": "val", "token_env": "MY_SERVICE_TOKEN",
        "limit": 3,
    })
    tasks = list(component.create().load(BadRecords()))
    assert tasks == [Task(task_id=f"frozenlake-val-{i}", env="frozenlake") for i in range(3)]

    component = select_component(registry, "task_source", {
        "name": "envservice", "url": url, "env_type": "frozenlake", "split": "nope", "token_env": "MY_SERVICE_TOKEN"})
    with pytest.raises(DataError, match="answered 400"):
        component.create().load(BadRecords())


def test_unreachable_and_malformed_services() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RunError, match=f"cannot reach the environment service at http://127.0.0.1:{port}") as info:
        remote_opener("frozenlake", f"http://127.0.0.1:{port}", where=WHERE, config={})
    assert info.value.where == WHERE
    with pytest.raises(SpecError, match="must be local, launch or an http"):
        remote_opener("frozenlake", "ftp://x", where=WHERE, config={})


def test_a_launch_that_cannot_start_says_why() -> None:
    with pytest.raises(RunError, match="exited with code 2 before it was ready") as info:
        remote_opener("frozenlake", "launch", where=WHERE, config={"size": 1})
    assert "--config.size must be >= 2, got 1" in info.value.hint
    kept = Path(info.value.hint.split("its output (", 1)[1].split("):", 1)[0])
    assert "--config.size" in kept.read_text()  # a failed server's log stays for the user to read
    kept.unlink()


def test_a_launched_server_does_not_outlive_a_killed_run(tmp_path) -> None:
    """The run is SIGKILLed (no atexit, no aclose): its server sees its parent gone and exits."""
    script = (
        "from beyondagent_plugin_envservice.launch import LaunchedServer\n"
        "import time\n"
        "server = LaunchedServer.start('frozenlake', {})\n"
        "print('PID', server.proc.pid, server.log_path, flush=True)\n"
        "time.sleep(120)\n"
    )
    log_path = None
    run = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                           env=cli_environment(), cwd=ROOT)
    try:
        _, pid, log_path = next(line.split() for line in run.stdout if line.startswith("PID "))
        server_pid = int(pid)
        assert process_alive(server_pid)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
        wait_until(lambda: not process_alive(server_pid), timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
        if log_path:  # a killed run cannot remove its server's temporary log
            Path(log_path).unlink(missing_ok=True)


def process_alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


@pytest.mark.beyondagent_plugins("gym", "mixers", "envservice")
def test_the_spec_adds_serve_args_to_a_launched_server(plugin_manager, tmp_path, monkeypatch) -> None:
    import yaml

    monkeypatch.setenv("BEYONDAGENT_PLUGINS", "gym")  # the launched server inherits the kit's switches

    from beyondagent_core import pipeline
    from beyondagent_core.context import RunContext, RunInfo

    def context_for(env_block: dict) -> RunContext:
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump({
            "run": {"name": "serve-args", "output_dir": str(tmp_path / "runs")},
            "tasks": {"train": {"name": "gym_tasks", "env": "frozenlake", "count": 2, "size": 2}},
            "env": env_block, "backend": {"name": "export"}}))
        session = pipeline.prepare(path, [], manager=plugin_manager)
        return RunContext(spec=session.spec, manager=plugin_manager,
                          info=RunInfo(name="serve-args", run_dir=tmp_path, seed=0, spec={}))

    context = context_for({"name": "frozenlake", "service": "launch", "serve_args": ["--max-instances", "2"]})
    opener = context.env_opener()
    try:
        async def open_three() -> None:
            envs = [await opener.open() for _ in range(3)]
            task = Task(task_id="frozenlake-train-0", env="frozenlake")
            await envs[0].reset(task)
            await envs[1].reset(task)
            with pytest.raises(RunError, match="raise its --max-instances"):  # the spec's cap reached the server
                await envs[2].reset(task)
            for env in envs[:2]:
                await env.close()

        asyncio.run(open_three())
    finally:
        context.close()
    logs = list((tmp_path / "logs").glob("envservice-*.log"))  # the run directory's, one per launch
    assert len(logs) == 1 and "envservice listening on" in logs[0].read_text()
    with pytest.raises(SpecError, match="env.serve_args is set but env.service is 'local'"):
        context_for({"name": "frozenlake", "serve_args": ["--threads", "2"]}).env_opener()
