"""The SFT warm-up (`algorithm.sft`): exact masks from each data source, the loss goes down and the
reference actions' log-probs up, bad data is an error naming its key, file and line, and a short run
warms up then trains."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace

import pytest
import torch
from beyondagent_plugin_torch.config import check_algorithm
from beyondagent_plugin_torch.metrics_log import read_metrics
from beyondagent_plugin_torch.models import load_policy
from beyondagent_plugin_torch.sft import (
    conversation_sequence,
    end_of_turn_id,
    file_examples,
    mean_nll,
    reference_examples,
    sft_only,
    sft_update,
)
from beyondagent_plugin_torch.trainer import stop_token_ids
from torch_test_envs import WordGame, WordGameConfig, word_game_spec

from beyondagent_core.errors import RunError, SpecError
from beyondagent_core.runtime.tokens import ChatTemplate
from beyondagent_core.spec import AlgorithmSection, structured
from beyondagent_core.types import Reward, Task, Trajectory, Turn

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = load_policy("tiny")
    template = ChatTemplate(tokenizer)
    end = end_of_turn_id(template, stop_token_ids(model, tokenizer, template), tokenizer.eos_token_id)
    return model, tokenizer, template, end


def trained_text(sequence, tokenizer) -> list[str]:
    """The decoded text of each run of mask-1 tokens."""
    runs, current = [], []
    for token, mask in zip(sequence.input_ids, sequence.loss_mask, strict=True):
        if mask:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return [tokenizer.decode(ids, skip_special_tokens=True) for ids in runs]


CONVERSATION = [{"role": "system", "content": "Answer with one direction word."},
                {"role": "user", "content": "Which way?"}, {"role": "assistant", "content": "left"},
                {"role": "user", "content": "Again: which way?"}, {"role": "assistant", "content": "up"}]


def test_a_conversation_trains_the_assistant_tokens_only(tiny) -> None:
    _, tokenizer, template, end = tiny
    sequence = conversation_sequence(CONVERSATION, template, end, where="x")
    assert trained_text(sequence, tokenizer) == ["left", "up"]
    # each model turn is its text's ids and the end-of-turn token, as a sampled turn that stopped
    for (start, stop), text in zip(sequence.turn_spans, ("left", "up"), strict=True):
        assert sequence.input_ids[start:stop] == [*template.encode(text), end]
        assert sum(sequence.loss_mask[start:stop]) == stop - start
    assert sum(sequence.loss_mask) == sum(stop - start for start, stop in sequence.turn_spans)
    # the context is the chat template's rendering: the whole conversation's text, in order
    rendered = tokenizer.decode(sequence.input_ids)
    assert rendered.index("Which way?") < rendered.index("left") < rendered.index("Again") < rendered.index("up")


def test_a_file_source_builds_exact_masks_and_names_bad_lines(tiny, tmp_path) -> None:
    _, tokenizer, template, end = tiny
    path = tmp_path / "sft.jsonl"
    path.write_text(json.dumps({"messages": CONVERSATION}) + "\n\n" + json.dumps({"messages": CONVERSATION[:3]}) + "\n")
    examples = file_examples(path, template, end)
    assert [trained_text(e.sequence, tokenizer) for e in examples] == [["left", "up"], ["left"]]
    for bad, message in ((json.dumps({"conversation": CONVERSATION}), 'line 2: no "messages" list'),
                         ("{not json", "line 2: not JSON"),
                         (json.dumps({"messages": CONVERSATION[:2]}), "line 2: the conversation has no assistant turn"),
                         (json.dumps({"messages": [{"role": "assistant", "content": "up"}]}),
                          "line 2: message 0 is an assistant turn with no prompt"),
                         (json.dumps({"messages": [{"role": "user"}]}), "line 2: message 0 is not a {role, content}")):
        path.write_text(json.dumps({"messages": CONVERSATION}) + "\n" + bad + "\n")
        with pytest.raises(RunError, match=message) as caught:
            file_examples(path, template, end)
        assert str(path) in str(caught.value)
    path.write_text("\n")
    with pytest.raises(RunError, match="holds no conversation"):
        file_examples(path, template, end)


class Runner:
    """Replays the episode as the react workflow does, in the word game (two turns)."""

    async def run(self, task, llm):
        env = WordGame(WordGameConfig(turns=2))
        reset = env.reset(task)
        turns = [Turn(role=m["role"], content=m["content"]) for m in reset.messages]
        done = False
        while not done:
            reply = await llm.chat([])
            turns.append(reply)
            step = env.step({"role": "assistant", "content": reply.content})
            turns += [Turn(role=m["role"], content=m["content"]) for m in step.observation]
            done = step.terminated
        return Trajectory(task=task, turns=turns, reward=env.evaluate())


def test_synthetic_references_are_replayed_in_the_env(tiny) -> None:
    _, tokenizer, template, end = tiny
    tasks = [Task("s1", query="Which way?", ground_truth=["left", "down"], origin="synthetic"),
             Task("s2", query="Which way?", ground_truth=["north", "down"], origin="synthetic"),  # fails
             Task("s3", query="Which way?", ground_truth=None, origin="synthetic"),  # no reference
             Task("o1", query="Which way?", ground_truth=["up", "up"])]  # not synthetic
    examples, counts = reference_examples(tasks, Runner(), template, end)
    assert counts == {"synthetic_tasks": 3, "no_reference": 1, "failed_replays": 1}
    assert [trained_text(e.sequence, tokenizer) for e in examples] == [["left", "down"]]
    text = tokenizer.decode(examples[0].sequence.input_ids)
    assert "Again: which way?" in text  # the env's observation between the two actions


def test_the_warm_up_lowers_the_loss_and_raises_the_reference_actions_logprob(tiny) -> None:
    model, tokenizer, template, end = tiny
    examples, _ = reference_examples(
        [Task(f"s{i}", query=f"Which way? ({i})", ground_truth=["left", "up"], origin="synthetic") for i in range(4)],
        Runner(), template, end)
    policy = copy.deepcopy(model)
    before = mean_nll(policy, examples, pad_token_id=tokenizer.pad_token_id, device=CPU)
    metrics = sft_update(policy, torch.optim.AdamW(policy.parameters(), lr=5e-3), examples, epochs=4, batch_size=2,
                         micro_batch_size=1, grad_clip=1.0, pad_token_id=tokenizer.pad_token_id, device=CPU,
                         generator=torch.Generator().manual_seed(0))
    after = mean_nll(policy, examples, pad_token_id=tokenizer.pad_token_id, device=CPU)
    print(f"reference NLL {before:.3f} -> {after:.3f}", metrics)
    assert after < 0.5 * before  # the reference actions' mean log-prob rose
    assert metrics["sft/loss"] < metrics["sft/loss_first_epoch"]
    assert metrics["sft/examples"] == 4 and metrics["sft/steps"] == 8
    assert metrics["sft/tokens"] == sum(sum(e.sequence.loss_mask) for e in examples)


def test_the_warm_up_step_is_the_same_whatever_the_micro_batches(tiny) -> None:
    """The loss is the mean NLL over a batch's tokens: split into 1 or 4 micro-batches, one SGD step
    moves the weights the same (dividing per micro-batch would scale the gradient by their count)."""
    model, tokenizer, template, end = tiny
    examples, _ = reference_examples(
        [Task(f"s{i}", query=f"Which way? ({i})", ground_truth=["left", "up"], origin="synthetic") for i in range(4)],
        Runner(), template, end)
    weights = {}
    for micro in (1, 4):
        policy = copy.deepcopy(model)
        sft_update(policy, torch.optim.SGD(policy.parameters(), lr=0.1), examples, epochs=1, batch_size=4,
                   micro_batch_size=micro, grad_clip=1e9, pad_token_id=tokenizer.pad_token_id, device=CPU,
                   generator=torch.Generator().manual_seed(0))
        weights[micro] = {n: p.detach().clone() for n, p in policy.named_parameters()}
    start = dict(model.named_parameters())
    assert any(not torch.equal(w, start[n]) for n, w in weights[1].items())
    for name, value in weights[1].items():
        assert torch.allclose(value, weights[4][name], atol=1e-6), name


def spec_with(**algorithm) -> SimpleNamespace:
    return SimpleNamespace(path="spec.yaml",
                           algorithm=structured(AlgorithmSection, algorithm, "algorithm", "spec.yaml"))


def test_bad_sft_options_name_their_key(tmp_path) -> None:
    with pytest.raises(SpecError, match="neither successful nor synthetic_references nor an existing file") as caught:
        check_algorithm(spec_with(sft={"data": str(tmp_path / "missing.jsonl")}))
    assert caught.value.where == "spec.yaml, key algorithm.sft.data"
    check_algorithm(spec_with(sft={"data": "successful"}))
    for bad, key in (({"sft": {"data": "successful", "epochs": 0}}, "algorithm.sft.epochs"),
                     ({"sft": {"data": "successful", "lr": 0}}, "algorithm.sft.lr"),
                     ({"sft": {"data": "successful", "batch_size": 0}}, "algorithm.sft.batch_size"),
                     ({"sft": {"epochs": 2}}, "algorithm.sft.data")):
        with pytest.raises(SpecError) as caught:
            spec_with(**bad)
        assert caught.value.where == f"spec.yaml, key {key}", (bad, caught.value)


@pytest.mark.beyondagent_plugins("torch", "mixers")
def test_a_run_warms_up_on_a_file_then_trains(run_spec, test_envs, tmp_path) -> None:
    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps({"messages": [{"role": "system", "content": "Answer with one direction word."},
                                                     {"role": "user", "content": f"Which way? ({i})"},
                                                     {"role": "assistant", "content": "left"}]}) + "\n"
                            for i in range(8)))
    spec = word_game_spec(tmp_path, total_steps=1, batch_size=2)
    spec["algorithm"].update(group_size=2, sft={"data": str(data), "epochs": 3, "batch_size": 4})
    spec["tasks"].pop("val")
    assert "SFT warm-up first: 3 epoch(s)" in run_spec(spec, dry_run=True).plan.backend
    result = run_spec(spec)
    records = read_metrics(result.run_dir)
    warm = next(r for r in records if r["step"] == 0)
    assert warm["sft/examples"] == 8 and warm["sft/steps"] == 6 and warm["sft/loss"] < warm["sft/loss_first_epoch"]
    assert any(r["step"] == 1 and "train/reward_mean" in r for r in records)
    # Empty data is a clear error naming the key
    spec["algorithm"]["sft"] = {"data": "synthetic_references"}
    with pytest.raises(RunError, match="algorithm.sft.data: synthetic_references: no reference solution"):
        run_spec(spec)


@pytest.mark.beyondagent_plugins("torch", "mixers")
def test_sft_only_warms_up_on_successful_rollouts_and_saves_a_checkpoint(run_spec, test_envs, tmp_path) -> None:
    # `beyondagent sft`: rejection sampling (the tiny random model names a direction about one time in
    # ten: 64 rollouts give a few), the warm-up, a checkpoint at step 0, no RL step
    spec = word_game_spec(tmp_path, batch_size=2)
    spec["algorithm"].update(group_size=8, sft={"data": "successful", "epochs": 2, "batch_size": 2})
    spec["tasks"].pop("val")
    with sft_only():
        result = run_spec(spec)
    records = read_metrics(result.run_dir)
    assert [r["step"] for r in records] == [0]
    warm = records[0]
    print({k: v for k, v in warm.items() if k.startswith("sft/")})
    assert warm["sft/rollouts"] == 64 and 1 <= warm["sft/examples"] < 64
    assert result.metrics["checkpoint"].endswith("step_000000")
    # `beyondagent run --resume` goes on from the warm-up's checkpoint with RL, without warming up again
    records = read_metrics(run_spec(spec, resume=True).run_dir)
    assert [r["step"] for r in records] == [0, 1, 2] and records[0] == warm
    # or the warm-up's policy starts another run: model.path names the checkpoint's model
    spec["model"]["path"] = str(tmp_path / "runs" / "word" / "checkpoints" / "step_000000" / "model")
    spec["algorithm"].pop("sft")
    spec["run"]["name"] = "after"
    spec["backend"]["total_steps"] = 1
    assert any(r["step"] == 1 for r in read_metrics(run_spec(spec).run_dir))


def test_successful_examples_keep_the_sampled_ids_and_masks() -> None:
    from beyondagent_plugin_torch.config import TorchConfig
    from beyondagent_plugin_torch.rollout import Episode
    from beyondagent_plugin_torch.trainer import Trainer

    from beyondagent_core.runtime.tokens import TokenSequence

    def episode(success: bool, error: str | None = None) -> Episode:
        sequence = TokenSequence(template=None)
        sequence.add_context([1, 2, 3])
        sequence.add_generation([7, 8], [-0.1, -0.2])
        return Episode(group=0, sequence=sequence, trajectory=Trajectory(
            task=Task("t"), reward=None if error else Reward(float(success), success=success), error=error))

    trainer = object.__new__(Trainer)
    trainer.algorithm, trainer.config = AlgorithmSection(group_size=3), TorchConfig()
    trainer._epoch_cache = {0: [Task("a"), Task("b")]}
    trainer.run = SimpleNamespace(info=SimpleNamespace(seed=0), spec=SimpleNamespace(path="spec.yaml"),
                                  run_dir=None)
    trainer.model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=None))
    trainer.tokenizer = SimpleNamespace(eos_token_id=0, all_special_ids=[0])
    trainer.template = SimpleNamespace(turn_suffix_ids=[], end_of_turn_id=None)
    made = [episode(True), episode(False), episode(False, error="boom"), episode(True), episode(False),
            episode(False)]
    jobs_seen = []
    trainer.rollout = lambda jobs, sampling, seed: jobs_seen.append(jobs) or made
    trainer.record_failures = lambda step, episodes: None
    kept, counts = trainer.sft_examples(SimpleNamespace(data="successful"))
    assert len(jobs_seen[0]) == 6 and counts == {"rollouts": 6}
    assert kept == [made[0], made[3]]  # the episodes themselves: the sampled ids, the runtime's masks
    assert kept[0].sequence.loss_mask == [0, 0, 0, 1, 1]
    trainer.rollout = lambda jobs, sampling, seed: [made[1], made[2]]
    with pytest.raises(RunError, match="successful: none of the starting policy's 2 rollouts") as caught:
        trainer.sft_examples(SimpleNamespace(data="successful"))
    assert caught.value.where == "spec.yaml, key algorithm.sft.data"


def test_the_sft_command_warms_up_the_quickstart_from_a_file(tmp_path, capsys) -> None:
    from pathlib import Path

    from beyondagent_core.cli import main

    quickstart = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"
    assert main(["sft", str(quickstart), f"run.output_dir={tmp_path}"]) == 2  # no algorithm.sft: a spec error
    assert "has no algorithm.sft: nothing to warm up on" in capsys.readouterr().err
    data = tmp_path / "moves.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "Move to the goal."},
                                             {"role": "assistant", "content": "Right"}]}) + "\n")
    assert main(["sft", str(quickstart), f"run.output_dir={tmp_path}", f"algorithm.sft.data={data}",
                 "algorithm.sft.epochs=2", "tasks.train.count=4", "tasks.val.count=2"]) == 0
    assert "sft finished" in capsys.readouterr().out
    assert [r["step"] for r in read_metrics(tmp_path / "quickstart")] == [0]
    assert (tmp_path / "quickstart" / "checkpoints" / "step_000000" / "model").is_dir()
