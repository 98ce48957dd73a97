#!/usr/bin/env bash
# Checks that proto/ (as in the work tree) has no breaking change against proto/ of a
# previous commit, with the `breaking` rules of buf.yaml (FILE):
#
#   bash .ci/buf-breaking.sh            # against HEAD~1, the previous commit (CI)
#   bash .ci/buf-breaking.sh HEAD       # uncommitted changes against the last commit
#   bash .ci/buf-breaking.sh origin/main
#
# (BUF_BREAKING_AGAINST=<ref> works too.) When there is nothing to compare against (first
# commit, shallow clone without the parent, no proto/ in that commit) it says so and exits
# 0; a real break exits 1 with buf's list of what broke.
set -euo pipefail
cd "$(dirname "$0")/.."

REF=${1:-${BUF_BREAKING_AGAINST:-HEAD~1}}
skip() { printf 'buf breaking: SKIPPED: %s\n' "$*"; exit 0; }
die() { printf 'buf breaking: ERROR: %s\n' "$*" >&2; exit 2; }

command -v buf >/dev/null || die "buf not found (npm install -g @bufbuild/buf@1.75.0)"
[[ -f buf.yaml && -d proto ]] || die "run from the repository (buf.yaml and proto/ expected at its root)"
git rev-parse --git-dir >/dev/null 2>&1 || skip "not a git repository: no previous proto/ to compare with"

if ! commit=$(git rev-parse --verify --quiet "$REF^{commit}"); then
  if [[ $(git rev-parse --is-shallow-repository) == true ]]; then
    skip "$REF is not in this shallow clone; fetch more history (git fetch --deepen=1) to check"
  elif [[ $REF == HEAD~* ]] && [[ -z $(git rev-parse --verify --quiet 'HEAD^') ]]; then
    skip "HEAD is the first commit: there is no previous proto/ to compare with"
  else
    die "cannot resolve '$REF' to a commit"
  fi
fi
if [[ -z $(git ls-tree -d "$commit" proto) ]]; then
  skip "commit $(git rev-parse --short "$commit") ($REF) has no proto/: nothing to compare with"
fi

# Export the old proto/ and compare file by file. Exporting (rather than buf's .git input)
# also works when that commit had no buf.yaml, or an older one.
OLD=$(mktemp -d "${TMPDIR:-/tmp}/buf-breaking.XXXXXX")
trap 'rm -rf "$OLD"' EXIT
git archive "$commit" proto | tar -x -C "$OLD"

short=$(git rev-parse --short "$commit")
echo "buf breaking: proto/ against $REF ($short), rules from buf.yaml"
if buf breaking proto --against "$OLD/proto" --error-format text; then
  echo "buf breaking: OK, no breaking change against $short"
else
  status=$?
  echo "buf breaking: FAILED: the changes above break clients of $REF ($short)." >&2
  echo "  Restore compatibility (add, don't rename/renumber/remove; reserve removed numbers)," >&2
  echo "  or move the breaking change to a new package version (oanquan.v2)." >&2
  exit "$status"
fi
