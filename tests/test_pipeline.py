"""The pipeline end to end, through the testing kit: inline plugins, real files, real runs.

`register_plugin` and `run_spec` come from `beyondagent_core.testing` (enabled by the root
pyproject's addopts). Every component here is a small real implementation registered as an
inline plugin; the backend is the built-in `export`, which writes each epoch's mix.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from beyondagent_core import (
    BackendSpec,
    EnvReset,
    EnvSpec,
    EnvStep,
    ExplorerSpec,
    MixerSpec,
    Reward,
    SummarizerSpec,
    Task,
    TaskFilterSpec,
    TaskSourceSpec,
    Trajectory,
    Turn,
    hookimpl,
)
from beyondagent_core.context import RunInfo
from beyondagent_core.errors import DataError, RunError, SpecError
from beyondagent_core.jsonl import read_tasks, write_tasks

SECRET = "s3cr3t-value-do-not-save"
PROVIDER = "inline-test-plugin 0.0.0 (inline)"

SEEDS = [Task(task_id=f"seed-{start}", query=f"Reach {start + 5}.", metadata={"start": start}) for start in (0, 10, 20)]


# --- the inline plugin -----------------------------------------------------------------------


@attrs.define
class RotateConfig:
    api_key: str = ""
    token: str = ""
    rotate: bool = True


class Rotate:
    """Originals then synthetic tasks, rotated left by `epoch` (so each epoch's mix differs)."""

    def __init__(self, config: RotateConfig, seen_keys: list[str]):
        self.config = config
        seen_keys.append(config.api_key)

    def mix(self, original, synthetic, *, epoch, seed):
        tasks = list(original) + list(synthetic)
        if not self.config.rotate or not tasks:
            return tasks
        k = epoch % len(tasks)
        return tasks[k:] + tasks[:k]


class Exploding:
    def __init__(self, config):
        pass

    def train(self, data, run):
        run.step_finished(0, {"loss": 1.0})
        raise RuntimeError("disk on fire")


@attrs.define
class ListConfig:
    ids: list[str] = attrs.field(factory=list)
    junk: bool = False


class ListSource:
    """Yields a task per id, duplicates included; `junk` adds a non-Task."""

    def __init__(self, config: ListConfig):
        self.config = config

    def load(self, bad):
        yield from (Task(task_id=task_id, query=f"q {task_id}") for task_id in self.config.ids)
        if self.config.junk:
            yield {"task_id": "not-a-task"}


class NumberLine:
    """A sync env: starts at the seed's `metadata["start"]`; "right" moves by one."""

    def __init__(self, config, created: list[NumberLine]):
        self.position = 0
        self.closed = False
        created.append(self)

    def reset(self, task: Task) -> EnvReset:
        self.position = task.metadata.get("start", 0)
        return EnvReset(messages=[{"role": "user", "content": f"position {self.position}"}])

    def step(self, action: dict) -> EnvStep:
        self.position += 1 if action["content"] == "right" else 0
        return EnvStep(observation=[{"role": "user", "content": f"position {self.position}"}])

    def evaluate(self) -> Reward:
        return Reward(score=0.0)

    def close(self) -> None:
        self.closed = True


@attrs.define
class WalkerConfig:
    moves: int = 2


FAILING_SEED = {"id": ""}  # explorations of this seed raise, as with an LLM answering 401 (not in the spec)


class Walker:
    def __init__(self, config: WalkerConfig, calls: list[str]):
        self.moves = config.moves
        self.calls = calls

    async def explore(self, seed: Task, env, llm) -> Trajectory:
        self.calls.append(seed.task_id)
        if seed.task_id == FAILING_SEED["id"]:
            raise PermissionError("Error code: 401 - invalid api key")
        first = await env.reset(seed)
        turns = [Turn(role="user", content=first.messages[0]["content"])]
        for _ in range(self.moves):
            step = await env.step({"role": "assistant", "content": "right"})
            turns += [Turn(role="assistant", content="right"), Turn(role="user", content=step.observation[0]["content"])]
        return Trajectory(task=seed, turns=turns)


class Reached:
    """"reach position k" for the position reached (sure), plus an unsure guess."""

    def __init__(self, config):
        pass

    async def summarize(self, seed, trajectory, known, llm) -> list[Task]:
        reached = int(trajectory.turns[-1].content.split()[-1])
        return [Task(task_id="cand", query=f"reach position {reached}", ground_truth=reached, confidence=0.9),
                Task(task_id="guess", query="reach position 999", confidence=0.1)]


@attrs.define
class MinConfidenceConfig:
    threshold: float = 0.0


class MinConfidenceDedup:
    def __init__(self, config: MinConfidenceConfig):
        self.threshold = config.threshold

    async def keep(self, candidates: Sequence[Task], kept: Sequence[Task]) -> list[Task]:
        seen = {task.query for task in kept}
        out = []
        for task in candidates:
            if (task.confidence or 0.0) >= self.threshold and task.query not in seen:
                seen.add(task.query)
                out.append(task)
        return out


class Inline:
    """One inline plugin providing every component these tests use, and recording what it sees."""

    def __init__(self) -> None:
        self.seen_keys: list[str] = []
        self.explorations: list[str] = []
        self.envs: list[NumberLine] = []
        self.events: list[tuple] = []

    @hookimpl
    def beyondagent_task_sources(self):
        return [TaskSourceSpec(name="listed", factory=ListSource, config_cls=ListConfig)]

    @hookimpl
    def beyondagent_mixers(self):
        return [MixerSpec(name="rotate", factory=lambda config: Rotate(config, self.seen_keys),
                          config_cls=RotateConfig)]

    @hookimpl
    def beyondagent_backends(self):
        return [BackendSpec(name="exploding", factory=Exploding)]

    @hookimpl
    def beyondagent_envs(self):
        return [EnvSpec(name="line", factory=lambda config: NumberLine(config, self.envs))]

    @hookimpl
    def beyondagent_explorers(self):
        return [ExplorerSpec(name="walker", factory=lambda config: Walker(config, self.explorations),
                             config_cls=WalkerConfig)]

    @hookimpl
    def beyondagent_summarizers(self):
        return [SummarizerSpec(name="reached", factory=Reached)]

    @hookimpl
    def beyondagent_task_filters(self):
        return [TaskFilterSpec(name="confident", factory=MinConfidenceDedup, config_cls=MinConfidenceConfig)]

    @hookimpl
    def beyondagent_run_started(self, run):
        self.events.append(("started", run, (run.run_dir / "spec.resolved.yaml").is_file()))

    @hookimpl
    def beyondagent_step_finished(self, run, step, metrics):
        self.events.append(("step", run, step, dict(metrics)))

    @hookimpl
    def beyondagent_run_finished(self, run, status, metrics):
        self.events.append(("finished", run, status, dict(metrics)))


@pytest.fixture
def inline(register_plugin) -> Inline:
    plugin = Inline()
    record = register_plugin(plugin)
    assert record.status == "ok", record.error
    return plugin


@pytest.fixture
def data(tmp_path: Path) -> dict[str, Path]:
    train = tmp_path / "train.jsonl"
    val = tmp_path / "val.jsonl"
    write_tasks(train, SEEDS + [Task(task_id="plain", query="What is 2+2?", ground_truth="4", metadata={"start": 50})])
    write_tasks(val, [Task(task_id=f"v{i}", query=f"val {i}") for i in range(2)])
    return {"train": train, "val": val}


def base_spec(data: dict[str, Path], **sections: Any) -> dict[str, Any]:
    spec = {
        "run": {"name": "r1", "seed": 3},
        "tasks": {"train": {"name": "jsonl", "path": str(data["train"])},
                  "val": {"name": "jsonl", "path": str(data["val"])}},
        "mixture": {"name": "rotate"},
        "backend": {"name": "export", "epochs": 2},
    }
    spec.update(sections)
    return spec


def events_of(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()]


# --- (a) a full run --------------------------------------------------------------------------


def test_a_full_run_writes_an_explainable_run_dir(inline, data, run_spec, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("MY_TEST_KEY", SECRET)
    spec = base_spec(data, mixture={"name": "rotate", "api_key": "${oc.env:MY_TEST_KEY}", "token": "literal-tok-123"})
    result = run_spec(spec)
    run_dir = result.run_dir
    assert run_dir == tmp_path / "runs" / "r1"
    assert result.metrics == {"tasks": 4, "original": 4, "synthetic": 0, "val_tasks": 2}
    assert inline.seen_keys == [SECRET]  # the component got the real value...

    # ...but nothing in the run directory holds it.
    for name in ("spec.resolved.yaml", "events.jsonl", "plugins.json", "reproduce.json"):
        text = (run_dir / name).read_text(encoding="utf-8")
        assert SECRET not in text and "literal-tok-123" not in text, name
    assert json.loads((run_dir / "reproduce.json").read_text(encoding="utf-8"))["seed"] == 3
    resolved = yaml.safe_load((run_dir / "spec.resolved.yaml").read_text(encoding="utf-8"))
    assert resolved["mixture"] == {"name": "rotate", "api_key": "***", "token": "***", "rotate": True}
    assert resolved["backend"] == {"name": "export", "format": "jsonl", "epochs": 2, "dir": "data"}
    assert resolved["run"]["seed"] == 3

    provenance = json.loads((run_dir / "plugins.json").read_text(encoding="utf-8"))
    assert provenance["components"]["mixture"] == {
        "kind": "mixer", "name": "rotate", "plugin": "inline", "distribution": "inline-test-plugin", "version": "0.0.0"}
    assert provenance["components"]["backend"] == {
        "kind": "backend", "name": "export", "plugin": "builtin", "distribution": "beyondagent", "version": "0.1.0"}
    assert provenance["components"]["tasks.train"]["name"] == "jsonl"
    assert provenance["components"]["tasks.val"]["plugin"] == "builtin"
    assert {p["name"]: p["status"] for p in provenance["plugins"]}["inline"] == "ok"

    events = events_of(run_dir)
    names = [e["event"] for e in events]
    assert names[0] == "run.started" and names[-1] == "run.finished"
    assert names.index("run.started") < names.index("data.ready") < names.index("train.step")
    steps = [e for e in events if e["event"] == "train.step"]
    assert [(e["step"], e["tasks"]) for e in steps] == [(0, 4), (1, 4)]
    assert events[-1]["status"] == "ok" and events[-1]["val_tasks"] == 2

    # One file per epoch, each re-mixed; the val split as it is.
    out = run_dir / "data"
    originals = read_tasks(data["train"])
    assert read_tasks(out / "train.epoch0.jsonl") == originals
    assert read_tasks(out / "train.epoch1.jsonl") == originals[1:] + originals[:1]
    assert read_tasks(out / "val.jsonl") == read_tasks(data["val"])
    assert sorted(p.name for p in out.iterdir()) == ["train.epoch0.jsonl", "train.epoch1.jsonl", "val.jsonl"]



def test_events_carry_the_run_id_of_the_run_that_wrote_them(inline, data, run_spec) -> None:
    spec = base_spec(data)
    run_spec(spec)
    second = run_spec(spec)  # the same run directory
    events = events_of(second.run_dir)
    started = [event["run_id"] for event in events if event["event"] == "run.started"]
    assert len(started) == 2 and len(set(started)) == 2
    assert {event["run_id"] for event in events} == set(started)
    assert [event["run_id"] for event in events] == sorted(event["run_id"] for event in events)

def test_the_same_run_twice_appends_events(inline, data, run_spec) -> None:
    first = run_spec(base_spec(data))
    second = run_spec(base_spec(data), "backend.epochs=1")
    assert first.run_dir == second.run_dir
    finished = [e for e in events_of(second.run_dir) if e["event"] == "run.finished"]
    assert [e["status"] for e in finished] == ["ok", "ok"]


# --- (b) lifecycle hooks ---------------------------------------------------------------------


def test_lifecycle_hooks_see_the_run(inline, data, run_spec, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("MY_TEST_KEY", SECRET)
    result = run_spec(base_spec(data, mixture={"name": "rotate", "api_key": "${oc.env:MY_TEST_KEY}"}))
    kinds = [event[0] for event in inline.events]
    assert kinds == ["started", "step", "step", "finished"]

    _, info, spec_saved = inline.events[0]
    assert isinstance(info, RunInfo)
    assert (info.name, info.run_dir, info.seed) == ("r1", tmp_path / "runs" / "r1", 3)
    assert spec_saved, "run_started must come after the run directory is written"
    assert info.spec["mixture"]["api_key"] == "***"
    assert info.spec["tasks"]["train"]["path"] == str(data["train"])

    steps = [(event[2], event[3]) for event in inline.events if event[0] == "step"]
    assert steps == [(0, {"tasks": 4, "original": 4, "synthetic": 0}), (1, {"tasks": 4, "original": 4, "synthetic": 0})]
    assert all(event[1] is info for event in inline.events)
    assert inline.events[-1][2:] == ("ok", result.metrics)


# --- (c) a failing component -----------------------------------------------------------------


def test_a_failing_backend_is_a_run_error_naming_key_and_provider(inline, data, run_spec) -> None:
    with pytest.raises(RunError) as info:
        run_spec(base_spec(data, backend={"name": "exploding"}))
    error = info.value
    assert error.exit_code == 1
    assert error.message == "training failed: RuntimeError: disk on fire"
    assert error.where == f"backend (backend 'exploding' from {PROVIDER})"
    assert "-v" in error.hint
    assert isinstance(error.__cause__, RuntimeError)

    assert [event[0] for event in inline.events] == ["started", "step", "finished"]
    assert inline.events[-1][2:] == ("error", {})

    events = events_of(Path("runs") / "r1")
    failed = next(e for e in events if e["event"] == "component.failed")
    assert failed["action"] == "training" and failed["where"] == error.where
    assert "RuntimeError: disk on fire" in failed["exception"] and "Traceback" in failed["exception"]
    assert events[-1]["event"] == "run.finished" and events[-1]["status"] == "error"


def test_a_mixer_factory_failing_names_the_mixture(inline, data, run_spec, register_plugin) -> None:
    class Broken:
        @hookimpl
        def beyondagent_mixers(self):
            def factory(config):
                raise TypeError("bad wiring")
            return [MixerSpec(name="broken_mix", factory=factory)]

    register_plugin(Broken(), "broken", distribution="beyondagent-plugin-broken", version="2.0")
    with pytest.raises(RunError) as info:
        run_spec(base_spec(data, mixture={"name": "broken_mix"}))
    assert info.value.message == "building the mixer failed: TypeError: bad wiring"
    assert info.value.where == "mixture (mixer 'broken_mix' from beyondagent-plugin-broken 2.0 (broken))"
    assert inline.events[-1][2] == "error"


# --- (d) dry runs ----------------------------------------------------------------------------


def test_dry_run_counts_after_mixing_without_a_run_dir(inline, data, run_spec, tmp_path) -> None:
    cache = tmp_path / "synthetic.jsonl"
    write_tasks(cache, [Task(task_id=f"syn-{i}", query=f"s{i}", origin="synthetic", seed_task_id="seed-0")
                        for i in range(3)])
    result = run_spec(base_spec(data, explore={"cache": str(cache)}), dry_run=True)
    plan = result.plan
    assert result.metrics is None
    assert (plan.original, plan.val, plan.synthetic) == (4, 2, 3)
    assert plan.synthetic_source == f"cache {cache}"
    assert plan.mixed == {"original": 4, "synthetic": 3}
    rows = {row["key"]: row for row in plan.components}
    assert rows["mixture"] == {"key": "mixture", "kind": "mixer", "name": "rotate", "provider": PROVIDER}
    assert rows["backend"]["provider"] == "beyondagent 0.1.0 (builtin)"
    assert rows["tasks.train"]["name"] == "jsonl" and rows["tasks.val"]["kind"] == "task_source"
    assert not (tmp_path / "runs").exists()
    assert inline.events == [] and inline.explorations == []


def test_dry_run_before_exploration_does_not_explore(inline, data, run_spec, tmp_path) -> None:
    spec = base_spec(data, env={"name": "line"},
                     explore={"name": "walker", "n": 2, "summarizer": {"name": "reached"},
                              "filters": [{"name": "confident"}]})
    plan = run_spec(spec, dry_run=True).plan
    assert plan.synthetic is None and plan.mixed is None
    assert plan.synthetic_source == (f"to be explored: 4 seeds x 2, cached in "
                                     f"{tmp_path / 'runs' / 'r1' / 'synthetic_tasks.jsonl'}")
    keys = [row["key"] for row in plan.components]
    assert {"env", "explore", "explore.summarizer", "explore.filters[0]"} <= set(keys)
    assert inline.explorations == [] and inline.envs == []
    assert not (tmp_path / "runs").exists()


# --- (e) exploration through the pipeline ----------------------------------------------------


def explore_spec(data: dict[str, Path], **explore: Any) -> dict[str, Any]:
    block = {"name": "walker", "n": 2, "workers": 2, "moves": 2,
             "summarizer": {"name": "reached"}, "filters": [{"name": "confident", "threshold": 0.5}]}
    block.update(explore)
    return base_spec(data, env={"name": "line"}, explore=block, backend={"name": "export", "epochs": 1},
                     mixture={"name": "rotate", "rotate": False})


def test_exploration_synthesizes_caches_and_exports(inline, data, run_spec) -> None:
    result = run_spec(explore_spec(data))
    cache = result.run_dir / "synthetic_tasks.jsonl"
    synthetic = read_tasks(cache)

    seeds = read_tasks(data["train"])
    # 4 seeds x n=2 explorations, each in a fresh env that is closed afterwards.
    assert sorted(inline.explorations) == sorted([s.task_id for s in seeds] * 2)
    assert len(inline.envs) == 8 and all(env.closed for env in inline.envs)
    # Per seed: the sure task (start + 2 moves) once; the guess and the repeat are filtered out.
    starts = {s.task_id: s.metadata.get("start", 0) for s in seeds}
    assert sorted((t.seed_task_id, t.query) for t in synthetic) == sorted(
        (seed_id, f"reach position {start + 2}") for seed_id, start in starts.items())
    assert all(t.origin == "synthetic" for t in synthetic)
    ids = [t.task_id for t in synthetic]
    assert len(set(ids)) == len(ids) and not set(ids) & set(starts)

    exported = read_tasks(result.run_dir / "data" / "train.epoch0.jsonl")
    assert exported == seeds + synthetic
    assert result.metrics == {"tasks": 8, "original": 4, "synthetic": 4, "val_tasks": 2}
    assert "explore.cached" in [e["event"] for e in events_of(result.run_dir)]

    # A second run reuses the cache: nothing is explored again.
    again = run_spec(explore_spec(data))
    assert len(inline.explorations) == 8
    assert read_tasks(again.run_dir / "data" / "train.epoch0.jsonl") == seeds + synthetic
    assert read_tasks(cache) == synthetic
    assert [e["event"] for e in events_of(again.run_dir)].count("explore.cache_used") == 1


def test_exploration_cache_path_from_the_spec(inline, data, run_spec, tmp_path) -> None:
    cache = tmp_path / "elsewhere" / "syn.jsonl"
    result = run_spec(explore_spec(data, cache=str(cache), n=1))
    assert len(inline.explorations) == 4
    assert len(read_tasks(cache)) == 4
    assert not (result.run_dir / "synthetic_tasks.jsonl").exists()
    plan = run_spec(explore_spec(data, cache=str(cache), n=1), dry_run=True).plan
    assert plan.synthetic == 4 and plan.mixed == {"original": 4, "synthetic": 4}


def test_exploration_needs_an_env(inline, data, run_spec) -> None:
    spec = explore_spec(data)
    del spec["env"]
    with pytest.raises(SpecError) as info:
        run_spec(spec)
    assert info.value.message == "explore.n is 2 but env.name is not set"
    assert info.value.where.endswith("key env.name")
    assert "explore.n=0" in info.value.hint
    assert inline.explorations == []
    assert inline.events[-1][2] == "error"
    # A dry run says so too, instead of promising an exploration.
    with pytest.raises(SpecError, match="env.name is not set"):
        run_spec(spec, dry_run=True)
    spec["env"] = {"name": "line"}
    del spec["explore"]["summarizer"]
    with pytest.raises(SpecError, match="explore.n is 2 but explore.summarizer.name is not set"):
        run_spec(spec, dry_run=True)


def test_an_interrupted_exploration_resumes_and_another_seed_set_is_refused(inline, data, run_spec) -> None:
    first = run_spec(explore_spec(data, n=1))
    cache = first.run_dir / "synthetic_tasks.jsonl"
    state = cache.with_name(cache.name + ".checkpoint.jsonl")
    lines = state.read_text().splitlines(keepends=True)
    assert json.loads(lines[-1])["finished"] is True
    state.write_text("".join(lines[:-2]))  # as if killed before the last exploration was recorded
    inline.explorations.clear()

    again = run_spec(explore_spec(data, n=1))
    assert len(inline.explorations) == 1  # only the exploration that was not recorded
    assert len(read_tasks(again.run_dir / "synthetic_tasks.jsonl")) == 4
    with pytest.raises(RunError, match="another seed set"):  # a finished cache is checked too
        run_spec(explore_spec(data, n=2))

    state.write_text("".join(lines[:-1]))
    with pytest.raises(RunError, match="another seed set or other exploration settings") as info:
        run_spec(explore_spec(data, n=2))
    assert "n was 1, is 2 now" in info.value.message  # it says what changed
    assert "`beyondagent explore SPEC --force`" in info.value.hint  # a command that has --force
    # A plugin config that gained a key (here: the explorer's) is named as such.
    with pytest.raises(RunError) as info:
        run_spec(explore_spec(data, n=1, moves=3))
    assert "explore.moves was 2, is 3 now" in info.value.message


def test_explore_n_zero_without_cache_means_no_synthetic_tasks(inline, data, run_spec) -> None:
    result = run_spec(explore_spec(data, n=0))
    assert inline.explorations == []
    assert result.metrics["synthetic"] == 0
    assert not (result.run_dir / "synthetic_tasks.jsonl").exists()


# --- (f) duplicate task ids ------------------------------------------------------------------


def listed_spec(data, ids, **extra) -> dict[str, Any]:
    return base_spec(data, tasks={"train": {"name": "listed", "ids": ids, **extra}},
                     backend={"name": "export", "epochs": 1})


def test_duplicate_task_id_fails_by_default(inline, data, run_spec) -> None:
    with pytest.raises(DataError) as info:
        run_spec(listed_spec(data, ["a", "b", "a", "c"]))
    assert info.value.message == "malformed record: duplicate task_id 'a'"
    assert info.value.where == "tasks.train, task 'a'"
    assert "--on-bad-record=skip" in info.value.hint
    with pytest.raises(DataError, match="duplicate task_id 'a'"):
        run_spec(listed_spec(data, ["a", "b", "a", "c"]), dry_run=True)


def test_duplicate_task_ids_are_skipped_and_counted(inline, data, run_spec) -> None:
    result = run_spec(listed_spec(data, ["a", "b", "a", "c", "b"]), on_bad_record="skip")
    exported = read_tasks(result.run_dir / "data" / "train.epoch0.jsonl")
    assert [t.task_id for t in exported] == ["a", "b", "c"]  # the first of each id is kept
    events = events_of(result.run_dir)
    assert [e["where"] for e in events if e["event"] == "data.bad_record"] == ["tasks.train, task 'a'",
                                                                              "tasks.train, task 'b'"]
    ready = next(e for e in events if e["event"] == "data.ready")
    assert ready["original"] == 3 and ready["skipped_bad_records"] == 2
    plan = run_spec(listed_spec(data, ["a", "b", "a"]), dry_run=True, on_bad_record="skip").plan
    assert plan.original == 2


def test_a_task_source_yielding_something_else_names_its_provider(inline, data, run_spec) -> None:
    with pytest.raises(RunError) as info:
        run_spec(listed_spec(data, ["a"], junk=True))
    assert info.value.message == "tasks.train yielded dict, not Task"
    assert info.value.where == f"tasks.train ({PROVIDER})"



@pytest.fixture
def failing_seed():
    FAILING_SEED["id"] = "plain"
    yield
    FAILING_SEED["id"] = ""


def test_failed_explorations_fail_the_run_and_leave_the_cache_resumable(inline, data, run_spec, failing_seed) -> None:
    from beyondagent_core.exploration.checkpoint import is_finished

    with pytest.raises(RunError) as caught:
        run_spec(explore_spec(data))
    message = str(caught.value)
    assert "exploration: 2 of 8 failed (25%, more than explore.max_failed_fraction = 0)" in message
    assert "2 x PermissionError: Error code: 401 - invalid api key (first: plain#0)" in message
    cache = Path(caught.value.where.split("(cache ")[1].rstrip(")"))
    assert is_finished(cache) is False and len(read_tasks(cache)) == 3  # the 6 good explorations are kept
    # The next run retries only the failed explorations; with them fixed the cache is finished.
    inline.explorations.clear()
    FAILING_SEED["id"] = ""  # the key is fixed
    result = run_spec(explore_spec(data))
    assert sorted(inline.explorations) == ["plain", "plain"]
    assert is_finished(cache) is True and result.metrics["synthetic"] == 4


def test_failures_below_the_threshold_warn_and_go_on(inline, data, run_spec, failing_seed) -> None:
    result = run_spec(explore_spec(data, max_failed_fraction=0.5))
    warning = next(e for e in events_of(result.run_dir) if e["event"] == "stage.failures_below_threshold")
    assert warning["failed"] == 2 and warning["total"] == 8 and warning["level"] == "warning"
    assert "PermissionError" in warning["causes"]
    assert result.metrics["synthetic"] == 3


class SyncJudge:
    def __init__(self, config):
        pass

    def score(self, task, trajectory):  # not async: the contract says async
        return Reward(1.0)


class FloatJudge:
    def __init__(self, config):
        pass

    async def score(self, task, trajectory):
        return 1.0  # not a Reward


def test_a_judge_with_the_wrong_shape_is_named_when_built_or_scored(plugin_manager, register_plugin) -> None:
    import asyncio

    from beyondagent_core.errors import PluginError
    from beyondagent_core.judging import check_judge, score_after

    with pytest.raises(PluginError) as caught:
        check_judge(SyncJudge(None), "reward (reward 'sync_judge' from x 1.0 (x))")
    assert "SyncJudge.score() is not async" in str(caught.value) and "async def score(...)" in str(caught.value)
    check_judge(FloatJudge(None), "reward")  # the shape is right; what it returns is checked when scoring
    task = Task(task_id="t", query="q")
    with pytest.raises(TypeError, match=r"FloatJudge.score\(\) returned float '1.0', not Reward"):
        asyncio.run(score_after(FloatJudge(None), task, Trajectory(task=task)))


def test_a_judge_named_by_a_task_is_checked_before_the_run(inline, data, run_spec) -> None:
    from beyondagent_core.errors import UnknownComponentError

    write_tasks(data["train"], [Task(task_id="a", query="q"), Task(task_id="b", query="q", judge="evn")])
    judging = base_spec(data, backend={"name": "exploding"})  # a backend that scores episodes
    with pytest.raises(UnknownComponentError) as caught:
        run_spec(judging, dry_run=True)
    assert "unknown reward 'evn' (did you mean 'env'?)" in str(caught.value)
    assert "tasks.train: task 'b' names judge 'evn'" in str(caught.value)
    with pytest.raises(UnknownComponentError):
        run_spec(judging)  # before training starts (this backend would raise OSError in train)
    assert inline.events[-1][2] == "error"
    assert run_spec(base_spec(data)).metrics["tasks"]  # `export` scores nothing: the name is not needed


@pytest.mark.beyondagent_plugins("synthesis")
def test_a_component_name_inside_a_config_is_checked_by_validate(inline, data, run_spec) -> None:
    from beyondagent_core.errors import UnknownComponentError

    spec = explore_spec(data, summarizer={"name": "hindsight", "judge": "evn"})
    with pytest.raises(UnknownComponentError) as caught:
        run_spec(spec, dry_run=True)
    assert "key explore.summarizer.judge" in str(caught.value) and "did you mean 'env'" in str(caught.value)
