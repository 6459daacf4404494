#!/usr/bin/env bash
# The run.sh of a GPU bundle (bench/gpu_bundle.sh copies this file there): checks and measures the
# CUDA backend on whatever NVIDIA GPU the machine has, unattended, each step under its own time
# limit, and writes ONE results file ready to paste into a dated entry of bench/history/.
#
#   bash .gpu-bundle/run.sh        (logs and results.md go to $OUT, else /tmp/gpu-out)
#
# Steps, in order (limit in seconds; LIMIT_<NAME> in the environment overrides one, and the
# results file records the limits used). A step that outlives its limit gets SIGTERM, and SIGKILL
# 5 s later; the defaults plus those 5 s each add up to 500 s, under the device tool's 600 s call.
#   nvidia-smi    15  the GPU, driver and topology
#   cuda-tests    75  temper_cuda_tests: every kernel against its CPU twin, the backend against the
#                     golden fixture at tp 1, 2 and 4 on one GPU with greedy tokens compared; then,
#                     in a second process, the all-reduce cases, and in a third the stall case
#                     (temper_cuda_stall_tests); passes only if all exit 0, Catch2 says "All tests
#                     passed" and no case SKIPPED
#   kernel-bench  80  temper-kernel-bench: kernels against copy bandwidth, the 4xL4 estimate, and
#                     the tensor-core attention of a tp 1 step's decode rows (1 K and 8 K context,
#                     1 and 8 rows) and of a 2,048-token prefill chunk (no kernel candidates wait
#                     in bench/ now: the last two were decided by the H200 run of 2026-11-29)
#   bench-tp1    200  temper-bench --gpus 0: the 31B shape at tp 1 (57 GiB of synthetic weights), with its
#                     MTP drafter's shape (0.94 GB) timed too, decoding after 1,024- and 8,192-token
#                     prompts (issue 25's two contexts; eight 8 K prefills take about 80 s on an H200)
#   bench-tp4    105  temper-bench --gpus 0,0,0,0: the same at tp 4, ranks sharing the GPU, with
#                     one prefill length and 64 decode steps so it fits its limit, and ordinary
#                     edges in its captured steps (--gpu-ordinary-edges): as an L4 (sm_89) runs
#                     them, and the one bench step that does not rest on programmatic launches,
#                     which no GPU has run yet (the cuda-tests step checks them)
# With a baseline (baseline/bin: an older commit's two benches, gpu_bundle.sh BASELINE_BUILD), two
# more steps time it on the same GPU, kernel-bench-baseline and bench-tp1-baseline, bench-tp1
# decodes after the 1,024-token prompt only, and the limits shrink to fit the call (actual times on
# an H200, 2026-11-27: tests 19-25 s, kernel bench 4-5 s, bench-tp1 55-60 s with 1 K alone,
# bench-tp4 25-35 s): cuda-tests 60, kernel-bench 40 and 40, bench-tp1 150 and 150, bench-tp4 50.
# A step passes when it exits 0 within its limit AND its log holds the line that only a complete,
# self-checked run prints (a bench that stops early, or a test binary that saw no GPU, fails).
#
# Exit status: 0 when every step passed, 1 otherwise; results.md is written either way. $OUT holds
# one log per step and results.md, 6 files (8 with a baseline): the device tool brings back at most 8.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${OUT:-/tmp/gpu-out}
mkdir -p "$out"
results="$out/results.md"
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export TEMPER_TEST_DATA="$here/data"
# NCCL only serves ranks on distinct GPUs; look where CUDA images keep it (no search of /).
if [ -z "${TEMPER_NCCL_LIBRARY:-}" ]; then
  for lib in /usr/lib/x86_64-linux-gnu/libnccl.so.2 /usr/local/cuda/lib64/libnccl.so.2 \
             /opt/*/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2 \
             /usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2; do
    if [ -f "$lib" ]; then export TEMPER_NCCL_LIBRARY="$lib"; break; fi
  done
fi
cfg="$here/data/gemma4-31b-shape/config.json"
# gpu_bundle.sh gzips the binaries to fit one device call; unpacked once, beside the archives.
for z in "$here"/bin/*.gz "$here"/baseline/bin/*.gz; do
  [ -e "$z" ] || continue
  gzip -dc "$z" > "${z%.gz}" && chmod +x "${z%.gz}" || { echo "run.sh: cannot unpack $z" >&2; exit 1; }
done

names=() commands=() limits=() statuses=() seconds=()
failed=0
# run_step NAME DEFAULT_LIMIT MARKER SHOWN COMMAND...: runs COMMAND under `timeout` with its output
# in $out/NAME.log, and records its status (ok, FAILED (exit N), FAILED (no MARKER), TIMED OUT,
# KILLED) and, for the results table, SHOWN or else COMMAND with the bundle's path left out.
run_step() {
  local name=$1 limit=$2 marker=$3 shown=$4
  shift 4
  local var="LIMIT_${name//-/_}"
  var=${var^^}
  limit=${!var:-$limit}
  local log="$out/$name.log" start end rc status
  echo "== $name (limit ${limit} s): $*"
  start=$(date +%s.%N)
  timeout -k 5 "$limit" "$@" > "$log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  if [ $rc -eq 124 ]; then
    status="TIMED OUT after ${limit} s"
  elif [ $rc -eq 137 ]; then
    status="KILLED ${limit} s + 5 s after start (ignored SIGTERM)"
  elif [ $rc -ne 0 ]; then
    status="FAILED (exit $rc)"
  elif ! grep -qF -- "$marker" "$log"; then
    status="FAILED (exit 0, but the log lacks \"$marker\")"
  elif [ "$name" = cuda-tests ] && grep -q 'SKIPPED:' "$log"; then
    status="FAILED ($(grep -c 'SKIPPED:' "$log") test case(s) SKIPPED: no GPU seen)"
  else
    status=ok
  fi
  [ "$status" = ok ] || failed=$((failed + 1))
  [ -n "$shown" ] || shown="${*/#$here\//}"
  names+=("$name") commands+=("$shown") limits+=("$limit") statuses+=("$status")
  seconds+=("$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')")
  echo "   $status (${seconds[-1]} s)"
}

