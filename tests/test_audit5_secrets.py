"""A URL's query value shaped like a token (16+ letters and digits, both in it) is masked whatever its
parameter is called, and only such a value (issue 37's fifth mutation audit)."""

from __future__ import annotations

from beyondagent_core.secrets import redact


def test_a_random_query_value_is_masked_under_any_name() -> None:
    url = "https://api.example.com/v1/items?ref=a1B2c3D4e5F6g7H8i9J0&page=2&q=hello&model=Qwen2-7B"
    assert redact(url) == "https://api.example.com/v1/items?ref=***&page=2&q=hello&model=Qwen2-7B"
