"""Which oanquan-server binary the tests start (the same rule as test/server.ts and
.ci/examples.sh):

1. $OANQUAN_SERVER_BIN, if set (it must be an executable file);
2. otherwise target/release/oanquan-server or target/debug/oanquan-server, whichever was built
   last (release on a tie): the README's quick start builds a release binary, `cargo build`
   a debug one, and the one built last is the one the user means;
3. otherwise none: build one with `cargo build --release -p oanquan-server`.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
CANDIDATES = ("target/release/oanquan-server", "target/debug/oanquan-server")


class NoServerBinary(Exception):
    """No binary to start; the message says how to get one."""


def _executable(path: pathlib.Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def locate(repo: pathlib.Path = REPO, environ: Mapping[str, str] = os.environ) -> tuple[pathlib.Path, str]:
    """Returns (binary, why it was chosen), or raises NoServerBinary."""
    given = environ.get("OANQUAN_SERVER_BIN")
    if given:
        path = pathlib.Path(given)
        if not _executable(path):
            raise NoServerBinary(f"OANQUAN_SERVER_BIN={given} is not an executable file")
        return path, "from OANQUAN_SERVER_BIN"
    found = [repo / candidate for candidate in CANDIDATES if _executable(repo / candidate)]
    if not found:
        raise NoServerBinary(
            f"no oanquan-server in {repo / 'target'}/{{release,debug}}: build one with "
            "`cargo build --release -p oanquan-server`, or set OANQUAN_SERVER_BIN"
        )
    # max() keeps the first of equal times: release, listed first, wins a tie.
    chosen = max(found, key=lambda path: path.stat().st_mtime)
    if len(found) == 1:
        return chosen, "the only one built"
    other = next(path for path in found if path != chosen)
    if other.stat().st_mtime == chosen.stat().st_mtime:
        return chosen, f"as new as {other.relative_to(repo)}; release wins a tie"
    return chosen, f"built more recently than {other.relative_to(repo)}"


def describe(binary: pathlib.Path, why: str, repo: pathlib.Path = REPO) -> str:
    """One line for the top of the test output."""
    shown = binary.relative_to(repo) if binary.is_relative_to(repo) else binary
    return f"oanquan-server: {shown} ({why}; OANQUAN_SERVER_BIN picks another)"
