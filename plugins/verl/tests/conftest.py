"""Fixtures of the verl plugin's tests: verl's venv (built once, cached) and a vLLM server on loopback.

verl pins transformers<5.11, so everything that imports verl runs as a child process in the
venv the plugin registers (`beyondagent_core.venvs`: built on first use, a few minutes, then
reused). Where pip cannot reach the package index to build it, those tests are skipped unless
BEYONDAGENT_REQUIRE_VERL=1 makes that a failure (CI sets it when it must run them).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from beyondagent_core.testing.vllm_cpu import ServerFailed, has_vllm, vllm_cpu_server
from beyondagent_core.venvs import Venv, VenvBuildError


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


@pytest.fixture(scope="session")
def vllm_server(verl_venv: Venv, tiny_model: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real vLLM OpenAI server (vllm-cpu in verl's venv) serving the tiny model on loopback."""
    if not has_vllm(verl_venv):
        cannot_run("vLLM is not installed in verl's venv (a GPU stack installs verl[vllm]; this test is for vllm-cpu)")
    try:
        with vllm_cpu_server(verl_venv, tiny_model, Path(tmp_path_factory.mktemp("vllm")) / "vllm.log") as url:
            yield url
    except ServerFailed as exc:
        pytest.fail(str(exc))
