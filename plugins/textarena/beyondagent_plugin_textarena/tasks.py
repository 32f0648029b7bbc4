"""The `textarena_tasks` source: seeded games of one TextArena game, from one split's seed range.

Task `i` is `textarena-{game}-{split}-{i}`, seed `base(split) + i` (seeds.py); its metadata names the
game, difficulty and seed, so the task replays its exact game on any env instance (and its `opponent`,
when the source sets one: it wins over the env's).
"""

from __future__ import annotations

from collections.abc import Iterator

from beyondagent_core import Task
from beyondagent_core.jsonl import BadRecords
from beyondagent_plugin_textarena.config import SPLIT_SIZE, SPLITS, TextArenaTasksConfig
from beyondagent_plugin_textarena.seeds import task_id


class TextArenaTasks:
    def __init__(self, config: TextArenaTasksConfig | None = None):
        self.config = config or TextArenaTasksConfig()

    def load(self, bad: BadRecords) -> Iterator[Task]:
        config = self.config
        base = SPLITS.index(config.split) * SPLIT_SIZE
        for index in range(config.start, config.start + config.count):
            yield Task(task_id=task_id(config.game, config.split, index), env="textarena",
                       metadata={"game": config.game, "difficulty": config.difficulty, "seed": base + index,
                                 **({} if config.opponent is None else {"opponent": config.opponent})})
