"""The viewer's HTML pages, rendered on the server: every page works without script.

Pages: the runs (with more than one RUN_DIR), a run's episode list (filters, sorting, paging),
one episode (meta, judge details, turns, tokens coloured by loss mask / log-prob / advantage with
the values on hover), a group side by side, the curves and the spec. All text from the run is
escaped.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

from beyondagent_plugin_view.assets import SCRIPT, STYLE
from beyondagent_plugin_view.queries import ListQuery

MAX_TURN_CHARS = 20_000
NAV = (("episodes", "Episodes", ""), ("curves", "Curves", "curves"), ("spec", "Spec", "spec"))


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def page(title: str, body: str, *, run: Any = None, here: str = "", runs: Sequence[Any] = ()) -> str:
    nav = []
    if len(runs) > 1:
        nav.append('<a href="/">all runs</a>')
    if run is not None:
        nav.append(f'<span class="run">{esc(run.name)}</span>')
        nav += [f'<a class="{"here" if key == here else ""}" href="{run.base}/{path}">{label}</a>'
                for key, label, path in NAV]
    nav.append(f'<a class="{"here" if here == "compare" else ""}" href="/compare">Compare</a>')
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)} — beyondagent view</title><style>{STYLE}</style></head><body>"
            f"<header><strong>beyondagent view</strong>{''.join(nav)}</header><main>{body}</main>"
            f"<script>{SCRIPT}</script></body></html>")


def runs_page(runs: Sequence[Any], summaries: Sequence[dict[str, Any]]) -> str:
    rows = "".join(f'<tr><td><a href="{run.base}/">{esc(run.name)}</a></td><td>{esc(run.dir)}</td>'
                   f'<td class="num">{summary["episodes"]}</td></tr>'
                   for run, summary in zip(runs, summaries, strict=True))
    body = ('<h2>Runs</h2><table class="list"><tr><th>run</th><th>directory</th><th class="num">episodes</th></tr>'
            f"{rows}</table>")
    return page("runs", body, runs=runs)


# -- the list -----------------------------------------------------------------------------------

LIST_HEADERS = (("line", "#"), ("step", "step"), (None, "split"), ("task", "task"), ("origin", "origin"),
                ("group", "group"), ("score", "reward"), ("success", "success"), ("turns", "turns"),
                ("tokens", "tokens"), ("trained", "trained"), ("error", "error"))


def list_page(run: Any, query: ListQuery, rows: Sequence[dict[str, Any]], total: int, summary: dict[str, Any],
              choices: dict[str, list[Any]], *, elapsed_ms: float, runs: Sequence[Any] = ()) -> str:
    parts = [f"<h2>Episodes <span class=\"muted\">{summary['episodes']} recorded"
             + (f", steps {summary['first_step']}–{summary['last_step']}" if summary["first_step"] is not None else "")
             + "</span></h2>"]
    parts += _notices(run, summary)
    parts.append(_filters(run, query, choices))
    header = "".join(_header_cell(run, query, key, label) for key, label in LIST_HEADERS)
    body = "".join(_list_row(run, row) for row in rows)
    parts.append(f'<table class="list" id="episodes"><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>')
    if not rows:
        parts.append('<p class="muted">No episode matches these filters.</p>' if summary["episodes"] else "")
    parts.append(_pager(run, query, total, elapsed_ms))
    return page(f"{run.name}: episodes", "".join(parts), run=run, here="episodes", runs=runs)


def _notices(run: Any, summary: dict[str, Any]) -> list[str]:
    notes = []
    if not run.has_episodes:
        notes.append(f'<p class="notice">{esc(run.dir)} has no <code>episodes.jsonl</code>: this run wrote no token '
                     "records. The torch backend writes them (the spec's <code>logging.episodes</code> picks which; "
                     "<code>logging.episodes=all</code> keeps every episode). Curves and spec are still here.</p>")
    if summary["bad_lines"]:
        notes.append(f'<p class="notice">{summary["bad_lines"]} line(s) of episodes.jsonl cannot be read; they are '
                     '<a href="?error=1">listed</a> as such, the rest is browsable.</p>')
    if summary["torn_bytes"]:
        notes.append(f'<p class="notice">The last {summary["torn_bytes"]} bytes of episodes.jsonl are an unfinished '
                     "line (being written now, or cut by a kill); it shows up once it is complete.</p>")
    return notes


def _select(name: str, current: str, options: Sequence[tuple[str, str]]) -> str:
    items = "".join(f'<option value="{esc(value)}"{" selected" if value == current else ""}>{esc(label)}</option>'
                    for value, label in options)
    return f'<select name="{name}">{items}</select>'


def _filters(run: Any, query: ListQuery, choices: dict[str, list[Any]]) -> str:
    any_ = [("", "any")]
    yes_no = [("", "any"), ("1", "yes"), ("0", "no")]
    fields = [
        ("split", _select("split", query.split, any_ + [(s, s) for s in choices.get("split", [])])),
        ("step ≥", f'<input class="num" name="step_min" value="{esc(query.step_min)}">'),
        ("step ≤", f'<input class="num" name="step_max" value="{esc(query.step_max)}">'),
        ("task id", f'<input name="task" value="{esc(query.task)}">'),
        ("origin", _select("origin", query.origin, any_ + [(o, o) for o in choices.get("origin", [])])),
        ("group", f'<input class="num" name="group" value="{esc(query.group)}">'),
        ("success", _select("success", query.success, yes_no)),
        ("error", _select("error", query.error, yes_no)),
        ("guided", _select("guided", query.guided, yes_no)),
        ("search in turns", f'<input class="wide" type="search" name="q" value="{esc(query.q)}">'),
    ]
    hidden = "".join(f'<input type="hidden" name="{key}" value="{esc(value)}">'
                     for key, value in query.params(page=1).items() if key in ("sort", "desc", "per_page"))
    labels = "".join(f"<label>{esc(label)}{control}</label>" for label, control in fields)
    return (f'<form class="filters" method="get" action="{run.base}/">{labels}{hidden}'
            f'<button type="submit">Filter</button> <a href="{run.base}/">clear</a></form>')


def _header_cell(run: Any, query: ListQuery, key: str | None, label: str) -> str:
    numeric = label in ("#", "step", "reward", "turns", "tokens", "trained")
    css = ' class="num"' if numeric else ""
    if key is None:
        return f"<th{css}>{esc(label)}</th>"
    desc = not query.desc if query.sort == key else key in ("score", "tokens", "trained", "turns", "step")
    mark = (" ▼" if query.desc else " ▲") if query.sort == key else ""
    href = f"{run.base}/?{urlencode(query.params(sort=key, desc=desc, page=1))}"
    sorted_ = ' class="sorted"' if query.sort == key else ""
    return f'<th{css}><a{sorted_} href="{esc(href)}">{esc(label)}{mark}</a></th>'


def _list_row(run: Any, row: dict[str, Any]) -> str:
    link = f'{run.base}/episode/{row["id"]}'
    if row["bad"]:
        return (f'<tr class="badline"><td class="num"><a href="{link}">{row["line"]}</a></td>'
                f'<td colspan="10"><span class="badge bad">bad line</span></td>'
                f'<td class="err">{esc(row["bad"])}</td></tr>')
    group = ""
    if row["grp"] is not None and row["step"] is not None:
        href = f'{run.base}/group?{urlencode({"step": row["step"], "split": row["split"] or "", "group": row["grp"]})}'
        group = f'<a href="{esc(href)}">{esc(row["grp"])}</a>'
    success = '<span class="ok">yes</span>' if row["success"] else '<span class="fail">no</span>'
    guided = '<span class="badge guided">guided</span>' if row["guided"] else ""
    return (f'<tr data-id="{row["id"]}"><td class="num"><a href="{link}">{row["line"]}</a></td>'
            f'<td class="num">{esc(row["step"])}</td><td>{esc(row["split"])}</td>'
            f'<td><a href="{link}">{esc(row["task_id"])}</a>{guided}</td><td>{esc(row["origin"])}</td><td>{group}</td>'
            f'<td class="num">{_score(row["score"])}</td><td>{success}</td><td class="num">{row["turns"]}</td>'
            f'<td class="num">{row["tokens"]}</td><td class="num">{row["trained"]}</td>'
            f'<td class="err">{esc(row["error"] or "")}</td></tr>')


def _score(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, int | float) else "–"


def _pager(run: Any, query: ListQuery, total: int, elapsed_ms: float) -> str:
    pages = max(1, math.ceil(total / query.per_page))
    links = []
    for label, number in (("« first", 1), ("‹ previous", query.page - 1), ("next ›", query.page + 1),
                          ("last »", pages)):
        if 1 <= number <= pages and number != query.page:
            links.append(f'<a href="{esc(run.base + "/?" + urlencode(query.params(page=number)))}">{label}</a>')
        else:
            links.append(f'<span class="muted">{label}</span>')
    return (f'<div class="pager">{" ".join(links)}<span id="count">page {query.page} of {pages} · '
            f'{total} episodes match</span><span class="muted">({elapsed_ms:.0f} ms)</span>'
            '<label class="muted"><input type="checkbox" id="live"> reload every 5 s</label></div>')


# -- one episode --------------------------------------------------------------------------------

def episode_page(run: Any, row: dict[str, Any], record: dict[str, Any], tokens: list[dict[str, Any]],
                 token_error: str | None, *, runs: Sequence[Any] = ()) -> str:
    if row["bad"]:
        body = (f'<h2>Line {row["line"]} of episodes.jsonl</h2><p class="notice">{esc(row["bad"])}</p>'
                f'<p><a href="{run.base}/">back to the list</a></p>')
        return page(f"{run.name}: bad line", body, run=run, runs=runs)
    parts = [f'<h2>Episode {esc(record.get("task_id"))} <span class="muted">step {esc(record.get("step"))} · '
             f'{esc(record.get("split"))} · line {row["line"]}</span></h2>', _meta(run, record, row)]
    if record.get("error"):
        parts.append(f'<p class="notice">error: {esc(record["error"])}</p>')
    parts.append("<h3>Tokens</h3>")
    if token_error:
        parts.append(f'<p class="notice">{esc(token_error)}</p>')
    elif not tokens:
        parts.append('<p class="muted">This record has no tokens.</p>')
    else:
        parts.append(_token_controls(record))
        parts.append(token_box(tokens, "mask"))
    parts.append("<h3>Turns</h3>")
    parts += _turns(record)
    if record.get("details"):
        details = json.dumps(record["details"], ensure_ascii=False, indent=1, default=str)
        parts.append(f"<h3>Judge details</h3><pre>{esc(details)}</pre>")
    return page(f"{run.name}: {record.get('task_id')}", "".join(parts), run=run, runs=runs)


def _meta(run: Any, record: dict[str, Any], row: dict[str, Any]) -> str:
    group = record.get("group")
    group_link = esc(group)
    if group is not None:
        where = {"step": record.get("step"), "split": record.get("split"), "group": group}
        href = f"{run.base}/group?{urlencode(where)}"
        group_link = f'<a href="{esc(href)}">{esc(group)} (side by side)</a>'
    success = '<span class="ok">success</span>' if record.get("success") else '<span class="fail">no success</span>'
    flags = []
    if record.get("guided"):
        flags.append('<span class="badge guided">experience injected</span>')
    if record.get("off_policy"):
        flags.append('<span class="badge guided">trained off-policy (experience stripped)</span>')
    advantages = (_block(record).get("advantages")) or []
    values = sorted({value for value, _ in advantages if value not in (None, 0)})
    items = [("task", f'{esc(record.get("task_id"))} <span class="muted">{esc(record.get("env"))}</span>'),
             ("origin", esc(record.get("origin")) + (f' (seed {esc(record["seed_task_id"])})'
                                                     if record.get("seed_task_id") else "")),
             ("group", group_link), ("reward", f'{_score(record.get("score"))} · {success} {"".join(flags)}'),
             ("judge", esc(record.get("reason"))),
             ("tokens", f'{row["tokens"]} ({row["trained"]} trained, loss mask 1)'),
             ("advantage", ", ".join(f"{v:+.4f}" for v in values[:6]) + (" …" if len(values) > 6 else "")
              if values else ("0 on every token" if advantages else "— (not a training episode)")),
             ("terminated", esc(record.get("terminated")))]
    if record.get("query"):
        items.insert(1, ("query", esc(record["query"])))
    cells = "".join(f"<dt>{label}</dt><dd>{value}</dd>" for label, value in items)
    return f'<dl class="meta">{cells}</dl>'


def _block(record: dict[str, Any]) -> dict[str, Any]:
    block = record.get("tokens")
    return block if isinstance(block, dict) else {}


def _turns(record: dict[str, Any]) -> list[str]:
    """The conversation; each model turn with the estimator's value for that step, where it gave one."""
    values = record.get("step_values")
    values = values if isinstance(values, list) else []
    shown, model_turn = [], 0
    for turn in record.get("turns") or []:
        if not isinstance(turn, dict):
            continue
        value = None
        if turn.get("role") == "assistant":
            value = values[model_turn] if model_turn < len(values) else None
            model_turn += 1
        shown.append(_turn(turn, value))
    return shown


