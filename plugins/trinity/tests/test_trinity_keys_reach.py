"""Spec keys of the trinity backend that reach Trinity-RFT's config: `sync_style`, `workflow_runners`.

In the main venv, as test_trinity_mapping.py does (trinity itself is not imported): the spec of
examples/trinity_frozenlake.yaml goes through `prepare` and `trinity_overrides`, once with the
defaults and once with each key set otherwise. Checked: `backend.sync_style` becomes
`synchronizer.sync_style` and `backend.workflow_runners` becomes `explorer.runner_per_model`, each
with its value and named as the spec key it came from (what an error from trinity would cite).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from beyondagent_plugin_trinity.mapping import RunFiles, trinity_overrides

from beyondagent_core.pipeline import prepare
from beyondagent_core.plugins import PluginManager, Switches

ROOT = Path(__file__).resolve().parents[3]


def overrides_for(tmp_path: Path, **backend: Any) -> dict[str, tuple[Any, str]]:
    """trinity key -> (value, origin) for the example's spec with `backend` keys changed."""
    data = yaml.safe_load((ROOT / "examples" / "trinity_frozenlake.yaml").read_text())
    data["run"]["output_dir"] = str(tmp_path / "runs")
    data["backend"].update(backend)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    spec = prepare(path, manager=PluginManager(Switches(autoload=True))).spec
    files = RunFiles(run_dir=tmp_path / "run", spec_path=tmp_path / "run" / "trinity" / "spec.yaml",
                     train_dir=tmp_path / "train", val_dir=tmp_path / "val")
    config = spec.component("backend").config
    return {o.key: (o.value, o.origin)
            for o in trinity_overrides(spec, config, files, model_path="/models/m")}


def test_sync_style_and_workflow_runners_reach_trinitys_keys(tmp_path: Path) -> None:
    default = overrides_for(tmp_path)
    assert default["synchronizer.sync_style"] == ("fixed", "backend.sync_style")
    assert default["explorer.runner_per_model"] == (8, "backend.workflow_runners")

    changed = overrides_for(tmp_path, sync_style="dynamic_by_explorer", workflow_runners=3)
    assert changed["synchronizer.sync_style"] == ("dynamic_by_explorer", "backend.sync_style")
    assert changed["explorer.runner_per_model"] == (3, "backend.workflow_runners")
    # nothing else moved: each key changes its own trinity key only
    moved = {key for key in default if default[key][0] != changed[key][0]}
    assert moved == {"synchronizer.sync_style", "explorer.runner_per_model"}

    trainer_led = overrides_for(tmp_path, sync_style="dynamic_by_trainer")
    assert trainer_led["synchronizer.sync_style"][0] == "dynamic_by_trainer"
