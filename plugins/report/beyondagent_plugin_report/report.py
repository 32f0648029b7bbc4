"""A training run's report: one self-contained `report.html` from `metrics.jsonl` and `samples.jsonl`.

The page has the run's summary (steps, reward first → last, best and last validation scores,
time), its curves as PNGs embedded in base64 (reward, success, episode length, the policy
update's health) and a few sample episodes from the first and the last step that kept some.
It loads nothing from outside the file. Panels whose metrics were never written are left out;
a run without metrics still gets a page that says so. matplotlib is imported only here, and
only its object API is used (no pyplot), so drawing a report leaves global state alone.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from beyondagent_core import metric_names as m
from beyondagent_core.run_records import finite_scalar, read_metrics, read_samples

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

REPORT_FILE = "report.html"
MOVING_AVERAGE_AFTER = 20  # more points than this: draw a moving average over the raw line
SAMPLE_STEPS_EPISODES = 3  # episodes shown for each sampled step
MAX_TURN_CHARS = 4000  # a turn's content is cut after this many characters

Record = dict[str, Any]


@attrs.frozen
class Series:
    """One metric's finite values against the step they were recorded at."""

    steps: list[int]
    values: list[float]

    def __bool__(self) -> bool:
        return bool(self.steps)


@attrs.frozen
class Panel:
    title: str
    png_base64: str


def write_report(run_dir: Path, *, title: str | None = None, stopped: str | None = None) -> Path:
    """Write `<run_dir>/report.html` from the run's metrics and samples; return its path.

    `stopped`: how a run that did not finish ended ("stopped at step 20 of 80 (SIGTERM)"), said at
    the top of the page and in its summary."""
    run_dir = Path(run_dir)
    records = merge_by_step(read_metrics(run_dir))
    samples = pick_samples(read_samples(run_dir))
    name = title or run_dir.resolve().name
    page = render_page(name, run_dir, records, samples, stopped=stopped)
    path = run_dir / REPORT_FILE
    _write_text_atomic(path, page)
    return path


# -- data ---------------------------------------------------------------------------------------

def merge_by_step(records: Sequence[Record]) -> list[Record]:
    """One record per step, in step order; a later line for the same step (a resumed run, or
    evaluation written separately) overrides the earlier one key by key."""
    merged: dict[int, Record] = {}
    for record in records:
        merged.setdefault(record[m.STEP], {}).update(record)
    return [merged[step] for step in sorted(merged)]


def series(records: Sequence[Record], key: str) -> Series:
    steps: list[int] = []
    values: list[float] = []
    for record in records:
        value = finite_scalar(record.get(key))
        if value is not None:
            steps.append(record[m.STEP])
            values.append(value)
    return Series(steps, values)


def moving_average(values: Sequence[float], window: int) -> list[float]:
    """Centred mean over `window` points (`window` odd; fewer points near either end), so the
    smoothed line does not lag behind the raw one."""
    half = window // 2
    prefix = [0.0]
    for value in values:
        prefix.append(prefix[-1] + value)
    averaged = []
    for index in range(len(values)):
        start, stop = max(0, index - half), min(len(values), index + half + 1)
        averaged.append((prefix[stop] - prefix[start]) / (stop - start))
    return averaged


