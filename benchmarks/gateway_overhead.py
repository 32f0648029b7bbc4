"""The gateway's overhead per call: the `openai` SDK through the gateway vs the generator called directly.

What is measured
    One-turn chat calls of the tiny model (CPU, float32) through the torch backend's ChatScheduler,
    `--calls` of them one after another, two ways, alternately, after a warm-up of each:

    direct:   `PolicyChat.chat(messages)`, the in-process client a react workflow uses;
    gateway:  `openai.OpenAI(base_url=<episode URL>).chat.completions.create(...)`: HTTP on
              loopback to the gateway, request checks, the chat template, the same scheduler, tool
              parsing off, the reply as JSON (and, with `--stream`, as SSE chunks).

    Both sample the same tokens (the same prompt text, seeds and token limit), so the difference is
    the gateway: HTTP, JSON, the thread hop to the rollout's loop, rendering and sample bookkeeping.

How to read the output
    Milliseconds per call of each (median over trials), then `gateway_overhead_ratio: X.XX`
    (gateway / direct; 1.00 means no overhead) and the absolute overhead in ms per call.

    python benchmarks/gateway_overhead.py                # 3 trials x 20 calls, 16 new tokens
    python benchmarks/gateway_overhead.py --stream --max-tokens 4 --trials 5
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins" / "torch"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--stream", action="store_true")
    args = parser.parse_args()

    import openai
    from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
    from beyondagent_plugin_torch.models import load_policy
    from beyondagent_plugin_torch.policy_chat import PolicyChat
    from beyondagent_plugin_torch.trainer import stop_token_ids

    from beyondagent_plugin_gateway.server import Gateway
    from beyondagent_core.runtime.tokens import ChatTemplate

    model, tokenizer = load_policy("tiny", dtype="float32")
    template = ChatTemplate(tokenizer)
    scheduler = ChatScheduler(model, eos_token_ids=stop_token_ids(model, tokenizer, template),
                              pad_token_id=tokenizer.pad_token_id)
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    gateway = Gateway()
    messages = [{"role": "system", "content": "You walk on a frozen lake."},
                {"role": "user", "content": "Which way: left, right, up or down?"}]

    def chat(seed: int) -> PolicyChat:
        return PolicyChat(scheduler, template, Sampling(1.0, 1.0, args.max_tokens), episode=seed,
                          max_episode_tokens=2048, seed=seed)

    def direct(calls: int) -> tuple[float, int]:
        tokens, started = 0, time.perf_counter()
        for call in range(calls):
            turn = asyncio.run_coroutine_threadsafe(chat(call).chat(messages), loop).result()
            tokens += len(turn.token_ids)
        return time.perf_counter() - started, tokens

    def through_gateway(calls: int) -> tuple[float, int]:
        # An agent makes its client once per episode (~0.1 s for the openai SDK): not counted here.
        opened = [gateway.open(chat(call).gateway_episode(), loop) for call in range(calls)]
        clients = [openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)
                   for endpoint in opened]
        tokens, started = 0, time.perf_counter()
        for client in clients:
            reply = client.chat.completions.create(model="policy", messages=messages, stream=args.stream,
                                                   **({"stream_options": {"include_usage": True}}
                                                      if args.stream else {}))
            usage = list(reply)[-1].usage if args.stream else reply.usage
            tokens += usage.completion_tokens
        seconds = time.perf_counter() - started
        for endpoint in opened:
            gateway.close(endpoint.episode_id)
        return seconds, tokens

    direct(3), through_gateway(3)  # warm-up
    times: dict[str, list[float]] = {"direct": [], "gateway": []}
    for trial in range(args.trials):
        for name, run in (("direct", direct), ("gateway", through_gateway)):
            seconds, tokens = run(args.calls)
            times[name].append(seconds / args.calls)
            print(f"trial {trial} {name:8s} {1000 * seconds / args.calls:7.2f} ms/call  {tokens} tokens")
    direct_ms = 1000 * statistics.median(times["direct"])
    gateway_ms = 1000 * statistics.median(times["gateway"])
    print(f"direct_ms_per_call: {direct_ms:.2f}")
    print(f"gateway_ms_per_call: {gateway_ms:.2f}")
    print(f"gateway_overhead_ms_per_call: {gateway_ms - direct_ms:.2f}")
    print(f"gateway_overhead_ratio: {gateway_ms / direct_ms:.2f}")
    gateway.stop()


if __name__ == "__main__":
    main()
