"""`beyondagent`: run a spec, validate it, list plugins.

    beyondagent run SPEC [KEY=VALUE ...] [--dry-run] [--resume] [--on-bad-record fail|skip]
    beyondagent explore SPEC [KEY=VALUE ...] [--force]
    beyondagent validate SPEC [KEY=VALUE ...]
    beyondagent plugins [--json | --requirements]
    beyondagent venv list|build|path ...
    beyondagent <plugin command> ...      (commands plugins add: `env serve --env NAME`
                                          (beyondagent-plugin-envservice), `eval SPEC` and `report RUN_DIR`
                                          (beyondagent-plugin-report), `view RUN_DIR`, `verl setup`)
    beyondagent --version

A user error prints what was wrong, where and what to do, and exits with 2 (1 when a run
fails at run time); `-v` adds debug events and the traceback. Nothing heavy (torch,
transformers, ray) is imported here: backends import what they need when a run selects them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from beyondagent_core import __version__
from beyondagent_core.arguments import add_spec_arguments
from beyondagent_core.errors import BeyondAgentError, PluginError
from beyondagent_core.logs import configure_logging
from beyondagent_core.venv_command import add_venv_parser, run_venv_command

BUILTIN_COMMANDS = ("run", "explore", "validate", "plugins", "venv")
# Commands first-party plugins add: typed without the plugin, each says what to install.
PLUGIN_COMMANDS = {"env": "envservice", "view": "view", "verl": "verl", "appworld": "appworld", "model": "torch",
                   "eval": "report", "report": "report"}


def build_parser(*, plugin_commands: bool = True) -> tuple[argparse.ArgumentParser, dict[str, Any]]:
    """The parser, and the handlers of the commands plugins add (loaded when `plugin_commands`)."""
    # `-v` works before or after the command; SUPPRESS keeps a subcommand from resetting it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="debug events and full tracebacks")

    parser = argparse.ArgumentParser(
        prog="beyondagent", parents=[common],
        description="Self-evolving agent RL: explore, synthesize tasks, mix, train. Every part is a plugin.",
    )
    parser.add_argument("--version", action="version", version=f"beyondagent {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def spec_command(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, parents=[common], help=help_text, description=help_text)
        add_spec_arguments(sub)
        return sub

    run = spec_command("run", "Run a spec: load tasks, explore, mix, train.")
    run.add_argument("--dry-run", action="store_true",
                     help="resolve everything, print the plan and exit without exploring or training")
    run.add_argument("--resume", action="store_true",
                     help="continue the run in its directory from the backend's last checkpoint")
    explore = spec_command("explore", "Explore alone: synthesize tasks from the seed tasks into the cache.")
    explore.add_argument("--force", action="store_true",
                         help="explore again even if the cache is finished or was made from other seeds/settings")
    spec_command("validate", "Check a spec against the installed plugins without running it.")

    plugins = commands.add_parser("plugins", parents=[common], help="List installed plugins and what they provide.")
    output = plugins.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="machine-readable list of plugins")
    output.add_argument("--requirements", action="store_true",
                        help="pip requirement lines pinning every working plugin")
    add_venv_parser(commands, common)
    handlers = add_plugin_commands(commands, common) if plugin_commands else {}
    return parser, handlers


def add_plugin_commands(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> dict[str, Any]:
    """Add each `beyondagent_commands` command; returns name -> handler.

    A name the core uses is never replaced, and a name two plugins register is added as an
    error naming both: neither is picked by load order.
    """
    from beyondagent_core.plugins import PluginManager
    from beyondagent_core.registry import Registry

    registry = Registry(PluginManager().load())
    conflicts = registry.conflicts().get("command", {})
    handlers: dict[str, Any] = {}
    for registration in registry.registrations("command"):
        spec = registration.spec
        if spec.name in BUILTIN_COMMANDS or spec.name in handlers:
            continue
        parser = commands.add_parser(spec.name, parents=[common], help=spec.summary, description=spec.summary)
        if spec.name in conflicts:
            parser.add_argument("rest", nargs=argparse.REMAINDER)
            handlers[spec.name] = _ambiguous_command(spec.name, conflicts[spec.name])
            continue
        try:
            handlers[spec.name] = spec.load_factory()(parser)
        except Exception as exc:  # noqa: BLE001 - a broken plugin command must not take the CLI down
            parser.add_argument("rest", nargs=argparse.REMAINDER)
            handlers[spec.name] = _broken_command(spec.name, registration.plugin.provider, exc)
    for name, plugin in PLUGIN_COMMANDS.items():
        if name not in handlers:
            parser = commands.add_parser(name, parents=[common], help=f"(needs beyondagent-plugin-{plugin})")
            parser.add_argument("rest", nargs=argparse.REMAINDER)
            handlers[name] = _missing_command(name, plugin, registry.manager.records.get(plugin))
    return handlers


def _ambiguous_command(name: str, providers: list[str]) -> Any:
    def handler(args: argparse.Namespace) -> int:
        raise PluginError(f"command {name!r} is provided by more than one plugin: {'; '.join(providers)}",
                          hint="uninstall one, or disable one with BEYONDAGENT_DISABLED_PLUGINS")
    return handler


def _missing_command(name: str, plugin: str, record: Any) -> Any:
    """The handler of a first-party plugin's command when that plugin is not there (or not loaded)."""
    from beyondagent_core.plugins import why_absent

    dist = f"beyondagent-plugin-{plugin}"
    problem, hint = why_absent(plugin, record, provides=f"command {name!r}")

    def handler(args: argparse.Namespace) -> int:
        raise PluginError(f"`beyondagent {name}` comes with {dist}; {problem}", hint=hint)
    return handler


