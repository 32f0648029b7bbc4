"""Config classes of the AppWorld components, and where the AppWorld root is.

Kept free of `appworld` (which lives only in the plugin's venv) so the main environment's
registry and spec loader can read them.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

SPLITS: tuple[str, ...] = ("train", "dev", "test_normal", "test_challenge")
REWARDS: tuple[str, ...] = ("partial", "sparse")
SETUP_HINT = ("run `beyondagent appworld setup` (AppWorld's data), or `beyondagent appworld generate --tasks 8 "
              "--out DIR` (a small generated world), then set APPWORLD_ROOT=DIR or the `root` key")


@attrs.define
class AppWorldConfig:
    """`appworld` env: `root` is AppWorld's root directory (its `data/` inside; "" means
    `$APPWORLD_ROOT`). `reward: partial` scores passed checks / all checks, `sparse` 1 or 0.
    An episode ends when the code calls `apis.supervisor.complete_task(...)` or after
    `max_turns` steps; outputs longer than `max_output_chars` are cut with a visible marker.
    """

    root: str = ""
    reward: str = "partial"
    max_turns: int = 30
    max_output_chars: int = 5000
    keep_outputs: bool = False  # keep AppWorld's per-episode output directory (logs, end DBs)

    def __attrs_post_init__(self) -> None:
        if self.reward not in REWARDS:
            raise ValueError(f"reward must be one of {', '.join(REWARDS)}, got {self.reward!r}")
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {self.max_turns}")
        if self.max_output_chars < 100:
            raise ValueError(f"max_output_chars must be at least 100, got {self.max_output_chars}")


@attrs.define
class AppWorldTasksConfig:
    """`appworld` task source: the task ids of `split` (train, dev, test_normal, test_challenge),
    the first `limit` of them (0: all), or only `ids`."""

    root: str = ""
    split: str = "train"
    limit: int = 0
    ids: list[str] = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        if self.limit < 0:
            raise ValueError(f"limit must be 0 (all) or more, got {self.limit}")


@attrs.define
class AppWorldReactConfig:
    """`appworld_react` workflow: `max_turns` model turns; unset sampling keys use the backend's."""

    max_turns: int = 30
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {self.max_turns}")


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