def _turn(turn: dict[str, Any], step_value: Any = None) -> str:
    content = str(turn.get("content") or "")
    if len(content) > MAX_TURN_CHARS:
        content = f"{content[:MAX_TURN_CHARS]}\n… ({len(content) - MAX_TURN_CHARS} more characters)"
    role = str(turn.get("role", "?"))
    calls = ""
    if turn.get("tool_calls"):
        calls = f"<pre>tool calls: {esc(json.dumps(turn['tool_calls'], ensure_ascii=False, default=str))}</pre>"
    badge = ""
    if isinstance(step_value, int | float):
        badge = (f' <span class="stepvalue" title="the advantage estimator\'s value for this step (ADCA: its step '
                 f'reward; GiGPO: its step-level advantage)">step value {step_value:+.3f}</span>')
    return (f'<div class="turn {esc(role)}"><div class="role">{esc(role)}{badge}</div><pre>{esc(content)}</pre>'
            f'{calls}</div>')


def _token_controls(record: dict[str, Any]) -> str:
    has_adv = bool(_block(record).get("advantages"))
    options = [("mask", "loss mask"), ("logprob", "log-prob heat map")]
    options += [("advantage", "advantage")] if has_adv else []
    radios = "".join(f'<label><input type="radio" name="colour" value="{value}"{" checked" if value == "mask" else ""}>'
                     f" {label}</label>" for value, label in options)
    legend = ('<span class="tok m1" style="background:#c8f0d0">trained (mask 1)</span>'
              '<span class="tok m0" style="background:#ececf0">not trained (mask 0)</span>'
              '<span class="tok" style="background:hsl(0 85% 78%)">p≈0</span>'
              '<span class="tok" style="background:hsl(120 85% 78%)">p≈1</span>'
              '<span class="tok" style="background:#d63a2f;color:#fff">advantage ≤ −1</span>'
              '<span class="tok" style="background:#2e9e4a;color:#fff">advantage ≥ +1</span>'
              "<span>hover a token for its id, log-prob and advantage</span>")
    return f'<div class="views">colour by: {radios}</div><div class="legend">{legend}</div>'


