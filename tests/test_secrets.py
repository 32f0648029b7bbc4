"""Secrets never reach the console, events.jsonl, printed errors, the saved spec or the exploration
checkpoint (`beyondagent_core.secrets`): remembered values, and secrets known by their shape (a URL's
credentials and tokens, an Authorization value echoed back)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog
import yaml
from spec_files import write_basic_spec

from beyondagent_core import secrets
from beyondagent_core.logs import configure_logging, log_events_to


@pytest.fixture(autouse=True)
def no_secrets():
    secrets.forget_all()
    yield
    secrets.forget_all()


@pytest.fixture
def logging_config():
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)  # the console logger must not keep writing to this test's capture


def test_remembered_values_are_masked_everywhere_in_an_event(tmp_path: Path, capsys, logging_config) -> None:
    secrets.remember("sk-live-0123456789")
    secrets.remember("abc")  # too short to be told apart from ordinary text: not masked
    configure_logging()
    log_events_to(tmp_path / "events.jsonl")
    try:
        structlog.get_logger("t").warning("llm.failed", error="401: invalid key sk-live-0123456789 (abc)",
                                          body={"headers": ["Bearer sk-live-0123456789"]})
    finally:
        log_events_to(None)
    line = json.loads((tmp_path / "events.jsonl").read_text())
    assert line["error"] == "401: invalid key *** (abc)" and line["body"] == {"headers": ["Bearer ***"]}
    assert "sk-live" not in capsys.readouterr().err


def test_a_value_from_an_environment_variable_is_not_printed_in_an_error(cli, tmp_path: Path) -> None:
    spec = write_basic_spec(tmp_path, mixer="original", tasks=1, run_name="r")
    result = cli("validate", str(spec), "run.name=${oc.env:BA_SECRET_NAME}",
                 env={"BA_SECRET_NAME": "token-9f8e7d6c/oops"})
    assert result.code == 2
    assert "token-9f8e7d6c" not in result.text and "got '***'" in result.err


def test_the_llm_key_is_remembered_when_the_client_starts() -> None:
    import asyncio
    import os

    from beyondagent_core.llm import LLMConfig, OpenAIChat

    os.environ["BA_TEST_LLM_KEY"] = "sk-test-remembered-42"
    try:
        chat = OpenAIChat(LLMConfig(model="m", base_url="http://127.0.0.1:9/v1", api_key_env="BA_TEST_LLM_KEY",
                                    max_llm_retries=0, timeout=2))
        with pytest.raises(Exception):  # noqa: B017 - nothing listens there; only the side effect matters
            asyncio.run(chat.chat([{"role": "user", "content": "hi"}]))
    finally:
        del os.environ["BA_TEST_LLM_KEY"]
    assert secrets.redact("echo: sk-test-remembered-42") == "echo: ***"


def test_a_secret_overlapping_or_containing_another_never_leaks_in_part() -> None:
    secrets.remember("secret-one-two")
    secrets.remember("two-three-four")  # as long as the first, and overlapping it in the text
    secrets.remember("xx-secret-one-two-xx")  # contains the first
    secrets.remember("aaaaaaa")  # overlaps itself
    assert secrets.redact("a secret-one-two-three-four b") == "a *** b"
    assert secrets.redact("c xx-secret-one-two-xx d secret-one-two e") == "c *** d *** e"
    assert secrets.redact("f aaaaaaaaa g") == "f *** g"


# (URL as a server or a library would print it, parts that must not survive, parts that must)
URLS = [
    ("http://alice:hunter2-pw@127.0.0.1:8000/v1", ["alice", "hunter2-pw"], ["http://***@127.0.0.1:8000/v1"]),
    ("https://api.example.com/v1/models?token=tok-9a8b7c&limit=5", ["tok-9a8b7c"], ["?token=***&limit=5"]),
    ("https://x.example.com/q?api_key=k1k2k3k4&key=zz99zz&access_token=at-123456&page=2",
     ["k1k2k3k4", "zz99zz", "at-123456"], ["api_key=***&key=***&access_token=***&page=2"]),
    ("https://hooks.slack.com/services/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",
     ["T0AB12CD3", "B0EF45GH6", "q1w2e3r4t5y6u7i8o9p0a1s2"], ["https://hooks.slack.com/services/***/***/***"]),
    ("https://discord.com/api/webhooks/112233445566778899/Zx9-Yw8_Vu7TsRqPoNmLkJiH",
     ["112233445566778899", "Zx9-Yw8_Vu7TsRqPoNmLkJiH"], ["https://discord.com/api/webhooks/***/***"]),
    ("https://api.telegram.org/bot123456:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage",
     ["AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"], ["https://api.telegram.org/bot***/sendMessage"]),
    ("slack://T0AB12CD3/B0EF45GH6/q1w2e3r4t5y6u7i8o9p0a1s2/#general", ["T0AB12CD3", "general"], ["slack://***"]),
    ("discord://112233445566778899/Zx9-Yw8_Vu7TsRqPoNmLkJiH", ["Zx9-Yw8_Vu7TsRqPoNmLkJiH"], ["discord://***"]),
    ("mailto://bob:mail-pass@example.com", ["mail-pass"], ["mailto://***"]),
    ("ntfy://private-topic-name", ["private-topic-name"], ["ntfy://***"]),
]


@pytest.mark.parametrize(("url", "hidden", "shown"), URLS, ids=[url.split(":")[0] + str(i) for i, (url, _, _)
                                                                  in enumerate(URLS)])
def test_url_credentials_and_tokens_are_masked_in_every_event(url, hidden, shown, tmp_path: Path, capsys,
                                                               logging_config) -> None:
    configure_logging()
    log_events_to(tmp_path / "events.jsonl")
    try:
        structlog.get_logger("t").warning("notify.failed", error=f"cannot reach {url}: refused",
                                          detail={"urls": [url]})
    finally:
        log_events_to(None)
    line = (tmp_path / "events.jsonl").read_text()
    console = capsys.readouterr().err
    for part in hidden:
        assert part not in line and part not in console
    for part in shown:
        assert part in json.loads(line)["error"]


def test_prose_and_ordinary_urls_are_left_alone() -> None:
    text = ("see https://github.com/caronc/apprise/wiki (http://127.0.0.1:8000/v1), "
            "https://host/models/Qwen2-72B-Instruct-GPTQ-Int4/v1?limit=5; Bearer authentication, Basic usage")
    assert secrets.redact(text) == text


def test_an_authorization_value_echoed_back_is_masked() -> None:
    echoed = ("401: bad credentials; request headers: {'Authorization': 'Bearer eyJhbGciOi.J9eyJzdWIi.OjEyMzQ'}, "
              "Proxy-Authorization: Basic YWxpY2U6aHVudGVyMi1wdw==, then Bearer sk-live-abcdef123456 again")
    masked = secrets.redact(echoed)
    for part in ("eyJhbGciOi", "YWxpY2U6aHVudGVyMi1wdw", "sk-live-abcdef123456"):
        assert part not in masked
    assert "'Authorization': 'Bearer ***'" in masked and "Proxy-Authorization: Basic ***" in masked

    # The credentials of a URL once seen are masked afterwards in any form, base64 alone too.
    secrets.redact("connecting to json://carol:pa55-w0rd@127.0.0.1:9/hook")
    assert secrets.redact("echo Y2Fyb2w6cGE1NS13MHJk and pa55-w0rd") == "echo *** and ***"


def test_a_url_in_a_printed_error_loses_its_credentials(cli, tmp_path: Path) -> None:
    spec = write_basic_spec(tmp_path, mixer="original", tasks=1, run_name="r")
    result = cli("validate", str(spec), "run.name=https://dave:pw-123456@example.com/x?token=tk-abcdef")
    assert result.code == 2 and "https://***@example.com/x?token=***" in result.err
    assert "pw-123456" not in result.text and "tk-abcdef" not in result.text


def test_the_saved_spec_masks_url_credentials_and_every_url_of_a_plugins_settings(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    import attrs

    from beyondagent_core import SettingsSpec, hookimpl
    from beyondagent_core.pipeline import prepare
    from beyondagent_core.plugins import PluginManager

    @attrs.define
    class HubSettings:  # a plugin whose settings hold a secret-looking key (`plugins.settings` is checked)
        hf_token: str = ""

    class Hub:
        @hookimpl
        def beyondagent_settings(self):
            return [SettingsSpec(name="hub", config_cls=HubSettings)]

    manager = PluginManager().load()
    manager.register(Hub(), "hub")
    monkeypatch.setenv("BA_TEST_HOOK", "json://hook-user:hook-pass@127.0.0.1:9/from-env")
    spec_path = write_basic_spec(tmp_path, mixer="original", tasks=1, run_name="r")
    session = prepare(spec_path, ["llm.model=m", "llm.base_url=http://eve:pw-654321@127.0.0.1:9/v1?api_key=k-123456",
                                  "model.tokenizer=/models/tok", "plugins.settings.hub.hf_token=hf_abcdef",
                                  "plugins.settings.notify.urls=[ntfy://literal-topic, '${oc.env:BA_TEST_HOOK}']"],
                      manager=manager)
    text = session.spec.redacted_yaml()
    for part in ("pw-654321", "k-123456", "literal-topic", "hook-pass", "from-env", "hf_abcdef"):
        assert part not in text
    saved = yaml.safe_load(text)
    assert saved["llm"]["base_url"] == "http://***@127.0.0.1:9/v1?api_key=***"
    assert saved["plugins"]["settings"]["notify"]["urls"] == ["***", "***"]
    assert saved["model"]["tokenizer"] == "/models/tok"  # "token" inside a word names no secret
    # The run itself sees the real values, and lifecycle hooks get their plugin's real settings.
    assert session.spec.plugins.settings["notify"]["urls"][1] == "json://hook-user:hook-pass@127.0.0.1:9/from-env"


def test_the_exploration_checkpoint_stores_no_secret(cli, tmp_path: Path) -> None:
    pytest.importorskip("beyondagent_plugin_random_explorer")
    pytest.importorskip("beyondagent_plugin_gym")
    example = Path(__file__).resolve().parents[1] / "examples" / "explore_frozenlake.yaml"

    def explore(api_key: str):
        return cli("explore", str(example), f"run.output_dir={tmp_path}", "tasks.train.count=2", "explore.n=1",
                   "llm.model=m", f"llm.base_url=http://frank:pw-112233@127.0.0.1:9/v1?api_key={api_key}",
                   env={"BEYONDAGENT_PLUGINS": "gym,random_explorer,mixers,torch,llm"})

    first = explore("k-aabbcc")
    assert first.code == 0, first.err
    run_dir = tmp_path / "explore-frozenlake"
    checkpoint = run_dir / "synthetic_tasks.jsonl.checkpoint.jsonl"
    header = json.loads(checkpoint.read_text().splitlines()[0])
    assert header["settings"]["llm"]["base_url"] == "http://***@127.0.0.1:9/v1?api_key=***"
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert "pw-112233" not in path.read_text(errors="replace"), path
    assert explore("k-aabbcc").code == 0  # the same settings: the cache is reused
    changed = explore("k-ddeeff")  # only the secret changed: refused, saying so without showing it
    assert changed.code == 1 and "a secret among the settings changed" in changed.err
    assert "k-aabbcc" not in changed.text and "k-ddeeff" not in changed.text


def test_a_traceback_shown_with_verbose_is_redacted(capsys, logging_config) -> None:
    configure_logging(verbose=True)
    try:
        raise ConnectionError("cannot reach http://henry:pw-445566@127.0.0.1:9/v1")
    except ConnectionError:
        structlog.get_logger("t").exception("llm.failed")
    console = capsys.readouterr().err
    assert "ConnectionError" in console and "http://***@127.0.0.1:9/v1" in console
    assert "pw-445566" not in console


def test_the_cause_printed_with_verbose_is_redacted(capsys) -> None:
    from beyondagent_core.cli import print_error
    from beyondagent_core.errors import RunError

    try:
        try:
            raise ConnectionError("cannot reach http://ivy:pw-667788@127.0.0.1:9/v1")
        except ConnectionError as exc:
            raise RunError("the LLM endpoint is unreachable") from exc
    except RunError as error:
        print_error(error, verbose=True)
    printed = capsys.readouterr().err
    assert "Traceback" in printed and "http://***@127.0.0.1:9/v1" in printed and "pw-667788" not in printed


def test_a_failed_episodes_error_kept_in_its_records_is_redacted() -> None:
    import asyncio

    from beyondagent_core.runtime.episodes import EpisodeRunner
    from beyondagent_core.types import Task

    class Unreachable:  # a workflow whose endpoint refuses, as an LLM client would report it
        async def run(self, task, env, llm):
            raise ConnectionError("POST https://jack:pw-990011@llm.example.com/v1/chat/completions?key=k-135791")

    trajectory = asyncio.run(EpisodeRunner(workflow=Unreachable(), make_env=None).run(Task(task_id="t", env="e"),
                                                                                        llm=None))
    record = json.dumps(trajectory.to_dict())
    assert "https://***@llm.example.com/v1/chat/completions?key=***" in trajectory.error
    assert "pw-990011" not in record and "k-135791" not in record
