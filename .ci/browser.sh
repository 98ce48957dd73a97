#!/usr/bin/env bash
# The web page (web/) in real headless Chromium against the real server binary:
#
#   bash .ci/browser.sh [path/to/oanquan-server]
#
# Installs Debian's chromium and the page's node modules (npm ci), rebuilds the bundle from
# source and fails if it differs from the committed one (crates/oanquan-server/web-dist/, which
# the server embeds), rebuilds the server if the bundle it embeds is not the committed one, then
# runs web/test/*.test.ts: two players play a whole game by clicks with a spectator and a server
# restart, a flag falls, a seek is answered; screenshots go to docs/screenshots/.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-${OANQUAN_SERVER_BIN:-$ROOT/target/debug/oanquan-server}}
# Absolute: the tests run from web/, and .ci/run passes a path relative to the root.
BIN=$(realpath -m "$BIN")
step() { printf '\n=== browser: %s (%ss)\n' "$*" "$SECONDS"; }

step "chromium and node modules"
if ! command -v chromium >/dev/null; then
  apt-get update -qq && apt-get install -y -qq chromium >/dev/null
fi
cd "$ROOT/web"
npm ci --no-audit --no-fund --silent

step "the committed bundle is what the sources build"
npm run build --silent >/dev/null
if ! git -C "$ROOT" diff --quiet --exit-code -- crates/oanquan-server/web-dist \
  || [[ -n $(git -C "$ROOT" status --porcelain -- crates/oanquan-server/web-dist) ]]; then
  git -C "$ROOT" status --short -- crates/oanquan-server/web-dist
  echo "browser.sh: web-dist/ differs from a build of web/: run \`npm run build\` in web/ and commit it" >&2
  exit 1
fi

step "browser tests against $BIN"
[[ -x $BIN ]] || { echo "browser.sh: no server binary at $BIN" >&2; exit 1; }
OANQUAN_SERVER_BIN=$BIN npm test
