"""PPO on the torch backend: the `gae` estimator with a critic (critic.py).

The pieces by hand (verl's clipped value loss in both directions, the critic's values placed on an
episode's tokens and back), a critic that lowers its value loss on a fixed batch, then runs of the
word game with groups of one: the critic trains before the policy, `critic.warmup_steps` holds the
policy, a resumed run reproduces the uninterrupted one critic included, LoRA gives the critic
adapters and a fully trained head, and the spec refuses what cannot work.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch
from beyondagent_plugin_torch.critic import CRITIC_DIR, Critic, explained_variance, load_value_model, value_loss
from beyondagent_plugin_torch.metrics_log import read_metrics
from beyondagent_plugin_torch.update import episode_arrays, make_batch
from safetensors.torch import load_file
from torch_test_envs import word_game_spec

from beyondagent_core.errors import SpecError
from beyondagent_core.runtime.tokens import TokenSequence
from beyondagent_core.spec import CriticSection

pytestmark = pytest.mark.beyondagent_plugins("torch", "mixers", "advantages")


def ppo_spec(tmp_path: Path, *, critic: dict | None = None, **backend) -> dict:
    spec = word_game_spec(tmp_path, **backend)
    spec["algorithm"]["group_size"] = 1
    spec["backend"]["advantage"] = {"name": "gae", "gamma": 1.0, "lam": 0.95}
    spec["critic"] = {"lr": 1e-3, **(critic or {})}
    del spec["tasks"]["val"]
    return spec


def sequence(ids: list[int], mask: list[int]) -> TokenSequence:
    return TokenSequence(template=None, input_ids=ids, loss_mask=mask, logprobs=[0.0] * len(ids))


def test_the_value_loss_clips_in_both_directions_by_hand() -> None:
    old = torch.tensor([[0.0, 0.0, 0.0, 0.0]])
    new = torch.tensor([[0.5, -0.5, 0.1, 0.5]])
    returns = torch.tensor([[1.0, 1.0, 0.0, -1.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    loss, clipped = value_loss(new, old, returns, mask, cliprange=0.2, mode="token-mean")
    # token 0: the clip (0.2) leaves a larger error (0.64) than the prediction (0.25): the clipped one counts;
    # token 1: the prediction moved away (2.25) and the clip cannot help (1.44): the prediction's counts;
    # token 2: inside the clip (0.01 both); token 3 is not the model's
    assert float(loss) == pytest.approx(0.5 * (0.64 + 2.25 + 0.01) / 3)
    assert float(clipped) == pytest.approx(1 / 3)


def test_values_go_to_the_episode_tokens_and_back() -> None:
    two_samples = types.SimpleNamespace(samples=[sequence([5, 6, 7], [0, 1, 1]), sequence([8, 9], [0, 1])])
    one = types.SimpleNamespace(samples=[sequence([1, 2, 3, 4], [0, 0, 1, 1])])
    episodes = [two_samples, one]
    # an estimator's per-token returns in episode coordinates (the samples end to end) ...
    returns = [torch.tensor([9.0, 1.0, 2.0, 9.0, 3.0]), torch.tensor([9.0, 9.0, 4.0, 5.0])]
    batch = make_batch(episodes, [0.0, 0.0], pad_token_id=0, device=torch.device("cpu"), returns=returns)
    # ... land where make_batch puts advantages: column t is token t+1, model tokens only
    assert batch.returns.tolist() == [[1.0, 2.0, 0.0], [3.0, 0.0, 0.0], [0.0, 4.0, 5.0]]
    # and the critic's columns come back as episode arrays, 0 on each sample's first token
    columns = torch.tensor([[0.1, 0.2, 0.0], [0.3, 0.0, 0.0], [0.4, 0.5, 0.6]])
    back = episode_arrays(columns, episodes)
    assert back[0].tolist() == pytest.approx([0.0, 0.1, 0.2, 0.0, 0.3])
    assert back[1].tolist() == pytest.approx([0.0, 0.4, 0.5, 0.6])


def test_the_critic_lowers_its_value_loss_on_a_fixed_batch() -> None:
    model = load_value_model("tiny", device=torch.device("cpu"), dtype=torch.float32, compute_dtype=None,
                             attention="sdpa", seed=0, where="model.path")
    critic = Critic(model, CriticSection(lr=3e-3, cliprange_value=10.0), weight_decay=0.0)
    gen = torch.Generator().manual_seed(0)
    episodes = [types.SimpleNamespace(samples=[sequence(torch.randint(3, 200, (12,), generator=gen).tolist(),
                                                        [0] * 4 + [1] * 8)]) for _ in range(4)]
    targets = [torch.full((12,), target) for target in (1.0, -1.0, 0.5, 0.0)]
    batch = make_batch(episodes, [0.0] * 4, pad_token_id=0, device=torch.device("cpu"), returns=targets)
    settings = types.SimpleNamespace(micro_batch_size=2, mini_batch_size=None, ppo_epochs=1, grad_clip=1.0)
    algorithm = types.SimpleNamespace(loss_agg_mode="token-mean")
    losses = []
    for _ in range(12):
        batch.values = critic.values(batch, chunk=3)
        losses.append(critic.update(batch, algorithm=algorithm, config=settings, generator=gen)["critic/vf_loss"])
    assert losses[-1] < 0.25 * losses[0], losses
    assert explained_variance(critic.values(batch, chunk=4), batch.returns, batch.loss_mask) > 0.5
    # critic.cliprange_value reaches the loss: a second epoch's moved predictions are clipped by a tight one only
    twice = types.SimpleNamespace(**{**vars(settings), "ppo_epochs": 2})
    for cliprange, clipped in ((1e-6, True), (10.0, False)):
        critic.section = CriticSection(lr=3e-3, cliprange_value=cliprange)
        batch.values = critic.values(batch, chunk=4)
        fraction = critic.update(batch, algorithm=algorithm, config=twice, generator=gen)["critic/vf_clipfrac"]
        assert (fraction > 0.2) if clipped else fraction == 0.0, (cliprange, fraction)


def test_ppo_trains_the_critic_before_the_policy_and_resumes_exactly(run_spec, test_envs, tmp_path: Path) -> None:
    spec = ppo_spec(tmp_path, total_steps=3, save_every=1, keep_checkpoints=3, batch_size=8)
    whole = run_spec(spec)
    metrics = {record["step"]: record for record in read_metrics(whole.run_dir)}
    for step in (1, 2, 3):
        record = metrics[step]
        assert record["critic/vf_loss"] > 0 and "critic/vf_explained_var" in record
        assert record["critic/lr"] == pytest.approx(1e-3)  # critic.lr, not the policy's backend.lr (5e-3)
        assert record["actor/update_skipped"] == 0.0 and record["train/flat_groups"] == 0.0
    assert {p.name for p in (whole.run_dir / "checkpoints" / "step_000003" / CRITIC_DIR).iterdir()} >= {
        "model.safetensors", "optimizer.pt"}

    # the same run stopped after step 2 and resumed: step 3 (values, critic and policy) is the same
    spec["run"]["output_dir"] = str(tmp_path / "resumed")
    spec["backend"]["total_steps"] = 2
    run_spec(spec)
    resumed = run_spec(spec, "backend.total_steps=3", resume=True)
    again = {record["step"]: record for record in read_metrics(resumed.run_dir)}[3]
    for key in ("advantage/values_mean", "advantage/returns_mean", "critic/vf_loss", "critic/grad_norm",
                "actor/pg_loss", "actor/grad_norm", "train/reward_mean"):
        assert again[key] == pytest.approx(metrics[3][key], rel=1e-4, abs=1e-6), key
    saved = [load_file(run.run_dir / "checkpoints" / "step_000003" / CRITIC_DIR / "model.safetensors")
             for run in (whole, resumed)]
    for name, tensor in saved[0].items():
        torch.testing.assert_close(saved[1][name], tensor, rtol=1e-5, atol=1e-6, msg=name)


def test_warmup_steps_hold_the_policy_while_the_critic_learns(run_spec, test_envs, tmp_path: Path) -> None:
    # (with the rollout one step ahead: the held update still lets the next rollout start)
    spec = ppo_spec(tmp_path, total_steps=2, save_every=1, keep_checkpoints=2, critic={"warmup_steps": 1},
                    rollout_mode="one_step_off")
    result = run_spec(spec)
    metrics = {record["step"]: record for record in read_metrics(result.run_dir)}
    assert metrics[1]["actor/update_skipped"] == 1.0 and "actor/pg_loss" not in metrics[1]
    assert metrics[2]["actor/update_skipped"] == 0.0 and "actor/pg_loss" in metrics[2]
    assert "critic/vf_loss" in metrics[1] and "critic/vf_loss" in metrics[2]
    first, second = (load_file(result.run_dir / "checkpoints" / f"step_00000{step}" / "model" / "model.safetensors")
                     for step in (1, 2))
    assert any(not torch.equal(first[name], second[name]) for name in first)  # step 2 moved it
    from beyondagent_plugin_torch.models import load_policy

    model, _ = load_policy("tiny", device="cpu", dtype="float32")
    initial = model.state_dict()
    assert all(torch.equal(first[name], initial[name]) for name in first if name in initial)


def test_a_lora_policy_gets_a_lora_critic_with_a_trained_head(run_spec, test_envs, tmp_path: Path) -> None:
    spec = ppo_spec(tmp_path, total_steps=1)
    spec["model"]["lora"] = {"rank": 4, "alpha": 8}
    result = run_spec(spec)
    critic_dir = result.run_dir / "checkpoints" / "step_000001" / CRITIC_DIR
    assert (critic_dir / "adapter_config.json").is_file()
    saved = load_file(critic_dir / "adapter_model.safetensors")
    assert any("lora_A" in name for name in saved) and any("score" in name for name in saved)
    assert not any("layers.0.mlp.gate_proj.weight" in name and "lora" not in name for name in saved)
    resumed = run_spec(spec, "backend.total_steps=2", resume=True)
    assert [record["step"] for record in read_metrics(resumed.run_dir)] == [1, 2]


def test_the_spec_refuses_what_ppo_cannot_use(run_spec, test_envs, tmp_path: Path) -> None:
    grpo_with_a_critic = word_game_spec(tmp_path)
    grpo_with_a_critic["critic"] = {"lr": 1e-4}
    with pytest.raises(SpecError, match="uses no critic"):
        run_spec(grpo_with_a_critic)
    grpo_alone = word_game_spec(tmp_path)
    grpo_alone["algorithm"]["group_size"] = 1
    with pytest.raises(SpecError, match="gae"):
        run_spec(grpo_alone)
    dynamic = ppo_spec(tmp_path)
    dynamic["algorithm"]["dynamic_sampling"] = True
    with pytest.raises(SpecError, match="dynamic_sampling"):
        run_spec(dynamic)
    with pytest.raises(SpecError, match="critic.cliprange_value"):
        run_spec(ppo_spec(tmp_path, critic={"cliprange_value": 0}))
    with pytest.raises(SpecError, match="critic.path") as caught:
        run_spec(ppo_spec(tmp_path, critic={"path": str(tmp_path / "no-such-critic")}))
    assert "no-such-critic" in str(caught.value)
