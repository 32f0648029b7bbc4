"""User-facing errors: what was wrong, where, and what to do about it.

Every error a user can cause (a bad spec, an unknown name, a broken plugin, a malformed
record) is a `BeyondAgentError`. The CLI prints it as a few plain lines and exits with
`exit_code`; no traceback reaches the user unless they ask for it with `-v`.
"""

from __future__ import annotations


class BeyondAgentError(Exception):
    """An error the user can act on.

    `message` says what was wrong, `where` points at it (a file and line, a spec key path,
    a plugin and its distribution) and `hint` says what to do.
    """

    exit_code = 2

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where
        self.hint = hint

    def __str__(self) -> str:
        lines = [self.message]
        if self.where:
            lines.append(f"  where: {self.where}")
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)


class SpecError(BeyondAgentError):
    """The spec file or an override is wrong: syntax, unknown key, wrong type, missing value."""


class PluginError(BeyondAgentError):
    """A plugin could not be loaded, registered, or did something the contract forbids."""


class UnknownComponentError(BeyondAgentError):
    """A spec selects a component name that no loaded plugin provides."""


class AmbiguousComponentError(BeyondAgentError):
    """A spec selects a name that two or more plugins provide."""


class RequirementError(BeyondAgentError):
    """`plugins.require` in the spec is not satisfied by what is installed."""


class DataError(BeyondAgentError):
    """A data file (JSONL, parquet) holds a record that cannot be read."""


class RunError(BeyondAgentError):
    """A run could not go on (a component failed at run time); exit code 1."""

    exit_code = 1


class EnvMethodMissing(AttributeError):
    """`AsyncEnv.call(method)` asked an env for an optional method it does not have."""

    def __init__(self, env: str, method: str):
        super().__init__(f"env {env!r} has no method {method!r}")
        self.env = env
        self.method = method
