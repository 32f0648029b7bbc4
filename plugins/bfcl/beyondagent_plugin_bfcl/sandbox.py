"""BFCL's backends in a child process: a model's calls never run in the env's own process.

BFCL runs a multi-turn call by `eval`-ing its text on live backend objects, and some backend
functions do as much work as their arguments ask: `power(base=10, exponent=100000000000)` is one
C operation that holds the GIL while its memory climbs toward 40 GB, for as long as it takes. Run in the env
service's process, such a call freezes every episode and `/healthz` with it; a timeout in that
process cannot stop it, because nothing else runs. `bounds.py` refuses the calls we know of
before they run; this module bounds everything else, in time and memory:

- **One child process per multi-turn episode** holds the episode's backend instances (BFCL's
  executor keeps them in its module's globals, as in BFCL's own runs) and runs its calls, its
  `valid_actions()` and BFCL's check of the episode. The env's process only waits on a pipe,
  which does not hold the GIL: the service answers everyone else meanwhile.
- **Memory**: the child's address space is capped (`RLIMIT_AS`, the env's `max_call_memory_mb`).
  A call that asks for more gets a MemoryError in the child, which BFCL reports as a failed call.
- **Time**: each request has a deadline (the env gives the calls of one step, and a check,
  `max_call_seconds` together). Past it the child is killed (SIGKILL stops a call that never
  yields the GIL), a fresh child is started and the episode's calls so far are replayed into it
  (`restore`), so the backends are as they were before the stopped call; the caller gets
  `CallStopped`. Should the replay itself not finish in time, `BackendsLost`.
- **Cheap children**: they are forked from a *zygote*, one helper process per env process (started
  once, `python -m beyondagent_plugin_bfcl.sandbox`) that has imported BFCL's backends and
  checker and always has the next child forked ahead. A child shares those modules' memory
  (~3 MB of its own) and starts clean: nothing one episode leaves behind (`mpmath`'s global
  precision, the `decimal` context, module globals) reaches the next. A child dies with the
  zygote (`PR_SET_PDEATHSIG`), the zygote when the env's process closes its end of the control
  socket. The calls of one step are one request; the child sends each result as it has it.

Measured here (2 busy shared cores; docs/bfcl.md, 'Bounds'): a multi-turn `reset` 0.5 ms in
process, 4.5-7.7 ms with a child; a step with one call 0.11 -> 0.27 ms, with ten 0.33 -> 1.1 ms.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

# What the zygote imports before it forks: BFCL's executor, checker and the multi-turn backends.
PRELOAD = (
    "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils",
    "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker",
    "bfcl_eval.eval_checker.multi_turn_eval.func_source_code.gorilla_file_system",
    "bfcl_eval.eval_checker.multi_turn_eval.func_source_code.math_api",
    "bfcl_eval.eval_checker.multi_turn_eval.func_source_code.message_api",
    "bfcl_eval.eval_checker.multi_turn_eval.func_source_code.posting_api",
    "bfcl_eval.eval_checker.multi_turn_eval.func_source_code.ticket_api",
    "bfcl_eval.eval_checker.multi_turn_eval.func_source_code.trading_bot",
    "bfcl_eval.eval_checker.multi_turn_eval.func_source_code.travel_booking",
    "bfcl_eval.eval_checker.multi_turn_eval.func_source_code.vehicle_control",
    "beyondagent_plugin_bfcl.checking",
    "beyondagent_plugin_bfcl.explore",
)
ZYGOTE_START_SECONDS = 60.0  # importing BFCL on a busy machine
FORK_SECONDS = 30.0
EMPTY_ERROR = "Error during execution: "  # what BFCL writes for an exception without a message


class CallStopped(Exception):
    """A call ran past the step's deadline (or its process died) and was stopped; the backends were
    restored. `results`: those of the calls before it; `changed`: whether they changed the state."""

    def __init__(self, results: list[str], changed: bool, why: str):
        super().__init__(why)
        self.results, self.changed = results, changed


class BackendsLost(Exception):
    """A call was stopped and the backends could not be restored (the replay ran out of time)."""

    def __init__(self, results: list[str], why: str):
        super().__init__(why)
        self.results = results


class _TimedOut(Exception):
    pass


class _Died(Exception):
    pass


# --- the env's side ------------------------------------------------------------------------------


class Backends:
    """The backend instances of one episode, in a child process (see the module docstring).

    `open(episode)` starts a child with the entry's backends and returns `{method: class}`;
    `run(texts, deadline)` runs the calls of one step (BFCL's result texts, and whether the state
    changed) or raises `CallStopped` / `BackendsLost`; `read_actions(shown)` and `check(...)` run in
    a child too; `close()` ends the child.
    """

    def __init__(self, *, seconds: float, memory_mb: int):
        self.seconds = seconds
        self.memory_mb = memory_mb
        self.episode: dict[str, Any] | None = None
        self.done: list[str] = []  # the calls run so far, replayed into a fresh child
        self.compared = 0  # how many of them had run when the state was last compared
        self.methods: dict[str, str] = {}
        self.child: _Child | None = None
        self.restores = 0

    def open(self, episode: dict[str, Any]) -> dict[str, str]:
        """A fresh child with `episode`'s backends (`initial_config`, `involved_classes`, `name`,
        `entry_id`, `long_context`): `{method name: class name}`, BFCL's own mapping."""
        self.close()
        self.episode, self.done, self.compared = episode, [], 0
        try:
            self._restore()
        except (_TimedOut, _Died) as exc:
            raise RuntimeError(f"BFCL's backends for {episode['entry_id']} did not start: {exc}") from None
        return dict(self.methods)

    def run(self, texts: list[str], deadline: float) -> tuple[list[str], bool]:
        """BFCL's results of the calls `texts`, one after another before `deadline` (a
        `time.monotonic()` value), and whether they changed the backends' public state. One
        request: the child sends each result as it has it."""
        child = self._live()
        results: list[str] = []
        changed = False
        try:
            for value in child.stream("run", (texts, True), len(texts) + 1, deadline):
                if len(results) < len(texts):
                    results.append(value)
                else:
                    changed = bool(value)
        except (_TimedOut, _Died) as exc:
            self.child = None
            self.done += texts[:len(results)]
            try:
                self._restore()
                changed = bool(self.child.request("changed", (), time.monotonic() + self.seconds))
            except (_TimedOut, _Died) as lost:
                self.close()
                raise BackendsLost(results, f"replaying the episode's {len(self.done)} calls did not finish in "
                                            f"{self.seconds:g} s ({lost})") from None
            self.compared = len(self.done)
            self.restores += 1
            raise CallStopped(results, changed, str(exc)) from None
        self.done += texts
        self.compared = len(self.done)
        return results, changed

    def read_actions(self, shown: list[str]) -> list[str]:
        return self._live().request("read_actions", (shown,), time.monotonic() + self.seconds)

    def check(self, *args: Any) -> Any:
        """`_World.check` in the episode's child (a fresh one when it has none); `CallStopped` past the deadline."""
        child = self.child
        try:
            if child is None:
                child = _Child.fork(self.memory_mb)
            return child.request("check", args, time.monotonic() + self.seconds)
        except (_TimedOut, _Died) as exc:
            if child is self.child:
                self.child = None
            raise CallStopped([], False, str(exc)) from None
        finally:
            if child is not None and child is not self.child:
                child.close()

    def close(self) -> None:
        child, self.child = self.child, None
        if child is not None:
            child.close()

    # --- helpers --------------------------------------------------------------------------------

    def _live(self) -> _Child:
        """The child with the episode's backends, restored first if it is gone (`BackendsLost` if it cannot be)."""
        if self.child is None:
            try:
                self._restore()
            except (_TimedOut, _Died) as exc:
                raise BackendsLost([], f"restoring the episode's {len(self.done)} calls failed ({exc})") from None
            self.restores += 1
        assert self.child is not None
        return self.child

    def _restore(self) -> None:
        """A fresh child with the episode's backends as they are: opened, and every call so far
        replayed, the state compared with as it was when it was last compared."""
        if self.episode is None:
            raise RuntimeError("open() the backends of an episode first")
        self.close()
        child = _Child.fork(self.memory_mb)
        try:
            deadline = time.monotonic() + self.seconds
            self.methods = child.request("open", (self.episode,), deadline)  # compares with the initial state
            head, tail = self.done[:self.compared], self.done[self.compared:]
            if head:
                for _ in child.stream("run", (head, True), len(head) + 1, deadline):
                    pass
            if tail:
                for _ in child.stream("run", (tail, False), len(tail), deadline):
                    pass
        except BaseException:
            child.close()
            raise
        self.child = child


