"""`adca`: ADCA-GRPO, the self-attributing advantage of AgentEvolver (Zhai et al., 2025).

An LLM judge reads each trajectory — the task, its steps numbered as ACTION / OBSERVATION pairs
(each text cut to `max_step_chars`) and the signed outcome — and labels every step GOOD or BAD.
Per group (the rollouts of one task):

1. step rewards prm_k = +`step_reward` (GOOD) or -`step_reward` (BAD), z-scored over the group's
   steps with each *trajectory* weighted equally (a step of a 2-step trajectory weighs 1/2, of a
   10-step one 1/10), so long trajectories do not set the baseline;
2. the outcomes z-scored separately, as GRPO does;
3. r_k = alpha * prm_k (+ the outcome's z-score on the last step), where alpha decays from
   `alpha` to 0 over the first `prm_steps` training steps with a cosine (`decay: cosine`) or
   stays (`decay: none`), and `scale: inv_sqrt_k` divides it by sqrt(K) for a K-step trajectory;
4. a step's advantage is the undiscounted suffix sum A_k = sum_{j >= k} r_j, on its tokens.

After `prm_steps` training steps the estimator is plain GRPO (the judge is no longer asked). The
judge is any OpenAI-compatible endpoint (`llm`, or the spec's `llm`), asked for up to
`concurrency` trajectories at once, with the client's retries; an answer that does not label
every step is asked again (`attempts`). Judgements are cached by trajectory. A group with a
trajectory that could not be judged falls back to GRPO, counted in `fallback_groups`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import numpy as np

from beyondagent_core.advantages import AdvantageBatch, Advantages, ScoredEpisode
from beyondagent_core.errors import RunError
from beyondagent_core.llm import OpenAIChat
from beyondagent_core.logs import get_logger
from beyondagent_core.protocols import ChatLLM
from beyondagent_plugin_advantages.config import AdcaConfig
from beyondagent_plugin_advantages.groups import normalize

if TYPE_CHECKING:
    from beyondagent_core.context import RunContext

log = get_logger("beyondagent.adca")

CACHE_ENTRIES = 50_000

SYSTEM_PROMPT = (
    "You review the steps of an AI agent's episode. For each step you decide whether the action "
    "moved the agent toward accomplishing its task (GOOD) or was useless, wrong or harmful (BAD), "
    "knowing how the episode ended."
)

USER_PROMPT = """\
# Task
{query}

# How the episode ended
{outcome}

# Where the agent started
{start}

# The agent's steps
{steps}

# Your labels
Label every step from 1 to {count}. Judge each action by what it contributed: in a failed episode a \
step can still be GOOD, in a successful one a step can still be BAD. End your answer with one line \
per step, exactly in this form:
Step 1: GOOD
Step 2: BAD"""

LABEL = re.compile(r"step\s*(\d+)\s*[:.\-)]*\s*\**\s*(GOOD|BAD)\b", re.IGNORECASE)


class JudgeFailed(Exception):
    """No usable labels for a trajectory (the LLM failed, or never labelled every step)."""


def cut(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} more characters]"


def judge_prompt(episode: ScoredEpisode, max_chars: int) -> str:
    """The judge's user message for one trajectory: ACTION k and the OBSERVATION that answered it."""
    steps = episode.steps
    blocks = []
    for k, step in enumerate(steps):
        answer = steps[k + 1].observation if k + 1 < len(steps) else "(the episode ended here)"
        blocks.append(f"Step {k + 1}\nACTION: {cut(step.action, max_chars)}\nOBSERVATION: {cut(answer, max_chars)}")
    outcome = (f"SUCCESS (+1; reward {episode.outcome:g})" if episode.success
               else f"FAILURE (-1; reward {episode.outcome:g})")
    return USER_PROMPT.format(query=cut(episode.task.query or episode.task.task_id, max_chars), outcome=outcome,
                              start=cut(steps[0].observation, max_chars) if steps else "", steps="\n\n".join(blocks),
                              count=len(steps))


def parse_labels(text: str, count: int) -> list[bool] | None:
    """GOOD -> True per step 1..count (the last label given for a step wins); None if one is missing."""
    found: dict[int, bool] = {}
    for number_text, label in LABEL.findall(re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL)):
        found[int(number_text)] = label.upper() == "GOOD"
    if any(k not in found for k in range(1, count + 1)):
        return None
    return [found[k] for k in range(1, count + 1)]


def alpha_at(config: AdcaConfig, step: int) -> float:
    """The weight of the step rewards at training `step` (1-based), cosine-decayed over `prm_steps`."""
    if config.decay == "none" or config.prm_steps <= 0:
        return config.alpha
    progress = min(max(step - 1, 0) / config.prm_steps, 1.0)
    return config.alpha * 0.5 * (1.0 + math.cos(math.pi * progress))


def trajectory_weighted_z(values: list[np.ndarray], eps: float) -> list[np.ndarray]:
    """z-score step values over a group, each trajectory's steps sharing one unit of weight."""
    present = [v for v in values if len(v)]
    if not present:
        return [np.zeros(0) for _ in values]
    weights = np.concatenate([np.full(len(v), 1.0 / len(v)) for v in present])
    flat = np.concatenate(present)
    mean = float(np.sum(weights * flat) / np.sum(weights))
    std = float(np.sqrt(np.sum(weights * (flat - mean) ** 2) / np.sum(weights)))
    return [(v - mean) / (std + eps) for v in values]


def suffix_sums(rewards: np.ndarray) -> np.ndarray:
    return np.cumsum(rewards[::-1])[::-1] if len(rewards) else rewards


