"""`beyondagent run --dry-run` refuses what `validate` refuses (issue 36, item 6): every component is built,
so an `agent` workflow whose entrypoint file or function is missing fails the dry run with the same
error, instead of a plan that the run then fails on."""

from __future__ import annotations

import pytest

pytest.importorskip("beyondagent_plugin_gym")

SPEC = """
tasks:
  train: {{name: gym_tasks, env: frozenlake, count: 2, size: 2}}
env: {{name: frozenlake, max_steps: 6}}
workflow: {{name: agent, entrypoint: "{entrypoint}"}}
mixture: {{name: original}}
backend: {{name: export}}
"""
PLUGINS = {"BEYONDAGENT_PLUGINS": "gym,mixers,gateway"}


@pytest.mark.parametrize(("entrypoint", "error"), [
    ("agents/missing.py:run", "workflow.entrypoint: cannot import 'agents/missing.py' (FileNotFoundError"),
    ("agents/lake.py:play", "workflow.entrypoint: module 'agents/lake.py' has no 'play'"),
])
def test_a_missing_agent_entrypoint_fails_the_dry_run_as_it_fails_validate(cli, tmp_path, entrypoint: str,
                                                                           error: str) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "lake.py").write_text("def run(task, llm_base_url, env, api_key):\n    return 1.0\n")
    (tmp_path / "spec.yaml").write_text(SPEC.format(entrypoint=entrypoint))
    for command in (("validate", "spec.yaml"), ("run", "spec.yaml", "--dry-run")):
        result = cli(*command, env=PLUGINS)
        assert result.code == 2, (command, result.text)
        assert error in result.err and "where: workflow (workflow 'agent'" in result.err, result.err
        assert "Traceback" not in result.err
    (tmp_path / "spec.yaml").write_text(SPEC.format(entrypoint="agents/lake.py:run"))
    ok = cli("run", "spec.yaml", "--dry-run", env=PLUGINS)
    assert ok.code == 0 and "dry run: nothing was explored or trained" in ok.out, ok.text
