"""Rollout: run a batch of episodes concurrently against the policy and collect their tokens.

Every episode gets its own `PolicyChat` (its token sequence and random generator, seeded
from the run seed, the step and the episode's index, so a resumed run samples the same
episodes) and shares the ChatScheduler, which batches their turns. An episode of the `agent`
workflow may come back as several samples (its gateway calls did not all extend one another:
`beyondagent_plugin_gateway.samples`); they share the episode's reward and group. An episode
with a guide (`beyondagent_core.runtime.guidance.Guide`) is shown experiences or starts from a
stored prefix; the turns it replayed are recorded in its trajectory's `prefix_turns` metric. An
episode with several seats (a game the policy plays against itself: `beyondagent_core.runtime.seats`)
comes back as one Episode per seat, each from its own PolicyChat, in seat order after one another;
in a game against the opponent pool (`opponent_pool.py`) the frozen snapshot's seats are played on its
own scheduler and left out: only the policy's seats come back, each with the opponent it met.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import attrs

from beyondagent_core.runtime.episodes import EpisodeRunner
from beyondagent_core.runtime.guidance import Guide, PrefixLLM, wrapped
from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence
from beyondagent_core.types import Task, Trajectory
from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
from beyondagent_plugin_torch.opponent_pool import Opponent, game_score
from beyondagent_plugin_torch.policy_chat import PolicyChat
from beyondagent_plugin_torch.seeds import episode_seed

__all__ = ["Episode", "episode_seed", "rollout"]  # episode_seed: where the trainer and tests import it from


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
    opponent: Opponent | None = None  # the pool snapshot that played the game's other seats
    pool_score: float | None = None  # against it: 1 won (a higher reward than every other seat), 0.5 level, 0 lost

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


async def rollout(jobs: Sequence[tuple[int, Task]], *, runner: EpisodeRunner, scheduler: ChatScheduler,
                  template: ChatTemplate, sampling: Sampling, max_episode_tokens: int, max_concurrency: int,
                  seed: tuple[object, ...], guides: Sequence[Guide | None] | None = None,
                  opponents: Sequence[Opponent | None] | None = None) -> list[Episode]:
    """Run `(group, task)` jobs, at most `max_concurrency` at once; results keep the jobs' order.

    `guides[i]`, when given and not None, is what job i's policy is given: experiences shown in its
    prompt (`GuidedLLM`) or a stored prefix replayed first (`PrefixLLM`). `opponents[i]`, when given
    and not None, is the pool snapshot that plays job i's other seats (a multi-seat game's).
    """
    slots = asyncio.Semaphore(max_concurrency)

    async def one(index: int, group: int, task: Task) -> list[Episode]:
        guide = guides[index] if guides is not None else None
        opponent = opponents[index] if opponents is not None else None
        chats: dict[int, PolicyChat] = {}
        llms: dict[int, Any] = {}
        frozen: set[int] = set()  # the seats the opponent plays (whether or not the game reached their turn)

        def seat_llm(seat: int, seats: int | None = None) -> Any:
            """Seat `seat`'s chat: its own sequence and generator (seat 0's seed is a one-seat episode's),
            on the opponent's scheduler when the opponent plays it."""
            if opponent is not None and seats is not None:
                frozen.update(k for k in range(seats) if opponent.plays(k, seats))
            if seat not in llms:
                parts = (index,) if seat == 0 else (index, "seat", seat)
                theirs = seat in frozen
                chats[seat] = PolicyChat(opponent.entry.scheduler if theirs else scheduler, template, sampling,
                                         episode=index, max_episode_tokens=max_episode_tokens,
                                         seed=episode_seed(*seed, *parts), presence=presence)
                llms[seat] = chats[seat] if theirs else wrapped(chats[seat], guide)
            return llms[seat]

        async with slots:
            try:
                with scheduler.episode() as presence:
                    trajectories = await runner.run_seats(task, seat_llm)
            finally:
                for chat in chats.values():
                    chat.close()
        episodes = []
        pool_score = None
        if frozen:  # the policy's seats only; its score against the best of the snapshot's (none if one failed)
            mine = [t for t in trajectories if (t.seat or 0) not in frozen]
            theirs = [t for t in trajectories if (t.seat or 0) in frozen]
            if mine and theirs and all(t.error is None and t.reward is not None for t in trajectories):
                pool_score = game_score(float(mine[0].reward.score), max(float(t.reward.score) for t in theirs))
            trajectories = mine or [t for t in trajectories if t.error is not None][:1]  # a failure stays counted
            for trajectory in trajectories:
                trajectory.metrics["opponent_step"] = opponent.entry.step  # the snapshot's (records, viewer)
        for trajectory in trajectories:
            seat = trajectory.seat or 0
            llm = llms.get(seat)
            prefixed = llm.replayed if isinstance(llm, PrefixLLM) else 0  # fewer if the env ended first
            if prefixed:
                trajectory.metrics["prefix_turns"] = prefixed
            first, *more = chats[seat].samples if seat in chats else [TokenSequence(template)]
            episodes.append(Episode(group=group, trajectory=trajectory, sequence=first, seat=trajectory.seat,
                                    guided=guide is not None and guide.guided, prefixed=prefixed, more_samples=more,
                                    opponent=opponent if frozen else None, pool_score=pool_score))
        return episodes

    done = await asyncio.gather(*(one(i, group, task) for i, (group, task) in enumerate(jobs)))
    return [episode for episodes in done for episode in episodes]