def run_sync(make: Any) -> Any:
    """Run the coroutine `make()` to completion from sync code, inside a running loop or not."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(make())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="adca-judge")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


class Adca:
    def __init__(self, config: AdcaConfig | None = None, *, llm: ChatLLM | None = None):
        self.config = config or AdcaConfig()
        if llm is None and self.config.llm is not None:
            llm = OpenAIChat(self.config.llm, key_path="backend.advantage.llm")
        self.llm = llm
        self._cache: OrderedDict[str, list[bool]] = OrderedDict()
        self.totals = dict.fromkeys(("judged", "cache_hits", "failures", "fallback_groups"), 0)

    def bind(self, run: RunContext) -> None:
        """Without an `llm` block of its own, the step judge asks the spec's `llm`."""
        if self.llm is None:
            self.llm = run.chat_llm()

    # --- the estimator ----------------------------------------------------------------------

    def estimate(self, batch: AdvantageBatch) -> Advantages:
        config = self.config
        by_std = batch.norm_by_std if config.norm_by_std is None else config.norm_by_std
        episodes = batch.episodes
        groups = [episode.group for episode in episodes]
        outcome_z = normalize([e.outcome for e in episodes], groups, by_std=by_std, eps=config.eps)
        grpo = [(episode.token_mask * outcome_z[i]).astype(np.float32) for i, episode in enumerate(episodes)]
        metrics = {"active": 0.0, "alpha": 0.0}
        if batch.step > config.prm_steps:
            return Advantages(per_token=grpo, metrics=metrics)
        if self.llm is None:
            raise RunError("the `adca` advantage estimator has no LLM to judge steps with",
                           where="backend.advantage.llm",
                           hint="set backend.advantage.llm (model, base_url) or the spec's `llm`")

        before = dict(self.totals)
        labels = run_sync(lambda: self._judge_all(episodes))
        alpha = alpha_at(config, batch.step)
        per_token = list(grpo)
        fallback = 0
        members: dict[Hashable, list[int]] = {}
        for index, episode in enumerate(episodes):
            members.setdefault(episode.group, []).append(index)
        good = judged_steps = 0
        per_step: list[np.ndarray | None] = [None] * len(episodes)  # r_k of each judged episode, for the viewer
        for indices in members.values():
            if any(labels[i] is None for i in indices):
                fallback += 1
                continue
            prm = [np.where(np.array(labels[i], dtype=bool), config.step_reward, -config.step_reward)
                   if labels[i] else np.zeros(0) for i in indices]
            prm_z = trajectory_weighted_z(prm, config.eps)
            for i, z in zip(indices, prm_z):
                episode = episodes[i]
                if not episode.steps:
                    continue
                good += int(sum(labels[i]))
                judged_steps += len(labels[i])
                weight = alpha / math.sqrt(len(z)) if config.scale == "inv_sqrt_k" else alpha
                rewards = weight * z
                rewards[-1] += outcome_z[i]
                if len(rewards) == len(episode.steps):
                    per_step[i] = rewards.astype(np.float32)
                values = np.zeros(episode.length, dtype=np.float32)
                for step, advantage in zip(episode.steps, suffix_sums(rewards)):
                    values[step.start:step.end] = advantage
                per_token[i] = values
        self.totals["fallback_groups"] += fallback
        if fallback:
            log.warning("adca.fallback_to_grpo", groups=fallback, of=len(members), step=batch.step,
                        hint="the step judge failed for these groups; see the log above for why")
        metrics.update({
            "active": 1.0, "alpha": alpha, "fallback_groups": float(fallback),
            "good_step_share": good / judged_steps if judged_steps else 0.0,
            "judged": float(self.totals["judged"] - before["judged"]),
            "cache_hits": float(self.totals["cache_hits"] - before["cache_hits"]),
            "judge_failures": float(self.totals["failures"] - before["failures"]),
        })
        return Advantages(per_token=per_token, metrics=metrics, per_step=per_step)

    # --- the step judge ---------------------------------------------------------------------

    async def _judge_all(self, episodes: tuple[ScoredEpisode, ...]) -> list[list[bool] | None]:
        slots = asyncio.Semaphore(self.config.concurrency)

        async def one(episode: ScoredEpisode) -> list[bool] | None:
            if not episode.steps:
                return []
            async with slots:
                try:
                    return await self.judge(episode)
                except JudgeFailed as exc:
                    self.totals["failures"] += 1
                    log.warning("adca.judge_failed", task=episode.task.task_id, error=str(exc))
                    return None

        return list(await asyncio.gather(*(one(episode) for episode in episodes)))

    async def judge(self, episode: ScoredEpisode) -> list[bool]:
        """GOOD (True) / BAD per step of one trajectory; raises `JudgeFailed`."""
        prompt = judge_prompt(episode, self.config.max_step_chars)
        key = hashlib.sha256(json.dumps([SYSTEM_PROMPT, prompt]).encode()).hexdigest()
        if key in self._cache:
            self.totals["cache_hits"] += 1
            self._cache.move_to_end(key)
            return self._cache[key]
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}]
        problem = "no answer"
        for _ in range(self.config.attempts):
            try:
                turn = await self.llm.chat(messages, temperature=self.config.temperature,
                                           max_tokens=self.config.max_tokens)
            except Exception as exc:  # noqa: BLE001 - the client has retried already; fall back
                raise JudgeFailed(f"{type(exc).__name__}: {exc}") from exc
            labels = parse_labels(turn.content or "", len(episode.steps))
            if labels is not None:
                self.totals["judged"] += 1
                self._cache[key] = labels
                if len(self._cache) > CACHE_ENTRIES:
                    self._cache.popitem(last=False)
                return labels
            problem = f"the answer did not label all {len(episode.steps)} steps: {(turn.content or '')[-200:]!r}"
        raise JudgeFailed(problem)