def _broken_command(name: str, provider: str, exc: Exception) -> Any:
    def handler(args: argparse.Namespace) -> int:
        raise PluginError(f"command {name!r} could not be set up: {type(exc).__name__}: {exc}",
                          where=f"provided by {provider}", hint="report this to the plugin's author") from exc
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Plugins are loaded for their commands only when the command is not one of ours.
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    configure_logging(verbose="-v" in argv or "--verbose" in argv)
    # `--version` alone needs no plugin; help without a command lists the plugins' commands too.
    listing = first is None and (not argv or "-h" in argv or "--help" in argv)
    parser, handlers = build_parser(plugin_commands=listing or (first is not None and first not in BUILTIN_COMMANDS))
    args, extra = parser.parse_known_args(argv)
    # `run spec.yaml --dry-run key=value`: argparse ends the overrides at the first option; the
    # KEY=VALUE words after it are overrides too
    if extra and hasattr(args, "overrides") and all("=" in word and not word.startswith("-") for word in extra):
        args.overrides = [*args.overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.verbose = getattr(args, "verbose", False)
    configure_logging(verbose=args.verbose)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        if args.command == "plugins":
            return cmd_plugins(args)
        if args.command == "validate":
            return cmd_validate(args)
        if args.command == "explore":
            return cmd_explore(args)
        if args.command == "venv":
            return run_venv_command(args)
        if args.command in handlers:
            return int(handlers[args.command](args) or 0)
        return cmd_run(args)
    except BeyondAgentError as exc:
        print_error(exc, verbose=args.verbose)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # a run says where it stopped; SIGTERM exits 143, Ctrl-C 130
        print(f"interrupted: {exc}" if str(exc) else "interrupted", file=sys.stderr)
        return getattr(exc, "exit_code", 130)
    except Exception as exc:  # noqa: BLE001 - a bug: say so plainly, traceback with -v
        from beyondagent_core.secrets import redact

        print(redact(f"error: internal error: {type(exc).__name__}: {exc}"), file=sys.stderr)
        if args.verbose:
            import traceback

            print(redact(traceback.format_exc()), end="", file=sys.stderr)
        else:
            print("  hint: run again with -v for the traceback, and please report it", file=sys.stderr)
        return 1


def print_error(exc: BeyondAgentError, *, verbose: bool) -> None:
    from beyondagent_core.secrets import redact

    print(redact(f"error: {exc}"), file=sys.stderr)
    if verbose and exc.__cause__ is not None:
        import traceback

        print(redact("".join(traceback.format_exception(exc.__cause__))), end="", file=sys.stderr)


def cmd_run(args: argparse.Namespace) -> int:
    from beyondagent_core import pipeline

    session = pipeline.prepare(args.spec, args.overrides, profile=args.profile)
    configure_logging(verbose=args.verbose, level=session.spec.logging.level)
    if args.dry_run:
        print_plan(pipeline.plan(session, on_bad_record=args.on_bad_record))
        return 0
    metrics = pipeline.run(session, on_bad_record=args.on_bad_record, resume=args.resume)
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=False).print(f"[bold green]run finished[/]: {escape(json.dumps(metrics, default=str))}")
    return 0


def cmd_explore(args: argparse.Namespace) -> int:
    from beyondagent_core import pipeline

    session = pipeline.prepare(args.spec, args.overrides, profile=args.profile)
    configure_logging(verbose=args.verbose, level=session.spec.logging.level)
    report = pipeline.explore_only(session, on_bad_record=args.on_bad_record, force=args.force, show_progress=True)
    print_exploration(report)
    return 0


