"""Secrets planted in a spec, and a search for them in everything a run wrote.

A backend's contract: no secret reaches a file, whatever the backend writes for itself or its
workers (verl's and trinity's worker `spec.yaml`, composed configs, checkpoints, events). Plant
every kind the spec can carry with `PLANTED_OVERRIDES` (a URL's userinfo, a query value, a path
token and a fragment in `llm.base_url`, and a whole value from an environment variable, which
`PLANTED_ENV` sets), run, then assert `leaks(run_dir, output) == []`:

    result = subprocess.run([..., "run", spec, *PLANTED_OVERRIDES, "--dry-run"], env={**os.environ, **PLANTED_ENV})
    assert leaks(tmp_path, result.stdout + result.stderr) == []

The `llm` endpoint is never contacted by a run that does not explore or judge with it (port 9).
"""

from __future__ import annotations

import base64
from pathlib import Path

USER, PASSWORD = "planted-user", "PlantedPass1x"
QUERY_VALUE = "PlantedQueryKey2x"
PATH_TOKEN = "a1b2c3d4e5f6g7h8PlantedPathToken3x"  # a long random-looking path segment, as API keys are
FRAGMENT_VALUE = "PlantedFragment4x"
ENV_VALUE = "PlantedEnvValue5x"
ENV_VAR = "BEYONDAGENT_TEST_PLANTED_MODEL"

PLANTED_URL = (f"http://{USER}:{PASSWORD}@127.0.0.1:9/v1/{PATH_TOKEN}?api_key={QUERY_VALUE}&x=1"
               f"#access_token={FRAGMENT_VALUE}")
PLANTED_OVERRIDES: tuple[str, ...] = (f"llm.base_url={PLANTED_URL}", "llm.model=${oc.env:" + ENV_VAR + "}")
PLANTED_ENV: dict[str, str] = {ENV_VAR: ENV_VALUE}
# Each secret as it could be written: as planted, and the userinfo as a Basic header carries it.
SECRETS: tuple[str, ...] = (PASSWORD, QUERY_VALUE, PATH_TOKEN, FRAGMENT_VALUE, ENV_VALUE,
                            base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())


def leaks(root: Path, output: str = "") -> list[str]:
    """`path: secret` for each file under `root` (bytes, any format) that holds a planted secret,
    and `output: secret` for one in `output` (what the command printed)."""
    found = [f"output: {secret}" for secret in SECRETS if secret in output]
    for path in sorted(Path(root).rglob("*")):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            found += [f"{path}: {secret}" for secret in SECRETS if secret.encode() in data]
    return found


def files_under(root: Path) -> list[Path]:
    """Every file under `root` (what a test says it searched)."""
    return sorted(p for p in Path(root).rglob("*") if p.is_file())
