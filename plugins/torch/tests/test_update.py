"""The GRPO update with the real tiny model: gradient accumulation, PPO epochs, KL, aggregation."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import attrs
import pytest
import torch
from beyondagent_plugin_torch.checkpoint import checkpoints
from beyondagent_plugin_torch.config import TorchConfig
from beyondagent_plugin_torch.metrics_log import read_metrics
from beyondagent_plugin_torch.models import load_policy
from beyondagent_plugin_torch.rollout import Episode
from beyondagent_plugin_torch.update import grpo_update, make_batch
from torch_test_envs import word_game_spec

from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence
from beyondagent_core.spec import AlgorithmSection
from beyondagent_core.types import Task, Trajectory


def episodes_for(tokenizer, count: int) -> tuple[list[Episode], torch.Tensor]:
    """Episodes of different lengths with model turns, as a rollout would leave them."""
    template = ChatTemplate(tokenizer)
    generator = torch.Generator().manual_seed(0)
    episodes = []
    for i in range(count):
        sequence = TokenSequence(template)
        sequence.extend([{"role": "user", "content": f"Which way? {i}" + " please" * (i % 3)}])
        ids = torch.randint(3, len(tokenizer), (2 + i % 5,), generator=generator).tolist()
        sequence.add_generation(ids, [-1.0] * len(ids))
        episodes.append(Episode(group=i // 4, trajectory=Trajectory(task=Task(f"t{i}")), sequence=sequence))
    advantages = torch.randn(count, generator=generator)
    return episodes, advantages


def updated_weights(model, batch, *, algorithm, config, ref=None) -> dict[str, torch.Tensor]:
    model = copy.deepcopy(model).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    grpo_update(model, ref, optimizer, batch, algorithm=algorithm, config=config, temperature=1.0,
                generator=torch.Generator().manual_seed(0))
    return {name: p.detach().clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean",
                                  "seq-mean-token-sum-norm"])
def test_micro_batches_accumulate_to_the_full_batch_gradient(mode: str) -> None:
    model, tokenizer = load_policy("tiny")
    episodes, advantages = episodes_for(tokenizer, 12)
    batch = make_batch(episodes, advantages, pad_token_id=tokenizer.pad_token_id, device=torch.device("cpu"))
    algorithm = AlgorithmSection(loss_agg_mode=mode, kl_coef=0.0)
    whole = updated_weights(model, batch, algorithm=algorithm, config=TorchConfig(micro_batch_size=12))
    split = updated_weights(model, batch, algorithm=algorithm, config=TorchConfig(micro_batch_size=5))
    for name in whole:
        assert torch.allclose(whole[name], split[name], atol=1e-6), name


def test_the_batch_masks_only_model_tokens() -> None:
    _, tokenizer = load_policy("tiny")
    episodes, advantages = episodes_for(tokenizer, 3)
    batch = make_batch(episodes, advantages, pad_token_id=tokenizer.pad_token_id, device=torch.device("cpu"))
    for row, episode in enumerate(episodes):
        n = len(episode.sequence)
        labels = batch.input_ids[row, 1:n][batch.loss_mask[row, : n - 1].bool()].tolist()
        assert labels == [t for t, m in zip(episode.sequence.input_ids, episode.sequence.loss_mask) if m]
        assert batch.loss_mask[row, n - 1:].sum() == 0 and batch.attention_mask[row, n:].sum() == 0


@pytest.mark.beyondagent_plugins("torch", "mixers")
def test_ppo_epochs_mini_batches_and_a_kl_reference(run_spec, test_envs, tmp_path) -> None:
    spec = word_game_spec(tmp_path, total_steps=2, ppo_epochs=2, mini_batch_size=16, micro_batch_size=8)
    del spec["tasks"]["val"]
    spec["algorithm"] = {"group_size": 8, "kl_coef": 0.05, "kl_type": "low_var_kl",
                         "loss_agg_mode": "seq-mean-token-mean", "entropy_coeff": 0.01}
    result = run_spec(spec)
    records = read_metrics(result.run_dir)
    assert [r["step"] for r in records] == [1, 2]
    for record in records:
        assert math.isfinite(record["actor/kl"]) and record["actor/kl"] >= 0
        assert record["actor/grad_norm"] > 0
    # After the first mini-batch step the policy moved, so later mini-batches see ratios != 1.
    assert records[0]["actor/clip_fraction"] > 0 or records[1]["actor/clip_fraction"] > 0
    assert records[1]["actor/kl"] > 0  # the policy has left the reference


def test_config_rejects_nonsense() -> None:
    for bad in ({"batch_size": 0}, {"lr": 0}, {"top_p": 1.5}, {"temperature": -1}, {"mini_batch_size": 0}):
        with pytest.raises(ValueError):
            attrs.evolve(TorchConfig(), **bad)


def test_per_token_advantages_sit_where_their_tokens_are_predicted() -> None:
    _, tokenizer = load_policy("tiny")
    episodes, _ = episodes_for(tokenizer, 3)
    per_token = [torch.arange(len(e.sequence), dtype=torch.float32) + 100 * row for row, e in enumerate(episodes)]
    batch = make_batch(episodes, [values.numpy() for values in per_token], pad_token_id=tokenizer.pad_token_id,
                       device=torch.device("cpu"))
    for row, episode in enumerate(episodes):
        n = len(episode.sequence)
        mask = torch.tensor(episode.sequence.loss_mask[1:], dtype=torch.float32)
        # position t predicts token t + 1: it carries token t + 1's advantage, and only on model tokens
        assert torch.equal(batch.advantages[row, : n - 1], per_token[row][1:] * mask)
        assert batch.advantages[row, n - 1:].sum() == 0


def test_off_policy_rows_are_clipped_against_their_sampling_log_probs() -> None:
    # Stripped experience-guided rows were sampled by the policy *with* the experience: their old
    # log-probs are the recorded ones (-1.0 here, far from the model's), so their ratios clip; the
    # same batch on-policy has ratio 1 everywhere (one optimizer step: old = current) and never clips.
    model, tokenizer = load_policy("tiny")
    episodes, advantages = episodes_for(tokenizer, 8)
    on_policy = make_batch(episodes, advantages, pad_token_id=tokenizer.pad_token_id, device=torch.device("cpu"))
    for episode in episodes[::2]:
        episode.off_policy = True
    off_policy = make_batch(episodes, advantages, pad_token_id=tokenizer.pad_token_id, device=torch.device("cpu"))
    assert off_policy.off_policy.tolist() == [True, False] * 4
    algorithm, config = AlgorithmSection(kl_coef=0.0), TorchConfig(micro_batch_size=8)

    def clip_fraction(batch, off_policy_clip) -> float:
        policy = copy.deepcopy(model)
        optimizer = torch.optim.SGD(policy.parameters(), lr=0.0)
        metrics = grpo_update(policy, None, optimizer, batch, algorithm=algorithm, config=config,
                              temperature=1.0, generator=torch.Generator().manual_seed(0),
                              off_policy_clip=off_policy_clip)
        return metrics["actor/clip_fraction"]

    assert clip_fraction(on_policy, (0.6, 3.0)) == 0
    assert clip_fraction(off_policy, (0.6, 3.0)) > 0


def rows_through(model: torch.nn.Module) -> list[int]:
    """The batch size of every forward pass `model` makes from now on."""
    sizes: list[int] = []
    model.register_forward_pre_hook(lambda module, args, kwargs: sizes.append(kwargs["input_ids"].shape[0]),
                                    with_kwargs=True)
    return sizes


@pytest.mark.parametrize(("mode", "mini"), [("token-mean", None), ("seq-mean-token-sum-norm", None),
                                            ("token-mean", 4)])
def test_flat_rows_get_no_forward_and_the_update_is_unchanged(mode: str, mini: int | None) -> None:
    """Rows whose advantages are all 0 are not run (a counter of forward rows), and the weights after
    the update are the ones running them gives (their loss is exactly 0; the normalizer counts them)."""
    model, tokenizer = load_policy("tiny")
    episodes, advantages = episodes_for(tokenizer, 12)
    advantages[[0, 1, 2, 3, 8, 9]] = 0.0  # the first group, and half of the third, flat
    batch = make_batch(episodes, advantages, pad_token_id=tokenizer.pad_token_id, device=torch.device("cpu"))
    algorithm = AlgorithmSection(loss_agg_mode=mode, kl_coef=0.0, entropy_coeff=0.0)
    config = TorchConfig(micro_batch_size=4, mini_batch_size=mini)
    results = {}
    for skip in (True, False):
        trained = copy.deepcopy(model).train()
        sizes = rows_through(trained)
        metrics = grpo_update(trained, None, torch.optim.SGD(trained.parameters(), lr=0.1), batch, algorithm=algorithm,
                              config=config, temperature=1.0, generator=torch.Generator().manual_seed(0), skip_flat=skip)
        results[skip] = ({n: p.detach().clone() for n, p in trained.named_parameters()}, sum(sizes), metrics)
    (skipped, rows_skipping, metrics), (plain, rows_plain, _) = results[True], results[False]
    passes = 1 if mini is None else 2  # mini-batches: the old policy's log-probs take a forward of their own
    assert rows_plain == 12 * passes and rows_skipping == 6 * passes
    assert metrics["actor/flat_samples_skipped"] == 6 and metrics["actor/update_skipped"] == 0
    for name, weights in plain.items():
        assert torch.allclose(weights, skipped[name], atol=1e-6), name


def test_a_step_with_nothing_to_learn_runs_no_forward_and_no_optimizer_step() -> None:
    model, tokenizer = load_policy("tiny")
    episodes, _ = episodes_for(tokenizer, 8)
    batch = make_batch(episodes, torch.zeros(8), pad_token_id=tokenizer.pad_token_id, device=torch.device("cpu"))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    sizes = rows_through(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    metrics = grpo_update(model.train(), None, optimizer, batch, algorithm=AlgorithmSection(kl_coef=0.0),
                          config=TorchConfig(micro_batch_size=4), temperature=1.0, generator=torch.Generator())
    assert sizes == [] and not optimizer.state  # AdamW never stepped: no momentum, no weight decay
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())
    assert metrics["actor/update_skipped"] == 1 and metrics["actor/flat_samples_skipped"] == 8
    assert metrics["actor/pg_loss"] == 0 and "rollout/logprob_diff" not in metrics
    # an entropy bonus trains every row: nothing is skipped
    sizes.clear()
    metrics = grpo_update(model, None, optimizer, batch, algorithm=AlgorithmSection(kl_coef=0.0, entropy_coeff=0.01),
                          config=TorchConfig(micro_batch_size=4), temperature=1.0, generator=torch.Generator())
    assert sum(sizes) == 8 and metrics["actor/update_skipped"] == 0 and metrics["actor/flat_samples_skipped"] == 0


@pytest.mark.beyondagent_plugins("math", "mixers", "torch")
def test_a_run_whose_step_has_nothing_to_learn_still_logs_and_checkpoints(run_spec) -> None:
    """The tiny model answers no sum at step 1 (every group scores 0, seed 0): no update, the same
    weights saved, the step's line written as usual."""
    math_spec = Path(__file__).resolve().parents[3] / "examples" / "math_arithmetic.yaml"
    run = run_spec(math_spec, "algorithm.entropy_coeff=0", "backend.total_steps=1", "backend.save_every=1",
                   "tasks.val=null", "backend.report=false", "backend.samples_per_step=0")
    line = json.loads((run.run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert line["step"] == 1 and line["train/flat_groups"] == 1.0
    assert line["actor/update_skipped"] == 1 and line["actor/flat_samples_skipped"] == 64
    saved, _ = load_policy(str(checkpoints(run.run_dir)[0].path / "model"), dtype=torch.float32)
    initial, _ = load_policy("tiny", dtype=torch.float32)
    assert all(torch.equal(p, dict(initial.named_parameters())[n]) for n, p in saved.named_parameters())


@pytest.mark.parametrize("lag", [0.3, -0.3, 2.0])
def test_the_update_weighs_tokens_by_the_trainer_over_the_sampling_policy(lag: float) -> None:
    """`tis_cap` at its call site: w = min(exp(log p_old - log p_sampling), cap), in that direction (the
    inverse would give exp(-lag)); with lag 2 the cap of 2 binds on every token."""
    from beyondagent_plugin_torch.update import forward_logprobs

    model, tokenizer = load_policy("tiny")
    episodes, advantages = episodes_for(tokenizer, 4)
    batch = make_batch(episodes, advantages, pad_token_id=tokenizer.pad_token_id, device=torch.device("cpu"))
    with torch.no_grad():
        current, _ = forward_logprobs(model, batch, 1.0)
    batch = attrs.evolve(batch, rollout_logprobs=(current - lag) * batch.loss_mask)  # the sampler trailed by `lag`
    metrics = grpo_update(model.train(), None, torch.optim.SGD(model.parameters(), lr=0.0), batch,
                          algorithm=AlgorithmSection(kl_coef=0.0), config=TorchConfig(micro_batch_size=4),
                          temperature=1.0, generator=torch.Generator(), tis_cap=2.0)
    assert metrics["rollout_corr/rollout_is_mean"] == pytest.approx(min(math.exp(lag), 2.0), rel=1e-4)
    assert metrics["rollout_corr/rollout_is_ratio_fraction_high"] == (1.0 if lag > math.log(2.0) else 0.0)
    assert metrics["rollout/logprob_diff"] == pytest.approx(abs(lag), rel=1e-4)


def test_log_probs_come_only_from_trained_positions_and_equal_the_full_logits() -> None:
    """`forward_logprobs` asks the LM head for the positions some row trains on (a multi-turn sequence's
    observations and prompt get none); every trained token's log-prob and entropy equal those of the
    full [rows, width, vocab] logits, both seats' and turns' alike, with gradients through them."""
    from beyondagent_plugin_torch import grpo
    from beyondagent_plugin_torch.update import forward_logprobs

    model, tokenizer = load_policy("tiny")
    template = ChatTemplate(tokenizer)
    episodes = []
    for i in range(3):  # two model turns with a long observation between them, of different lengths
        sequence = TokenSequence(template)
        messages = [{"role": "user", "content": f"Which way? {i}"}]
        sequence.extend(messages)
        first = [5 + i, 6, 7][: 2 + i % 2]
        sequence.add_generation(first, [-1.0] * len(first))
        messages += [{"role": "assistant", "content": tokenizer.decode(first, skip_special_tokens=True)},
                     {"role": "user", "content": "The board: " + "x o . " * (3 + 4 * i)}]
        sequence.extend(messages)
        sequence.add_generation([8, 9 + i], [-1.0, -1.0])
        episodes.append(Episode(group=0, trajectory=Trajectory(task=Task(f"t{i}")), sequence=sequence))
    batch = make_batch(episodes, [1.0, -1.0, 0.5], pad_token_id=tokenizer.pad_token_id, device=torch.device("cpu"))
    kept = batch.loss_mask.bool().any(0)
    assert kept.sum() < kept.numel() / 2  # most positions are prompts and observations: no logits there
    asked = []
    hook = model.lm_head.register_forward_hook(lambda module, inputs, output: asked.append(inputs[0].shape[1]))
    logprobs, entropy = forward_logprobs(model, batch, 0.7, with_entropy=True)
    hook.remove()
    assert asked == [int(kept.sum())]
    with torch.no_grad():
        full = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1].float()
    mask = batch.loss_mask.bool()
    expected = grpo.log_probs_from_logits(full, batch.input_ids[:, 1:], temperature=0.7)
    assert torch.allclose(logprobs[mask], expected[mask], atol=1e-5)
    assert torch.allclose(entropy[mask], grpo.entropy_from_logits(full, temperature=0.7)[mask], atol=1e-5)
    assert not logprobs[~kept.expand_as(mask)].any()  # nothing trains there: 0
    (logprobs * batch.loss_mask).sum().backward()
    assert model.lm_head.weight.grad is not None and model.lm_head.weight.grad.abs().sum() > 0
