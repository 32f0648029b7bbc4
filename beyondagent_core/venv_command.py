"""`beyondagent venv`: list, build and locate the cached venvs plugins register.

    beyondagent venv list [--json]
    beyondagent venv build [NAME ...] [--all] [--rebuild] [--jobs N]
    beyondagent venv path NAME
    beyondagent venv prune [--dry-run]

`build` prints how long each build took (CI logs show it); a venv that is already built is
reused and says so. `--jobs N` builds N venvs at once: a build is mostly pip downloading and
unpacking wheels, so builds overlap well even on 2 cores (the suite's script uses it); each then
reports its stages as plain lines instead of a live status. `prune` removes the cached venvs of registered names that no recipe uses
any more (an older key: a changed recipe, an upgraded plugin), a few GB each for verl.
"""

from __future__ import annotations

import argparse
import json
import time

from beyondagent_core.arguments import number
from beyondagent_core.errors import SpecError


def add_venv_parser(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    venv = commands.add_parser("venv", parents=[common], help="Cached virtualenvs that plugins need (verl, AppWorld).",
                               description="Cached virtualenvs that plugins need for stacks that cannot "
                                           "share this one.")
    actions = venv.add_subparsers(dest="venv_command", metavar="ACTION", required=True)
    listing = actions.add_parser("list", parents=[common], help="every registered venv: where, built or not")
    listing.add_argument("--json", action="store_true")
    build = actions.add_parser("build", parents=[common], help="build venvs (reused when already built)")
    build.add_argument("names", nargs="*", metavar="NAME")
    build.add_argument("--all", action="store_true", help="every registered venv")
    build.add_argument("--rebuild", action="store_true", help="build again from scratch")
    build.add_argument("--jobs", type=number(int, ge=1, le=64), default=1, metavar="N",
                       help="venvs built at once (default 1)")
    path = actions.add_parser("path", parents=[common], help="print a venv's directory (built or not)")
    path.add_argument("name")
    prune = actions.add_parser("prune", parents=[common], help="remove cached venvs no registered recipe uses now")
    prune.add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")


def run_venv_command(args: argparse.Namespace) -> int:
    from beyondagent_core.plugins import PluginManager
    from beyondagent_core.registry import Registry
    from beyondagent_core.venvs import locate, registered_recipe

    registry = Registry(PluginManager().load())
    if args.venv_command == "list":
        return _list(registry, as_json=args.json)
    if args.venv_command == "path":
        print(locate(registered_recipe(registry, args.name, where="beyondagent venv path")).path)
        return 0
    if args.venv_command == "prune":
        return _prune(registry, dry_run=args.dry_run)
    names = registry.names("venv") if args.all else args.names
    if not names:
        raise SpecError("say which venvs to build", where="beyondagent venv build",
                        hint=f"names: {', '.join(registry.names('venv')) or 'none registered'}; or --all")
    if args.jobs == 1 or len(names) == 1:
        for name in names:
            _build(registry, name, rebuild=args.rebuild)
        return 0
    from concurrent.futures import ThreadPoolExecutor

    # every build runs to its end even when another fails; the first failure is then raised
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(_build, registry, name, rebuild=args.rebuild, live=False) for name in names]
    for future in futures:
        future.result()
    return 0


def _build(registry: object, name: str, *, rebuild: bool, live: bool = True) -> None:
    from rich.console import Console
    from rich.markup import escape

    from beyondagent_core.venvs import ensure_venv, locate, registered_recipe

    console = Console(stderr=True)
    recipe = registered_recipe(registry, name, where="beyondagent venv build")
    if locate(recipe).ready and not rebuild:
        venv = locate(recipe)
        console.print(f"venv {name}: ready at {venv.path} (built in {venv.info().get('seconds', '?')} s)",
                      highlight=False, markup=False)
        return
    started = time.monotonic()
    if live:
        with console.status(f"venv {name}: building") as status:
            venv = ensure_venv(recipe, rebuild=rebuild,
                               progress=lambda step: status.update(escape(f"venv {name}: {step}")))
    else:  # builds side by side: one live status cannot show them all
        console.print(f"venv {name}: building", highlight=False, markup=False)
        venv = ensure_venv(recipe, rebuild=rebuild,
                           progress=lambda step: console.print(f"venv {name}: {step}", highlight=False, markup=False))
    # pip arguments like `verl[verl-core]` are text, not rich markup
    console.print(f"venv {name}: built in {time.monotonic() - started:.0f} s at {venv.path}", highlight=False,
                  markup=False)
    for line in venv.info().get("steps", []):
        console.print(f"  {line['seconds']:>7.1f} s  {line['step']}", highlight=False, markup=False)
    if venv.info().get("check"):
        console.print(f"  check: {venv.info()['check']}", highlight=False, markup=False)


def _list(registry: object, *, as_json: bool) -> int:
    from beyondagent_core.venvs import locate, registered_recipe

    rows = []
    for registration in registry.registrations("venv"):  # type: ignore[attr-defined]
        name = registration.spec.name
        venv = locate(registered_recipe(registry, name, where="beyondagent venv list"))
        info = venv.info() if venv.ready else {}
        rows.append({"name": name, "provider": registration.plugin.provider, "path": str(venv.path),
                     "ready": venv.ready, "seconds": info.get("seconds"), "check": info.get("check")})
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="plugin venvs")
    for column in ("name", "provider", "state", "path"):
        table.add_column(column, overflow="fold")
    for row in rows:
        state = f"[green]ready[/] ({row['seconds']} s)" if row["ready"] else "[yellow]not built[/]"
        table.add_row(escape(row["name"]), escape(row["provider"]), state, escape(row["path"]))
    Console().print(table)
    return 0


def _prune(registry: object, *, dry_run: bool) -> int:
    import shutil

    from beyondagent_core.venvs import locate, registered_recipe, stale_venvs

    current = {name: locate(registered_recipe(registry, name, where="beyondagent venv prune")).path
               for name in registry.names("venv")}  # type: ignore[attr-defined]
    stale = stale_venvs(current)
    for path in stale:
        print(f"{'would remove' if dry_run else 'removing'} {path}")
        if not dry_run:
            shutil.rmtree(path, ignore_errors=True)
            path.with_name(path.name + ".lock").unlink(missing_ok=True)
    if not stale:
        print("nothing to prune")
    return 0
