"""DAPO's and GSPO's options on the torch backend, against values worked out by hand: clip-higher
(`algorithm.clip_ratio_low`/`clip_ratio_high`), GSPO's sequence-level ratio (`policy_loss: gspo`),
the soft overlong punishment (`overlong`) and dynamic sampling (`dynamic_sampling`,
`max_gen_batches`), the last also in a short training run. verl parity of the GSPO loss is in
verl_parity.py (test_grpo_parity.py)."""

from __future__ import annotations

import copy
import json
import math
from types import SimpleNamespace

import pytest
import torch
from beyondagent_plugin_torch import grpo
from beyondagent_plugin_torch.config import TorchConfig, check_algorithm
from beyondagent_plugin_torch.metrics_log import read_metrics
from beyondagent_plugin_torch.models import load_policy
from beyondagent_plugin_torch.rollout import Episode
from beyondagent_plugin_torch.trainer import Trainer
from beyondagent_plugin_torch.update import grpo_update, make_batch
from test_update import episodes_for
from torch_test_envs import word_game_spec

from beyondagent_core import metric_names
from beyondagent_core.errors import SpecError
from beyondagent_core.runtime.tokens import TokenSequence
from beyondagent_core.spec import AlgorithmSection, OverlongShaping, structured
from beyondagent_core.types import Reward, Task, Trajectory


def tensor(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def close(actual: torch.Tensor, expected) -> None:
    torch.testing.assert_close(actual, expected if isinstance(expected, torch.Tensor) else tensor(expected),
                               rtol=1e-12, atol=1e-12, check_dtype=False)


# ------------------------------------------------------------------------------------- GSPO's policy loss
# Row 0: log-ratios 0.3, -0.1, 0.1 -> mean 0.1, s = e^0.1 = 1.105 inside [0.8, 1.2]: -A s on each token.
# Row 1: log-ratios 0.6, 0.2 (the third token masked, its 5.0 ignored) -> mean 0.4, s = e^0.4 = 1.492,
#        A = +1 clips it to 1.2: -1.2 on each token, no gradient. Vanilla PPO would clip token 0 of row 0
#        (e^0.3 = 1.35) and not token 1 of row 1 (e^0.2 = 1.22 > 1.2: clipped too); GSPO looks at the rows.
OLD = tensor([[-1.0, -2.0, -0.5], [-1.0, -1.0, -1.0]])
LOG_RATIOS = tensor([[0.3, -0.1, 0.1], [0.6, 0.2, 5.0]])
MASK = tensor([[1, 1, 1], [1, 1, 0]])
ADVANTAGES = tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])


def gspo(**kwargs) -> tuple[grpo.PolicyLoss, torch.Tensor]:
    log_prob = (OLD + LOG_RATIOS).requires_grad_()
    result = grpo.gspo_policy_loss(OLD, log_prob, ADVANTAGES, MASK, **kwargs)
    result.loss.backward()
    return result, log_prob.grad


def test_gspo_clips_one_ratio_per_sequence() -> None:
    s0 = math.exp(0.1)
    result, grad = gspo()
    close(result.loss, (3 * -s0 + 2 * -1.2) / 5)  # token-mean over the 5 tokens
    # d(-A s_bt)/d log p_t = -A s_b where unclipped (s_bt carries its own token's gradient), 0 where clipped
    close(grad, [[-s0 / 5, -s0 / 5, -s0 / 5], [0.0, 0.0, 0.0]])
    close(result.clip_fraction, 2 / 5 / (1 + 1e-8 / 5))  # verl's masked_mean adds 1e-8 to the count
    close(result.dual_clip_fraction, 0.0)
    close(result.approx_kl, -(0.3 - 0.1 + 0.1 + 0.6 + 0.2) / 5 / (1 + 1e-8 / 5))


