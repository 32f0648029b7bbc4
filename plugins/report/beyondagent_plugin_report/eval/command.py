"""The `beyondagent eval` command: arguments, the dry run, and the printed summary (see `evaluation.py`).

    beyondagent eval SPEC [KEY=VALUE ...] --checkpoint runs/quickstart [--split val] [--k 8]
    beyondagent eval SPEC --model qwen2.5-7b --base-url http://gpu-box:8000/v1 --k 8
    beyondagent eval SPEC --checkpoint runs/x --opponent-checkpoint runs/x/checkpoints/step_000010/model
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from beyondagent_core.arguments import SEED, add_profile_option, number
from beyondagent_plugin_report.eval.settings import CONCURRENCY_MAX, K_MAX, LIMIT_MAX, SPLITS, TEMPERATURE_MAX


EVAL_SUMMARY = "Evaluate a model on a split of a spec's tasks: avg@k, best@k, pass@k, without training."


def add_eval_arguments(parser: argparse.ArgumentParser) -> Any:
    """The `eval` command's arguments on its parser (the commands hook's factory); its handler."""
    parser.add_argument("spec", help="the spec YAML file (its tasks, env, workflow and judges are used)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="dot-list overrides of the spec")
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--checkpoint", metavar="PATH",
                       help="an HF model directory, a checkpoint of ours (torch or verl: a verl checkpoint is merged "
                            "into an HF directory next to it, once), or a run directory (its newest checkpoint)")
    model.add_argument("--model", metavar="NAME", help="the model name at an OpenAI-compatible endpoint")
    parser.add_argument("--base-url", help="the endpoint's URL, e.g. http://127.0.0.1:8000/v1 (with --model)")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY",
                        help="the environment variable holding the endpoint's key (default OPENAI_API_KEY)")
    rival = parser.add_mutually_exclusive_group()
    rival.add_argument("--opponent-checkpoint", metavar="PATH",
                       help="head to head: this checkpoint plays the other seats of each multi-seat game (an "
                            "earlier checkpoint of the run, say); the numbers are the model's, elo_vs_opponent "
                            "its edge")
    rival.add_argument("--opponent-model", metavar="NAME",
                       help="head to head: the model at an OpenAI-compatible endpoint that plays the other seats")
    parser.add_argument("--opponent-base-url", help="the opponent endpoint's URL (with --opponent-model)")
    parser.add_argument("--opponent-api-key-env", default="OPENAI_API_KEY",
                        help="the environment variable holding the opponent endpoint's key (default OPENAI_API_KEY)")
    parser.add_argument("--split", choices=SPLITS, default="val", help="which tasks (default: val)")
    parser.add_argument("--k", type=number(int, ge=1, le=K_MAX), default=8,
                        help=f"samples per task (default 8, at most {K_MAX})")
    parser.add_argument("--temperature", type=number(float, ge=0, le=TEMPERATURE_MAX), default=1.0,
                        help="sampling temperature where the workflow sets none (default 1.0; 0 = greedy)")
    parser.add_argument("--limit", type=number(int, ge=1, le=LIMIT_MAX), default=None,
                        help="only the first N tasks")
    parser.add_argument("--concurrency", type=number(int, ge=1, le=CONCURRENCY_MAX), default=16,
                        help="episodes in flight (default 16)")
    parser.add_argument("--seed", type=SEED, default=0, help="the bootstrap's seed (default 0)")
    parser.add_argument("--out", help="where to write (default: the run directory's eval/<split>-k<k>-<hash>)")
    parser.add_argument("--dry-run", action="store_true", help="say what would run, run nothing")
    add_profile_option(parser)
    return run_eval_command


def run_eval_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from beyondagent_plugin_report.eval import evaluation
    from beyondagent_core import pipeline
    from beyondagent_core.llm import LLMConfig
    from beyondagent_core.logs import configure_logging

    settings = _settings(args)
    overrides = list(args.overrides)
    manager = None
    if args.checkpoint:
        # The installed backends recognise their own checkpoint formats: load the plugins first.
        plugins = pipeline.prepare(args.spec, overrides, profile=args.profile)
        manager = plugins.manager
        found = evaluation.resolve_checkpoint(args.checkpoint, merge=not args.dry_run,
                                              registry=plugins.registry).resolve()
        model = evaluation.ModelChoice(checkpoint=found)
        overrides.append(f"model.path={model.checkpoint}")
    else:
        if args.base_url is not None and not args.base_url.startswith(("http://", "https://")):
            raise evaluation.EvalError(f"--base-url must be an http(s):// URL, got {args.base_url!r}",
                                       where="--base-url", hint="e.g. --base-url http://127.0.0.1:8000/v1")
        model = evaluation.ModelChoice(endpoint=LLMConfig(model=args.model, base_url=args.base_url,
                                                          api_key_env=args.api_key_env))
    session = pipeline.prepare(args.spec, overrides, manager=manager, profile=args.profile)
    configure_logging(verbose=args.verbose, level=session.spec.logging.level)
    opponent = _opponent(args, session)
    out = Path(args.out) if args.out else evaluation.eval_dir(session, settings, model, opponent)
    if args.dry_run:
        tasks = evaluation.load_split(session, settings.split, settings.limit)
        done = evaluation.read_done(out / evaluation.EPISODES_FILE, repair=False)
        against = f" against {opponent.model.describe()}" if opponent is not None else ""
        print(f"would evaluate {model.describe()}{against} on {len(tasks)} tasks of tasks.{settings.split} x "
              f"k={settings.k} (temperature {settings.temperature}); {len(done)} episodes already done in {out}")
        if model.checkpoint is not None and not model.checkpoint.exists():
            print(f"the verl checkpoint would first be merged into {model.checkpoint} (verl's model merger, once)")
        return 0
    result = evaluation.evaluate(session, settings, model, out=out, opponent=opponent)
    print_summary(result)
    return 0


def _opponent(args: argparse.Namespace, session: Any) -> Any:
    """The head-to-head opponent the arguments name (None: none): a checkpoint is served from a copy of
    the spec whose `model.path` is that checkpoint."""
    from beyondagent_plugin_report.eval import evaluation
    from beyondagent_core import pipeline
    from beyondagent_core.llm import LLMConfig

    if args.opponent_checkpoint:
        found = evaluation.resolve_checkpoint(args.opponent_checkpoint, merge=not args.dry_run,
                                              registry=session.registry).resolve()
        rival = pipeline.prepare(args.spec, [*args.overrides, f"model.path={found}"], manager=session.manager,
                                 profile=args.profile)
        return evaluation.Opponent(evaluation.ModelChoice(checkpoint=found), rival.spec)
    if args.opponent_model:
        url = args.opponent_base_url
        if url is not None and not url.startswith(("http://", "https://")):
            raise evaluation.EvalError(f"--opponent-base-url must be an http(s):// URL, got {url!r}",
                                       where="--opponent-base-url",
                                       hint="e.g. --opponent-base-url http://127.0.0.1:8001/v1")
        return evaluation.Opponent(evaluation.ModelChoice(endpoint=LLMConfig(
            model=args.opponent_model, base_url=url, api_key_env=args.opponent_api_key_env)))
    if args.opponent_base_url:
        raise evaluation.EvalError("--opponent-base-url needs --opponent-model (the model's name there)",
                                   where="--opponent-base-url", hint="add --opponent-model NAME")
    return None


def _settings(args: argparse.Namespace) -> Any:
    from beyondagent_core.checks import FieldRangeError
    from beyondagent_plugin_report.eval.evaluation import EvalError
    from beyondagent_plugin_report.eval.settings import EvalSettings

    try:
        return EvalSettings(split=args.split, k=args.k, temperature=args.temperature, limit=args.limit,
                            concurrency=args.concurrency, seed=args.seed)
    except FieldRangeError as exc:
        raise EvalError(f"--{exc.field} {exc.message}", where=f"--{exc.field}") from None


def print_summary(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    summary = result["summary"]
    against = f" against {result['opponent']}" if result.get("opponent") else ""
    table = Table(title=f"{result['model']}{against}: tasks.{result['settings']['split']}, k={result['settings']['k']}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("95% CI", justify="right")
    for name, value in summary.items():
        if name.endswith("_ci95"):
            continue
        low_high = summary.get(f"{name}_ci95")
        table.add_row(name, f"{value:.3f}" if isinstance(value, float) else str(value),
                      f"[{low_high[0]:.3f}, {low_high[1]:.3f}]" if low_high else "")
    console = Console()
    console.print(table)
    avg = f"avg@{result['settings']['k']}"
    for key, title in (("by_group", "by group (task metadata eval_group)"),  # BFCL: its category
                       ("by_seat", "by seat (each side of a multi-seat episode)")):
        parts = result.get(key) or {}
        if not parts:
            continue
        outcomes = [name for name in ("win_rate", "draw_rate", "loss_rate") if any(name in n for n in parts.values())]
        table = Table(title=title)
        for column in (key.removeprefix("by_"), "tasks", "pass@1", avg, *outcomes):
            table.add_column(column, justify="right" if column != key.removeprefix("by_") else "left")
        for part, numbers in parts.items():
            table.add_row(part, str(numbers.get("tasks", 0)),
                          *(f"{numbers.get(name, 0.0):.3f}" for name in ("pass@1", avg, *outcomes)))
        console.print(table)
    console.print(f"wrote {result['out']}/eval.json and eval.html")
    print(json.dumps({key: value for key, value in summary.items() if not key.endswith("_ci95")}))
