"""The viewer's HTML pages: Jinja templates (`templates/`) rendered with autoescape on.

The templates are the one place where a run's text becomes HTML, and they escape every value
they insert: nothing here builds markup by hand. This module turns index rows and records into
plain values for them — text cut to a bounded length, numbers formatted defensively (a value of
the wrong type, NaN or beyond a float shows as "–"), URLs built with `urlencode`. Every page works
without script.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

import jinja2
from markupsafe import Markup

from beyondagent_plugin_view.assets import SCRIPT, STYLE
from beyondagent_plugin_view.bounds import MAX_FIELD_CHARS, MAX_TURN_CHARS, MAX_TURNS_SHOWN
from beyondagent_plugin_view.queries import ListQuery
from beyondagent_plugin_view.records import clean, finite, text

NAV = (("episodes", "Episodes", ""), ("curves", "Curves", "curves"), ("spec", "Spec", "spec"))
ROLES = ("system", "user", "assistant", "tool")
MAX_DETAILS_CHARS = 100_000

TEMPLATES = jinja2.Environment(loader=jinja2.PackageLoader("beyondagent_plugin_view"), autoescape=True,
                               undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
TEMPLATES.globals.update(style=Markup(STYLE), script=Markup(SCRIPT), nav=NAV)  # ours, not the run's


def render(template: str, **context: Any) -> str:
    context.setdefault("run", None)
    context.setdefault("runs", ())
    context.setdefault("here", "")
    return TEMPLATES.get_template(template).render(**context)


def number(value: Any, spec: str) -> str | None:
    """`value` formatted with `spec`, or None when it is not a finite number."""
    found = finite(value)
    return None if found is None else format(found, spec)


def clip(value: Any, limit: int = MAX_FIELD_CHARS) -> str:
    """A field as bounded text ('' for None)."""
    return text(value, limit) or ""


def error_page(message: str) -> str:
    return render("error.html", title="error", message=message)


def runs_page(runs: Sequence[Any], summaries: Sequence[dict[str, Any]]) -> str:
    items = [{"run": run, "episodes": summary["episodes"]} for run, summary in zip(runs, summaries, strict=True)]
    return render("runs.html", title="runs", items=items, runs=runs)


# -- the list -----------------------------------------------------------------------------------

LIST_HEADERS = (("line", "#"), ("step", "step"), (None, "split"), ("task", "task"), ("origin", "origin"),
                ("group", "group"), ("score", "reward"), ("success", "success"), ("turns", "turns"),
                ("tokens", "tokens"), ("trained", "trained"), ("error", "error"))
NUMERIC = ("#", "step", "reward", "turns", "tokens", "trained")
DESCENDING_FIRST = ("score", "tokens", "trained", "turns", "step")


def list_page(run: Any, query: ListQuery, rows: Sequence[dict[str, Any]], total: int, summary: dict[str, Any],
              choices: dict[str, list[Any]], *, elapsed_ms: float, runs: Sequence[Any] = ()) -> str:
    headers = []
    for key, label in LIST_HEADERS:
        sorted_ = query.sort == key
        desc = not query.desc if sorted_ else key in DESCENDING_FIRST
        href = None if key is None else f"{run.base}/?{urlencode(query.params(sort=key, desc=desc, page=1))}"
        headers.append({"label": label, "numeric": label in NUMERIC, "sorted": sorted_, "href": href,
                        "mark": (" ▼" if query.desc else " ▲") if sorted_ else ""})
    return render(
        "list.html", title=f"{run.name}: episodes", run=run, runs=runs, here="episodes", query=query,
        summary=summary, total=total, elapsed=f"{elapsed_ms:.0f}", headers=headers,
        rows=[_list_row(run, row) for row in rows], pager=_pager(run, query, total),
        choices={key: [(clip(value), clip(value)) for value in values] for key, values in choices.items()},
        yes_no=[("", "any"), ("1", "yes"), ("0", "no")],
        hidden=[(key, value) for key, value in query.params(page=1).items() if key in ("sort", "desc", "per_page")])


def _list_row(run: Any, row: dict[str, Any]) -> dict[str, Any]:
    group_href = None
    if row["grp"] is not None and row["step"] is not None:
        where = {"step": row["step"], "split": row["split"] or "", "group": row["grp"]}
        group_href = f"{run.base}/group?{urlencode(where)}"
    return {**row, "link": f'{run.base}/episode/{row["id"]}', "group_href": group_href,
            "score_text": number(row["score"], ".3f")}


def _pager(run: Any, query: ListQuery, total: int) -> dict[str, Any]:
    pages = max(1, math.ceil(total / query.per_page))
    links = []
    for label, page in (("« first", 1), ("‹ previous", query.page - 1), ("next ›", query.page + 1), ("last »", pages)):
        live = 1 <= page <= pages and page != query.page
        links.append({"label": label, "href": f"{run.base}/?{urlencode(query.params(page=page))}" if live else None})
    return {"pages": pages, "links": links}


# -- one episode --------------------------------------------------------------------------------

def episode_page(run: Any, row: dict[str, Any], record: dict[str, Any], tokens: list[dict[str, Any]],
                 *, runs: Sequence[Any] = ()) -> str:
    if row["bad"]:
        return render("episode.html", title=f"{run.name}: bad line", run=run, runs=runs, row=row, bad=row["bad"])
    block = record.get("tokens") if isinstance(record.get("tokens"), dict) else {}
    advantages = block.get("advantages") or []
    values = sorted({found for value, _ in advantages if (found := finite(value)) not in (None, 0.0)})
    if values:
        advantage = ", ".join(f"{v:+.4f}" for v in values[:6]) + (" …" if len(values) > 6 else "")
    else:
        advantage = "0 on every token" if advantages else "— (not a training episode)"
    group = record.get("group")
    group_href = None
    if group is not None:
        where = {"step": clip(record.get("step")), "split": clip(record.get("split")), "group": clip(group)}
        group_href = f"{run.base}/group?{urlencode(where)}"
    ep = {key: clip(record.get(key)) for key in ("task_id", "step", "split", "env", "origin", "seed_task_id",
                                                   "reason", "terminated", "error")}
    ep.update(query=clip(record.get("query"), MAX_TURN_CHARS), group=clip(group), group_href=group_href,
              score=number(record.get("score"), ".3f"), success=bool(record.get("success")),
              guided=bool(record.get("guided")), off_policy=bool(record.get("off_policy")), advantage=advantage,
              seat=seat_of(record))
    colours = [("mask", "loss mask"), ("logprob", "log-prob heat map")] + ([("advantage", "advantage")]
                                                                            if advantages else [])
    shown = _turns(record)
    details = None
    if record.get("details"):
        details = clip(json.dumps(record["details"], ensure_ascii=False, indent=1, default=str), MAX_DETAILS_CHARS)
    starts = sample_starts(block, row["tokens"] or 0)
    ep["samples"] = len(starts) + 1 if starts else None
    return render("episode.html", title=f"{run.name}: {ep['task_id']}", run=run, runs=runs, row=row, bad=None, ep=ep,
                  box=token_box(tokens, row["tokens"], sample_starts=starts), colours=colours,
                  turns=shown[:MAX_TURNS_SHOWN],
                  hidden_turns=max(0, len(shown) - MAX_TURNS_SHOWN), details=details)


def seat_of(record: dict[str, Any]) -> int | None:
    """The seat a multi-seat episode's record played (None: a one-seat episode, or not a seat number)."""
    seat = record.get("seat")
    return seat if type(seat) is int and seat >= 0 else None


