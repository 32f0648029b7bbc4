"""The explorer's prompt hides every occurrence of the seed query, not only the first.

From the eighth audit (mutation testing of the LLM roles): masking only the first occurrence
(`str.replace(..., 1)`) passed the earlier tests, whose env states the task once; an env that
repeats the goal (in its intro and again in a reminder) then shows the exploring LLM the task it
must not solve. Pure functions of `prompt.py`; no LLM is involved.
"""

from __future__ import annotations

from beyondagent_plugin_random_explorer.prompt import HIDDEN_QUERY, explorer_messages, mask_query

QUERY = "Reach G in four moves."


def test_every_occurrence_of_the_query_is_masked_in_every_message() -> None:
    reset = [
        {"role": "system", "content": f"Rules. Your task: {QUERY}"},
        {"role": "user", "content": f"{QUERY} You are at row 0, column 0. Reminder: {QUERY}"},
    ]

    masked = mask_query(reset, QUERY)

    assert masked == [
        {"role": "system", "content": f"Rules. Your task: {HIDDEN_QUERY}"},
        {"role": "user", "content": f"{HIDDEN_QUERY} You are at row 0, column 0. Reminder: {HIDDEN_QUERY}"},
    ]
    assert reset[1]["content"].count(QUERY) == 2  # the env's own messages are left as they were
    shown = explorer_messages(masked)
    assert all(QUERY not in message["content"] for message in shown)
    assert shown[0]["content"].endswith(f"Rules. Your task: {HIDDEN_QUERY}")


def test_no_query_leaves_the_messages_as_they_are() -> None:
    reset = [{"role": "user", "content": "You are at row 0, column 0."}]
    assert mask_query(reset, None) == reset and mask_query(reset, "  ") == reset
    assert mask_query(reset, None)[0] is not reset[0]
