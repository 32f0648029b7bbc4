"""docs/writing-an-environment.md works as written: the guess plugin built from the page's own code.

Its files come from the page's code blocks (`tests/docs_kit.py`), it is installed with real pip,
the real CLI lists its three components, its own tests (the core's env, task source and judge
contract suites and its test) pass, a task file with a bad line fails with that line (and is
skipped with `--on-bad-record skip`), and the page's spec trains the tiny model on the game.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import docs_kit
import pytest

DOC = docs_kit.ROOT / "docs" / "writing-an-environment.md"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    package, site = tmp_path_factory.mktemp("guess"), tmp_path_factory.mktemp("site")
    docs_kit.install(DOC, package, site)
    return package, site


def test_the_page_has_every_file() -> None:
    assert set(docs_kit.walkthrough_files(DOC)) == {
        "pyproject.toml", "spec.yaml", "beyondagent_plugin_guess/__init__.py", "beyondagent_plugin_guess/game.py",
        "beyondagent_plugin_guess/duel.py", "tests/conftest.py", "tests/test_guess.py"}


def test_the_plugin_is_listed_and_its_tests_pass(installed: tuple[Path, Path]) -> None:
    package, site = installed
    listing = json.loads(docs_kit.run(["-m", "beyondagent_core.cli", "plugins", "--json"], site, package).stdout)
    plugin = next(p for p in listing if p["name"] == "guess")
    assert plugin["status"] == "ok"
    assert plugin["provides"] == {"env": ["guess_number", "guess_duel"], "task_source": ["guess_tasks"],
                                  "reward": ["guess_judge"]}
    result = docs_kit.run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], site, package)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"\b\d+ passed\b", result.stdout) and "failed" not in result.stdout


def test_a_bad_line_in_the_task_file_is_named(installed: tuple[Path, Path]) -> None:
    package, site = installed
    (package / "secrets.txt").write_text("2\nseven\n3\n")
    args = ["-m", "beyondagent_core.cli", "run", "spec.yaml", "tasks.train.path=secrets.txt", "--dry-run"]
    failed = docs_kit.run(args, site, package)
    assert failed.returncode == 2 and "secrets.txt:2" in failed.stderr and "not a number" in failed.stderr
    skipped = docs_kit.run([*args, "--on-bad-record", "skip"], site, package)
    assert skipped.returncode == 0, skipped.stderr


def test_the_pages_spec_trains_the_tiny_model(installed: tuple[Path, Path]) -> None:
    pytest.importorskip("beyondagent_plugin_torch")
    package, site = installed
    result = docs_kit.run(["-m", "beyondagent_core.cli", "run", "spec.yaml"], site, package, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    rows = [json.loads(line) for line in (package / "runs" / "guess" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows if "train/reward_mean" in row] == [1, 2]
    samples = [json.loads(line) for line in (package / "runs" / "guess" / "samples.jsonl").read_text().splitlines()]
    reasons = {s["trajectory"]["reward"]["reason"] for s in samples if s["trajectory"]["reward"]}
    assert reasons and all(r == "the secret was never named" or r.startswith("named on guess") for r in reasons)


def test_the_pages_two_seat_game_trains_both_seats(installed: tuple[Path, Path]) -> None:
    pytest.importorskip("beyondagent_plugin_torch")
    package, site = installed
    command = next(line for line in docs_kit.ROOT.joinpath(DOC).read_text().splitlines()
                   if line.startswith("beyondagent run spec.yaml env.name=guess_duel"))
    args = command.split()[2:] + ["backend.total_steps=1", "logging.episodes=all"]
    result = docs_kit.run(["-m", "beyondagent_core.cli", "run", *args], site, package, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    records = [json.loads(line) for line in (package / "runs" / "duel" / "episodes.jsonl").read_text().splitlines()]
    train = [r for r in records if r["split"] == "train"]
    assert train and [r["seat"] for r in train] == [0, 1] * (len(train) // 2)
    for first, second in zip(train[::2], train[1::2]):  # one game: its seats' rewards add up to 1
        assert (first["seat"], second["seat"]) == (0, 1) and first["score"] + second["score"] == 1.0
