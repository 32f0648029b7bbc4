"""`beyondagent eval`: a spec's workflow, env and judges on one split, k samples per task, no training.

The model is either a checkpoint (an HF model directory, a checkpoint of ours or a run directory:
the spec's backend serves it through its `eval_llm(run)` or `policy_llm(run)`, as it does for
`llm: policy`; a verl checkpoint is first merged into an HF directory by the verl plugin) or any
OpenAI-compatible endpoint. Every finished episode is appended to `episodes.jsonl` in the eval's
directory, so an interrupted eval resumes where it stopped; the directory's name holds a hash of
what decides the numbers (model, split, k, temperature, task limit, the spec's tasks, env,
workflow and judges), so changing any of them starts a new one. `eval.json` and `eval.html` hold
the summary (`beyondagent_plugin_report.eval.stats`), per origin and per task.

Head to head (`--opponent-checkpoint`, `--opponent-model`): in a multi-seat game (self-play, `env.opponent:
self`) the model plays seat i mod seats of its i-th sample of a task and the opponent every other seat,
so over k samples it plays each side; the numbers are the model's (win/draw/loss rates and
`elo_vs_opponent`, the Elo the games give it above the opponent: an earlier checkpoint, say), the
opponent's seats are kept on the same line of `episodes.jsonl` (`opponent_seats`). One-seat episodes
are the model's as always.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import sys
from collections.abc import Awaitable, Callable, Container, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs

from beyondagent_core.context import RunContext, RunInfo
from beyondagent_core.errors import BeyondAgentError, RunError, SpecError
from beyondagent_plugin_report.eval.settings import EvalSettings
from beyondagent_plugin_report.eval.stats import Sample, by_group, by_origin, by_seat, summarize, task_row
from beyondagent_core.jsonl import BadRecords, append_jsonl, cut_torn_tail
from beyondagent_core.llm import LLMConfig, LLMError, OpenAIChat
from beyondagent_core.logs import get_logger
from beyondagent_core.pipeline import Session, guarded, load_tasks
from beyondagent_core.protocols import ChatLLM
from beyondagent_core.rundir import run_dir_of
from beyondagent_core.secrets import redact
from beyondagent_core.types import Task, Trajectory, Turn

log = get_logger("beyondagent.eval")
T = TypeVar("T")

EPISODES_FILE = "episodes.jsonl"
# What decides an eval's numbers besides the model and the settings (the directory's hash).
SPEC_KEYS = ("tasks", "env", "workflow", "reward", "synthetic_reward", "model")


class EvalError(BeyondAgentError):
    """A usage problem of `eval` (a model path that is no model, an endpoint that refuses); exit 2."""


@attrs.frozen
class ModelChoice:
    """`checkpoint` (a resolved model directory) or `endpoint` (an `LLMConfig`)."""

    checkpoint: Path | None = None
    endpoint: LLMConfig | None = None

    def describe(self) -> str:
        if self.checkpoint is not None:
            return f"checkpoint {self.checkpoint}"
        assert self.endpoint is not None
        # masked: this goes into eval.json, eval.html and the eval directory's name
        return redact(f"endpoint {self.endpoint.model} at {self.endpoint.base_url or 'the openai default'}")


def resolve_checkpoint(path: str | Path, *, merge: bool = True, registry: Any = None) -> Path:
    """The model directory `path` means: itself, its `model/`, or a run's newest checkpoint; for a
    checkpoint in a backend's own format (verl's) or a model name a backend knows (the torch
    plugin's `tiny` and known models), the HF directory that backend makes of it
    (`backend_checkpoint`: merged or fetched now, once, unless `merge` is False)."""
    root = Path(path)
    # a backend's own format, or a model name a backend knows (`smollm2-135m-instruct`, `tiny`)
    converted = backend_checkpoint(root, merge=merge, registry=registry)
    if converted is not None:
        return converted
    if not root.exists():
        raise EvalError(f"checkpoint {root} does not exist", where="--checkpoint",
                        hint="pass a model directory (with config.json), a checkpoint, a run directory, or a "
                             "model name (`beyondagent model list`)")
    if (root / "config.json").is_file():
        return root
    if (root / "model" / "config.json").is_file():
        return root / "model"
    steps = sorted((p for p in (root / "checkpoints").glob("step_*") if (p / "model" / "config.json").is_file()),
                   key=lambda p: int("".join(ch for ch in p.name if ch.isdigit()) or 0))
    if steps:
        return steps[-1] / "model"
    raise EvalError(f"{root} is not a model: no config.json there, in model/, or in a checkpoints/step_* of a run, "
                    f"and no verl checkpoint (checkpoints/global_step_N/actor)", where="--checkpoint",
                    hint="pass an HF model directory, runs/<name>/checkpoints/step_N (torch), "
                         "runs/<name>/checkpoints/global_step_N (verl), or the run directory runs/<name> "
                         "(its newest checkpoint)")


def backend_checkpoint(root: Path, *, merge: bool, registry: Any) -> Path | None:
    """A checkpoint in a backend's own format (verl's FSDP shards, ...) as the HF directory that
    backend turns it into; None when no installed backend claims `root`.

    A backend class claims its checkpoints with an optional `checkpoint_model(root, *, merge, say)`
    (returning None for a path it does not recognise); the core imports no backend to ask."""
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    for registration in registry.registrations("backend") if registry is not None else ():
        try:
            find = getattr(registration.spec.load_factory(), "checkpoint_model", None)
        except ImportError:
            continue  # a backend whose own imports fail here cannot have written this checkpoint
        if not callable(find):
            continue
        try:
            found = find(root, merge=merge, say=say)
        except BeyondAgentError as exc:
            if isinstance(exc, RunError):
                raise
            raise EvalError(exc.message, where=exc.where, hint=exc.hint) from None
        if found is not None:
            return found
    if any(root.glob("global_step_*")) or any(root.glob("checkpoints/global_step_*")) or any(
            root.glob("model_world_size_*_rank_*.pt")) or root.name.startswith("global_step_"):
        raise EvalError(f"{root} looks like a verl checkpoint; merging it into an HF model needs the verl plugin",
                        where="--checkpoint", hint="pip install beyondagent-plugin-verl")
    return None


@attrs.frozen
class Opponent:
    """The other side of a head-to-head eval: `model`, served from `spec` (the eval's spec with its
    `model.path` at the opponent's checkpoint; None for an endpoint)."""

    model: ModelChoice
    spec: Any = None

    def plays(self, seat: int, seats: int | None, index: int) -> bool:
        """Whether the opponent plays `seat` of sample `index`'s episode of `seats` (None: unsaid)."""
        return seats is not None and seats > 1 and seat != index % seats


def eval_dir(session: Session, settings: EvalSettings, model: ModelChoice, opponent: Opponent | None = None) -> Path:
    resolved = session.spec.redacted()
    kept = attrs.asdict(settings, filter=lambda attribute, value: attribute.name != "concurrency")
    decided = {"model": model.describe(), "settings": kept,
               "spec": {key: resolved.get(key) for key in SPEC_KEYS}}
    if opponent is not None:
        decided["opponent"] = opponent.model.describe()
    digest = hashlib.sha256(json.dumps(decided, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return run_dir_of(session.spec) / "eval" / f"{settings.split}-k{settings.k}-{digest}"


class SamplingDefaults:
    """A ChatLLM passing `temperature` when the workflow does not set one itself."""

    def __init__(self, llm: ChatLLM, temperature: float):
        self.llm, self.temperature = llm, temperature

    async def chat(self, messages: Any, **sampling: Any) -> Turn:
        if sampling.get("temperature") is None:
            sampling["temperature"] = self.temperature
        return await self.llm.chat(messages, **sampling)


def load_split(session: Session, split: str, limit: int | None) -> list[Task]:
    key = f"tasks.{split}"
    component = session.spec.component(key)
    if component is None or component.registration is None:
        raise SpecError(f"the spec has no {key} to evaluate on", where=f"{session.spec.path}, key {key}",
                        hint=f"add {key} to the spec, or pick another split with --split")
    tasks = load_tasks(session.spec, key, BadRecords("fail"))
    return tasks[:limit] if limit else tasks


def read_done(path: Path, *, repair: bool = True) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """The samples (not the trajectories: tasks x k of them stay small) of the episodes an earlier,
    interrupted eval finished, by (task, sample index): one, or one per seat of a multi-seat episode;
    `repair` cuts a torn last line off the file (a dry run only skips it), so the next append starts
    a line of its own."""
    done: dict[tuple[str, int], list[dict[str, Any]]] = {}
    if not path.is_file():
        return done
    if repair and (cut := cut_torn_tail(path)):
        log.warning("eval.torn_line_cut", file=str(path), bytes=cut)
    for line_number, line in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            record = json.loads(line)
            samples = [record["sample"], *(seat["sample"] for seat in record.get("other_seats") or [])]
            done[(samples[0]["task_id"], int(samples[0]["index"]))] = [dict(sample) for sample in samples]
        except (ValueError, KeyError, TypeError, RecursionError, AttributeError):
            log.warning("eval.bad_line_skipped", file=str(path), line=line_number)
    return done


def sample_of(task: Task, index: int, trajectory: Trajectory) -> Sample:
    reward = trajectory.reward
    group = (task.metadata or {}).get("eval_group")
    details = reward.details if reward is not None and isinstance(reward.details, dict) else {}
    outcome = details.get("outcome") if "opponent" in details else None  # a game against an opponent
    return Sample(task_id=task.task_id, origin=task.origin, index=index, group=group if isinstance(group, str) else None,
                  score=0.0 if reward is None else float(reward.score),
                  success=bool(reward is not None and reward.success),
                  turns=sum(1 for turn in trajectory.turns if turn.role == "assistant"), error=trajectory.error,
                  outcome=outcome if isinstance(outcome, str) else None, seat=trajectory.seat)


@contextlib.contextmanager
def serve_model(context: RunContext, model: ModelChoice) -> Iterator[ChatLLM]:
    if model.endpoint is not None:
        yield OpenAIChat(model.endpoint, key_path="--model")
        return
    backend = context.spec.component("backend")
    with guarded(backend, "building the backend"):
        created = backend.create()  # `eval_llm`: a backend that serves a checkpoint only for evals
        serve = getattr(created, "eval_llm", None) or getattr(created, "policy_llm", None)
    if not callable(serve):
        raise EvalError(f"the backend {backend.name!r} cannot serve a checkpoint in this process",
                        where=f"{context.spec.path}, key backend.name",
                        hint="evaluate with backend.name=torch, or serve the model (e.g. `vllm serve PATH`) and "
                             "pass --model NAME --base-url URL")
    with guarded(backend, "loading the checkpoint"), serve(context) as llm:
        yield llm


async def check_endpoint(llm: ChatLLM, model: ModelChoice) -> None:
    """One tiny request before the eval: an endpoint that refuses is one clear error, not k x tasks."""
    try:
        await llm.chat([{"role": "user", "content": "Reply with OK."}], max_tokens=1)
    except LLMError as exc:
        raise EvalError(f"the {model.describe()} refused a test request: {exc.message}", where="--model",
                        hint=exc.hint or "check --base-url, --model and the API key variable") from exc


def evaluate(session: Session, settings: EvalSettings, model: ModelChoice, *, out: Path | None = None,
             show_progress: bool = True, opponent: Opponent | None = None) -> dict[str, Any]:
    """Run the eval (resuming), write eval.json and eval.html, return eval.json's content."""
    from beyondagent_plugin_report.eval.page import write_page

    spec = session.spec
    tasks = load_split(session, settings.split, settings.limit)
    if not tasks:
        raise SpecError(f"tasks.{settings.split} has no tasks", where=f"{spec.path}, key tasks.{settings.split}")
    out = out or eval_dir(session, settings, model, opponent)
    out.mkdir(parents=True, exist_ok=True)
    episodes_path = out / EPISODES_FILE
    done = read_done(episodes_path)
    ids = {task.task_id for task in tasks}
    to_run = len(tasks) * settings.k - sum(1 for task_id, index in done if task_id in ids and index < settings.k)
    log.info("eval.started", out=str(out), tasks=len(tasks), k=settings.k, to_run=to_run, resumed=len(done),
             model=model.describe())
    info = RunInfo(name=f"{spec.run.name}-eval", run_dir=out, seed=settings.seed, spec=spec.redacted())
    context = RunContext(spec=spec, info=info, manager=session.manager)
    try:
        if to_run:
            jobs = pending(tasks, settings.k, done)
            asyncio.run(_run_jobs(context, model, settings, jobs, to_run, episodes_path, show_progress,
                                  opponent=opponent))
    finally:
        context.close()
    records = read_done(episodes_path)
    keys = [(task.task_id, index) for task in tasks for index in range(settings.k)]
    missing = sum(1 for key in keys if key not in records)
    if missing:
        raise RunError(f"{missing} episodes are missing from {episodes_path}",
                       hint="run the same command again: the eval resumes")
    samples = [Sample(**sample) for key in keys for sample in records[key]]
    by_task: dict[str, list[Sample]] = {}
    for sample in samples:
        by_task.setdefault(sample.task_id, []).append(sample)
    result = {
        "model": model.describe(), "spec": str(spec.path), "settings": attrs.asdict(settings),
        **({"opponent": opponent.model.describe()} if opponent is not None else {}),
        "summary": summarize(samples, settings.k, seed=settings.seed),
        "by_origin": by_origin(samples, settings.k, seed=settings.seed),
        "by_group": by_group(samples, settings.k, seed=settings.seed),
        "by_seat": by_seat(samples, settings.k, seed=settings.seed),
        "tasks": [task_row(task_id, group) for task_id, group in by_task.items()],
        "episodes": str(episodes_path),
    }
    (out / "eval.json").write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
    write_page(result, out / "eval.html")
    result["out"] = str(out)
    return result


def pending(tasks: Sequence[Task], k: int, done: Container[tuple[str, int]]) -> Iterator[tuple[Task, int]]:
    """The episodes still to run, (task, sample index), made one at a time as workers ask."""
    for task in tasks:
        for index in range(k):
            if (task.task_id, index) not in done:
                yield task, index


async def run_pool(jobs: Iterator[T], run: Callable[[T], Awaitable[None]], workers: int) -> None:
    """`run(job)` for every job, `workers` at a time; a job is taken from `jobs` only when a worker
    is free, so tasks x k episodes never exist as a list or as coroutines all at once."""

    async def worker() -> None:
        for job in jobs:  # one iterator shared by every worker: each job goes to exactly one
            await run(job)

    await asyncio.gather(*(worker() for _ in range(workers)))


async def _run_jobs(context: RunContext, model: ModelChoice, settings: EvalSettings,
                    jobs: Iterator[tuple[Task, int]], total: int, episodes_path: Path, show_progress: bool,
                    opponent: Opponent | None = None) -> None:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    runner = context.episode_runner()
    with contextlib.ExitStack() as stack:
        served = stack.enter_context(serve_model(context, model))
        if model.endpoint is not None:
            await check_endpoint(served, model)
        llm = SamplingDefaults(served, settings.temperature)
        rival = None
        if opponent is not None:
            rival_context = context if opponent.spec is None else RunContext(
                spec=opponent.spec, info=context.info, manager=context.manager)
            rival_served = stack.enter_context(serve_model(rival_context, opponent.model))
            if opponent.model.endpoint is not None:
                await check_endpoint(rival_served, opponent.model)
            rival = SamplingDefaults(rival_served, settings.temperature)
        with Progress(TextColumn("[bold]eval"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.fields[info]}"), disable=not show_progress) as progress:
            bar = progress.add_task("eval", total=total, info="")
            successes = 0

            async def one(job: tuple[Task, int]) -> None:
                nonlocal successes
                task, index = job
                theirs: set[int] = set()  # the opponent's seats (head to head), once the workflow says how many

                def seat_llm(seat: int, seats: int | None = None) -> Any:
                    if rival is not None and seats is not None:
                        theirs.update(k for k in range(seats) if opponent.plays(k, seats, index))
                    return rival if seat in theirs else llm  # without an opponent one model plays every seat

                trajectories = await runner.run_seats(task, seat_llm)
                rivals = [t for t in trajectories if (t.seat or 0) in theirs]
                first, *others = [t for t in trajectories if (t.seat or 0) not in theirs] or trajectories
                sample = sample_of(task, index, first)
                record = {"sample": attrs.asdict(sample), "trajectory": first.to_dict()}
                if others:  # a multi-seat episode: the other seats' on the same line (one line per episode)
                    record["other_seats"] = [{"sample": attrs.asdict(sample_of(task, index, t)),
                                              "trajectory": t.to_dict()} for t in others]
                if rivals:  # head to head: the opponent's seats, kept out of the numbers
                    record["opponent_seats"] = [t.to_dict() for t in rivals]
                append_jsonl(episodes_path, [record])
                successes += sample.success
                progress.update(bar, advance=1, info=f"success {successes}")

            await run_pool(jobs, one, settings.concurrency)
    await context.aclose()
