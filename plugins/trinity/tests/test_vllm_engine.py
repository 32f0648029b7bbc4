"""`VllmServerEngine` (what our Workflow generates with in trinity) against a real vLLM OpenAI server.

trinity's rollout model is a vLLM engine whose OpenAI server our mapping turns on; its vLLM
(0.19-0.23, CUDA) does not install here, so this runs the same protocol on vllm-cpu 0.30 from the
verl plugin's venv (`beyondagent_core.testing.vllm_cpu`), serving the tiny model. Two turns of a
`TrinityChat`: the server must see exactly the ids our `TokenSequence` built (no re-tokenization),
the turns must be the ids and log-probs the server returned (a direct request with the same ids
answers the same, greedy), and only the model's tokens are trained.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from beyondagent_plugin_trinity.engines import VllmServerEngine, engine_of
from beyondagent_plugin_trinity.trinity_chat import TrinityChat

from beyondagent_core.runtime.tokens import ChatTemplate
from beyondagent_core.testing.verl_parity import cannot_run, verl_parity_venv
from beyondagent_core.testing.vllm_cpu import ServerFailed, has_vllm, vllm_cpu_server

torch_models = pytest.importorskip("beyondagent_plugin_torch.models", reason="the tiny model is built by the torch plugin")


class Recording:
    """Our engine, with each request's prompt ids and answer kept for the checks."""

    def __init__(self, engine: VllmServerEngine):
        self.engine, self.calls = engine, []

    async def complete_tokens(self, prompt_ids: list[int], params: dict[str, Any], *, request_id: str) -> Any:
        ids, logprobs = await self.engine.complete_tokens(prompt_ids, params, request_id=request_id)
        self.calls.append({"prompt_ids": list(prompt_ids), "ids": ids, "logprobs": logprobs, "params": dict(params)})
        return ids, logprobs


def direct(url: str, model: str, prompt_ids: list[int], max_tokens: int) -> dict[str, Any]:
    body = {"model": model, "prompt": prompt_ids, "max_tokens": max_tokens, "temperature": 0.0, "logprobs": 1,
            "return_token_ids": True}
    request = urllib.request.Request(f"{url}/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as reply:
        return json.loads(reply.read())["choices"][0]


def test_two_turns_through_vllms_openai_server_are_exact(tmp_path: Path) -> None:
    venv = verl_parity_venv("plugins/trinity/tests/test_vllm_engine.py")
    if not has_vllm(venv):
        cannot_run("vLLM is not installed in verl's venv (its CPU stack installs vllm-cpu)")
    model_dir = torch_models.resolve_model_path("tiny")
    template = ChatTemplate(torch_models.load_tokenizer("tiny"))
    try:
        with vllm_cpu_server(venv, model_dir, tmp_path / "vllm.log", max_num_seqs=2) as url:
            model = SimpleNamespace(api_address=url, model_path=model_dir, api_key="EMPTY")  # trinity's ModelWrapper's
            engine = Recording(engine_of(model))
            chat = TrinityChat(engine, template, {"temperature": 0.0, "top_p": 1.0}, request_id="1/0/0",
                               prompt_length=512, response_length=512, max_new_tokens=5)
            messages = [{"role": "system", "content": "You walk on a frozen lake."},
                        {"role": "user", "content": "P.\n.G\nWhich move?"}]

            async def episode() -> None:
                first = await chat.chat(messages)
                messages.extend([{"role": "assistant", "content": first.content},
                                 {"role": "user", "content": ".P\n.G\nNext move?"}])
                await chat.chat(messages)

            asyncio.run(episode())
            answers = [direct(url, model_dir, call["prompt_ids"], call["params"]["max_tokens"])
                       for call in engine.calls]
            first = engine.calls[0]  # a turn's stop_token_ids (the template's end of turn) reach the server
            stopped, _ = asyncio.run(engine.engine.complete_tokens(
                first["prompt_ids"], {**first["params"], "stop_token_ids": [first["ids"][1]]}, request_id="1/0/1"))
    except ServerFailed as exc:
        pytest.fail(str(exc))
    sequence = chat.sequence
    assert len(engine.calls) == 2 and len(sequence.turn_spans) == 2
    for call, answer, (start, end) in zip(engine.calls, answers, sequence.turn_spans, strict=True):
        assert answer["prompt_token_ids"] == call["prompt_ids"] == sequence.input_ids[:start]  # no re-tokenization
        assert answer["token_ids"] == call["ids"] == sequence.input_ids[start:end]
        assert call["logprobs"] == pytest.approx(answer["logprobs"]["token_logprobs"], abs=1e-5)
        assert sequence.logprobs[start:end] == call["logprobs"] and all(sequence.loss_mask[start:end])
    assert first["params"]["stop_token_ids"] == sorted({template.tokenizer.eos_token_id, template.turn_suffix_ids[0]})
    assert stopped == first["ids"][:first["ids"].index(first["ids"][1]) + 1]  # kept, as eos is
    trained = sum(sequence.loss_mask)
    assert trained == sum(len(call["ids"]) for call in engine.calls) < len(sequence)
