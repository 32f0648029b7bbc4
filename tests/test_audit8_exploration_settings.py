"""What makes an exploration cache stale (`pipeline.exploration_settings`), from the eighth audit.

The cache's fingerprint is made from the seeds and the settings that decide which tasks an
exploration makes: the explore block (but where and how fast it runs), the env (but where it is
served) and the sampling of the exploring LLM (model, endpoint, temperature, top_p, top_k,
max_tokens; not its timeout or retries). A cache explored at another LLM temperature is refused
with the change named. Specs are read with `pipeline.prepare` and the real gym, random explorer,
synthesis and mixers plugins; nothing is explored and no LLM is called.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from beyondagent_core import pipeline
from beyondagent_core.errors import RunError
from beyondagent_core.exploration.checkpoint import Checkpoint, check_fingerprint, fingerprint
from beyondagent_core.types import Task

pytest.importorskip("beyondagent_plugin_gym")
pytest.importorskip("beyondagent_plugin_random_explorer")
pytest.importorskip("beyondagent_plugin_synthesis")
pytestmark = pytest.mark.beyondagent_plugins("gym", "random_explorer", "synthesis", "mixers")

SPEC = """
tasks:
  train: {name: gym_tasks, env: frozenlake, count: 2, size: 2}
env: {name: frozenlake, max_steps: 6}
explore:
  name: random
  mode: llm
  max_explore_step: 4
  n: 2
  workers: 2
  summarizer: {name: hindsight, max_tasks: 2}
llm: {model: explorer-model, base_url: "http://127.0.0.1:9/v1", temperature: 0.7, top_p: 0.9, timeout: 30}
mixture: {name: original}
backend: {name: export}
"""

SEEDS = [Task(task_id=f"frozenlake-train-{i}", env="frozenlake", metadata={"map": ["SF", "FG"], "seed": i})
         for i in range(2)]


def settings_of(plugin_manager, tmp_path: Path, *overrides: str) -> dict:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return pipeline.exploration_settings(pipeline.prepare(path, list(overrides), manager=plugin_manager).spec)


def test_the_llm_sampling_is_part_of_the_settings(plugin_manager, tmp_path: Path) -> None:
    settings = settings_of(plugin_manager, tmp_path)
    assert settings["llm"] == {"model": "explorer-model", "base_url": "http://127.0.0.1:9/v1", "temperature": 0.7,
                               "top_p": 0.9, "top_k": None, "max_tokens": None}
    for override in ("llm.temperature=1.2", "llm.top_p=0.5", "llm.top_k=20", "llm.max_tokens=64",
                     "llm.model=another-model"):
        assert settings_of(plugin_manager, tmp_path, override) != settings, override


def test_how_fast_and_where_it_runs_is_not(plugin_manager, tmp_path: Path) -> None:
    settings = settings_of(plugin_manager, tmp_path)
    for override in ("llm.timeout=90", "explore.workers=4", "explore.max_failed_fraction=0.5"):
        assert settings_of(plugin_manager, tmp_path, override) == settings, override
    assert "workers" not in settings["explore"] and settings["explore"]["max_explore_step"] == 4


def test_a_cache_explored_at_another_temperature_is_refused_naming_it(plugin_manager, tmp_path: Path) -> None:
    cache = tmp_path / "synthetic.jsonl"
    then = {"n": 2, **settings_of(plugin_manager, tmp_path)}
    checkpoint = Checkpoint.open(cache, fingerprint(SEEDS, then), seeds=SEEDS, settings=then)
    checkpoint.finish()
    check_fingerprint(cache, fingerprint(SEEDS, then), seeds=SEEDS, settings=then)  # the same settings: used
    now = {"n": 2, **settings_of(plugin_manager, tmp_path, "llm.temperature=1.2")}
    with pytest.raises(RunError, match="other exploration settings") as caught:
        check_fingerprint(cache, fingerprint(SEEDS, now), seeds=SEEDS, settings=now)
    assert "llm.temperature was 0.7, is 1.2 now" in caught.value.message
