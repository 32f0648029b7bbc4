"""GRPO training throughput: our torch backend against TRL's `GRPOTrainer`, same task, same model.

What is measured
    Both sides train the same model (`--model`: the tiny Qwen2 model by default, or the real
    `smollm2-135m-instruct`; float32, CPU) with GRPO on the same
    64 single-turn prompts ("Answer with one direction word." / "Which way? (i)"), the same reward
    (`direction_game.direction_reward`: 1 when the reply names left/right/up/down), 8 prompts x 8
    completions = 64 completions per step, at most 16 new tokens stopping at the same eos
    (`<|im_end|>`), temperature 1, top-p 1, no top-k, one optimizer step per batch (AdamW, the same
    lr, weight decay 0.01, grad clip 1.0, constant schedule), token-mean loss, clip 0.2. The KL
    configurations: off (kl_coef = beta = 0, no reference model on either side) and on (0.04 on
    both, low-variance "k3" estimator, each side keeps a frozen reference copy).

    Each trial is a fresh child process per side, run alternately (ours, TRL, ours, TRL, ...) so
    that slow phases of a shared machine hit both. In each child the clock reads the end of every
    training step (ours: the `beyondagent_step_finished` hook; TRL: `TrainerCallback.on_step_end`);
    the steady-state rate is (steps - 1) * 64 completions / (end of last step - end of step 1), so
    imports, model load and the first (warm-up) step are excluded, and everything a step does in
    the loop (logging included) is inside.

    Peak memory is the kernel's high-water resident set size of the child (`ru_maxrss` from
    `os.wait4`), i.e. the whole process: Python, torch, transformers (and TRL's datasets/accelerate/
    pandas), model, reference copy, optimizer state, activations. "over imports" subtracts the RSS
    measured in the child right after its imports, before any model is loaded.

What each side does per step
    TRL (`steps_per_generation` = `gradient_accumulation_steps` = `num_iterations` = 1, no vLLM):
      1. generation: `model.generate` on the 64 left-padded prompts, KV cache, one batch;
      2. reward: `direction_reward` on the 64 decoded completions, group-normalized advantages;
      3. old log-probs: skipped (on-policy: TRL uses the current log-probs, detached); reference
         log-probs: one no-grad forward of the reference model when beta > 0;
      4. loss: one forward (logits of the completion tokens only) and backward over the 64
         sequences, DAPO (= token-mean) clipped loss, grad clip, AdamW step; a log record.
    Ours (the torch backend through `pipeline.run`, as `beyondagent run` does it):
      1. rollout: 64 episodes as asyncio tasks (env made and reset in worker threads, the react
         workflow, chat template); the ChatScheduler batches their turns into one KV-cached
         sampling loop (each episode with its own random generator);
      2. reward: each env's `evaluate()` (the same `direction_reward`), group-normalized advantages;
      3. old log-probs: skipped too (one optimizer step: they equal the current ones, detached; with
         ppo_epochs > 1 or mini-batches a no-grad forward recomputes them, as verl does); reference
         log-probs with one more no-grad forward when kl_coef > 0;
      4. update: one forward and backward over the 64 sequences (micro_batch_size 64, like TRL's
         single batch), token-mean clipped loss (dual clip), grad clip, AdamW step; a metrics line
         and two sample episodes appended to JSON lines.

How to read the output
    One row per configuration and side: samples/s (completions per second, median over trials,
    min-max in brackets), the median step time, peak RSS, tokens per completion (equal work: both
    should be close to 16), and the mean reward at step 1 and over the last steps (both should
    rise: the update works). "ours/TRL" divides our median samples/s by TRL's. The last line,
    `samples_per_s_ratio_vs_trl: X.XX`, is that ratio for the KL-off configuration (or the only
    one run). Above 1 we are faster.

    python benchmarks/grpo_vs_trl.py              # 10 steps x 3 trials, KL off and on (~2-3 min, 2 cores)
    python benchmarks/grpo_vs_trl.py --quick      # 4 steps x 1 trial, KL off (~20 s)
    python benchmarks/grpo_vs_trl.py --model smollm2-135m-instruct --kl off   # the real model (minutes a step)

Needs `trl` (`pip install trl`: it keeps torch and transformers as they are). Not a test: nothing
here asserts a speed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent))

from direction_game import (  # noqa: E402
    DirectionGamePlugin,
    direction_reward,
    prompt_messages,
    rss_kib,
    tasks,
)

SIDES = ("ours", "trl")
DEFAULT_KL = 0.04
DEFAULT_LR = 5e-3


@attrs.frozen
class Setup:
    """One configuration, identical for both sides."""

    steps: int = 10
    prompts_per_step: int = 8
    group_size: int = 8
    max_new_tokens: int = 16
    prompts: int = 64
    lr: float = DEFAULT_LR
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    clip_ratio: float = 0.2
    temperature: float = 1.0
    kl_coef: float = 0.0
    seed: int = 0
    threads: int = 0  # 0: torch's default (one per core)
    model: str = "tiny"  # `model.path`: tiny, a known name (smollm2-135m-instruct), a directory or .gguf

    @property
    def completions_per_step(self) -> int:
        return self.prompts_per_step * self.group_size

    @property
    def label(self) -> str:
        return f"KL {self.kl_coef:g}" if self.kl_coef else "KL off"


@attrs.define
class Trial:
    """What one child process measured."""

    side: str
    step_ends: list[float]
    rewards: list[float]
    completion_tokens: list[float]
    rollout_seconds: list[float]
    rss_after_imports_kib: int
    threads: int
    versions: dict[str, str]
    peak_rss_kib: int = 0
    completions_per_step: int = 0

    @property
    def samples_per_s(self) -> float:
        steady_steps = len(self.step_ends) - 1
        elapsed = self.step_ends[-1] - self.step_ends[0]
        return self.completions_per_step * steady_steps / elapsed if elapsed > 0 else float("nan")

    @property
    def step_seconds(self) -> list[float]:
        return [later - earlier for earlier, later in zip(self.step_ends, self.step_ends[1:])]

    @property
    def update_seconds(self) -> list[float]:
        """Steps 2..N less their rollout: the update half (loss, backward, optimizer, logging)."""
        return [step - rollout for step, rollout in zip(self.step_seconds, self.rollout_seconds[1:])]


# --- the two sides, each run in a child process ---------------------------------------------------


def set_threads(threads: int) -> int:
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def run_ours(setup: Setup, workdir: Path) -> Trial:
    """Train with the torch backend through the real pipeline; the step hook reads the clock."""
    import beyondagent_plugin_torch.trainer  # noqa: F401 - the backend's modules count in the baseline RSS
    import torch
    import transformers
    import transformers.models.qwen2.modeling_qwen2  # noqa: F401 - imported before the baseline RSS, as in TRL
    import yaml

    from beyondagent_core import hookimpl, pipeline
    from beyondagent_core.plugins import PluginManager, Switches

    threads = set_threads(setup.threads)
    rss_after_imports = rss_kib()
    trial = Trial(side="ours", step_ends=[], rewards=[], completion_tokens=[], rollout_seconds=[],
                  rss_after_imports_kib=rss_after_imports, threads=threads,
                  versions={"torch": torch.__version__, "transformers": transformers.__version__})

    class StepClock:
        @hookimpl
        def beyondagent_step_finished(self, run: Any, step: int, metrics: dict[str, Any]) -> None:
            trial.step_ends.append(time.perf_counter())
            trial.rewards.append(float(metrics["train/reward_mean"]))
            trial.completion_tokens.append(float(metrics["train/response_length"]))
            trial.rollout_seconds.append(float(metrics["perf/rollout_s"]))

    train_path = workdir / "train.jsonl"
    train_path.write_text("".join(json.dumps(task.to_dict()) + "\n" for task in tasks(setup.prompts)))
    spec = {
        "run": {"name": "grpo-bench", "seed": setup.seed, "output_dir": str(workdir / "runs")},
        "model": {"path": setup.model, "dtype": "float32"},
        "tasks": {"train": {"name": "jsonl", "path": str(train_path)}},
        "env": {"name": "direction_game"},
        "workflow": {"name": "react", "max_turns": 1},
        "mixture": {"name": "original"},
        "algorithm": {"group_size": setup.group_size, "kl_coef": setup.kl_coef, "kl_type": "low_var_kl",
                      "clip_ratio": setup.clip_ratio, "loss_agg_mode": "token-mean"},
        "backend": {"name": "torch", "device": "cpu", "batch_size": setup.prompts_per_step, "lr": setup.lr,
                    "weight_decay": setup.weight_decay, "grad_clip": setup.grad_clip,
                    "temperature": setup.temperature, "top_p": 1.0, "max_new_tokens": setup.max_new_tokens,
                    "max_episode_tokens": 256, "max_concurrency": setup.completions_per_step,
                    "micro_batch_size": setup.completions_per_step, "total_steps": setup.steps,
                    "tensorboard": False, "report": False},
        "plugins": {"require": []},
    }
    spec_path = workdir / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    manager = PluginManager(Switches.from_environment())
    manager.load()
    manager.register(DirectionGamePlugin(), "bench-direction-game", distribution="benchmarks", version="0")
    manager.register(StepClock(), "bench-step-clock", distribution="benchmarks", version="0")
    pipeline.run(pipeline.prepare(spec_path, [], manager=manager))
    return trial


def run_trl(setup: Setup, workdir: Path) -> Trial:
    """Train with TRL's GRPOTrainer on CPU; a callback reads the clock at each step's end."""
    import torch
    import transformers
    import trl
    from beyondagent_plugin_torch.models import resolve_model_path
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    threads = set_threads(setup.threads)
    rss_after_imports = rss_kib()
    trial = Trial(side="trl", step_ends=[], rewards=[], completion_tokens=[], rollout_seconds=[],
                  rss_after_imports_kib=rss_after_imports, threads=threads,
                  versions={"torch": torch.__version__, "transformers": transformers.__version__,
                            "trl": trl.__version__})

    def reward(completions: list[Any], **_: Any) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
        values = [direction_reward(text) for text in texts]
        trial.rewards.append(statistics.fmean(values))  # one call per step: one generation batch
        return values

    reward.__name__ = "direction_reward"

    class StepClock(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            trial.step_ends.append(time.perf_counter())

    model_dir = resolve_model_path(setup.model)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    dataset = Dataset.from_list([{"prompt": prompt_messages(index)} for index in range(setup.prompts)])
    config = GRPOConfig(
        output_dir=str(workdir / "trl"), use_cpu=True, bf16=False, fp16=False, report_to=[],
        model_init_kwargs={"dtype": "float32"}, seed=setup.seed, max_steps=setup.steps,
        per_device_train_batch_size=setup.completions_per_step, num_generations=setup.group_size,
        gradient_accumulation_steps=1, steps_per_generation=1, num_iterations=1,
        max_completion_length=setup.max_new_tokens, temperature=setup.temperature, top_p=1.0, top_k=0,
        learning_rate=setup.lr, lr_scheduler_type="constant", warmup_steps=0, optim="adamw_torch",
        weight_decay=setup.weight_decay, max_grad_norm=setup.grad_clip, epsilon=setup.clip_ratio,
        beta=setup.kl_coef, use_bias_correction_kl=False, loss_type="dapo", scale_rewards="group",
        logging_steps=1, save_strategy="no", disable_tqdm=True, log_completions=False,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(model=model_dir, reward_funcs=reward, args=config, train_dataset=dataset,
                          processing_class=tokenizer, callbacks=[StepClock()])
    time_generate_and_score(trainer, trial.rollout_seconds)
    trainer.train()
    trial.completion_tokens = [float(record["completions/mean_length"]) for record in trainer.state.log_history
                               if "completions/mean_length" in record]
    return trial


def time_generate_and_score(trainer: Any, seconds: list[float]) -> None:
    """Time TRL's generation phase (generate, decode, reward, advantages; ref log-probs when beta > 0).

    It is a private method: when a TRL version renames it, the phase column stays empty.
    """
    generate = getattr(trainer, "_generate_and_score_completions", None)
    if generate is None:
        return

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        result = generate(*args, **kwargs)
        seconds.append(time.perf_counter() - started)
        return result

    trainer._generate_and_score_completions = timed


def worker_main(side: str, setup: Setup, result_path: Path) -> None:
    with tempfile.TemporaryDirectory(prefix=f"grpo-bench-{side}-") as workdir:
        trial = (run_ours if side == "ours" else run_trl)(setup, Path(workdir))
    result_path.write_text(json.dumps(attrs.asdict(trial)))


# --- the parent: alternate the sides, collect, print -------------------------------------------------


class BenchmarkFailed(RuntimeError):
    pass


def child_environment(setup: Setup) -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONWARNINGS="ignore")
    if setup.threads > 0:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(setup.threads)
    return env


def run_child(side: str, setup: Setup, scratch: Path) -> Trial:
    """One trial of `side` in a fresh process; its peak RSS is the kernel's, from wait4."""
    stem = f"kl{setup.kl_coef:g}-seed{setup.seed}-{side}"
    result_path, log_path = scratch / f"{stem}.json", scratch / f"{stem}.log"
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", side,
               "--setup", json.dumps(attrs.asdict(setup)), "--result", str(result_path)]
    with log_path.open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=child_environment(setup))
        _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0 or not result_path.exists():
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
        raise BenchmarkFailed(f"the {side} trial exited with {process.returncode}; last lines of {log_path}:\n{tail}")
    trial = Trial(**json.loads(result_path.read_text()))
    trial.peak_rss_kib = int(usage.ru_maxrss)  # KiB on Linux
    trial.completions_per_step = setup.completions_per_step
    if len(trial.step_ends) != setup.steps:
        raise BenchmarkFailed(f"the {side} trial recorded {len(trial.step_ends)} step ends, expected {setup.steps}")
    return trial


