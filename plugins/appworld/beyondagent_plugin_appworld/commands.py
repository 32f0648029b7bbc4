"""`beyondagent appworld setup|check|generate`: the plugin's CLI (runs in the main environment).

Each command builds (once) and uses the AppWorld venv through the core's venv mechanism and
runs the AppWorld side there (`worldgen.py`, `check.py`, the `appworld` CLI): the main
environment never imports `appworld`.

- `setup [--root DIR] [--rebuild]`: the venv (with `appworld install`), then `appworld download
  data` into DIR (default `$APPWORLD_ROOT`, else `./appworld`). Offline, it says what failed and
  what to run; a root that already has data is left alone.
- `check [--root DIR]`: opens one task in the venv and prints versions, apps, tasks per split.
- `generate --tasks N --out DIR [--seed S]`: writes a small, real AppWorld world to DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from beyondagent_core.arguments import SEED, number
from beyondagent_core.errors import BeyondAgentError, RunError

WHERE = "beyondagent appworld"
MAX_TASKS = 10_000  # a generated world is for tests and demos; each task takes a second or so


def add_appworld_command(parser: argparse.ArgumentParser) -> Any:
    sub = parser.add_subparsers(dest="appworld_command", metavar="COMMAND")
    setup = sub.add_parser("setup", help="Build the AppWorld venv and download AppWorld's data.")
    setup.add_argument("--root", default=None, help="AppWorld root to download into (default $APPWORLD_ROOT "
                       "or ./appworld)")
    setup.add_argument("--rebuild", action="store_true", help="build the venv again from scratch")
    check = sub.add_parser("check", help="Open one AppWorld task and print what was found.")
    check.add_argument("--root", default=None, help="AppWorld root (default $APPWORLD_ROOT)")
    generate = sub.add_parser("generate", help="Generate a small, real AppWorld world (tests, demos).")
    generate.add_argument("--tasks", type=number(int, ge=1, le=MAX_TASKS), default=8,
                          help=f"how many tasks (default 8, at most {MAX_TASKS})")
    generate.add_argument("--out", required=True, help="the new AppWorld root (its data/ is written)")
    generate.add_argument("--seed", type=SEED, default=0, help="random seed (default 0)")

    def handler(args: argparse.Namespace) -> int:
        command = getattr(args, "appworld_command", None)
        if command == "setup":
            return setup_command(args.root, rebuild=args.rebuild)
        if command == "check":
            return check_command(args.root)
        if command == "generate":
            return generate_command(args.tasks, Path(args.out), seed=args.seed)
        parser.print_help()
        return 0

    return handler


def appworld_venv(*, rebuild: bool = False) -> Any:
    """The ready AppWorld venv (built now if needed, each step printed)."""
    from beyondagent_core.venvs import ensure_venv_printed
    from beyondagent_plugin_appworld.venv import appworld_recipe

    return ensure_venv_printed(appworld_recipe(), "AppWorld", takes="about a minute", rebuild=rebuild)


def setup_command(root: str | None, *, rebuild: bool = False) -> int:
    venv = appworld_venv(rebuild=rebuild)
    print(f"AppWorld venv: {venv.path} ({venv.info().get('check', '')})")
    target = Path(root or os.environ.get("APPWORLD_ROOT") or "appworld").expanduser().resolve()
    if (target / "data" / "tasks").is_dir():
        print(f"AppWorld data is already in {target / 'data'}: left as it is "
              "(`appworld download data` would delete it first).")
        print(f"export APPWORLD_ROOT={target}")
        return 0
    target.mkdir(parents=True, exist_ok=True)
    print(f"downloading AppWorld's data into {target} ...")
    result = subprocess.run([str(venv.bin / "appworld"), "download", "data", "--root", str(target)],
                            env=venv.environ(), capture_output=True, text=True, check=False)
    output = (result.stdout + result.stderr).strip()
    if result.returncode == 0 and (target / "data" / "tasks").is_dir():
        print(f"AppWorld's data is in {target / 'data'}\nexport APPWORLD_ROOT={target}")
        return 0
    tail = "\n".join(output.splitlines()[-6:]) or "(no output)"
    raise RunError(
        f"the AppWorld venv is ready, but `appworld download data` failed (exit {result.returncode}): "
        f"AppWorld's data host could not be reached or refused the download. Its last lines:\n{tail}",
        where=f"{WHERE} setup",
        hint=(f"with internet access, run `beyondagent appworld setup --root {target}` again (or "
              f"`{venv.bin / 'appworld'} download data --root {target}`); to try things without the "
              f"real data, `beyondagent appworld generate --tasks 8 --out {target}` makes a small real world"))


def check_command(root: str | None) -> int:
    from beyondagent_plugin_appworld.config import MissingData, data_root

    try:
        path = data_root(root or "")
    except MissingData as exc:
        raise BeyondAgentError(str(exc), where=f"{WHERE} check") from None
    venv = appworld_venv()
    result = venv.run(["-m", "beyondagent_plugin_appworld.check", "--root", str(path)])
    if result.returncode != 0:
        raise RunError(f"opening an AppWorld task failed:\n{result.stderr.strip()[-2000:]}", where=f"{WHERE} check")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"AppWorld root: {report['root']}")
    print(f"versions: appworld {report['appworld']}, pydantic {report['pydantic']} (venv {venv.path})")
    print(f"apps ({len(report['apps'])}): {', '.join(report['apps'])}")
    print("tasks per split: " + ", ".join(f"{k} {v if v is not None else '(no file)'}"
                                          for k, v in report["tasks_per_split"].items()))
    opened = report.get("opened")
    if opened:
        print(f"opened {opened['task_id']} in {opened['open_seconds']}s: {opened['instruction']}")
        print(f"supervisor: {opened['supervisor'].get('first_name')} {opened['supervisor'].get('last_name')} "
              f"<{opened['supervisor'].get('email')}>")
    return 0


def generate_command(tasks: int, out: Path, *, seed: int = 0) -> int:
    out = out.expanduser().resolve()
    if (out / "data" / "tasks").is_dir() and not (out / "data" / "generated.json").is_file():
        raise BeyondAgentError(f"{out / 'data'} holds AppWorld data that was not generated here; not overwriting it",
                               where=f"{WHERE} generate", hint="pick another --out")
    venv = appworld_venv()
    print(f"generating {tasks} AppWorld tasks in {out} ...", file=sys.stderr)
    result = subprocess.run([str(venv.python), "-m", "beyondagent_plugin_appworld.worldgen", "--tasks", str(tasks),
                             "--out", str(out), "--seed", str(seed)],
                            env=venv.environ(), stdout=subprocess.PIPE, text=True, check=False)
    if result.returncode != 0:
        raise RunError(f"generating the AppWorld world failed (exit {result.returncode}); its output is above",
                       where=f"{WHERE} generate")
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"{summary['tasks']} tasks in {summary['root']}/data ({summary['seconds']}s); splits: "
          + ", ".join(f"{k} {v}" for k, v in summary["splits"].items()))
    print(f"export APPWORLD_ROOT={summary['root']}")
    return 0
