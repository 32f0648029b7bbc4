"""Where explorations run: the `Executor` protocol and `LocalExecutor` (`explore.executor: local`).

An executor runs one exploration — the explorer in a fresh env, then the summarizer on its
trajectory — and returns the candidate tasks; the engine (`engine.py`) filters and caches them.
It also reports the LLM usage and the summarizer's counters since it started (its tallies).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs

from beyondagent_core.protocols import ChatLLM, EnvOpener, Explorer, Summarizer
from beyondagent_core.returns import ReturnError, awaited, check_exploration, class_name
from beyondagent_core.types import Task


class Executor(Protocol):
    """Where explorations run: `explore(seed, known, index)` -> the summarizer's candidates.

    `index` is which exploration of `seed` this is (0..n-1): explorers that take an `index`
    keyword get it, so their random draws are the same wherever and whenever it runs.

    `tallies()` gives the LLM usage and the summarizer's counters since the executor started.
    """

    async def explore(self, seed: Task, known: Sequence[Task], index: int) -> list[Task]: ...

    async def tallies(self) -> tuple[dict[str, int], dict[str, int]]: ...

    async def aclose(self) -> None: ...


@attrs.define
class LocalExecutor:
    """Explorations as coroutines in this process (the default `explore.executor: local`).

    What the explorer and the summarizer return is checked; an error names the component as
    `describe(component)` puts it (a run's `RunContext.describe`: key, name and plugin).
    """

    explorer: Explorer
    summarizer: Summarizer
    envs: EnvOpener
    llm: ChatLLM | None = None
    describe: Callable[[Any], str] = class_name
    _start: tuple[dict[str, int], dict[str, int]] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._start = (usage_of(self.llm), counters_of(self.summarizer))

    async def explore(self, seed: Task, known: Sequence[Task], index: int) -> list[Task]:
        extra = {"index": index} if _takes_index(self.explorer) else {}
        async with contextlib.AsyncExitStack() as stack:
            env = await self.envs.open()
            stack.push_async_callback(env.close)
            explorer = self.describe(self.explorer)
            explored = await awaited(self.explorer.explore(seed, env, self.llm, **extra), who=explorer, method="explore")
            trajectory = check_exploration(explored, who=explorer)
        summarizer = self.describe(self.summarizer)
        candidates = await awaited(self.summarizer.summarize(seed, trajectory, list(known), self.llm), who=summarizer,
                                   method="summarize")
        _check_candidates(summarizer, candidates)
        return candidates

    async def tallies(self) -> tuple[dict[str, int], dict[str, int]]:
        return delta(usage_of(self.llm), self._start[0]), delta(counters_of(self.summarizer), self._start[1])

    async def aclose(self) -> None:
        """The env opener and LLM belong to the caller."""


def _check_candidates(who: str, candidates: object) -> None:
    if not isinstance(candidates, list) or not all(isinstance(t, Task) for t in candidates):
        raise ReturnError(f"{who}: summarize() returned {candidates!r:.80}; expected a list of Task")


def _takes_index(explorer: Explorer) -> bool:
    try:
        return "index" in inspect.signature(explorer.explore).parameters
    except (TypeError, ValueError):
        return False


def usage_of(llm: Any) -> dict[str, int]:
    """An LLM client's usage tally (`OpenAIChat.usage`), or nothing."""
    usage = getattr(llm, "usage", None)
    return dict(usage) if isinstance(usage, dict) else {}


def counters_of(component: Any) -> dict[str, int]:
    """A component's integer `stats` counters (e.g. a summarizer's malformed blocks), or nothing."""
    stats = getattr(component, "stats", None)
    return {k: v for k, v in stats.items() if isinstance(v, int)} if isinstance(stats, dict) else {}


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {key: value - before.get(key, 0) for key, value in after.items() if value - before.get(key, 0)}
