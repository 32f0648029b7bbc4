"""`llm` summarizer: an LLM reads an exploration trajectory and proposes tasks it could train on.

The prompt holds
- the exploration as action/observation pairs: each assistant turn followed by the user or
  tool turn that answered it (an action with no answer is left out). Only the last
  `task_summary_history_length` pairs are shown, i.e. the window of steps
  `K - L .. K - 1` of the `K` pairs (all of them when `L` is 0); the prompt says how many
  earlier steps were left out. The seed task's query is masked wherever it appears;
- the objectives already found for this seed task ("do not repeat these");
- the environment profile, when the spec gives one (entities, operations, difficulty).

The model answers with `<task>{"query", "confidence", "action_sequence"}</task>` blocks. Each
well-formed block becomes its own `Task` (id `<seed_id>/syn-<hash of query and actions>`, origin
synthetic, `ground_truth` = the action sequence, the seed's env and metadata, so it replays the
seed's initial state; `judge` None lets the run apply its default for synthetic tasks). Blocks that are
not JSON objects, lack a query or an action sequence, are unclosed, or repeat a query are counted
in `stats` and skipped: bad LLM output never raises.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from beyondagent_core.errors import RunError
from beyondagent_core.llm import OpenAIChat
from beyondagent_core.logs import get_logger
from beyondagent_core.protocols import ChatLLM
from beyondagent_core.types import Task, Trajectory, Turn
from beyondagent_plugin_llm.config import LLMSummarizerConfig

log = get_logger("beyondagent.llm_summarizer")

MASK = "[seed query hidden]"
OBSERVATION_ROLES = ("user", "tool")
STAT_KEYS = ("calls", "blocks", "tasks", "malformed", "duplicates", "over_limit")

SYSTEM_PROMPT = """\
You design training tasks for an AI agent. You read a record of an agent exploring an environment \
and write new, concrete tasks that a user could give an agent in that same environment, each with \
the sequence of actions that accomplishes it, as observed in the record.

A good task is specific (names the entities and values involved), verifiable (success can be \
checked objectively), achievable with the actions shown in the record, and phrased the way a person \
would ask for it.

For each task, output exactly one block in this format, and nothing else between blocks:

<task>
{"query": "the task, as a user would ask for it", "confidence": 0.9, "action_sequence": "the actions \
that accomplish it, in order, as the agent wrote them"}
</task>

