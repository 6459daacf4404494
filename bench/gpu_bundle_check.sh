#!/usr/bin/env bash
# Proves the GPU bundle's run.sh (bench/gpu_bundle_run.sh) without a GPU: its time limits, its
# failure accounting and its results file, with stand-in binaries and a stand-in nvidia-smi that
# pass, fail, hang, ignore SIGTERM, stop early, or see no GPU, as each scenario below asks.
#
#   bash bench/gpu_bundle_check.sh      (about 30 s; prints one line per check, exits 1 if any fails)
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bundle="$work/bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/data/gemma4-31b-shape" "$work/path"
echo '{}' > "$bundle/data/gemma4-31b-shape/config.json"
echo "stand-in bundle" > "$bundle/BUILD"
cp "$repo/bench/gpu_bundle_run.sh" "$bundle/run.sh"

# One stand-in for every program; what it does comes from STUB_<NAME> (pass by default):
#   pass       prints what a complete, checked run prints, exits 0
#   fail       prints an error, exits 1
#   hang       sleeps past any limit
#   stubborn   ignores SIGTERM and sleeps (only SIGKILL ends it)
#   early      exits 0 without the line a complete run prints
#   skipped    (tests) passes the way a test binary that saw no GPU does
cat > "$work/stub" <<'STUB'
#!/usr/bin/env bash
name=$(basename "$0")
case "$name" in
  temper-bench) [[ " $* " == *" --gpus 0 "* ]] && name=bench_tp1 || name=bench_tp4 ;;
  temper-kernel-bench) name=kernel_bench ;;
  temper_cuda_tests | temper_cuda_stall_tests) name=cuda_tests ;;
  nvidia-smi) name=nvidia_smi ;;
esac
var="STUB_${name^^}"
mode=${!var:-pass}
case "$mode" in
  fail) echo "stand-in $name: Internal: it broke" >&2; exit 1 ;;
  hang) exec sleep 1000 ;;
  stubborn) trap '' TERM; sleep 1000 & wait; sleep 1000 ;;
  early) echo "* a first result, then nothing"; exit 0 ;;
esac
case "$name" in
  nvidia_smi) [[ " $* " == *"--query-gpu"* ]] && echo "Stand-in GPU 80GB, 580.00, 81559 MiB" || echo "stand-in nvidia-smi $*" ;;
  cuda_tests)
    [ "$mode" = skipped ] && printf 'warning:\n  SKIPPED: no CUDA device present\n'
    printf '0.100 s: a test case\nAll tests passed (4 assertions in 14 test cases)\n' ;;
  kernel_bench) printf '* copy bandwidth: 1 GB/s\n\n| kernel | us |\n|---|---:|\n| GEMV | 1.0 |\n* => 4xL4, tp 4, batch-1 decode: 1-2 tok/s\n' ;;
  bench_tp*) printf '* self-check passed\n| batch | tok/s |\n|---:|---:|\n| 1 | 50 |\nlog line\ntemper-bench --gpus: finished, every check passed\n' ;;
esac
STUB
chmod +x "$work/stub"
# Gzipped, as gpu_bundle.sh ships them: run.sh unpacks them first.
for b in temper-bench temper-kernel-bench temper_cuda_tests temper_cuda_stall_tests; do
  gzip -9c "$work/stub" > "$bundle/bin/$b.gz"
done
cp "$work/stub" "$work/path/nvidia-smi"

failures=0
check() {  # check DESCRIPTION CONDITION...
  local what=$1
  shift
  if "$@"; then echo "ok    $what"; else echo "FAIL  $what"; failures=$((failures + 1)); fi
}
# scenario NAME ENV...: runs run.sh with the stand-ins and ENV, short limits; sets $rc, $secs, $res.
scenario() {
  local name=$1
  shift
  out="$work/out-$name"
  local start end
  start=$(date +%s)
  env PATH="$work/path:$PATH" OUT="$out" LIMIT_NVIDIA_SMI=3 LIMIT_CUDA_TESTS=3 LIMIT_KERNEL_BENCH=3 \
    LIMIT_KERNEL_BENCH_BASELINE=3 LIMIT_BENCH_TP1=3 LIMIT_BENCH_TP1_BASELINE=3 LIMIT_BENCH_TP4=3 "$@" \
    bash "$bundle/run.sh" > "$work/$name.stdout" 2>&1
  rc=$?
  end=$(date +%s)
  secs=$((end - start))
  res="$out/results.md"
}
has() { grep -qF -- "$2" "$1"; }
row() { grep -F "| $1 |" "$res" | grep -qF -- "$2"; }

