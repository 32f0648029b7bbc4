"""`beyondagent view` on a real run: the quickstart spec, one training step of the tiny model, every
episode kept (`logging.episodes=all`). The token records the trainer writes, the server's pages over
them, and a real browser (Debian's chromium driven by Playwright) on the episode page.

Set BEYONDAGENT_UPDATE_SCREENSHOTS=1 to write docs/img/view-*.png (docs/inspect.md shows them).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from beyondagent_plugin_view.app import create_app, open_runs
from beyondagent_plugin_view.command import ServerThread

from beyondagent_core.episode_records import EPISODES_FILE, expand_mask, expand_runs

ROOT = Path(__file__).resolve().parents[3]
GROUP_SIZE = 8  # examples/quickstart.yaml
CHROMIUM = os.environ.get("BEYONDAGENT_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("beyondagent_plugin_torch", reason="the quickstart trains with beyondagent-plugin-torch")
    pytest.importorskip("beyondagent_plugin_gym", reason="the quickstart's env is in beyondagent-plugin-gym")
    out = tmp_path_factory.mktemp("runs")
    proc = subprocess.run(
        [sys.executable, "-m", "beyondagent_core.cli", "run", "examples/quickstart.yaml", f"run.output_dir={out}",
         "backend.total_steps=1", "backend.eval_every=0", "backend.save_every=0", "backend.report=false",
         "logging.episodes=all"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out / "quickstart"


@pytest.fixture(scope="module")
def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / EPISODES_FILE).read_text().splitlines()]


@pytest.fixture(scope="module")
def server(run_dir: Path):
    with ServerThread(create_app(open_runs([run_dir]))) as url:
        yield url


def test_the_trainer_writes_every_episode_with_its_tokens(records: list[dict]) -> None:
    splits = [(r["step"], r["split"]) for r in records]
    assert splits.count((0, "val")) == 16 and splits.count((1, "train")) == 32 and splits.count((1, "val")) == 16
    for record in records:
        block = record["tokens"]
        mask = expand_mask(block["mask"])
        assert len(mask) == len(block["ids"]) and set(map(str, block["ids"])) == set(block["vocab"])
        trained = sum(mask)
        assert trained > 0 and len(block["logprobs"]) == trained
        assert all(lp is not None and lp <= 0 for lp in block["logprobs"])
        # Each model turn is one run of trained tokens (the template's end-of-turn is not trained).
        model_turns = sum(1 for turn in record["turns"] if turn["role"] == "assistant")
        assert sum(1 for run in block["mask"][1::2] if run) == model_turns == len(block["turn_spans"])
        for start, end in block["turn_spans"]:
            assert all(mask[start:end])
        assert "".join(block["vocab"][str(i)] for i in block["ids"][:3]).startswith("<|im_start|>")
        if record["split"] == "val":
            assert block["advantages"] is None
        else:
            advantages = expand_runs(block["advantages"])
            assert len(advantages) == len(mask)


def test_the_advantages_are_the_estimators_group_normalised_ones(records: list[dict]) -> None:
    train = [r for r in records if r["split"] == "train"]
    by_group: dict[int, list[float]] = {}
    for record in train:
        advantages = expand_runs(record["tokens"]["advantages"])
        trained = [a for a, bit in zip(advantages, expand_mask(record["tokens"]["mask"]), strict=True) if bit]
        assert len(set(trained)) == 1  # GRPO: one advantage per episode
        by_group.setdefault(record["group"], []).append(trained[0])
        if len({r["score"] for r in train if r["group"] == record["group"]}) == 1:
            assert trained[0] == 0
    assert sorted(by_group) == [0, 1, 2, 3] and all(len(values) == GROUP_SIZE for values in by_group.values())
    for values in by_group.values():
        assert abs(statistics.fmean(values)) < 1e-3


def test_bytes_per_episode_stay_compact(run_dir: Path, records: list[dict]) -> None:
    per_episode = (run_dir / EPISODES_FILE).stat().st_size / len(records)
    tokens = statistics.fmean(sum(r["tokens"]["mask"]) for r in records)
    assert per_episode < 20 * tokens  # about 14 bytes a token here, the turns' text included


def test_the_viewer_lists_filters_and_groups_the_runs_episodes(server: str, records: list[dict]) -> None:
    with httpx.Client(base_url=server, timeout=30) as client:
        assert client.get("/r/0/api/episodes").json()["total"] == len(records)
        train = client.get("/r/0/api/episodes", params={"split": "train", "per_page": 100}).json()
        assert train["total"] == 32
        group = client.get("/r/0/api/group", params={"step": 1, "split": "train", "group": "2"}).json()
        assert len(group["episodes"]) == GROUP_SIZE
        first = train["episodes"][0]
        episode = client.get(f"/r/0/api/episodes/{first['id']}").json()
        assert sum(t["mask"] for t in episode["tokens"]) == first["trained"]
        assert client.get("/r/0/api/curves").json()["train/reward_mean"][0][0] == 1
        assert "frozenlake" in client.get("/r/0/api/spec").json()["spec"]
        compared = client.get("/api/compare").json()  # the evaluations before and after the step
        assert (compared["a"], compared["b"], compared["common"]) == ("0:0", "0:1", 16)


@pytest.fixture(scope="module")
def chromium() -> str:
    """Debian's chromium for Playwright (skipped, with what to install, when either is missing)."""
    pytest.importorskip("playwright.sync_api", reason="pip install playwright (the test extra has it)")
    found = CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")
    if not found:
        pytest.skip(f"no chromium at {CHROMIUM} or on PATH: apt-get install -y chromium (or set BEYONDAGENT_CHROMIUM)")
    return found