`confidence` (0 to 1) is how sure you are that the action sequence accomplishes the task."""


class LLMSummarizer:
    """The `Summarizer` protocol over an LLM. `stats` counts calls, `<task>` blocks and what was skipped."""

    def __init__(self, config: LLMSummarizerConfig | None = None, *, llm: ChatLLM | None = None,
                 key_path: str = "explore.summarizer.llm"):
        self.config = config or LLMSummarizerConfig()
        if llm is None and self.config.llm is not None:
            llm = OpenAIChat(self.config.llm, key_path=key_path)
        self.llm = llm
        self.stats = dict.fromkeys(STAT_KEYS, 0)
        self.last_messages: list[dict[str, str]] = []

    async def summarize(self, seed: Task, trajectory: Trajectory, known: Sequence[Task],
                        llm: ChatLLM | None) -> list[Task]:
        client = self.llm or llm
        if client is None:
            raise RunError(
                "the `llm` summarizer has no LLM to ask",
                where="explore.summarizer",
                hint="give the exploration stage an LLM, or set explore.summarizer.llm (model, base_url)",
            )
        messages = self.messages(seed, trajectory, known)
        self.last_messages = messages
        sampling = {"temperature": self.config.temperature, "max_tokens": self.config.max_tokens}
        reply = await client.chat(messages, **{k: v for k, v in sampling.items() if v is not None})
        self.stats["calls"] += 1
        tasks, counts = parse_task_blocks(reply.content, seed, known=known, max_tasks=self.config.max_tasks)
        for key, value in counts.items():
            self.stats[key] += value
        if counts["malformed"]:
            log.info("summarizer.malformed_blocks", seed=seed.task_id, malformed=counts["malformed"],
                     blocks=counts["blocks"])
        return tasks

    def messages(self, seed: Task, trajectory: Trajectory, known: Sequence[Task]) -> list[dict[str, str]]:
        """The chat messages the summarizer sends for one exploration."""
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": self.user_prompt(seed, trajectory, known)}]

    def user_prompt(self, seed: Task, trajectory: Trajectory, known: Sequence[Task]) -> str:
        pairs = action_observation_pairs(trajectory.turns)
        window = self.config.task_summary_history_length
        shown = pairs[-window:] if window else pairs
        first = len(pairs) - len(shown)
        parts = ["# Exploration record"]
        if first:
            parts.append(f"(steps 0 to {first - 1} are not shown; these are the last {len(shown)} steps)")
        if not shown:
            parts.append("(the agent took no steps that the environment answered)")
        for index, (action, observation) in enumerate(shown, start=first):
            parts.append(f">>> STEP {index} <<<\n[action]\n{mask(action, seed.query)}\n"
                         f"[observation]\n{mask(observation, seed.query)}")
        parts.append("# Objectives already found (do not repeat these)")
        queries = [task.query for task in known if task.query]
        parts.append("\n".join(f"- {query}" for query in queries) if queries else "(none yet)")
        profile = self.profile()
        if profile:
            parts.append("# The environment\n" + profile)
        parts.append(f"# Now\nWrite at most {self.config.max_tasks} new task(s) in <task> blocks.")
        return "\n\n".join(parts)

    def profile(self) -> str:
        lines = []
        if self.config.entities:
            lines.append("Entities: " + ", ".join(self.config.entities))
        if self.config.operations:
            lines.append("Operations: " + ", ".join(self.config.operations))
        if self.config.difficulty:
            lines.append("Preferred difficulty: " + self.config.difficulty)
        return "\n".join(lines)


def action_observation_pairs(turns: Sequence[Turn]) -> list[tuple[str, str]]:
    """Each assistant turn with the user/tool turn right after it; unanswered actions are dropped."""
    pairs = []
    for turn, following in zip(turns, turns[1:], strict=False):
        if turn.role == "assistant" and following.role in OBSERVATION_ROLES:
            pairs.append((turn.content, following.content))
    return pairs


def mask(text: str, query: str | None) -> str:
    """`text` with the seed query replaced, so the summarizer does not just restate the seed task."""
    if not query or not query.strip():
        return text
    return text.replace(query.strip(), MASK)


# --- parsing `<task>` blocks -------------------------------------------------------------------

_BLOCK = re.compile(r"<task>(.*?)(?:</task>|(?=<task>)|$)", re.S | re.I)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*(.*?)\s*```$", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def parse_task_blocks(text: str, seed: Task, *, known: Sequence[Task] = (),
                      max_tasks: int | None = None) -> tuple[list[Task], dict[str, int]]:
    """The tasks in an answer's `<task>` blocks, and counts of blocks seen and skipped.

    A block that is unclosed, not a JSON object, or lacks a non-empty `query` or an
    `action_sequence` is `malformed`; one whose query repeats a known task or an earlier
    block is a `duplicate`; blocks past `max_tasks` are `over_limit`.
    """
    counts = dict.fromkeys(STAT_KEYS[1:], 0)
    seen = {_normal(task.query) for task in known if task.query}
    tasks: list[Task] = []
    for match in _BLOCK.finditer(text or ""):
        counts["blocks"] += 1
        closed = match.group(0).lower().rstrip().endswith("</task>")
        fields = _block_fields(match.group(1)) if closed else None
        if fields is None:
            counts["malformed"] += 1
            continue
        query, action_sequence, confidence = fields
        if _normal(query) in seen:
            counts["duplicates"] += 1
            continue
        if max_tasks is not None and len(tasks) >= max_tasks:
            counts["over_limit"] += 1
            continue
        seen.add(_normal(query))
        tasks.append(Task(
            task_id=f"{seed.task_id}/syn-{_digest(query, action_sequence)}",
            env=seed.env,
            query=query,
            ground_truth=action_sequence,
            judge=None,
            metadata=dict(seed.metadata),
            origin="synthetic",
            seed_task_id=seed.task_id,
            confidence=confidence,
        ))
    counts["tasks"] = len(tasks)
    return tasks, counts


def _block_fields(body: str) -> tuple[str, Any, float | None] | None:
    data = _load_object(body)
    if data is None:
        return None
    query = data.get("query")
    action_sequence = data.get("action_sequence")
    if not isinstance(query, str) or not query.strip():
        return None
    if action_sequence is None or (isinstance(action_sequence, str | list | dict) and not action_sequence):
        return None
    return query.strip(), action_sequence, _confidence(data.get("confidence"))


def _load_object(body: str) -> dict[str, Any] | None:
    body = body.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        return None
    candidate = body[start:end + 1]
    for attempt in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
        try:
            data = json.loads(attempt, strict=False)  # strict=False: raw newlines inside strings
        except ValueError:
            continue
        return data if isinstance(data, dict) else None
    return None


def _confidence(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip().rstrip("%")) / (100.0 if value.strip().endswith("%") else 1.0)
        except ValueError:
            return None
    if not isinstance(value, int | float) or value != value:  # value != value: NaN
        return None
    return min(1.0, max(0.0, float(value)))


def _normal(query: str) -> str:
    return " ".join(query.lower().split())


def _digest(query: str, action_sequence: Any) -> str:
    text = json.dumps([_normal(query), action_sequence], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]
