"""The interfaces components implement, all in one place.

A plugin's factory returns an object satisfying one of these protocols (structural typing:
no base class to inherit). Environments are written synchronously, like gymnasium envs; the
runtime hands workflows and explorers an `AsyncEnv` (a local env run in a worker thread, or
a remote one over the environment service) so many episodes share one event loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from beyondagent_core.types import Reward, Task, Trajectory, Turn

if TYPE_CHECKING:
    from beyondagent_core.advantages import AdvantageBatch, Advantages
    from beyondagent_core.experience import Experience

Message = dict[str, Any]
"""A chat message: `{"role": ..., "content": ...}` (plus `tool_calls` where used)."""


@attrs.frozen
class EnvReset:
    """What an environment shows at the start of an episode."""

    messages: list[Message]
    info: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class EnvStep:
    """What an environment answers to one action (AgentEvolver's `/step` reply)."""

    observation: list[Message]
    reward: float = 0.0
    terminated: bool = False
    info: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class RunInfo:
    """What lifecycle hooks are told about a run: the spec with secrets redacted, and
    `plugin_settings`, the real `plugins.settings` blocks (a notifier needs its webhook's URL,
    which the redacted spec shows as `***`); a plugin reads its own block only, and never logs it."""

    name: str
    run_dir: Path
    seed: int
    spec: dict[str, Any]
    plugin_settings: dict[str, Any] = attrs.field(factory=dict, repr=False)


@attrs.define
class TrainingData:
    """Original and synthetic tasks, and the mixer that turns them into each epoch's list."""

    original: list[Task]
    synthetic: list[Task]
    val: list[Task]
    mixer: Mixer
    seed: int

    def epoch_tasks(self, epoch: int) -> list[Task]:
        """The training tasks of `epoch` (0-based), re-mixed deterministically each epoch."""
        return self.mixer.mix(self.original, self.synthetic, epoch=epoch, seed=self.seed)


class BadRecordSink(Protocol):
    """Where a task source sends a record it cannot read: `report` raises (`--on-bad-record
    fail`, the default) or counts and logs it (`skip`). The core passes a `jsonl.BadRecords`."""

    def report(self, where: str, reason: str, *, hint: str | None = None) -> None: ...


@runtime_checkable
class TaskSource(Protocol):
    """Yields seed tasks (from files, an environment service, a generator).

    Records that cannot be read go to `bad` (`bad.report(where, reason)`), which fails or
    skips them according to the user's `--on-bad-record`.
    """

    def load(self, bad: BadRecordSink) -> Iterable[Task]: ...


@runtime_checkable
class Env(Protocol):
    """A multi-turn environment; one instance serves one episode at a time.

    `reset(task)` puts it in the task's initial state; `step(action)` takes the assistant's
    message; `evaluate()` judges the episode so far; `close()` frees what it holds. An env
    may also offer `task_ids(split) -> list[str]` (its seed tasks, for `/get_env_profile`).

    An env whose calls are quick and never block (no I/O, subprocess or event loop of its own) may
    set `inline_calls = True`: in-process (`env.service: local`) its calls then run on the event
    loop instead of in worker threads (envs/local.py).
    """

    def reset(self, task: Task) -> EnvReset: ...

    def step(self, action: Message) -> EnvStep: ...

    def evaluate(self) -> Reward: ...

    def close(self) -> None: ...


class AsyncEnv(Protocol):
    """The same operations as `Env`, awaitable: what workflows and explorers receive."""

    async def reset(self, task: Task) -> EnvReset: ...

    async def step(self, action: Message) -> EnvStep: ...

    async def evaluate(self) -> Reward: ...

    async def close(self) -> None: ...

    async def call(self, method: str, *args: Any) -> Any:
        """Run an optional env method by name (`valid_actions`, `describe_achieved`, ...).

        Raises `EnvMethodMissing` when the env does not have it.
        """
        ...


OPTIONAL_ENV_METHODS: tuple[str, ...] = ("task_ids", "valid_actions", "describe_achieved", "seat_rewards")
"""Env methods a component may ask for through `AsyncEnv.call` (an env need not have them):

- `task_ids(split) -> list[str]`: the env's seed tasks of a split (`/get_env_profile`);
- `valid_actions() -> list[str]`: the actions valid now, as text the env's `step` accepts;
- `describe_achieved() -> list[dict]`: goals the episode has reached so far, each
  `{"query": "<a task in words>", "goal": {...}}`; a task whose `metadata["goal"]` is one of
  these makes the env's `evaluate()` check that goal (verifiable synthetic tasks);
- `seat_rewards() -> list[dict]`: in an episode with several seats, each seat's reward in seat order,
  as `Reward.to_dict()` dicts (`beyondagent_core.runtime.seats`).
"""


@runtime_checkable
class EnvOpener(Protocol):
    """Where a run's envs come from (`env.service`): in-process, or an environment service.

    `open()` gives a fresh env for one episode (the caller closes it); `aclose()` releases what
    the opener shares between episodes (connection pools, a launched server) at the end of a run.
    """

    async def open(self) -> AsyncEnv: ...

    async def aclose(self) -> None: ...


class ChatLLM(Protocol):
    """The only way a workflow talks to a model.

    `chat` returns the assistant `Turn`; when the model is the policy being trained, the turn
    carries the exact `token_ids` and `logprobs` sampled, so training never re-tokenizes.
    `sampling` takes OpenAI-style keys: temperature, top_p, max_tokens, stop.
    """

    async def chat(self, messages: Sequence[Message], **sampling: Any) -> Turn: ...


@runtime_checkable
class Workflow(Protocol):
    """How an agent runs one task in an environment: `async run(task, env, llm)`."""

    async def run(self, task: Task, env: AsyncEnv, llm: ChatLLM) -> Trajectory: ...


@runtime_checkable
class Explorer(Protocol):
    """Explores an environment from a seed task's initial state, without solving it.

    Returns the `Trajectory`: `task` the seed (unchanged), turns the reset messages, then each
    action (an assistant turn) and its observation; `metrics["achieved"]` (optional, what the
    `hindsight` summarizer reads) is `[{"step": i, "goals": [{"query", "goal"}, ...]}, ...]` with
    `i` the actions taken so far, counted from 1. Checked by `beyondagent_core.returns`.
    """

    async def explore(self, seed: Task, env: AsyncEnv, llm: ChatLLM | None) -> Trajectory: ...


@runtime_checkable
class Summarizer(Protocol):
    """Turns one exploration trajectory into candidate synthetic tasks.

    `known` holds the tasks already found for this seed ("do not repeat these"). Returned
    tasks have `origin="synthetic"` and `seed_task_id=seed.task_id`.
    """

    async def summarize(
        self, seed: Task, trajectory: Trajectory, known: Sequence[Task], llm: ChatLLM | None
    ) -> list[Task]: ...


@runtime_checkable
class TaskFilter(Protocol):
    """Keeps the good candidates; `kept` holds the tasks accepted so far (for cross-set dedup).

    A filter whose verdict on a task needs no other task (a re-run, a threshold) may set the
    class attribute `independent = True`: the engine then runs it outside its commit lock, so a
    slow one holds up no other exploration (and gives it `kept=[]`).
    """

    async def keep(self, candidates: Sequence[Task], kept: Sequence[Task]) -> list[Task]: ...


@runtime_checkable
class Mixer(Protocol):
    """Builds one epoch's training list from original and synthetic tasks.

    Must be deterministic for a given `(epoch, seed)`, and is called again every epoch.
    """

    def mix(
        self, original: Sequence[Task], synthetic: Sequence[Task], *, epoch: int, seed: int
    ) -> list[Task]: ...


@runtime_checkable
class Judge(Protocol):
    """A reward: scores a finished trajectory for its task.

    A judge that needs the live env (the built-in `env`) may also define
    `async score_in_env(task, trajectory, env) -> Reward`, called before the env is closed; a
    judge that needs the run's services (its `llm`) may define `bind(run)`.
    """

    async def score(self, task: Task, trajectory: Trajectory) -> Reward: ...


@runtime_checkable
class AdvantageEstimator(Protocol):
    """Turns a training batch of finished episodes into per-token advantages.

    `estimate(batch: AdvantageBatch) -> Advantages` (`beyondagent_core.advantages`): one float32
    array per episode, as long as its token sequence, 0 outside the model's tokens. Synchronous
    and numpy-only so any backend can call it; an estimator that asks an LLM (a step judge) runs
    its own event loop. An estimator that needs the run's services may define `bind(run)`.
    """

    def estimate(self, batch: AdvantageBatch) -> Advantages: ...


@runtime_checkable
class ExperienceStore(Protocol):
    """Keeps `Experience` records (`beyondagent_core.experience`) across runs and finds them per task.

    `add` returns how many were new (near-identical ones are deduplicated); `retrieve` the `k`
    most relevant to `task`, best first — with `exclude_own=True` (validation) none learned on
    `task` itself (`experience.same_task`; a store whose `retrieve` lacks the keyword has its
    answer filtered instead, and may then return fewer); `summarize` turns finished trajectories
    into new experiences (it does not add them); `stats` counts for the run's metrics. A store
    must persist: a new store built from the same config (another process, a later run) finds
    what was added. A store may define `bind(run)`: it is then given the run (`run.run_dir`,
    `run.info.name`, `run.chat_llm()`) right after it is built, before any other call; and
    `examples_of(task) -> list[Experience]`: its records of successful trajectories of that very
    task carrying `metadata["turns"]`, which prefix sampling (`experience.prefix_ratio`) replays.
    """

    def add(self, experiences: Sequence[Experience]) -> int: ...

    def retrieve(self, task: Task, k: int, *, exclude_own: bool = False) -> list[Experience]: ...

    async def summarize(self, trajectories: Sequence[Trajectory], *, step: int) -> list[Experience]: ...

    def stats(self) -> dict[str, float]: ...

    def close(self) -> None: ...


class Run(Protocol):
    """What a run offers the components in it (the core's `context.RunContext`).

    `spec` is the validated spec, `info` the run's name, directory and seed; components get the
    run through `bind(run)` (judges, filters, estimators) or as an argument (backends).
    """

    info: RunInfo
    resume: bool
    policy_llm: ChatLLM | None

    @property
    def run_dir(self) -> Path: ...

    @property
    def spec(self) -> Any: ...

    def build(self, key_path: str) -> Any: ...

    def bound(self, obj: Any) -> Any: ...

    def episode_runner(self) -> Any: ...

    def chat_llm(self) -> ChatLLM | None: ...

    def advantage_estimator(self) -> AdvantageEstimator: ...

    def step_finished(self, step: int, metrics: dict[str, Any]) -> None: ...


@runtime_checkable
class Backend(Protocol):
    """Runs training on the mixed data; returns the final metrics.

    It calls `data.epoch_tasks(epoch)` for each epoch's task list, runs episodes with
    `run.episode_runner()` (workflow, envs, each task's judge), and reports each step with
    `run.step_finished(...)`. A backend that can serve its policy as a chat LLM offers
    `policy_llm(run)` (a context manager), which makes `llm: policy` work while exploring.
    A backend that translates the spec into another system's config may offer
    `describe(run) -> str`: `--dry-run` prints it (and it may write that config to `run.run_dir`).
    A backend that can refuse `--resume` (no checkpoint, a changed spec) offers
    `check_resume(run_dir, spec)`, raising the refusal before anything in the run directory is written.
    Every judge a task names is checked before a run, unless the backend never scores episodes
    (`judges_tasks = False`, like `export`).
    """

    def train(self, data: TrainingData, run: Run) -> dict[str, Any]: ...