def run_configuration(setup: Setup, trials: int, scratch: Path) -> dict[str, list[Trial]]:
    results: dict[str, list[Trial]] = {side: [] for side in SIDES}
    for index in range(trials):
        trial_setup = attrs.evolve(setup, seed=setup.seed + index)
        for side in SIDES:  # ours, TRL, ours, TRL, ...
            trial = run_child(side, trial_setup, scratch)
            results[side].append(trial)
            print(f"  {setup.label:>8} trial {index + 1}/{trials} {side:>4}: {trial.samples_per_s:7.1f} samples/s, "
                  f"peak RSS {trial.peak_rss_kib / 1024:6.0f} MiB, reward {trial.rewards[0]:.2f} -> "
                  f"{last_rewards(trial):.2f}", flush=True)
    return results


def last_rewards(trial: Trial) -> float:
    count = max(1, min(3, len(trial.rewards) // 3))
    return statistics.fmean(trial.rewards[-count:])


@attrs.frozen
class Summary:
    samples_per_s: float
    low: float
    high: float
    step_s: float
    rollout_s: float
    update_s: float
    peak_mib: float
    over_imports_mib: float
    tokens: float
    reward_first: float
    reward_last: float


def summarize(trials: list[Trial]) -> Summary:
    rates = [trial.samples_per_s for trial in trials]
    return Summary(
        samples_per_s=statistics.median(rates), low=min(rates), high=max(rates),
        step_s=statistics.median(s for trial in trials for s in trial.step_seconds),
        rollout_s=median_or_nan([s for trial in trials for s in trial.rollout_seconds[1:]]),
        update_s=median_or_nan([s for trial in trials for s in trial.update_seconds]),
        peak_mib=max(trial.peak_rss_kib for trial in trials) / 1024,
        over_imports_mib=statistics.median(t.peak_rss_kib - t.rss_after_imports_kib for t in trials) / 1024,
        tokens=statistics.fmean(x for trial in trials for x in trial.completion_tokens),
        reward_first=statistics.fmean(trial.rewards[0] for trial in trials),
        reward_last=statistics.fmean(last_rewards(trial) for trial in trials),
    )


def median_or_nan(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def print_table(rows: list[tuple[Setup, dict[str, Summary]]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"GRPO steady-state throughput, {rows[0][0].model} on CPU (64 completions/step)")
    for name in ("config", "side", "samples/s (min-max)", "step s", "rollout s", "update s", "peak RSS MiB",
                 "over imports", "tokens/compl", "reward step1 -> last", "ours/TRL"):
        table.add_column(name, justify="left" if name in ("config", "side") else "right")
    for setup, summaries in rows:
        ratio = summaries["ours"].samples_per_s / summaries["trl"].samples_per_s
        for side in SIDES:
            s = summaries[side]
            table.add_row(setup.label, side, f"{s.samples_per_s:.1f} ({s.low:.1f}-{s.high:.1f})", f"{s.step_s:.3f}",
                          f"{s.rollout_s:.3f}", f"{s.update_s:.3f}", f"{s.peak_mib:.0f}", f"{s.over_imports_mib:.0f}",
                          f"{s.tokens:.1f}",
                          f"{s.reward_first:.2f} -> {s.reward_last:.2f}", f"{ratio:.2f}" if side == "ours" else "")
    Console(width=140).print(table)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=None, help="training steps per trial (default 10, quick 4)")
    parser.add_argument("--trials", type=int, default=None, help="trials per side and config (default 3, quick 1)")
    parser.add_argument("--quick", action="store_true", help="4 steps, 1 trial, KL off only")
    parser.add_argument("--kl", choices=("off", "on", "both"), default=None, help="KL configurations (default both)")
    parser.add_argument("--kl-coef", type=float, default=DEFAULT_KL, help="kl_coef = beta when KL is on")
    parser.add_argument("--lr", type=float, default=DEFAULT_LR, help="learning rate of both sides")
    parser.add_argument("--threads", type=int, default=0, help="torch threads in each child (0: torch's default)")
    parser.add_argument("--model", default="tiny",
                        help="model.path of both sides: tiny (default), smollm2-135m-instruct, a directory or .gguf")
    parser.add_argument("--worker", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--setup", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.steps = args.steps or (4 if args.quick else 10)
    args.trials = args.trials or (1 if args.quick else 3)
    args.kl = args.kl or ("off" if args.quick else "both")
    if args.steps < 2 or args.trials < 1:
        parser.error("--steps must be >= 2 (the first step is warm-up) and --trials >= 1")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.worker:
        worker_main(args.worker, Setup(**json.loads(args.setup)), Path(args.result))
        return 0
    try:
        trl_version = importlib.metadata.version("trl")
    except importlib.metadata.PackageNotFoundError:
        print("TRL is not installed: pip install trl (it keeps torch and transformers as they are)", file=sys.stderr)
        return 2
    from beyondagent_plugin_torch.models import resolve_model_path

    resolve_model_path(args.model)  # built, fetched or converted (once) before any child starts
    kl_values = {"off": [0.0], "on": [args.kl_coef], "both": [0.0, args.kl_coef]}[args.kl]
    base = Setup(steps=args.steps, lr=args.lr, threads=args.threads, model=args.model)
    print(f"GRPO vs TRL {trl_version} on {args.model}: {args.steps} steps x {args.trials} trials per side, "
          f"{base.prompts_per_step} prompts x {base.group_size} = {base.completions_per_step} completions/step, "
          f"{base.max_new_tokens} new tokens max, lr {base.lr:g}, torch threads "
          f"{args.threads or 'default'}", flush=True)
    started = time.perf_counter()
    rows: list[tuple[Setup, dict[str, Summary]]] = []
    trials: list[Trial] = []
    with tempfile.TemporaryDirectory(prefix="grpo-vs-trl-") as scratch:
        for kl_coef in kl_values:
            setup = attrs.evolve(base, kl_coef=kl_coef)
            results = run_configuration(setup, args.trials, Path(scratch))
            rows.append((setup, {side: summarize(results[side]) for side in SIDES}))
            trials += [trial for side in SIDES for trial in results[side]]
    print_table(rows)
    versions = {name: version for trial in trials for name, version in trial.versions.items()}
    print("step s, rollout s, update s: medians over steps 2..N of all trials; rollout s: ours = the rollout "
          "(perf/rollout_s), TRL = _generate_and_score_completions (generation, reward, ref log-probs when KL is on); "
          "update s: the rest of the step (loss, backward, optimizer step, logging)")
    print("peak RSS: ru_maxrss of each child process (wait4), max over trials; over imports: peak minus the RSS "
          "after importing torch, Qwen2 and the side's trainer (median)")
    print(f"{', '.join(f'{name} {version}' for name, version in sorted(versions.items()))}; torch threads per "
          f"child: {', '.join(map(str, sorted({trial.threads for trial in trials})))}; "
          f"total {time.perf_counter() - started:.0f} s")
    for setup, summaries in rows:  # each half as a speed ratio: TRL's seconds / ours, above 1 we are faster
        ours, trl = summaries["ours"], summaries["trl"]
        print(f"{setup.label}: rollout_speed_ratio_vs_trl {trl.rollout_s / ours.rollout_s:.2f}, "
              f"update_speed_ratio_vs_trl {trl.update_s / ours.update_s:.2f}")
    headline = rows[0]
    ratio = headline[1]["ours"].samples_per_s / headline[1]["trl"].samples_per_s
    print(f"samples_per_s_ratio_vs_trl: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
