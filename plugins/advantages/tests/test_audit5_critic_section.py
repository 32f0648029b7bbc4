"""The spec's `critic:` section under the `gae` estimator (issue 37's fifth mutation audit): its
defaults (lr 1e-5, no warm-up, value clip 0.5, the policy's weights), and the section kept in the
resolved spec, so the saved `spec.resolved.yaml` (and the spec a backend hands its workers) runs
with the same critic when it is prepared again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from beyondagent_core.pipeline import prepare
from beyondagent_core.plugins import PluginManager, Switches
from beyondagent_core.spec import CriticSection

ROOT = Path(__file__).resolve().parents[3]


def ppo(tmp_path: Path, critic: dict[str, Any]) -> Any:
    data = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    data["run"]["output_dir"] = str(tmp_path / "runs")
    data["algorithm"]["group_size"] = 1
    data["backend"]["advantage"] = {"name": "gae"}
    data["critic"] = critic
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(data))
    return prepare(tmp_path / "spec.yaml", manager=PluginManager(Switches(autoload=True))).spec


def test_an_empty_critic_section_has_verls_defaults(tmp_path: Path) -> None:
    assert ppo(tmp_path, {}).critic == CriticSection(path=None, lr=1e-5, warmup_steps=0, cliprange_value=0.5)


def test_the_saved_spec_prepares_to_the_same_critic(tmp_path: Path) -> None:
    spec = ppo(tmp_path, {"lr": 3e-5, "warmup_steps": 2, "cliprange_value": 0.2})
    assert spec.resolved["critic"] == {"path": None, "lr": 3e-5, "warmup_steps": 2, "cliprange_value": 0.2}
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "spec.yaml").write_text(spec.redacted_yaml())
    again = prepare(saved / "spec.yaml", manager=PluginManager(Switches(autoload=True))).spec
    assert again.critic == spec.critic
