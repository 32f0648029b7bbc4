"""What the exploring LLM is told: map the environment, do not solve the seed task.

The env's reset messages open the conversation like in an ordinary episode, but the seed
task's query is masked wherever it appears, and the env's own system message is folded
into the explorer's instructions (one system message: some chat templates allow no more).
"""

from __future__ import annotations

from beyondagent_core.protocols import Message

HIDDEN_QUERY = "[the task is hidden: explore the environment instead]"

INSTRUCTIONS = """\
You are exploring an environment to learn how it works, not to complete a task.
Map the environment: try its different actions, find out which entities and places exist,
what attributes and states they have, and what each action changes.
Do NOT try to solve any task or reach any goal the environment states, and do not stop early:
prefer actions, places and objects you have not tried yet, including unusual ones.
Take exactly one action per turn, written in the format the environment asks for."""


def mask_query(messages: list[Message], query: str | None) -> list[Message]:
    """`messages` with every occurrence of the seed task's `query` replaced by a placeholder."""
    if not query or not query.strip():
        return [dict(message) for message in messages]
    return [{**message, "content": message["content"].replace(query, HIDDEN_QUERY)} for message in messages]


def explorer_messages(reset_messages: list[Message]) -> list[Message]:
    """The conversation the explorer starts from: its instructions (with the env's system message) first."""
    system = [m["content"] for m in reset_messages if m["role"] == "system"]
    rest = [dict(m) for m in reset_messages if m["role"] != "system"]
    content = INSTRUCTIONS
    if system:
        content += "\n\nThe environment's own instructions:\n" + "\n\n".join(system)
    return [{"role": "system", "content": content}, *rest]


def valid_actions_note(actions: list[str]) -> str:
    return "\nActions available now: " + ", ".join(actions) + "."
