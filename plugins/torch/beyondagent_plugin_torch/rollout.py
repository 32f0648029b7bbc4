"""Rollout: run a batch of episodes concurrently against the policy and collect their tokens.

Every episode gets its own `PolicyChat` (its token sequence and random generator, seeded
from the run seed, the step and the episode's index, so a resumed run samples the same
episodes) and shares the ChatScheduler, which batches their turns. An episode of the `agent`
workflow may come back as several samples (its gateway calls did not all extend one another:
`beyondagent_plugin_gateway.samples`); they share the episode's reward and group. An episode
with a guide (`beyondagent_core.runtime.guidance.Guide`) is shown experiences or starts from a
stored prefix; the turns it replayed are recorded in its trajectory's `prefix_turns` metric.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence

import attrs

from beyondagent_core.runtime.episodes import EpisodeRunner
from beyondagent_core.runtime.guidance import Guide, PrefixLLM, wrapped
from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence
from beyondagent_core.types import Task, Trajectory
from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
from beyondagent_plugin_torch.policy_chat import PolicyChat


@attrs.define
class Episode:
    """One finished episode: its GRPO group, the trajectory and the exact token sequence."""

    group: int
    trajectory: Trajectory
    sequence: TokenSequence
    guided: bool = False  # the policy was shown experiences (`experience`)
    prefixed: int = 0  # turns replayed from a stored successful prefix before the policy acted
    off_policy: bool = False  # trained on tokens other than those it saw (a stripped guided episode)
    more_samples: list[TokenSequence] = attrs.Factory(list)  # a split gateway episode's other samples
    policy_version: int = 0  # updates the policy had taken when it generated this episode (async_rollout.py)

    @property
    def samples(self) -> list[TokenSequence]:
        """The episode's training samples: `sequence`, then any others (one row each in the batch)."""
        return [self.sequence, *self.more_samples]

    @property
    def generated_tokens(self) -> int:
        return sum(sample.generated_tokens for sample in self.samples)

    @property
    def model_turns(self) -> int:
        return sum(len(sample.turn_spans) for sample in self.samples)

    @property
    def score(self) -> float:
        reward = self.trajectory.reward
        return 0.0 if reward is None else float(reward.score)

    @property
    def trainable(self) -> bool:
        return self.trajectory.error is None and self.generated_tokens > 0


def episode_seed(*parts: object) -> int:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


async def rollout(jobs: Sequence[tuple[int, Task]], *, runner: EpisodeRunner, scheduler: ChatScheduler,
                  template: ChatTemplate, sampling: Sampling, max_episode_tokens: int, max_concurrency: int,
                  seed: tuple[object, ...], guides: Sequence[Guide | None] | None = None,
                  ) -> list[Episode]:
    """Run `(group, task)` jobs, at most `max_concurrency` at once; results keep the jobs' order.

    `guides[i]`, when given and not None, is what job i's policy is given: experiences shown in its
    prompt (`GuidedLLM`) or a stored prefix replayed first (`PrefixLLM`).
    """
    slots = asyncio.Semaphore(max_concurrency)

    async def one(index: int, group: int, task: Task) -> Episode:
        async with slots:
            chat = PolicyChat(scheduler, template, sampling, episode=index, max_episode_tokens=max_episode_tokens,
                              seed=episode_seed(*seed, index))
            guide = guides[index] if guides is not None else None
            llm = wrapped(chat, guide)
            try:
                with scheduler.episode():
                    trajectory = await runner.run(task, llm)
            finally:
                chat.close()
            prefixed = llm.replayed if isinstance(llm, PrefixLLM) else 0  # fewer if the env ended first
            if prefixed:
                trajectory.metrics["prefix_turns"] = prefixed
            first, *more = chat.samples
            return Episode(group=group, trajectory=trajectory, sequence=first,
                           guided=guide is not None and guide.guided, prefixed=prefixed, more_samples=more)

    return list(await asyncio.gather(*(one(i, group, task) for i, (group, task) in enumerate(jobs))))
