"""`beyondagent env serve`: host a registered environment over HTTP.

    beyondagent env serve --env NAME [--config KEY=VALUE ...] [--host 127.0.0.1] [--port 8000]
        [--instances thread|ray|process] [--ttl SECONDS] [--max-instances N] [--call-timeout SECONDS]
        [--token-env VAR] [--max-body-bytes N] [--header-timeout S] [--body-timeout S] [--max-connections N]
        [--threads N] [--inline-calls]
        [--ray-num-cpus X] [--ray-envs-per-actor N] [--ray-max-actors N] [--ray-address ADDR]
        [--process-warm N] [--process-max-workers N] [--process-memory-mb N]

The env is built from the plugin registry by name; `--config` values are merged over its
config class exactly like the spec's `env` block (a typo names the key). One env is built and
closed before serving, so a bad config fails at start, not at the first `/create`. Numeric
options are range-checked as they are parsed (`beyondagent_core.arguments`): a value out of
range is a usage error naming the range. This module is imported by the CLI at start-up, so
Starlette, uvicorn and Ray are imported only inside `serve_command`.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from beyondagent_core.arguments import PORT, number, seconds
from beyondagent_core.errors import BeyondAgentError, SpecError
from beyondagent_core.logs import get_logger

log = get_logger("beyondagent.envservice")

WHERE = "beyondagent env serve"


def add_env_arguments(env: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    """`env serve`'s arguments under the `env` command (the commands hook's factory); its handler."""
    # `-v` after `serve` too, as the core's commands take it (SUPPRESS: a subcommand must not reset it).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="debug events and full tracebacks")
    sub = env.add_subparsers(dest="env_command", metavar="COMMAND")
    serve = sub.add_parser("serve", parents=[common], help="Host a registered environment over HTTP.",
                           description="Host a registered environment over HTTP (POST /create, /step, /evaluate, "
                           "/get_info, /release, /get_env_profile; GET /healthz, /stats).")
    serve.add_argument("--env", required=True, metavar="NAME", help="the environment name (see `beyondagent plugins`)")
    serve.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                       help="the env's config, e.g. --config size=8 max_steps=30")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=PORT, default=8000, help="port (0 picks a free one; default 8000)")
    serve.add_argument("--instances", choices=("thread", "ray", "process"), default="thread",
                       help="envs in this process on worker threads (default), in Ray actors, or each in its "
                       "own worker process (for envs that must own their process, like AppWorld)")
    serve.add_argument("--ttl", type=seconds(), default=600.0, help="seconds an idle instance lives (default 600)")
    serve.add_argument("--max-instances", type=number(int, ge=1, le=1_000_000), default=256,
                       help="the cap on live instances (default 256)")
    serve.add_argument("--call-timeout", type=seconds(), default=60.0,
                       help="seconds one env call may take before 504 (default 60)")
    serve.add_argument("--token-env", metavar="VAR",
                       help="require 'Authorization: Bearer <token>' with the token read from this variable")
    serve.add_argument("--max-body-bytes", type=number(int, ge=1024, le=2**30), default=4 * 1024 * 1024,
                       help="largest request body accepted (default 4 MiB)")
    serve.add_argument("--header-timeout", type=seconds(), default=10.0,
                       help="seconds a connection may take to send a request's headers before it is closed "
                            "(slow clients; default 10)")
    serve.add_argument("--body-timeout", type=seconds(), default=30.0,
                       help="seconds a request's body may take to arrive before 408 (default 30)")
    serve.add_argument("--max-connections", type=number(int, ge=1, le=1_000_000), default=1024,
                       help="open connections served at once; past it requests get 503 (default 1024)")
    serve.add_argument("--threads", type=number(int, ge=1, le=4096), default=16,
                       help="worker threads for env calls (thread mode)")
    serve.add_argument("--inline-calls", action="store_true",
                       help="run env calls on the event loop, not worker threads: fastest for envs whose calls "
                       "take microseconds, but a hung call stalls the server (no call timeout)")
    serve.add_argument("--ray-num-cpus", type=number(float, ge=0, le=1024), default=0.25,
                       help="CPUs each Ray actor asks for (default 0.25)")
    serve.add_argument("--ray-envs-per-actor", type=number(int, ge=1, le=100_000), default=4,
                       help="envs one Ray actor hosts (default 4)")
    serve.add_argument("--ray-max-actors", type=number(int, ge=1, le=100_000), default=64,
                       help="the most Ray actors (default 64)")
    serve.add_argument("--ray-address", default=None, help="a Ray cluster to join (default: start a local one)")
    serve.add_argument("--process-warm", type=number(int, ge=0, le=4096), default=1,
                       help="worker processes started ahead, env built (process mode; default 1)")
    serve.add_argument("--process-memory-mb", type=number(int, ge=64, le=2**30), default=None,
                       help="cap each env worker's memory (address space, MiB) in --instances process")
    serve.add_argument("--process-max-workers", type=number(int, ge=1, le=4096), default=64,
                       help="the most live worker processes (process mode; default 64)")
    # The launcher's: stop when the run that started us is gone.
    serve.add_argument("--exit-with-parent", type=number(int, ge=1, le=2**31 - 1), default=None,
                       help=argparse.SUPPRESS)
    env.set_defaults(env_parser=env)
    return run_env_command


def run_env_command(args: argparse.Namespace) -> int:
    if getattr(args, "env_command", None) != "serve":
        args.env_parser.print_help()
        return 0
    return serve_command(args)


def parse_config(pairs: Sequence[str]) -> dict[str, Any]:
    """`KEY=VALUE` pairs (values read as YAML, dotted keys nest) as a dict."""
    import yaml
    from omegaconf import OmegaConf
    from omegaconf import errors as oc_errors

    config = OmegaConf.create({})
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise SpecError(f"--config {pair!r} is not KEY=VALUE", where=WHERE, hint="write e.g. --config size=8")
        try:
            OmegaConf.update(config, key.strip(), yaml.safe_load(value) if value.strip() else "",
                             merge=True, force_add=True)
        except (yaml.YAMLError, oc_errors.OmegaConfBaseException) as exc:
            raise SpecError(f"cannot read --config {pair!r}: {str(exc).splitlines()[0]}", where=WHERE) from None
    return OmegaConf.to_container(config)  # type: ignore[return-value]


def env_factory(name: str, config: dict[str, Any], *, manager: Any = None) -> tuple[str, Callable[[], Any]]:
    """The registered env `name` with `config`: its resolved name and a picklable zero-argument factory.

    One env is built and closed here, so a bad config fails now with the key that is wrong.
    """
    from beyondagent_core.plugins import PluginManager
    from beyondagent_core.registry import Registry
    from beyondagent_core.spec import select_component

    registry = Registry(manager if manager is not None else PluginManager().load())
    component = select_component(registry, "env", {"name": name, **config}, key_path="--config", where=WHERE)
    component.create().close()  # raises SpecError naming the block when the env rejects its config
    return component.name or name, functools.partial(component.registration.spec.load_factory(), component.config)


def serve_command(args: argparse.Namespace) -> int:
    from beyondagent_plugin_envservice.instances import (
        InstancePool,
        PoolLimits,
        ThreadHost,
    )
    from beyondagent_core.serving import bind
    from beyondagent_plugin_envservice.server import create_app, serve

    token = read_token(args.token_env)
    try:
        limits = PoolLimits(ttl=args.ttl, max_instances=args.max_instances, call_timeout=args.call_timeout)
    except ValueError as exc:
        raise BeyondAgentError(str(exc), where=WHERE) from None
    name, factory = env_factory(args.env, parse_config(args.config))
    if args.instances == "ray":
        from beyondagent_plugin_envservice.ray_instances import RayHost, RayOptions

        try:
            options = RayOptions(num_cpus=args.ray_num_cpus, envs_per_actor=args.ray_envs_per_actor,
                                 max_actors=args.ray_max_actors, address=args.ray_address)
        except ValueError as exc:
            raise BeyondAgentError(str(exc), where=WHERE) from None
        host: Any = RayHost(factory, options)
    elif args.instances == "process":
        from beyondagent_plugin_envservice.process_instances import (
            ProcessHost,
            ProcessOptions,
        )

        try:
            process_options = ProcessOptions(warm=args.process_warm, max_workers=args.process_max_workers,
                                             memory_mb=args.process_memory_mb)
        except ValueError as exc:
            raise BeyondAgentError(str(exc), where=WHERE) from None
        host = ProcessHost(factory, process_options)
    else:
        host = ThreadHost(factory, threads=args.threads, inline=args.inline_calls)
    pool = InstancePool(host, limits, env_name=name)
    app = create_app(pool, token=token, max_body_bytes=args.max_body_bytes, body_timeout=args.body_timeout)
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        raise BeyondAgentError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", where=WHERE,
                               hint="pick another --port (0 picks a free one) or stop what uses it") from None
    if args.host not in ("127.0.0.1", "localhost", "::1") and token is None:
        log.warning("envservice.open_to_network", host=args.host,
                    hint="anyone who can reach this port can run the env; set --token-env")
    log.info("envservice.starting", env=name, instances=args.instances, ttl=limits.ttl,
             max_instances=limits.max_instances, call_timeout=limits.call_timeout, auth=token is not None)
    serve(app, sock, graceful_s=limits.call_timeout + 5, exit_with_parent=args.exit_with_parent,
          header_timeout=args.header_timeout, max_connections=args.max_connections)
    if pool.counts["hung_calls"]:
        # A hung env call holds a worker thread that Python would join at exit, forever.
        log.warning("envservice.exit_with_hung_calls", hung_calls=pool.counts["hung_calls"])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


def read_token(var: str | None) -> str | None:
    """The bearer token from the variable `var` (never from the command line, where `ps` shows it)."""
    if var is None:
        return None
    token = os.environ.get(var, "")
    if not token.strip():
        raise BeyondAgentError(f"--token-env {var}: the environment variable {var} is not set or empty",
                               where=WHERE, hint=f"export {var}=<a secret> before starting the server")
    return token.strip()
