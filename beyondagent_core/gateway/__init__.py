"""The OpenAI-compatible gateway: an agent written with any framework talks to the policy being trained.

During rollout the backend serves `POST /<episode-id>/v1/chat/completions` on loopback, one base
URL and one API key per episode (a call without the key is a 401), and records every call's
prompt ids, sampled ids and log-probs exactly as the generator produced them. The modules, one job
each:

- `api.py`: the OpenAI request (validated: unsupported parameters are a 400 naming them) and the
  response and streaming chunks the `openai` SDK reads;
- `render.py`: a request's messages and tools into the chat template's prompt text;
- `samples.py`: calls into training samples: a call whose prompt extends an earlier call's prompt
  and reply continues that sample, any other call starts a new one (never force-merged);
- `episode.py`: one episode's endpoint: render, generate through the backend's `TokenGenerator`,
  parse tool calls, record; the episode's limits (calls in flight, `n`, its token budget);
- `server.py`: the HTTP server (Starlette on uvicorn, in a thread of its own) that authenticates
  each call by its episode's key and routes it to its endpoint on the rollout's event loop.

The `agent` workflow (`beyondagent_core.runtime.agent`) opens an endpoint per episode and runs
the user's agent against its URL.
"""
