#!/usr/bin/env bash
# Fuzzes the parsers that read input from outside the node (fuzz/: static pod manifests, the
# config file, the kubelet API's request targets, CRI and CSI replies), each target for SECONDS
# (default 600) one after another, niced, under libFuzzer's 2 GiB memory limit and a 10 s limit
# per input (an alias bomb or a quadratic parse is a finding too). Starts from the seeds in
# fuzz/corpus/<target>; what a run adds goes to fuzz/corpus-run/<target> (not kept), a crash to
# fuzz/artifacts/<target>. Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${1:-600}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(static_pod_manifest config_file kubelet_api_query cri_replies csi_replies)
fi
for target in "${targets[@]}"; do
  mkdir -p "corpus-run/$target"
  echo "=== $target: ${seconds}s"
  nice cargo +nightly fuzz run -O "$target" "corpus-run/$target" "corpus/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1
done
