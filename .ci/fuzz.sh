#!/usr/bin/env bash
# Bounded coverage-guided fuzzing (cargo-fuzz / libFuzzer) of everything that reads untrusted
# input: the rules notation, `play`, stored game records and the server's protobuf → domain
# conversions (targets in fuzz/fuzz_targets). Fails on any crash, panic, leak or timeout, and
# prints how to reproduce it.
#
# Usage: bash .ci/fuzz.sh [seconds-per-target]   (default 45; OANQUAN_FUZZ_SECONDS works too)
#
# The seeds in fuzz/corpus/<target> are read, never written: new inputs go to a temporary
# directory, so a run leaves the repository as it was (except fuzz/artifacts on a crash).
# cargo-fuzz needs nightly-only rustc flags (-Zsanitizer=address, coverage passes); on a stable
# toolchain RUSTC_BOOTSTRAP=1 unlocks them.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-${OANQUAN_FUZZ_SECONDS:-45}}
targets=(notation play record convert)
cargo_fuzz_version=0.13.2

export RUSTC_BOOTSTRAP=1
export CARGO_TERM_COLOR=never

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz $cargo_fuzz_version"
  cargo install --locked cargo-fuzz --version "$cargo_fuzz_version"
fi

echo "fuzz: building ${#targets[@]} targets (release, debug assertions, AddressSanitizer)"
(cd fuzz && cargo fuzz build)
# Run the built binaries directly: `cargo fuzz run` would rebuild if a source changed meanwhile.
bin=fuzz/target/x86_64-unknown-linux-gnu/release
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_odr_violation=0}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
for target in "${targets[@]}"; do
  mkdir -p "$work/$target"
  echo "fuzz: $target for ${seconds}s"
  # -timeout: one input may take 10 s at most; -rss_limit_mb: memory per process.
  mkdir -p "fuzz/artifacts/$target"
  if "$bin/$target" "$work/$target" "fuzz/corpus/$target" \
      -artifact_prefix="fuzz/artifacts/$target/" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 >"$work/$target.log" 2>&1; then
    grep -E '^stat::number_of_executed_units|^stat::new_units_added' "$work/$target.log" \
      | sed "s/^/fuzz: $target /" || true
  else
    failed=$((failed + 1))
    echo "fuzz: $target FAILED; the end of its log:" >&2
    tail -n 60 "$work/$target.log" >&2
    echo "fuzz: reproduce with: cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run $target artifacts/$target/<file>" >&2
  fi
done

passed=$(( ${#targets[@]} - failed ))
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