def token_box(tokens: Sequence[dict[str, Any]], colour: str, *, start: int = 0) -> str:
    """Token spans with their mask as class (`m0` / `m1`), probability and advantage as CSS variables."""
    spans = []
    for position, token in enumerate(tokens[start:], start=start):
        hover = [f"#{position}", f"id {token['id']}", f"mask {token['mask']}"]
        style = []
        if token["logprob"] is not None:
            hover.append(f"log-prob {token['logprob']:.3f} (p={math.exp(token['logprob']):.3f})")
            style.append(f"--p:{math.exp(token['logprob']):.3f}")
        if token.get("advantage") is not None:
            hover.append(f"advantage {token['advantage']:+.4f}")
            style.append(f"--a:{max(-1.0, min(1.0, token['advantage'])):.3f}")  # the same scale in every episode
        else:
            style.append("--a:0")
        spans.append(f'<span class="tok m{token["mask"]}" style="{";".join(style)}" title="{esc(" · ".join(hover))}">'
                     f"{esc(token['text'])}</span>")
    trained = sum(1 for token in tokens[start:] if token["mask"])
    return (f'<div class="tokens by-{colour}" data-tokens="{len(tokens) - start}" data-trained="{trained}">'
            f'{"".join(spans)}</div>')


# -- a group side by side -----------------------------------------------------------------------

