"""report.html from a run directory: summary, embedded PNG curves, escaped sample episodes."""

from __future__ import annotations

import base64
import io
import math
import random
import re
from pathlib import Path

import pytest
from beyondagent_plugin_torch.metrics_log import MetricsLog

from beyondagent_core import metric_names as m
from beyondagent_plugin_report.report import moving_average, write_report
from beyondagent_core.types import Reward, Task, Trajectory, Turn

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
IMG_TAG = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def step_metrics(step: int, steps: int, rng: random.Random) -> dict[str, float]:
    """A plausible GRPO step whose reward rises from about 0.1 to about 0.8."""
    progress = 1 / (1 + math.exp(-8 * (step / steps - 0.5)))
    reward = min(1.0, max(0.0, 0.1 + 0.7 * progress + rng.gauss(0, 0.05)))
    return {
        m.TRAIN_REWARD_MEAN: reward, m.TRAIN_REWARD_STD: 0.35 - 0.15 * progress,
        m.TRAIN_SUCCESS_RATE: min(1.0, reward + rng.gauss(0, 0.03)),
        m.TRAIN_RESPONSE_LENGTH: 180 - 60 * progress + rng.gauss(0, 8), m.TRAIN_TURNS: 6 - 2.5 * progress + rng.gauss(0, 0.3),
        m.ACTOR_KL: 0.002 * step + abs(rng.gauss(0, 0.004)), m.ACTOR_ENTROPY: 1.9 - 0.6 * progress + rng.gauss(0, 0.03),
        m.ACTOR_CLIP_FRACTION: abs(rng.gauss(0.04, 0.015)), m.ACTOR_GRAD_NORM: abs(rng.gauss(0.8, 0.2)),
        m.ACTOR_PG_LOSS: rng.gauss(0, 0.02), m.ACTOR_LR: 1e-6, m.PERF_TOKENS_PER_S: 900 + rng.gauss(0, 50),
        m.PERF_STEP_TIME_S: 12 + rng.gauss(0, 1), m.EPOCH: step // 20,
    }


def episode(task_id: str, answer: str, score: float, *, error: str | None = None) -> Trajectory:
    return Trajectory(
        task=Task(task_id=task_id, env="frozenlake"),
        turns=[Turn("system", "You play FrozenLake."), Turn("user", "Reach the goal G."),
               Turn("assistant", answer, tool_calls=[{"name": "move", "arguments": {"dir": "right"}}])],
        reward=Reward(score=score, success=score >= 1.0, reason="reached G" if score >= 1.0 else "fell into a hole"),
        terminated=True, error=error,
    )


def make_run(run_dir: Path, *, steps: int = 40, val_every: int | None = 10, samples: bool = True) -> Path:
    """A synthetic run directory written through MetricsLog, as the trainer would."""
    rng = random.Random(0)
    with MetricsLog(run_dir, tensorboard=False) as log:
        for step in range(steps):
            metrics = step_metrics(step, steps, rng)
            if val_every and (step % val_every == 0 or step == steps - 1):
                metrics[m.VAL_PASS_AT_1] = min(1.0, 0.05 + 0.8 * step / steps)
                metrics[m.VAL_REWARD_MEAN] = min(1.0, 0.1 + 0.75 * step / steps)
            log.write(step, metrics)
            if samples and step % 10 == 0 or samples and step == steps - 1:
                log.write_samples(step, "train", [
                    episode(f"s{step}-a", "<script>alert('pwned')</script> right right down", 0.0),
                    episode(f"s{step}-b", "down down right", 1.0),
                    episode(f"s{step}-c", "left", 0.0, error="environment timed out after 30 s"),
                    episode(f"s{step}-d", "up", 0.0),
                ])
    return run_dir


def pngs_of(page: str) -> list[bytes]:
    return [base64.b64decode(encoded, validate=True) for encoded in IMG_TAG.findall(page)]


def assert_readable_png(data: bytes) -> None:
    from matplotlib.image import imread
    from PIL import Image

    assert data.startswith(PNG_MAGIC)
    with Image.open(io.BytesIO(data)) as image:
        image.verify()
    pixels = imread(io.BytesIO(data), format="png")
    assert pixels.ndim == 3 and pixels.shape[0] > 200 and pixels.shape[1] > 400
    assert pixels.std() > 0  # something was drawn


