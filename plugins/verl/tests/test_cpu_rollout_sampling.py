"""The CPU rollout's sampler (cpu_rollout.py), in verl's venv: top-k, top-p, greedy, log-probs, stop ids.

The end-to-end test (test_verl_cpu_training.py) samples at temperature 1 with no cut-off, where
verl's own check shows the log-probs equal the actor's; this one covers the cut-offs on a
hand-made distribution and the server's greedy path on the tiny model.
"""

from __future__ import annotations

import json
from typing import Any

CHECK = r'''
import asyncio, json, math, torch
from beyondagent_plugin_verl.cpu_rollout import HFRolloutServer, _draw

logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
g = torch.Generator().manual_seed(0)
draws = lambda **kw: {_draw(logits, generator=g, **kw) for _ in range(400)}
out = {"top_k_1": sorted(draws(top_k=1, top_p=1.0)), "top_k_2": sorted(draws(top_k=2, top_p=1.0)),
       "top_p_0.7": sorted(draws(top_k=-1, top_p=0.7)), "top_p_0.1": sorted(draws(top_k=-1, top_p=0.1)),
       "all": sorted(draws(top_k=-1, top_p=1.0))}

server = HFRolloutServer(MODEL)
prompt = [1, 2, 3, 4, 5]
async def main():
    a = await server.generate(prompt, {"temperature": 0.0, "max_tokens": 5}, "r1")
    b = await server.generate(prompt, {"temperature": 0.0, "max_tokens": 5}, "r2")
    stop = await server.generate(prompt, {"temperature": 0.0, "max_tokens": 5, "stop_token_ids": [a.token_ids[2]]}, "r3")
    return a, b, stop
a, b, stop = asyncio.run(main())
out["stopped"] = stop.token_ids == a.token_ids[:a.token_ids.index(a.token_ids[2]) + 1]  # kept, as vLLM does
with torch.no_grad():  # the greedy tokens and their log-probs from one forward pass over the whole sequence
    full = server.model(torch.tensor([prompt + a.token_ids])).logits[0].float()
steps = full[len(prompt) - 1:len(prompt) - 1 + len(a.token_ids)]
out["greedy_same"] = a.token_ids == b.token_ids
out["greedy_is_argmax"] = a.token_ids == steps.argmax(-1).tolist()
out["logprob_error"] = max(abs(x - float(torch.log_softmax(steps[i], -1)[t]))
                           for i, (t, x) in enumerate(zip(a.token_ids, a.log_probs)))
print(json.dumps(out))
'''


def test_cut_offs_greedy_and_log_probs(verl_venv: Any, tiny_model: str) -> None:
    result = verl_venv.run(["-c", f"MODEL = {tiny_model!r}\n" + CHECK], timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["top_k_1"] == [0] and out["top_k_2"] == [0, 1]
    assert out["top_p_0.7"] == [0, 1]  # 0.5 + 0.3 reaches 0.7: the nucleus is the first two
    assert out["top_p_0.1"] == [0]  # the most likely token always stays
    assert out["all"] == [0, 1, 2, 3]
    assert out["greedy_same"] and out["greedy_is_argmax"]
    assert out["stopped"]  # a request's stop_token_ids (the template's end of turn) end its turn
    assert out["logprob_error"] < 1e-4  # with a KV cache, against one pass over the whole sequence