scenario all-pass
check "all pass: exit 0" test "$rc" -eq 0
check "all pass: 5 of 5 steps passed" has "$res" "5 of 5 steps passed"
check "all pass: the kernel bench's results, where the kernel candidates are timed" \
  has "$res" "* => 4xL4, tp 4, batch-1 decode: 1-2 tok/s"
check "all pass: no whole-step run with engine options for kernel candidates" \
  bash -c "! grep -qF -- '--gpu-tensor-core' '$res'"
check "all pass: GPU name and driver from nvidia-smi" has "$res" "Stand-in GPU 80GB, 580.00, 81559 MiB"
check "all pass: the bench's results, a blank line between bullets and table" \
  grep -qzF -- $'* self-check passed\n\n| batch | tok/s |' "$res"
check "all pass: log lines stay out of the results" bash -c "! grep -qF 'log line' '$res'"
check "all pass: test durations and summary in the results" has "$res" "    All tests passed (4 assertions in 14 test cases)"
check "all pass: 6 files in \$OUT" test "$(ls "$out" | wc -l)" -eq 6

scenario broken STUB_CUDA_TESTS=skipped STUB_KERNEL_BENCH=hang STUB_BENCH_TP1=fail STUB_BENCH_TP4=early
check "broken: exit 1" test "$rc" -eq 1
check "broken: tests that saw no GPU fail (all three processes)" row cuda-tests "FAILED (3 test case(s) SKIPPED: no GPU seen)"
check "broken: a hang times out at its limit" row kernel-bench "TIMED OUT after 3 s"
check "broken: an exit 1 fails" row bench-tp1 "FAILED (exit 1)"
check "broken: exit 0 without the completion line fails" row bench-tp4 'FAILED (exit 0, but the log lacks "temper-bench --gpus: finished")'
check "broken: nvidia-smi still ok" row nvidia-smi "| ok |"
check "broken: a failed step's last log lines are in the results" has "$res" "    stand-in bench_tp1: Internal: it broke"
check "broken: 1 of 5 steps passed" has "$res" "1 of 5 steps passed"
check "broken: the whole run stayed within the limits (${secs} s)" test "$secs" -le 10

scenario stubborn STUB_BENCH_TP4=stubborn
check "stubborn: exit 1" test "$rc" -eq 1
check "stubborn: SIGKILL 5 s after the limit" row bench-tp4 "KILLED 3 s + 5 s after start"
check "stubborn: bounded by limit + grace (${secs} s)" test "$secs" -le 12

scenario no-gpu STUB_NVIDIA_SMI=fail
check "no nvidia-smi: exit 1, results still written" test "$rc" -eq 1 -a -s "$res"
check "no nvidia-smi: GPU unknown" has "$res" "unknown (nvidia-smi gave nothing)"
check "no nvidia-smi: the other steps ran" row bench-tp4 "| ok |"

scenario over-budget LIMIT_BENCH_TP1=530
check "limits over 540 s: warned in the results" has "$res" "over the 540 s budget"

# The default limits, with and without a baseline, fit the call: no warning with every override gone.
for with_baseline in no yes; do
  if [ $with_baseline = yes ]; then
    mkdir -p "$bundle/baseline/bin"
    for b in temper-bench temper-kernel-bench; do gzip -9c "$work/stub" > "$bundle/baseline/bin/$b.gz"; done
  fi
  out="$work/out-defaults-$with_baseline"
  env PATH="$work/path:$PATH" OUT="$out" bash "$bundle/run.sh" > /dev/null 2>&1
  check "default limits, baseline $with_baseline: within the 540 s budget" bash -c "! grep -qF 'over the 540 s budget' '$out/results.md'"
done

scenario baseline STUB_BENCH_TP4=fail
check "baseline: exit 1 (bench-tp4 failed)" test "$rc" -eq 1
check "baseline: 6 of 7 steps passed" has "$res" "6 of 7 steps passed"
check "baseline: its kernel bench ran" row kernel-bench-baseline "| ok |"
check "baseline: its bench ran" row bench-tp1-baseline "| ok |"
check "baseline: 8 files in \$OUT, what the device tool brings back" test "$(ls "$out" | wc -l)" -eq 8

echo
[ $failures -eq 0 ] && echo "gpu_bundle_check: every check passed" || echo "gpu_bundle_check: $failures checks failed"
[ $failures -eq 0 ]
