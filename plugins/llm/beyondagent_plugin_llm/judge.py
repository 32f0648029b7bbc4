"""`llm_judge`: an LLM grades a trajectory against its task and reference solution.

The judge sees the task's query, its reference (`task.ground_truth`, any JSON value, e.g. a
synthetic task's action sequence) and the episode rendered as a transcript, and answers with a
verdict: `binary` mode asks for yes/no, `score` mode for a number from 0 to 1. `k` judgements
run in parallel and are averaged; `success` is `score >= threshold`.

Verdict parsing is lenient, because models are: `<verdict>yes</verdict>`, `<score>0.7</score>`,
`{"score": 1}` (bare or in a fenced block), `Score: 0.7`, `7/10`, `85%`, a bare `YES`; the last
verdict in the answer wins and `<think>` blocks are ignored. A judgement that cannot be parsed
is left out of the average and recorded in `Reward.details`; when none parses the score is 0.
When every judgement's request failed (retries through the client used up), the LLM error is
raised, and the episode becomes an error record. Rewards are cached in memory by a hash of the
task, the turns and the judge settings, so an episode seen twice is judged once.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import attrs

from beyondagent_core.errors import RunError
from beyondagent_core.llm import LLMError, OpenAIChat
from beyondagent_core.logs import get_logger
from beyondagent_core.protocols import ChatLLM
from beyondagent_core.types import Reward, Task, Trajectory, Turn
from beyondagent_plugin_llm.config import LLMJudgeConfig

if TYPE_CHECKING:
    from beyondagent_core.context import RunContext

log = get_logger("beyondagent.llm_judge")

CACHE_ENTRIES = 100_000
RAW_CHARS_KEPT = 400

SYSTEM_PROMPT = (
    "You are a strict, impartial grader of an AI agent's work. You compare what the agent did "
    "with the task and its reference solution, and you judge only whether the task was accomplished."
)

DEFAULT_PROMPT = """\
# Task
{query}

# Reference solution
{reference}

The reference is one correct way to accomplish the task; other ways that reach the same result count too.

# The agent's episode
{transcript}