class _Child:
    """One child process and the env's end of its pipe."""

    def __init__(self, pid: int, conn: Connection):
        self.pid, self.conn = pid, conn

    @classmethod
    def fork(cls, memory_mb: int) -> _Child:
        return cls(*_zygote().fork(memory_mb))

    def request(self, op: str, args: tuple[Any, ...], deadline: float) -> Any:
        """The child's answer; `_TimedOut` past `deadline` (the child is killed), `_Died` if it is gone."""
        return next(self.stream(op, args, 1, deadline))

    def stream(self, op: str, args: tuple[Any, ...], count: int, deadline: float) -> Iterator[Any]:
        """The child's `count` answers to one request, each as it comes, all before `deadline`."""
        try:
            self.conn.send((op, args))
        except (OSError, EOFError) as exc:
            self.close()
            raise _Died(f"its process exited ({exc})") from None
        for _ in range(count):
            try:
                ready = self.conn.poll(max(0.0, deadline - time.monotonic()))  # waits without the GIL
            except (OSError, EOFError):
                ready = True  # recv() says how
            if not ready:
                self.kill()
                raise _TimedOut("stopped at the deadline")
            try:
                status, value = self.conn.recv()
            except (OSError, EOFError):
                self.close()
                raise _Died("its process exited") from None
            if status == "error":
                self.close()
                raise RuntimeError(f"BFCL's backends: {value}")
            yield value

    def kill(self) -> None:
        """Stop a child that is still running a request (SIGKILL), then close the pipe."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.conn.close()

    def close(self) -> None:
        """End a child that waits for a request: it exits when its pipe closes."""
        self.conn.close()


# --- the zygote ----------------------------------------------------------------------------------


class _Zygote:
    """The env process's handle on its zygote: `fork(memory_mb)` -> (pid, Connection).

    One child is always asked for ahead (`spare`): the zygote forks it while the env does other
    work, and the next `fork` only reads its pid, so an episode's start does not wait for a fork.
    """

    def __init__(self) -> None:
        from beyondagent_core.secrets import is_secret_key

        control, theirs = socket.socketpair()
        environment = {key: value for key, value in os.environ.items() if not is_secret_key(key)}  # no tokens, keys
        self.process = subprocess.Popen(
            [sys.executable, "-m", "beyondagent_plugin_bfcl.sandbox", str(theirs.fileno())],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=environment)
        theirs.close()
        self.control = control
        self.lock = threading.Lock()
        self.spare: tuple[int, socket.socket] | None = None  # (memory_mb, our end): asked for, pid not read yet
        control.settimeout(ZYGOTE_START_SECONDS)
        try:
            ready = control.recv(5)
        except OSError:
            ready = b""
        if ready != b"ready":
            self.close()
            raise RuntimeError("BFCL's backend process (the zygote) did not start; its error is in the log above")
        control.settimeout(FORK_SECONDS)

    def alive(self) -> bool:
        return self.process.poll() is None

    def fork(self, memory_mb: int) -> tuple[int, Connection]:
        mine: socket.socket | None = None
        with self.lock:
            try:
                if self.spare is None or self.spare[0] != memory_mb:
                    self._drop_spare()
                    self._ask(memory_mb)
                assert self.spare is not None
                mine, self.spare = self.spare[1], None
                reply = self.control.recv(8)
                if len(reply) == 8:
                    self._ask(memory_mb)  # the next one, forked while this one serves
            except OSError:
                reply = b""
        if mine is None or len(reply) != 8:
            if mine is not None:
                mine.close()
            raise _Died("BFCL's backend process (the zygote) is gone")
        return struct.unpack("!q", reply)[0], Connection(mine.detach())

    def _ask(self, memory_mb: int) -> None:
        mine, theirs = socket.socketpair()
        try:
            socket.send_fds(self.control, [struct.pack("!q", memory_mb)], [theirs.fileno()])
        except OSError:
            mine.close()
            raise
        finally:
            theirs.close()
        self.spare = (memory_mb, mine)

    def _drop_spare(self) -> None:
        if self.spare is not None:
            _, mine = self.spare
            self.spare = None
            mine.close()  # the child exits on EOF
            self.control.recv(8)  # its pid

    def close(self) -> None:
        self.control.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()


_zygote_lock = threading.Lock()
_the_zygote: _Zygote | None = None


def start_zygote() -> None:
    """Start this process's zygote now (an env's `preload()`), not at the first multi-turn episode."""
    _zygote()


def _zygote() -> _Zygote:
    global _the_zygote
    with _zygote_lock:
        if _the_zygote is None or not _the_zygote.alive():
            _the_zygote = _Zygote()
        return _the_zygote


def _zygote_main(fd: int) -> None:
    """Import BFCL once, then fork one child per request on the control socket, until it closes."""
    import ctypes  # noqa: F401 - what a child needs, imported once here (`_child`, `_die_with_parent`)
    import importlib
    import resource  # noqa: F401

    for module in PRELOAD:
        try:
            importlib.import_module(module)
        except ImportError:  # a backend whose dependency is missing: its tasks fail as in BFCL
            pass
    gc.freeze()  # the children's garbage collector leaves these objects (and their shared pages) alone
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the env process's to handle
    control = socket.socket(fileno=fd)
    control.sendall(b"ready")
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 8, 1)
        except OSError:
            return
        if not message or not fds:
            return
        pid = os.fork()
        if pid == 0:
            control.close()
            _child(fds[0], struct.unpack("!q", message)[0])
            os._exit(0)
        os.close(fds[0])
        control.sendall(struct.pack("!q", pid))


# --- the child -----------------------------------------------------------------------------------


def _child(fd: int, memory_mb: int) -> None:
    """Serve one episode's requests on `fd` until EOF; address space capped at `memory_mb`."""
    import resource

    _die_with_parent()
    if memory_mb > 0:
        limit = memory_mb * 1024 * 1024
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ValueError, OSError):  # a platform without RLIMIT_AS (macOS): the time bound remains
            pass
    conn = Connection(fd)
    world = _World(memory_mb)
    while True:
        try:
            op, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if op == "run":  # a stream: each call's result as it is known, then (`compare`) whether the state changed
                texts, compare = args
                for text in texts:
                    _send(conn, ("ok", world.run(text)))
                if compare:
                    _send(conn, ("ok", world.changed()))
                continue
            reply: tuple[str, Any] = ("ok", getattr(world, op)(*args))
        except (OSError, EOFError):
            return
        except BaseException as exc:  # noqa: BLE001 - the failure goes back to the env
            reply = ("error", f"{type(exc).__name__}: {exc}"[:2000])
        try:
            _send(conn, reply)
        except (OSError, EOFError):
            return


