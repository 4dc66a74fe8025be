#!/usr/bin/env bash
# Runs every test binary that `cargo test --workspace --all-targets` runs, each as cargo runs it
# (from its package's directory, with its manifest's path in the environment), but not all one
# after another: the black-box binary (tests/it) waits on timers and I/O for minutes, so the other
# binaries run beside it instead of before it. tests/heavy runs first and alone: its tests bound
# timings under load they make themselves. Each binary's output is printed whole when it ends,
# after a `Running` line as cargo's; the exit status is non-zero when any binary failed.
# It builds nothing: the binaries are those `cargo test --workspace --all-targets --no-run` built.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# One line per binary, in cargo's order: package directory, source file, executable. Cargo's own
# list, so a test target added anywhere in the workspace runs here too.
cargo test --workspace --all-targets --no-run --message-format=json 2>/dev/null | python3 -c '
import json, os, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message.get("executable") \
            and message["profile"]["test"]:
        package = os.path.dirname(message["manifest_path"])
        source = os.path.relpath(message["target"]["src_path"], package)
        print(package, source, message["executable"], sep="\t")
' >"$out/binaries"
if [ ! -s "$out/binaries" ]; then
  echo "run-test-binaries: cargo listed no test binary (build them first)" >&2
  exit 1
fi

# run_each FILE: the binaries FILE lists, one after another.
run_each() {
  local package source executable n
  while IFS=$'\t' read -r package source executable; do
    n=$(basename "$executable")
    {
      printf '     Running %s (%s)\n' "$source" "$executable"
      (cd "$package" && CARGO_MANIFEST_DIR="$package" CARGO_MANIFEST_PATH="$package/Cargo.toml" \
        "$executable" </dev/null)
      echo "$?" >"$out/$n.status"
    } >"$out/$n.log" 2>&1
    flock "$out/print.lock" cat "$out/$n.log"
  done <"$1"
}

# The black-box binary's longest tests wait out certificate lifetimes (70-150 s each, most of
# it idle): libtest starts tests in name order, so these (`tls_*`, `serving_*`) started last
# and alone made the binary's last two minutes. They run in a process of their own, from the
# start, beside the rest (`--skip`): every test still runs once. Module filters, not names, so
# a test added to these modules comes along.
long=(tls_bootstrap:: serving_certificate::)
skips=()
for filter in "${long[@]}"; do skips+=(--skip "$filter"); done
# run_black_box FILE: the black-box binary as two processes at once, the long tests and the rest.
run_black_box() {
  local package source executable n part status=0
  IFS=$'\t' read -r package source executable <"$1" || return 0
  n=$(basename "$executable")
  for part in long rest; do
    {
      if [ "$part" = long ]; then set -- "${long[@]}"; else set -- "${skips[@]}"; fi
      printf '     Running %s (%s %s)\n' "$source" "$executable" "$*"
      (cd "$package" && CARGO_MANIFEST_DIR="$package" CARGO_MANIFEST_PATH="$package/Cargo.toml" \
        "$executable" "$@" </dev/null)
      echo "$?" >"$out/$n.$part.status"
    } >"$out/$n.$part.log" 2>&1 &
  done
  wait
  for part in long rest; do
    flock "$out/print.lock" cat "$out/$n.$part.log"
    [ "$(cat "$out/$n.$part.status" 2>/dev/null)" = 0 ] || status=1
  done
  echo "$status" >"$out/$n.status"
}

grep -P '\ttests/heavy/main.rs\t' "$out/binaries" >"$out/alone"
grep -P '\ttests/it/main.rs\t' "$out/binaries" >"$out/black-box"
grep -v -P '\ttests/(heavy|it)/main.rs\t' "$out/binaries" >"$out/others"
run_each "$out/alone"
run_black_box "$out/black-box" &
black_box=$!
run_each "$out/others"
wait "$black_box"

status=0
while IFS=$'\t' read -r _ source executable; do
  code=$(cat "$out/$(basename "$executable").status" 2>/dev/null || echo "not run")
  if [ "$code" != 0 ]; then
    echo "run-test-binaries: $source ($executable) failed: $code" >&2
    status=1
  fi
done <"$out/binaries"
exit "$status"