def test_full_report(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "frozenlake-grpo")
    path = write_report(run_dir)
    assert path == run_dir / "report.html"
    page = path.read_text(encoding="utf-8")

    images = pngs_of(page)
    assert len(images) == 4 == page.count('<img src="data:image/png;base64,')
    for data in images:
        assert_readable_png(data)
    assert "<h1>frozenlake-grpo</h1>" in page
    assert "Steps recorded" in page and "40 (step 0 → 39)" in page
    assert "Val pass@1 (best / last)" in page and "at step 39" in page
    assert "Wall time" in page and "Training step time (sum)" in page


def test_report_is_self_contained_and_escapes_episodes(tmp_path: Path) -> None:
    page = write_report(make_run(tmp_path / "run")).read_text(encoding="utf-8")
    assert "<script" not in page
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page) and "<link" not in page
    assert "environment timed out after 30 s" in page and "fell into a hole" in page


def test_samples_come_from_the_first_and_last_sampled_step(tmp_path: Path) -> None:
    page = write_report(make_run(tmp_path / "run")).read_text(encoding="utf-8")
    assert "<h3>Step 0</h3>" in page and "<h3>Step 39</h3>" in page and "<h3>Step 20</h3>" not in page
    for step in (0, 39):
        assert all(f"task: s{step}-{letter}" in page for letter in "abc")
        assert f"task: s{step}-d" not in page  # three episodes per step
    assert "task: s20-a" not in page


def test_report_without_validation(tmp_path: Path) -> None:
    page = write_report(make_run(tmp_path / "run", val_every=None), title="No eval").read_text(encoding="utf-8")
    assert "<h1>No eval</h1>" in page and "no evaluation recorded" in page
    images = pngs_of(page)
    assert len(images) == 4
    for data in images:
        assert_readable_png(data)


def test_panels_without_metrics_are_left_out(tmp_path: Path) -> None:
    with MetricsLog(tmp_path, tensorboard=False) as log:
        for step in range(5):
            log.write(step, {m.TRAIN_REWARD_MEAN: step / 5, m.ACTOR_KL: float("nan")})
    page = write_report(tmp_path).read_text(encoding="utf-8")
    (image,) = pngs_of(page)
    assert_readable_png(image)
    assert "<figcaption>Reward</figcaption>" in page and "Policy update" not in page


@pytest.mark.parametrize("contents", [None, "", '{"step": 0, "time": 1700000000.0, "train/rew'])
def test_report_without_steps(tmp_path: Path, contents: str | None) -> None:
    if contents is not None:
        (tmp_path / "metrics.jsonl").write_text(contents, encoding="utf-8")
    page = write_report(tmp_path).read_text(encoding="utf-8")
    assert "No steps were recorded" in page
    assert "<img" not in page


def test_report_for_a_run_dir_that_does_not_exist_yet(tmp_path: Path) -> None:
    path = write_report(tmp_path / "missing")
    assert "No steps were recorded" in path.read_text(encoding="utf-8")


def test_a_resumed_run_keeps_the_last_value_of_each_step(tmp_path: Path) -> None:
    with MetricsLog(tmp_path, tensorboard=False) as log:
        for step, reward in [(0, 0.1), (1, 0.2), (2, 0.9), (2, 0.3), (3, 0.4)]:
            log.write(step, {m.TRAIN_REWARD_MEAN: reward})
    page = write_report(tmp_path).read_text(encoding="utf-8")
    assert "4 (step 0 → 3)" in page and "0.100 → 0.400" in page


def test_moving_average() -> None:
    assert moving_average([1.0, 3.0, 5.0, 7.0, 9.0], 3) == [2.0, 3.0, 5.0, 7.0, 8.0]
    assert moving_average([2.0], 5) == [2.0]
    assert moving_average([], 5) == []


def test_a_run_with_experience_gets_its_guided_panel(tmp_path: Path) -> None:
    with MetricsLog(tmp_path, tensorboard=False) as log:
        for step in range(1, 6):
            log.write(step, {m.TRAIN_REWARD_MEAN: step / 5, m.TRAIN_SUCCESS_RATE_GUIDED: step / 6,
                             m.TRAIN_SUCCESS_RATE_UNGUIDED: step / 8})
    page = write_report(tmp_path).read_text(encoding="utf-8")
    assert "<figcaption>Experience-guided rollouts</figcaption>" in page and len(pngs_of(page)) == 2