def _screenshot(page, name: str, tmp_path: Path) -> Path:
    target = (ROOT / "docs" / "img" if os.environ.get("BEYONDAGENT_UPDATE_SCREENSHOTS") else tmp_path) / name
    page.screenshot(path=str(target), full_page=False)
    assert target.stat().st_size > 10_000
    return target


def test_a_browser_shows_the_trained_tokens(chromium: str, server: str, records: list[dict], tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.goto(f"{server}/r/0/")
            rows = page.locator("#episodes tbody tr")
            assert rows.count() == 50  # the first page of 64 episodes
            page.select_option("select[name=split]", "train")
            page.select_option("select[name=success]", "0")
            page.click("form.filters button")
            page.wait_for_url(re.compile(r"split=train"))
            failed_train = sum(1 for r in records if r["split"] == "train" and not r["success"])
            assert rows.count() == min(50, failed_train)
            assert f"{failed_train} episodes match" in page.locator("#count").inner_text()
            _screenshot(page, "view-list.png", tmp_path)

            page.locator("#episodes tbody tr").first.locator("td a").first.click()
            box = page.locator(".tokens")
            box.wait_for()
            tokens, trained = int(box.get_attribute("data-tokens")), int(box.get_attribute("data-trained"))
            assert page.locator(".tokens .tok.m1").count() == trained > 0
            assert page.locator(".tokens .tok.m0").count() == tokens - trained
            first_trained = page.locator(".tokens .tok.m1").first
            assert re.search(r"log-prob -?\d+\.\d{3}", first_trained.get_attribute("title"))
            background = first_trained.evaluate("e => getComputedStyle(e).backgroundColor")
            assert background == "rgb(200, 240, 208)"  # the loss-mask colour
            page.check("input[value=logprob]")
            assert "by-logprob" in box.get_attribute("class")
            probability = math.exp(float(re.search(r"log-prob (-?\d+\.\d+)", first_trained.get_attribute("title"))[1]))
            assert first_trained.evaluate("e => getComputedStyle(e).backgroundColor") != background or probability > 0.9
            page.check("input[value=mask]")
            page.locator("h3", has_text="Tokens").scroll_into_view_if_needed()
            _screenshot(page, "view-episode.png", tmp_path)

            page.click("text=(side by side)")
            page.locator(".group .card").first.wait_for()
            assert page.locator(".group .card").count() == GROUP_SIZE
            _screenshot(page, "view-group.png", tmp_path)
        finally:
            browser.close()