def moving_average_window(count: int) -> int:
    """An odd window of about a tenth of the points, between 5 and 51."""
    return min(51, max(5, count // 10)) | 1


def pick_samples(samples: Sequence[Record]) -> list[tuple[int, list[Record]]]:
    """The first and the last step that kept samples, with up to SAMPLE_STEPS_EPISODES each."""
    by_step: dict[int, list[Record]] = {}
    for sample in samples:
        by_step.setdefault(sample[m.STEP], []).append(sample)
    if not by_step:
        return []
    chosen = sorted({min(by_step), max(by_step)})
    return [(step, by_step[step][:SAMPLE_STEPS_EPISODES]) for step in chosen]


# -- summary ------------------------------------------------------------------------------------

def summary_rows(records: Sequence[Record]) -> list[tuple[str, str]]:
    steps = [record[m.STEP] for record in records]
    rows = [("Steps recorded", f"{len(steps)} (step {steps[0]} → {steps[-1]})")]
    for label, key in (("Train reward mean (first → last)", m.TRAIN_REWARD_MEAN),
                       ("Train success rate (first → last)", m.TRAIN_SUCCESS_RATE)):
        found = series(records, key)
        if found:
            rows.append((label, f"{_number(found.values[0])} → {_number(found.values[-1])}"))
    for label, key in (("Val pass@1 (best / last)", m.VAL_PASS_AT_1),
                       ("Val reward mean (best / last)", m.VAL_REWARD_MEAN)):
        rows.append((label, _best_and_last(series(records, key))))
    times = series(records, m.TIME)
    if times:
        rows.append(("Wall time (first → last record)", _duration(times.values[-1] - times.values[0])))
    step_times = series(records, m.PERF_STEP_TIME_S)
    if step_times:
        rows.append(("Training step time (sum)", _duration(sum(step_times.values))))
    throughput = series(records, m.PERF_TOKENS_PER_S)
    if throughput:
        rows.append(("Throughput (mean)", f"{_number(sum(throughput.values) / len(throughput.values))} tokens/s"))
    return rows


def _best_and_last(found: Series) -> str:
    if not found:
        return "— (no evaluation recorded)"
    best = max(range(len(found.values)), key=lambda index: found.values[index])
    return (f"{_number(found.values[best])} at step {found.steps[best]} / "
            f"{_number(found.values[-1])} at step {found.steps[-1]}")


def _number(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if value != 0 and abs(value) < 0.01:
        return f"{value:.2e}"
    return f"{value:.3f}"


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


# -- figures ------------------------------------------------------------------------------------

def draw_panels(records: Sequence[Record]) -> list[Panel]:
    """Every panel whose metrics the run wrote, as base64 PNGs."""
    drawers: list[tuple[str, Callable[[Sequence[Record]], Figure | None]]] = [
        ("Reward", _reward_figure),
        ("Success", _success_figure),
        ("Episode length", _length_figure),
        ("Policy update", _update_figure),
        ("Experience-guided rollouts", _guided_figure),
        ("Opponent pool", _pool_figure),
    ]
    panels = []
    for title, draw in drawers:
        figure = draw(records)
        if figure is not None:
            panels.append(Panel(title, _png_base64(figure)))
    return panels


def _new_figure(panels: int, *, height: float = 3.6) -> tuple[Figure, list[Axes]]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    columns = 2 if panels == 4 else panels
    rows = 2 if panels == 4 else 1
    width = 9.0 if panels == 1 else 10.0
    figure = Figure(figsize=(width, height * rows), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, columns, squeeze=False).ravel().tolist()
    return figure, axes


def _png_base64(figure: Figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _plot_curve(axes: Axes, found: Series, label: str, color: str, *, std: Series | None = None) -> None:
    """A metric's line; with many steps, a faint raw line under a bold moving average.

    An empty `label` names the lines only "per step" / "moving avg" (for a titled small multiple).
    """
    many = len(found.steps) > MOVING_AVERAGE_AFTER
    if std:
        _plot_band(axes, found, std, color)
    if many:
        window = moving_average_window(len(found.values))
        prefix = f"{label}, " if label else ""
        axes.plot(found.steps, found.values, color=color, alpha=0.35, linewidth=1, label=f"{prefix}per step")
        axes.plot(found.steps, moving_average(found.values, window), color=color, linewidth=2.2,
                  label=f"{prefix}moving avg over {window} steps")
    else:
        axes.plot(found.steps, found.values, color=color, linewidth=1.8, marker="o", markersize=3,
                  label=label or "per step")


def _plot_band(axes: Axes, mean: Series, std: Series, color: str) -> None:
    spread = dict(zip(std.steps, std.values, strict=True))
    points = [(step, value, spread[step]) for step, value in zip(mean.steps, mean.values, strict=True)
              if step in spread]
    if points:
        steps, values, spreads = zip(*points, strict=True)
        axes.fill_between(steps, [v - s for v, s in zip(values, spreads, strict=True)],
                          [v + s for v, s in zip(values, spreads, strict=True)],
                          color=color, alpha=0.15, linewidth=0, label="train ± 1 std")


def _plot_points(axes: Axes, found: Series, label: str, color: str, marker: str) -> None:
    axes.plot(found.steps, found.values, linestyle="--", linewidth=1, color=color, marker=marker,
              markersize=7, markeredgecolor="white", label=label)


def _finish(axes: Axes, title: str, ylabel: str, *, fraction: bool = False, legend: bool = True) -> None:
    from matplotlib.ticker import MaxNLocator, PercentFormatter

    axes.set_title(title, fontsize=11)
    axes.set_xlabel("training step")
    axes.set_ylabel(ylabel)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.grid(True, alpha=0.3)
    if fraction:
        axes.set_ylim(-0.03, 1.03)
        axes.yaxis.set_major_formatter(PercentFormatter(1.0))
    if legend and axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=8, loc="best", framealpha=0.85)


def _reward_figure(records: Sequence[Record]) -> Figure | None:
    train = series(records, m.TRAIN_REWARD_MEAN)
    val_reward = series(records, m.VAL_REWARD_MEAN)
    val_pass = series(records, m.VAL_PASS_AT_1)
    if not (train or val_reward or val_pass):
        return None
    figure, (axes,) = _new_figure(1)
    if train:
        _plot_curve(axes, train, "train reward mean", "tab:blue", std=series(records, m.TRAIN_REWARD_STD))
    if val_reward:
        _plot_points(axes, val_reward, "val reward mean", "tab:orange", "o")
    if val_pass:
        _plot_points(axes, val_pass, "val pass@1", "tab:green", "s")
    _finish(axes, "Reward per step (train mean ± std, validation points)", "reward")
    return figure


def _success_figure(records: Sequence[Record]) -> Figure | None:
    train = series(records, m.TRAIN_SUCCESS_RATE)
    val_pass = series(records, m.VAL_PASS_AT_1)
    if not (train or val_pass):
        return None
    figure, (axes,) = _new_figure(1)
    if train:
        _plot_curve(axes, train, "train success rate", "tab:blue")
    # With synthetic tasks in the mix: success on each kind of task.
    for key, label, color in ((m.TRAIN_SUCCESS_RATE_ORIGINAL, "train, original tasks", "tab:cyan"),
                              (m.TRAIN_SUCCESS_RATE_SYNTHETIC, "train, synthetic tasks", "tab:orange")):
        found = series(records, key)
        if found:
            _plot_curve(axes, found, label, color)
    if val_pass:
        _plot_points(axes, val_pass, "val pass@1", "tab:green", "s")
    _finish(axes, "Success rate (train) and pass@1 (validation)", "episodes solved", fraction=True)
    return figure


def _guided_figure(records: Sequence[Record]) -> Figure | None:
    """With `experience`: success of the rollouts shown lessons against those not shown any."""
    guided, unguided = series(records, m.TRAIN_SUCCESS_RATE_GUIDED), series(records, m.TRAIN_SUCCESS_RATE_UNGUIDED)
    if not (guided or unguided):
        return None
    figure, (axes,) = _new_figure(1)
    for found, label, color in ((guided, "guided (shown lessons)", "tab:red"),
                                (unguided, "unguided", "tab:blue")):
        if found:
            _plot_curve(axes, found, label, color)
    _finish(axes, "Success with and without experience", "episodes solved", fraction=True)
    return figure


def _pool_figure(records: Sequence[Record]) -> Figure | None:
    """With an opponent pool: the policy's Elo against the best snapshot's, and its results against the pool."""
    elo = series(records, m.POOL_ELO)
    if not elo:
        return None
    figure, (ratings, results) = _new_figure(2)
    _plot_curve(ratings, elo, "policy", "tab:blue")
    best = series(records, m.POOL_ELO_BEST_SNAPSHOT)
    if best:
        _plot_curve(ratings, best, "best snapshot in the pool", "tab:gray")
    _finish(ratings, "Elo rating over the opponent pool", "Elo")
    for key, label, color in ((m.POOL_WIN_RATE, "won", "tab:green"), (m.POOL_DRAW_RATE, "drawn", "tab:olive"),
                              (m.POOL_LOSS_RATE, "lost", "tab:red")):
        found = series(records, key)
        if found:
            _plot_curve(results, found, label, color)
    _finish(results, "Games against the pool", "share of the step's pool games", fraction=True)
    return figure


def _length_figure(records: Sequence[Record]) -> Figure | None:
    wanted = [(m.TRAIN_RESPONSE_LENGTH, "Response length", "generated tokens per episode", "tab:purple"),
              (m.TRAIN_TURNS, "Turns per episode", "turns", "tab:brown")]
    present = [(series(records, key), *rest) for key, *rest in wanted]
    present = [item for item in present if item[0]]
    if not present:
        return None
    figure, axes_list = _new_figure(len(present))
    for axes, (found, title, ylabel, color) in zip(axes_list, present, strict=True):
        _plot_curve(axes, found, "", color)
        axes.set_ylim(bottom=0)
        _finish(axes, title, ylabel, legend=len(found.steps) > MOVING_AVERAGE_AFTER)
    return figure


def _update_figure(records: Sequence[Record]) -> Figure | None:
    wanted = [(m.ACTOR_KL, "KL divergence", "KL", False),
              (m.ACTOR_ENTROPY, "Entropy", "entropy (nats)", False),
              (m.ACTOR_CLIP_FRACTION, "Clip fraction", "tokens clipped", True),
              (m.ACTOR_GRAD_NORM, "Gradient norm", "L2 norm", False)]
    present = [(series(records, key), title, ylabel, fraction) for key, title, ylabel, fraction in wanted]
    present = [item for item in present if item[0]]
    if not present:
        return None
    from matplotlib.ticker import PercentFormatter

    figure, axes_list = _new_figure(len(present), height=3.0)
    for axes, (found, title, ylabel, fraction) in zip(axes_list, present, strict=True):
        _plot_curve(axes, found, "", "tab:red")
        if fraction:
            axes.yaxis.set_major_formatter(PercentFormatter(1.0))
        _finish(axes, title, ylabel, legend=len(found.steps) > MOVING_AVERAGE_AFTER)
    return figure


# -- page ---------------------------------------------------------------------------------------

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1080px;
       padding: 1.5em; color: #1d1d1f; line-height: 1.45; }
h1 { margin-bottom: 0.1em; } .muted { color: #6b6b70; font-size: 0.9em; }
table.summary { border-collapse: collapse; margin: 1em 0; }
table.summary th, table.summary td { text-align: left; padding: 0.3em 1em 0.3em 0; border-bottom: 1px solid #e3e3e6; }
table.summary th { font-weight: 600; white-space: nowrap; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; border: 1px solid #e3e3e6; }
figcaption { font-weight: 600; margin-bottom: 0.3em; }
.empty, .stopped { padding: 1em; background: #fff6e5; border: 1px solid #f0d8a8; }
.episode { border: 1px solid #d8d8dc; border-radius: 6px; margin: 0.8em 0; padding: 0.6em 0.9em; }
.episode .meta { font-size: 0.9em; } .ok { color: #1a7f37; } .fail { color: #b42318; }
.error { background: #fdecea; border: 1px solid #f5c2bd; padding: 0.4em 0.6em; margin: 0.5em 0; }
.turn { margin: 0.5em 0; } .role { font-weight: 600; font-size: 0.85em; text-transform: uppercase; color: #555; }
pre { white-space: pre-wrap; word-break: break-word; background: #f6f6f8; padding: 0.5em 0.7em; margin: 0.2em 0;
      font-size: 0.85em; }
"""


def render_page(name: str, run_dir: Path, records: Sequence[Record],
                samples: Sequence[tuple[int, list[Record]]], *, stopped: str | None = None) -> str:
    generated = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_esc(name)} — BeyondAgent training report</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{_esc(name)}</h1>",
        f'<p class="muted">Training report for <code>{_esc(str(run_dir))}</code>, generated {generated}.</p>',
    ]
    if stopped:
        parts.append(f'<p class="stopped">The run did not finish: {_esc(stopped)}.</p>')
    if records:
        parts.append(_summary_html(([("Status", stopped)] if stopped else []) + summary_rows(records)))
        parts.extend(_panel_html(panel) for panel in draw_panels(records))
    else:
        parts.append('<p class="empty">No steps were recorded: <code>metrics.jsonl</code> is missing or empty '
                     "(the run may have stopped before its first step finished).</p>")
    if samples:
        parts.append(_samples_html(samples))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _summary_html(rows: Sequence[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{_esc(label)}</th><td>{_esc(value)}</td></tr>" for label, value in rows)
    return f'<h2>Summary</h2><table class="summary">{body}</table>'


def _panel_html(panel: Panel) -> str:
    return (f"<figure><figcaption>{_esc(panel.title)}</figcaption>"
            f'<img src="data:image/png;base64,{panel.png_base64}" alt="{_esc(panel.title)}"></figure>')


def _samples_html(samples: Sequence[tuple[int, list[Record]]]) -> str:
    parts = ["<h2>Sample episodes</h2>"]
    for step, chosen in samples:
        parts.append(f"<h3>Step {step}</h3>")
        parts.extend(_episode_html(sample) for sample in chosen)
    return "\n".join(parts)


def _episode_html(sample: Record) -> str:
    trajectory: Record = sample["trajectory"]
    task = trajectory.get("task") if isinstance(trajectory.get("task"), dict) else {}
    meta = [f"split: {sample.get('split', '?')}", f"task: {task.get('task_id', '?')}"]
    parts = ['<div class="episode">', f'<div class="meta">{_esc(" · ".join(meta))} · {_reward_html(trajectory)}</div>']
    if trajectory.get("error"):
        parts.append(f'<div class="error">error: {_esc(str(trajectory["error"]))}</div>')
    turns = trajectory.get("turns") if isinstance(trajectory.get("turns"), list) else []
    parts.extend(_turn_html(turn) for turn in turns if isinstance(turn, dict))
    if not turns:
        parts.append('<p class="muted">(no turns)</p>')
    parts.append("</div>")
    return "\n".join(parts)


def _reward_html(trajectory: Record) -> str:
    reward = trajectory.get("reward")
    if not isinstance(reward, dict):
        return "no reward"
    score = finite_scalar(reward.get("score"))
    success = bool(reward.get("success"))
    text = [f"reward {_number(score) if score is not None else '?'}",
            f'<span class="{"ok" if success else "fail"}">{"success" if success else "no success"}</span>']
    if reward.get("reason"):
        text.append(f"reason: {_esc(str(reward['reason']))}")
    return " · ".join(text)


def _turn_html(turn: Record) -> str:
    content = str(turn.get("content") or "")
    if len(content) > MAX_TURN_CHARS:
        content = f"{content[:MAX_TURN_CHARS]}\n… ({len(content) - MAX_TURN_CHARS} more characters)"
    parts = [f'<div class="turn"><div class="role">{_esc(str(turn.get("role", "?")))}</div>',
             f"<pre>{_esc(content)}</pre>"]
    if turn.get("tool_calls"):
        calls = json.dumps(turn["tool_calls"], ensure_ascii=False, indent=1, default=str)
        parts.append(f"<pre>tool calls: {_esc(calls)}</pre>")
    parts.append("</div>")
    return "".join(parts)


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _write_text_atomic(path: Path, text: str) -> None:
    """Write next to `path`, then rename: a reader never sees half a page."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
