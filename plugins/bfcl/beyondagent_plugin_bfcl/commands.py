"""`beyondagent bfcl setup|check|agree`: the plugin's CLI (runs in the main environment).

Each command builds (once) and uses the BFCL venv through the core's venv mechanism; the BFCL
side runs there. The main environment never imports `bfcl_eval`.

- `setup [--rebuild]`: builds the venv (bfcl-eval and what its checkers import; ~2 minutes once)
  and prints where BFCL's data is.
- `check`: loads every supported category with BFCL's own loader and prints the task counts.
- `agree [--categories ...] [--limit N] [--style tools|prompting] [--json]`: the agreement run
  (`agreement.py`): ground truths replayed through our env and judge, and our verdicts against
  BFCL's own evaluator on a scripted policy's outputs, per category.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from typing import Any

from beyondagent_core.arguments import number
from beyondagent_core.errors import RunError
from beyondagent_plugin_bfcl.venv import bfcl_venv

WHERE = "beyondagent bfcl"


def add_bfcl_command(parser: argparse.ArgumentParser) -> Any:
    sub = parser.add_subparsers(dest="bfcl_command", metavar="COMMAND")
    setup = sub.add_parser("setup", help="Build the BFCL venv (bfcl-eval and what its checkers import).")
    setup.add_argument("--rebuild", action="store_true", help="build the venv again from scratch")
    sub.add_parser("check", help="Load every supported BFCL category and print the task counts.")
    agree = sub.add_parser("agree", help="Agreement of our env + judge with BFCL's own evaluator.")
    agree.add_argument("--categories", nargs="+", default=["all"], help="categories or groups (default: all)")
    agree.add_argument("--limit", type=number(int, ge=0, le=100_000), default=0,
                       help="the first N tasks of each category (default 0: all)")
    agree.add_argument("--style", choices=("tools", "prompting"), default="tools")
    agree.add_argument("--json", action="store_true", help="print the whole report as JSON")

    def handler(args: argparse.Namespace) -> int:
        command = getattr(args, "bfcl_command", None)
        if command == "setup":
            venv = bfcl_venv(rebuild=args.rebuild)
            print(f"BFCL venv: {venv.path} ({venv.info().get('check', '')})")
            from beyondagent_plugin_bfcl.data import venv_data_dir

            print(f"BFCL's data: {venv_data_dir()}")
            return 0
        if command == "check":
            return check_command()
        if command == "agree":
            return agree_command(args.categories, limit=args.limit, style=args.style, as_json=args.json)
        parser.print_help()
        return 0

    return handler


def check_command() -> int:
    from beyondagent_plugin_bfcl.config import CATEGORIES

    venv = bfcl_venv()
    code = ("import json, contextlib, io\nfrom bfcl_eval.utils import load_dataset_entry\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    counts = {{c: len(load_dataset_entry(c)) for c in {list(CATEGORIES)!r}}}\n"
            "print(json.dumps(counts))")
    result = venv.run(["-c", code])
    if result.returncode != 0:
        raise RunError(f"loading BFCL's categories failed:\n{result.stderr.strip()[-2000:]}", where=f"{WHERE} check")
    counts = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"BFCL venv: {venv.path} ({venv.info().get('check', '')})")
    for category, count in counts.items():
        print(f"  {category:<24} {count:>5} tasks")
    print(f"  {'total':<24} {sum(counts.values()):>5} tasks")
    return 0


def agree_command(categories: list[str], *, limit: int, style: str, as_json: bool) -> int:
    from beyondagent_plugin_bfcl.config import check_categories

    check_categories(categories, where="--categories")
    venv = bfcl_venv()
    args = [str(venv.python), "-m", "beyondagent_plugin_bfcl.agreement", "--categories", *categories,
            "--limit", str(limit), "--style", style]
    result = subprocess.run(args, env=venv.environ(), stdout=subprocess.PIPE, text=True, check=False)
    if result.returncode != 0:
        raise RunError(f"the agreement run failed (exit {result.returncode}); its output is above", where=f"{WHERE} agree")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{'category':<24} {'tasks':>6} {'GT pass':>8} {'changed->0':>11} {'agree':>12}")
    for category, row in report["categories"].items():
        changed = f"{row['changed_fail']}/{row['changed']}" if row["changed"] else "-"
        print(f"{category:<24} {row['tasks']:>6} {row['gt_pass']:>8} {changed:>11} "
              f"{row['scripted_agree']:>5}/{row['scripted']:<6}")
    print(f"agreement with BFCL's evaluator: {report['agreement']:.4f} ({report['scripted_agree']}/{report['scripted']} "
          f"verdicts, style {report['style']}); ground truths pass {report['gt_pass']}/{report['tasks']}; "
          f"{report['seconds']} s")
    return 0 if report["agreement"] == 1.0 else 1
