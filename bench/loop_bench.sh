#!/bin/bash
# The loop on the whole Ubuntu 20.04 STIG profile, side by side with SCAP Security Guide's own
# remediation (`temper baseline`) on the same root in the same run (issue 9's benchmark).
#
# temperd runs a whole-profile batch on a fresh rootfs target whose roles are served by the scripted
# model server (tests/scripted_model: answers derived from each rule's SSG fix text), then
# `temper baseline` runs SSG's generated fix.sh on another fresh target over the same root. Reports:
# fix rate of the rules failing before (all, and rootfs-decidable), wall time, and the harness time
# per attempt (verify + snapshot or revert, from the attempt events).
#
# The scripted model answers instantly unless SIMULATE names a latency preset (sources of every figure in
# tests/scripted_model/latency_model.cpp; docs/testing.md has the table):
#   reference-box      vLLM 0.19, Gemma 4 31B bf16, TP 4 on 4×L4, as first deployed: 14.9 tok/s for one
#                      stream, 101.1 at 8, prefill 2,300 tok/s, KV 17,968 tokens, 8 sequences
#   reference-box-mtp  the competing system's deployment of 2026-11-29 on that box: the same with the MTP
#                      drafter, k = 2 (Worker 60% accepted, 30.5 tok/s alone; other roles 95%, 40.2),
#                      KV 45,336 tokens, --max-model-len 16384 (longer requests refused as vLLM does)
#   temper-4xl4        temper's engine on that box, from its H200 kernel times and 4×L4 estimate: 13.1
#                      tok/s for one stream, 54.5 at 8, prefill 1,968 tok/s, KV 401,264 tokens, prompt-
#                      lookup speculation as measured on the roles' replies (Worker 17.7 tok/s alone)
# Each answer then takes the time that engine would (batched decoding, prefill, prefix cache bounded
# by the KV pool, KV capacity), and the report prints the simulated model time beside the wall time,
# and per role: requests, prompt tokens per call (median and mean), completion tokens per call,
# the prefix cache's hit rate and generated tokens per fixed rule. SIMULATE_FLAGS adds
# temper-scripted-model latency flags, or
# overrides the preset's (SIMULATE_FLAGS="--kv-tokens 0": a KV cache that holds every stream).
# SIMULATE_FLAGS=--no-pacing answers at once and only accounts each request as if alone: for a
# serial loop the run on the simulated box then takes the wall time plus the simulated busy time,
# which the report prints (minutes to measure instead of hours). SIMULATE_FLAGS="--speedup S" runs the
# simulated model S times faster, paced: the report prints the model's busy time on the box itself
# and S times the wall time, the run as it would be with a harness S times slower (an upper bound
# for a parallel loop, where the model is what waits). MODEL_CONTEXT sets the roles'
# context_tokens (default 32768; 16384 with SIMULATE=reference-box-mtp, whose vLLM serves at most
# that: --max-model-len); the Architect's pick prompts reached ~23 K tokens at 32768.
#
# Usage (as root, after a build that ran the stig tests, so build/stig-rootfs holds the root):
#   [SIMULATE=preset] [SIMULATE_FLAGS="..."] bench/loop_bench.sh [BUILD_DIR] [OUT_DIR] [SCRIPT.yaml]
# CROSS_CHECK=1 also evaluates every attempt against the whole regression set
# (loop.cross_check_verification) and counts the rules the cut regression set would have missed.
# PARALLEL=N (or auto) sets loop.parallel_attempts: up to N attempts at once, each on a fork of the
# target; PARALLEL=1 is serial. Unset, temperd.yaml leaves it out and temperd's default applies.
set -euo pipefail

build=$(realpath "${1:-build}")
out=${2:-$(mktemp -d /tmp/temper-loop-bench-XXXXXX)}
script=${3:-}
rootfs=$build/stig-rootfs
[ -d "$rootfs/root" ] || { echo "no root at $rootfs/root: run the stig tests first" >&2; exit 2; }
mkdir -p "$out/bin"
out=$(realpath "$out")
# Run copies of the binaries, so a rebuild during the (long) run cannot pull them away.
cp "$build/orchestrator/temperd" "$build/orchestrator/temper" "$build/stig/temper-stig-eval" \
   "$build/tests/scripted_model/temper-scripted-model" "$out/bin/"

# Two targets over the one root: the loop's and the baseline's.
for t in loop base; do
  rm -rf "${out:?}/$t"
  mkdir -p "$out/$t"
  ln -s "$rootfs/root" "$out/$t/root"
  cp "$rootfs/stamp.json" "$out/$t/stamp.json"
done

