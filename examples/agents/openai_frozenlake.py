"""A plain `openai` SDK agent loop for FrozenLake: nothing in it knows about BeyondAgent's training.

`beyondagent run examples/agent_openai.yaml` trains it: the `agent` workflow calls `run` once per
episode with the episode's own base URL, API key and env, and the gateway records the policy's tokens.
"""

from openai import OpenAI


def run(task, llm_base_url, env, api_key):
    client = OpenAI(base_url=llm_base_url, api_key=api_key)
    messages = list(env.reset(task).messages)
    for _ in range(6):
        reply = client.chat.completions.create(model="policy", messages=messages)
        action = {"role": "assistant", "content": reply.choices[0].message.content or ""}
        messages.append(action)
        step = env.step(action)
        messages += step.observation
        if step.terminated:
            break
    return None  # no reward of its own: the env's evaluate() scores the episode
