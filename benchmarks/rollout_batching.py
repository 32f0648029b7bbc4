"""Rollout throughput: concurrent multi-turn episodes batched by the ChatScheduler vs one at a time.

What is measured
    32 multi-turn episodes of the tiny model (`load_policy("tiny")`, CPU) through the torch
    backend's `rollout()`: a fresh env per episode, the react workflow, `PolicyChat` and the
    `ChatScheduler`, the code a training step runs. The env is the direction game with 4 turns
    (`direction_game.DirectionGame`: every episode takes exactly 4 model turns) or, with
    `--env frozenlake`, gymnasium FrozenLake as text (`beyondagent_plugin_gym`, `max_steps` = turns,
    so episodes may end early in a hole or at the goal). Each turn samples at most 16 tokens at
    temperature 1 and stops at `<|im_end|>`.

    batched:       `max_concurrency=32` (scheduler batch 32): while every episode waits for its next
                   turn, their prompts are padded into one KV-cached decoding loop; each episode's
                   KV cache is kept between its turns (only new tokens are prefilled) and a batch's
                   identical prompts are prefilled once (the scheduler's defaults).
    batched_no_kv: the same with `kv_cache_tokens=0`: every turn prefills the whole conversation.
    continuous:    batched with `batching="continuous"`: an episode joins the decode batch as soon
                   as its env answers and leaves it when its turn is done, instead of every turn
                   waiting for the slowest episode's env.
    sequential:    `max_concurrency=1`: one episode after another, every turn a batch of one (with
                   the KV cache kept between turns).

    Both modes run the same tasks with the same seeds (each episode's random generator is seeded
    from the seed and its index, whatever the concurrency), alternately (batched, sequential, ...)
    in this one process, after a warm-up of each that is not counted. Wall time covers the whole
    `rollout()` call: env creation, resets, steps, chat templates and generation.

How to read the output
    Per mode: episodes/s and generated tokens/s (medians over trials), seconds per rollout and how
    many of them the scheduler spent in model batches ("in generation": padding, the forward
    passes, sampling; the rest is envs, workflow, chat templates and asyncio), model batches per
    rollout (sequential: one per turn; batched: about one per turn index) and turns per
    episode. "same tokens" counts the episodes whose sampled tokens are identical in both modes:
    padding changes float rounding in the batched forward, which can flip an unlikely token and
    then the rest of that episode, so most but not necessarily all match.
    `kv_reuse_speedup: X.XX` is batched over batched_no_kv episodes/s, `continuous_vs_lockstep: X.XX`
    continuous over batched episodes/s; the last line,
    `rollout_batching_speedup: X.XX`, is batched episodes/s over sequential episodes/s.

    `--scaling` adds how cost grows with concurrency: episodes/s and tokens/s at 1, 4, 16, 32
    and 64 episodes in flight (each rollout runs that many episodes), with and without KV reuse,
    as a table and a plot (`--plot PATH`, default `docs/img/rollout_scaling.png`).

    python benchmarks/rollout_batching.py                    # 3 trials, direction game (~40 s on 2 cores)
    python benchmarks/rollout_batching.py --env frozenlake   # gymnasium FrozenLake instead
    python benchmarks/rollout_batching.py --quick            # 1 trial
    python benchmarks/rollout_batching.py --scaling          # + the concurrency sweep and its plot
    python benchmarks/rollout_batching.py --step-latency-ms 50   # envs that take 0-50 ms a step

Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent))

from direction_game import DirectionGame, DirectionGameConfig, tasks  # noqa: E402

from beyondagent_core.runtime.episodes import EpisodeRunner  # noqa: E402
from beyondagent_core.runtime.react import ReactConfig, ReactWorkflow  # noqa: E402
from beyondagent_core.runtime.tokens import ChatTemplate  # noqa: E402
from beyondagent_core.types import Task  # noqa: E402

MODES = ("batched", "batched_no_kv", "continuous", "sequential")
ROOT = Path(__file__).resolve().parents[1]
SCALING = (1, 4, 16, 32, 64)
MAX_EPISODE_TOKENS = 1024


@attrs.frozen
class Workload:
    episodes: int = 32
    turns: int = 4
    max_tokens: int = 16
    env: str = "direction"
    step_latency_ms: float = 0.0  # each env step also waits a random 0..this many ms (a slow, uneven env)


class SlowSteps:
    """An env whose steps take a random extra 0..`ms` milliseconds (seeded per env: repeatable)."""

    inline_calls = False  # its steps sleep: worker threads, whatever the wrapped env says

    def __init__(self, env: Any, ms: float, seed: int):
        import random

        self.env, self.ms, self.random = env, ms, random.Random(seed)

    def step(self, action: Any) -> Any:
        time.sleep(self.random.uniform(0, self.ms) / 1000)
        return self.env.step(action)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)


@attrs.define
class Policy:
    """The tiny model, its tokenizer and chat template, and where its turns stop."""

    model: Any
    tokenizer: Any
    template: ChatTemplate
    stop_ids: list[int]


@attrs.define
class Measurement:
    mode: str
    seconds: float
    episodes: int
    tokens: int
    turns: int
    batches: int
    generation_seconds: float
    prefill_tokens: int
    errors: list[str]
    token_ids: list[list[int]]

    @property
    def episodes_per_s(self) -> float:
        return self.episodes / self.seconds

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds


def load_tiny_policy(threads: int, *, model_name: str = "tiny", device: str = "cpu", dtype: str = "float32") -> Policy:
    """The tiny model on the CPU (or `model_name` on `device` in `dtype`, as gpu_rollout.py loads it)."""
    import torch
    from beyondagent_plugin_torch.models import load_policy
    from beyondagent_plugin_torch.trainer import stop_token_ids

    if threads > 0:
        torch.set_num_threads(threads)
    model, tokenizer = load_policy(model_name, device=device, dtype=dtype)
    template = ChatTemplate(tokenizer)
    return Policy(model, tokenizer, template, stop_token_ids(model, tokenizer, template))


def episode_source(workload: Workload) -> tuple[EpisodeRunner, list[Task]]:
    """The runner (react workflow, a fresh env per episode) and the tasks of `workload`."""
    if workload.env == "direction":
        make_env: Any = functools.partial(DirectionGame, DirectionGameConfig(turns=workload.turns))
        episode_tasks = tasks(workload.episodes)
    else:
        from beyondagent_plugin_gym.config import FrozenLakeConfig
        from beyondagent_plugin_gym.frozenlake import FrozenLake

        make_env = functools.partial(FrozenLake, FrozenLakeConfig(max_steps=workload.turns))
        episode_tasks = [Task(task_id=f"frozenlake-{index}") for index in range(workload.episodes)]
    if workload.step_latency_ms:
        import itertools

        envs, plain = itertools.count(), make_env
        make_env = lambda: SlowSteps(plain(), workload.step_latency_ms, next(envs))  # noqa: E731
    runner = EpisodeRunner(workflow=ReactWorkflow(ReactConfig(max_turns=workload.turns)), make_env=make_env)
    return runner, episode_tasks


def measure(policy: Policy, runner: EpisodeRunner, episode_tasks: list[Task], *, mode: str, max_tokens: int,
            seed: tuple[object, ...], concurrency: int | None = None, scheduler: Any = None) -> Measurement:
    """One `rollout()` of every task, all in flight (batched) or one at a time (sequential);
    `concurrency` overrides how many are in flight; `scheduler`, when given, is used as it is
    (a compiled one is kept across trials)."""
    from beyondagent_plugin_torch.generation import DEFAULT_KV_CACHE_TOKENS, ChatScheduler, Sampling
    from beyondagent_plugin_torch.rollout import rollout

    if concurrency is None:
        concurrency = 1 if mode == "sequential" else len(episode_tasks)
    kv_cache_tokens = 0 if mode == "batched_no_kv" else DEFAULT_KV_CACHE_TOKENS
    if scheduler is None:
        scheduler = ChatScheduler(policy.model, eos_token_ids=policy.stop_ids,
                                  pad_token_id=policy.tokenizer.pad_token_id, max_batch_size=concurrency,
                                  kv_cache_tokens=kv_cache_tokens,
                                  batching="continuous" if mode == "continuous" else "lockstep")  # as the trainer does
    stats_before = (scheduler.stats.batches, scheduler.stats.seconds, scheduler.kv.stats.prefill_tokens)
    started = time.perf_counter()
    episodes = asyncio.run(rollout(
        list(enumerate(episode_tasks)), runner=runner, scheduler=scheduler, template=policy.template,
        sampling=Sampling(temperature=1.0, top_p=1.0, max_tokens=max_tokens), max_episode_tokens=MAX_EPISODE_TOKENS,
        max_concurrency=concurrency, seed=seed))
    seconds = time.perf_counter() - started
    return Measurement(
        mode=mode, seconds=seconds, episodes=len(episodes),
        tokens=sum(episode.sequence.generated_tokens for episode in episodes),
        turns=sum(episode.sequence.model_turns for episode in episodes),
        batches=scheduler.stats.batches - stats_before[0], generation_seconds=scheduler.stats.seconds - stats_before[1],
        prefill_tokens=scheduler.kv.stats.prefill_tokens - stats_before[2],
        errors=[episode.trajectory.error for episode in episodes if episode.trajectory.error],
        token_ids=[[token for token, trained in zip(episode.sequence.input_ids, episode.sequence.loss_mask) if trained]
                   for episode in episodes])


def run_trials(policy: Policy, workload: Workload, trials: int) -> dict[str, list[Measurement]]:
    runner, episode_tasks = episode_source(workload)
    # Warm-up, not counted: first calls, the allocator at full batch size.
    measure(policy, runner, episode_tasks, mode="batched", max_tokens=workload.max_tokens, seed=("warm-up",))
    measure(policy, runner, episode_tasks[:2], mode="sequential", max_tokens=workload.max_tokens, seed=("warm-up",))
    results: dict[str, list[Measurement]] = {mode: [] for mode in MODES}
    for trial in range(trials):
        for mode in MODES:
            result = measure(policy, runner, episode_tasks, mode=mode, max_tokens=workload.max_tokens,
                             seed=("rollout-bench", trial))
            if result.errors:
                raise RuntimeError(f"{len(result.errors)} {mode} episodes failed; first: {result.errors[0]}")
            results[mode].append(result)
            print(f"  trial {trial + 1}/{trials} {mode:>10}: {result.episodes_per_s:7.2f} episodes/s, "
                  f"{result.tokens_per_s:8.1f} tokens/s, {result.seconds:6.2f} s", flush=True)
    return results


def same_tokens(results: dict[str, list[Measurement]]) -> tuple[int, int]:
    """Episodes (over all trials) whose sampled tokens match between the two modes."""
    pairs = zip(results["batched"], results["sequential"])
    matches = [a == b for batched, sequential in pairs for a, b in zip(batched.token_ids, sequential.token_ids)]
    return sum(matches), len(matches)


def print_table(results: dict[str, list[Measurement]], workload: Workload) -> float:
    from rich.console import Console
    from rich.table import Table

    latency = f", steps +0-{workload.step_latency_ms:g} ms" if workload.step_latency_ms else ""
    table = Table(title=f"Rollout of {workload.episodes} episodes x {workload.turns} turns ({workload.env}{latency}), "
                        f"tiny Qwen2 on CPU")
    for name in ("mode", "max_concurrency", "episodes/s", "tokens/s", "s per rollout", "in generation",
                 "model batches", "turns/episode", "tokens/turn", "prefilled tokens"):
        table.add_column(name, justify="left" if name == "mode" else "right")
    rates = {}
    for mode in MODES:
        runs = results[mode]
        rates[mode] = statistics.median(run.episodes_per_s for run in runs)
        table.add_row(mode, str(1 if mode == "sequential" else workload.episodes), f"{rates[mode]:.2f}",
                      f"{statistics.median(run.tokens_per_s for run in runs):.1f}",
                      f"{statistics.median(run.seconds for run in runs):.2f}",
                      f"{statistics.median(run.generation_seconds for run in runs):.2f}",
                      f"{statistics.median(run.batches for run in runs):.0f}",
                      f"{statistics.fmean(run.turns / run.episodes for run in runs):.2f}",
                      f"{statistics.fmean(run.tokens / run.turns for run in runs):.1f}",
                      f"{statistics.median(run.prefill_tokens for run in runs):.0f}")
    Console(width=160).print(table)
    return rates


def run_scaling(policy: Policy, workload: Workload, trials: int) -> dict[tuple[int, str], list[Measurement]]:
    """Rollouts of `concurrency` episodes, all in flight, at each concurrency of SCALING, KV reuse on/off."""
    runner, episode_tasks = episode_source(attrs.evolve(workload, episodes=max(SCALING)))
    results: dict[tuple[int, str], list[Measurement]] = {}
    for trial in range(trials):
        for concurrency in SCALING:
            for mode in ("batched", "batched_no_kv"):
                result = measure(policy, runner, episode_tasks[:concurrency], mode=mode,
                                 max_tokens=workload.max_tokens, seed=("rollout-scaling", trial))
                results.setdefault((concurrency, mode), []).append(result)
        print(f"  scaling trial {trial + 1}/{trials} done", flush=True)
    return results


def print_scaling(results: dict[tuple[int, str], list[Measurement]], workload: Workload, plot: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"How rollout cost grows with episodes in flight ({workload.env}, {workload.turns} turns, "
                        f"<= {workload.max_tokens} tokens per turn)")
    for name in ("in flight", "episodes/s (KV reuse)", "episodes/s (re-prefill)", "tokens/s (KV reuse)",
                 "tokens/s (re-prefill)", "prefilled tokens (KV reuse / re-prefill)", "reuse speedup"):
        table.add_column(name, justify="right")
    rows = {}
    for concurrency in SCALING:
        kv, full = results[(concurrency, "batched")], results[(concurrency, "batched_no_kv")]
        rows[concurrency] = [statistics.median(run.episodes_per_s for run in kv),
                             statistics.median(run.episodes_per_s for run in full),
                             statistics.median(run.tokens_per_s for run in kv),
                             statistics.median(run.tokens_per_s for run in full)]
        table.add_row(str(concurrency), *(f"{value:.2f}" for value in rows[concurrency][:2]),
                      *(f"{value:.1f}" for value in rows[concurrency][2:]),
                      f"{kv[0].prefill_tokens} / {full[0].prefill_tokens}",
                      f"{rows[concurrency][0] / rows[concurrency][1]:.2f}x")
    Console(width=160).print(table)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (episodes_axis, tokens_axis) = plt.subplots(1, 2, figsize=(10, 4))
    for column, label, style in ((0, "KV cache kept across turns", "o-"), (1, "every turn re-prefilled", "s--")):
        episodes_axis.plot(SCALING, [rows[c][column] for c in SCALING], style, label=label)
        tokens_axis.plot(SCALING, [rows[c][column + 2] for c in SCALING], style, label=label)
    for axis, name in ((episodes_axis, "episodes/s"), (tokens_axis, "generated tokens/s")):
        axis.set_xscale("log", base=2)
        axis.set_xticks(SCALING, [str(c) for c in SCALING])
        axis.set_xlabel("episodes in flight (one decode batch)")
        axis.set_ylabel(name)
        axis.grid(alpha=0.3)
    episodes_axis.legend()
    figure.suptitle(f"Rollout throughput, tiny Qwen2 on CPU ({workload.env}, {workload.turns} turns)")
    figure.tight_layout()
    plot.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(plot, dpi=110)
    print(f"plot: {plot}")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=32, help="episodes per rollout (batched: all in flight)")
    parser.add_argument("--turns", type=int, default=4, help="model turns per episode (FrozenLake: max_steps)")
    parser.add_argument("--max-tokens", type=int, default=16, help="new tokens per turn at most")
    parser.add_argument("--env", choices=("direction", "frozenlake"), default="direction")
    parser.add_argument("--step-latency-ms", type=float, default=0.0,
                        help="each env step also waits a random 0..MS ms: an uneven env, where continuous batching "
                             "lets fast episodes go on")
    parser.add_argument("--trials", type=int, default=None, help="trials per mode (default 3, quick 1)")
    parser.add_argument("--quick", action="store_true", help="one trial")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--scaling", action="store_true", help="also sweep 1-64 episodes in flight, KV reuse on/off")
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "img" / "rollout_scaling.png",
                        help="where --scaling draws its plot")
    args = parser.parse_args(argv)
    args.trials = args.trials or (1 if args.quick else 3)
    if min(args.episodes, args.turns, args.max_tokens, args.trials) < 1:
        parser.error("--episodes, --turns, --max-tokens and --trials must be >= 1")
    return args


def main(argv: list[str]) -> int:
    import torch

    args = parse_args(argv)
    workload = Workload(episodes=args.episodes, turns=args.turns, max_tokens=args.max_tokens, env=args.env,
                        step_latency_ms=args.step_latency_ms)
    started = time.perf_counter()
    policy = load_tiny_policy(args.threads)
    print(f"rollout batching: {workload.episodes} episodes x {workload.turns} turns of {workload.env}, "
          f"<= {workload.max_tokens} tokens per turn, {args.trials} trials, torch threads {torch.get_num_threads()}",
          flush=True)
    results = run_trials(policy, workload, args.trials)
    rates = print_table(results, workload)
    if args.scaling:
        print_scaling(run_scaling(policy, workload, args.trials), workload, args.plot)
    matched, total = same_tokens(results)
    print(f"same tokens in batched and sequential: {matched}/{total} episodes; "
          f"total {time.perf_counter() - started:.0f} s")
    print(f"kv_reuse_speedup: {rates['batched'] / rates['batched_no_kv']:.2f}")
    print(f"continuous_vs_lockstep: {rates['continuous'] / rates['batched']:.2f}")
    print(f"rollout_batching_speedup: {rates['batched'] / rates['sequential']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
