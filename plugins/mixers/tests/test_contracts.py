"""The core's mixer contract suite, run against each mixer built through the registry.

Needs the core's pytest plugin (`-p beyondagent_core.testing`, in the root addopts).
"""

from __future__ import annotations

from typing import Any

import pytest

from beyondagent_core.testing.contracts import MixerContract

pytestmark = pytest.mark.beyondagent_plugins("mixers")


class TestOriginal(MixerContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "original"}


class TestSynthetic(MixerContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "synthetic", "per_seed_cap": 4}


class TestRatio(MixerContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "ratio", "synthetic_ratio": 2, "per_seed_cap": 6}


class TestRatioLinear(MixerContract):
    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        return {"name": "ratio", "schedule": "linear", "synthetic_ratio": 3.0, "final_ratio": 0.5,
                "schedule_epochs": 4, "use_original": False, "shuffle": False}
