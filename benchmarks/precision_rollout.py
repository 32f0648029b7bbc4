"""What mixed precision costs the rollout: decode throughput with the policy as the trainer holds it.

The torch backend keeps float32 weights and computes in bf16 under autocast (precision.py), also
while it samples. The alternative is a bf16 copy of the weights for the rollout, refreshed after
every optimizer step. This measures, on one device and in one process, `--episodes` concurrent
prompts decoding `--tokens` tokens each (no stop token, so every row decodes them all) through the
backend's `ChatScheduler`, in three modes:

- `autocast`: float32 weights, bf16 compute (the trainer's default on a GPU);
- `bf16_weights`: the model stored in bf16 (what a bf16 rollout copy would decode like);
- `float32`: float32 throughout;

and the time to refresh a bf16 copy from float32 weights (one `copy_` per parameter). It prints
tokens/s per mode (median of `--trials` after a warm-up) and `autocast_vs_bf16_weights: X.XX`.

    python benchmarks/precision_rollout.py --device cuda
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import torch
from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
from beyondagent_plugin_torch.models import load_policy

MODES = {"autocast": (torch.float32, torch.bfloat16), "bf16_weights": (torch.bfloat16, None),
         "float32": (torch.float32, None)}


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


async def decode_all(scheduler: ChatScheduler, prompts: list[list[int]], tokens: int) -> int:
    sampling = Sampling(1.0, 1.0, tokens)

    async def one(index: int, prompt: list[int]) -> int:
        with scheduler.episode():
            ids, _ = await scheduler.generate((index, 0), prompt, sampling, tokens,
                                              torch.Generator().manual_seed(index))
        return len(ids)

    return sum(await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    device = torch.device(args.device)
    rates = {}
    for mode, (params, compute) in MODES.items():
        model, tokenizer = load_policy(args.model, device=device, dtype=params, compute_dtype=compute)
        prompts = [tokenizer.apply_chat_template([{"role": "user", "content": f"Tell a story about the number {i}."}],
                                                 add_generation_prompt=True, tokenize=True) for i in range(args.episodes)]
        prompts = [list(p["input_ids"]) if isinstance(p, dict) or hasattr(p, "keys") else list(p) for p in prompts]
        scheduler = ChatScheduler(model, eos_token_ids=[], pad_token_id=tokenizer.pad_token_id,
                                  max_batch_size=args.episodes)
        asyncio.run(decode_all(scheduler, prompts, args.tokens))  # warm-up
        trials = []
        for _ in range(args.trials):
            synchronize(device)
            started = time.perf_counter()
            generated = asyncio.run(decode_all(scheduler, prompts, args.tokens))
            synchronize(device)
            trials.append(generated / (time.perf_counter() - started))
        rates[mode] = statistics.median(trials)
        print(f"{mode:<13} {rates[mode]:9.0f} tokens/s  ({args.episodes} x {args.tokens} tokens, {device})", flush=True)
        if mode == "autocast":  # the cost of keeping a bf16 copy for the rollout instead
            copy = [p.detach().to(torch.bfloat16) for p in model.parameters()]
            synchronize(device)
            started = time.perf_counter()
            with torch.no_grad():
                for target, source in zip(copy, model.parameters()):
                    target.copy_(source)
            synchronize(device)
            print(f"refresh of a bf16 copy: {1000 * (time.perf_counter() - started):.1f} ms "
                  f"({sum(p.numel() for p in copy) / 1e6:.0f}M parameters)", flush=True)
        del model, scheduler
    print(f"autocast_vs_bf16_weights: {rates['autocast'] / rates['bf16_weights']:.2f}")


if __name__ == "__main__":
    main()
