"""`beyondagent appworld check`, the part that runs in the AppWorld venv: open one task and report.

    python -m beyondagent_plugin_appworld.check --root DIR
prints one JSON object: versions, the apps, tasks per split, and the task it opened (its
instruction, the supervisor, how long opening took).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def check(root: Path) -> dict:
    os.environ["APPWORLD_ROOT"] = str(root)
    import appworld
    import pydantic
    from appworld import AppWorld, update_root
    from appworld.apps import get_all_apps

    from beyondagent_plugin_appworld.config import SPLITS, split_ids

    update_root(str(root))
    splits = {}
    for split in SPLITS:
        try:
            splits[split] = len(split_ids(root, split))
        except ValueError:
            splits[split] = None
    first = next((ids[0] for split in SPLITS if splits[split] for ids in [split_ids(root, split)]), None)
    report = {"root": str(root), "appworld": appworld.__version__, "pydantic": pydantic.VERSION,
              "apps": get_all_apps(skip_admin=True), "tasks_per_split": splits,
              "tasks_on_disk": len(list((root / "data" / "tasks").iterdir()))}
    if first is not None:
        clock = lambda: time.clock_gettime(time.CLOCK_MONOTONIC)  # noqa: E731 - AppWorld's freezegun patches perf_counter
        started = clock()
        world = AppWorld(task_id=first, experiment_name=f"beyondagent-check-{os.getpid()}", timeout_seconds=None)
        try:
            opened = clock() - started
            report["opened"] = {"task_id": first, "instruction": world.task.instruction,
                                "supervisor": dict(world.task.supervisor), "open_seconds": round(opened, 2),
                                "apps_in_docs": len(world.task.api_docs)}
        finally:
            world.close()
            import shutil
            shutil.rmtree(world.base_output_directory, ignore_errors=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m beyondagent_plugin_appworld.check")
    parser.add_argument("--root", type=Path, required=True)
    args = parser.parse_args(argv)
    print(json.dumps(check(args.root.resolve()), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