# Your judgement
{instructions}"""

INSTRUCTIONS = {
    "binary": "Think briefly about whether the agent accomplished the task, then end your answer with "
              "<verdict>yes</verdict> if it did, or <verdict>no</verdict> if it did not.",
    "score": "Think briefly about how much of the task the agent accomplished, then end your answer with "
             "<score>S</score>, where S is a number from 0 (nothing) to 1 (fully accomplished).",
}


@attrs.frozen
class _Judgement:
    score: float | None
    raw: str = ""
    error: str | None = None
    llm_failed: bool = False


class LLMJudge:
    """The `Judge` protocol over an LLM; `llm` overrides the client built from `config.llm`."""

    def __init__(self, config: LLMJudgeConfig | None = None, *, llm: ChatLLM | None = None,
                 key_path: str = "reward.llm"):
        self.config = config or LLMJudgeConfig()
        if llm is None and self.config.llm is not None:
            llm = OpenAIChat(self.config.llm, key_path=key_path)
        self.llm: ChatLLM | None = llm
        self.stats = dict.fromkeys(("episodes", "cache_hits", "judgements", "unparseable", "llm_failures"), 0)
        self._cache: OrderedDict[str, Reward] = OrderedDict()
        self._pending: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}
        self._lock = threading.Lock()  # the cache may be shared by loops in several threads

    def bind(self, run: RunContext) -> None:
        """Without an `llm` block of its own, the judge asks the spec's `llm`."""
        if self.llm is None:
            self.llm = run.chat_llm()

    async def score(self, task: Task, trajectory: Trajectory) -> Reward:
        if self.llm is None:
            raise RunError("the `llm_judge` reward has no LLM to ask",
                           hint="set its llm block (model, base_url), or the spec's top-level llm")
        self.stats["episodes"] += 1
        if not self.config.cache:
            return await self._grade(task, trajectory)
        key = self.cache_key(task, trajectory)
        while True:
            hit = self._cached(key)
            if hit is not None:
                return hit
            loop = asyncio.get_running_loop()
            with self._lock:
                pending = self._pending.get(key)
                if pending is None or pending[0] is not loop:
                    future = loop.create_future()
                    self._pending[key] = (loop, future)
                    break
            await asyncio.shield(pending[1])  # the same episode is being judged: wait, then read the cache
            if not self._has(key):  # that judging failed; judge it here
                return await self._grade(task, trajectory)
        try:
            reward = await self._grade(task, trajectory)
            if reward.details.get("parsed", 0) > 0:
                with self._lock:
                    self._cache[key] = reward
                    if len(self._cache) > CACHE_ENTRIES:
                        self._cache.popitem(last=False)
            return reward
        finally:
            with self._lock:
                self._pending.pop(key, None)
            future.set_result(None)

    def cache_key(self, task: Task, trajectory: Trajectory) -> str:
        """A hash of the task's fields, the trajectory's turns and every setting that changes a verdict."""
        llm = self.config.llm or getattr(self.llm, "config", None)  # its own block, or the spec's llm
        keys = ("model", "base_url", "temperature", "top_p", "top_k", "max_tokens")
        model = [getattr(llm, key, None) for key in keys]
        payload = {
            "task": task.to_dict(),
            "turns": [[turn.role, turn.content, turn.tool_calls] for turn in trajectory.turns],
            "judge": [self.config.mode, self.config.k, self.config.threshold, self.config.prompt, *model],
        }
        text = json.dumps(payload, sort_keys=True, default=repr, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def messages(self, task: Task, trajectory: Trajectory) -> list[dict[str, str]]:
        """The chat messages one judgement sends."""
        template = self.config.prompt or DEFAULT_PROMPT
        user = template.format(
            query=task.query if task.query else "(the environment's own task, as shown in the episode)",
            reference=render_reference(task.ground_truth),
            transcript=render_transcript(trajectory.turns),
            instructions=INSTRUCTIONS[self.config.mode],
        )
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]

    def _cached(self, key: str) -> Reward | None:
        with self._lock:
            reward = self._cache.get(key)
            if reward is None:
                return None
            self._cache.move_to_end(key)
        self.stats["cache_hits"] += 1
        return attrs.evolve(reward, details={**reward.details, "cached": True})

    def _has(self, key: str) -> bool:
        with self._lock:
            return key in self._cache

    async def _grade(self, task: Task, trajectory: Trajectory) -> Reward:
        messages = self.messages(task, trajectory)
        judgements = await asyncio.gather(*(self._judge_once(messages) for _ in range(self.config.k)))
        self.stats["judgements"] += len(judgements)
        scores = [j.score for j in judgements if j.score is not None]
        failed = [j for j in judgements if j.score is None]
        self.stats["unparseable"] += sum(1 for j in failed if not j.llm_failed)
        self.stats["llm_failures"] += sum(1 for j in failed if j.llm_failed)
        if not scores and all(j.llm_failed for j in judgements):
            raise LLMError(f"llm_judge: all {len(judgements)} judgement(s) failed: {judgements[0].error}",
                           where=f"task {task.task_id}")
        details = {
            "mode": self.config.mode,
            "k": self.config.k,
            "parsed": len(scores),
            "failed": len(failed),
            "scores": scores,
            "errors": [j.error for j in failed],
            "raw": [j.raw[-RAW_CHARS_KEPT:] for j in judgements],
            "cached": False,
        }
        if not scores:
            log.warning("llm_judge.unparseable", task=task.task_id, k=self.config.k)
            return Reward(0.0, success=False, reason=f"llm_judge: no verdict could be parsed from "
                                                     f"{len(judgements)} judgement(s)", details=details)
        score = sum(scores) / len(scores)
        success = score >= self.config.threshold
        if self.config.mode == "binary":
            reason = f"llm_judge: {sum(1 for s in scores if s == 1.0)}/{len(scores)} judgement(s) say yes"
        else:
            reason = f"llm_judge: mean score {score:.3f} over {len(scores)} judgement(s)"
        if failed:
            reason += f" ({len(failed)} unusable)"
        return Reward(score, success=success, reason=reason, details=details)

    async def _judge_once(self, messages: list[dict[str, str]]) -> _Judgement:
        try:
            turn = await self.llm.chat(messages)
        except LLMError as exc:
            return _Judgement(None, error=f"llm: {exc.message}", llm_failed=True)
        value = parse_verdict(turn.content)
        if value is None:
            return _Judgement(None, raw=turn.content, error="unparseable verdict")
        if self.config.mode == "binary":
            value = 1.0 if value >= 0.5 else 0.0
        return _Judgement(value, raw=turn.content)


# --- rendering -------------------------------------------------------------------------------


def render_reference(ground_truth: Any) -> str:
    if ground_truth is None:
        return "(none given: judge from the task alone)"
    if isinstance(ground_truth, str):
        return ground_truth
    return json.dumps(ground_truth, ensure_ascii=False, indent=2, default=str)