def group_page(run: Any, step: int, split: str, group: str, items: Sequence[tuple[dict[str, Any], dict[str, Any],
               list[dict[str, Any]]]], *, runs: Sequence[Any] = ()) -> str:
    scores = [row["score"] for row, _, _ in items if row["score"] is not None]
    spread = f" · rewards {min(scores):.3f} … {max(scores):.3f}" if scores else ""
    parts = [f'<h2>Group {esc(group)} <span class="muted">step {step} · {esc(split)} · {len(items)} episodes'
             f"{spread}</span></h2>"]
    if not items:
        parts.append('<p class="muted">No recorded episode is in this group (the sampling of '
                     "<code>logging.episodes</code> may have left it out).</p>")
    else:
        parts.append(f'<p class="muted">task {esc(items[0][0]["task_id"])} · each card is one rollout; '
                     "the tokens from the model's first turn on, coloured by loss mask.</p>")
    cards = []
    for row, record, tokens in items:
        success = '<span class="ok">success</span>' if row["success"] else '<span class="fail">no success</span>'
        turns = "".join(_turn(turn) for turn in record.get("turns") or [] if isinstance(turn, dict)
                        and turn.get("role") == "assistant")
        start = _block(record).get("prompt_length", 0)
        cards.append(f'<div class="card" data-id="{row["id"]}"><div><a href="{run.base}/episode/{row["id"]}">'
                     f'#{row["line"]}</a> · reward {_score(row["score"])} · {success} · {row["turns"]} turns'
                     f'{" · <span class=badge>guided</span>" if row["guided"] else ""}</div>'
                     f'{"<p class=notice>" + esc(row["error"]) + "</p>" if row["error"] else ""}'
                     f'<details><summary>model turns</summary>{turns}</details>{token_box(tokens, "mask", start=start)}'
                     "</div>")
    parts.append(f'<div class="group">{"".join(cards)}</div>')
    return page(f"{run.name}: group {group}", "".join(parts), run=run, runs=runs)


