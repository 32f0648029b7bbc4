"""`beyondagent env serve` as a real child process: SIGTERM closes every instance, the token
stays out of the logs, bad options fail at start with a message naming them.

The gym plugin's FrozenLake is served (a subprocess sees installed plugins, not inline ones).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
from envservice_testkit import ROOT, cli_environment, serve_subprocess

TOKEN = "tok-3f9a7c1e-never-logged"


def test_sigterm_closes_every_instance_and_the_token_is_never_logged(tmp_path: Path) -> None:
    log_path = tmp_path / "serve.log"
    environment = cli_environment(MY_ENV_TOKEN=TOKEN)
    with serve_subprocess("--env", "frozenlake", "--config", "size=5", "max_steps=7", "--token-env", "MY_ENV_TOKEN",
                          env=environment, log_path=log_path) as (url, proc):
        headers = {"authorization": f"Bearer {TOKEN}"}
        assert httpx.post(f"{url}/create", json={"env_type": "frozenlake", "task_id": "x"}).status_code == 401
        ids = []
        for task_id in ("frozenlake-train-0", "frozenlake-train-1"):
            reply = httpx.post(f"{url}/create", json={"env_type": "frozenlake", "task_id": task_id}, headers=headers)
            assert reply.status_code == 200, reply.text
            data = reply.json()["data"]
            assert data["info"]["max_steps"] == 7 and len(data["info"]["metadata"]["map"]) == 5  # --config applied
            ids.append(data["info"]["instance_id"])
        stats = httpx.get(f"{url}/stats", headers=headers).json()["data"]
        assert stats["live"] == 2 and stats["env"] == "frozenlake"
        # Stepping on past the episode's end: the service itself answers 409, one line, no traceback.
        for _ in range(8):
            reply = httpx.post(f"{url}/step", headers=headers,
                               json={"instance_id": ids[0], "messages": {"role": "assistant", "content": "?"}})
            if reply.status_code != 200:
                break
        assert reply.status_code == 409 and "the episode has ended" in reply.json()["error"]
        assert "Traceback" not in reply.text
        proc.send_signal(signal.SIGTERM)
        # uvicorn re-raises the signal once shut down, so the exit reads as SIGTERM (after cleanup).
        assert proc.wait(timeout=60) in (0, -signal.SIGTERM)
    log = log_path.read_text()
    assert "envservice.shutdown" in log and "closed=2" in log
    assert "envservice.env_error" not in log  # a client stepping past the end is not an env error
    assert TOKEN not in log


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "beyondagent_core.cli", *args], capture_output=True, text=True,
                          env=env or cli_environment(), cwd=ROOT, timeout=120)


def test_bad_options_fail_at_start_with_a_clear_message() -> None:
    result = run_cli("env", "serve", "--env", "frozenlak", "--port", "0")
    assert result.returncode == 2
    assert "unknown environment 'frozenlak' (did you mean 'frozenlake'?)" in result.stderr
    assert "Traceback" not in result.stderr

    result = run_cli("env", "serve", "--env", "frozenlake", "--port", "0", "--config", "sise=5")
    assert result.returncode == 2 and "unknown key --config.sise; did you mean --config.size?" in result.stderr

    result = run_cli("env", "serve", "--env", "frozenlake", "--port", "0", "--config", "size=1")
    assert result.returncode == 2 and "--config.size must be >= 2, got 1" in result.stderr

    result = run_cli("env", "serve", "--env", "frozenlake", "--port", "0", "--token-env", "NO_SUCH_VAR_HERE")
    assert result.returncode == 2 and "NO_SUCH_VAR_HERE is not set" in result.stderr

    result = run_cli("env", "serve", "--env", "frozenlake", "--port", "0", "--ttl", "0")
    assert result.returncode == 2 and "argument --ttl: must be a number in (0, 31536000], got 0" in result.stderr


def test_env_without_subcommand_prints_help() -> None:
    result = run_cli("env")
    assert result.returncode == 0 and "serve" in result.stdout
