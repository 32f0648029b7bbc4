'''Every hook a BeyondAgent plugin can implement.

A plugin is a module (or object) whose functions are marked with `@hookimpl` and named after
the specs below. Registration hooks take no arguments and return a list of typed records
(`beyondagent_core.records`), so every registration knows which plugin made it; the registry
adds the provider. Lifecycle hooks are told about a run's progress (loggers, notifiers).

A minimal plugin that provides a mixer::

    # beyondagent_plugin_shuffle/__init__.py
    from beyondagent_core import MixerSpec, hookimpl

    @hookimpl
    def beyondagent_mixers():
        return [MixerSpec(name="shuffle_all", factory="beyondagent_plugin_shuffle.mixer:ShuffleAll",
                          config_cls=ShuffleConfig, summary="Originals and synthetic, shuffled.")]

and declares it in its `pyproject.toml`::

    [project.entry-points.beyondagent]
    shuffle = "beyondagent_plugin_shuffle"
'''

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from pathlib import Path

    from beyondagent_core.protocols import EnvOpener, RunInfo
    from beyondagent_core.records import (
        AdvantageSpec,
        BackendSpec,
        CommandSpec,
        EnvSpec,
        ExperienceStoreSpec,
        ExplorerSpec,
        MixerSpec,
        RewardSpec,
        SettingsSpec,
        SummarizerSpec,
        TaskFilterSpec,
        TaskSourceSpec,
        VenvSpec,
        WorkflowSpec,
    )

PROJECT = "beyondagent"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# --- registration hooks: called once, when plugins are loaded -------------------------------


@hookspec
def beyondagent_task_sources() -> list[TaskSourceSpec]:
    """Return the task sources this plugin provides.

    Called once at load time. Each factory is called as `factory(config)` with the validated
    `config_cls` instance of a spec block such as `tasks.train: {name: gsm8k, path: ...}` and
    returns a `TaskSource` (`load(bad) -> Iterable[Task]`).

    Example::

        @attrs.define
        class CountingConfig:
            n: int = 10

        class Counting:
            def __init__(self, config: CountingConfig):
                self.n = config.n
            def load(self, bad):
                return [Task(task_id=f"count-{i}", query=f"Count to {i}.", ground_truth=str(i))
                        for i in range(self.n)]

        @hookimpl
        def beyondagent_task_sources():
            return [TaskSourceSpec(name="counting", factory=Counting, config_cls=CountingConfig,
                                   summary="Tasks that ask to count to n.")]
    """


@hookspec
def beyondagent_envs() -> list[EnvSpec]:
    """Return the environments this plugin provides.

    `factory(config)` returns a fresh `Env` (reset/step/evaluate/close); the runtime makes one
    instance per concurrent episode, so instances must not share mutable state.

    Example::

        @hookimpl
        def beyondagent_envs():
            return [EnvSpec(name="frozenlake", factory="beyondagent_plugin_gym.frozenlake:FrozenLake",
                            config_cls=FrozenLakeConfig, summary="gymnasium FrozenLake as text.")]
    """


@hookspec
def beyondagent_workflows() -> list[WorkflowSpec]:
    """Return the agent workflows this plugin provides.

    `factory(config)` returns a `Workflow`: `async run(task, env, llm) -> Trajectory`, talking
    to the model only through `await llm.chat(messages, **sampling)`.

    Example::

        class SingleTurn:
            def __init__(self, config):
                self.config = config
            async def run(self, task, env, llm):
                first = await env.reset(task)
                turn = await llm.chat(first.messages, temperature=1.0)
                step = await env.step({"role": "assistant", "content": turn.content})
                return Trajectory(task=task, turns=[turn], terminated=step.terminated)

        @hookimpl
        def beyondagent_workflows():
            return [WorkflowSpec(name="single_turn", factory=SingleTurn, summary="One answer.")]
    """


