"""A gateway call continues the sample whose text is the longest prefix of its prompt
(plugins/gateway/beyondagent_plugin_gateway/samples.py)."""

from __future__ import annotations

from beyondagent_plugin_gateway.samples import Reply, SampleBuilder


class CharTemplate:
    """A template whose tokens are characters (only `encode` is used when samples are built from ids)."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]


def test_a_call_continues_the_choice_its_history_holds_the_longest_matching_sample() -> None:
    builder = SampleBuilder(CharTemplate())
    first = builder.prompt("P")
    a, b = builder.record(first, [Reply([1000], [-0.1], "x"), Reply([2000, 2001], [-0.2, -0.3], "xy")])
    assert (a.text, b.text) == ("Px", "Pxy")
    # "Pxy Q" starts with both "Px" and "Pxy": the history holds the second choice
    nxt = builder.prompt("Pxy Q")
    assert nxt.continues is b and nxt.session is b.session
    assert nxt.ids == [ord("P"), 2000, 2001, ord(" "), ord("Q")] and nxt.context_ids == [ord(" "), ord("Q")]
    (placed,) = builder.record(nxt, [Reply([3000], [-0.4], "z")])
    assert placed is b and builder.splits == 0
    assert b.sequence.input_ids == [ord("P"), 2000, 2001, ord(" "), ord("Q"), 3000]
