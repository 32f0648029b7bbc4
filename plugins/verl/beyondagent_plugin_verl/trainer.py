"""verl's trainer on a composed config (runs in verl's venv; started by `backend.py`).

    python -m beyondagent_plugin_verl.trainer verl_config.yaml

What `python -m verl.trainer.main_ppo` does after Hydra has composed its config, on the config our
launcher composed and verl validated (`compose.py`): set the device, validate, `run_ppo` with
verl's V1 task runner. Before starting Ray it checks that our agent loop registered (verl logs
a failed `verl.plugins` import only at DEBUG, and would otherwise fail much later in a worker).
"""

from __future__ import annotations

import sys


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
    sys.exit(main(sys.argv[1]))
