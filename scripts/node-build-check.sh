#!/usr/bin/env bash
# Checks a node's build: `cargo build --no-default-features` leaves out the `standalone` feature,
# so the binary must hold none of the API emulator's code nor the fleet simulator's. Fails when
# its symbol table names anything of nodepulse-emulator, of actix-web and the crates only
# actix-web brings (the emulator's HTTP server), or of nodepulse's `fleet` and `standalone`
# modules, or when the binary does not refuse `--standalone` and `--nodes` by name.
#
#   scripts/node-build-check.sh            builds the shipped node (`--profile ship`, fat LTO:
#                                          tens of minutes on 2 cores) and checks it
#   PROFILE=dev scripts/node-build-check.sh  the same on a debug build (a few minutes)
#   scripts/node-build-check.sh BINARY     checks BINARY, builds nothing
#   scripts/node-build-check.sh --graph    only that the node build's dependency graph holds
#                                          none of those crates (`cargo tree`: a second, builds
#                                          nothing; what CI runs)
#
# CI runs `--graph` alone: a build of the node without the feature resolves its dependencies'
# features anew, so it compiles most of the tree a second time (docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${PROFILE:-ship}
# The emulator's crate and the crates only its HTTP server brings.
crates='nodepulse-emulator|actix-web|actix-http|actix-router|actix-server|actix-tls'
if [ "${1:-}" = --graph ]; then
  found=$(cargo tree -p nodepulse --no-default-features -e normal,build --prefix none |
    grep -E "^($crates) " | sort -u || true)
  if [ -n "$found" ]; then
    echo "a node build (--no-default-features) depends on the emulator's crates:" $found >&2
    exit 1
  fi
  echo "a node build (--no-default-features) depends on none of the emulator's crates"
  exit 0
fi
if [ $# -gt 0 ]; then
  binary=$1
else
  cargo build --profile "$profile" --no-default-features -p nodepulse --bin nodepulse
  dir=$profile
  [ "$profile" = dev ] && dir=debug
  binary="${CARGO_TARGET_DIR:-target}/$dir/nodepulse"
fi

symbols=$(nm "$binary" 2>/dev/null | wc -l)
if [ "$symbols" -eq 0 ]; then
  echo "$binary has no symbol table: check an unstripped build (strip only after this check)" >&2
  exit 1
fi
# Demangled, every function names its crate and module path, and a generic one instantiated
# elsewhere names the types it was instantiated with (`drop_in_place<nodepulse::fleet::...>`).
forbidden="$(sed 's/-/_/g; s/|/::|/g' <<<"$crates")::"
forbidden+='|nodepulse::fleet::|nodepulse::standalone::'
found=$(nm --demangle "$binary" | grep -E "$forbidden" || true)
if [ -n "$found" ]; then
  echo "$binary holds $(wc -l <<<"$found") symbols of the emulator, the fleet simulator or their crates, e.g.:" >&2
  head -5 <<<"$found" >&2
  exit 1
fi
# What it cannot run, it refuses by name, as a configuration error (exit 2).
refuses() { # EXPECTED ARGS...
  local expected=$1 status=0 said
  shift
  said=$("$binary" "$@" 2>&1) || status=$?
  if [ "$status" -ne 2 ] || ! grep -q "$expected" <<<"$said"; then
    echo "$binary $*: expected exit 2 and \"$expected\", got $status: $said" >&2
    exit 1
  fi
}
refuses "no standalone mode" --standalone
refuses "no fleet simulator" --nodes 2
echo "$binary: none of its $symbols symbols is the emulator's, the fleet simulator's or actix-web's; --standalone and --nodes are refused"
