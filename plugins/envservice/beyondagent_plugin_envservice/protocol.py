"""The wire protocol: AgentEvolver's EnvService requests and replies, and our error replies.

Every endpoint but `GET /healthz` and `GET /stats` is a POST whose JSON body is
`{"env_type", "task_id", "instance_id", "messages", "params"}` (AgentEvolver's client always
sends all five; `messages` and `params` default to `{}`, the others may be null). A reply is
`{"success": true, "data": ...}`. An error reply is
`{"success": false, "error": "<one line>", "code": "<error code>", "retryable": bool, "detail": "<one line>"}`
(`detail` is where FastAPI, and so AgentEvolver's server, puts its message) with the status
code of `ServiceError`. Both sides of the wire use this module, so they cannot drift apart.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import attrs

from beyondagent_core.protocols import EnvReset, EnvStep
from beyondagent_core.types import Reward

try:  # orjson is optional: about 5x faster than json on our small replies
    import orjson
except ImportError:  # pragma: no cover - exercised where orjson is absent
    orjson = None

POST_ENDPOINTS: tuple[str, ...] = ("create", "step", "evaluate", "get_info", "release", "get_env_profile")
FULL_REWARD_PARAM = "reward"
"""`params: {"reward": "full"}` on `/evaluate` returns the whole Reward, not just the score."""


class ServiceError(Exception):
    """An error reply: HTTP `status`, a one-line `message`, a machine-readable `code`.

    `retryable` tells clients whether sending the same request again can succeed (a server
    going down: yes; an env that raised or hung: no).
    """

    def __init__(self, status: int, code: str, message: str, *, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retryable = retryable

    def body(self) -> dict[str, Any]:
        return {"success": False, "error": self.message, "code": self.code,
                "retryable": self.retryable, "detail": self.message}


def bad_request(message: str) -> ServiceError:
    return ServiceError(400, "bad_request", message)


@attrs.frozen
class Request:
    """One parsed request body."""

    env_type: str | None = None
    task_id: str | None = None
    instance_id: str | None = None
    messages: Any = attrs.field(factory=dict)
    params: dict[str, Any] = attrs.field(factory=dict)

    def require(self, field: str) -> str:
        """The value of a required string field, or a 400 naming it."""
        value = getattr(self, field)
        if not value:
            raise bad_request(f"{field} is required")
        return value


def parse_request(body: bytes) -> Request:
    """Parse and check a request body; a 400 names the field that is wrong."""
    if not body.strip():
        data: Any = {}
    else:
        try:
            data = loads(body)
        except ValueError as exc:
            raise bad_request(f"the request body is not valid JSON: {_first_line(exc)}") from None
        except RecursionError:
            raise bad_request("the request body is JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise bad_request(f"the request body must be a JSON object, got {_json_type(data)}")
    fields: dict[str, Any] = {}
    for name in ("env_type", "task_id", "instance_id"):
        value = data.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and name == "task_id":
            value = str(value)  # some datasets number their tasks
        if value is not None and not isinstance(value, str):
            raise bad_request(f"{name} must be a string or null, got {_json_type(value)}")
        if value is not None:
            _check_id(name, value)
        fields[name] = value
    messages = data.get("messages")
    fields["messages"] = {} if messages is None else messages
    params = data.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise bad_request(f"params must be a JSON object, got {_json_type(params)}")
    fields["params"] = params
    return Request(**fields)


MAX_ID_CHARS = 256
ENV_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(/[A-Za-z0-9][A-Za-z0-9_.\-]*)?$")


def _check_id(name: str, value: str) -> None:
    """Ids are short printable text (they reach logs): no control characters, no paths."""
    if len(value) > MAX_ID_CHARS:
        raise bad_request(f"{name} is {len(value)} characters; at most {MAX_ID_CHARS}")
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        raise bad_request(f"{name} must not contain control characters")
    if name == "env_type" and not ENV_TYPE.match(value):
        raise bad_request(f"env_type must be an env name or plugin/name (letters, digits, '_', '.', '-'), "
                          f"got {value[:60]!r}")


# --- replies -----------------------------------------------------------------------------------


def ok(data: Any, success: bool = True) -> dict[str, Any]:
    return {"success": success, "data": data}


def reset_reply(reset: EnvReset, *, instance_id: str, task_id: str) -> dict[str, Any]:
    """`/create`'s data: AgentEvolver's client reads `data["info"]["instance_id"]`."""
    info = {**reset.info, "instance_id": instance_id, "task_id": task_id}
    return {"state": list(reset.messages), "reward": 0, "is_terminated": False, "info": info}


def step_reply(step: EnvStep) -> dict[str, Any]:
    return {"state": list(step.observation), "reward": step.reward,
            "is_terminated": step.terminated, "info": dict(step.info)}


def evaluate_reply(reward: Reward, params: dict[str, Any]) -> Any:
    """The score as AgentEvolver returns it, or the whole Reward when asked (`params.reward = "full"`)."""
    if params.get(FULL_REWARD_PARAM) == "full":
        return {"score": reward.score, "success": reward.success, "reason": reward.reason,
                "details": dict(reward.details)}
    return reward.score


# --- reading replies (the client side) ---------------------------------------------------------


def parse_reset(data: Any) -> EnvReset:
    if not isinstance(data, dict) or not isinstance(data.get("state"), list):
        raise ValueError(f"/create must return {{state: [messages], info: {{...}}}}, got {_short(data)}")
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    return EnvReset(messages=list(data["state"]), info=dict(info))


def parse_step(data: Any) -> EnvStep:
    if not isinstance(data, dict) or not isinstance(data.get("state"), list):
        raise ValueError(f"/step must return {{state: [messages], reward, is_terminated, info}}, got {_short(data)}")
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    return EnvStep(observation=list(data["state"]), reward=float(data.get("reward") or 0.0),
                   terminated=bool(data.get("is_terminated")), info=dict(info))


def parse_reward(data: Any) -> Reward:
    """A `/evaluate` reply as a Reward.

    Our server answers `{score, success, reason, details}` when asked; a bare number (what
    AgentEvolver's envs return) becomes `Reward(score, success=score >= 1.0)`: full marks
    count as success, partial credit does not.
    """
    if isinstance(data, dict) and "score" in data:
        score = _score(data["score"])
        success = data.get("success")
        details = data.get("details") if isinstance(data.get("details"), dict) else {}
        return Reward(score=score, success=bool(score >= 1.0 if success is None else success),
                      reason=str(data.get("reason") or ""), details=dict(details))
    score = _score(data)
    return Reward(score=score, success=score >= 1.0)


def _score(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"/evaluate must return a finite number, got {_short(value)}")
    return float(value)


# --- JSON --------------------------------------------------------------------------------------


def _default(value: Any) -> Any:
    """What JSON cannot hold as is: attrs records as dicts, numpy scalars as numbers, else text."""
    if attrs.has(type(value)):
        return attrs.asdict(value, recurse=False)
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def dumps(value: Any) -> bytes:
    if orjson is not None:
        try:
            return orjson.dumps(value, default=_default, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:
            pass  # e.g. an int too big for orjson: the slow path handles it
    return json.dumps(value, default=_default, ensure_ascii=False, separators=(",", ":")).encode()


def loads(body: bytes) -> Any:
    if orjson is not None:
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise ValueError(str(exc)) from None
    return json.loads(body)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", str: "a string", int: "a number", float: "a number",
            list: "an array", dict: "an object"}.get(type(value), type(value).__name__)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def one_line(exc: BaseException) -> str:
    """`Type: first line of the message`, what an error reply says about an env's exception."""
    return f"{type(exc).__name__}: {_first_line(exc)}" if str(exc).strip() else type(exc).__name__


def format_traceback(exc: BaseException) -> str:
    """The traceback for the server log (error replies carry `one_line` only)."""
    import traceback

    return "".join(traceback.format_exception(exc)).rstrip()
