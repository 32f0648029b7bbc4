"""One episode's gateway endpoint: a chat-completions call in, the policy's exact tokens recorded.

`GatewayEpisode.complete(request)` renders the request's messages (`render.py`), finds the
prompt ids (`samples.py`: continuing an earlier call's sample when the prompt extends it), asks
the backend's `TokenGenerator` for `n` replies, cuts each at the first `stop` string, parses tool
calls when tools were offered (`beyondagent_plugin_gateway.tool_calls`, Hermes `<tool_call>` blocks) and
records the sampled ids and log-probs as the generator returned them. It runs on the event loop
of the rollout (the server hands it each call there); rendering and tokenizing the prompt run in
a worker thread (the tokenizer releases the GIL), so a long prompt never holds the policy's loop.

One episode cannot starve the others (each limit a 4xx naming it):
- at most `max_concurrent_calls` calls in flight (429) and `max_calls` in all (429);
- at most `max_n` choices a call (400);
- a token budget: the episode samples at most `max_episode_tokens` tokens over all its calls and
  choices (as many as a one-sequence episode can hold), so a call's `max_tokens` is cut to the
  room left in its sample and to the budget left, shared by its `n` choices (reserved when the
  call starts, what was not sampled given back when it ends); a call with no budget left is a 400;
- a prompt's text longer than `max_prompt_bytes` is refused before it is tokenized: a text of
  more bytes than `max_episode_tokens` tokens can spell (`longest_token_bytes`, with room for a
  normalizer that shrinks characters) cannot fit.

A stop string is found in the decoded reply: the reply keeps the tokens up to and including the
one that completes the stop string (they are what the model sampled; the text returned ends
before the stop string, as OpenAI's does). Sampling itself continues to the stop token or the
token limit and the tokens after the cut are dropped.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import Hashable, Sequence
from typing import Any, Protocol

import attrs

from beyondagent_plugin_gateway.api import ApiError, ChatRequest, ChatResult, Choice, bad_request
from beyondagent_plugin_gateway.render import Replies, prompt_text
from beyondagent_plugin_gateway.samples import Prompt, Reply, SampleBuilder
from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence
from beyondagent_plugin_gateway.tool_calls import parse_tool_calls
from beyondagent_core.types import Reward, Turn

DEFAULT_MAX_CONCURRENT_CALLS = 4  # workflow.max_concurrent_calls
DEFAULT_MAX_N = 4  # workflow.max_n (api.MAX_N: what any request may ask)
# A normalizer may map a 4-byte character to a 1-byte one (NFKC): the prompt-size bound allows for it.
NORMALIZER_SHRINK = 4


@attrs.frozen
class GenerationSettings:
    temperature: float
    top_p: float
    max_tokens: int


class TokenGenerator(Protocol):
    """What a backend puts behind the gateway: token ids in, sampled ids and their log-probs out."""

    eos_token_ids: frozenset[int]

    async def generate(self, prompt_ids: list[int], settings: GenerationSettings,
                       session: Hashable) -> tuple[list[int], list[float]]:
        """Sample one reply to `prompt_ids`; `session` names the sample (a KV cache may be kept by it)."""
        ...

    def end_session(self, session: Hashable) -> None: ...


class EpisodeEnded(Exception):
    """A call arrived after the episode's endpoint closed."""


@attrs.define
class RecordedCall:
    """One call as the model saw it: the prompt ids and each choice's sampled ids and log-probs."""

    prompt_ids: list[int]
    replies: list[Reply]
    messages: list[dict[str, Any]]
    choices: list[Choice]
    continued: bool  # it continued an earlier call's sample