run_step nvidia-smi 15 "gpu: " "nvidia-smi; nvidia-smi topo -m; nvidia-smi --query-gpu=name,driver_version,memory.total" \
  bash -c 'set -o pipefail; nvidia-smi || exit
  nvidia-smi topo -m || echo "(nvidia-smi topo -m failed)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed "s/^/gpu: /"'
base="$here/baseline/bin"
if [ -d "$base" ]; then
  limit_tests=60 limit_kernels=40 limit_tp1=150 limit_tp4=50 contexts=1024
else
  limit_tests=75 limit_kernels=80 limit_tp1=200 limit_tp4=105 contexts=1024,8192
fi
# The all-reduce cases run in a process of their own, after the rest: a rank that never sees its peer
# traps after 20 s, which ends every CUDA context of the process and so every case after it (an H100,
# 2026-11-26: 11 of 14 cases failed behind one all-reduce case). Then the stall case, which traps on
# purpose, in a third.
run_step cuda-tests $limit_tests "All tests passed" \
  'bin/temper_cuda_tests "~[all-reduce]"; bin/temper_cuda_tests "[all-reduce]"; bin/temper_cuda_stall_tests (each --durations yes)' \
  bash -c '"$0" "~[all-reduce]" --durations yes; worst=$?
           "$0" "[all-reduce]" --durations yes; rc=$?; [ $rc -gt $worst ] && worst=$rc
           "$1" --durations yes; rc=$?; [ $rc -gt $worst ] && worst=$rc
           exit $worst' "$here/bin/temper_cuda_tests" "$here/bin/temper_cuda_stall_tests"
