"""The environment service: any registered env over HTTP, compatible with AgentEvolver's EnvService.

- `protocol`: request parsing, reply shapes and error codes (shared by server and client);
- `instances` / `ray_instances`: where served envs live (worker threads, or Ray actors);
- `server`: the Starlette app and `beyondagent env serve`;
- `client`: the async client and `RemoteEnv` (an `AsyncEnv` over HTTP);
- `launch`: the server as a child process of a run (`env.service: launch`);
- `openers`: what a run calls for `env.service: http://...` or `launch`;
- `source`: the `envservice` task source (task ids from `/get_env_profile`).

Nothing is imported here, so `import beyondagent_core.envservice.x` stays as light as `x`.
"""
