"""The `experience` store's own keys (the spec's `experience` block besides the core's `ExperienceBlock`)."""

from __future__ import annotations

import attrs

from beyondagent_core.checks import number
from beyondagent_core.llm import LLMConfig

SUMMARIZERS = ("hindsight", "llm")


@attrs.define
class ExperienceStoreConfig:
    """`path`: the sqlite file (unset: experiences.sqlite in the run directory; set it to share
    experiences across runs). `summarizer`: `hindsight` (offline: the action sequence of a
    successful episode) or `llm` (lessons from successes, failures and their comparison, written by
    `llm`, unset: the spec's `llm`). `max_chars`: an experience's text is cut there.
    `max_per_task`: at most this many lessons from one task's group per summary."""

    path: str | None = None
    summarizer: str = attrs.field(default="hindsight", validator=attrs.validators.in_(SUMMARIZERS))
    llm: LLMConfig | None = None
    max_chars: int = attrs.field(default=1200, validator=number(ge=50))
    max_per_task: int = attrs.field(default=3, validator=number(ge=1))