class GatewayEpisode:
    """The endpoint of one episode (see the module docstring)."""

    def __init__(self, template: ChatTemplate, generator: TokenGenerator, defaults: GenerationSettings, *,
                 max_episode_tokens: int, max_calls: int = 100,
                 max_concurrent_calls: int = DEFAULT_MAX_CONCURRENT_CALLS, max_n: int = DEFAULT_MAX_N):
        self.template = template
        self.tokenizer = template.tokenizer
        self.generator = generator
        self.defaults = defaults
        self.max_episode_tokens = max_episode_tokens
        self.max_calls = max_calls
        self.max_concurrent_calls = max_concurrent_calls
        self.max_n = max_n
        self.max_prompt_bytes = max_episode_tokens * longest_token_bytes(self.tokenizer) * NORMALIZER_SHRINK
        self.builder = SampleBuilder(template)
        self.replies = Replies()
        self.calls: list[RecordedCall] = []
        self.posted_reward: Reward | None = None
        self.refused_reward: str | None = None  # why a reward the agent posted was refused
        self.closed = False
        # checks each request's messages before the model sees them (the `agent` workflow sets the task's
        # `runtime.answer_leaks` guard); `leak` keeps what it found, for the episode's error
        self.prompt_guard: Any = None
        self.leak: Exception | None = None
        self._call_ids = itertools.count()
        self._started = 0
        self._in_flight = 0
        self._budget = max_episode_tokens  # tokens the episode may still sample, over all calls and choices

    # --- what the workflow and the trainer read -------------------------------------------------

    @property
    def samples(self) -> list[TokenSequence]:
        return self.builder.sequences()

    @property
    def splits(self) -> int:
        return self.builder.splits

    def turns(self) -> list[Turn]:
        """The last call's conversation and its first reply (with its token ids), for records and the viewer."""
        if not self.calls:
            return []
        last = self.calls[-1]
        turns = [Turn(role=m["role"], content=m.get("content") or "", tool_calls=m.get("tool_calls"))
                 for m in last.messages]
        reply, choice = last.replies[0], last.choices[0]
        turns.append(Turn(role="assistant", content=choice.content or "", tool_calls=choice.tool_calls,
                          token_ids=reply.token_ids, logprobs=reply.logprobs,
                          finish_reason="length" if choice.finish_reason == "length" else "stop"))
        return turns

    def close(self) -> None:
        self.closed = True
        for sample in self.builder.samples:
            self.generator.end_session(sample.session)

    # --- a call ---------------------------------------------------------------------------------

    async def complete(self, request: ChatRequest) -> ChatResult:
        if self.closed:
            raise EpisodeEnded("this episode has ended")
        if request.n > self.max_n:
            raise bad_request(f"n={request.n}: a call of this episode may ask for at most {self.max_n} choices "
                              "(workflow.max_n)", param="n")
        if self._in_flight >= self.max_concurrent_calls:
            raise ApiError(429, f"this episode has {self._in_flight} model calls in flight, its limit "
                                "(workflow.max_concurrent_calls); send the next when one has been answered",
                           code="too_many_concurrent_calls")
        if self._started >= self.max_calls:
            raise ApiError(429, f"this episode made {self.max_calls} model calls, its limit (workflow.max_calls)",
                           code="too_many_calls")
        if self.prompt_guard is not None:
            try:
                self.prompt_guard.check(request.messages)
            except Exception as leak:  # noqa: BLE001 - the guard's AnswerLeak, said to the agent as a 400
                self.leak = leak
                raise ApiError(400, str(leak), param="messages", code="answer_leak") from None
        self._started += 1
        self._in_flight += 1
        try:
            return await self._complete(request)
        finally:
            self._in_flight -= 1

    async def _complete(self, request: ChatRequest) -> ChatResult:
        prompt = await asyncio.to_thread(self._prompt, request, self.builder.snapshot())
        room = self.max_episode_tokens - len(prompt.ids)
        if room <= 0:
            raise bad_request(f"the prompt is {len(prompt.ids)} tokens; this episode's samples may have at most "
                              f"max_episode_tokens={self.max_episode_tokens} (backend.max_episode_tokens)",
                              param="messages", code="context_length_exceeded")
        share = self._budget // request.n
        if share < 1:
            raise bad_request(f"this episode has sampled its budget of {self.max_episode_tokens} tokens over all its "
                              f"calls and choices ({self._budget} left for n={request.n}; backend.max_episode_tokens)",
                              param="max_tokens", code="context_length_exceeded")
        settings = GenerationSettings(
            temperature=self.defaults.temperature if request.temperature is None else request.temperature,
            top_p=self.defaults.top_p if request.top_p is None else request.top_p,
            max_tokens=min(request.max_tokens or self.defaults.max_tokens, room, share))
        reserved, sampled = settings.max_tokens * request.n, 0
        self._budget -= reserved
        sessions = [prompt.session] + [object() for _ in range(request.n - 1)]
        try:
            results = await asyncio.gather(*(self.generator.generate(list(prompt.ids), settings, session)
                                             for session in sessions))
            sampled = sum(len(token_ids) for token_ids, _ in results)
        finally:
            self._budget += reserved - min(sampled, reserved)
        for session in sessions[1:]:
            self.generator.end_session(session)
        if self.closed:
            raise EpisodeEnded("the episode ended while this call was being answered")
        replies, choices = [], []
        for token_ids, logprobs in results:
            reply, choice = self._reply(list(token_ids), list(logprobs), request)
            replies.append(reply)
            choices.append(choice)
            self.replies.remember(choice.content, choice.tool_calls, _without_stop_token(reply, self))
        self.builder.record(prompt, replies)
        self.calls.append(RecordedCall(list(prompt.ids), replies, request.messages, choices,
                                       continued=prompt.continues is not None))
        return ChatResult(choices, prompt_tokens=len(prompt.ids))

    def _prompt(self, request: ChatRequest, snapshot: list) -> Prompt:
        """The call's prompt: rendered, its size checked, tokenized (in a worker thread)."""
        try:
            text = prompt_text(self.tokenizer, request.messages, request.tools, self.replies)
        except Exception as exc:  # noqa: BLE001 - a template error is the request's, said in one line
            raise bad_request(f"the chat template could not render these messages: {type(exc).__name__}: {exc}",
                              param="messages") from exc
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise bad_request("the messages hold a lone UTF-16 surrogate (a \\ud800-\\udfff escape without its pair), "
                              "which is not text", param="messages") from None
        if size > self.max_prompt_bytes:
            raise bad_request(f"the prompt is {size} bytes; no {self.max_episode_tokens} tokens of this tokenizer "
                              f"spell more than {self.max_prompt_bytes} (backend.max_episode_tokens)",
                              param="messages", code="context_length_exceeded")
        return self.builder.prompt(text, snapshot)

    def _reply(self, token_ids: list[int], logprobs: list[float], request: ChatRequest) -> tuple[Reply, Choice]:
        stopped = bool(token_ids) and token_ids[-1] in self.generator.eos_token_ids
        cut = stop_cut(self.tokenizer, token_ids, request.stop) if request.stop else None
        if cut is not None:
            keep, text = cut
            token_ids, logprobs, stopped = token_ids[:keep], logprobs[:keep], True
        else:
            text = self.tokenizer.decode(token_ids, skip_special_tokens=True)
        reply = Reply(token_ids, logprobs, decode_exact(self.tokenizer, token_ids))
        content: str | None = text
        calls = None
        if request.tools:
            parsed = parse_tool_calls(text, formats=("hermes",))
            if parsed.calls and not parsed.errors:
                call_id = next(self._call_ids)
                calls = [{**call, "id": f"call_{call_id}_{i}"} for i, call in enumerate(parsed.calls)]
                content = parsed.text or None
        finish = "tool_calls" if calls else ("stop" if stopped else "length")
        return reply, Choice(content, calls, finish, len(token_ids))


