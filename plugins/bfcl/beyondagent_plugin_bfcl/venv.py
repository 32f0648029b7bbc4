"""The `bfcl` venv: bfcl-eval beside the core and this plugin.

`bfcl-eval` pins numpy==1.26.4 and requires a dozen provider SDKs, tree-sitter 0.21, faiss and
sentence-transformers (which would pull CUDA torch), so it is installed `--no-deps` and only
what the modules we import need is added: its checkers import `constants.model_config`, which
imports every model handler, hence the SDKs; the multi-turn backends need mpmath. Each pin
below is bfcl-eval's own where it pins; `soundfile` is qwen-agent's undeclared import. The
check imports everything the env and the agreement run use, and prints the versions.
"""

from __future__ import annotations

from typing import Any

from beyondagent_core.venvs import VenvRecipe

BFCL = "bfcl-eval==2026.3.23"
# What `import bfcl_eval.eval_checker.eval_runner` and the backends need (found by importing).
REQUIREMENTS = (
    "numpy==1.26.4", "pandas==2.2.3", "mpmath==1.3.0", "filelock==3.20.0", "tree_sitter==0.21.3",
    "tree-sitter-java==0.21.0", "tree-sitter-javascript==0.21.4", "cohere==5.18.0", "mistralai==1.7.0",
    "datamodel-code-generator==0.25.7", "anthropic>=0.75.0", "openai>=1.86.0", "google-genai>=1.52.0", "boto3",
    "writer-sdk>=2.1.0", "qwen-agent", "soundfile", "python-dotenv>=1.0.1", "tqdm", "tenacity>=8.5.0", "overrides",
    "pydantic>=2.8.2", "requests",
)

CHECK = """\
import importlib.metadata as m
import bfcl_eval.eval_checker.eval_runner
import bfcl_eval.eval_checker.multi_turn_eval.func_source_code.math_api
from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING
import importlib
for name in ("GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI", "TicketAPI", "TradingBot", "TravelAPI",
             "VehicleControlAPI"):
    importlib.import_module(CLASS_FILE_PATH_MAPPING[name])
print(f"bfcl-eval {m.version('bfcl-eval')}, numpy {m.version('numpy')}, 8 backends, checkers and evaluator import")
"""


def bfcl_recipe() -> VenvRecipe:
    return VenvRecipe(
        name="bfcl",
        steps=[[BFCL, "--no-deps"], list(REQUIREMENTS)],
        # its first-party requirements: the env service (the server the env runs in) and the gateway
        local=["beyondagent", "beyondagent-plugin-envservice", "beyondagent-plugin-gateway", "beyondagent-plugin-bfcl"],
        check=CHECK,
    )


def bfcl_venv(*, rebuild: bool = False) -> Any:
    """The ready BFCL venv (built now if needed, each step printed)."""
    from beyondagent_core.venvs import ensure_venv_printed

    return ensure_venv_printed(bfcl_recipe(), "BFCL", takes="about two minutes", rebuild=rebuild)
