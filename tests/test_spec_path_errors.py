"""A spec path that is not a readable YAML file says what it is (issue 36, item 5): a directory (with the
specs in it), a device such as /dev/zero (never read: it has no end), a named pipe, a broken symbolic
link, an unreadable file; not "spec file not found" for all of them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from beyondagent_core.errors import SpecError
from beyondagent_core.spec import load_spec_file


def error_of(path: Path | str) -> str:
    with pytest.raises(SpecError) as caught:
        load_spec_file(path)
    return str(caught.value)


def test_a_directory_is_named_as_one_with_the_specs_in_it(tmp_path: Path) -> None:
    assert "is a directory, not a file" in error_of(tmp_path) and "has no .yaml file" in error_of(tmp_path)
    (tmp_path / "train.yaml").write_text("run: {name: x}\n")
    message = error_of(tmp_path)
    assert f"the spec path {tmp_path} is a directory, not a file" in message
    assert f"pass a spec file in it: {tmp_path / 'train.yaml'}" in message


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_a_device_is_named_as_one_and_never_read() -> None:
    assert "the spec path /dev/zero is a character device, not a file" in error_of("/dev/zero")


def test_a_named_pipe_is_named_as_one_and_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)  # opening it would wait for a writer forever
    assert "is a named pipe (FIFO), not a file" in error_of(fifo)


def test_missing_and_broken_links_are_not_found(tmp_path: Path) -> None:
    assert "spec file not found" in error_of(tmp_path / "nope.yaml")
    (tmp_path / "link.yaml").symlink_to(tmp_path / "gone.yaml")
    assert f"(a symbolic link to {tmp_path / 'gone.yaml'}, which does not exist)" in error_of(tmp_path / "link.yaml")


def test_an_unreadable_file_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("run: {name: x}\n")

    def denied(self: Path, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "open", denied)  # as root, chmod 000 would not stop the read
    assert f"the spec {spec} is not readable (permission denied)" in error_of(spec)


def test_the_cli_prints_what_the_path_is(cli, tmp_path: Path) -> None:
    result = cli("validate", str(tmp_path))
    assert result.code == 2 and "is a directory, not a file" in result.err and "Traceback" not in result.err
