"""Config classes of the AppWorld components, and where the AppWorld root is.

Kept free of `appworld` (which lives only in the plugin's venv) so the main environment's
registry and spec loader can read them.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from beyondagent_core.checks import (
    CHARS_WHY,
    FRACTION_WHY,
    MAX_CHARS,
    MAX_TASKS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    MAX_TURNS,
    TASKS_WHY,
    TEMPERATURE_WHY,
    TOKENS_WHY,
    TURNS_WHY,
    number,
)

SPLITS: tuple[str, ...] = ("train", "dev", "test_normal", "test_challenge")
REWARDS: tuple[str, ...] = ("partial", "sparse")
CODE_TIMEOUT_LIMIT = 110  # seconds: under the launched service's --call-timeout 120
SETUP_HINT = ("run `beyondagent appworld setup` (AppWorld's data), or `beyondagent appworld generate --tasks 8 "
              "--out DIR` (a small generated world), then set APPWORLD_ROOT=DIR or the `root` key")


@attrs.define
class AppWorldConfig:
    """`appworld` env: `root` is AppWorld's root directory (its `data/` inside; "" means
    `$APPWORLD_ROOT`). `reward: partial` scores passed checks / all checks, `sparse` 1 or 0.
    An episode ends when the code calls `apis.supervisor.complete_task(...)` or after
    `max_turns` steps; outputs longer than `max_output_chars` are cut with a visible marker.
    `code_timeout`: seconds a code cell may run before AppWorld stops it and the model reads the
    traceback (AppWorld's own timeout, by signal: only where the env runs on its process's main
    thread, as in the service's process workers); a cell that never yields the GIL is ended by the
    service's call timeout instead (docs/appworld.md, 'Bounds').
    """

    root: str = ""
    reward: str = "partial"
    max_turns: int = attrs.field(default=30, validator=number(ge=1, le=MAX_TURNS, why=TURNS_WHY))
    max_output_chars: int = attrs.field(default=5000, validator=number(ge=100, le=MAX_CHARS, why=CHARS_WHY))
    keep_outputs: bool = False  # keep AppWorld's per-episode output directory (logs, end DBs)
    code_timeout: int = attrs.field(default=60, validator=number(
        ge=1, le=CODE_TIMEOUT_LIMIT, why="time: under the env service's 120 s call timeout, which ends the episode "
                                         "instead"))

    def __attrs_post_init__(self) -> None:
        if self.reward not in REWARDS:
            raise ValueError(f"reward must be one of {', '.join(REWARDS)}, got {self.reward!r}")


@attrs.define
class AppWorldTasksConfig:
    """`appworld` task source: the task ids of `split` (train, dev, test_normal, test_challenge),
    the first `limit` of them (0: all), or only `ids`."""

    root: str = ""
    split: str = "train"
    limit: int = attrs.field(default=0, validator=number(ge=0, le=MAX_TASKS, why=TASKS_WHY))
    ids: list[str] = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {self.split!r}")


@attrs.define
class AppWorldReactConfig:
    """`appworld_react` workflow: `max_turns` model turns; unset sampling keys use the backend's."""

    max_turns: int = attrs.field(default=30, validator=number(ge=1, le=MAX_TURNS, why=TURNS_WHY))
    temperature: float | None = attrs.field(default=None, validator=number(ge=0, le=MAX_TEMPERATURE,
                                                                           why=TEMPERATURE_WHY))
    top_p: float | None = attrs.field(default=None, validator=number(gt=0, le=1, why=FRACTION_WHY))
    max_tokens: int | None = attrs.field(default=None, validator=number(ge=1, le=MAX_TOKENS, why=TOKENS_WHY))


@attrs.define
class AppWorldJudgeConfig:
    """`appworld` judge: AppWorld's own `evaluate_task` through the env (no settings)."""


class MissingData(ValueError):
    """AppWorld's data directory is missing (a ValueError: the core reports it as a spec error), says what to run."""


def data_root(root: str = "") -> Path:
    """AppWorld's root (the directory holding `data/`): `root`, else `$APPWORLD_ROOT`."""
    chosen = root or os.environ.get("APPWORLD_ROOT", "")
    if not chosen:
        raise MissingData(f"no AppWorld root: set APPWORLD_ROOT or the `root` key; {SETUP_HINT}")
    path = Path(chosen).expanduser().resolve()
    if not (path / "data" / "tasks").is_dir():
        raise MissingData(f"AppWorld's data is not in {path} (no data/tasks there); {SETUP_HINT}")
    return path


def split_ids(root: Path, split: str) -> list[str]:
    """The task ids a split file lists (tags after `:` dropped, as AppWorld does)."""
    path = root / "data" / "datasets" / f"{split}.txt"
    if not path.is_file():
        raise MissingData(f"AppWorld's split file {path} does not exist; {SETUP_HINT}")
    return [line.split(":")[0].strip() for line in path.read_text().splitlines() if line.strip()]
