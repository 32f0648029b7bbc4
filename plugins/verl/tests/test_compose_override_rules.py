"""compose.py's override rules beyond the eighth audit's two (main venv: omegaconf, no verl), and the
launcher's error built from compose's answer (`backend.compose_error`).

`test_audit8_compose_overrides.py` covers a typo under a filled mapping, an empty mapping and a
`+key`, and a mapping value replacing verl's. Here: an unknown top-level key and one whose middle
part is misspelled (the closest key is looked for under the deepest part that exists); a key verl
leaves mandatory (`???`) exists and takes a value; `+key` under a missing parent makes the parent;
a value omegaconf refuses is an error naming the key, the value and our key; verl's config is
struct again after every override, also after a failed one; a plain model path is passed as it is;
compose's answer becomes our key-path error with its suggestions.

`verl_like()` (the audit test's small OmegaConf stand-in for verl's composed config) is reused.
"""

from __future__ import annotations

import pytest
from beyondagent_plugin_verl.backend import compose_error
from beyondagent_plugin_verl.compose import ComposeError, apply_overrides, resolve_model_path
from test_audit8_compose_overrides import OmegaConf, verl_like


def test_an_unknown_top_level_key_is_an_error_with_the_closest_section() -> None:
    cfg = verl_like()
    with pytest.raises(ComposeError) as caught:
        apply_overrides(cfg, [["trainr", 1, "backend.verl.trainr"]])
    assert caught.value.key == "trainr" and caught.value.suggestions == ["trainer"]
    assert "verl has no key 'trainr'" in str(caught.value)


def test_a_misspelled_middle_part_suggests_from_the_deepest_part_that_exists() -> None:
    cfg = verl_like()
    with pytest.raises(ComposeError) as caught:
        apply_overrides(cfg, [["actor_rollout_ref.actr.clip_ratio", 0.3, "backend.verl.x"]])
    assert caught.value.suggestions == ["actor_rollout_ref.actor"]
    assert caught.value.origin == "backend.verl.x"


def test_a_mandatory_value_verl_leaves_open_exists_and_takes_ours() -> None:
    cfg = verl_like()
    with OpenStruct(cfg):
        cfg.actor_rollout_ref.model.path = "???"
    apply_overrides(cfg, [["actor_rollout_ref.model.path", "/models/m", "model.path"]])
    assert cfg.actor_rollout_ref.model.path == "/models/m"


def test_a_plus_key_under_a_missing_parent_makes_the_parent_and_a_plain_key_there_is_an_error() -> None:
    cfg = verl_like()
    apply_overrides(cfg, [["+ray_kwargs.ray_init.num_gpus", 2, "backend.device"]])
    assert cfg.ray_kwargs.ray_init.num_gpus == 2
    with pytest.raises(ComposeError) as caught:  # the parent exists now, with a key: no new keys without "+"
        apply_overrides(cfg, [["ray_kwargs.ray_init.num_cpus", 4, "backend.device"]])
    assert caught.value.key == "ray_kwargs.ray_init.num_cpus"
    with pytest.raises(ComposeError):  # a parent that does not exist takes nothing either
        apply_overrides(cfg, [["critic.model.path", "/m", "critic.path"]])


def test_a_value_omegaconf_refuses_names_the_key_the_value_and_our_key() -> None:
    cfg = verl_like()
    with pytest.raises(ComposeError) as caught:  # `+` skips our existence check; a list has no key "x"
        apply_overrides(cfg, [["+trainer.logger.x", 1, "backend.verl.trainer.logger.x"]])
    message = str(caught.value)
    assert message.startswith("verl key 'trainer.logger.x' cannot be set to 1: ")
    assert caught.value.key == "trainer.logger.x" and caught.value.origin == "backend.verl.trainer.logger.x"


def test_verls_config_is_struct_again_after_each_override_and_after_a_failed_one() -> None:
    cfg = verl_like()
    apply_overrides(cfg, [["+trainer.extra", 1, "backend.verl.trainer.extra"]])
    assert OmegaConf.is_struct(cfg)
    with pytest.raises(ComposeError):
        apply_overrides(cfg, [["+trainer.logger.x", 1, "backend.verl.trainer.logger.x"]])
    assert OmegaConf.is_struct(cfg)


def test_later_overrides_win_over_earlier_ones_for_the_same_key() -> None:
    cfg = verl_like()
    apply_overrides(cfg, [["actor_rollout_ref.actor.clip_ratio", 0.25, "algorithm.clip_ratio"],
                          ["actor_rollout_ref.actor.clip_ratio", 0.3,
                           "backend.verl.actor_rollout_ref.actor.clip_ratio"]])
    assert cfg.actor_rollout_ref.actor.clip_ratio == 0.3
    assert cfg.actor_rollout_ref.actor.clip_ratio_low == 0.2  # a sibling is not touched


def test_a_plain_model_path_is_passed_as_it_is() -> None:
    assert resolve_model_path("/models/my-checkpoint") == "/models/my-checkpoint"


def test_composes_answer_becomes_our_key_path_error() -> None:
    answer = {"ok": False, "error": "verl has no key 'actor_rollout_ref.actor.clip_ratoi'",
              "key": "actor_rollout_ref.actor.clip_ratoi", "origin": "backend.verl.actor_rollout_ref.actor.clip_ratoi",
              "suggestions": ["actor_rollout_ref.actor.clip_ratio", "actor_rollout_ref.actor.clip_ratio_c"]}
    error = compose_error(answer, "spec.yaml")
    assert error.where == "spec.yaml, key backend.verl.actor_rollout_ref.actor.clip_ratoi"
    assert error.message == answer["error"]
    assert error.hint == "did you mean actor_rollout_ref.actor.clip_ratio or actor_rollout_ref.actor.clip_ratio_c?"
    bare = compose_error({"ok": False, "error": "verl's validate_config rejected the config: x"}, None)
    assert bare.where == "the spec" and "verl's config reference" in bare.hint


class OpenStruct:
    """`cfg` writable for the test's own set-up (verl's composed config is struct)."""

    def __init__(self, cfg: object):
        self.cfg = cfg

    def __enter__(self) -> None:
        OmegaConf.set_struct(self.cfg, False)

    def __exit__(self, *exc: object) -> None:
        OmegaConf.set_struct(self.cfg, True)
