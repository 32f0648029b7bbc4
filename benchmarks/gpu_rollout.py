"""Rollout speed against HF `generate` on one device: our multi-turn modes and the transformers baseline.

What is measured
    `--episodes` episodes of the direction game (`direction_game.py`, every episode exactly `--turns`
    model turns, at most `--max-tokens` tokens a turn, temperature 1, stopping at end-of-turn) on
    `--device`, the same prompts, model and sampling on every side, in one process:

    ours_kv:          the torch backend's `rollout()` (react workflow, `PolicyChat`, `ChatScheduler`),
                      lockstep batching, each episode's KV cache kept between its turns (the default);
    ours_reprefill:   the same, every turn prefilling the whole conversation (`kv_cache_tokens=0`);
    ours_continuous:  episodes join and leave the decode batch as their envs answer (`batching:
                      continuous`), here with uneven envs (`--step-latency-ms`, also given to HF);
    ours_slots:       `kv_layout: slots` (slots.py): one preallocated KV cache, a slot per episode, every
                      forward over all slots at fixed shapes, no cache copied between turns;
    ours_slots_compiled: the same with `compile_decode` (the decode step compiled once, before the
                      trials: torch.compile "reduce-overhead", CUDA graphs on a GPU);
    hf_eager:         transformers' `model.generate` in eager mode, all episodes' prompts left-padded into
                      one batch each turn (the conversation re-rendered with the chat template and
                      re-prefilled every turn, as a plain HF rollout loop does), the same envs stepped in between.

    The model: `--model` (`tiny` on CPU by default, `smollm2-135m-instruct` on CUDA), loaded in
    `--dtype` (bf16 on CUDA, as the trainer's rollout copy; float32 on CPU). A warm-up of each side
    is not counted; then `--trials` alternating trials.

How to read the output
    Generated tokens/s per side (median), seconds per rollout, and the ratios the issue's targets are
    stated in: `ours_vs_hf_eager` (ours_kv over hf_eager, target >= 3 on an H100/H200 with SmolLM2 at
    64 x 4), `kv_reuse_vs_reprefill` (target >= 1.5) and `continuous_vs_lockstep` (continuous over
    lockstep, both with the uneven envs; target >= 1). The last line is `ours_vs_hf_eager: X.XX`.

    python benchmarks/gpu_rollout.py                       # CPU, tiny, 16 x 4 (a quick check)
    python benchmarks/gpu_rollout.py --device cuda         # SmolLM2, 64 x 4 (under 5 minutes on one GPU)

Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from direction_game import DirectionGame, DirectionGameConfig, tasks  # noqa: E402
from rollout_batching import Policy, Workload, episode_source, load_tiny_policy, measure  # noqa: E402

MODES = ("ours_kv", "ours_reprefill", "ours_continuous", "ours_slots", "ours_slots_compiled", "hf_eager")


def synchronize(policy: Policy) -> None:
    import torch

    if policy.model.device.type == "cuda":
        torch.cuda.synchronize(policy.model.device)


def hf_eager_rollout(policy: Policy, workload: Workload, seed: int) -> tuple[float, int]:
    """Every episode's turns through `model.generate`: one left-padded batch a turn, the whole
    conversation re-prefilled; the direction game stepped with each reply. Seconds and tokens."""
    import torch

    tokenizer, model = policy.tokenizer, policy.model
    envs = [DirectionGame(DirectionGameConfig(turns=workload.turns)) for _ in range(workload.episodes)]
    conversations = [list(env.reset(task).messages) for env, task in zip(envs, tasks(workload.episodes))]
    torch.manual_seed(seed)
    generated = 0
    synchronize(policy)
    started = time.perf_counter()
    for _ in range(workload.turns):
        texts = [tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
                 for conversation in conversations]
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
        with torch.no_grad():
            out = model.generate(**batch, max_new_tokens=workload.max_tokens, do_sample=True, temperature=1.0,
                                 top_p=1.0, top_k=0, eos_token_id=list(policy.stop_ids),
                                 pad_token_id=tokenizer.pad_token_id)
        replies = out[:, batch["input_ids"].shape[1]:]
        for conversation, env, reply in zip(conversations, envs, replies.tolist()):
            ids = [token for token in reply if token != tokenizer.pad_token_id]
            stop = next((i for i, token in enumerate(ids) if token in policy.stop_ids), None)
            ids = ids[:stop] if stop is not None else ids
            generated += len(ids) + (stop is not None)
            text = tokenizer.decode(ids, skip_special_tokens=True)
            conversation.append({"role": "assistant", "content": text})
            conversation.extend(env.step({"role": "assistant", "content": text}).observation)
    synchronize(policy)
    return time.perf_counter() - started, generated


_SLOT_SCHEDULERS: dict[str, object] = {}


def slot_scheduler(policy: Policy, workload: Workload, compiled: bool) -> object:
    """One slots scheduler per kind for the whole run (a compiled one is compiled once, at warm-up)."""
    key = "compiled" if compiled else "eager"
    if key not in _SLOT_SCHEDULERS:
        from beyondagent_plugin_torch.slots import SlotScheduler

        from rollout_batching import MAX_EPISODE_TOKENS

        _SLOT_SCHEDULERS[key] = SlotScheduler(
            policy.model, eos_token_ids=policy.stop_ids, pad_token_id=policy.tokenizer.pad_token_id,
            max_batch_size=workload.episodes, capacity=MAX_EPISODE_TOKENS, compile_decode=compiled)
    return _SLOT_SCHEDULERS[key]


def ours(policy: Policy, workload: Workload, mode: str, seed: int) -> tuple[float, int]:
    runner, episode_tasks = episode_source(workload)
    kind = {"ours_kv": "batched", "ours_reprefill": "batched_no_kv", "ours_continuous": "continuous",
            "ours_slots": "batched", "ours_slots_compiled": "batched"}[mode]
    scheduler = slot_scheduler(policy, workload, mode.endswith("compiled")) if mode.startswith("ours_slots") else None
    synchronize(policy)
    result = measure(policy, runner, episode_tasks, mode=kind, max_tokens=workload.max_tokens, seed=("gpu", seed),
                     scheduler=scheduler)
    synchronize(policy)
    if result.errors:
        raise RuntimeError(f"{len(result.errors)} {mode} episodes failed; first: {result.errors[0]}")
    return result.seconds, result.tokens


def run(policy: Policy, workload: Workload, uneven: Workload, trials: int) -> dict[str, list[tuple[float, int]]]:
    def one(mode: str, seed: int) -> tuple[float, int]:
        if mode == "hf_eager":
            return hf_eager_rollout(policy, workload, seed)
        return ours(policy, uneven if mode == "ours_continuous" else workload, mode, seed)

    for mode in MODES:  # warm-up (first calls, allocator, kernels, the compiled decode step), not counted
        warm = time.perf_counter()
        one(mode, -1)
        print(f"  warm-up {mode}: {time.perf_counter() - warm:.1f} s", flush=True)
    results: dict[str, list[tuple[float, int]]] = {mode: [] for mode in MODES}
    results["ours_lockstep_uneven"] = []
    for trial in range(trials):
        for mode in MODES:
            results[mode].append(one(mode, trial))
        results["ours_lockstep_uneven"].append(ours(policy, uneven, "ours_kv", trial))
        print(f"  trial {trial + 1}/{trials}: " + ", ".join(
            f"{mode} {results[mode][-1][1] / results[mode][-1][0]:.0f} tok/s" for mode in results), flush=True)
    return results


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--model", default=None, help="default: tiny on cpu, smollm2-135m-instruct on cuda")
    parser.add_argument("--dtype", default=None, help="default: bfloat16 on cuda, float32 on cpu")
    parser.add_argument("--episodes", type=int, default=None, help="default: 64 on cuda, 16 on cpu")
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--step-latency-ms", type=float, default=20.0,
                        help="the uneven envs of the continuous comparison: each step waits 0..this many ms")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads on CPU (0: torch's default)")
    args = parser.parse_args(argv)
    cuda = args.device == "cuda"
    model = args.model or ("smollm2-135m-instruct" if cuda else "tiny")
    dtype = args.dtype or ("bfloat16" if cuda else "float32")
    workload = Workload(episodes=args.episodes or (64 if cuda else 16), turns=args.turns, max_tokens=args.max_tokens)
    uneven = Workload(episodes=workload.episodes, turns=workload.turns, max_tokens=workload.max_tokens,
                      step_latency_ms=args.step_latency_ms)
    policy = load_tiny_policy(args.threads, model_name=model, device=args.device, dtype=dtype)
    device_name = "CPU"
    if cuda:
        import torch

        device_name = torch.cuda.get_device_name()
    print(f"gpu rollout: {model} in {dtype} on {device_name}, {workload.episodes} episodes x {workload.turns} turns, "
          f"<= {workload.max_tokens} tokens a turn, {args.trials} trials", flush=True)
    started = time.perf_counter()
    results = run(policy, workload, uneven, args.trials)
    rates = {mode: statistics.median(tokens / seconds for seconds, tokens in runs) for mode, runs in results.items()}
    print(f"\n{'side':<24}{'tokens/s':>12}{'s per rollout':>16}")
    for mode, runs in results.items():
        print(f"{mode:<24}{rates[mode]:>12.1f}{statistics.median(s for s, _ in runs):>16.2f}")
    print(f"total {time.perf_counter() - started:.0f} s")
    print(f"kv_reuse_vs_reprefill: {rates['ours_kv'] / rates['ours_reprefill']:.2f}")
    print(f"continuous_vs_lockstep: {rates['ours_continuous'] / rates['ours_lockstep_uneven']:.2f} "
          f"(envs +0-{args.step_latency_ms:g} ms a step)")
    print(f"slots_vs_sessions: {rates['ours_slots'] / rates['ours_kv']:.2f}  "
          f"compiled_slots_vs_sessions: {rates['ours_slots_compiled'] / rates['ours_kv']:.2f}")
    print(f"compiled_slots_vs_hf_eager: {rates['ours_slots_compiled'] / rates['hf_eager']:.2f}")
    print(f"ours_vs_hf_eager: {rates['ours_kv'] / rates['hf_eager']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
