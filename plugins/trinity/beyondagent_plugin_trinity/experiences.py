"""One finished episode -> one Trinity-RFT `Experience`: our exact tokens, assistant-only mask, reward.

`tokens` is the first prompt followed by the response (every model turn and every observation
after the first prompt, cut at the last model token and at `max_response_tokens`); `action_mask`
is 1 on the model's tokens only and `logprobs` are the log-probs recorded when they were sampled
(0 elsewhere), both over the response, as trinity's `Experience` lays them out. `reward` is the
spec's judge's score. `info["beyondagent"]` keeps the episode's facts; with an estimator of ours
`info["beyondagent_advantage"]` is its record (`beyondagent_core.advantage_records`), which our
ADVANTAGE_FN reads back.
"""

from __future__ import annotations

from typing import Any

from beyondagent_core.advantage_records import advantage_record
from beyondagent_core.runtime.token_chat import split_response
from beyondagent_core.runtime.tokens import TokenSequence
from beyondagent_core.types import Trajectory

FACTS = "beyondagent"
ADVANTAGE_RECORD = "beyondagent_advantage"


def experience_fields(sequence: TokenSequence, trajectory: Trajectory, *, response_length: int, pad_id: int,
                      records_steps: bool = False) -> dict[str, Any]:
    """The keyword arguments of trinity's `Experience(...)` for one episode (plain lists: no torch here)."""
    prompt, response, mask, logprobs = split_response(sequence, response_length)
    if not prompt:  # the episode failed before its first prompt: a one-token stand-in, mask 0
        prompt = [pad_id]
    if not response:  # no model turn (a failed episode): nothing to learn from, mask 0
        response, mask, logprobs = [pad_id], [0], [0.0]
    reward = trajectory.reward
    score = float(reward.score) if reward is not None else 0.0
    success = bool(reward is not None and reward.success)
    info: dict[str, Any] = {FACTS: {"task_id": trajectory.task.task_id, "origin": trajectory.task.origin,
                                    "success": success, "reward": score, "model_turns": len(sequence.turn_spans),
                                    "error": trajectory.error,
                                    "response_tokens_dropped": max(0, len(sequence) - sequence.prompt_length
                                                                   - len(response))}}
    if records_steps:
        info[ADVANTAGE_RECORD] = advantage_record(trajectory, sequence.turn_spans, prompt_length=len(prompt),
                                                  response_length=len(response))
    return {"tokens": [*prompt, *response], "prompt_length": len(prompt), "logprobs": logprobs,
            "action_mask": [bool(m) for m in mask], "reward": score, "info": info,
            "metrics": {"success": float(success), "model_turns": float(len(sequence.turn_spans)),
                        "failed": float(trajectory.error is not None)}}
