"""Run a spec in this process with the envs of torch_test_envs.py registered (for subprocess tests).

    python run_spec_with_test_envs.py SPEC [--resume] [--hold-after-checkpoint=N]

Tests that must kill a run mid-way start it through this script. With `--hold-after-checkpoint=N`
the run stops after writing its step-N checkpoint, writes `held-after-checkpoint` in its run
directory and waits there to be killed: the test kills it at that point, with no race against the
run's next steps.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from torch_test_envs import EnvsForTests  # noqa: E402

from beyondagent_core import pipeline  # noqa: E402
from beyondagent_core.plugins import PluginManager, Switches  # noqa: E402


def hold_after_checkpoint(step: int) -> None:
    """After the trainer saves step `step`'s checkpoint: say so in a file, then wait forever."""
    from beyondagent_plugin_torch import trainer

    save = trainer.save_checkpoint

    def saved_then_held(run_dir: Path, saved_step: int, **kwargs: Any) -> Any:
        path = save(run_dir, saved_step, **kwargs)
        if saved_step == step:
            (Path(run_dir) / "held-after-checkpoint").write_text(str(step))
            threading.Event().wait()  # until SIGKILL
        return path

    trainer.save_checkpoint = saved_then_held


def main(argv: list[str]) -> int:
    held = [a for a in argv if a.startswith("--hold-after-checkpoint=")]
    if held:
        hold_after_checkpoint(int(held[0].split("=", 1)[1]))
    argv = [a for a in argv if a not in held]
    manager = PluginManager(Switches.from_environment())
    manager.load()
    manager.register(EnvsForTests(), name="torch-test-envs", distribution="tests", version="0")
    session = pipeline.prepare(argv[0], [a for a in argv[1:] if a != "--resume"], manager=manager)
    pipeline.run(session, resume="--resume" in argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
