"""The opening messages of a math episode: the task's own chat prompt, or a system prompt and the question."""

from __future__ import annotations

from typing import Any

from beyondagent_core.protocols import Message
from beyondagent_core.runtime.react import check_messages
from beyondagent_core.types import Task


def opening_messages(task: Task, system_prompt: str, *, use_task_prompt: bool) -> list[Message]:
    """The conversation an episode starts from.

    A verl row read by the `parquet` source keeps its chat messages in `metadata.prompt`; with
    `use_task_prompt` they are used as they are (they carry the dataset's own instructions).
    Otherwise: `system_prompt` (when not empty) and the task's query as the user message. A
    task with neither raises ValueError (the episode becomes an error record).
    """
    prompt: Any = task.metadata.get("prompt") if use_task_prompt else None
    if prompt:
        return check_messages(prompt, f"task {task.task_id} metadata.prompt")
    if not task.query:
        raise ValueError(f"task {task.task_id!r} has no query: a math task needs the question in `query`")
    messages: list[Message] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": task.query})
    return messages


def sampling_of(config: Any) -> dict[str, Any]:
    """The sampling options a config sets (unset ones are left to the backend)."""
    keys = ("temperature", "top_p", "max_tokens", "stop")
    return {key: getattr(config, key) for key in keys if getattr(config, key, None) is not None}
