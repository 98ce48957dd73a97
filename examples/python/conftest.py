"""pytest setup: generates the stubs from proto/ into a temp dir, and starts the real server.

Environment:
  OANQUAN_SERVER_ADDR  host:port of a running server (then none is started), or
  OANQUAN_SERVER_BIN   path of the oanquan-server binary to start (default: the newer of
                       ../../target/release and ../../target/debug, see server_binary.py).

The first line of the output names the server the tests use.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading

import pytest

HERE = pathlib.Path(__file__).resolve().parent
_GEN_DIR: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    # Generate before any test module imports oanquan_client.
    global _GEN_DIR
    sys.path.insert(0, str(HERE))
    import generate

    _GEN_DIR = tempfile.mkdtemp(prefix="oanquan-py-gen-")
    generate.generate(pathlib.Path(_GEN_DIR))
    os.environ["OANQUAN_PY_GEN"] = _GEN_DIR


_SERVER: tuple[pathlib.Path, str] | str | None = None  # (binary, why), or why there is none


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    # Before pytest's own header, so the first line says which server the results are about.
    global _SERVER
    import server_binary

    addr = os.environ.get("OANQUAN_SERVER_ADDR")
    if addr:
        line = f"oanquan-server: the running server at {addr} (from OANQUAN_SERVER_ADDR)"
    else:
        try:
            _SERVER = server_binary.locate()
            line = server_binary.describe(*_SERVER)
        except server_binary.NoServerBinary as error:
            _SERVER = str(error)
            line = f"oanquan-server: none: {error}"
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _GEN_DIR:
        shutil.rmtree(_GEN_DIR, ignore_errors=True)


def _start_server(binary: str, args: list[str], startup_timeout: float = 20.0):
    """Starts the binary and returns (process, address) once it printed its listening line."""
    proc = subprocess.Popen(
        [binary, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(startup_timeout)
    prefix = "oanquan-server listening on "
    if not line or not line[0].startswith(prefix):
        proc.kill()
        _, err = proc.communicate(timeout=5)
        return None, f"no listening line within {startup_timeout}s (got {line!r}); stderr:\n{err[-2000:]}"
    # Drain stderr so the server never blocks on a full pipe.
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    return proc, line[0][len(prefix):].strip()


@pytest.fixture(scope="session")
def server_addr():
    addr = os.environ.get("OANQUAN_SERVER_ADDR")
    if addr:
        yield addr
        return
    if not isinstance(_SERVER, tuple):
        pytest.fail(f"no server to start: {_SERVER}")
    binary = str(_SERVER[0])
    proc, result = _start_server(binary, ["--listen", "127.0.0.1:0", "--in-memory"])
    if proc is None:  # an older server without --in-memory
        proc, result = _start_server(binary, ["--listen", "127.0.0.1:0"])
    if proc is None:
        pytest.fail(f"cannot start {binary}: {result}")
    try:
        yield result
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture()
def client(server_addr):
    from oanquan_client import Client

    with Client(server_addr) as c:
        yield c
