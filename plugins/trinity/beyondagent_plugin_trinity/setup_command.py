"""`beyondagent trinity setup [--rebuild]`: build (or reuse) Trinity-RFT's venv and say what it has.

    $ beyondagent trinity setup
    trinity venv: ready at ~/.cache/beyondagent/venvs/trinity-3f2a... (built in 476 s; this check 9 s)
      trinity-rft 0.6.0, verl 0.8.0, torch 2.13.0+cpu, transformers 5.24.0, ray 2.60.0, vLLM not installed
      GPUs: none (CPU stack: --dry-run composes and validates trinity's config here; training needs NVIDIA GPUs)
      `beyondagent` in trinity's WORKFLOWS, ADVANTAGE_FN and MONITOR: registered (by trinity's plugin loader from ...)
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable


def add_trinity_command(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    actions = parser.add_subparsers(dest="trinity_command", metavar="ACTION", required=True)
    setup = actions.add_parser("setup", help="build (or reuse) Trinity-RFT's venv and check it")
    setup.add_argument("--rebuild", action="store_true", help="build the venv again from scratch")
    return run_setup


def run_setup(args: argparse.Namespace) -> int:
    from rich.console import Console

    from beyondagent_plugin_trinity.venv import stack

    console = Console(stderr=True, highlight=False)
    started = time.monotonic()
    venv = ensure(rebuild=getattr(args, "rebuild", False), console=console)
    built = venv.info().get("seconds", "?")
    console.print(f"trinity venv: ready at {venv.path} (built in {built} s; this check "
                  f"{time.monotonic() - started:.0f} s)")
    found = probe(venv)
    console.print(f"  trinity-rft {found['trinity-rft']}, verl {found['verl']}, torch {found['torch']}, "
                  f"transformers {found['transformers']}, ray {found['ray']}, "
                  f"{'vllm ' + found['vllm'] if found['vllm'] else 'vLLM not installed'}")
    console.print(gpu_line(found["gpus"], stack()))
    registration = found["registration"]
    if registration["registered"]:
        console.print(f"  `beyondagent` in trinity's WORKFLOWS, ADVANTAGE_FN and MONITOR: registered (by trinity's plugin "
                      f"loader from {registration['plugin_dir']})")
        return 0
    console.print(f"  `beyondagent` in trinity's registries: NOT registered: {registration['error']}")
    return 1


def gpu_line(gpus: list[str], stack: str) -> str:
    if gpus:
        return f"  GPUs: {len(gpus)} ({', '.join(gpus)})"
    return (f"  GPUs: none ({stack} stack: `beyondagent run SPEC --dry-run` composes and validates trinity's config "
            "here; training needs NVIDIA GPUs: trinity's explorer is vLLM, its trainer hard-codes CUDA)")


def ensure(*, rebuild: bool = False, console: object | None = None):  # -> Venv
    """Trinity-RFT's venv, built first when missing (progress on `console`)."""
    from beyondagent_core.venvs import ensure_venv_with_status
    from beyondagent_plugin_trinity.venv import recipe

    return ensure_venv_with_status(recipe(), "trinity", rebuild=rebuild, console=console, takes="about 3 minutes")


def probe(venv: object) -> dict:
    """Run `probe.py` in the venv; a failure is a RunError with the tail of its output."""
    from beyondagent_core.venvs import probe_venv

    return probe_venv(venv, "beyondagent_plugin_trinity.probe", label="trinity",  # type: ignore[arg-type]
                      setup_command="beyondagent trinity setup")
