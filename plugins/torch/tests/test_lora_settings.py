"""`model.lora`'s rank and alpha reach peft (the update is scaled by alpha / rank): a mutation audit found
`alpha` replaced by `rank` unnoticed, since a run and its resume both read the same wrong config."""

from __future__ import annotations

from beyondagent_plugin_torch.lora import with_adapters
from tiny_and_real import loaded_policy

from beyondagent_core.spec import LoraSection


def test_rank_alpha_and_dropout_reach_the_adapters() -> None:
    model, _ = loaded_policy("tiny")
    import copy

    wrapped = with_adapters(copy.deepcopy(model), LoraSection(rank=4, alpha=8.0, dropout=0.1), seed=0)
    config = wrapped.peft_config["default"]
    assert (config.r, config.lora_alpha, config.lora_dropout) == (4, 8.0, 0.1)
    layer = next(module for module in wrapped.modules() if isinstance(getattr(module, "scaling", None), dict))
    assert layer.scaling["default"] == 8.0 / 4
