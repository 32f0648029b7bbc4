"""`beyondagent eval`'s options reach the eval (ninth audit, class-wide: the eighth audit's survivor
here was `--temperature`, tested only at its default; this covers the others its dry run shows).

- `--split train` evaluates `tasks.train` (5 tasks here), the default `tasks.val` (3); `--limit N`
  keeps the first N of them; `--k` is the samples per task;
- `--seed` changes the eval's directory (an eval with another seed never resumes this one), and
  `--concurrency` does not (it changes no number); `--out` is where it writes;
- `--base-url` that is not http(s) and `--opponent-base-url` without `--opponent-model` are errors
  naming the option.

The CLI's `main` in-process on a dry run (no model is asked anything), over JSONL tasks; only the
report and mixers plugins' entry points are offered, so each call loads two plugins, not all.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from beyondagent_core import cli, plugins


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    points = [point for point in plugins._entry_points() if point.name in ("report", "mixers")]
    assert len(points) == 2
    monkeypatch.setattr(plugins, "_entry_points", lambda: points)
    monkeypatch.delenv("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("BEYONDAGENT_PLUGINS", raising=False)
    for split, count in (("train", 5), ("val", 3)):
        (tmp_path / f"{split}.jsonl").write_text(
            "".join(json.dumps({"task_id": f"{split}{i}", "query": f"q{i}"}) + "\n" for i in range(count)))
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({
        "run": {"name": "evaluated", "output_dir": str(tmp_path / "runs")},
        "tasks": {split: {"name": "jsonl", "path": str(tmp_path / f"{split}.jsonl")} for split in ("train", "val")},
        "mixture": {"name": "original"}, "backend": {"name": "export"}}))
    return path


def dry_run(spec: Path, capsys, *extra: str) -> tuple[int, str, int, str]:
    """(tasks evaluated, the split, k, the eval directory)."""
    code = cli.main(["eval", str(spec), "--model", "policy", "--base-url", "http://127.0.0.1:9/v1", *extra,
                     "--dry-run"])
    out, err = capsys.readouterr()
    assert code == 0, err
    found = re.search(r"on (\d+) tasks of tasks\.(\w+) x k=(\d+) \(temperature [0-9.]+\); 0 episodes already "
                      r"done in (\S+)", out)
    assert found, out
    return int(found.group(1)), found.group(2), int(found.group(3)), found.group(4)


def test_split_limit_k_seed_concurrency_and_out_reach_the_eval(spec: Path, capsys, tmp_path: Path) -> None:
    default = dry_run(spec, capsys)
    assert default[:3] == (3, "val", 8)
    assert dry_run(spec, capsys, "--split", "train", "--limit", "4", "--k", "2")[:3] == (4, "train", 2)
    assert dry_run(spec, capsys, "--seed", "5")[3] != default[3]
    assert dry_run(spec, capsys, "--concurrency", "3")[3] == default[3]
    assert dry_run(spec, capsys, "--out", str(tmp_path / "here"))[3] == str(tmp_path / "here")


@pytest.mark.parametrize(("extra", "message"), [
    (["--base-url", "127.0.0.1:8000/v1"], "--base-url must be an http(s):// URL, got '127.0.0.1:8000/v1'"),
    (["--base-url", "http://127.0.0.1:9/v1", "--opponent-base-url", "http://127.0.0.1:8001/v1"],
     "--opponent-base-url needs --opponent-model"),
])
def test_a_url_option_of_the_wrong_form_is_an_error_naming_it(spec: Path, capsys, extra: list[str],
                                                               message: str) -> None:
    assert cli.main(["eval", str(spec), "--model", "policy", *extra, "--dry-run"]) == 2
    assert message in capsys.readouterr().err