def render_transcript(turns: list[Turn]) -> str:
    """One block per turn: `[role]` then its content (and its tool calls, as JSON)."""
    blocks = []
    for turn in turns:
        text = f"[{turn.role}]\n{turn.content}"
        if turn.tool_calls:
            text += "\n(tool calls) " + json.dumps(turn.tool_calls, ensure_ascii=False, default=str)
        blocks.append(text)
    return "\n\n".join(blocks) if blocks else "(the episode has no turns)"


# --- verdict parsing -------------------------------------------------------------------------

_THINK = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)
_TAG = re.compile(r"<\s*(verdict|score|grade|answer|judgement|judgment)\s*>\s*(.*?)\s*<\s*/\s*\1\s*>", re.S | re.I)
_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.S)
_OBJECT = re.compile(r"\{[^{}]*\}", re.S)
_LABELLED = re.compile(
    r"\b(verdict|score|grade|rating|judgement|judgment|final answer|answer|result|correct|success)\b"
    r"\**\s*[:=]\s*\**\s*([^\n,;]+)", re.I)
_NUMBER = re.compile(r"^([+-]?\d+(?:\.\d+)?|[+-]?\.\d+)\s*(?:(/)\s*(\d+(?:\.\d+)?)|(%))?")
_OPENING_WORD = re.compile(r"([a-z]+)\s*(?:[,.;:!()\-]|$)")
_JSON_KEYS = ("score", "verdict", "success", "correct", "pass", "passed", "grade", "rating", "result")
YES = frozenset({"yes", "y", "true", "correct", "pass", "passed", "success", "successful", "succeeded",
                 "accomplished", "solved", "complete", "completed"})
NO = frozenset({"no", "n", "false", "incorrect", "fail", "failed", "failure", "wrong", "unsuccessful",
                "unsolved", "incomplete", "not accomplished"})


def parse_verdict(text: str) -> float | None:
    """The verdict in a judge's answer as a number in [0, 1] (yes = 1, no = 0), or None."""
    text = _THINK.sub("", text or "").strip()
    if not text:
        return None
    for finder in (_from_tags, _from_json, _from_labels, _from_whole, _from_last_line):
        value = finder(text)
        if value is not None:
            return value
    return None


def verdict_value(raw: Any) -> float | None:
    """One verdict value (`yes`, `0.7`, `7/10`, `85%`, `true`, 1) as a number in [0, 1], or None."""
    if isinstance(raw, bool):
        return 1.0 if raw else 0.0
    if isinstance(raw, int | float):
        return float(raw) if 0.0 <= raw <= 1.0 else None
    if not isinstance(raw, str):
        return None
    word = raw.strip().strip("*_`'\"").strip().rstrip(".!").strip().lower()
    if word in YES:
        return 1.0
    if word in NO:
        return 0.0
    match = _NUMBER.match(word)
    if match:
        number = float(match.group(1))
        if match.group(2):
            denominator = float(match.group(3))
            number = number / denominator if denominator > 0 else -1.0
        elif match.group(4):
            number /= 100.0
        return number if 0.0 <= number <= 1.0 else None
    # A verdict word that opens the answer counts only as a clause of its own ("Yes, it did", "No.", "Correct -
    # ..."): followed by another word it is not the verdict ("No doubt, it succeeded", "Success rate: 0%").
    opening = _OPENING_WORD.match(word)
    first = opening.group(1) if opening else None
    if first in YES:
        return 1.0
    if first in NO:
        return 0.0
    return None


def _from_tags(text: str) -> float | None:
    for match in reversed(list(_TAG.finditer(text))):
        value = verdict_value(match.group(2))
        if value is not None:
            return value
    return None


def _from_json(text: str) -> float | None:
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [m.group(0) for m in _OBJECT.finditer(text)]
    for candidate in reversed(candidates):
        try:
            data = json.loads(candidate.strip())
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        lowered = {str(key).lower(): value for key, value in data.items()}
        for key in _JSON_KEYS:
            if key in lowered:
                value = verdict_value(lowered[key])
                if value is not None:
                    return value
    return None


def _from_labels(text: str) -> float | None:
    for match in reversed(list(_LABELLED.finditer(text))):
        value = verdict_value(match.group(2))
        if value is not None:
            return value
    return None


def _from_whole(text: str) -> float | None:
    return verdict_value(text) if len(text) <= 40 else None


def _from_last_line(text: str) -> float | None:
    lines = [line for line in text.splitlines() if line.strip()]
    return verdict_value(lines[-1]) if lines and len(lines[-1]) <= 40 else None
