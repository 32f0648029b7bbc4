"""Experience-guided rollouts (self-navigating), the same for every backend.

Per group of rollouts of one task, `guided_rollouts` picks which are shown experiences (`woexp`:
none, `mixed`: round(group_size * ratio), `all`). A guided rollout's policy is wrapped in
`GuidedLLM`: on its first call the retrieved experiences are written into the last message
(the task as the workflow put it) between `EXPERIENCE_START` and `EXPERIENCE_END`, and every
later call of the episode gets the same text in the same message, so the token sequence never
sees an earlier message change. The workflow's own messages, and so the trajectory it records,
never contain the experience.

Training on a guided episode (`experience.training`): `keep` trains on the tokens the policy
saw; `strip` replays the trajectory without the experience (`stripped_sequence`: the model's
turns keep their exact sampled ids and log-probs, the context is re-rendered without the
experience text) — the sample is then off-policy, which the loss handles with its own clip;
`hybrid` strips the successful ones and keeps the rest.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Any

from beyondagent_core import metric_names
from beyondagent_core.experience import Experience
from beyondagent_core.protocols import ChatLLM
from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence, episode_tokens
from beyondagent_core.types import Trajectory, Turn

EXPERIENCE_START = "<experience>"
EXPERIENCE_END = "</experience>"
PREAMBLE = "Lessons from earlier attempts at similar tasks (use what helps):"


def guided_rollouts(group_size: int, mode: str, ratio: float, *, seed: Any) -> set[int]:
    """Which of a group's `group_size` rollouts are guided, chosen deterministically from `seed`."""
    if mode == "woexp" or group_size <= 0:
        return set()
    if mode == "all":
        return set(range(group_size))
    if mode != "mixed":
        raise ValueError(f"experience.mode must be woexp, mixed or all, got {mode!r}")
    count = min(group_size, int(round(group_size * ratio)))
    digest = hashlib.sha256(repr(seed).encode()).digest()
    return set(random.Random(int.from_bytes(digest[:8], "little")).sample(range(group_size), count))


def experience_text(experiences: Sequence[Experience]) -> str:
    """The block a guided rollout is shown, markers included."""
    lessons = "\n".join(f"{index}. {experience.text.strip()}" for index, experience in enumerate(experiences, 1))
    return f"{EXPERIENCE_START}\n{PREAMBLE}\n{lessons}\n{EXPERIENCE_END}"


class GuidedLLM:
    """A `ChatLLM` that shows one episode's policy the experiences (see the module docstring)."""

    def __init__(self, llm: ChatLLM, experiences: Sequence[Experience]):
        self.llm = llm
        self.text = experience_text(experiences)
        self.index: int | None = None  # the message that carries the experience, fixed on the first call

    def __getattr__(self, name: str) -> Any:
        return getattr(self.llm, name)

    def inject(self, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        messages = [dict(message) for message in messages]
        if not messages:
            return messages
        if self.index is None:
            self.index = len(messages) - 1
        if self.index < len(messages):
            message = messages[self.index]
            message["content"] = f"{self.text}\n\n{message.get('content') or ''}"
        return messages

    async def chat(self, messages: Sequence[dict[str, Any]], **sampling: Any) -> Turn:
        return await self.llm.chat(self.inject(messages), **sampling)


def stripped_sequence(trajectory: Trajectory, template: ChatTemplate) -> TokenSequence:
    """The episode's tokens as if no experience had been shown: its turns replayed (model turns exact)."""
    return episode_tokens(trajectory.turns, template)


def trains_stripped(training: str, success: bool) -> bool:
    """Whether a guided episode is trained on without its experience (`strip`, or `hybrid` and it succeeded)."""
    if training == "strip":
        return True
    if training == "hybrid":
        return success
    return False


class Guidance:
    """One run's experience-guided rollouts: which rollouts see which lessons, and learning new ones.

    Backend-independent: a backend asks `guides(tasks, group_size, seed)` for each training job's
    experiences (None: unguided), trains (stripping where `trains_stripped` says so), then calls
    `learn(trajectories, step)` and logs `metrics(...)`.
    """

    def __init__(self, block: Any, store: Any):
        self.block, self.store = block, store
        self.retrieved_per_group: list[int] = []

    def guides(self, tasks: Sequence[Any], group_size: int, *, seed: Any) -> list[list[Experience] | None]:
        """Per job, in the order (task 0 rollout 0, task 0 rollout 1, ...): its experiences or None."""
        self.retrieved_per_group = []
        jobs: list[list[Experience] | None] = []
        for index, task in enumerate(tasks):
            chosen = guided_rollouts(group_size, self.block.mode, self.block.ratio, seed=(seed, index, task.task_id))
            experiences = self.store.retrieve(task, self.block.k) if chosen else []
            self.retrieved_per_group.append(len(experiences))
            jobs += [experiences if rollout in chosen and experiences else None for rollout in range(group_size)]
        return jobs

    async def learn(self, trajectories: Sequence[Trajectory], step: int) -> int:
        """Summarize `trajectories` into new experiences every `summarize_every` steps; how many were new."""
        if step % self.block.summarize_every:
            return 0
        return self.store.add(await self.store.summarize(trajectories, step=step))

    def metrics(self, guided: Sequence[bool], success: Sequence[bool], added: int,
                retrieved_per_group: Sequence[int] | None = None) -> dict[str, float]:
        """`experience/...` and the success of guided and unguided rollouts of this step.

        `retrieved_per_group`: the lessons each group was shown (default: what `guides` retrieved
        last; a backend whose rollouts retrieve elsewhere, like verl's agent-loop workers, passes it).
        """
        retrieved = list(self.retrieved_per_group if retrieved_per_group is None else retrieved_per_group)
        out = {"experience/added": float(added),
               "experience/retrieved_per_group": sum(retrieved) / len(retrieved) if retrieved else 0.0,
               "experience/hit_rate": sum(1 for n in retrieved if n) / len(retrieved) if retrieved else 0.0,
               "experience/guided_fraction": sum(guided) / len(guided) if guided else 0.0}
        total = self.store.stats().get("total")
        if total is not None:
            out["experience/total"] = float(total)
        for name, flag in ((metric_names.TRAIN_SUCCESS_RATE_GUIDED, True),
                           (metric_names.TRAIN_SUCCESS_RATE_UNGUIDED, False)):
            chosen = [ok for ok, g in zip(success, guided) if g is flag]
            if chosen:
                out[name] = sum(chosen) / len(chosen)
        return out
