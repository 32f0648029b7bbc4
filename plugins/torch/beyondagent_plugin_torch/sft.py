"""The SFT warm-up (`algorithm.sft`): supervised steps on chosen trajectories before RL.

The examples are token sequences with the runtime's exact masks (`TokenSequence`: 1 on the
model's tokens only), batched by the update's `make_batch` and scored by its `forward_logprobs`;
the loss is the mean negative log-likelihood of the masked tokens (temperature 1). The data:

- `successful`: a rollout pass of the starting policy over the training tasks (`group_size`
  episodes each); the successful episodes' sampled ids are the targets (rejection sampling);
- `synthetic_references`: each synthetic task's reference solution (its `ground_truth` actions,
  as self-questioning wrote them) replayed in the spec's env through the workflow; the replayed
  transcript (observations from the env, the actions as the assistant's turns) is the example
  when the replay succeeds;
- a JSONL file, one `{"messages": [...]}` conversation a line; every assistant turn is trained.

An assistant message's content becomes the ids the model would have generated for it: the text
encoded on its own plus the template's end-of-turn token (what a sampled turn stops on), and
the other messages enter as the chat template's increments, exactly as in a rollout.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from beyondagent_core import metric_names
from beyondagent_core.errors import RunError, SpecError
from beyondagent_core.logs import get_logger
from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence, as_message
from beyondagent_core.spec import SFT_SOURCES
from beyondagent_core.runtime.replay import ReplayLLM, reference_actions
from beyondagent_core.types import Task, Trajectory
from beyondagent_plugin_torch.update import forward_logprobs, make_batch

log = get_logger("beyondagent.torch.sft")

KEY = "algorithm.sft.data"

# Set by `beyondagent sft` (sft_command.py): the trainer runs the warm-up, saves it and stops.
_SFT_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("beyondagent_sft_only", default=False)


@contextlib.contextmanager
def sft_only() -> Iterator[None]:
    token = _SFT_ONLY.set(True)
    try:
        yield
    finally:
        _SFT_ONLY.reset(token)


def is_sft_only() -> bool:
    return _SFT_ONLY.get()


@attrs.define
class SftExample:
    """One training sequence (what `make_batch` reads: `sequence`) and where it came from."""

    sequence: TokenSequence
    source: str


def data_file(data: str, spec_path: Path | None) -> Path:
    """`algorithm.sft.data` as a file: relative to the spec's directory (else to the working directory)."""
    path = Path(data).expanduser()
    if not path.is_absolute() and spec_path is not None and (Path(spec_path).parent / path).exists():
        return Path(spec_path).parent / path
    return path


def check_sft(sft: Any, spec_path: Path | None, where: str) -> None:
    """Spec-time checks: the data is a known source or an existing file."""
    if sft is None or sft.data in SFT_SOURCES:
        return
    path = data_file(sft.data, spec_path)
    if not path.is_file():
        raise SpecError(f"{KEY} is {sft.data!r}: neither {' nor '.join(SFT_SOURCES)} nor an existing file",
                        where=f"{where}, key {KEY}",
                        hint=f"use {' or '.join(SFT_SOURCES)}, or a JSONL file of {{\"messages\": [...]}} lines "
                             "(a relative path is read from the spec's directory)")


def end_of_turn_id(template: ChatTemplate, stop_ids: Sequence[int], eos_token_id: int | None) -> int | None:
    """The token a sampled turn stops on: the template's end-of-turn token when it is a stop token, else eos."""
    suffix = template.turn_suffix_ids
    if suffix and suffix[0] in set(stop_ids):
        return suffix[0]
    return eos_token_id


def conversation_sequence(messages: Sequence[dict[str, Any]], template: ChatTemplate, end_id: int | None,
                          *, where: str) -> TokenSequence:
    """The token sequence of a conversation whose assistant turns are trained (mask 1 on their ids only)."""
    sequence = TokenSequence(template)
    context: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str) \
                or not isinstance(message.get("content"), str):
            raise RunError(f"{where}: message {index} is not a {{role, content}} object with text",
                           hint='each message is {"role": "system" | "user" | "assistant" | "tool", '
                                '"content": "..."}')
        if message["role"] != "assistant":
            context.append(message)
            continue
        if not context:
            raise RunError(f"{where}: message {index} is an assistant turn with no prompt before it",
                           hint="start the conversation with a system or user message")
        if message.get("tool_calls"):
            raise RunError(f"{where}: message {index} has tool_calls, which the SFT warm-up does not train",
                           hint="write the call as the assistant's text, as the workflow's model turns do")
        sequence.extend([*context])
        ids = template.encode(message["content"])
        if end_id is not None:
            ids.append(end_id)
        sequence.add_generation(ids, None)
        context.append({"role": "assistant", "content": message["content"]})
    if not sequence.turn_spans:
        raise RunError(f"{where}: the conversation has no assistant turn to train",
                       hint='add at least one {"role": "assistant", "content": "..."} message')
    return sequence