@hookspec
def beyondagent_explorers() -> list[ExplorerSpec]:
    """Return the exploration strategies this plugin provides (the spec's `explore.name`).

    `factory(config)` returns an `Explorer`: `async explore(seed, env, llm) -> Trajectory`,
    acting in the seed task's initial state to map the environment, not to solve the task. The
    trajectory's `task` is the seed, its assistant turns the actions, and its optional
    `metrics["achieved"]` lists `{"step": i, "goals": [...]}` with `i` counting actions from 1
    (docs/writing-a-plugin.md, "Explorers"; `testing.explorer_contract` checks it).

    Example::

        @hookimpl
        def beyondagent_explorers():
            return [ExplorerSpec(name="random", factory="beyondagent_plugin_random_explorer:RandomExplorer",
                                 config_cls=RandomExplorerConfig, summary="High-temperature LLM exploration.")]
    """


@hookspec
def beyondagent_summarizers() -> list[SummarizerSpec]:
    """Return the summarizers this plugin provides (the spec's `explore.summarizer.name`).

    `factory(config)` returns a `Summarizer`: `async summarize(seed, trajectory, known, llm)
    -> list[Task]`, each a synthetic task with `seed_task_id` and a reference solution.

    Example::

        @hookimpl
        def beyondagent_summarizers():
            return [SummarizerSpec(name="hindsight", factory=Hindsight, summary="Tasks from states reached.")]
    """


@hookspec
def beyondagent_task_filters() -> list[TaskFilterSpec]:
    """Return the synthetic-task filters this plugin provides (`explore.filters: [{name: ...}]`).

    `factory(config)` returns a `TaskFilter`: `async keep(candidates, kept) -> list[Task]`.

    Example::

        @attrs.define
        class MinConfidenceConfig:
            threshold: float = 0.5

        class MinConfidence:
            def __init__(self, config):
                self.threshold = config.threshold
            async def keep(self, candidates, kept):
                return [t for t in candidates if (t.confidence or 0.0) >= self.threshold]

        @hookimpl
        def beyondagent_task_filters():
            return [TaskFilterSpec(name="min_confidence", factory=MinConfidence,
                                   config_cls=MinConfidenceConfig, summary="Drop unsure tasks.")]
    """


@hookspec
def beyondagent_mixers() -> list[MixerSpec]:
    """Return the mixing strategies this plugin provides (the spec's `mixture.name`).

    `factory(config)` returns a `Mixer`: `mix(original, synthetic, *, epoch, seed) -> list[Task]`,
    deterministic for a given epoch and seed; the backend calls it once per epoch.

    Example::

        class OriginalsFirst:
            def __init__(self, config):
                pass
            def mix(self, original, synthetic, *, epoch, seed):
                return list(original) + list(synthetic)

        @hookimpl
        def beyondagent_mixers():
            return [MixerSpec(name="originals_first", factory=OriginalsFirst,
                              summary="Originals, then every synthetic task, in order.")]
    """


@hookspec
def beyondagent_rewards() -> list[RewardSpec]:
    """Return the judges this plugin provides (a task's `judge`, or the spec's `reward.name`).

    `factory(config)` returns a `Judge`: `async score(task, trajectory) -> Reward`.

    Example::

        class ExactMatch:
            def __init__(self, config):
                pass
            async def score(self, task, trajectory):
                answer = trajectory.turns[-1].content.strip() if trajectory.turns else ""
                ok = answer == str(task.ground_truth)
                return Reward(score=float(ok), success=ok, reason="exact match" if ok else "mismatch")

        @hookimpl
        def beyondagent_rewards():
            return [RewardSpec(name="exact_match", factory=ExactMatch, summary="1 if the answer equals ground_truth.")]
    """


@hookspec
def beyondagent_advantages() -> list[AdvantageSpec]:
    """Return the advantage estimators this plugin provides (the spec's `backend.advantage.name`).

    `factory(config)` returns an `AdvantageEstimator`: `estimate(batch) -> Advantages`, one
    advantage per token of each episode (`beyondagent_core.advantages`). Use numpy only: the
    estimator runs inside whichever backend trains (verl's trainer too).

    Example::

        class OutcomeOnly:
            def __init__(self, config):
                pass
            def estimate(self, batch):
                per_token = [episode.token_mask * episode.outcome for episode in batch.episodes]
                return Advantages(per_token=per_token)

        @hookimpl
        def beyondagent_advantages():
            return [AdvantageSpec(name="outcome", factory=OutcomeOnly, summary="The raw outcome, no baseline.")]
    """


