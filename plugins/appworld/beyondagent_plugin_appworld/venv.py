"""The `appworld` venv: AppWorld's pinned stack beside the core and this plugin.

`appworld==0.1.3.post1` pins pydantic 1, which Ray >= 2.56 refuses, so Ray stays below 2.56
(for `--instances ray`); the core, `beyondagent-plugin-llm` (this plugin's requirement) and this
plugin are installed the way they are installed here (an editable checkout editable).
`appworld install` (offline, ~3-10 s) decrypts the apps' code into the venv. AppWorld's data is
not part of the venv: `beyondagent appworld setup` downloads it, `beyondagent appworld generate`
makes a small world.
"""

from __future__ import annotations

from beyondagent_core.venvs import VenvRecipe

APPWORLD = "appworld==0.1.3.post1"
RAY = "ray<2.56"

CHECK = """\
import appworld, pydantic, ray
from appworld.apps import get_all_apps
print(f"appworld {appworld.__version__}, pydantic {pydantic.VERSION}, ray {ray.__version__}, "
      f"{len(get_all_apps(skip_admin=True))} apps")
"""


def appworld_recipe() -> VenvRecipe:
    return VenvRecipe(
        name="appworld",
        steps=[[APPWORLD, RAY]],
        # This plugin's first-party requirements: beyondagent-plugin-envservice (the server the env runs
        # in), beyondagent-plugin-llm (its llm_judge grades synthetic tasks) and synthesis, llm's own.
        local=["beyondagent", "beyondagent-plugin-envservice", "beyondagent-plugin-synthesis", "beyondagent-plugin-llm",
               "beyondagent-plugin-appworld"],
        after=[("appworld", "install")],
        check=CHECK,
    )
