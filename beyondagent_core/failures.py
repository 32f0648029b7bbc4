"""One failure policy for every stage: a threshold past which the run fails, loudly below it.

A stage (exploration, a step's episodes) counts its failures by cause. Past the stage's
`max_failed_fraction` the run stops with exit code 1 and the causes grouped, the first
example of each; below it (but above zero) a warning event says the same. Nothing that
failed past its threshold ends `status: ok`.
"""

from __future__ import annotations

import attrs

from beyondagent_core.errors import RunError
from beyondagent_core.logs import get_logger

log = get_logger("beyondagent.failures")


@attrs.define
class FailureTally:
    """Failures of one stage, grouped by cause: cause -> (count, first example)."""

    causes: dict[str, list] = attrs.field(factory=dict)

    def add(self, example: str, cause: str) -> None:
        entry = self.causes.setdefault(cause, [0, example])
        entry[0] += 1

    @property
    def count(self) -> int:
        return sum(count for count, _ in self.causes.values())

    def summary(self, limit: int = 5) -> str:
        """The causes, most frequent first: `3 x ValueError: ... (first: seed-10#0)`."""
        ranked = sorted(self.causes.items(), key=lambda item: -item[1][0])
        lines = [f"{count} x {cause} (first: {example})" for cause, (count, example) in ranked[:limit]]
        if len(ranked) > limit:
            lines.append(f"... and {len(ranked) - limit} other causes")
        return "\n".join(lines)


def check_failures(stage: str, tally: FailureTally, total: int, max_fraction: float, *, key: str,
                   where: str) -> None:
    """Raise past `max_fraction` of `total` failed (naming `key`, the threshold); warn below it."""
    failed = tally.count
    if not failed:
        return
    fraction = failed / max(total, 1)
    if fraction > max_fraction:
        raise RunError(f"{stage}: {failed} of {total} failed ({fraction:.0%}, more than {key} = {max_fraction:g}); "
                       f"causes:\n{tally.summary()}", where=where,
                       hint=f"fix the cause; raise {key} to go on despite failures (events.jsonl has each one)")
    log.warning("stage.failures_below_threshold", stage=stage, failed=failed, total=total,
                threshold=max_fraction, key=key, causes=tally.summary())
