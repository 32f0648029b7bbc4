"""The leakage canary at run time: a synthetic task's reference answer never reaches the policy's prompt.

A synthetic task carries its reference (`ground_truth`: the actions an exploration took, a solution
text) for its judge, and a judge rubric when a task source adds one (`metadata.rubric`). If either
reaches the prompt the policy answers — a summarizer that wrote the answer into the query, a
workflow that renders `ground_truth` or `metadata`, an env that echoes it — the policy is graded
on copying, and the run's success rates mean nothing (AgentEvolver's users asked for this check).

`AnswerLeakGuard` checks the task as the policy is first shown it — the user (and tool) messages of
the episode's first prompt, before the model sees them: they must not contain any distinctive piece
of the reference or the rubric. Distinctive: at least `MIN_CHARS` characters after lower-casing and
collapsing whitespace — a move (`left`) or a number appears in honest prompts. Not checked, because
honest text holds the reference there: the system message (the workflow's or env's fixed
instructions, the same for every task: AppWorld's names `apis.api_docs.show_app_descriptions()`,
which many references start with), the policy's own turns (a replayed prefix of its stored success
holds its actions), and later observations (the env's answers to the policy's actions; a traceback
shows the code that failed). So a workflow that writes task fields into its system message, or an env
that reveals the answer mid-episode, is not covered. A leak is an episode error (`AnswerLeak: ...`):
the episode is not trained on (failed episodes leave their groups), counted in
`advantage/dropped_error`, and logged once per task. Experiences retrieved into the prompt are added
below the workflow (`runtime.guidance`) and have their own guard (`val_mode`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from beyondagent_core.logs import get_logger
from beyondagent_core.types import Task

log = get_logger("beyondagent.episodes")

MIN_CHARS = 16
_SPACE = re.compile(r"\s+")
_warned: set[str] = set()


class AnswerLeak(Exception):
    """A synthetic task's reference answer or rubric is in the prompt the policy sees."""


def normalized(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield str(value)


def answer_material(task: Task) -> tuple[str, ...]:
    """What `task`'s prompt must not hold, normalized: for a synthetic task, each distinctive string
    in its reference (and the reference as JSON), and its `metadata.rubric`; nothing otherwise."""
    if task.origin != "synthetic":
        return ()
    pieces: list[str] = list(_strings(task.ground_truth))
    if task.ground_truth is not None and not isinstance(task.ground_truth, str):
        pieces.append(json.dumps(task.ground_truth, ensure_ascii=False, default=str))
    rubric = task.metadata.get("rubric") if isinstance(task.metadata, dict) else None
    pieces += list(_strings(rubric))
    return tuple(dict.fromkeys(p for p in map(normalized, pieces) if len(p) >= MIN_CHARS))


def _content(message: Any) -> tuple[str, str]:
    if isinstance(message, dict):
        return str(message.get("role", "")), str(message.get("content") or "")
    return str(getattr(message, "role", "")), str(getattr(message, "content", "") or "")


class AnswerLeakGuard:
    """Checks a task's prompts for its answer material (`answer_material`)."""

    def __init__(self, task: Task):
        self.task = task
        self.material = answer_material(task)
        self.checked = False

    def check(self, messages: Any) -> None:
        """Raise `AnswerLeak` when the first prompt's user or tool messages hold a piece of the answer
        material (later prompts are not checked: see the module)."""
        if not self.material or self.checked:
            return
        self.checked = True
        text = normalized("\n".join(content for role, content in map(_content, messages)
                                    if role not in ("assistant", "system")))
        for piece in self.material:
            if piece in text:
                shown = piece if len(piece) <= 60 else piece[:57] + "..."
                if self.task.task_id not in _warned:
                    _warned.add(self.task.task_id)
                    log.warning("episode.answer_leak", task=self.task.task_id, seed_task=self.task.seed_task_id,
                                piece=shown)
                raise AnswerLeak(f"the prompt of synthetic task {self.task.task_id} holds its reference answer or "
                                 f"rubric ({shown!r}): the policy would be graded on copying it, so the episode is not "
                                 "trained on; check the summarizer's query and what the workflow renders")
