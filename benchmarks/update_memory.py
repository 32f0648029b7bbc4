"""What the update's logits cost: peak memory of one micro-batch's forward and backward on game-shaped rows.

A self-play seat's sequence is mostly what the game shows between short moves: the board, re-rendered
every turn. The torch backend's update asks the LM head only for the positions a row trains on
(`update.forward_logprobs`); the previous way, the peer here, asked for every position from the first
trained one to the end. With a 49k-word vocabulary (SmolLM2) those float32 logits, and the copies the
backward pass keeps, dominated the update's memory. Each mode runs in its own child process (peak
resident memory on a CPU, peak allocated on CUDA), on the same rows: `--rows` sequences of `--turns`
moves of `--move` tokens with `--board` observation words between them.

Measured on 2 CPU cores (SmolLM2-135M-Instruct, float32, 4 rows of 1,457 tokens, 64 trained positions):
the logits were not what filled the memory. Peak 10.2 GB against 10.9 GB (0.93): the rest is the
30 layers' activations of 5.8k tokens kept for the backward pass; with `--gradient-checkpointing`
3.5 GB against 4.4 GB (0.79), a third of the memory without it.

    python benchmarks/update_memory.py --model smollm2-135m-instruct     # prints trained_vs_full_memory: X.XX
    python benchmarks/update_memory.py                                    # tiny: the check runs in seconds
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

MODES = ("trained_positions", "full_from_first")


def rows_for(tokenizer, *, rows: int, turns: int, move: int, board: int) -> list:
    from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence

    template = ChatTemplate(tokenizer)
    words = ("x", "o", ".", "|")
    sequences = []
    for row in range(rows):
        sequence = TokenSequence(template)
        messages = [{"role": "user", "content": f"You are seat {row % 2}. " + " ".join(words * (board // 4))}]
        for turn in range(turns):
            sequence.extend(messages)
            ids = [(17 + 31 * (row + turn + k)) % (len(tokenizer) - 10) + 5 for k in range(move)]
            sequence.add_generation(ids, [-1.0] * move)
            messages = messages + [{"role": "assistant", "content": tokenizer.decode(ids, skip_special_tokens=True)},
                                   {"role": "user", "content": " ".join(words * (board // 4))}]
        sequences.append(sequence)
    return sequences


def full_from_first(model, batch, temperature: float):
    """The peer: logits from the first trained position to the end (the update before it kept only trained ones)."""
    import torch
    from beyondagent_plugin_torch import grpo

    width = batch.input_ids.shape[1]
    start = int(batch.loss_mask.bool().any(0).nonzero()[0])
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False,
                   logits_to_keep=width - start).logits[:, :-1, :].float()
    logprobs = grpo.log_probs_from_logits(logits, batch.input_ids[:, start + 1:], temperature=temperature)
    return torch.nn.functional.pad(logprobs, (start, 0))


def measure(args: argparse.Namespace) -> dict:
    import torch
    from beyondagent_plugin_torch.models import load_policy, resolve_model_path
    from beyondagent_plugin_torch.rollout import Episode
    from beyondagent_plugin_torch.update import forward_logprobs, make_batch

    from beyondagent_core.types import Task, Trajectory

    device = torch.device(args.device)
    model, tokenizer = load_policy(resolve_model_path(args.model, where="--model"), device=device,
                                   dtype=torch.float32)
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    sequences = rows_for(tokenizer, rows=args.rows, turns=args.turns, move=args.move, board=args.board)
    episodes = [Episode(group=0, trajectory=Trajectory(task=Task(f"t{i}")), sequence=s)
                for i, s in enumerate(sequences)]
    batch = make_batch(episodes, [1.0] * len(episodes), pad_token_id=tokenizer.pad_token_id, device=device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    if args.mode == "trained_positions":
        logprobs, _ = forward_logprobs(model, batch, 1.0)
    else:
        logprobs = full_from_first(model, batch, 1.0)
    (logprobs * batch.loss_mask).sum().backward()
    seconds = time.perf_counter() - started
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device) / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"mode": args.mode, "peak_mib": round(peak, 1), "rss_before_mib": round(before / 1024, 1),
            "seconds": round(seconds, 2), "width": int(batch.input_ids.shape[1]),
            "trained_positions": int(batch.loss_mask.bool().any(0).sum())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rows", type=int, default=4, help="rows of the micro-batch")
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--move", type=int, default=8, help="tokens of each move (trained)")
    parser.add_argument("--board", type=int, default=160, help="observation words between moves (not trained)")
    parser.add_argument("--gradient-checkpointing", action="store_true",
                        help="both sides recompute each layer's activations in the backward pass")
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)  # a child process's one measurement
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(measure(args)))
        return
    results = {}
    for mode in MODES:
        child = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--mode", mode], capture_output=True, text=True)
        if child.returncode:
            raise SystemExit(f"{mode} failed:\n{child.stderr[-3000:]}")
        results[mode] = json.loads(child.stdout.strip().splitlines()[-1])
        print(json.dumps(results[mode]))
    ours, peer = results["trained_positions"], results["full_from_first"]
    # the model's own weights and the process are the same in both: the ratio of what the pass added
    added = (ours["peak_mib"] - ours["rss_before_mib"]) / max(peer["peak_mib"] - peer["rss_before_mib"], 1e-9)
    print(f"peak memory MiB: trained positions {ours['peak_mib']}, full from the first {peer['peak_mib']} "
          f"(width {ours['width']}, {ours['trained_positions']} trained positions)")
    print(f"trained_vs_full_memory: {ours['peak_mib'] / peer['peak_mib']:.2f}")
    print(f"trained_vs_full_added_memory: {added:.2f}")
    print(f"trained_vs_full_speed: {peer['seconds'] / max(ours['seconds'], 1e-9):.2f}")


if __name__ == "__main__":
    main()
