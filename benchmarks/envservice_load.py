"""Load and soak test of the environment service on loopback.

Load (default): a server process hosting a trivial env, and 64 concurrent clients (our
`RemoteEnv` over one pooled httpx client per process) each running episodes of create, 20 steps,
evaluate, release for 30 s. Prints steps/s, per-call latency p50/p99, errors, and the live
instances left after the run (must be 0), then `steps_per_s: N`. The same load then runs
against the peer, AgentEvolver's design (`ray-per-episode`: a fresh whole-CPU Ray actor per
episode, killed on release), in this invocation, since absolute figures drift with the
machine's load; the last line is `steps_per_s_ratio_vs_actor_per_episode: X` (`--no-peer`
skips it).

Soak (`--soak`): 10,000 create/release cycles with clients killed mid-episode: some episodes
are abandoned without a release (as a crashed client leaves them), and client processes are
SIGKILLed mid-episode; then, once the server's TTL has passed, no instance may be left.

    python benchmarks/envservice_load.py                       # 64 clients, 30 s
    python benchmarks/envservice_load.py --clients 64 --seconds 10 --client-procs 2
    python benchmarks/envservice_load.py --soak                # 10,000 cycles, TTL 3 s
    python benchmarks/envservice_load.py --instances ray       # envs in pooled Ray actors
    python benchmarks/envservice_load.py --instances ray-per-episode   # the peer: AgentEvolver's way

The server runs in its own process (as `beyondagent env serve` does: same app, same uvicorn
settings), the clients in one or more others. On a machine shared with other work the figures
are noisy: the script prints the load average before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import multiprocessing as mp
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from beyondagent_core import EnvReset, EnvStep, Reward, Task  # noqa: E402


class TrivialEnv:
    """The cheapest env: echoes, counts steps, scores the count."""

    def __init__(self) -> None:
        self.steps = 0

    def reset(self, task: Task) -> EnvReset:
        self.steps = 0
        return EnvReset(messages=[{"role": "user", "content": f"task {task.task_id}"}])

    def step(self, action: dict[str, Any]) -> EnvStep:
        self.steps += 1
        return EnvStep(observation=[{"role": "user", "content": "ok"}], reward=0.0, terminated=False)

    def evaluate(self) -> Reward:
        return Reward(score=float(self.steps))

    def close(self) -> None:
        pass


# --- the server process ---------------------------------------------------------------------------


class ActorPerEpisodeHost:
    """The peer: AgentEvolver's way, a fresh Ray actor (one whole CPU) per episode, killed on release."""

    kind = "ray-per-episode"

    def __init__(self) -> None:
        import ray

        from beyondagent_plugin_envservice.ray_instances import EnvHostActor

        self.ray = ray
        self.actor_cls = ray.remote(EnvHostActor).options(num_cpus=1)

    async def open(self) -> Any:
        actor = self.actor_cls.remote(TrivialEnv)
        await actor.open.remote("env")
        return actor

    async def call(self, actor: Any, method: str, args: tuple) -> Any:
        return await actor.call.remote("env", method, args)

    async def has_method(self, actor: Any, method: str) -> bool:
        return await actor.has_method.remote("env", method)

    async def close(self, actor: Any) -> None:
        await actor.close.remote("env")
        self.ray.kill(actor)

    def abandon(self, actor: Any) -> None:
        self.ray.kill(actor)

    async def task_ids(self, split: str) -> list[str]:
        return []

    async def shutdown(self) -> None:
        pass


def run_server(port_file: str, ttl: float, max_instances: int, instances: str) -> None:
    from beyondagent_plugin_envservice.instances import InstancePool, PoolLimits, ThreadHost
    from beyondagent_core.serving import bind, create_app, serve, url_of
    from beyondagent_core.logs import configure_logging

    configure_logging(level="warning")
    if instances.startswith("ray"):
        import ray

        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    if instances == "ray":
        from beyondagent_plugin_envservice.ray_instances import RayHost, RayOptions

        host: Any = RayHost(TrivialEnv, RayOptions(num_cpus=0.25, envs_per_actor=8))
    elif instances == "ray-per-episode":
        host = ActorPerEpisodeHost()
    else:
        host = ThreadHost(TrivialEnv, threads=4, inline=instances == "inline")
    pool = InstancePool(host, PoolLimits(ttl=ttl, max_instances=max_instances), env_name="trivial")
    sock = bind("127.0.0.1", 0)
    Path(port_file).write_text(url_of(sock))
    serve(create_app(pool), sock, graceful_s=5)