model_args=(--listen 127.0.0.1:0)
[ -n "$script" ] && model_args+=(--script "$script")
simulate=${SIMULATE:-}
[ -n "$simulate" ] && model_args+=(--simulate "$simulate")
# shellcheck disable=SC2206  # flags, split on spaces on purpose
[ -n "${SIMULATE_FLAGS:-}" ] && model_args+=(${SIMULATE_FLAGS})
# A simulated answer can wait for a KV slot, then decode 2 K tokens at ~13 tok/s in a batch of 8.
model_timeout=120s
[ -n "$simulate${SIMULATE_FLAGS:-}" ] && model_timeout=3600s
"$out/bin/temper-scripted-model" "${model_args[@]}" >"$out/model.url" 2>"$out/model.log" &
model_pid=$!
temperd_pid=
cleanup() {
  [ -n "$temperd_pid" ] && kill "$temperd_pid" 2>/dev/null && wait "$temperd_pid" 2>/dev/null
  kill "$model_pid" 2>/dev/null && wait "$model_pid" 2>/dev/null
  return 0
}
trap cleanup EXIT
for _ in $(seq 50); do [ -s "$out/model.url" ] && break; sleep 0.1; done
url=$(head -n1 "$out/model.url")

context=${MODEL_CONTEXT:-32768}
[ -z "${MODEL_CONTEXT:-}" ] && [ "$simulate" = reference-box-mtp ] && context=16384
cat >"$out/models.yaml" <<EOF
endpoints:
  scripted: {type: openai, base_url: "$url", model: temper-scripted, timeout: $model_timeout}
roles:
  architect: {endpoint: scripted, context_tokens: $context, max_output_tokens: 2048}
  worker: {endpoint: scripted, context_tokens: $context, max_output_tokens: 2048}
  reflector: {endpoint: scripted, context_tokens: $context, max_output_tokens: 1024}
EOF
cat >"$out/temperd.yaml" <<EOF
listen: {unix: {path: $out/temper.sock}}
state_dir: $out/state
models: $out/models.yaml
log_level: info
loop: {cross_check_verification: $([ "${CROSS_CHECK:-0}" = 1 ] && echo true || echo false)${PARALLEL:+, parallel_attempts: $PARALLEL}}
targets:
  loop: {type: rootfs, path: $out/loop}
EOF
temper=("$out/bin/temper" --socket "$out/temper.sock")

start=$(date +%s.%N)
"$out/bin/temperd" --config "$out/temperd.yaml" 2>"$out/temperd.log" &
temperd_pid=$!
for _ in $(seq 100); do [ -S "$out/temper.sock" ] && break; sleep 0.1; done
# --allow-disruptive: the baseline (SSG's own fix scripts) remediates every rule, so the loop does too.
batch=$("${temper[@]}" submit -t loop -d ssg-ubuntu2004-ds.xml -p stig --whole-profile --max-attempts 3 \
          --allow-disruptive --name loop-bench --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
while :; do
  state=$("${temper[@]}" status "$batch" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])') || state=unknown
  case $state in *COMPLETED*|*FAILED*|*CANCELLED*|completed|failed|cancelled) break ;; esac
  sleep 5
done
loop_seconds=$(python3 -c "import time; print(round(time.time() - $start, 1))")
# The model server's tokens and simulated model time for the loop (serving_metrics.h).
python3 -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen('${url%/v1}/metrics').read().decode())" \
  >"$out/model-metrics.txt"
"${temper[@]}" report "$batch" --format json >"$out/loop-report.json"
"${temper[@]}" watch "$batch" --no-follow --json >"$out/journal.jsonl"
kill "$temperd_pid"; wait "$temperd_pid" || true; temperd_pid=

base_start=$(date +%s.%N)
"$out/bin/temper" baseline base --dir "$out/base" --out "$out/baseline" --json >"$out/baseline.json"
base_seconds=$(python3 -c "import time; print(round(time.time() - $base_start, 1))")

python3 - "$out" "$loop_seconds" "$base_seconds" "${simulate:-${SIMULATE_FLAGS:+custom}}" <<'EOF'
import json, statistics, sys
out, loop_s, base_s, simulate = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
base = json.load(open(f"{out}/baseline.json"))
rootfs = {r["rule"] for r in base["rules"] if r["decidability"] == "rootfs"}
report = json.load(open(f"{out}/loop-report.json"))
rules = report["rules"] if "rules" in report else report["batch"]["rules"]
def rid(r): return r.get("rule_id") or r.get("rule")
failing = [r for r in rules if r.get("before_verdict") == "fail"]
fixed = [r for r in failing if r.get("after_verdict") == "pass"]
failing_rootfs = [r for r in failing if rid(r) in rootfs]
fixed_rootfs = [r for r in fixed if rid(r) in rootfs]
harness, verify, checked, skipped, misses = [], [], 0, 0, []
for line in open(f"{out}/journal.jsonl"):
    e = json.loads(line)
    if e.get("type") not in ("attempt.kept", "attempt.reverted"): continue
    d = json.loads(e["data_json"]) if isinstance(e.get("data_json"), str) else e.get("data", {})
    verify.append(d["verify_ms"])
    harness.append(d.get("changes_ms", 0) + d["verify_ms"] + d.get("snapshot_ms", 0) + d.get("revert_ms", 0))
    checked += d.get("regression_checked", 0)
    skipped += d.get("regression_skipped", 0)
    misses += d.get("filter_misses", [])