@hookspec
def beyondagent_experience_stores() -> list[ExperienceStoreSpec]:
    """Return the experience stores this plugin provides (the spec's `experience.name`).

    `factory(config)` returns an `ExperienceStore`: `add(experiences)`, `retrieve(task, k,
    exclude_own=False)`, `async summarize(trajectories, step=...)`, `stats()`, `close()`
    (`beyondagent_core.protocols`). A store must persist what it was given (a new store from the
    same config finds it); one that defines `bind(run)` gets the run (its directory, name, `llm`)
    right after it is built; one that defines `examples_of(task)` can start rollouts from a stored
    successful prefix (`experience.prefix_ratio`).
    """


@hookspec
def beyondagent_backends() -> list[BackendSpec]:
    """Return the training backends this plugin provides (the spec's `backend.name`).

    `factory(config)` returns a `Backend`: `train(data, run) -> dict` of final metrics.

    Example::

        @hookimpl
        def beyondagent_backends():
            return [BackendSpec(name="torch", factory="beyondagent_plugin_torch.backend:TorchBackend",
                                config_cls=TorchBackendConfig, summary="In-process GRPO on CPU or one GPU.")]
    """


@hookspec
def beyondagent_venvs() -> list[VenvSpec]:
    """Return the cached virtualenvs this plugin needs (for stacks that cannot share the main env).

    `factory()` (no arguments) returns a `beyondagent_core.venvs.VenvRecipe`. The plugin builds
    and uses it with `ensure_venv(recipe)`; `beyondagent venv build NAME` builds it ahead of time.

    Example::

        def verl_recipe():
            return VenvRecipe(name="verl", steps=[["torch==2.13.0"], ["verl[verl-core]==0.9.1"]],
                              local=["beyondagent", "beyondagent-plugin-verl"],
                              check="import verl; print('verl', verl.__version__)")

        @hookimpl
        def beyondagent_venvs():
            return [VenvSpec(name="verl", factory=verl_recipe, summary="verl 0.9.1 on torch 2.13.0.")]
    """


@hookspec
def beyondagent_commands() -> list[CommandSpec]:
    """Return the CLI commands this plugin adds (`beyondagent <name> ...`).

    `factory(parser)` adds the command's arguments to its `argparse` parser and returns
    `handler(args) -> int`. A name the core already uses, or that two plugins register, is not
    added (`beyondagent plugins` shows the conflict).

    Example::

        def add_setup(parser):
            parser.add_argument("--rebuild", action="store_true")
            def handler(args):
                ensure_venv(verl_recipe(), rebuild=args.rebuild)
                return 0
            return handler

        @hookimpl
        def beyondagent_commands():
            return [CommandSpec(name="verl", factory=add_setup, summary="Set up verl's venv.")]
    """


@hookspec
def beyondagent_settings() -> list[SettingsSpec]:
    """Return the `plugins.settings.<name>` blocks this plugin reads, each with its schema.

    A plugin no spec section selects (a notifier, a logger) takes its settings from
    `plugins.settings.<name>`; declaring the block lets `beyondagent validate` check it (a typo
    fails with its key path) before anything runs. Read the values in a lifecycle hook from
    `run.plugin_settings[name]`.

    Example::

        @attrs.define
        class NotifySettings:
            urls: list[str] = attrs.field(factory=list)
            stall_minutes: float = 30.0

        @hookimpl
        def beyondagent_settings():
            return [SettingsSpec(name="notify", config_cls=NotifySettings)]
    """


# --- lifecycle hooks: called during a run; failures are logged, never fatal -----------------


