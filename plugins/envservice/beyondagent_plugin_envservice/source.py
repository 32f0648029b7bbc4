"""`envservice` task source: seed task ids of a split, read from a running environment service.

    tasks:
      train: {name: envservice, url: "http://127.0.0.1:8000", env_type: frozenlake, split: train}

Each id from `/get_env_profile` becomes `Task(task_id=id, env=env_type)`; the env builds the
task's state and question itself when an episode resets it. `token_env` names the variable
holding the service's bearer token.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import attrs

from beyondagent_core.checks import MISSING
from beyondagent_core.checks import MAX_SECONDS, MAX_TASKS, SECONDS_WHY, TASKS_WHY, number
from beyondagent_plugin_envservice import protocol
from beyondagent_core.errors import DataError
from beyondagent_core.jsonl import BadRecords
from beyondagent_core.types import Task


@attrs.define
class EnvServiceSourceConfig:
    """`url` of the service, `env_type` it hosts, `split`; `token_env`: the variable with its token."""

    url: str = MISSING
    env_type: str = MISSING
    split: str = "train"
    token_env: str | None = None
    limit: int | None = attrs.field(default=None, validator=number(ge=0, le=MAX_TASKS, why=TASKS_WHY))
    timeout: float = attrs.field(default=60.0, validator=number(gt=0, le=MAX_SECONDS, why=SECONDS_WHY))


class EnvServiceTaskSource:
    def __init__(self, config: EnvServiceSourceConfig):
        if not config.url.startswith(("http://", "https://")):
            raise ValueError(f"url must be an http(s):// URL of an environment service, got {config.url!r}")
        if config.limit is not None and config.limit < 0:
            raise ValueError(f"limit must be >= 0, got {config.limit}")
        if config.token_env is not None and not os.environ.get(config.token_env):
            raise ValueError(f"token_env: the environment variable {config.token_env} is not set")
        self.config = config

    def load(self, bad: BadRecords) -> Iterator[Task]:
        import httpx  # here, not at import: the builtin plugin imports this module's config

        config = self.config
        url = f"{config.url.rstrip('/')}/get_env_profile"
        headers = {"authorization": f"Bearer {os.environ[config.token_env]}"} if config.token_env else {}
        body = {"env_type": config.env_type, "task_id": None, "instance_id": None, "messages": {},
                "params": {"split": config.split}}
        try:
            response = httpx.post(url, content=protocol.dumps(body), headers=headers, timeout=config.timeout)
        except httpx.HTTPError as exc:
            raise DataError(f"cannot read tasks from the environment service: {exc}", where=url,
                            hint="start it with `beyondagent env serve`, or fix tasks.*.url") from None
        try:
            reply = protocol.loads(response.content)
        except ValueError:
            reply = None
        if response.status_code != 200 or not isinstance(reply, dict):
            message = reply.get("error") or reply.get("detail") if isinstance(reply, dict) else response.text[:200]
            raise DataError(f"the environment service answered {response.status_code}: {message}", where=url)
        ids = reply.get("data")
        if not isinstance(ids, list):
            raise DataError(f"/get_env_profile must return a list of task ids, got {type(ids).__name__}", where=url)
        return itertools.islice(self._tasks(ids, url, bad), config.limit)

    def _tasks(self, ids: list, url: str, bad: BadRecords) -> Iterator[Task]:
        for index, task_id in enumerate(ids):
            if isinstance(task_id, bool) or not isinstance(task_id, (str, int)) or task_id == "":
                bad.report(f"{url} (split {self.config.split!r}) item {index}",
                           f"a task id must be a non-empty string, got {task_id!r}")
                continue
            yield Task(task_id=str(task_id), env=self.config.env_type)
