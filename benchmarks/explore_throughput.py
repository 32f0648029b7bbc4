"""Exploration throughput: our work queue against the ideal bound and a batch-barrier schedule.

    python benchmarks/explore_throughput.py [--workers 32] [--seeds 64] [--n 4] [--steps 3]

Explorations are the real thing on loopback: the `random` explorer (LLM mode) in gymnasium
FrozenLake, then the `llm` summarizer, both through `OpenAIChat` and the real `openai` client,
against the local OpenAI-compatible stand-in server (a hosted LLM cannot be reached here), which
runs in its own process and adds a heavy-tailed latency to every call (lognormal, mean 100 ms).

Measured in the same run, with the same components:
- `queue`: `explore_seeds` (a work queue, `workers` explorations at once, no barriers), writing
  the checkpointed cache as it goes;
- `ideal`: `workers / mean exploration time` (the mean measured in the queue run), the rate a
  schedule that never leaves a worker idle would reach;
- `barrier`: AgentEvolver's schedule: batches of `workers` distinct seeds, each batch waiting for
  its slowest exploration, the results of a batch written to the same kind of cache.
Targets: queue >= 85% of ideal and >= 1.3x the barrier schedule. The last line is
`efficiency_vs_ideal: 0.XX`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

SUMMARY = ('<task>{"query": "Reach row 1, column 1 of this map.", "confidence": 0.8, '
           '"action_sequence": ["right", "down"]}</task>')
MOVES = ("left", "right", "up", "down")


def respond(body: dict) -> str:
    """The stand-in LLM: a move for the explorer, a `<task>` block for the summarizer."""
    text = json.dumps(body.get("messages", []))
    return SUMMARY if "<task>" in text else random.choice(MOVES)


def serve(mean_latency: float, sigma: float) -> None:
    """Child process: run the stand-in server until stdin closes; print its base URL."""
    from beyondagent_core.testing.openai_server import ScriptedOpenAIServer, lognormal_latency

    with ScriptedOpenAIServer(respond, latency=lognormal_latency(mean=mean_latency, sigma=sigma, seed=1)) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


class TimedExecutor:
    """Wraps an executor and records how long each exploration took."""

    def __init__(self, inner):
        self.inner = inner
        self.seconds: list[float] = []

    async def explore(self, seed, known, index):
        started = time.perf_counter()
        try:
            return await self.inner.explore(seed, known, index)
        finally:
            self.seconds.append(time.perf_counter() - started)

    async def tallies(self):
        return await self.inner.tallies()

    async def aclose(self) -> None:
        pass


def components(base_url: str, steps: int):
    from beyondagent_plugin_gym.config import FrozenLakeConfig
    from beyondagent_plugin_gym.frozenlake import FrozenLake
    from beyondagent_plugin_llm.summarizer import LLMSummarizer, LLMSummarizerConfig
    from beyondagent_plugin_random_explorer.config import RandomExplorerConfig
    from beyondagent_plugin_random_explorer.explorer import RandomExplorer

    from beyondagent_core.envs.local import LocalEnvOpener
    from beyondagent_core.exploration.executor import LocalExecutor
    from beyondagent_core.llm import LLMConfig, OpenAIChat

    llm = OpenAIChat(LLMConfig(model="stand-in", base_url=base_url, timeout=30.0, max_concurrency=256))
    explorer = RandomExplorer(RandomExplorerConfig(mode="llm", max_explore_step=steps))
    opener = LocalEnvOpener(lambda: FrozenLake(FrozenLakeConfig(max_steps=steps + 1)))
    return LocalExecutor(explorer, LLMSummarizer(LLMSummarizerConfig()), opener, llm), llm


def seeds_for(count: int):
    from beyondagent_core.types import Task

    return [Task(task_id=f"frozenlake-train-{k}", env="frozenlake", metadata={"seed": k, "size": 4})
            for k in range(count)]


async def queue_run(executor, seeds: Sequence, n: int, workers: int, cache: Path):
    from beyondagent_core.exploration.engine import explore_seeds

    return await explore_seeds(seeds, n=n, workers=workers, filters=[], cache_path=cache, executor=executor)


async def barrier_run(executor, seeds: Sequence, n: int, workers: int, cache: Path) -> None:
    """AgentEvolver's schedule: for each round, batches of `workers` distinct seeds, gathered."""
    from beyondagent_core.exploration.checkpoint import Checkpoint

    checkpoint = Checkpoint.open(cache, "barrier", force=True)
    known: dict[str, list] = {seed.task_id: [] for seed in seeds}
    for i in range(n):
        for start in range(0, len(seeds), workers):
            batch = seeds[start:start + workers]
            results = await asyncio.gather(*(executor.explore(seed, known[seed.task_id], i) for seed in batch),
                                           return_exceptions=True)
            for seed, found in zip(batch, results, strict=True):
                found = [] if isinstance(found, BaseException) else found
                checkpoint.record(f"{seed.task_id}#{i}", found)
                known[seed.task_id].extend(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--seeds", type=int, default=64)
    parser.add_argument("--n", type=int, default=4, help="explorations per seed")
    parser.add_argument("--steps", type=int, default=3, help="explorer steps (LLM calls) per exploration")
    parser.add_argument("--latency", type=float, default=0.1, help="mean LLM latency, seconds")
    parser.add_argument("--sigma", type=float, default=1.0, help="lognormal sigma of the latency (tail)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.latency, args.sigma)
        return

    from beyondagent_core.logs import configure_logging

    configure_logging(verbose=False, level="warning")
    server = subprocess.Popen([sys.executable, __file__, "--serve", "--latency", str(args.latency),
                               "--sigma", str(args.sigma)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        seeds = seeds_for(args.seeds)
        total = args.seeds * args.n
        print(f"{total} explorations ({args.seeds} seeds x {args.n}), {args.workers} workers, "
              f"{args.steps} explorer calls + 1 summarizer call each, LLM latency lognormal mean "
              f"{args.latency * 1000:.0f} ms (sigma {args.sigma})")
        with tempfile.TemporaryDirectory() as tmp:
            executor, llm = components(base_url, args.steps)
            asyncio.run(barrier_run(executor, seeds[: args.workers], 1, args.workers, Path(tmp) / "warm.jsonl"))

            timed = TimedExecutor(executor)
            started = time.perf_counter()
            result = asyncio.run(queue_run(timed, seeds, args.n, args.workers, Path(tmp) / "queue.jsonl"))
            queue_s = time.perf_counter() - started

            started = time.perf_counter()
            asyncio.run(barrier_run(executor, seeds, args.n, args.workers, Path(tmp) / "barrier.jsonl"))
            barrier_s = time.perf_counter() - started
    finally:
        server.stdin.close()
        server.wait(timeout=30)

    mean = statistics.fmean(timed.seconds)
    queue_rate, barrier_rate, ideal_rate = total / queue_s, total / barrier_s, args.workers / mean
    print(f"exploration time: mean {mean * 1000:.0f} ms, p50 {statistics.median(timed.seconds) * 1000:.0f} ms, "
          f"max {max(timed.seconds) * 1000:.0f} ms; failures {result.failures}; kept {len(result.tasks)}")
    print(f"llm usage: {json.dumps(llm.usage)}")
    print(f"queue:   {queue_rate:6.1f} explorations/s ({queue_s:.1f} s)")
    print(f"barrier: {barrier_rate:6.1f} explorations/s ({barrier_s:.1f} s)")
    print(f"ideal:   {ideal_rate:6.1f} explorations/s (workers / mean exploration time)")
    print(f"speedup_vs_barrier: {queue_rate / barrier_rate:.2f}  (target >= 1.3)")
    print(f"efficiency_vs_ideal: {queue_rate / ideal_rate:.2f}")


if __name__ == "__main__":
    main()