def test_gspo_with_clip_higher_and_a_sequence_mean() -> None:
    s0, s1 = math.exp(0.1), math.exp(0.4)
    # clip_ratio_high 0.5: row 1's 1.492 is inside [0.8, 1.5] now
    result, grad = gspo(clip_ratio_high=0.5)
    close(result.loss, (3 * -s0 + 2 * -s1) / 5)
    close(grad[1, :2], [-s1 / 5, -s1 / 5])
    # seq-mean-token-mean: each row's token mean, averaged over the rows
    result, _ = gspo(loss_agg_mode="seq-mean-token-mean")
    close(result.loss, (3 * -s0 / (3 + 1e-8) + 2 * -1.2 / (2 + 1e-8)) / 2)


def test_gspo_sequence_ratio_is_clamped_like_verl() -> None:
    # mean log-ratio 12 is clamped to 10; with A < 0 the pessimistic side keeps e^10
    old, new = tensor([[0.0, 0.0]]), tensor([[12.0, 12.0]])
    result = grpo.gspo_policy_loss(old, new, tensor([[-1.0, -1.0]]), tensor([[1, 1]]))
    close(result.loss, math.exp(10.0))
    assert grpo.POLICY_LOSSES == {"vanilla": grpo.policy_loss, "gspo": grpo.gspo_policy_loss}


# --------------------------------------------------------------------------------- overlong reward shaping


@pytest.mark.parametrize(("length", "factor", "expected"), [
    (5, 1.0, 0.0), (6, 1.0, 0.0),  # up to max_len - buffer_len = 6: no penalty
    (7, 1.0, -0.25), (8, 1.0, -0.5), (10, 1.0, -1.0),  # linear down to -factor at max_len
    (12, 1.0, -1.5),  # past max_len it keeps falling, as in verl's dapo reward manager
    (8, 0.5, -0.25),
])
def test_overlong_penalty(length: int, factor: float, expected: float) -> None:
    assert grpo.overlong_penalty(length, max_len=10, buffer_len=4, penalty_factor=factor) == pytest.approx(expected)
    assert math.copysign(1.0, grpo.overlong_penalty(3, max_len=10, buffer_len=4, penalty_factor=1.0)) == 1.0


def sequence_of(generated: int) -> TokenSequence:
    built = TokenSequence(template=None)
    built.add_context([1, 2])
    built.add_generation(list(range(10, 10 + generated)), [-0.5] * generated)
    return built


def bare_trainer(algorithm: AlgorithmSection, **config) -> Trainer:
    """A Trainer with only what sampling and shaping read (no model, no run)."""
    trainer = object.__new__(Trainer)
    trainer.algorithm, trainer.config = algorithm, TorchConfig(**config)
    return trainer


def test_overlong_shaping_adds_the_penalty_to_each_scored_episode() -> None:
    trainer = bare_trainer(AlgorithmSection(overlong=OverlongShaping(buffer_len=4, penalty_factor=2.0)),
                           max_new_tokens=10)
    episodes = [Episode(group=0, trajectory=Trajectory(task=Task("t"), reward=Reward(1.0, success=True)),
                        sequence=sequence_of(n)) for n in (4, 8, 10)]
    errored = Episode(group=0, trajectory=Trajectory(task=Task("t"), error="boom"), sequence=sequence_of(10))
    trainer.shape_overlong([*episodes, errored])
    # max_len = backend.max_new_tokens = 10, unpunished up to 6: 8 tokens -> -2 * 2 / 4, 10 -> -2
    assert [e.score for e in episodes] == [1.0, 0.0, -1.0]
    assert [e.trajectory.reward.success for e in episodes] == [True, True, True]  # the verdict stays
    assert episodes[2].trajectory.reward.details == {"overlong_penalty": -2.0}
    assert errored.trajectory.reward is None and "overlong_penalty" not in errored.trajectory.metrics
    metrics = trainer.overlong_metrics([*episodes, errored])
    assert metrics == {metric_names.TRAIN_OVERLONG_PENALTY: pytest.approx(-3.0 / 4),
                       metric_names.TRAIN_OVERLONG_FRACTION: 0.5}


