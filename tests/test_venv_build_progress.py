"""A command that must build a plugin's venv first says so and shows its progress (issue 36, item 5).

verl's and trinity's `--dry-run` (and their runs) build their venv on first use, minutes of pip: before,
a rich status line was all, and where stderr is not a terminal (CI, a pipe, a log file) nothing at all
was printed for minutes. Now `ensure_venv_with_status` says what it builds, where, about how long and
how to build it ahead, prints each step with the time so far, says every `heartbeat_s` that a step is
still running, says when it waits for another process's build, and the total at the end.
"""

from __future__ import annotations

import fcntl
import io
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

from beyondagent_core import venvs
from beyondagent_core.venvs import VenvRecipe, ensure_venv_with_status, locate


@pytest.fixture
def quick_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Builds whose every step (`python -m venv`, pip) takes 0.15 s and does nothing else."""
    monkeypatch.setenv("BEYONDAGENT_VENVS", str(tmp_path / "venvs"))

    def step(venv: venvs.Venv, label: str, command: list[str]) -> str:
        time.sleep(0.15)
        venv.bin.mkdir(parents=True, exist_ok=True)
        venv.python.touch()
        return ""

    monkeypatch.setattr(venvs, "_run_step", step)


def test_a_build_says_what_it_builds_and_each_step_and_that_it_is_still_running(quick_steps: None) -> None:
    recipe = VenvRecipe("stacky", steps=[["stack==1.0"]], local=())
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    venv = ensure_venv_with_status(recipe, "stacky", console=console, takes="about 4 minutes", heartbeat_s=0.05)
    text = out.getvalue()
    assert venv.ready
    assert (f"building the stacky venv (once, about 4 minutes; `beyondagent venv build stacky` builds it ahead) in "
            f"{venv.path}") in text
    assert f"python -m venv {venv.path}" in text and "pip install stack==1.0" in text
    assert "still at: pip install stack==1.0" in text  # a line while a step runs, not only when it starts
    assert f"stacky venv ready in 0m00s: {venv.path}" in text
    out.truncate(0)
    ensure_venv_with_status(recipe, "stacky", console=console, heartbeat_s=0.05)
    assert out.getvalue().strip("\x00") == ""  # built: nothing to say


def test_waiting_for_another_process_building_it_is_said(quick_steps: None) -> None:
    recipe = VenvRecipe("stacky", steps=[], local=())
    lock = locate(recipe).path.with_name(locate(recipe).path.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    held = lock.open("w")
    fcntl.flock(held, fcntl.LOCK_EX)  # another build holds it...
    threading.Timer(0.3, lambda: fcntl.flock(held, fcntl.LOCK_UN)).start()  # ...for 0.3 s
    out = io.StringIO()
    ensure_venv_with_status(recipe, "stacky", console=Console(file=out, force_terminal=False, width=200),
                            heartbeat_s=0.05)
    held.close()
    assert "waiting for another process that is building it" in out.getvalue()
