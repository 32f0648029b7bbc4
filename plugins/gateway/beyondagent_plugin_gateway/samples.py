"""From an episode's gateway calls to training samples, by exact prefix: merge or split, never re-tokenize.

Each sample is a `TokenSequence` (ids, a loss mask that is 1 only on sampled tokens, their
log-probs) together with the text its ids render. A new call's prompt text either starts with a
sample's text (its last prompt and the reply the model gave): then the call continues that
sample: its prompt ids are the sample's ids plus the new text after it, tokenized on its own (an
observation, mask 0), and the model conditions on exactly the ids it sampled before. Or it does
not (a template that drops earlier reasoning, a history the agent edited, a sub-agent with a
prompt of its own): then the call starts a new sample from the whole prompt, counted in
`splits`. Nothing is force-merged and the model's tokens are never decoded and re-encoded.

A call with `n` choices continues its sample with the first choice; every other choice becomes a
sample of its own whose earlier model tokens are context (mask 0), so each sampled token is
trained once. A later call continues whichever choice its history holds.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence


@attrs.define(eq=False)
class Sample:
    sequence: TokenSequence
    text: str = ""  # what `sequence.input_ids` render: the last prompt's text and the reply after it
    session: object = attrs.Factory(object)  # the generator's KV-cache key for this sample


@attrs.frozen
class Prompt:
    """A call's prompt ids, and the sample it continues (None: it starts a new one)."""

    ids: list[int]
    text: str
    continues: Sample | None
    context_ids: list[int]  # the ids to append to `continues` before the reply (all of `ids` for a new sample)
    session: object  # the KV-cache key to generate with: the continued sample's, or the new sample's


@attrs.frozen
class Reply:
    token_ids: list[int]
    logprobs: list[float]
    text: str  # the ids decoded with special tokens kept: what the template renders them as


class SampleBuilder:
    def __init__(self, template: ChatTemplate):
        self.template = template
        self.samples: list[Sample] = []
        self.splits = 0  # calls that started a new sample while the episode had one

    def snapshot(self) -> list[tuple[Sample, str, int]]:
        """Each sample with its text and length now: what `prompt` matches against.

        Taken on the event loop that records replies, so `prompt` can run in a thread of its own
        while more replies are recorded: a sample only grows, so its first `length` ids stay the
        ids its text renders, and `record` forks a sample that grew in the meantime."""
        return [(sample, sample.text, len(sample.sequence)) for sample in self.samples if sample.text]

    def prompt(self, text: str, snapshot: list[tuple[Sample, str, int]] | None = None) -> Prompt:
        """The prompt ids for a call whose rendered prompt is `text` (tokenizes: may run in a thread)."""
        matching = [entry for entry in (self.snapshot() if snapshot is None else snapshot) if text.startswith(entry[1])]
        if matching:
            sample, known, length = max(matching, key=lambda entry: len(entry[1]))
            context = self.template.encode(text[len(known):])
            return Prompt([*sample.sequence.input_ids[:length], *context], text, sample, context, sample.session)
        ids = self.template.encode(text)
        return Prompt(ids, text, None, ids, object())

    def record(self, prompt: Prompt, replies: Sequence[Reply]) -> list[Sample]:
        """Add a call's replies to the samples; returns the sample each reply ended up in."""
        if prompt.continues is None and self.samples:
            self.splits += 1
        continues = prompt.continues
        if continues is not None and len(continues.sequence) + len(prompt.context_ids) != len(prompt.ids):
            continues = None  # a concurrent call with the same history continued it first: fork
        placed = []
        for index, reply in enumerate(replies):
            if index == 0 and continues is not None:
                sample = continues
                sample.sequence.add_context(prompt.context_ids)
            else:
                session = prompt.session if index == 0 and prompt.continues is None else object()
                sample = Sample(TokenSequence(self.template), session=session)
                sample.sequence.add_context(prompt.ids)  # earlier model tokens are context here
                self.samples.append(sample)
            sample.sequence.add_generation(reply.token_ids, reply.logprobs)
            sample.text = prompt.text + reply.text
            placed.append(sample)
        return placed

    def sequences(self) -> list[TokenSequence]:
        return [sample.sequence for sample in self.samples if sample.sequence.generated_tokens]


def joined_view(sequences: Sequence[TokenSequence]) -> tuple[list[tuple[int, int]], int, list[int]]:
    """An episode's samples laid end to end, as an advantage estimator sees one episode: every
    model turn's span (shifted by the samples before it), the total length, each sample's offset.
    Slicing an estimator's per-token array at the offsets gives each sample its advantages."""
    spans, offsets, length = [], [], 0
    for sequence in sequences:
        offsets.append(length)
        spans.extend((start + length, end + length) for start, end in sequence.turn_spans)
        length += len(sequence)
    return spans, length, offsets
