"""A reply is cut at the first stop string it holds, whichever of the request's `stop` list names it
first (`episode.stop_cut`): the text ends before it, the tokens keep the one that completes it."""

from __future__ import annotations

from beyondagent_plugin_gateway.episode import stop_cut


class CharTokenizer:
    """A tokenizer whose tokens are characters (only `decode` is used by `stop_cut`)."""

    def decode(self, ids, skip_special_tokens: bool = True, **_: object) -> str:
        return "".join(chr(i) for i in ids)


def ids(text: str) -> list[int]:
    return [ord(c) for c in text]


def test_the_earliest_stop_string_cuts_whatever_its_place_in_the_list() -> None:
    reply = ids("say yes. then no! the end")
    for stops in (["!", "."], [".", "!"]):
        keep, text = stop_cut(CharTokenizer(), reply, stops)
        assert (keep, text) == (len("say yes."), "say yes")
    assert stop_cut(CharTokenizer(), reply, ["?"]) is None
