"""Issue 35 on a GPU: `kv_layout: slots` (eager and compiled: CUDA graphs) samples what a full
prefill samples, with the real model (SmolLM2-135M-Instruct) in float32 on CUDA. Greedy and
sampled with fixed seeds, three episodes of three turns (test_kv_cache.py's `play`). Prints the
tokens' agreement and the largest log-prob difference per case; exits 1 when tokens differ.

    python scripts/gpu/slots_exactness.py [--device cuda] [--dtype float32]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "plugins" / "torch" / "tests"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--model", default="smollm2")
    args = parser.parse_args(argv)
    from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
    from beyondagent_plugin_torch.models import load_policy
    from beyondagent_plugin_torch.slots import SlotScheduler
    from test_kv_cache import FIRST, play
    from tiny_and_real import model_path

    model, tokenizer = load_policy(model_path(args.model), dtype=args.dtype, device=args.device)
    ids = dict(eos_token_ids=[tokenizer.eos_token_id], pad_token_id=tokenizer.pad_token_id)
    failed = False
    for temperature in (0.0, 1.0):
        sampling = Sampling(temperature=temperature, top_p=1.0, max_tokens=16)
        fresh = play(ChatScheduler(model, kv_cache_tokens=0, **ids), tokenizer, FIRST, sampling, turns=3)
        for name, scheduler in (("slots", SlotScheduler(model, capacity=1024, max_batch_size=8, **ids)),
                                ("slots_compiled", SlotScheduler(model, capacity=1024, max_batch_size=8,
                                                                 compile_decode=True, **ids))):
            started = time.perf_counter()
            got = play(scheduler, tokenizer, FIRST, sampling, turns=3)
            seconds = time.perf_counter() - started
            same = all(a[0] == b[0] for ea, eb in zip(got, fresh) for a, b in zip(ea, eb))
            diff = max(abs(x - y) for ea, eb in zip(got, fresh) for a, b in zip(ea, eb) for x, y in zip(a[1], b[1]))
            failed |= not same
            print(f"{args.model} {args.dtype} on {args.device}, temperature {temperature}, {name}: tokens "
                  f"{'equal' if same else 'DIFFER'}, max |logprob diff| {diff:.2e} ({seconds:.1f} s with compile)",
                  flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
