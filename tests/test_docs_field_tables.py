"""The field tables of docs/writing-a-plugin.md match the records they describe.

A third-party author reads the task JSONL format, what an explorer returns, what an advantage estimator receives and
answers, and what an experience store keeps from these tables; every field of the record must
be in its table, and every name in a table must exist on the record, so the tables stay true
when a record grows a field.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest

from beyondagent_core.advantages import AdvantageBatch, Advantages, ScoredEpisode, Step
from beyondagent_core.experience import Experience
from beyondagent_core.types import Task, Trajectory

DOC = Path(__file__).resolve().parents[1] / "docs" / "writing-a-plugin.md"


def section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end]


def tables(text: str) -> dict[str, list[str]]:
    """Each table's header (its first cell) -> the names its first column documents."""
    found: dict[str, list[str]] = {}
    header = None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        first = line.split("|")[1].strip()
        if header is None:
            header, found[first] = first, []
        elif not set(first) <= {"-", " "}:
            found[header] += [re.sub(r"\(.*\)", "", name.strip(" `")) for name in first.split(",")]
    return found


@pytest.mark.parametrize(("title", "record"), [
    ("Advantage estimators: the batch and the answer", AdvantageBatch),
    ("Advantage estimators: the batch and the answer", ScoredEpisode),
    ("Advantage estimators: the batch and the answer", Step),
    ("Advantage estimators: the batch and the answer", Advantages),
    ("Experience stores: records, persistence, `bind(run)`", Experience),
    ("6. Use it in a spec", Task),  # the task JSONL format
])
def test_each_record_has_a_table_of_exactly_its_fields(title: str, record: type) -> None:
    documented = tables(section(title))[f"`{record.__name__}`"]
    fields = {field.name for field in attrs.fields(record)}
    assert fields <= set(documented), f"{record.__name__}: undocumented fields {sorted(fields - set(documented))}"
    assert all(hasattr(record, name) or name in fields for name in documented), documented


def test_what_an_explorer_returns_is_documented_field_by_field() -> None:
    text = section("Explorers: what `explore` returns")
    documented = tables(text)["field"]
    assert {field.name for field in attrs.fields(Trajectory)} == set(documented)
    assert "**Steps count from 1**" in text and "`metrics[\"achieved\"]`" in text


def test_a_store_must_persist_and_bind_is_documented() -> None:
    text = section("Experience stores: records, persistence, `bind(run)`")
    assert "**A store must persist.**" in text
    assert "**`bind(run)`**" in text and "run.run_dir" in text and "run.chat_llm()" in text
