"""No planted secret reaches a file a verl dry run writes (issue 36, item 3).

verl's rollout workers rebuild the run from `runs/<name>/verl/spec.yaml`: a secret inside a value
(a URL's userinfo, query value, path token or fragment) used to be written there in clear, where
whole-value secrets already went to the workers' environment. Every file under the output
directory and what the command printed are searched (`beyondagent_core.testing.planted_secrets`);
the moved value reaches the worker through the environment `_launch` passes it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from beyondagent_plugin_verl.backend import SECRET_VAR

from beyondagent_core.testing.planted_secrets import PLANTED_ENV, PLANTED_OVERRIDES, files_under, leaks

ROOT = Path(__file__).resolve().parents[3]


def test_a_verl_dry_run_writes_no_planted_secret(verl_venv: Any, tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "examples" / "verl_frozenlake.yaml").read_text())
    data["run"]["output_dir"] = str(tmp_path / "runs")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(data))
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", str(spec), *PLANTED_OVERRIDES,
                             "--dry-run"], cwd=ROOT, env={**os.environ, **PLANTED_ENV}, capture_output=True,
                            text=True, timeout=600, check=False)
    print(f"verl dry run: {time.monotonic() - started:.1f} s")
    assert result.returncode == 0, result.stderr[-3000:]
    written = files_under(tmp_path / "runs")
    assert any(path.name == "spec.yaml" for path in written), written
    assert leaks(tmp_path / "runs", result.stdout + result.stderr) == []
    worker = yaml.safe_load((tmp_path / "runs" / "verl_frozenlake" / "verl" / "spec.yaml").read_text())
    assert worker["llm"]["base_url"].startswith("${oc.env:" + SECRET_VAR.format(""))  # the value is in the env
