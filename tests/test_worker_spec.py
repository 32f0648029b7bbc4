"""The spec handed to verl's and trinity's workers holds no secret (issue 36, item 3): whole-value
secrets and values with a secret inside (a URL's userinfo, query value, path token, fragment) are
`${oc.env:VAR}` references, and the workers' environment gives back exactly the run's spec."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml
from omegaconf import OmegaConf

from beyondagent_core.worker_spec import worker_spec

SECRET_URLS = {
    "userinfo": "http://alice:Pa55wordQ@10.0.0.1:8000/v1",
    "query": "http://10.0.0.1:8000/v1?api_key=QueryKey123&model=x",
    "path token": "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "random path piece": "http://10.0.0.1/v1/sk4f9a8b7c6d5e4f3a2b1c/chat",
    "fragment": "http://10.0.0.1:8000/v1#access_token=FragTok987",
}


@pytest.mark.parametrize("kind", sorted(SECRET_URLS))
def test_a_secret_inside_a_value_goes_to_the_environment(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    url = SECRET_URLS[kind]
    resolved = {"llm": {"model": "m", "base_url": url}, "env": {"name": "x", "service": "http://127.0.0.1:8000"},
                "backend": {"name": "verl", "verl": {"a.b.c": ["keep", url]}},
                "plugins": {"settings": {"notify": {"urls": ["json://localhost:9/hook"]}}}}
    spec = SimpleNamespace(resolved=resolved, secrets={"plugins.settings.notify.urls[0]"})
    written, env = worker_spec(spec, "WORKER_SECRET_{}")
    text = yaml.safe_dump(written)
    assert url not in text and "json://localhost:9/hook" not in text
    assert written["llm"]["base_url"].startswith("${oc.env:WORKER_SECRET_")
    assert written["env"]["service"] == "http://127.0.0.1:8000" and written["backend"]["verl"]["a.b.c"][0] == "keep"
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    assert OmegaConf.to_container(OmegaConf.create(written), resolve=True) == resolved  # what the worker reads