def start_server(ttl: float, max_instances: int, tmp: Path, instances: str = "thread") -> tuple[subprocess.Popen, str]:
    port_file = tmp / "envservice_url"
    port_file.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, __file__, "--_server", str(port_file), str(ttl), str(max_instances),
                             instances],
                            stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not port_file.exists() or not port_file.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the server did not start")
        time.sleep(0.05)
    url = port_file.read_text()
    import httpx

    while True:
        try:
            if httpx.get(f"{url}/healthz").status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.05)


def stop_server(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


# --- load -------------------------------------------------------------------------------------------


async def load_clients(url: str, clients: int, seconds: float, steps: int) -> dict[str, Any]:
    from beyondagent_plugin_envservice.client import EnvServiceClient

    client = EnvServiceClient(url)
    latencies: list[float] = []
    done = {"steps": 0, "episodes": 0, "errors": 0}
    deadline = time.perf_counter() + seconds
    action = {"role": "assistant", "content": "Action: go"}

    async def timed(coro: Any) -> Any:
        started = time.perf_counter()
        result = await coro
        latencies.append(time.perf_counter() - started)
        return result

    async def worker(index: int) -> None:
        episode = 0
        while time.perf_counter() < deadline:
            try:
                async with client.env("trivial") as env:
                    await timed(env.reset(Task(task_id=f"c{index}-e{episode}")))
                    for _ in range(steps):
                        await timed(env.step(action))
                        done["steps"] += 1
                    await timed(env.evaluate())
                done["episodes"] += 1
            except Exception as exc:  # noqa: BLE001 - counted, the load goes on
                done["errors"] += 1
                print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
            episode += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(clients)))
    elapsed = time.perf_counter() - started
    await client.aclose()
    return {**done, "seconds": elapsed, "latencies": latencies}


def load_process(url: str, clients: int, seconds: float, steps: int, queue: Any) -> None:
    try:
        import uvloop

        result = uvloop.run(load_clients(url, clients, seconds, steps))
    except ImportError:
        result = asyncio.run(load_clients(url, clients, seconds, steps))
    queue.put(result)