def _turns(record: dict[str, Any], *, only_model: bool = False) -> list[dict[str, Any]]:
    """The conversation; each model turn with the estimator's value for that step, where it gave one."""
    values = record.get("step_values")
    values = values if isinstance(values, list) else []
    shown, model_turn = [], 0
    turns = record.get("turns")
    for turn in turns if isinstance(turns, list) else []:
        if not isinstance(turn, dict):
            continue
        value = None
        if turn.get("role") == "assistant":
            value = values[model_turn] if model_turn < len(values) else None
            model_turn += 1
        elif only_model:
            continue
        shown.append(turn_view(turn, value))
        if len(shown) > MAX_TURNS_SHOWN:
            break
    return shown


def turn_view(turn: dict[str, Any], step_value: Any = None) -> dict[str, Any]:
    content = turn.get("content")
    content = "" if content is None else (content if isinstance(content, str) else str(content))
    if len(content) > MAX_TURN_CHARS:
        content = f"{content[:MAX_TURN_CHARS]}\n… ({len(content) - MAX_TURN_CHARS} more characters)"
    role = clip(turn.get("role", "?"), 40)
    calls = None
    if turn.get("tool_calls"):
        calls = clip(json.dumps(turn["tool_calls"], ensure_ascii=False, default=str), MAX_TURN_CHARS)
    return {"role": role, "role_class": role if role in ROLES else "other", "content": clean(content, len(content)),
            "calls": calls, "step_value": number(step_value, "+.3f")}


def sample_starts(block: dict[str, Any], total: int) -> list[int]:
    """Where each sample after the first starts in a split gateway episode's token block (its
    samples are laid end to end); [] for a one-sample episode or a value that is not a valid list."""
    starts = block.get("sample_starts")
    if not isinstance(starts, list) or len(starts) > total + 1:
        return []
    if not all(type(x) is int for x in starts) or starts != sorted(set(starts)) or starts[:1] != [0] \
            or starts[-1] >= max(total, 1):
        return []
    return starts[1:]


