"""Which server binary the tests start (server_binary.py); no server needed."""

from __future__ import annotations

import os
import pathlib

import pytest

from server_binary import NoServerBinary, describe, locate


def fake_binary(repo: pathlib.Path, profile: str, mtime: float) -> pathlib.Path:
    path = repo / "target" / profile / "oanquan-server"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    os.utime(path, (mtime, mtime))
    return path


def test_a_release_build_alone_is_found(tmp_path):
    # The README's quick start builds only target/release.
    release = fake_binary(tmp_path, "release", 1_000)
    binary, why = locate(tmp_path, {})
    assert binary == release
    assert describe(binary, why, tmp_path).startswith("oanquan-server: target/release/oanquan-server (")


def test_the_binary_built_last_wins(tmp_path):
    release = fake_binary(tmp_path, "release", 1_000)
    debug = fake_binary(tmp_path, "debug", 2_000)
    assert locate(tmp_path, {}) == (debug, "built more recently than target/release/oanquan-server")
    os.utime(release, (3_000, 3_000))
    assert locate(tmp_path, {})[0] == release
    os.utime(debug, (3_000, 3_000))
    assert locate(tmp_path, {})[0] == release, "release wins a tie"


def test_the_environment_variable_comes_first(tmp_path):
    fake_binary(tmp_path, "release", 1_000)
    mine = fake_binary(tmp_path / "elsewhere", "debug", 500)
    assert locate(tmp_path, {"OANQUAN_SERVER_BIN": str(mine)}) == (mine, "from OANQUAN_SERVER_BIN")
    with pytest.raises(NoServerBinary, match="OANQUAN_SERVER_BIN=.*not an executable"):
        locate(tmp_path, {"OANQUAN_SERVER_BIN": str(tmp_path / "missing")})


def test_no_binary_says_how_to_build_one(tmp_path):
    (tmp_path / "target" / "debug").mkdir(parents=True)
    (tmp_path / "target" / "debug" / "oanquan-server").write_text("not executable")
    with pytest.raises(NoServerBinary, match=r"cargo build --release -p oanquan-server"):
        locate(tmp_path, {})
