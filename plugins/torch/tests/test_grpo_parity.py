"""grpo.py matches verl's `core_algos` to 1e-6 on random inputs (the script: verl_parity.py).

How it runs: in its own venv with verl==0.9.1 and torch==2.13.0 (CPU), because verl 0.9.1 pins
transformers<5.11 and our main env has transformers 5.23. The venv lives at `$BEYONDAGENT_VERL_VENV`, default
`<repo>/.venvs/verl`; it is built once (`python -m venv`, `pip install torch==2.13.0` first so pip keeps the
CPU build, then `pip install verl==0.9.1`; about three minutes here) and reused while its marker file names
the same versions. A lock file keeps two test runs from building it at once. Where the package index cannot
be reached the test is skipped with that reason, unless BEYONDAGENT_REQUIRE_VERL_PARITY=1 makes it fail.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

VERL_VERSION = "0.9.1"
TORCH_VERSION = "2.13.0"
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
VENV = Path(os.environ.get("BEYONDAGENT_VERL_VENV", REPO / ".venvs" / "verl"))
MARKER = VENV / "beyondagent-verl-ready"
HOW = (f"run in its own venv ({VENV}) with verl=={VERL_VERSION}, torch=={TORCH_VERSION} "
       "because verl pins transformers<5.11")
BUILD_TIMEOUT_S = 1800
PARITY_TIMEOUT_S = 600
NO_INDEX = ("No matching distribution found", "Could not find a version", "NewConnectionError",
            "Temporary failure in name resolution", "Network is unreachable", "Max retries exceeded",
            "ConnectTimeoutError", "ReadTimeoutError")


def venv_python() -> Path:
    return VENV / "bin" / "python"


def clean_env() -> dict[str, str]:
    """Our environment minus what would leak the main env's packages into the venv's python."""
    return {key: value for key, value in os.environ.items()
            if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}


def run(command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=clean_env(), check=False)


def cannot_build(step: str, result: subprocess.CompletedProcess[str]) -> None:
    output = result.stdout + result.stderr
    message = f"building the verl venv failed at `{step}`:\n{output[-3000:]}"
    if any(sign in output for sign in NO_INDEX) and os.environ.get("BEYONDAGENT_REQUIRE_VERL_PARITY") != "1":
        pytest.skip(f"verl parity needs pip to reach the package index to build {VENV}; {message}")
    pytest.fail(message)


def build_venv() -> float:
    """Create the venv from scratch; returns the seconds it took."""
    started = time.monotonic()
    shutil.rmtree(VENV, ignore_errors=True)
    steps = [
        [sys.executable, "-m", "venv", str(VENV)],
        [str(venv_python()), "-m", "pip", "install", "--disable-pip-version-check", f"torch=={TORCH_VERSION}"],
        [str(venv_python()), "-m", "pip", "install", "--disable-pip-version-check", f"verl=={VERL_VERSION}"],
    ]
    for step in steps:
        result = run(step, BUILD_TIMEOUT_S)
        if result.returncode != 0:
            cannot_build(" ".join(step[-3:]), result)
    versions = run([str(venv_python()), "-c", "import torch, verl; print(torch.__version__, verl.__version__)"], 300)
    torch_version, verl_version = versions.stdout.split() if versions.returncode == 0 else ("?", "?")
    if not (torch_version.startswith(TORCH_VERSION) and verl_version == VERL_VERSION):
        pytest.fail(f"the verl venv at {VENV} has torch {torch_version} and verl {verl_version}, wanted "
                    f"torch {TORCH_VERSION} and verl {VERL_VERSION}:\n{versions.stderr[-3000:]}")
    MARKER.write_text(f"verl=={VERL_VERSION} torch=={TORCH_VERSION}\n")
    return time.monotonic() - started


@pytest.fixture(scope="module")
def verl_python() -> Path:
    """The venv's python, building the venv first unless a finished build for these versions is there."""
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / f".{VENV.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second test run waits here for the first one's build
        try:
            wanted = f"verl=={VERL_VERSION} torch=={TORCH_VERSION}\n"
            if MARKER.exists() and MARKER.read_text() == wanted and venv_python().exists():
                print(f"verl parity: reusing {VENV}")
            else:
                print(f"verl parity: built {VENV} in {build_venv():.0f} s")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return venv_python()


def test_grpo_matches_verl_core_algos(verl_python: Path) -> None:
    print(f"verl parity: {HOW}")
    result = run([str(verl_python), str(HERE / "verl_parity.py"),
                  str(REPO / "plugins" / "torch" / "beyondagent_plugin_torch" / "grpo.py")], PARITY_TIMEOUT_S)
    lines = result.stdout.splitlines()
    mismatches = [line for line in lines if line.startswith("FAIL")]
    summary = "\n".join(lines[:1] + lines[-2:])
    print(summary)
    assert result.returncode == 0 and not mismatches, (
        f"grpo.py differs from verl ({HOW}):\n" + "\n".join(mismatches[:40]) + f"\n{summary}\n{result.stderr[-3000:]}")
    assert lines and lines[-1].endswith("0 mismatches (tolerance 1e-06)"), summary