def token_box(tokens: Sequence[dict[str, Any]], total: int, *, start: int = 0,
              sample_starts: Sequence[int] = ()) -> dict[str, Any]:
    """The spans of a token window (`records.token_window` from `start`) as (mask, style, title, text)
    tuples (the template unpacks them: no lookups in its hot loop): mask as class, probability and
    advantage as CSS variables, every value in the title. `total` is the block's length. Before
    each of `sample_starts` (a split gateway episode's later samples) a heading span (mask class
    `sample`) names the sample."""
    spans = []
    headings = {position: number for number, position in enumerate(sample_starts, start=2)}
    for position, token in enumerate(tokens, start=start):
        if position in headings:
            spans.append(("sample", "", "a model call that did not extend the previous prompt and reply starts "
                          "a new sample of this episode (docs/agents.md)",
                          f"sample {headings[position]} of {len(sample_starts) + 1}"))
        mask = "1" if token["mask"] else "0"
        token_id = token["id"] if type(token["id"]) is int else clip(token["id"], 40)
        hover = f"#{position} · id {token_id} · mask {mask}"
        logprob, advantage = finite(token["logprob"]), finite(token["advantage"])
        style = ""
        if logprob is not None:
            probability = math.exp(min(logprob, 0.0))
            hover += f" · log-prob {logprob:.3f} (p={probability:.3f})"
            style = f"--p:{probability:.3f};"
        if advantage is not None:
            hover += f" · advantage {advantage:+.4f}"
            style += f"--a:{max(-1.0, min(1.0, advantage)):.3f}"  # the same scale in every episode
        else:
            style += "--a:0"
        spans.append((mask, style, hover, token["text"]))
    return {"spans": spans, "tokens": max(0, total - start), "trained": sum(1 for token in tokens if token["mask"]),
            "hidden": max(0, total - start - len(tokens))}


# -- a group side by side -----------------------------------------------------------------------

def group_page(run: Any, step: int, split: str, group: str,
               items: Sequence[tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]], int]], *, more: bool,
               runs: Sequence[Any] = ()) -> str:
    scores = [score for row, _, _, _ in items if (score := finite(row["score"])) is not None]
    cards = []
    for row, record, tokens, start in items:
        cards.append({**row, "link": f"{run.base}/episode/{row['id']}", "score": number(row["score"], ".3f"),
                      "task_id": clip(row["task_id"]), "turns_shown": _turns(record, only_model=True),
                      "seat": seat_of(record),
                      "box": token_box(tokens, row["tokens"] or 0, start=start)})
    return render("group.html", title=f"{run.name}: group {clip(group)}", run=run, runs=runs, step=step,
                  split=clip(split), group=clip(group), cards=cards, more=more,
                  spread=f"{min(scores):.3f} … {max(scores):.3f}" if scores else "")


# -- curves and spec ----------------------------------------------------------------------------

def curves_page(run: Any, charts: Sequence[dict[str, Any]], panels: Sequence[Any], *, problem: str | None,
                hidden: int, limit: int, runs: Sequence[Any] = ()) -> str:
    return render("curves.html", title=f"{run.name}: curves", run=run, runs=runs, here="curves", charts=charts,
                  panels=panels, problem=problem, hidden=hidden, limit=limit)


def plugins_table(plugins: Any) -> dict[str, list[dict[str, str]]] | None:
    """plugins.json: which plugin (and version) provided each component, and every plugin's state."""
    if not isinstance(plugins, dict):
        return None
    components = plugins.get("components") if isinstance(plugins.get("components"), dict) else {}
    installed = plugins.get("plugins") if isinstance(plugins.get("plugins"), list) else []
    fields = ("kind", "name", "distribution", "version")
    return {
        "components": [{"key": clip(key), **{field: clip(item.get(field)) for field in fields}}
                       for key, item in components.items() if isinstance(item, dict)],
        "plugins": [{field: clip(item.get(field)) for field in ("name", "distribution", "version", "status", "error")}
                    for item in installed if isinstance(item, dict)],
    }


def spec_page(run: Any, spec_text: str | None, spec_problem: str | None, plugins: Any, plugins_problem: str | None,
              *, runs: Sequence[Any] = ()) -> str:
    return render("spec.html", title=f"{run.name}: spec", run=run, runs=runs, here="spec", spec=spec_text,
                  spec_problem=spec_problem, plugins=plugins_table(plugins), plugins_problem=plugins_problem)