@hookspec
def beyondagent_run_started(run: RunInfo) -> None:
    """Called once the run directory exists and every component is resolved.

    `run` has the run's name, directory, seed and the resolved spec (secrets redacted).

    Example::

        @hookimpl
        def beyondagent_run_started(run):
            print(f"run {run.name} started in {run.run_dir}")
    """


@hookspec
def beyondagent_step_finished(run: RunInfo, step: int, metrics: dict[str, Any]) -> None:
    """Called by the backend after each training step with that step's metrics.

    Example::

        @hookimpl
        def beyondagent_step_finished(run, step, metrics):
            if step % 10 == 0:
                send_to_dashboard(run.name, step, metrics)
    """


@hookspec
def beyondagent_run_finished(run: RunInfo, status: str, metrics: dict[str, Any]) -> None:
    """Called once at the end of a run; `status` is `"ok"`, `"error"` or `"interrupted"` (Ctrl-C or
    SIGTERM; `metrics` then has `step` and `total_steps`: where it stopped, when known).

    Example::

        @hookimpl
        def beyondagent_run_finished(run, status, metrics):
            notify_slack(f"{run.name} finished: {status}, reward {metrics.get('reward_mean')}")
    """


# --- the run's report page: one plugin draws it ----------------------------------------------


@hookspec(firstresult=True)
def beyondagent_write_report(run_dir: Path, title: str | None, stopped: str | None) -> Path | None:
    """Draw the run's report page (`<run_dir>/report.html`) from its `metrics.jsonl` and
    `samples.jsonl` and return its path; the first plugin that answers draws it
    (beyondagent-plugin-report does). Backends ask for it when a run ends
    (`beyondagent_core.reports.write_run_report`); `stopped` says where an interrupted run stopped.

    Example::

        @hookimpl
        def beyondagent_write_report(run_dir, title, stopped):
            return my_dashboard_page(run_dir)
    """


# --- envs somewhere else: one plugin opens them ------------------------------------------------


@hookspec(firstresult=True)
def beyondagent_remote_env(env_name: str, service: str, where: str, config: dict[str, Any],
                           launch: dict[str, Any]) -> EnvOpener | None:
    """Open the env named `env_name` outside this process for `env.service` = `service` (`launch`,
    or a service's `http(s)://` URL: the values the spec accepts) and return the run's `EnvOpener`;
    the first plugin that answers provides it (beyondagent-plugin-envservice does, for any of them).
    `config` is the spec's env block; `launch` says how to start a server for the run (`python`: the
    env's own venv, `args`, `call_timeout`); `where` names the spec key for errors. The run closes the
    opener (`aclose()`) when it ends.

    Example::

        @hookimpl
        def beyondagent_remote_env(env_name, service, where, config, launch):
            if service.startswith("https://envs.example.com/"):  # this plugin's fleet; None: not ours
                return FleetEnvOpener(service, env_name, config)
    """


REGISTRATION_HOOKS: dict[str, str] = {
    "task_source": "beyondagent_task_sources",
    "env": "beyondagent_envs",
    "workflow": "beyondagent_workflows",
    "explorer": "beyondagent_explorers",
    "summarizer": "beyondagent_summarizers",
    "task_filter": "beyondagent_task_filters",
    "mixer": "beyondagent_mixers",
    "reward": "beyondagent_rewards",
    "advantage": "beyondagent_advantages",
    "experience_store": "beyondagent_experience_stores",
    "backend": "beyondagent_backends",
    "venv": "beyondagent_venvs",
    "command": "beyondagent_commands",
    "settings": "beyondagent_settings",
}
"""Component kind -> the hook that registers components of that kind."""

LIFECYCLE_HOOKS: tuple[str, ...] = (
    "beyondagent_run_started",
    "beyondagent_step_finished",
    "beyondagent_run_finished",
)
SERVICE_HOOKS: tuple[str, ...] = ("beyondagent_write_report", "beyondagent_remote_env")
"""Hooks the first plugin to answer serves (`PluginManager.first_answer`)."""
