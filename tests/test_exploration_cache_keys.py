"""Which spec keys make an exploration cache stale, and the exploration engine's tallies and limits.

The cache's fingerprint (`pipeline.exploration_settings`, with the seeds and `n`) must change with
every setting that changes which tasks an exploration makes — the explorer's keys, the
summarizer's, each filter's, the env's problem (`max_steps`, `size`), `n` — and stay the same for
those that only say where or how fast it runs (`cache`, `executor`, the Ray keys, `workers`,
`max_failed_fraction`, `env.service`, `env.serve_args`): a changed one refuses a finished cache
naming the key. With `llm: policy` the policy's model, precision and the run's seed count too. The seeds are hashed in any order. The spec is read once with `pipeline.prepare` and the real
gym, random explorer, synthesis and mixers plugins (nothing explored, no LLM); each change is made
to its resolved form, as an override would make it, to keep the test fast.

The engine (`explore_seeds`): `candidates` counts what the summarizer proposed, `dropped_by_filter`
what each filter dropped (a real `dedup` and `min_confidence`, each charged with its own drops, in
either order); `n` may be 0 but not negative and `workers` must be at least 1. The engine runs on
the number-line env and scripted explorer of tests/test_explore.py.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from test_audit8_exploration_settings import SEEDS
from test_explore import NumberLine, ScriptedExplorer

from beyondagent_core import pipeline
from beyondagent_core.errors import RunError
from beyondagent_core.exploration.checkpoint import Checkpoint, check_fingerprint, fingerprint
from beyondagent_core.exploration.engine import explore_seeds
from beyondagent_core.types import Task, Trajectory

pytest.importorskip("beyondagent_plugin_gym")
pytest.importorskip("beyondagent_plugin_random_explorer")
pytest.importorskip("beyondagent_plugin_synthesis")

SPEC = """
tasks:
  train: {name: gym_tasks, env: frozenlake, count: 2, size: 2}
env: {name: frozenlake, max_steps: 6}
explore:
  name: random
  mode: random_actions
  max_explore_step: 4
  seed: 1
  n: 2
  workers: 2
  summarizer: {name: hindsight, max_tasks: 2}
  filters:
    - {name: dedup, threshold: 0.8}
    - {name: min_confidence, threshold: 0.5}
mixture: {name: original}
backend: {name: export}
"""

CHANGES_THE_TASKS = ["explore.max_explore_step=5", "explore.seed=2", "explore.mode=llm", "explore.temperature=0.5",
                     "explore.summarizer.max_tasks=3", "explore.summarizer.prefer=earlier",
                     "explore.summarizer.min_steps=2", "explore.filters.0.threshold=0.9",
                     "explore.filters.1.missing=drop", "env.max_steps=7", "env.size=3"]
HOW_IT_RUNS = ["explore.cache=/tmp/elsewhere.jsonl", "explore.executor=ray", "explore.ray_address=ray://10.0.0.1:10001",
               "explore.ray_actors=8", "explore.ray_num_cpus=1.5", "explore.workers=9",
               "explore.max_failed_fraction=0.25", "env.service=launch", "env.serve_args=[--process-warm, '8']"]


@pytest.fixture(scope="module")
def settings_for(tmp_path_factory):
    """`exploration_settings` of SPEC, read once with `pipeline.prepare`, with one resolved key changed.

    The key must be in the resolved spec already (every key here is, with its default where SPEC
    leaves it out), so a change is one a user's override would make."""
    from beyondagent_core.plugins import PluginManager, Switches

    path = tmp_path_factory.mktemp("spec") / "spec.yaml"
    path.write_text(SPEC)
    manager = PluginManager(Switches(autoload=False, allow={"gym", "random_explorer", "synthesis", "mixers",
                                                            "export"})).load()
    resolved = pipeline.prepare(path, [], manager=manager).spec.resolved

    def settings(override: str | None = None) -> dict:
        spec = copy.deepcopy(resolved)
        if override is not None:
            dotted, value = override.split("=", 1)
            *parents, last = dotted.split(".")
            where = spec
            for part in parents:
                where = where[int(part)] if isinstance(where, list) else where[part]
            assert last in where, f"{dotted} is not in the resolved spec"
            where[last] = yaml.safe_load(value)
        return {"n": 2, **pipeline.exploration_settings(SimpleNamespace(resolved=spec))}

    return settings


def test_every_setting_that_changes_the_tasks_is_in_the_fingerprint(settings_for) -> None:
    base = settings_for()
    for override in CHANGES_THE_TASKS:
        changed = settings_for(override)
        assert changed != base and fingerprint(SEEDS, changed) != fingerprint(SEEDS, base), override


def test_where_and_how_fast_it_runs_is_not(settings_for) -> None:
    base = settings_for()
    for override in HOW_IT_RUNS:
        assert settings_for(override) == base, override


def test_a_finished_cache_is_refused_when_a_filter_or_the_env_changed_naming_the_key(settings_for,
                                                                                   tmp_path: Path) -> None:
    cache = tmp_path / "synthetic.jsonl"
    then = settings_for()
    Checkpoint.open(cache, fingerprint(SEEDS, then), seeds=SEEDS, settings=then).finish()
    check_fingerprint(cache, fingerprint(SEEDS, then), seeds=SEEDS, settings=then)
    for override, named in (("explore.filters.0.threshold=0.9", "explore.filters"), ("env.max_steps=7",
                                                                                    "env.max_steps was 6, is 7 now")):
        now = settings_for(override)
        with pytest.raises(RunError, match="other exploration settings") as caught:
            check_fingerprint(cache, fingerprint(SEEDS, now), seeds=SEEDS, settings=now)
        assert named in caught.value.message, override
    now = {**then, "n": 3}
    with pytest.raises(RunError, match="n was 2, is 3 now"):
        check_fingerprint(cache, fingerprint(SEEDS, now), seeds=SEEDS, settings=now)