run_step kernel-bench $limit_kernels "4xL4, tp 4, batch-1 decode:" "" "$here/bin/temper-kernel-bench" --config "$cfg"
if [ -d "$base" ]; then
  run_step kernel-bench-baseline $limit_kernels "4xL4, tp 4, batch-1 decode:" "" "$base/temper-kernel-bench" \
    --config "$cfg"
fi
run_step bench-tp1 $limit_tp1 "temper-bench --gpus: finished" "" "$here/bin/temper-bench" --gpus 0 --synthetic "$cfg" \
  --gpu-drafter "$here/data/gemma4-31b-shape/assistant.json" --gpu-context "$contexts"
if [ -d "$base" ]; then
  run_step bench-tp1-baseline $limit_tp1 "temper-bench --gpus: finished" "" "$base/temper-bench" --gpus 0 \
    --synthetic "$cfg"
fi
run_step bench-tp4 $limit_tp4 "temper-bench --gpus: finished" "" "$here/bin/temper-bench" --gpus 0,0,0,0 \
  --synthetic "$cfg" --gpu-prefill 2048 --gpu-decode 64 --gpu-ordinary-edges

# ---- results.md ----
# The result lines of a bench log ("* " bullets and "|" table rows), a blank line between a run of
# bullets and a table so markdown renders both.
results_of() {
  awk '/^\* / { if (kind == "t") print ""; print; kind = "b"; next }
       /^\|/  { if (kind == "b") print ""; print; kind = "t"; next }' "$1"
}
gpu=$(sed -n 's/^gpu: //p' "$out/nvidia-smi.log" 2>/dev/null | paste -sd ';' -)
total_limit=0
for l in "${limits[@]}"; do total_limit=$((total_limit + l + 5)); done
{
  echo "## GPU bundle run, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "- GPU (nvidia-smi: name, driver, memory): ${gpu:-unknown (nvidia-smi gave nothing)}"
  echo "- bundle: $(awk 'NR > 1 { printf "; " } { printf "%s", $0 }' "$here/BUILD" 2>/dev/null || echo "no BUILD file")"
  echo "- CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING:-unset (lazy, the default since CUDA 12.2)};" \
       "NCCL: ${TEMPER_NCCL_LIBRARY:-not found}"
  echo "- $(( ${#names[@]} - failed )) of ${#names[@]} steps passed; limits plus 5 s kill grace each: ${total_limit} s"
  echo
  echo "| step | command | status | s | limit s |"
  echo "|---|---|---|---:|---:|"
  for i in "${!names[@]}"; do
    echo "| ${names[$i]} | \`${commands[$i]//|/\\|}\` | ${statuses[$i]} | ${seconds[$i]} | ${limits[$i]} |"
  done
  for i in "${!names[@]}"; do
    log="$out/${names[$i]}.log"
    [ "${names[$i]}" = nvidia-smi ] && [ "${statuses[$i]}" = ok ] && continue
    if [ "${names[$i]}" = cuda-tests ]; then
      body=$(grep -E '^(All tests passed|test cases:|assertions:)|^[0-9]+\.[0-9]+ s: ' "$log" | sed 's/^/    /')
    else
      body=$(results_of "$log")
    fi
    printf '\n### %s: %s\n' "${names[$i]}" "${statuses[$i]}"
    [ -z "$body" ] || printf '\n%s\n' "$body"
    if [ "${statuses[$i]}" != ok ]; then
      printf '\nLast lines of %s.log:\n\n' "${names[$i]}"
      tail -n 8 "$log" | sed 's/^/    /'
    fi
  done
} > "$results"

if [ $total_limit -gt 540 ]; then
  echo "warning: the step limits add up to ${total_limit} s with the kill grace, over the 540 s budget" | tee -a "$results"
fi
echo
echo "results: $results ($failed of ${#names[@]} steps failed)"
for i in "${!names[@]}"; do printf '  %-13s %s (%s s of %s)\n' "${names[$i]}" "${statuses[$i]}" "${seconds[$i]}" "${limits[$i]}"; done
[ $failed -eq 0 ]
