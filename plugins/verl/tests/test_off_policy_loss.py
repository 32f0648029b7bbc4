"""Our policy loss (off_policy_loss.py), in verl's venv, against verl's own vanilla PPO loss.

With no off-policy row it must be verl's `compute_policy_loss_vanilla` exactly (loss and metrics);
an off-policy row gets `experience.off_clip_high` and `dual_clip` in place of verl's clip_ratio_high
and clip_ratio_c — checked on hand-picked ratios — and `OffPolicyLoss` hands the micro-batch's
flags to it through verl's `ppo_loss`.
"""

from __future__ import annotations

import json
from typing import Any

CHECK = r'''
import json, math, torch
from tensordict import TensorDict
from omegaconf import OmegaConf
from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla, get_policy_loss_fn
from verl.utils import tensordict_utils as tu
from verl.utils.config import omega_conf_to_dataclass
from beyondagent_plugin_verl import off_policy_loss
from beyondagent_plugin_verl.mapping import OFF_POLICY_LOSS

config = omega_conf_to_dataclass(OmegaConf.create({
    "_target_": "verl.workers.config.FSDPActorConfig", "strategy": "fsdp2", "ppo_mini_batch_size": 4,
    "ppo_micro_batch_size_per_gpu": 4, "clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "clip_ratio_c": 3.0,
    "entropy_coeff": 0.0, "use_kl_loss": False, "loss_agg_mode": "token-mean",
    "policy_loss": {"loss_mode": OFF_POLICY_LOSS}, "rollout_n": 1}))
ours = get_policy_loss_fn(OFF_POLICY_LOSS)
torch.manual_seed(0)
old = torch.randn(4, 6) - 2
new = old + 0.5 * torch.randn(4, 6)
adv = torch.randn(4, 6)
mask = torch.ones(4, 6); mask[1, 4:] = 0; mask[3, 2:] = 0
out = {}
theirs_loss, theirs_metrics = compute_policy_loss_vanilla(old, new, adv, mask, "token-mean", config)
our_loss, our_metrics = ours(old, new, adv, mask, "token-mean", config)
out["same_loss"] = abs(float(theirs_loss - our_loss))
out["same_metrics"] = max(abs(theirs_metrics[k] - our_metrics[k]) for k in theirs_metrics)
weights = torch.rand(4, 6)
out["same_with_weights"] = abs(float(compute_policy_loss_vanilla(old, new, adv, mask, "token-mean", config,
                                                                 rollout_is_weights=weights)[0]
                                     - ours(old, new, adv, mask, "token-mean", config, rollout_is_weights=weights)[0]))

# one token per row: ratio 1.5 with advantage +1 (row 0 off-policy, row 1 not), ratio 2.0 with advantage -1
# (row 2 off-policy, row 3 not)
old = torch.zeros(4, 1)
new = torch.log(torch.tensor([[1.5], [1.5], [2.0], [2.0]]))
adv = torch.tensor([[1.0], [1.0], [-1.0], [-1.0]])
rows = torch.tensor([1.0, 0.0, 1.0, 0.0])
per_row = []
for i in range(4):
    off_policy_loss._current.update(rows=rows[i:i + 1], off_clip_high=0.6, dual_clip=1.5)
    per_row.append(float(ours(old[i:i + 1], new[i:i + 1], adv[i:i + 1], torch.ones(1, 1), "token-mean", config)[0]))
off_policy_loss._current.clear()
out["per_row"] = per_row

# OffPolicyLoss: the flags travel in the micro-batch to the policy loss inside verl's ppo_loss
seen = {}
original = off_policy_loss.off_policy_clipped_loss
def spy(*args, **kwargs):
    seen["rows"] = off_policy_loss._current["rows"].tolist()
    return original(*args, **kwargs)
import verl.trainer.ppo.core_algos as core_algos
core_algos.POLICY_LOSS_REGISTRY[OFF_POLICY_LOSS] = spy
nested = lambda t: torch.nested.as_nested_tensor(list(t), layout=torch.jagged)
ids = lambda n: nested(torch.ones(2, n, dtype=torch.long))
data = TensorDict({"prompts": ids(2), "responses": ids(3), "response_mask": nested(torch.ones(2, 3)), "old_log_probs": nested(torch.zeros(2, 3)),
                   "advantages": nested(torch.ones(2, 3)), off_policy_loss.OFF_POLICY_FIELD: torch.tensor([0.0, 1.0])},
                  batch_size=2)
tu.assign_non_tensor(data, dp_size=1, batch_num_tokens=None, global_batch_size=None)
loss_fn = off_policy_loss.OffPolicyLoss(config, off_clip_high=0.6, dual_clip=3.0)
# the model's log-probs over each whole sequence (2 prompt + 3 response tokens): 0, so the ratio is 1
loss, metrics = loss_fn(model_output={"log_probs": nested(torch.zeros(2, 5))}, data=data)
out["seen_rows"] = seen["rows"]
out["cleared"] = off_policy_loss._current == {}
out["loss"] = float(loss)
print(json.dumps(out))
'''


def test_our_loss_is_verls_vanilla_loss_with_its_own_clip_on_off_policy_rows(verl_venv: Any) -> None:
    result = verl_venv.run(["-c", CHECK], timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["same_loss"] < 1e-7 and out["same_metrics"] < 1e-7 and out["same_with_weights"] < 1e-7
    # ratio 1.5, advantage +1: clipped at 1 + 0.6 = 1.6 (not clipped) off-policy, at 1 + 0.28 on-policy;
    # ratio 2.0, advantage -1: PPO's pessimistic max gives 2.0, dual-clipped at c = 1.5 off-policy (3.0 on-policy)
    assert [round(x, 5) for x in out["per_row"]] == [-1.5, -1.28, 1.5, 2.0]
    assert out["seen_rows"] == [[0.0], [1.0]] or out["seen_rows"] == [0.0, 1.0]
    assert out["cleared"]
    assert abs(out["loss"] - -1.0) < 1e-6  # ratio 1, advantage 1 on every token
