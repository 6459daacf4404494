#!/usr/bin/env bash
# Packs what a lent GPU machine needs to check and measure the CUDA backend built here, for one
# call of the device tool: the GPU test binary and the two benches, the shared libraries they load
# that a bare CUDA image may lack (fmt, cpp-httplib, ...; not glibc, the C++ runtime or CUDA's own),
# the test fixtures, and run.sh, which runs everything and writes the logs under $OUT.
#
#   bench/gpu_bundle.sh [BUILD_DIR] [DEST]      (defaults: build, .gpu-bundle; DEST is git-ignored)
#   then, on the GPU machine:  bash .gpu-bundle/run.sh      (carry .gpu-bundle with the call)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$repo/build}
dest=${2:-$repo/.gpu-bundle}
bins=("$build/tests/engine/temper_cuda_tests" "$build/bench/temper-bench" "$build/bench/temper-kernel-bench")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "gpu_bundle: $b is missing: build with nvcc first (deploy/setup.sh)" >&2; exit 1; }
done
rm -rf "$dest" && mkdir -p "$dest/bin" "$dest/lib" "$dest/data"
# Stripped: debug info would take the bundle past what one device call carries (64 MiB).
for b in "${bins[@]}"; do strip -o "$dest/bin/$(basename "$b")" "$b"; done
# Libraries from the distribution, minus what every Linux and every CUDA image has.
for b in "${bins[@]}"; do ldd "$b"; done | awk '/=> \// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcudart|libcublas[^/]*|libcuda)\.so' |
  while read -r lib; do cp -L "$lib" "$dest/lib/"; done
cp -r "$repo/tests/data/gemma4-tiny" "$repo/tests/data/gemma4-31b-shape" "$dest/data/"
cat > "$dest/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the CUDA tests and benches of this bundle; logs go to $OUT (or /tmp/gpu-out).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-/tmp/gpu-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export TEMPER_TEST_DATA="$here/data"
if [ -z "${TEMPER_NCCL_LIBRARY:-}" ]; then
  TEMPER_NCCL_LIBRARY=$(find / -name 'libnccl.so.2' -not -path '/proc/*' 2>/dev/null | head -1) && export TEMPER_NCCL_LIBRARY
fi
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
cfg="$here/data/gemma4-31b-shape/config.json"
"$here/bin/temper_cuda_tests" --durations yes 2>&1 | tee "$out/cuda_tests.log" | tail -30
"$here/bin/temper-kernel-bench" --config "$cfg" 2>&1 | tee "$out/kernel_bench.log"
"$here/bin/temper-bench" --gpus 0 --synthetic "$cfg" 2>&1 | tee "$out/bench_tp1.log"
"$here/bin/temper-bench" --gpus 0,0,0,0 --synthetic "$cfg" --gpu-prefill 2048 --gpu-decode 128 2>&1 | tee "$out/bench_tp4_one_gpu.log"
RUN
chmod +x "$dest/run.sh"
du -sh "$dest"
