#!/usr/bin/env bash
# Checks that proto/ (as in the work tree) has no breaking change, with the `breaking` rules of
# buf.yaml (FILE), apart from the breaks listed in .ci/buf-breaking-accepted.txt:
#
#   bash .ci/buf-breaking.sh            # against BASELINE and HEAD~1 (CI), see below
#   bash .ci/buf-breaking.sh HEAD       # uncommitted changes against the last commit only
#   bash .ci/buf-breaking.sh origin/main
#
# (BUF_BREAKING_AGAINST=<ref> works too.) Without a ref it compares against two commits:
#
# * BASELINE, the last commit before v1's one accepted break: the contract as it was frozen.
#   A fixed commit catches a break of that contract however the commits reach main (a branch
#   fast-forwarded, several merges before one CI run, the break in an earlier commit of a
#   push); HEAD~1 alone looks at the last commit only.
# * HEAD~1, the previous commit: catches breaks of what was added after BASELINE (a field added
#   later and then renamed breaks nothing that BASELINE had), in the commit that makes them.
#
# Move BASELINE forward when a newer contract is to be held to (e.g. a release); lines of the
# accepted list that no comparison reports any more can then go.
#
# A break is accepted only if its rule, file and buf's message (which names the field and both
# sides of the change) are a line of the accepted list; anything else fails. When there is
# nothing to compare against (first commit, shallow clone without that commit, no proto/ in
# it) that comparison is skipped with a message. Exit: 0 no unaccepted break, 1 a break,
# 2 the check could not run.
set -euo pipefail
cd "$(dirname "$0")/.."

BASELINE=d9d5c38bafb2006f37ff012b4bfe1ad09051cd38
ACCEPTED=.ci/buf-breaking-accepted.txt

die() { printf 'buf breaking: ERROR: %s\n' "$*" >&2; exit 2; }

command -v buf >/dev/null || die "buf not found (npm install -g @bufbuild/buf@1.75.0)"
command -v jq >/dev/null || die "jq not found"
[[ -f buf.yaml && -d proto ]] || die "run from the repository (buf.yaml and proto/ expected at its root)"
[[ -f $ACCEPTED ]] || die "$ACCEPTED is missing"
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "buf breaking: SKIPPED: not a git repository: no previous proto/ to compare with"
  exit 0
fi

# The accepted breaks, comments and blank lines left out.
accepted=$(grep -v -e '^#' -e '^[[:space:]]*$' "$ACCEPTED" || true)

OLD=$(mktemp -d "${TMPDIR:-/tmp}/buf-breaking.XXXXXX")
trap 'rm -rf "$OLD"' EXIT

# against REF: compares proto/ with proto/ of REF; returns 0 (no unaccepted break or skipped),
# 1 (unaccepted break) or exits 2.
against() {
  local ref=$1 commit short out status=0 found unaccepted
  if ! commit=$(git rev-parse --verify --quiet "$ref^{commit}"); then
    if [[ $(git rev-parse --is-shallow-repository) == true ]]; then
      echo "buf breaking: SKIPPED $ref: not in this shallow clone; fetch more history (git fetch --unshallow) to check"
      return 0
    elif [[ $ref == HEAD~* ]] && [[ -z $(git rev-parse --verify --quiet 'HEAD^') ]]; then
      echo "buf breaking: SKIPPED $ref: HEAD is the first commit, there is no previous proto/"
      return 0
    fi
    die "cannot resolve '$ref' to a commit"
  fi
  short=$(git rev-parse --short "$commit")
  if [[ -z $(git ls-tree -d "$commit" proto) ]]; then
    echo "buf breaking: SKIPPED $ref: commit $short has no proto/, nothing to compare with"
    return 0
  fi

  # Export the old proto/ and compare file by file. Exporting (rather than buf's .git input)
  # also works when that commit had no buf.yaml, or an older one.
  rm -rf "${OLD:?}/$short" && mkdir -p "$OLD/$short"
  git archive "$commit" proto | tar -x -C "$OLD/$short"
  echo "buf breaking: proto/ against $ref ($short), rules from buf.yaml"
  out=$(buf breaking proto --against "$OLD/$short/proto" --error-format json) || status=$?
  case $status in
    0) echo "buf breaking: OK, no breaking change against $short"; return 0 ;;
    100) ;; # buf found breaking changes: sort them below
    *) printf '%s\n' "$out"; die "buf breaking failed to run against $short (exit $status)" ;;
  esac
  found=$(jq -r '"\(.type) \(.path) \(.message)"' <<<"$out") || die "cannot read buf's JSON output: $out"
  unaccepted=$(grep -Fxv -f <(printf '%s\n' "$accepted") <<<"$found" || true)
  if [[ -z $unaccepted ]]; then
    echo "buf breaking: OK against $short: $(wc -l <<<"$found") break(s), each listed in $ACCEPTED"
    return 0
  fi
  {
    printf '%s\n' "$unaccepted" | sed 's/^/  /'
    echo "buf breaking: FAILED: the changes above break clients of $ref ($short)."
    echo "  Restore compatibility (add, don't rename/renumber/remove; reserve removed numbers),"
    echo "  or move the breaking change to a new package version (oanquan.v2)."
  } >&2
  return 1
}

if [[ $# -gt 0 || -n ${BUF_BREAKING_AGAINST:-} ]]; then
  refs=("${1:-$BUF_BREAKING_AGAINST}")
else
  refs=("$BASELINE" HEAD~1)
fi
failed=0
for ref in "${refs[@]}"; do
  against "$ref" || failed=1
done
exit "$failed"
