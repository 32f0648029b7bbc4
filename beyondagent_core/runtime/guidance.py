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

Prefix sampling (`experience.prefix_ratio`, `prefix_rollouts`): some of a group's unguided
rollouts start from a stored successful trajectory of the same task (`store.examples_of(task)`).
`PrefixLLM` answers the episode's first `prefix_length` calls with that trajectory's model turns
(the workflow steps the env with them as with any reply), then hands over to the policy. A
replayed turn carries no token ids: the token sequence renders it as context (mask 0), so the
policy is trained only on the turns it sampled itself, on-policy, from the state the prefix
reached (as PrefixRL and Prefix Sampling do); the episode keeps its group, its reward is the
whole episode's.

Validation (`experience.val_mode: all`) shows each rollout the top `k` experiences through
`scoring_experiences`, which asks the store to leave out records of the task being scored and
drops any it returns anyway (`same_task`; counted and logged): a record of that task is its
answer, not an example.
"""

from __future__ import annotations

import hashlib
import inspect
import random
from collections.abc import Sequence
from typing import Any

import attrs

from beyondagent_core import metric_names
from beyondagent_core.errors import SpecError
from beyondagent_core.experience import Experience, same_task
from beyondagent_core.logs import get_logger
from beyondagent_core.protocols import ChatLLM
from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence, episode_tokens
from beyondagent_core.types import Task, Trajectory, Turn

log = get_logger("beyondagent.experience")

EXPERIENCE_START = "<experience>"
EXPERIENCE_END = "</experience>"
PREAMBLE = "Lessons from earlier attempts at similar tasks (use what helps):"
EXAMPLES_PREAMBLE = "Worked examples: successful attempts at similar tasks (use what helps):"


def guided_rollouts(group_size: int, mode: str, ratio: float, *, seed: Any) -> set[int]:
    """Which of a group's `group_size` rollouts are guided, chosen deterministically from `seed`."""
    if mode == "woexp" or group_size <= 0:
        return set()
    if mode == "all":
        return set(range(group_size))
    if mode != "mixed":
        raise ValueError(f"experience.mode must be woexp, mixed or all, got {mode!r}")
    count = min(group_size, int(round(group_size * ratio)))
    return set(_rng(seed).sample(range(group_size), count))


def prefix_rollouts(group_size: int, ratio: float, *, taken: set[int], seed: Any) -> set[int]:
    """Which of a group's rollouts start from a stored prefix: round(group_size * ratio) of those not
    `taken` (the guided ones), chosen deterministically from `seed`."""
    free = [rollout for rollout in range(group_size) if rollout not in taken]
    count = min(len(free), int(round(group_size * ratio)))
    return set(_rng(("prefix", seed)).sample(free, count)) if count > 0 else set()


def prefix_length(turns: int, fraction: float) -> int:
    """How many of a stored trajectory's `turns` model turns are replayed: round(turns * fraction), at
    least one and at most all but the last (the policy always acts); 0 for a one-turn trajectory."""
    if turns < 2:
        return 0
    return min(turns - 1, max(1, int(round(turns * fraction))))


def replay_turns(experience: Experience) -> list[dict[str, Any]]:
    """A record's replayable model turns (`metadata["turns"]`); [] when it has none or they are malformed."""
    turns = (experience.metadata or {}).get("turns")
    if not isinstance(turns, list) or not all(isinstance(t, dict) and isinstance(t.get("content"), str)
                                              for t in turns):
        return []
    return turns