def pct(a, b): return f"{a}/{b} ({100.0 * a / b:.1f}%)" if b else "0/0"
print(f"loop:     fixed {pct(len(fixed), len(failing))}; rootfs-decidable {pct(len(fixed_rootfs), len(failing_rootfs))}; "
      f"{len(harness)} attempts; wall {loop_s:.0f} s")
if harness:
    print(f"          harness per attempt (change set + verify + snapshot/revert): median {statistics.median(harness)/1000:.2f} s, "
          f"p90 {sorted(harness)[int(0.9 * (len(harness) - 1))]/1000:.2f} s; verify median {statistics.median(verify)/1000:.2f} s")
    print(f"          regression rules evaluated {checked}, cut by the footprints {skipped}; "
          f"cut rules that no longer passed (cross-check): {len(misses)} {sorted(set(misses))}")
model, roles = {}, {}
for line in open(f"{out}/model-metrics.txt"):
    if line.startswith("temper_scripted_role_"):  # temper_scripted_role_NAME{role="ROLE"} VALUE
        name, value = line.split()
        metric, role = name[len("temper_scripted_role_"):].rstrip('"}').split('{role="')
        roles.setdefault(role, {})[metric] = float(value)
    elif line.startswith("temper_scripted_"):
        name, value = line.split()
        model[name[len("temper_scripted_"):]] = float(value)
tokens = (f"{model['requests_total']:.0f} requests, {model['prompt_tokens_total'] / 1e6:.2f} M prompt tokens, "
          f"{model['completion_tokens_total'] / 1e3:.1f} K completion tokens")
if model.get("simulated"):
    busy, decode_busy = model["busy_seconds_total"], model["decode_busy_seconds_total"]
    mean_batch = model["decode_stream_seconds_total"] / decode_busy if decode_busy else 0
    cached = model["cached_prompt_tokens_total"] / model["prompt_tokens_total"] if model["prompt_tokens_total"] else 0
    speedup = model.get("speedup", 1)
    if model.get("paced", 1) and speedup != 1:
        print(f"model:    simulated {simulate}, {speedup:g} times faster: busy {busy:.0f} s of the loop's wall {loop_s:.0f} s "
              f"({100 * busy / loop_s:.0f}%); decoding {decode_busy:.0f} s, mean batch {mean_batch:.2f}, at most {model['max_batch']:.0f}")
        print(f"          on the box itself: model busy {speedup * busy:.0f} s ({speedup * busy / 3600:.2f} h); the whole run at most "
              f"{speedup * loop_s:.0f} s ({speedup * loop_s / 3600:.2f} h), the time it takes with a harness {speedup:g} times slower")
    elif model.get("paced", 1):
        print(f"model:    simulated {simulate}: busy {busy:.0f} s of the loop's wall {loop_s:.0f} s ({100 * busy / loop_s:.0f}%); "
              f"decoding {decode_busy:.0f} s, mean batch {mean_batch:.2f}, at most {model['max_batch']:.0f}")
    else:
        print(f"model:    simulated {simulate}, not paced (each request alone): busy {busy:.0f} s; a serial loop on "
              f"that box: wall {loop_s:.0f} s + {busy:.0f} s = {loop_s + busy:.0f} s ({(loop_s + busy) / 3600:.2f} h)")
    print(f"          per request summed: queue {model['queue_seconds_total']:.0f} s, prefill {model['prefill_seconds_total']:.0f} s, "
          f"decode {model['decode_seconds_total']:.0f} s; {tokens}, {100 * cached:.0f}% of prompt tokens cached")
else:
    print(f"model:    instant (no SIMULATE); {tokens}")
# Per role (serving_metrics.h): the prompt sizes and cache hits each role's requests had.
fixed_n = len(fixed)
print(f"roles:    {'role':<19} {'requests':>8} {'prompt median':>13} {'prompt mean':>11} {'completion mean':>15} "
      f"{'cached':>6} {'generated/fixed':>15}")
for role in ("architect_pick", "architect_reengage", "worker", "reflector"):
    r = roles.get(role, {})
    n = r.get("requests_total", 0)
    prompt, cached, completion = (r.get(k, 0) for k in ("prompt_tokens_total", "cached_prompt_tokens_total",
                                                       "completion_tokens_total"))
    print(f"          {role:<19} {n:>8.0f} {r.get('prompt_tokens_median', 0):>13.0f} {prompt / n if n else 0:>11.0f} "
          f"{completion / n if n else 0:>15.0f} "
          f"{(f'{100 * cached / prompt:.0f}%' if prompt and model.get('simulated') else '-'):>6} "
          f"{completion / fixed_n if fixed_n else 0:>15.0f}")
if fixed_n:
    print(f"          generated tokens per fixed rule, all roles: {model['completion_tokens_total'] / fixed_n:.0f}")
json.dump({"roles": roles, "fixed": fixed_n}, open(f"{out}/roles.json", "w"), indent=1)
print(f"baseline: fixed {pct(base['fixed'], base['failing_before'])}; rootfs-decidable "
      f"{pct(base['fixed_rootfs'], base['failing_before_rootfs'])}; wall {base_s:.0f} s")
EOF
echo "artifacts in $out"
