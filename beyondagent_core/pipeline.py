"""The run, top to bottom: load tasks -> explore -> mix -> hand the dataset to the backend.

`prepare` reads and validates the spec against the installed plugins; `plan` says what a run
would do (for `--dry-run`); `run` does it. Any component that fails is reported with its key
path and the plugin that provided it.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from beyondagent_core.context import RunContext, RunInfo, TrainingData
from beyondagent_core.errors import BeyondAgentError, RunError, SpecError
from beyondagent_core.failures import check_failures
from beyondagent_core.interrupts import Interrupted, signal_name, stop_on_signals, stopped_message
from beyondagent_core.jsonl import BadRecords, OnBadRecord, read_tasks
from beyondagent_core.logs import get_logger, log_events_to
from beyondagent_core.plugins import PluginManager, Switches, check_requirements
from beyondagent_core.registry import Registry
from beyondagent_core.rundir import create_run_dir, run_dir_of
from beyondagent_core.run_records import METRICS_FILE
from beyondagent_core.spec import (
    POLICY_LLM,
    Component,
    PluginsSection,
    Spec,
    load_spec_file,
    structured,
    validate_spec,
)
from beyondagent_core.spec_warnings import warn_ignored_settings
from beyondagent_core.types import Task, count_by_origin

if TYPE_CHECKING:
    from beyondagent_core.exploration.engine import ExploreResult

log = get_logger("beyondagent.pipeline")


@attrs.define
class Session:
    """A validated spec and the plugins it was validated against."""

    spec: Spec
    manager: PluginManager
    registry: Registry


def prepare(spec_path: str | Path, overrides: list[str] | tuple[str, ...] = (), *,
            manager: PluginManager | None = None, profile: str | None = None) -> Session:
    """Read the spec (its `profile` applied), load plugins (honouring `plugins.disable`), check
    `plugins.require`, validate."""
    raw = load_spec_file(spec_path, overrides, profile=profile)
    plugins = structured(PluginsSection, raw.data.get("plugins") or {}, "plugins", str(spec_path))
    if manager is None:
        manager = PluginManager(Switches.from_environment(extra_disabled=plugins.disable))
    manager.load()
    check_requirements(plugins.require, where=f"{spec_path}, key plugins.require")
    registry = Registry(manager)
    spec = validate_spec(raw, registry)
    warn_ignored_settings(raw.data, spec)
    return Session(spec=spec, manager=manager, registry=registry)


@attrs.define
class Plan:
    """What a run will do: components with providers, and task counts."""

    components: list[dict[str, str]]
    original: int
    val: int
    synthetic: int | None
    synthetic_source: str
    mixed: dict[str, int] | None
    backend: str | None = None  # what the backend would run, from its optional `describe(run)`


@contextlib.contextmanager
def guarded(component: Component | None, action: str, run: RunContext | None = None) -> Iterator[None]:
    """Turn an unexpected exception inside a component into an error naming it and its plugin.

    With `run`, an exception raised inside a component the run built for `component` (the
    store or estimator a backend calls) names that one, and `component` as its caller.
    """
    try:
        yield
    except BeyondAgentError:
        raise
    except Exception as exc:
        where = component.described if component is not None else None
        message = f"{action} failed: {type(exc).__name__}: {exc}"
        hint = "run with -v for the traceback; events.jsonl in the run directory has it too"
        culprit = run.culprit(exc) if run is not None else None
        if culprit is not None and culprit is not component and culprit.registration is not None:
            spec, plugin = culprit.registration.spec, culprit.registration.plugin
            message = f"{action} failed: {spec.label} {spec.name!r} raised {type(exc).__name__}: {exc}"
            where = f"{culprit.described}, called by {where}" if where else culprit.described
            hint += f"; if it is a bug, report it to {plugin.distribution or plugin.name}"
        log.error("component.failed", action=action, where=where, exc_info=True)
        raise RunError(message, where=where, hint=hint) from exc


def load_tasks(spec: Spec, key_path: str, bad: BadRecords) -> list[Task]:
    """Load the tasks of `tasks.train` or `tasks.val`; a duplicate task_id is a bad record."""
    component = spec.component(key_path)
    if component is None or component.registration is None:
        return []
    with guarded(component, f"loading {key_path}"):
        tasks = list(component.create().load(bad))
    seen: set[str] = set()
    unique = []
    for task in tasks:
        if not isinstance(task, Task):
            raise RunError(f"{key_path} yielded {type(task).__name__}, not Task",
                           where=f"{key_path} ({component.registration.plugin.provider})")
        if task.task_id in seen:
            bad.report(f"{key_path}, task {task.task_id!r}", f"duplicate task_id {task.task_id!r}")
            continue
        seen.add(task.task_id)
        unique.append(task)
    log.info("tasks.loaded", key=key_path, tasks=len(unique), skipped=bad.count)
    return unique


def check_task_judges(tasks: list[Task], registry: Registry, where: str) -> None:
    """Every judge a task names is a registered reward (a typo fails here, not mid-run)."""
    named: dict[str, Task] = {}
    for task in tasks:
        if task.judge:
            named.setdefault(task.judge, task)
    for name, task in sorted(named.items()):
        registry.resolve("reward", name, key_path=f"{where}: task {task.task_id!r} names judge {name!r}")


def judges_tasks(spec: Spec) -> bool:
    """Whether the backend scores episodes (the `export` backend only writes tasks: False)."""
    backend = spec.component("backend")
    if backend is None or backend.registration is None:
        return False
    with guarded(backend, "building the backend"):
        return bool(getattr(backend.create(), "judges_tasks", True))


def cache_path(spec: Spec) -> Path:
    cache = spec.explore.cache
    return Path(cache) if cache else run_dir_of(spec) / "synthetic_tasks.jsonl"


def exploration_components(spec: Spec) -> tuple[Component, Component, Component]:
    """The explorer, summarizer and env an exploration needs; a SpecError names the missing one."""
    explorer, summarizer, env = (spec.component(k) for k in ("explore", "explore.summarizer", "env"))
    for component, key in ((explorer, "explore.name"), (summarizer, "explore.summarizer.name"), (env, "env.name")):
        if component is None or component.registration is None:
            raise SpecError(f"explore.n is {spec.explore.n} but {key} is not set",
                            where=f"{spec.path}, key {key}",
                            hint=f"set {key}, or set explore.n=0 to skip exploration")
    return explorer, summarizer, env  # type: ignore[return-value]


def explore(context: RunContext, seeds: list[Task], bad: BadRecords, *, force: bool = False,
            show_progress: bool = False) -> tuple[list[Task], ExploreResult | None]:
    """Synthetic tasks: from a finished cache, else explored (resuming an interrupted one).

    Returns the tasks and, when it explored, the stage's tallies. `force` explores again even
    when the cache is finished or was made from other seeds or settings.
    """
    from beyondagent_core.exploration.checkpoint import (
        check_fingerprint,
        fingerprint,
        is_finished,
    )

    spec = context.spec
    path = cache_path(spec)
    finished = is_finished(path) if path.is_file() and not force else False
    if finished and spec.explore.n > 0:  # a cache of ours: made from these seeds and settings?
        settings = {"n": spec.explore.n, **exploration_settings(spec)}
        check_fingerprint(path, fingerprint(seeds, settings), seeds=seeds, settings=settings)
    if path.is_file() and not force and finished is not False:
        tasks = read_tasks(path, bad)
        log.info("explore.cache_used", cache=str(path), tasks=len(tasks))
        return tasks, None
    if spec.explore.n == 0:
        return [], None
    explorer, _, _ = exploration_components(spec)
    with serving_policy(context):
        return _explore(context, seeds, explorer, force=force, show_progress=show_progress)


def _explore(context: RunContext, seeds: list[Task], explorer: Component, *, force: bool,
             show_progress: bool) -> tuple[list[Task], ExploreResult]:
    from beyondagent_core.exploration.engine import run_exploration

    spec, path = context.spec, cache_path(context.spec)
    filters = [(f.name or "?", context.bound(f.create())) for f in spec.filters]
    with guarded(explorer, "exploration", context), \
            exploration_progress(len(seeds) * spec.explore.n, show_progress) as progress:
        result = run_exploration(
            seeds, n=spec.explore.n, workers=spec.explore.workers, filters=filters, cache_path=path,
            executor=exploration_executor(context), settings=exploration_settings(spec), force=force,
            progress=progress,
        )
    log.info("explore.cached", cache=str(path), tasks=len(result.tasks), failures=result.failures)
    check_failures("exploration", result.failed, result.completed + result.failures, spec.explore.max_failed_fraction,
                   key="explore.max_failed_fraction", where=f"{spec.path}, key explore (cache {path})")
    return result.tasks, result


@contextlib.contextmanager
def serving_policy(context: RunContext) -> Iterator[None]:
    """With `llm: policy`, have the backend serve its starting policy while exploring."""
    spec = context.spec
    if spec.llm != POLICY_LLM or context.policy_llm is not None:
        yield
        return
    backend = spec.component("backend")
    where = f"{spec.path or 'the spec'}, key llm"
    if spec.explore.executor == "ray":
        raise SpecError("llm: policy serves the policy in this process; it cannot explore on Ray actors",
                        where=where, hint="set explore.executor: local, or llm to an endpoint the actors can reach")
    with guarded(backend, "loading the policy for exploration"):
        serve = getattr(backend.create(), "policy_llm", None)
    if serve is None:
        raise SpecError(f"llm is 'policy' but the {backend.name!r} backend cannot serve its policy for exploration",
                        where=where, hint="use the torch backend, or set llm to an OpenAI-compatible endpoint")
    with guarded(backend, "loading the policy for exploration"), serve(context) as llm:
        context.policy_llm = llm
        try:
            yield
        finally:
            context.policy_llm = None


def exploration_executor(context: RunContext) -> Any:
    """Where explorations run: this process, or Ray actors (`explore.executor: ray`)."""
    from beyondagent_core.exploration.executor import LocalExecutor

    block = context.spec.explore
    if block.executor == "ray":
        from beyondagent_core.exploration.ray_executor import RayExecutor

        switches = context.manager.switches
        loaded = sorted(name for name, record in context.manager.records.items() if record.status == "ok")
        return RayExecutor(
            spec_data=context.spec.resolved, spec_path=str(context.spec.path) if context.spec.path else None,
            switches={"autoload": switches.autoload, "allow": loaded if switches.allow or not switches.autoload
                      else [], "deny": sorted(switches.deny)},
            run_dir=str(context.run_dir), workers=block.workers, actors=block.ray_actors,
            num_cpus=block.ray_num_cpus, address=block.ray_address)
    return LocalExecutor(context.build("explore"), context.build("explore.summarizer"), context.env_factory(),
                         context.chat_llm(), describe=context.describe)


def exploration_settings(spec: Spec) -> dict[str, Any]:
    """What decides which tasks an exploration makes (its cache's fingerprint, with the seeds)."""
    resolved = spec.resolved
    explore_block = {k: v for k, v in (resolved.get("explore") or {}).items()
                     if k not in ("workers", "cache", "executor", "ray_address", "ray_actors", "ray_num_cpus",
                                  "max_failed_fraction")}
    env = {k: v for k, v in (resolved.get("env") or {}).items() if k not in ("service", "serve_args")}
    llm = resolved.get("llm")
    if isinstance(llm, dict):
        llm = {k: llm.get(k) for k in ("model", "base_url", "temperature", "top_p", "top_k", "max_tokens")}
    elif llm == POLICY_LLM:
        # The starting policy explores: which model, in which precision, sampling from the run's seed.
        model = resolved.get("model") or {}
        llm = {"policy": {k: model.get(k) for k in ("path", "tokenizer", "dtype", "param_dtype")},
               "seed": (resolved.get("run") or {}).get("seed")}
    return {"explore": explore_block, "env": env, "llm": llm}


@contextlib.contextmanager
def exploration_progress(total: int, show: bool) -> Iterator[Any]:
    """A rich progress bar over explorations (when `show`); yields the engine's callback."""
    if not show:
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (TextColumn("exploring"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[status]}"))
    with Progress(*columns, transient=False) as bar:
        task = bar.add_task("explore", total=total, status="")

        def update(result: ExploreResult) -> None:
            bar.update(task, completed=result.resumed + result.completed + result.failures, status=f"kept {len(result.tasks)}, failed {result.failures}")

        yield update


@attrs.define
class ExploreReport:
    """What `beyondagent explore` did: the seeds, the synthetic tasks, and the stage's tallies."""

    seeds: list[Task]
    tasks: list[Task]
    result: ExploreResult | None  # None: a finished cache was used as it is
    cache: Path


def explore_only(session: Session, *, on_bad_record: OnBadRecord = "fail", force: bool = False,
                 show_progress: bool = False) -> ExploreReport:
    """Run the exploration stage alone (`beyondagent explore`); events go to the run directory."""
    spec, manager = session.spec, session.manager
    if spec.explore.n <= 0:
        raise SpecError("explore.n is 0: there is nothing to explore", where=f"{spec.path}, key explore.n",
                        hint="set explore.n (explorations per seed task), e.g. explore.n=4")
    run_dir = run_dir_of(spec)
    run_dir.mkdir(parents=True, exist_ok=True)
    log_events_to(run_dir / "events.jsonl")
    info = RunInfo(name=spec.run.name, run_dir=run_dir, seed=spec.run.seed, spec=spec.redacted())
    context = RunContext(spec=spec, info=info, manager=manager)
    try:
        bad = BadRecords(on_bad_record)
        seeds = load_tasks(spec, "tasks.train", bad)
        tasks, result = explore(context, seeds, bad, force=force, show_progress=show_progress)
        return ExploreReport(seeds=seeds, tasks=tasks, result=result, cache=cache_path(spec))
    finally:
        context.close()
        log_events_to(None)


def plan(session: Session, *, on_bad_record: OnBadRecord = "fail") -> Plan:
    """Resolve everything and count tasks without exploring or training (`--dry-run`).

    Every component but the env is built first, as `beyondagent validate` builds them: a factory
    that rejects its config (an `agent` workflow whose entrypoint file or function is missing) fails
    the dry run. No env is started: that may take a while (a map, a world), and `validate` builds it.
    """
    from beyondagent_core.build_check import build_components

    spec = session.spec
    build_components(spec, envs=False)
    bad = BadRecords(on_bad_record)
    train = load_tasks(spec, "tasks.train", bad)
    val = load_tasks(spec, "tasks.val", bad)
    path = cache_path(spec)
    synthetic: list[Task] | None = None
    from beyondagent_core.exploration.checkpoint import is_finished

    if path.is_file() and is_finished(path) is not False:
        synthetic, source = read_tasks(path, bad), f"cache {path}"
    elif spec.explore.n == 0:
        synthetic, source = [], "none (explore.n is 0)"
    else:
        exploration_components(spec)  # a dry run catches what the run would fail on
        source = f"to be explored: {len(train)} seeds x {spec.explore.n}, cached in {path}"
    mixed = None
    if synthetic is not None:
        mixer = spec.component("mixture")
        with guarded(mixer, "mixing"):
            mixed = count_by_origin(TrainingData(train, synthetic, val, mixer.create(), spec.run.seed).epoch_tasks(0))
    if judges_tasks(spec):
        for tasks, where in ((train, "tasks.train"), (val, "tasks.val"), (synthetic or [], source)):
            check_task_judges(tasks, session.registry, where)
    rows = []
    for component in [*spec.components.values(), *spec.filters]:
        if component.registration is not None:
            plugin = component.registration.plugin
            rows.append({"key": component.key_path, "kind": component.kind, "name": component.name or "",
                         "provider": plugin.provider})
    return Plan(rows, len(train), len(val), None if synthetic is None else len(synthetic), source, mixed,
                backend=describe_backend(session))


def describe_backend(session: Session) -> str | None:
    """The backend's own account of what it would run (`describe(run)`), for `--dry-run`.

    A backend that translates the spec into another system's config (verl) shows and writes
    that config here; the run directory is created for it, nothing is trained. A run directory
    this made and the backend left empty (torch only describes) is removed again.
    """
    spec = session.spec
    backend = spec.component("backend")
    if backend is None or backend.registration is None:
        return None
    with guarded(backend, "building the backend"):
        describe = getattr(backend.create(), "describe", None)
    if not callable(describe):
        return None
    run_dir = run_dir_of(spec)
    made = [d for d in (run_dir, *run_dir.parents) if not d.exists()]
    run_dir.mkdir(parents=True, exist_ok=True)
    info = RunInfo(name=spec.run.name, run_dir=run_dir, seed=spec.run.seed, spec=spec.redacted())
    context = RunContext(spec=spec, info=info, manager=session.manager)
    try:
        with guarded(backend, "describing the backend's run"):
            return str(describe(context))
    finally:
        context.close()
        for directory in made:  # innermost first: only the directories this made, if still empty
            with contextlib.suppress(OSError):
                directory.rmdir()


def run(session: Session, *, on_bad_record: OnBadRecord = "fail", resume: bool = False) -> dict[str, Any]:
    """Do the run; returns the backend's final metrics. `resume` continues the run in its directory.

    A run stopped by Ctrl-C or SIGTERM (`timeout`, kill) unwinds like a failed one, then gets its
    report and a final `run.finished` event with `status: interrupted` and where it stopped, and
    raises `Interrupted` ("stopped at step 20 of 80").
    """
    spec, manager = session.spec, session.manager
    backend = spec.component("backend")
    with guarded(backend, "building the backend"):
        trainer = backend.create()
    if resume:  # every check that can refuse a resume runs before the run directory is written
        check = getattr(trainer, "check_resume", None)
        if callable(check) and run_dir_of(spec).is_dir():
            with guarded(backend, "checking the run to resume"):
                check(run_dir_of(spec), spec)
    run_dir = create_run_dir(spec, manager, resume=resume)
    log_events_to(run_dir / "events.jsonl")
    info = RunInfo(name=spec.run.name, run_dir=run_dir, seed=spec.run.seed, spec=spec.redacted(),
                   plugin_settings=spec.plugins.settings)
    context = RunContext(spec=spec, info=info, manager=manager, resume=resume)
    started = time.perf_counter()
    log.info("run.started", run=spec.run.name, run_dir=str(run_dir))
    manager.notify("beyondagent_run_started", run=info)
    status, metrics, stopped = "error", {}, {}
    try:
        with stop_on_signals():
            metrics = _train(session, context, trainer, on_bad_record)
        status = "ok"
        return metrics
    except KeyboardInterrupt as exc:
        status = "interrupted"
        stopped = _stopped(context, exc)
        raise Interrupted(stopped["stopped"], signum=getattr(exc, "signum", signal.SIGINT)) from None
    finally:
        context.close()
        log.info("run.finished", status=status, seconds=round(time.perf_counter() - started, 3), **stopped, **metrics)
        manager.notify("beyondagent_run_finished", run=info, status=status,
                       metrics=metrics or {key: value for key, value in stopped.items() if isinstance(value, int)})
        log_events_to(None)


def _train(session: Session, context: RunContext, trainer: Any, on_bad_record: OnBadRecord) -> dict[str, Any]:
    """Tasks, exploration, judges checked, the mix, then the backend's training; its final metrics."""
    spec = session.spec
    bad = BadRecords(on_bad_record)
    train = load_tasks(spec, "tasks.train", bad)
    val = load_tasks(spec, "tasks.val", bad)
    synthetic, _ = explore(context, train, bad)
    if getattr(trainer, "judges_tasks", True):
        for tasks, where in ((train, "tasks.train"), (val, "tasks.val"), (synthetic, f"{cache_path(spec)}")):
            check_task_judges(tasks, session.registry, where)
    mixer = spec.component("mixture")
    with guarded(mixer, "building the mixer"):
        data = TrainingData(train, synthetic, val, mixer.create(), spec.run.seed)
    log.info("data.ready", original=len(train), synthetic=len(synthetic), val=len(val),
             skipped_bad_records=bad.count)
    with guarded(spec.component("backend"), "training", context):
        return trainer.train(data, context) or {}


def _stopped(context: RunContext, exc: BaseException) -> dict[str, Any]:
    """Where an interrupted run stopped, for its final event; its report says so too (when it has metrics)."""
    message = f"{stopped_message(context.last_step, context.planned_steps)} ({signal_name(exc)})"
    found: dict[str, Any] = {"stopped": message, "signal": signal_name(exc)}
    if context.last_step is not None:
        found["step"] = context.last_step
    if context.planned_steps is not None:
        found["total_steps"] = context.planned_steps
    if context.report and (context.run_dir / METRICS_FILE).is_file():
        try:
            from beyondagent_core.reports import write_run_report

            page = write_run_report(context.manager, context.run_dir, title=context.info.name, stopped=message)
            if page is not None:
                found["report"] = str(page)
        except Exception as error:  # noqa: BLE001 - no matplotlib, odd numbers: the event still says where it stopped
            log.warning("run.report_failed", error=f"{type(error).__name__}: {error}",
                        hint=f"beyondagent report {context.run_dir} draws it")
    return found
