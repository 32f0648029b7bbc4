"""Remembered secrets written back to back are one masked span (`secrets._mask_known` merges spans
that touch as well as those that overlap): the text shows one `***`, not one per secret."""

from __future__ import annotations

import pytest

from beyondagent_core import secrets


@pytest.fixture(autouse=True)
def no_secrets():
    secrets.forget_all()
    yield
    secrets.forget_all()


def test_secrets_that_touch_are_masked_as_one() -> None:
    secrets.remember("alpha-secret-1")
    secrets.remember("beta-secret-22")
    assert secrets.redact("key=alpha-secret-1beta-secret-22 done") == "key=*** done"
    assert secrets.redact("alpha-secret-1 and beta-secret-22") == "*** and ***"