def takes_keyword(function: Any, name: str) -> bool:
    """Whether `function` accepts the keyword argument `name` (a store's `retrieve` written before it may not)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name and p.kind is not p.POSITIONAL_ONLY or p.kind is p.VAR_KEYWORD for p in parameters)


def _rng(seed: Any) -> random.Random:
    digest = hashlib.sha256(repr(seed).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


def experience_text(experiences: Sequence[Experience]) -> str:
    """The block a guided rollout is shown, markers included (worked examples, when all of them are)."""
    lessons = "\n".join(f"{index}. {experience.text.strip()}" for index, experience in enumerate(experiences, 1))
    preamble = EXAMPLES_PREAMBLE if experiences and all(e.kind == "example" for e in experiences) else PREAMBLE
    return f"{EXPERIENCE_START}\n{preamble}\n{lessons}\n{EXPERIENCE_END}"


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


class PrefixLLM:
    """A `ChatLLM` that answers an episode's first calls with stored model turns, then asks the policy.

    The replayed turns come back without token ids, so the episode's token sequence renders them
    as context (loss mask 0) when the policy is first asked: they are in its prompt, never in
    what it is trained to produce. `replayed` counts the turns given so far.
    """

    def __init__(self, llm: ChatLLM, turns: Sequence[dict[str, Any]]):
        self.llm = llm
        self.turns = list(turns)
        self.replayed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.llm, name)

    def gateway_episode(self, **kwargs: Any) -> Any:
        raise RuntimeError("experience.prefix_ratio replays turns through llm.chat(); the `agent` workflow talks to "
                           "the gateway, so its episodes cannot start from a prefix: set experience.prefix_ratio: 0")

    async def chat(self, messages: Sequence[dict[str, Any]], **sampling: Any) -> Turn:
        if self.replayed < len(self.turns):
            turn = self.turns[self.replayed]
            self.replayed += 1
            return Turn("assistant", turn["content"], tool_calls=turn.get("tool_calls") or None, finish_reason="stop")
        return await self.llm.chat(messages, **sampling)


@attrs.frozen
class Guide:
    """What one rollout is given: `experiences` shown in its prompt, or a `prefix` of a stored success
    of its task replayed before the policy acts (`prefix_source`: that record's id). Never both."""

    experiences: tuple[Experience, ...] = ()
    prefix: tuple[dict[str, Any], ...] = ()
    prefix_source: str | None = None

    @property
    def guided(self) -> bool:
        return bool(self.experiences)

    @property
    def prefixed(self) -> int:
        """The turns replayed (0: none)."""
        return len(self.prefix)

    def wrap(self, llm: ChatLLM) -> ChatLLM:
        """The episode's `llm`: the policy behind `PrefixLLM` or `GuidedLLM`."""
        if self.prefix:
            return PrefixLLM(llm, self.prefix)
        return GuidedLLM(llm, self.experiences) if self.experiences else llm


def wrapped(llm: ChatLLM, guide: Guide | None) -> ChatLLM:
    return guide.wrap(llm) if guide is not None else llm


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
    """One run's experience-guided rollouts: which rollouts see which lessons or start from a stored
    prefix, validation's retrieval (and its guard), and learning new experiences.

    Backend-independent: a backend asks `guides(tasks, group_size, seed)` for a training batch (or
    `guide(task, group_size, rollout, seed=...)` for one rollout) and `val_guides(tasks)` for
    validation (None: plain), runs each rollout with `wrapped(llm, guide)`, trains (stripping where
    `trains_stripped` says so), then calls `learn(trajectories, step)` and logs `metrics(...)`.
    """

    def __init__(self, block: Any, store: Any):
        self.block, self.store = block, store
        self.retrieved_per_group: list[int] = []
        self.leaks_blocked = 0  # records of the task being scored a store returned at validation, dropped
        self._warned_leak = False
        self._store_excludes = takes_keyword(store.retrieve, "exclude_own")
        if block.prefix_ratio and not callable(getattr(store, "examples_of", None)):
            raise SpecError(f"experience.prefix_ratio is {block.prefix_ratio}, but the store ({type(store).__name__}) "
                            "keeps no trajectories to replay: it has no examples_of(task)",
                            where="experience.prefix_ratio",
                            hint="set experience.prefix_ratio: 0, or use a store that keeps successful trajectories "
                                 "(the `experience` store with summarizer: trajectory or hindsight)")

    # --- training -----------------------------------------------------------------------------

    def plan(self, group_size: int, *, seed: Any) -> tuple[set[int], set[int]]:
        """The rollouts of a group that are guided, and those that start from a prefix."""
        chosen = guided_rollouts(group_size, self.block.mode, self.block.ratio, seed=seed)
        prefixed = prefix_rollouts(group_size, self.block.prefix_ratio, taken=chosen, seed=seed) \
            if self.block.prefix_ratio else set()
        return chosen, prefixed

    def guide(self, task: Task, group_size: int, rollout: int, *, seed: Any) -> Guide | None:
        """Rollout `rollout` of `task`'s group (the group drawn from `seed`): its guide, or None."""
        chosen, prefixed = self.plan(group_size, seed=seed)
        if rollout in chosen:
            experiences = tuple(self.store.retrieve(task, self.block.k))
            return Guide(experiences=experiences) if experiences else None
        return self.prefix_guide(task, seed=(seed, rollout)) if rollout in prefixed else None

    def guides(self, tasks: Sequence[Any], group_size: int, *, seed: Any) -> list[Guide | None]:
        """Per job, in the order (task 0 rollout 0, task 0 rollout 1, ...): its guide or None."""
        self.retrieved_per_group = []
        jobs: list[Guide | None] = []
        for index, task in enumerate(tasks):
            group_seed = (seed, index, task.task_id)
            chosen, prefixed = self.plan(group_size, seed=group_seed)
            experiences = tuple(self.store.retrieve(task, self.block.k)) if chosen else ()
            self.retrieved_per_group.append(len(experiences))
            for rollout in range(group_size):
                if rollout in chosen:
                    jobs.append(Guide(experiences=experiences) if experiences else None)
                elif rollout in prefixed:
                    jobs.append(self.prefix_guide(task, seed=(group_seed, rollout)))
                else:
                    jobs.append(None)
        return jobs

    def prefix_guide(self, task: Task, *, seed: Any) -> Guide | None:
        """The first turns of one of the task's stored successful trajectories (drawn from `seed`);
        None while the store has none of at least two turns for it."""
        records = [record for record in self.store.examples_of(task) if len(replay_turns(record)) >= 2]
        if not records:
            return None
        record = records[_rng(("prefix_source", seed)).randrange(len(records))]
        turns = replay_turns(record)
        count = prefix_length(len(turns), self.block.prefix_fraction)
        return Guide(prefix=tuple(turns[:count]), prefix_source=record.experience_id)

    async def learn(self, trajectories: Sequence[Trajectory], step: int) -> int:
        """Summarize `trajectories` into new experiences every `summarize_every` steps; how many were new."""
        if step % self.block.summarize_every:
            return 0
        return self.store.add(await self.store.summarize(trajectories, step=step))

    # --- validation ---------------------------------------------------------------------------

    def val_guides(self, tasks: Sequence[Task], samples: int = 1) -> list[Guide | None]:
        """Per validation job (task 0 sample 0, task 0 sample 1, ...): `val_mode: all` shows every one
        the top `k` experiences of other tasks (`scoring_experiences`); `woexp`, none."""
        if self.block.val_mode != "all":
            return [None] * (len(tasks) * samples)
        jobs: list[Guide | None] = []
        for task in tasks:
            experiences = tuple(self.scoring_experiences(task))
            jobs += [Guide(experiences=experiences) if experiences else None] * samples
        return jobs

    def scoring_experiences(self, task: Task) -> list[Experience]:
        """The top `k` experiences for a rollout that is scored (validation), none learned on `task`.

        The runtime guard: the store is asked to leave the task's own records out (`exclude_own`,
        where its `retrieve` takes it), and whatever it returns anyway is dropped here, counted in
        `leaks_blocked` and logged (`experience.leak_blocked`)."""
        if self._store_excludes:
            found = self.store.retrieve(task, self.block.k, exclude_own=True)
        else:
            found = self.store.retrieve(task, self.block.k)
        leaked = [experience for experience in found if same_task(experience, task)]
        if leaked:
            self.leaks_blocked += len(leaked)
            if not self._warned_leak:
                self._warned_leak = True
                log.warning("experience.leak_blocked", task=task.task_id, dropped=len(leaked),
                            store=type(self.store).__name__,
                            hint="the store returned records of the task being scored; they were not shown")
        return [experience for experience in found if not same_task(experience, task)]

    def val_metrics(self, guides: Sequence[Guide | None], leaks_before: int = 0) -> dict[str, float]:
        """`experience/val_guided_fraction` and `experience/val_leaks_blocked` (since `leaks_before`)."""
        if self.block.val_mode != "all":
            return {}
        return {"experience/val_guided_fraction": sum(1 for g in guides if g is not None and g.guided) / len(guides)
                if guides else 0.0,
                "experience/val_leaks_blocked": float(self.leaks_blocked - leaks_before)}

    # --- metrics ------------------------------------------------------------------------------

    def metrics(self, guided: Sequence[bool], success: Sequence[bool], added: int,
                retrieved_per_group: Sequence[int] | None = None,
                prefixed: Sequence[int] | None = None) -> dict[str, float]:
        """`experience/...` and the success of guided, prefix-started and plain rollouts of this step.

        `retrieved_per_group`: the lessons each group was shown (default: what `guides` retrieved
        last; a backend whose rollouts retrieve elsewhere, like verl's agent-loop workers, passes it).
        `prefixed`: per rollout, the turns replayed from a stored prefix (0: none).
        """
        retrieved = list(self.retrieved_per_group if retrieved_per_group is None else retrieved_per_group)
        replayed = list(prefixed) if prefixed is not None else [0] * len(guided)
        out = {"experience/added": float(added),
               "experience/retrieved_per_group": sum(retrieved) / len(retrieved) if retrieved else 0.0,
               "experience/hit_rate": sum(1 for n in retrieved if n) / len(retrieved) if retrieved else 0.0,
               "experience/guided_fraction": sum(guided) / len(guided) if guided else 0.0}
        if self.block.prefix_ratio:
            started = [n for n in replayed if n]
            out["experience/prefixed_fraction"] = len(started) / len(replayed) if replayed else 0.0
            out["experience/prefix_turns"] = sum(started) / len(started) if started else 0.0
        total = self.store.stats().get("total")
        if total is not None:
            out["experience/total"] = float(total)
        kinds = ["guided" if g else "prefixed" if n else "unguided" for g, n in zip(guided, replayed)]
        for name, kind in ((metric_names.TRAIN_SUCCESS_RATE_GUIDED, "guided"),
                           (metric_names.TRAIN_SUCCESS_RATE_PREFIXED, "prefixed"),
                           (metric_names.TRAIN_SUCCESS_RATE_UNGUIDED, "unguided")):
            chosen = [ok for ok, k in zip(success, kinds) if k == kind]
            if chosen:
                out[name] = sum(chosen) / len(chosen)
        return out
