"""The spec's episode runner, built once per Trinity-RFT process from the spec file.

trinity builds a Workflow object per task (and its ADVANTAGE_FN once); the plugins, the run
context, the env opener and the tokenizer are built here once per process and reused.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

_RUNTIMES: dict[tuple[str, str], "Runtime"] = {}
_TOKENIZERS: dict[str, Any] = {}


class Runtime:
    def __init__(self, spec_path: str, run_dir: str, cwd: str | None = None):
        from beyondagent_core.context import RunContext, RunInfo
        from beyondagent_core.pipeline import prepare

        if cwd and Path(cwd).is_dir() and Path.cwd() != Path(cwd):
            # Ray starts this process elsewhere; the spec's relative paths (a workflow's entrypoint
            # file, a data file) mean what they meant where `beyondagent run` was started
            os.chdir(cwd)
        session = prepare(spec_path, [])
        spec = session.spec
        info = RunInfo(name=spec.run.name, run_dir=Path(run_dir), seed=spec.run.seed, spec=spec.redacted())
        self.context = RunContext(spec=spec, info=info, manager=session.manager)
        self._runner: Any = None

    @property
    def runner(self) -> Any:
        """The spec's workflow, env and judges (`EpisodeRunner`), made on first use."""
        if self._runner is None:
            self._runner = self.context.episode_runner()
        return self._runner


def runtime(spec_path: str, run_dir: str, cwd: str | None = None) -> Runtime:
    key = (str(spec_path), str(run_dir))
    if key not in _RUNTIMES:
        _RUNTIMES[key] = Runtime(str(spec_path), str(run_dir), cwd)
    return _RUNTIMES[key]


def tokenizer_of(model_path: str) -> Any:
    """The tokenizer the torch backend loads for `model_path` (beyondagent-plugin-torch's loader keeps
    the tiny model's pre-tokenizer), else transformers' AutoTokenizer."""
    if model_path not in _TOKENIZERS:
        try:
            from beyondagent_plugin_torch.models import load_tokenizer
        except ImportError:
            from transformers import AutoTokenizer

            _TOKENIZERS[model_path] = AutoTokenizer.from_pretrained(model_path)
        else:
            _TOKENIZERS[model_path] = load_tokenizer(model_path)
    return _TOKENIZERS[model_path]