# ------------------------------------------------------------------------------------ dynamic sampling


def scripted(trainer: Trainer, batches: list[list[list[float]]]) -> list[tuple[int, int]]:
    """Make `trainer.generate` return, batch by batch, groups with the given scores; returns its calls."""
    calls = []

    def generate(step, tasks, batch, *, first_group):
        calls.append((batch, first_group))
        groups = batches[batch - 1]
        assert len(groups) == len(tasks)
        return [Episode(group=first_group + g, trajectory=Trajectory(task=task, reward=Reward(score)),
                        sequence=sequence_of(2))
                for g, (task, scores) in enumerate(zip(tasks, groups)) for score in scores]

    trainer.generate = generate
    trainer.extra_tasks = lambda step, epoch, batch: [Task(f"extra{batch}-{i}") for i in range(2)]
    return calls


def test_dynamic_sampling_drops_flat_groups_and_samples_more() -> None:
    trainer = bare_trainer(AlgorithmSection(group_size=2, dynamic_sampling=True, max_gen_batches=5), batch_size=2)
    # batch 1: one flat group (0, 0) and one that differs; batch 2: two flat ones; batch 3: two that differ
    calls = scripted(trainer, [[[0, 0], [0, 1]], [[1, 1], [0, 0]], [[1, 0], [0.5, 0]]])
    generated, trained, metrics = trainer.sample_batch(1, 0, [Task("a"), Task("b")])
    assert calls == [(1, 0), (2, 2), (3, 4)]  # groups numbered on across batches
    assert len(generated) == 12
    # the first differing group of batch 1 and the first of batch 3; the second of batch 3 is surplus
    assert [(e.group, e.score) for e in trained] == [(1, 0.0), (1, 1.0), (4, 1.0), (4, 0.0)]
    assert metrics == {metric_names.TRAIN_GEN_BATCHES: 3.0, metric_names.TRAIN_DROPPED_GROUPS: 3.0}


def test_dynamic_sampling_stops_at_max_gen_batches_and_tops_up() -> None:
    trainer = bare_trainer(AlgorithmSection(group_size=2, dynamic_sampling=True, max_gen_batches=2), batch_size=2)
    calls = scripted(trainer, [[[0, 0], [0, 1]], [[1, 1], [0, 0]], [[1, 0], [1, 0]]])
    _, trained, metrics = trainer.sample_batch(1, 0, [Task("a"), Task("b")])
    assert [batch for batch, _ in calls] == [1, 2]
    # one differing group, topped up with the first dropped one (advantage 0) to batch_size groups
    assert [e.group for e in trained] == [1, 1, 0, 0]
    assert metrics == {metric_names.TRAIN_GEN_BATCHES: 2.0, metric_names.TRAIN_DROPPED_GROUPS: 2.0}


def test_a_crash_does_not_make_a_group_informative() -> None:
    trainer = bare_trainer(AlgorithmSection(group_size=3, dynamic_sampling=True, max_gen_batches=3), batch_size=1)
    scripted(trainer, [[[1, 1, 0]], [[1, 0, 1], [0, 0, 0]]])
    generate = trainer.generate

    def crashing(step, tasks, batch, *, first_group):
        episodes = generate(step, tasks, batch, first_group=first_group)
        if batch == 1:  # its 0 is a crash's: the finished rollouts all scored 1, no signal (advantage 0)
            episodes[2].trajectory.error = "RuntimeError: agent bug"
        return episodes

    trainer.generate = crashing
    generated, trained, metrics = trainer.sample_batch(1, 0, [Task("a")])
    assert [(e.group, e.score) for e in trained] == [(1, 1.0), (1, 0.0), (1, 1.0)]
    assert metrics == {metric_names.TRAIN_GEN_BATCHES: 2.0, metric_names.TRAIN_DROPPED_GROUPS: 2.0}
    trainer._warned_flat_groups = True
    assert trainer.count_flat_groups(1, generated) == pytest.approx(2 / 3)  # the crashed group is flat