def print_exploration(report: Any) -> None:
    """The exploration's statistics: tasks per seed, filters, LLM use, failures."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    result = report.result
    if result is None:
        console.print(f"cache {escape(str(report.cache))} is finished: {len(report.tasks)} synthetic tasks "
                      f"(nothing explored; --force explores again)")
        return
    per_seed = sorted(result.per_seed.values())
    table = Table(title=f"exploration: {len(report.seeds)} seeds, {result.explorations} explorations")
    table.add_column("")
    table.add_column("value", justify="right")
    rows = [
        ("explored now / resumed from cache", f"{result.completed} / {result.resumed}"),
        ("failed explorations", str(result.failures)),
        ("candidate tasks", str(result.candidates)),
        *((f"dropped by {name}", str(count)) for name, count in result.dropped_by_filter.items()),
        ("kept (synthetic tasks in the cache)", str(len(result.tasks))),
        ("tasks per seed (min / median / max)",
         f"{per_seed[0]} / {per_seed[len(per_seed) // 2]} / {per_seed[-1]}" if per_seed else "-"),
        *((f"summarizer: {key}", str(value)) for key, value in sorted(result.summarizer.items())),
        *((f"llm: {key}", str(value)) for key, value in sorted(result.llm.items())),
        ("seconds", f"{result.seconds:.1f}"),
    ]
    for name, value in rows:  # names and values hold the spec's and the errors' text: never markup
        table.add_row(escape(name), escape(value))
    console.print(table)
    for error in result.errors:
        console.print(f"[yellow]failed[/] {escape(str(error))}")
    console.print(f"cache: {escape(str(report.cache))}")


def cmd_validate(args: argparse.Namespace) -> int:
    from beyondagent_core import pipeline

    from beyondagent_core.build_check import build_components

    session = pipeline.prepare(args.spec, args.overrides, profile=args.profile)
    build_components(session.spec)  # a factory rejecting its config fails here, not at `run`
    print(f"{args.spec}: ok")
    print(session.spec.redacted_yaml(), end="")
    return 0


def print_plan(plan: Any) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    table = Table(title="components")
    for column in ("key", "kind", "name", "provider"):
        table.add_column(column)
    for row in plan.components:
        table.add_row(*(escape(str(row[column])) for column in ("key", "kind", "name", "provider")))
    console.print(table)
    console.print(f"original tasks: {plan.original}   val tasks: {plan.val}")
    synthetic = "?" if plan.synthetic is None else plan.synthetic
    console.print(f"synthetic tasks: {synthetic} ({escape(str(plan.synthetic_source))})")
    if plan.mixed is not None:
        console.print(f"after mixing (epoch 0): {sum(plan.mixed.values())} tasks = "
                      f"{plan.mixed['original']} original + {plan.mixed['synthetic']} synthetic")
    if plan.backend:  # its own lines, never cut where the console is narrow (a terminal wraps them itself)
        console.print(plan.backend, highlight=False, markup=False, soft_wrap=True)
    console.print("dry run: nothing was explored or trained")


def cmd_plugins(args: argparse.Namespace) -> int:
    from beyondagent_core.plugins import PluginManager
    from beyondagent_core.registry import Registry

    manager = PluginManager().load()
    conflicts = Registry(manager).conflicts()
    records = list(manager.records.values())
    if args.json:
        listing = []
        for record in records:
            item = record.to_json()
            item["conflicts"] = {
                kind: {name: providers for name, providers in names.items() if record.provider in providers}
                for kind, names in conflicts.items()
            }
            item["conflicts"] = {kind: names for kind, names in item["conflicts"].items() if names}
            listing.append(item)
        print(json.dumps(listing, indent=2))
        return 0
    if args.requirements:
        for record in records:
            if record.status == "ok" and record.distribution and record.name != "builtin":
                print(f"{record.distribution}=={record.version}")
        return 0
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    table = Table(title=f"beyondagent {__version__} plugins")
    for column in ("plugin", "distribution", "version", "status", "provides"):
        table.add_column(column, overflow="fold")
    for record in records:
        provides = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in record.provides.items())
        status = {"ok": "[green]ok[/]", "disabled": "[yellow]disabled[/]"}.get(record.status, "[red]error[/]")
        # a third party's names and errors are text, never markup ("one of [a, b]" would lose its list)
        table.add_row(escape(record.name), escape(record.distribution or ""), escape(record.version or ""), status,
                      escape(provides or (record.error or "")))
    console.print(table)
    for record in records:
        if record.status == "error":
            console.print(f"[red]{escape(record.name)}[/] ({escape(str(record.provider))}): {escape(str(record.error))}",
                          highlight=False)
            if args.verbose and record.traceback:
                console.print(record.traceback, highlight=False, markup=False)
    for kind, names in conflicts.items():
        for name, providers in names.items():
            detail = f"{kind} {name!r} is provided by {'; '.join(providers)} - select one as plugin/{name}"
            console.print(f"[yellow]conflict[/]: {escape(detail)}", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
