"""Rollout: run a batch of episodes concurrently against the policy and collect their tokens.

Every episode gets its own `PolicyChat` (its token sequence and random generator, seeded
from the run seed, the step and the episode's index, so a resumed run samples the same
episodes) and shares the ChatScheduler, which batches their turns. An episode of the `agent`
workflow may come back as several samples (its gateway calls did not all extend one another:
`beyondagent_plugin_gateway.samples`); they share the episode's reward and group. An episode
with a guide (`beyondagent_core.runtime.guidance.Guide`) is shown experiences or starts from a
stored prefix; the turns it replayed are recorded in its trajectory's `prefix_turns` metric. An
episode with several seats (a game the policy plays against itself: `beyondagent_core.runtime.seats`)
comes back as one Episode per seat, each from its own PolicyChat, in seat order after one another.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any

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
    seat: int | None = None  # the seat it played in a multi-seat episode (its trajectory's)

    @property
    def baseline_group(self) -> object:
        """The group its advantage is measured against: its GRPO group, per seat in a multi-seat episode
        (seat 0 and seat 1 of a game are different roles: each is compared with the same seat's games)."""
        return self.group if self.seat is None else (self.group, self.seat)

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

    async def one(index: int, group: int, task: Task) -> list[Episode]:
        guide = guides[index] if guides is not None else None
        chats: dict[int, PolicyChat] = {}
        llms: dict[int, Any] = {}

        def seat_llm(seat: int) -> Any:
            """Seat `seat`'s chat: its own sequence and generator (seat 0's seed is a one-seat episode's)."""
            if seat not in llms:
                parts = (index,) if seat == 0 else (index, "seat", seat)
                chats[seat] = PolicyChat(scheduler, template, sampling, episode=index,
                                         max_episode_tokens=max_episode_tokens, seed=episode_seed(*seed, *parts))
                llms[seat] = wrapped(chats[seat], guide)
            return llms[seat]

        async with slots:
            try:
                with scheduler.episode():
                    trajectories = await runner.run_seats(task, seat_llm)
            finally:
                for chat in chats.values():
                    chat.close()
        episodes = []
        for trajectory in trajectories:
            seat = trajectory.seat or 0
            llm = llms.get(seat)
            prefixed = llm.replayed if isinstance(llm, PrefixLLM) else 0  # fewer if the env ended first
            if prefixed:
                trajectory.metrics["prefix_turns"] = prefixed
            first, *more = chats[seat].samples if seat in chats else [TokenSequence(template)]
            episodes.append(Episode(group=group, trajectory=trajectory, sequence=first, seat=trajectory.seat,
                                    guided=guide is not None and guide.guided, prefixed=prefixed, more_samples=more))
        return episodes

    done = await asyncio.gather(*(one(i, group, task) for i, (group, task) in enumerate(jobs)))
    return [episode for episodes in done for episode in episodes]