def file_examples(path: Path, template: ChatTemplate, end_id: int | None) -> list[SftExample]:
    """Each line of a JSONL file of `{"messages": [...]}` conversations; a bad line is an error naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RunError(f"{KEY}: cannot read {path}: {exc.strerror or exc}", where=str(path)) from None
    examples = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}, line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RunError(f"{where}: not JSON ({exc.msg})", where=where,
                           hint='each line is {"messages": [{"role": ..., "content": ...}, ...]}') from None
        if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
            raise RunError(f"{where}: no \"messages\" list", where=where,
                           hint='each line is {"messages": [{"role": ..., "content": ...}, ...]}')
        examples.append(SftExample(conversation_sequence(record["messages"], template, end_id, where=where), where))
    if not examples:
        raise RunError(f"{KEY}: {path} holds no conversation", where=str(path),
                       hint='write one {"messages": [...]} object a line')
    return examples


def trajectory_messages(trajectory: Trajectory) -> list[dict[str, Any]]:
    return [as_message(turn) for turn in trajectory.turns]


async def replay_references(tasks: Sequence[Task], runner: Any, concurrency: int) -> list[Trajectory]:
    """Each task's reference actions replayed in the env through the workflow (like the feasibility filter)."""
    limit = asyncio.Semaphore(concurrency)

    async def replay(task: Task) -> Trajectory:
        async with limit:
            return await runner.run(task, ReplayLLM(reference_actions(task.ground_truth) or []))

    return list(await asyncio.gather(*(replay(task) for task in tasks)))


def reference_examples(tasks: Sequence[Task], runner: Any, template: ChatTemplate, end_id: int | None, *,
                       concurrency: int = 16) -> tuple[list[SftExample], dict[str, int]]:
    """The synthetic tasks' references replayed: the successful transcripts, and counts of what was dropped."""
    synthetic = [task for task in tasks if task.origin == "synthetic"]
    usable = [task for task in synthetic if reference_actions(task.ground_truth) is not None]
    counts = {"synthetic_tasks": len(synthetic), "no_reference": len(synthetic) - len(usable),
              "failed_replays": 0}
    examples = []
    for task, trajectory in zip(usable, asyncio.run(replay_references(usable, runner, concurrency)), strict=True):
        if trajectory.error is not None or trajectory.reward is None or not trajectory.reward.success:
            counts["failed_replays"] += 1
            log.info("sft.replay_failed", task=task.task_id,
                     why=trajectory.error or (trajectory.reward.reason if trajectory.reward else "no reward"))
            continue
        where = f"synthetic task {task.task_id!r}"
        examples.append(SftExample(conversation_sequence(trajectory_messages(trajectory), template, end_id,
                                                         where=where), where))
    return examples, counts


def sft_update(model: Any, optimizer: torch.optim.Optimizer, examples: Sequence[Any], *, epochs: int,
               batch_size: int, micro_batch_size: int, grad_clip: float, pad_token_id: int,
               device: torch.device, generator: torch.Generator) -> dict[str, float]:
    """`epochs` shuffled passes over `examples` (anything `make_batch` takes), `batch_size` a step:
    the mean NLL of the masked tokens. Returns `sft/...` metrics (`sft/loss`: the last epoch's mean)."""
    params = [p for p in model.parameters() if p.requires_grad]
    ones = [1.0] * len(examples)
    first_loss = last_loss = float("nan")
    steps = 0
    tokens_per_epoch = 0.0
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(examples), generator=generator)
        total, tokens = 0.0, 0.0
        for mini in order.split(batch_size):
            batch = make_batch([examples[i] for i in mini], [ones[i] for i in mini], pad_token_id=pad_token_id,
                               device=device)
            count = float(batch.loss_mask.sum())
            if count == 0:
                continue
            optimizer.zero_grad(set_to_none=True)
            for index in torch.arange(batch.size).split(micro_batch_size):
                part = batch.rows(index)
                logprobs, _ = forward_logprobs(model, part, 1.0)
                nll = -(logprobs * part.loss_mask).sum()
                (nll / count).backward()
                total += float(nll.detach())
            tokens += count
            grad_norm = torch.nn.utils.clip_grad_norm_(params, grad_clip)
            if torch.isfinite(grad_norm):
                optimizer.step()
            steps += 1
        mean = total / max(tokens, 1.0)
        if epoch == 0:
            first_loss = mean
        last_loss = mean
        tokens_per_epoch = tokens
    model.eval()
    return {metric_names.SFT_LOSS: last_loss, "sft/loss_first_epoch": first_loss,
            metric_names.SFT_EXAMPLES: float(len(examples)), metric_names.SFT_TOKENS: tokens_per_epoch,
            "sft/steps": float(steps), "sft/epochs": float(epochs)}


@torch.no_grad()
def mean_nll(model: Any, examples: Sequence[Any], *, pad_token_id: int, device: torch.device,
             chunk: int = 16) -> float:
    """The mean NLL of `examples`' masked tokens under `model` (for tests and the benchmark)."""
    batch = make_batch(list(examples), [1.0] * len(examples), pad_token_id=pad_token_id, device=device)
    total = 0.0
    for index in torch.arange(batch.size).split(chunk):
        part = batch.rows(index)
        logprobs, _ = forward_logprobs(model, part, 1.0)
        total += float(-(logprobs * part.loss_mask).sum())
    return total / max(float(batch.loss_mask.sum()), 1.0)
