"""Parity tests against verl's own code run in the verl plugin's venv (verl 0.9.1 pins transformers<5.11).

`verl_parity_venv(where)` builds (or finds cached) that venv through the core's venv mechanism. Without
the verl plugin, or where pip cannot reach the package index to build it, the test is skipped with the
reason; in CI (`CI` set, as every CI service does, or BEYONDAGENT_REQUIRE_VERL_PARITY=1, which .ci/run
exports) either reason is a failure, so a parity check that could not run never passes as a skip.
"""

from __future__ import annotations

from beyondagent_core.plugins import PluginManager, Switches
from beyondagent_core.registry import Registry
from beyondagent_core.testing.must_run import skip_or_fail
from beyondagent_core.venvs import Venv, VenvBuildError, ensure_venv, registered_recipe

REQUIRE_VAR = "BEYONDAGENT_REQUIRE_VERL_PARITY"
HOW = "run in the verl plugin's venv (verl 0.9.1 pins transformers<5.11)"


def cannot_run(reason: str) -> None:
    """Skip the test for `reason`, or fail it where parity is required."""
    skip_or_fail(reason, REQUIRE_VAR)


def verl_parity_venv(where: str) -> Venv:
    """The verl plugin's venv, built first when it is not cached yet; `where` names the test."""
    manager = PluginManager(Switches(autoload=True)).load()
    record = manager.records.get("verl")
    if record is None or record.status != "ok":
        cannot_run("verl parity needs beyondagent-plugin-verl (its venv has verl): "
                   f"{record.error if record else 'not installed'}")
    recipe = registered_recipe(Registry(manager), "verl", where=where)
    try:
        return ensure_venv(recipe)
    except VenvBuildError as exc:
        if "could not get a package from the index" in str(exc):
            cannot_run(f"verl parity needs pip to reach the package index to build the verl venv: {exc}")
        raise
