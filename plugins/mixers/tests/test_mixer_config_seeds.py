"""Each mixer's own `seed` reaches its draws (a seed of 0 included).

The `original` and `synthetic` mixers (not only `ratio`, which test_mixers checks) draw from
`seed` when it is set: the same mix under any run seed, another mix under another `seed`; unset,
the run seed decides. Inputs are the plain task lists of test_mixers.
"""

from __future__ import annotations

import pytest
from beyondagent_plugin_mixers.config import OriginalConfig, RatioConfig, SyntheticConfig
from beyondagent_plugin_mixers.mixers import Original, Ratio, Synthetic
from test_mixers import ORIGINAL, SYNTHETIC, ids

MIXERS = [(Original, OriginalConfig, {}), (Synthetic, SyntheticConfig, {"per_seed_cap": 2}),
          (Ratio, RatioConfig, {"synthetic_ratio": 0.5})]


@pytest.mark.parametrize(("mixer", "config", "keys"), MIXERS)
def test_the_mixers_own_seed_replaces_the_run_seed(mixer, config, keys) -> None:
    seeded = mixer(config(seed=5, **keys))
    first = ids(seeded.mix(ORIGINAL, SYNTHETIC, epoch=1, seed=1))
    assert ids(seeded.mix(ORIGINAL, SYNTHETIC, epoch=1, seed=2)) == first  # the run seed no longer matters
    assert ids(mixer(config(seed=6, **keys)).mix(ORIGINAL, SYNTHETIC, epoch=1, seed=1)) != first
    unseeded = mixer(config(**keys))
    assert ids(unseeded.mix(ORIGINAL, SYNTHETIC, epoch=1, seed=5)) == first  # unset: the run seed, drawn alike
    assert ids(unseeded.mix(ORIGINAL, SYNTHETIC, epoch=1, seed=6)) != first


def test_a_seed_of_zero_is_a_seed_not_unset() -> None:
    mixer = Original(OriginalConfig(seed=0))
    assert mixer.mix(ORIGINAL, SYNTHETIC, epoch=0, seed=3) == mixer.mix(ORIGINAL, SYNTHETIC, epoch=0, seed=4)
    assert mixer.mix(ORIGINAL, SYNTHETIC, epoch=0, seed=3) == Original(OriginalConfig()).mix(ORIGINAL, SYNTHETIC,
                                                                                               epoch=0, seed=0)
