"""Which of a run's components an object is, and which one an exception came from.

A backend calls the components the run built for it — the experience store, the advantage
estimator, judges — so an exception raised inside one of them travels up through the backend,
and would be reported as the backend's failure. `Built` remembers every component the run
built (object -> its spec `Component`); `culprit(exc)` walks the exception's traceback from the
innermost frame outwards and answers the first component whose method it passes through (a
frame whose `self` is that object), so the error names the store, not "backend 'torch'".
"""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from beyondagent_core.spec import Component

MAX_CAUSES = 8  # how far `raise ... from exc` chains are followed


class Built:
    """The components one run built, by object identity (the objects are kept: ids stay unique)."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[Any, Component]] = {}

    def add(self, obj: Any, component: Component) -> Any:
        """Remember that `obj` is `component`; returns `obj`."""
        self._by_id[id(obj)] = (obj, component)
        return obj

    def component_of(self, obj: Any) -> Component | None:
        entry = self._by_id.get(id(obj))
        return entry[1] if entry is not None and entry[0] is obj else None

    def describe(self, obj: Any) -> str:
        """`obj` as errors name it: its key, kind, name and plugin, or its class if the run did not build it."""
        component = self.component_of(obj)
        return component.described if component is not None else type(obj).__name__

    def culprit(self, exc: BaseException) -> Component | None:
        """The built component innermost in `exc`'s traceback (then in the exceptions it was raised from)."""
        for error in _causes(exc):
            for frame_self in reversed(list(_frame_selves(error.__traceback__))):
                component = self.component_of(frame_self)
                if component is not None:
                    return component
        return None


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < MAX_CAUSES:
        yield current
        seen += 1
        current = current.__cause__


def _frame_selves(tb: TracebackType | None) -> Iterator[Any]:
    """The `self` of each frame of a traceback, outermost first (None where a frame has none)."""
    while tb is not None:
        yield tb.tb_frame.f_locals.get("self")
        tb = tb.tb_next
