"""compose.py's `apply_overrides` on a small OmegaConf config standing in for verl's composed one
(eighth audit, mutants E05 and E06): omegaconf is in the main venv, verl is not needed.

- a key verl's config lacks is an error naming it, the spec key it came from and the closest
  existing key, also under a mapping that has other keys; only a mapping verl leaves empty
  (`engine_kwargs: {}`) takes new keys, and `+key` adds one anywhere;
- a mapping value replaces verl's mapping (as a value on verl's command line does), it is not
  merged into it, so no key of verl's default survives beside ours.

From the eighth mutation audit.
"""

from __future__ import annotations

import pytest
from beyondagent_plugin_verl.compose import ComposeError, apply_overrides

omegaconf = pytest.importorskip("omegaconf")
OmegaConf = omegaconf.OmegaConf


def verl_like() -> object:
    cfg = OmegaConf.create({
        "actor_rollout_ref": {
            "actor": {"clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.2},
            "rollout": {"engine_kwargs": {}, "temperature": 1.0},
            "model": {"override_config": {"attn_implementation": "flash_attention_2", "rope_theta": 10000}},
        },
        "trainer": {"logger": ["console"]},
    })
    OmegaConf.set_struct(cfg, True)
    return cfg


def test_a_typo_under_a_filled_mapping_is_an_error_naming_both_keys_and_the_closest() -> None:
    cfg = verl_like()
    with pytest.raises(ComposeError) as caught:
        apply_overrides(cfg, [["actor_rollout_ref.actor.clip_ratoi", 0.3,
                               "backend.verl.actor_rollout_ref.actor.clip_ratoi"]])
    error = caught.value
    assert error.key == "actor_rollout_ref.actor.clip_ratoi"
    assert error.origin == "backend.verl.actor_rollout_ref.actor.clip_ratoi"
    assert error.suggestions[0] == "actor_rollout_ref.actor.clip_ratio"
    assert "clip_ratoi" not in cfg.actor_rollout_ref.actor


def test_an_empty_mapping_and_a_plus_key_take_new_keys() -> None:
    cfg = verl_like()
    apply_overrides(cfg, [["actor_rollout_ref.rollout.engine_kwargs.swap_space", 4, "backend.verl.x"],
                          ["+trainer.extra_flag", True, "backend.verl.trainer.extra_flag"]])
    assert cfg.actor_rollout_ref.rollout.engine_kwargs.swap_space == 4
    assert cfg.trainer.extra_flag is True
    with pytest.raises(ComposeError):  # the filled mapping beside it takes none
        apply_overrides(cfg, [["actor_rollout_ref.rollout.swap_space", 4, "backend.verl.y"]])


def test_a_mapping_value_replaces_verls_mapping_instead_of_merging_into_it() -> None:
    cfg = verl_like()
    apply_overrides(cfg, [["actor_rollout_ref.model.override_config", {"attn_implementation": "sdpa"},
                           "backend.device"],
                          ["trainer.logger", ["file"], "backend.name"]])
    assert OmegaConf.to_container(cfg.actor_rollout_ref.model.override_config) == {"attn_implementation": "sdpa"}
    assert list(cfg.trainer.logger) == ["file"]
