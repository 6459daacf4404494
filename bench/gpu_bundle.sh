#!/usr/bin/env bash
# Packs what a lent GPU machine needs to check and measure the CUDA backend built here, for ONE call
# of the device tool: the GPU test binaries and the two benches, the shared libraries they load that a
# bare CUDA image may lack (fmt, ...; not glibc, the C++ runtime or CUDA's own), the test fixtures,
# a BUILD note (commit, nvcc) and run.sh (bench/gpu_bundle_run.sh: every step under its own time
# limit, each checked, logs and one results.md under $OUT, exit non-zero if any step fails).
#
#   bench/gpu_bundle.sh [BUILD_DIR] [DEST]      (defaults: build, .gpu-bundle; DEST is git-ignored)
#   BASELINE_BUILD=DIR bench/gpu_bundle.sh ...  also carries DIR's two benches (a build of an older
#     commit: git worktree add /tmp/base REV && cmake -S /tmp/base -B /tmp/base/build -G Ninja
#     -DCMAKE_BUILD_TYPE=RelWithDebInfo && ninja -C /tmp/base/build temper-bench temper-kernel-bench),
#     and run.sh times them too, on the same GPU in the same call: an A/B that needs no second call
#   then, on the GPU machine, in one call (about 9 minutes at most):
#     device run, carry [".gpu-bundle"], timeout 600:  bash .gpu-bundle/run.sh
#   and paste $OUT/results.md into a dated entry of bench/history/ as it is (the figures that
#   change go to bench/RESULTS.md).
#
# bench/gpu_bundle_check.sh proves run.sh's limits and failure accounting with stand-in binaries.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$repo/build}
dest=${2:-$repo/.gpu-bundle}
bins=("$build/tests/engine/temper_cuda_tests" "$build/tests/engine/temper_cuda_stall_tests" "$build/bench/temper-bench"
  "$build/bench/temper-kernel-bench")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "gpu_bundle: $b is missing: build with nvcc first (deploy/setup.sh)" >&2; exit 1; }
done
baseline_bins=()
if [ -n "${BASELINE_BUILD:-}" ]; then
  baseline_bins=("$BASELINE_BUILD/bench/temper-bench" "$BASELINE_BUILD/bench/temper-kernel-bench")
  for b in "${baseline_bins[@]}"; do
    [ -x "$b" ] || { echo "gpu_bundle: BASELINE_BUILD lacks $b" >&2; exit 1; }
  done
fi
rm -rf "$dest" && mkdir -p "$dest/bin" "$dest/lib" "$dest/data"
# Stripped and gzipped (run.sh unpacks them first): debug info, or the four binaries as they are
# (46 MiB on 2026-11-27, beside the tree's 15), would take the bundle past what one device call
# carries (64 MiB); gzip leaves about 40% of them.
for b in "${bins[@]}"; do strip -o "$dest/bin/$(basename "$b")" "$b"; done
if [ ${#baseline_bins[@]} -gt 0 ]; then
  mkdir -p "$dest/baseline/bin"
  for b in "${baseline_bins[@]}"; do strip -o "$dest/baseline/bin/$(basename "$b")" "$b"; done
fi
gzip -9 "$dest/bin/"* ${baseline_bins[@]:+"$dest/baseline/bin/"*}
# Libraries from the distribution, minus what every Linux and every CUDA image has.
for b in "${bins[@]}" "${baseline_bins[@]}"; do ldd "$b"; done | awk '/=> \// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcudart|libcublas[^/]*|libcuda)\.so' |
  while read -r lib; do cp -L "$lib" "$dest/lib/"; done
# reference/: transformers' own Gemma 4 and Gemma 3 fixtures (8 MiB), which temper_cuda_tests' official
# cases decode on the GPU.
cp -r "$repo/tests/data/gemma4-tiny" "$repo/tests/data/gemma4-tiny-assistant" "$repo/tests/data/gemma4-31b-shape" \
  "$repo/tests/data/reference" "$dest/data/"
cp "$repo/bench/configs/gemma4-31b-assistant-shape.json" "$dest/data/gemma4-31b-shape/assistant.json"
# Which tree and compiler the binaries come from, for the results file.
commit=$(git -C "$repo" describe --always --dirty 2>/dev/null || echo "not a git checkout")
nvcc=$(/usr/local/cuda/bin/nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
echo "commit $commit ($(git -C "$repo" branch --show-current 2>/dev/null)), built $(date -u '+%Y-%m-%d %H:%M UTC') with nvcc ${nvcc:-?}" \
  > "$dest/BUILD"
if [ ${#baseline_bins[@]} -gt 0 ]; then
  source_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BASELINE_BUILD/CMakeCache.txt" 2>/dev/null)
  base_commit=$(git -C "${source_dir:-$BASELINE_BUILD}" describe --always --dirty 2>/dev/null || echo "unknown commit")
  echo "baseline: commit $base_commit, built in $BASELINE_BUILD" >> "$dest/BUILD"
fi
cp "$repo/bench/gpu_bundle_run.sh" "$dest/run.sh"
chmod +x "$dest/run.sh"
size=$(du -sb "$dest" | cut -f1)
echo "gpu_bundle: $dest, $((size / 1024)) KiB: $(awk 'NR > 1 { printf "; " } { printf "%s", $0 }' "$dest/BUILD")"
# One device call carries the repository's working tree plus the bundle, 64 MiB in all.
[ "$size" -lt $((48 << 20)) ] || { echo "gpu_bundle: $dest is over 48 MiB; the device call carries 64 MiB with the tree" >&2; exit 1; }
