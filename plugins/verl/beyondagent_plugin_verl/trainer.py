"""verl's trainer on a composed config (runs in verl's venv; started by `backend.py`).

    python -m beyondagent_plugin_verl.trainer verl_config.yaml
    python -m beyondagent_plugin_verl.trainer --compose REQUEST.json ANSWER.json

What `python -m verl.trainer.main_ppo` does after Hydra has composed its config, on the config our
launcher composed and verl validated (`compose.py`): set the device, validate, `run_ppo` with
verl's V1 task runner. Before starting Ray it checks that our agent loop registered (verl logs
a failed `verl.plugins` import only at DEBUG, and would otherwise fail much later in a worker).

With `--compose` the process first composes (`compose.answer`), writes the answer to ANSWER.json
and waits for a line on stdin: `go` trains on the composed config, anything else (or the launcher
gone) ends it. A run thus imports verl once, not once to compose and again to train (10-20 s each on
2 CPU cores), and the launcher still checks the answer (keys, agent loop, GPUs) before Ray starts.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

COMPOSE_FAILED = 4  # the exit code when verl rejected the config (the answer says why)


def compose_then_wait(request_path: str, answer_path: str) -> int:
    """Compose, hand the answer over (written whole, then renamed) and train on the launcher's `go`;
    the exit code."""
    from beyondagent_plugin_verl.compose import answer

    result = answer(request_path)
    partial = Path(f"{answer_path}.partial")
    partial.write_text(json.dumps(result, default=str))
    os.replace(partial, answer_path)
    if not result.get("ok"):
        return COMPOSE_FAILED
    if sys.stdin.readline().strip() != "go":
        return 0  # the launcher stopped before the launch (a check failed, or it was interrupted)
    return main(result["config"])


def main(config_path: str) -> int:
    from omegaconf import OmegaConf

    from beyondagent_plugin_verl.probe import agent_loop_status

    status = agent_loop_status()
    if not status["registered"]:
        print(f"beyondagent: agent loop not registered: {status['error']}", file=sys.stderr)
        return 3
    config = OmegaConf.load(config_path)
    OmegaConf.set_struct(config, True)

    from verl.trainer.main_ppo import TaskRunnerV1, run_ppo
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    run_ppo(config, task_runner_class=TaskRunnerV1)
    return 0


if __name__ == "__main__":
    sys.exit(compose_then_wait(sys.argv[2], sys.argv[3]) if sys.argv[1] == "--compose" else main(sys.argv[1]))