def test_without_dynamic_sampling_every_group_trains_and_one_batch_runs() -> None:
    trainer = bare_trainer(AlgorithmSection(group_size=2), batch_size=2)
    calls = scripted(trainer, [[[0, 0], [0, 1]]])
    generated, trained, metrics = trainer.sample_batch(1, 0, [Task("a"), Task("b")])
    assert calls == [(1, 0)] and trained == generated and len(trained) == 4 and metrics == {}


def test_extra_batches_draw_the_same_tasks_for_the_same_step() -> None:
    trainer = bare_trainer(AlgorithmSection(), batch_size=3)
    trainer.run = SimpleNamespace(info=SimpleNamespace(seed=7))
    trainer._epoch_cache = {0: [Task(f"t{i}") for i in range(10)]}
    first = [t.task_id for t in trainer.extra_tasks(4, 0, 2)]
    assert first == [t.task_id for t in trainer.extra_tasks(4, 0, 2)]  # a resumed run draws the same
    assert len(set(first)) == 3
    assert first != [t.task_id for t in trainer.extra_tasks(4, 0, 3)]


# ------------------------------------------------------------------------- the update and the spec checks


def test_the_update_passes_clip_higher_and_the_policy_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    model, tokenizer = load_policy("tiny")
    episodes, advantages = episodes_for(tokenizer, 4)
    batch = make_batch(episodes, advantages, pad_token_id=tokenizer.pad_token_id, device=torch.device("cpu"))
    seen = []

    def recording(name):
        real = grpo.POLICY_LOSSES[name]

        def loss(*args, **kwargs):
            seen.append((name, {k: kwargs.get(k) for k in ("clip_ratio", "clip_ratio_low", "clip_ratio_high",
                                                             "clip_ratio_c")}))
            return real(*args, **kwargs)
        return loss

    for name in ("vanilla", "gspo"):
        monkeypatch.setitem(grpo.POLICY_LOSSES, name, recording(name))
    for algorithm in (AlgorithmSection(kl_coef=0.0, clip_ratio_low=0.2, clip_ratio_high=0.28),
                      AlgorithmSection(kl_coef=0.0, policy_loss="gspo", clip_ratio_high=0.28)):
        policy = copy.deepcopy(model)
        grpo_update(policy, None, torch.optim.SGD(policy.parameters(), lr=0.0), batch, algorithm=algorithm,
                    config=TorchConfig(micro_batch_size=4), temperature=1.0, generator=torch.Generator().manual_seed(0))
    assert seen == [("vanilla", {"clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "clip_ratio_c": 3.0}),
                    ("gspo", {"clip_ratio": 0.2, "clip_ratio_low": None, "clip_ratio_high": 0.28, "clip_ratio_c": None})]


def spec_with(**algorithm) -> SimpleNamespace:
    return SimpleNamespace(path="spec.yaml", algorithm=structured(AlgorithmSection, algorithm, "algorithm", "spec.yaml"))


def test_defaults_leave_existing_specs_unchanged() -> None:
    algo = AlgorithmSection()
    assert (algo.clip_ratio_low, algo.clip_ratio_high, algo.policy_loss, algo.overlong, algo.dynamic_sampling) == (
        None, None, "vanilla", None, False)


def test_bad_options_name_their_key_and_the_valid_values() -> None:
    with pytest.raises(SpecError, match="unknown algorithm.policy_loss 'gpg'") as caught:
        check_algorithm(spec_with(policy_loss="gpg"))
    assert caught.value.where == "spec.yaml, key algorithm.policy_loss" and "vanilla, gspo" in caught.value.hint
    with pytest.raises(SpecError, match="buffer_len 64 leaves no length unpunished") as caught:
        check_algorithm(spec_with(overlong={"buffer_len": 64}), TorchConfig(max_new_tokens=64))
    assert caught.value.where == "spec.yaml, key algorithm.overlong.buffer_len"
    check_algorithm(spec_with(overlong={"buffer_len": 64, "max_len": 256}), TorchConfig(max_new_tokens=64))
    for bad, key in (({"clip_ratio_low": 1.0}, "algorithm.clip_ratio_low"),
                     ({"clip_ratio_high": 0}, "algorithm.clip_ratio_high"),
                     ({"max_gen_batches": 0}, "algorithm.max_gen_batches"),
                     ({"overlong": {"buffer_len": 8, "penalty_factor": -1}}, "algorithm.overlong.penalty_factor"),
                     ({"overlong": {"buffer_len": 8, "max_len": 8}}, "algorithm.overlong.max_len"),
                     ({"overlong": {"penalty_factor": 1.0}}, "algorithm.overlong.buffer_len")):
        with pytest.raises(SpecError) as caught:
            spec_with(**bad)
        assert caught.value.where == f"spec.yaml, key {key}", (bad, caught.value)


# ------------------------------------------------------------------------------------ a short training run


@pytest.mark.beyondagent_plugins("torch", "mixers")
def test_dynamic_sampling_trains_only_groups_whose_rewards_differ(run_spec, test_envs, tmp_path) -> None:
    # The word game's random tiny model names a direction about one time in ten: most groups of 4 score
    # all 0. Each step keeps sampling until 2 groups differ (at most 6 batches).
    spec = word_game_spec(tmp_path, total_steps=2, batch_size=2, micro_batch_size=8)
    spec["algorithm"].update(group_size=4, dynamic_sampling=True, max_gen_batches=6, clip_ratio_high=0.28,
                             overlong={"buffer_len": 2, "penalty_factor": 0.5})
    spec["logging"] = {"episodes": "all"}
    spec["tasks"].pop("val")
    result = run_spec(spec)
    records = [r for r in read_metrics(result.run_dir) if "train/gen_batches" in r]
    assert len(records) == 2
    for record in records:
        batches, dropped = record["train/gen_batches"], record["train/dropped_groups"]
        assert 1 <= batches <= 6 and 0 <= dropped <= batches * 2
        assert -0.5 <= record["train/overlong_penalty"] <= 0
    print([(r["step"], r["train/gen_batches"], r["train/dropped_groups"], r["train/flat_groups"]) for r in records])
    assert any(r["train/dropped_groups"] > 0 for r in records), records
    trained = [json.loads(line) for line in (result.run_dir / "episodes.jsonl").read_text().splitlines()]
    for step in (1, 2):
        groups: dict[int, set[float]] = {}
        for record in trained:
            if record["step"] == step and record["split"] == "train":
                groups.setdefault(record["group"], set()).add(record["score"])
        batches = next(r["train/gen_batches"] for r in records if r["step"] == step)
        assert len(groups) == 2, groups
        if batches < 6:  # not topped up: each trained group's rewards differ
            assert all(len(scores) > 1 for scores in groups.values()), groups


@pytest.mark.beyondagent_plugins("torch", "mixers")
def test_the_dry_run_checks_and_describes_the_options(run_spec, test_envs, tmp_path) -> None:
    spec = word_game_spec(tmp_path)
    spec["algorithm"].update(dynamic_sampling=True, max_gen_batches=3, policy_loss="gspo", clip_ratio_high=0.28,
                             overlong={"buffer_len": 2})
    text = run_spec(spec, dry_run=True).plan.backend
    assert "policy loss gspo (ratio clipped to [1 - 0.2, 1 + 0.28], one ratio per sequence)" in text
    assert "at most 3 generation batches a step" in text
    assert "an episode that generates more than 2 tokens loses reward linearly, up to 1 at 4 tokens" in text
    spec["algorithm"]["overlong"] = {"buffer_len": 4}  # = backend.max_new_tokens: nothing left unpunished
    with pytest.raises(SpecError, match="algorithm.overlong.buffer_len 4 leaves no length unpunished"):
        run_spec(spec, dry_run=True)
