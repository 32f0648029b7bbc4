"""The model cache's manifest check in both modes (eighth mutation audit).

`read_manifest(verify="size")` (every start: cheap) accepts a file whose bytes changed but whose size
did not, and refuses one whose size changed; `verify="sha256"` (reads every byte) refuses both.
"""

from __future__ import annotations

from pathlib import Path

from beyondagent_plugin_torch.model_cache import read_manifest, write_manifest

MANIFEST = "manifest.json"


def built(directory: Path) -> Path:
    directory.mkdir()
    (directory / "weights.bin").write_bytes(b"hello")
    (directory / "config.json").write_text("{}")
    write_manifest(directory, MANIFEST, ["weights.bin", "config.json"], recipe="r1")
    return directory


def test_an_untouched_build_passes_both_checks(tmp_path: Path) -> None:
    directory = built(tmp_path / "model")
    for verify in ("size", "sha256"):
        manifest = read_manifest(directory, MANIFEST, verify=verify)
        assert manifest is not None and manifest["recipe"] == "r1"
        assert manifest["files"]["weights.bin"]["size"] == 5


def test_same_size_edits_pass_the_size_check_and_fail_the_sha256_check(tmp_path: Path) -> None:
    directory = built(tmp_path / "model")
    (directory / "weights.bin").write_bytes(b"hellx")
    assert read_manifest(directory, MANIFEST, verify="size") is not None
    assert read_manifest(directory, MANIFEST, verify="sha256") is None


def test_a_size_change_fails_both_checks(tmp_path: Path) -> None:
    directory = built(tmp_path / "model")
    (directory / "weights.bin").write_bytes(b"hello!")
    assert read_manifest(directory, MANIFEST, verify="size") is None
    assert read_manifest(directory, MANIFEST, verify="sha256") is None
