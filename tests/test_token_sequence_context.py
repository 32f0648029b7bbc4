"""`TokenSequence.add_context` (the gateway's samples, built from ids): the prompt is the first context
only; a later observation or continued call's context does not move `prompt_length`."""

from __future__ import annotations

from beyondagent_core.runtime.tokens import TokenSequence


def test_the_prompt_is_the_first_context_only() -> None:
    sequence = TokenSequence(template=None)  # built from ids: the template is not used
    sequence.add_context([1, 2, 3])
    sequence.add_generation([7, 8], [-0.1, -0.2])
    sequence.add_context([4, 5])  # the next call's new tokens (an observation)
    sequence.add_generation([9], [-0.3])
    assert sequence.prompt_length == 3
    assert sequence.loss_mask == [0, 0, 0, 1, 1, 0, 0, 1] and sequence.turn_spans == [(3, 5), (7, 8)]
