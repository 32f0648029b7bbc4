"""BeyondAgent's first-party mixers: `original`, `synthetic` and `ratio` (the default).

A mixer turns the original and synthetic tasks into one epoch's training list; the backend
calls it again every epoch. The factories are `"module:attr"` strings, so the mixers module
is imported only when a spec selects one of them.
"""

from __future__ import annotations

from beyondagent_core import MixerSpec, hookimpl
from beyondagent_plugin_mixers.config import OriginalConfig, RatioConfig, SyntheticConfig

__all__ = ["OriginalConfig", "RatioConfig", "SyntheticConfig", "beyondagent_mixers"]

_MIXERS = "beyondagent_plugin_mixers.mixers"


@hookimpl
def beyondagent_mixers() -> list[MixerSpec]:
    return [
        MixerSpec(name="original", factory=f"{_MIXERS}:Original", config_cls=OriginalConfig,
                  summary="The original tasks only, reshuffled each epoch."),
        MixerSpec(name="synthetic", factory=f"{_MIXERS}:Synthetic", config_cls=SyntheticConfig,
                  summary="The synthetic tasks only, optionally capped per seed task."),
        MixerSpec(name="ratio", factory=f"{_MIXERS}:Ratio", config_cls=RatioConfig,
                  summary="All originals plus int(len(original) * ratio) sampled synthetic tasks."),
    ]
