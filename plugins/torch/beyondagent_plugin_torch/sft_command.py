"""`beyondagent sft SPEC`: only the SFT warm-up of a torch spec (`algorithm.sft`), saved as a checkpoint.

    $ beyondagent sft examples/quickstart.yaml algorithm.sft.data=synthetic_references run.name=warm
    ...
    sft finished: {"sft/loss": 0.41, "sft/examples": 24, ..., "checkpoint": "runs/warm/checkpoints/step_000000"}

The run goes as `beyondagent run` goes (tasks, exploration, mixing) up to the first RL step: the
warm-up runs, `metrics.jsonl` gets its `sft/...` line at step 0, and the policy is saved in
`checkpoints/step_000000`; `model.path: <that>/model` starts RL (or `beyondagent eval`) from it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable


def add_sft_command(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    from beyondagent_core.arguments import add_spec_arguments

    add_spec_arguments(parser, spec_help="the spec YAML file (torch backend, with algorithm.sft)",
                       example="algorithm.sft.epochs=3")
    return run_sft_command


def run_sft_command(args: argparse.Namespace) -> int:
    from beyondagent_core import pipeline
    from beyondagent_core.errors import SpecError
    from beyondagent_core.logs import configure_logging
    from beyondagent_plugin_torch.sft import sft_only

    session = pipeline.prepare(args.spec, args.overrides, profile=args.profile)
    spec = session.spec
    configure_logging(verbose=getattr(args, "verbose", False), level=spec.logging.level)
    if spec.algorithm.sft is None:
        raise SpecError(f"{args.spec} has no algorithm.sft: nothing to warm up on",
                        where=f"{spec.path}, key algorithm.sft",
                        hint="add algorithm.sft: {data: successful | synthetic_references | FILE.jsonl, epochs: N} "
                             "(or an override algorithm.sft.data=...)")
    backend = spec.component("backend")
    if backend is None or backend.name != "torch":
        raise SpecError(f"beyondagent sft runs on the torch backend, not {backend.name if backend else None!r}",
                        where=f"{spec.path}, key backend.name",
                        hint="override backend.name=torch (verl: run its SFT trainer, verl.trainer.fsdp_sft_trainer)")
    with sft_only():
        metrics = pipeline.run(session, on_bad_record=args.on_bad_record)
    from rich.console import Console

    Console(stderr=False).print(f"[bold green]sft finished[/]: {json.dumps(metrics, default=str)}")
    return 0