@functools.lru_cache(maxsize=16)
def longest_token_bytes(tokenizer: Any) -> int:
    """The most UTF-8 bytes a token of `tokenizer` spells (an upper bound: a byte-level vocabulary
    writes a byte as a character of up to 2 bytes, SentencePiece's "▁" is 3 bytes for a space)."""
    try:
        vocab = tokenizer.get_vocab()
    except Exception:  # noqa: BLE001 - a tokenizer without a vocabulary to list: no size bound before tokenizing
        return 1 << 20
    return max((len(token.encode("utf-8", "surrogatepass")) for token in vocab if isinstance(token, str)), default=1)


def decode_exact(tokenizer: Any, token_ids: Sequence[int]) -> str:
    """The ids as the template writes them: special tokens kept, no clean-up of spaces."""
    return tokenizer.decode(list(token_ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)


def _without_stop_token(reply: Reply, episode: GatewayEpisode) -> str:
    """The model's text for a reply as its message content (the end-of-turn token is the template's)."""
    ids = reply.token_ids
    if ids and ids[-1] in episode.generator.eos_token_ids:
        ids = ids[:-1]
    return decode_exact(episode.tokenizer, ids)


def stop_cut(tokenizer: Any, token_ids: Sequence[int], stops: Sequence[str]) -> tuple[int, str] | None:
    """(tokens to keep, text before the stop) for the first stop string in the reply, or None."""
    full = tokenizer.decode(list(token_ids), skip_special_tokens=True)
    found = [full.find(stop) for stop in stops if stop in full]
    if not found:
        return None
    end = min(found)
    for keep in range(1, len(token_ids) + 1):  # the first token whose text reaches past the stop's start
        prefix = tokenizer.decode(list(token_ids[:keep]), skip_special_tokens=True)
        if any(stop in prefix for stop in stops):
            return keep, full[:end]
    return len(token_ids), full[:end]