def test_the_seeds_are_hashed_in_any_order_but_each_one_counts() -> None:
    settings = {"n": 2, "explore": {"name": "random"}}
    assert fingerprint(SEEDS, settings) == fingerprint(list(reversed(SEEDS)), settings)
    moved = [SEEDS[0], Task(task_id=SEEDS[1].task_id, env="frozenlake", metadata={"map": ["SF", "FG"], "seed": 9})]
    assert fingerprint(moved, settings) != fingerprint(SEEDS, settings)


# --- the engine's tallies and limits --------------------------------------------------------------


ENGINE_SEEDS = [Task(task_id=f"seed-{start}", query=f"Reach {start + 5}.", metadata={"start": start})
                for start in (0, 10)]


class Proposes:
    """A summarizer (standing in for an LLM's proposals) with fixed confidences: per exploration, a task
    for the position reached (0.9), the same again (a duplicate) and an unsure guess (0.2)."""

    async def summarize(self, seed: Task, trajectory: Trajectory, known: Sequence[Task], llm) -> list[Task]:
        reached = trajectory.turns[-1].content.split()[-1]
        sure = Task(task_id="syn", query=f"reach position {reached}", confidence=0.9)
        return [sure, sure, Task(task_id="guess", query="guess the hidden word", confidence=0.2)]


def run(tmp_path: Path, filters: list, *, n: int = 2, workers: int = 2):
    return asyncio.run(explore_seeds(ENGINE_SEEDS, n=n, workers=workers, explorer=ScriptedExplorer(),
                                     summarizer=Proposes(), filters=filters, make_env=NumberLine,
                                     cache_path=tmp_path / "synthetic.jsonl"))


@pytest.mark.parametrize(("order", "dropped"), [(("min_confidence", "dedup"), {"min_confidence": 4, "dedup": 6}),
                                                (("dedup", "min_confidence"), {"dedup": 6, "min_confidence": 4})])
def test_each_filter_is_charged_with_what_it_dropped_in_its_place(tmp_path: Path, order, dropped) -> None:
    from beyondagent_plugin_synthesis.filters import Dedup, DedupConfig, MinConfidence

    made = {"min_confidence": MinConfidence(), "dedup": Dedup(DedupConfig(scope="seed"))}
    result = run(tmp_path, [(name, made[name]) for name in order], workers=1)  # one at a time: a fixed count
    assert result.candidates == 12 and result.completed == 4  # 2 seeds x 2 explorations x 3 proposals
    assert result.dropped_by_filter == dropped
    assert len(result.tasks) == 12 - sum(dropped.values()) == 2
    assert (made["min_confidence"].stats["dropped"], made["dedup"].stats["dropped"]) == (dropped["min_confidence"],
                                                                                        dropped["dedup"])


def test_no_filter_keeps_every_candidate(tmp_path: Path) -> None:
    result = run(tmp_path, [])
    assert result.candidates == len(result.tasks) == 12 and result.dropped_by_filter == {}
    assert len({task.task_id for task in result.tasks}) == 12  # colliding ids renamed


@pytest.mark.parametrize(("n", "workers", "explorations"), [(0, 1, 0), (1, 1, 2), (3, 1, 6)])
def test_n_may_be_zero_and_one_worker_is_enough(tmp_path: Path, n: int, workers: int, explorations: int) -> None:
    result = run(tmp_path, [], n=n, workers=workers)
    assert result.explorations == result.completed == explorations


@pytest.mark.parametrize(("n", "workers"), [(-1, 1), (1, 0)])
def test_a_negative_n_or_no_worker_is_refused(tmp_path: Path, n: int, workers: int) -> None:
    with pytest.raises(ValueError, match=f"need n >= 0 and workers >= 1, got n={n}, workers={workers}"):
        run(tmp_path, [], n=n, workers=workers)
    assert not (tmp_path / "synthetic.jsonl").exists()


def test_with_the_policy_as_explorer_its_model_and_seed_are_in_the_fingerprint(settings_for) -> None:
    """`llm: policy` explores with the starting policy: another model (or precision, or seed) explores otherwise."""
    def policy(**changes) -> dict:
        settings = settings_for()
        resolved = {"llm": "policy", "model": {"path": "tiny", "tokenizer": None, "dtype": "float32",
                                                "param_dtype": "float32", "lora": None},
                    "run": {"seed": 0, "name": "run"}}
        for dotted, value in changes.items():
            block, key = dotted.split("__")
            resolved[block][key] = value
        return {**settings, "llm": pipeline.exploration_settings(SimpleNamespace(resolved=resolved))["llm"]}

    base = policy()
    for change in ({"model__path": "smollm2-135m-instruct"}, {"model__tokenizer": "other"},
                   {"model__dtype": "bfloat16"}, {"model__param_dtype": "bfloat16"}, {"run__seed": 1}):
        assert fingerprint(SEEDS, policy(**change)) != fingerprint(SEEDS, base), change
    assert policy(run__name="elsewhere") == base  # where the run writes is not what it explores