def _send(conn: Connection, reply: tuple[str, Any]) -> None:
    try:
        conn.send(reply)
    except (OSError, EOFError):
        raise
    except Exception as exc:  # noqa: BLE001 - a reply too large for the memory cap, or unpicklable
        conn.send(("error", f"{type(exc).__name__}: the reply could not be sent"))


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, ctypes.c_ulong(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class _World:
    """The child's side: the episode's backend instances, and what the env asks of them."""

    def __init__(self, memory_mb: int):
        self.memory_mb = memory_mb
        self.episode: dict[str, Any] = {}
        self.instances: dict[str, Any] = {}
        self.state: Any = None

    def open(self, episode: dict[str, Any]) -> dict[str, str]:
        import inspect

        from beyondagent_plugin_bfcl.explore import public_state

        self.episode = episode
        self.instances = self._execute([])[1]
        self.state = public_state(self.instances)  # what `changed()` compares with first
        methods: dict[str, str] = {}
        for class_name, instance in self.instances.items():  # BFCL's order: a later class wins a name
            for name, _ in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not name.startswith("_"):
                    methods[name] = class_name
        return methods

    def run(self, text: str) -> str:
        try:
            result = self._execute([text])[0][0]
        except BaseException as exc:  # noqa: BLE001 - BFCL catches Exception; anything else fails the call too
            return f"Error during execution: {type(exc).__name__}: {exc}"
        if result == EMPTY_ERROR:  # a MemoryError has no message
            result += (f"the call failed without a message (as a MemoryError does; a call here may use "
                       f"{self.memory_mb} MiB)")
        return result

    def changed(self) -> bool:
        from beyondagent_plugin_bfcl.explore import public_state

        after = public_state(self.instances)
        changed, self.state = after != self.state, after
        return changed

    def read_actions(self, shown: list[str]) -> list[str]:
        from beyondagent_plugin_bfcl.explore import read_actions

        return read_actions(self.instances, set(shown))

    def check(self, entry: dict[str, Any], ground_truth: Any, decoded: Any, style: str, force_quit: bool,
              partial: bool) -> tuple[dict[str, Any], int | None]:
        """BFCL's verdict on the episode, and with `partial` the turns passed (`checking.py`)."""
        from beyondagent_plugin_bfcl import checking

        verdict = checking.check_multi_turn(entry, ground_truth, decoded, style=style, force_quit=force_quit)
        passed = None
        if partial:
            passed = len(ground_truth) if verdict["valid"] else checking.turns_passed(entry, ground_truth, decoded,
                                                                                     style=style)
        return verdict, passed

    def _execute(self, texts: list[str]) -> tuple[list[str], dict[str, Any]]:
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

        episode = self.episode
        return execute_multi_turn_func_call(texts, episode["initial_config"], episode["involved_classes"],
                                            episode["name"], episode["entry_id"],
                                            long_context=episode["long_context"], is_evaL_run=False)


if __name__ == "__main__":
    _zygote_main(int(sys.argv[1]))
