"""Spec files the core's CLI tests share (a plain module: `conftest` names clash across suites)."""

from __future__ import annotations

from pathlib import Path


def write_basic_spec(tmp_path: Path, *, mixer: str, tasks: int, run_name: str) -> Path:
    """A spec over `tasks` JSONL seed tasks, the given mixer and the `export` backend."""
    import json

    import yaml

    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"task_id": f"t{i}", "query": f"q{i}"}) + "\n" for i in range(tasks)))
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({
        "run": {"name": run_name, "output_dir": str(tmp_path / "runs")},
        "tasks": {"train": {"name": "jsonl", "path": str(train)}},
        "mixture": {"name": mixer},
        "backend": {"name": "export"},
    }))
    return path
