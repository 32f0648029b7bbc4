"""The `appworld` task source: the task ids of one split of `$APPWORLD_ROOT/data/datasets`.

Reads only the split files and each task's `specs.json` (no `appworld` import), so it runs in
the main environment. A missing data directory is an error that says what to run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from beyondagent_core import Task
from beyondagent_core.jsonl import BadRecords
from beyondagent_plugin_appworld.config import AppWorldTasksConfig, data_root, split_ids


class AppWorldTasks:
    def __init__(self, config: AppWorldTasksConfig | None = None):
        self.config = config or AppWorldTasksConfig()
        self.root = data_root(self.config.root)  # fails now, naming `beyondagent appworld setup`
        known = set(split_ids(self.root, self.config.split))
        unknown = [task_id for task_id in self.config.ids if task_id not in known]
        if unknown:
            raise ValueError(f"ids not in the {self.config.split} split of {self.root}: {', '.join(unknown[:5])}")

    def load(self, bad: BadRecords) -> Iterator[Task]:
        ids = split_ids(self.root, self.config.split)
        if self.config.ids:
            wanted = set(self.config.ids)
            ids = [task_id for task_id in ids if task_id in wanted]
        if self.config.limit:
            ids = ids[: self.config.limit]
        for task_id in ids:
            specs = self.root / "data" / "tasks" / task_id / "specs.json"
            try:
                instruction = json.loads(specs.read_text())["instruction"]
            except (OSError, ValueError, KeyError) as exc:
                bad.report(str(specs), f"cannot read the task's instruction: {exc}")
                continue
            yield Task(task_id=task_id, env="appworld", judge=None,
                       metadata={"split": self.config.split, "instruction": instruction})