# -- curves and spec ----------------------------------------------------------------------------

def curves_page(run: Any, charts: Sequence[str], panels: Sequence[Any], *, runs: Sequence[Any] = ()) -> str:
    parts = ["<h2>Curves</h2>"]
    if not charts:
        parts.append(f'<p class="notice">{esc(run.dir)} has no metrics.jsonl yet (no step has finished).</p>')
    for panel in panels:
        parts.append(f'<figure><figcaption>{esc(panel.title)}</figcaption>'
                     f'<img src="data:image/png;base64,{panel.png_base64}" alt="{esc(panel.title)}"></figure>')
    if charts:
        parts.append('<h3>Every metric <span class="muted">(hover a point for its value)</span></h3>'
                     f'<div class="charts">{"".join(charts)}</div>')
    return page(f"{run.name}: curves", "".join(parts), run=run, here="curves", runs=runs)


def _components_table(plugins: dict[str, Any]) -> str:
    """plugins.json: which plugin (and version) provided each component, and every plugin's state."""
    components = plugins.get("components") if isinstance(plugins.get("components"), dict) else {}
    rows = "".join(f"<tr><td>{esc(key)}</td><td>{esc(item.get('kind'))}</td><td>{esc(item.get('name'))}</td>"
                   f"<td>{esc(item.get('distribution'))}</td><td>{esc(item.get('version'))}</td></tr>"
                   for key, item in components.items() if isinstance(item, dict))
    installed = plugins.get("plugins") if isinstance(plugins.get("plugins"), list) else []
    others = "".join(f"<tr><td>{esc(item.get('name'))}</td><td>{esc(item.get('distribution'))}</td>"
                     f"<td>{esc(item.get('version'))}</td><td>{esc(item.get('status'))}</td>"
                     f"<td>{esc(item.get('error') or '')}</td></tr>" for item in installed if isinstance(item, dict))
    return ('<h3>Components</h3><table class="list" id="components"><tr><th>key</th><th>kind</th><th>name</th>'
            f"<th>distribution</th><th>version</th></tr>{rows}</table>"
            '<h3>Plugins installed</h3><table class="list" id="plugins"><tr><th>plugin</th><th>distribution</th>'
            f"<th>version</th><th>status</th><th></th></tr>{others}</table>")


def spec_page(run: Any, spec_text: str | None, plugins: Any, *, runs: Sequence[Any] = ()) -> str:
    parts = ["<h2>Spec</h2>"]
    if isinstance(plugins, dict):
        parts.append(_components_table(plugins))
    parts.append("<h3>spec.resolved.yaml</h3>")
    parts.append(f"<pre>{esc(spec_text)}</pre>" if spec_text is not None else
                 '<p class="notice">No spec.resolved.yaml in this run directory.</p>')
    return page(f"{run.name}: spec", "".join(parts), run=run, here="spec", runs=runs)
