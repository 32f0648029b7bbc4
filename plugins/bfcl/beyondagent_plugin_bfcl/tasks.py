"""The `bfcl` task source: the tasks of some BFCL categories in one split.

Reads BFCL's data files as JSON lines (`data.py`, no `bfcl_eval` import), so it runs in the
main environment. Each task: `task_id` = BFCL's id, `env = "bfcl"`, `query` None (the env shows
the entry's own first user turn), `metadata` = category, kind (multi_turn, ast, relevance),
split, the number of user turns, the functions' names, the backend classes (multi-turn),
and `eval_group` = the category, so `beyondagent eval` reports accuracy per category.
Unknown ids and misspelled categories are errors that say what exists.
"""

from __future__ import annotations

from collections.abc import Iterator

from beyondagent_core import Task
from beyondagent_core.jsonl import BadRecords
from beyondagent_plugin_bfcl import data
from beyondagent_plugin_bfcl.config import BFCLTasksConfig, category_of, check_categories, kind_of, split_of


class BFCLTasks:
    def __init__(self, config: BFCLTasksConfig | None = None):
        self.config = config or BFCLTasksConfig()
        self.categories = check_categories(self.config.categories)
        self.root = data.data_dir(self.config.data_dir)
        for task_id in self.config.ids:
            try:
                category = category_of(task_id)
                data.entry(self.root, task_id)
            except KeyError as exc:
                raise ValueError(f"ids: {exc.args[0]}") from None
            if category not in self.categories:
                raise ValueError(f"ids: {task_id!r} is a {category} task, not one of categories "
                                 f"{', '.join(self.categories)}")

    def load(self, bad: BadRecords) -> Iterator[Task]:
        wanted = set(self.config.ids)
        for category in self.categories:
            chosen = [item for item in data.entries(self.root, category)
                      if (not wanted or item["id"] in wanted)
                      and (self.config.split == "all" or split_of(item["id"]) == self.config.split)]
            if self.config.limit:
                chosen = chosen[: self.config.limit]
            for item in chosen:
                task = self._task(item, category, bad)
                if task is not None:
                    yield task

    def _task(self, item: dict, category: str, bad: BadRecords) -> Task | None:
        try:
            functions = [doc["name"] for doc in data.functions_of(self.root, item["id"])[0]]
            turns = len(item["question"])
        except (KeyError, TypeError) as exc:
            bad.report(f"{self.root}/{data.PREFIX}{category}.json, id {item.get('id')}", f"unreadable entry: {exc}")
            return None
        metadata = {"category": category, "kind": kind_of(category), "split": split_of(item["id"]),
                    "turns": turns, "functions": functions, "eval_group": category}
        if "involved_classes" in item:
            metadata["classes"] = list(item["involved_classes"])
        return Task(task_id=item["id"], env="bfcl", judge=None, metadata=metadata)