def load_once(args: argparse.Namespace, tmp: Path, instances: str) -> float:
    """The load against a server hosting envs as `instances`; prints its figures, returns steps/s."""
    proc, url = start_server(ttl=600, max_instances=args.clients * 2, tmp=tmp, instances=instances)
    try:
        print(f"server {url} (--instances {instances}); {args.clients} clients in {args.client_procs} process(es), "
              f"{args.seconds:g} s, {args.steps} steps per episode; load average before: {_load()}")
        queue: Any = mp.get_context("fork").Queue()
        shares = [args.clients // args.client_procs + (i < args.clients % args.client_procs)
                  for i in range(args.client_procs)]
        workers = [mp.get_context("fork").Process(target=load_process, args=(url, n, args.seconds, args.steps, queue))
                   for n in shares]
        for worker in workers:
            worker.start()
        results = [queue.get() for _ in workers]
        for worker in workers:
            worker.join()
        stats = _stats(url)
    finally:
        stop_server(proc)
    steps = sum(r["steps"] for r in results)
    seconds = max(r["seconds"] for r in results)
    latencies = sorted(x for r in results for x in r["latencies"])
    errors = sum(r["errors"] for r in results)
    p50 = latencies[len(latencies) // 2] * 1000 if latencies else float("nan")
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000 if latencies else float("nan")
    mean = statistics.fmean(latencies) * 1000 if latencies else float("nan")
    print(f"  episodes: {sum(r['episodes'] for r in results)}   calls: {len(latencies)}   errors: {errors}")
    print(f"  latency per call: p50 {p50:.2f} ms   p99 {p99:.2f} ms   mean {mean:.2f} ms")
    print(f"  server: created {stats['created']} released {stats['released']} reaped {stats['reaped']} "
          f"errors {stats['errors']}")
    print(f"  live instances after the run: {stats['live']}")
    print(f"  load average after: {_load()}")
    print(f"  steps/s: {steps / seconds:.0f}")
    return steps / seconds


def run_load(args: argparse.Namespace, tmp: Path) -> None:
    ours = load_once(args, tmp, args.instances)
    print(f"steps_per_s: {ours:.0f}")
    if args.no_peer:
        return
    peer = load_once(args, tmp, "ray-per-episode")
    print(f"steps_per_s_ratio_vs_actor_per_episode: {ours / peer:.2f}")


# --- soak -------------------------------------------------------------------------------------------


async def soak_cycles(url: str, cycles: int, abandon_every: int) -> dict[str, int]:
    """Create/step/release cycles; every `abandon_every`-th episode is left without a release."""
    import httpx

    from beyondagent_plugin_envservice.client import EnvServiceClient

    client = EnvServiceClient(url)
    counts = {"cycles": 0, "abandoned": 0, "errors": 0}
    next_cycle = iter(range(cycles))

    async def worker() -> None:
        async with httpx.AsyncClient() as raw:
            for cycle in next_cycle:
                try:
                    if cycle % abandon_every == 0:  # a client that dies mid-episode: no release
                        body = {"env_type": "trivial", "task_id": f"s{cycle}", "instance_id": None,
                                "messages": {}, "params": {}}
                        reply = (await raw.post(f"{url}/create", json=body)).json()
                        body.update(instance_id=reply["data"]["info"]["instance_id"],
                                    messages={"role": "assistant", "content": "x"})
                        await raw.post(f"{url}/step", json=body)
                        counts["abandoned"] += 1
                    else:
                        async with client.env("trivial") as env:
                            await env.reset(Task(task_id=f"s{cycle}"))
                            await env.step({"role": "assistant", "content": "x"})
                except Exception as exc:  # noqa: BLE001
                    counts["errors"] += 1
                    print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
                counts["cycles"] += 1

    await asyncio.gather(*(worker() for _ in range(32)))
    await client.aclose()
    return counts


def killed_client(url: str) -> None:
    """A client process that opens episodes and never finishes them (it is SIGKILLed)."""
    async def run() -> None:
        from beyondagent_plugin_envservice.client import EnvServiceClient

        client = EnvServiceClient(url)
        envs = []
        for i in itertools.count():  # until SIGKILL, which lands mid-episode
            env = client.env("trivial")
            await env.reset(Task(task_id=f"killed-{os.getpid()}-{i}"))
            await env.step({"role": "assistant", "content": "x"})
            envs.append(env)
            await asyncio.sleep(0.005)

    asyncio.run(run())


def run_soak(args: argparse.Namespace, tmp: Path) -> None:
    ttl = args.ttl
    proc, url = start_server(ttl=ttl, max_instances=100_000, tmp=tmp)
    try:
        print(f"server {url}; soak of {args.cycles} cycles, TTL {ttl:g} s; load average before: {_load()}")
        started = time.perf_counter()
        victims = [mp.get_context("fork").Process(target=killed_client, args=(url,)) for _ in range(4)]
        for victim in victims:
            victim.start()
        counts = asyncio.run(soak_cycles(url, args.cycles, abandon_every=10))
        for victim in victims:  # killed mid-episode, whatever they were doing
            os.kill(victim.pid, signal.SIGKILL)
            victim.join()
        before = _stats(url)
        print(f"cycles: {counts['cycles']} (abandoned without release: {counts['abandoned']}) "
              f"errors: {counts['errors']} in {time.perf_counter() - started:.1f} s")
        print(f"live right after (abandoned + killed clients' episodes): {before['live']}")
        deadline = time.monotonic() + ttl * 4 + 30
        while (stats := _stats(url))["live"] and time.monotonic() < deadline:
            time.sleep(ttl / 4)
        print(f"after the TTL: live {stats['live']}, reaped {stats['reaped']}, released {stats['released']}, "
              f"created {stats['created']}")
    finally:
        stop_server(proc)
    print(f"soak_live_after_ttl: {stats['live']}")


def _stats(url: str) -> dict[str, Any]:
    import httpx

    return httpx.get(f"{url}/stats").json()["data"]


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--_server":
        run_server(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--client-procs", type=int, default=1, help="client processes sharing the clients")
    parser.add_argument("--instances", choices=("thread", "inline", "ray", "ray-per-episode"), default="thread",
                        help="where the server runs envs: worker threads (default), inline on its loop, pooled Ray "
                        "actors, or the peer: a fresh whole-CPU Ray actor per episode, as AgentEvolver does")
    parser.add_argument("--no-peer", action="store_true",
                        help="skip the second load against the peer (a whole-CPU Ray actor per episode)")
    parser.add_argument("--soak", action="store_true", help="the soak instead of the load test")
    parser.add_argument("--cycles", type=int, default=10_000)
    parser.add_argument("--ttl", type=float, default=3.0, help="the server's TTL in the soak")
    args = parser.parse_args()
    random.seed(0)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (run_soak if args.soak else run_load)(args, Path(tmp))


if __name__ == "__main__":
    main()
