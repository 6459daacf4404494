#!/bin/bash
# The loop with a real model: temperd with every role on one `inprocess` endpoint serving Gemma 3 270M
# (the GGUF deploy/setup.sh fetches into BUILD/models/) on the CPU, a batch of rules of different
# kinds on a fresh rootfs target over the stig tests' root, run to its end. Reports per role: model
# calls, unusable answers (parse failures, corrections, fallbacks), prompt and generated tokens per
# attempt and the share of prompt tokens served from the prefix cache; the engine's prompt-lookup
# acceptance (temperd's /metrics, temper_engine_*); and each rule's end state with what the model did.
#
# Usage (as root, after a build that ran the stig tests, so BUILD/stig-rootfs holds the root):
#   bench/real_model_loop.sh [BUILD_DIR] [OUT_DIR]
# RULES overrides the rule list (space-separated short ids); PER_RULE=1 submits a batch a rule;
# MAX_ATTEMPTS (default 2) sets the attempts a rule; MAX_KTOKENS (default 400) the thousands of
# tokens a rule may spend, all roles (prompts count whole, cached or not; an attempt runs until its
# budget ends it). On 2 cores the CPU prefills a ~15 K-token prompt (the Architect's over ten
# candidates) at tens of tokens a second: PER_RULE=1 keeps each pick to one candidate.
set -euo pipefail

build=$(realpath "${1:-build}")
out=${2:-$(mktemp -d /tmp/temper-real-loop-XXXXXX)}
model=$build/models/gemma-3-270m-q4_k_m.gguf
rootfs=$build/stig-rootfs
[ -f "$model" ] || { echo "no $model: run deploy/setup.sh" >&2; exit 2; }
[ -d "$rootfs/root" ] || { echo "no root at $rootfs/root: run the stig tests first" >&2; exit 2; }
rules=${RULES:-"accounts_tmout banner_etc_issue_net sshd_disable_empty_passwords sshd_set_keepalive
  accounts_umask_etc_login_defs sysctl_kernel_randomize_va_space audit_rules_privileged_commands_su
  file_permissions_var_log package_telnetd_removed disable_ctrlaltdel_reboot"}
mkdir -p "$out/bin"
out=$(realpath "$out")
cp "$build/orchestrator/temperd" "$build/orchestrator/temper" "$build/stig/temper-stig-eval" "$out/bin/"
rm -rf "${out:?}/target"
mkdir -p "$out/target"
ln -s "$rootfs/root" "$out/target/root"
cp "$rootfs/stamp.json" "$out/target/stamp.json"

# The 270M's context is 32K; the roles' prompts are sized to 16K, which the CPU prefills in time.
cat >"$out/models.yaml" <<EOF
endpoints:
  local: {type: inprocess, model_dir: $model, tp: 1, max_context: 16384}
roles:
  architect: {endpoint: local, temperature: 0.7, seed: 11, max_output_tokens: 512, context_tokens: 16384}
  worker: {endpoint: local, temperature: 0.7, seed: 12, max_output_tokens: 768, context_tokens: 16384}
  reflector: {endpoint: local, temperature: 0.7, seed: 13, max_output_tokens: 384, context_tokens: 16384}
EOF
cat >"$out/temperd.yaml" <<EOF
listen: {unix: {path: $out/temper.sock}, metrics: "127.0.0.1:0"}
state_dir: $out/state
models: $out/models.yaml
log_level: info
targets:
  real: {type: rootfs, path: $out/target}
EOF
temper=("$out/bin/temper" --socket "$out/temper.sock")
temperd_pid=
cleanup() { [ -n "$temperd_pid" ] && kill "$temperd_pid" 2>/dev/null && wait "$temperd_pid" 2>/dev/null; return 0; }
trap cleanup EXIT

start=$(date +%s.%N)
"$out/bin/temperd" --config "$out/temperd.yaml" 2>"$out/temperd.log" &
temperd_pid=$!
for _ in $(seq 600); do [ -S "$out/temper.sock" ] && break; sleep 0.1; done
# One batch of every rule, or with PER_RULE=1 one batch a rule (queued, run one after another): the
# Architect then picks among one candidate, not ten, and its prompt is ~1.2 K tokens, not ~15 K.
submit() {
  # shellcheck disable=SC2046  # the rule list, split on spaces on purpose
  "${temper[@]}" submit -t real -d ssg-ubuntu2004-ds.xml -p stig $(printf -- '-r %s ' "$@") \
    --max-attempts "${MAX_ATTEMPTS:-2}" --max-ktokens "${MAX_KTOKENS:-400}" --allow-disruptive --name real-model --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}
batches=()
if [ "${PER_RULE:-0}" = 1 ]; then
  for rule in $rules; do batches+=("$(submit "$rule")"); done
else
  # shellcheck disable=SC2086
  batches+=("$(submit $rules)")
fi
for batch in "${batches[@]}"; do
  while :; do
    state=$("${temper[@]}" status "$batch" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])') || state=unknown
    case $state in *COMPLETED*|*FAILED*|*CANCELLED*|completed|failed|cancelled) break ;; esac
    sleep 5
  done
done
wall=$(python3 -c "import time; print(round(time.time() - $start, 1))")
metrics_url=$(grep -o 'metrics http://[^ ,]*' "$out/temperd.log" | head -n1 | cut -d' ' -f2 || true)
[ -n "$metrics_url" ] && python3 -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen('$metrics_url').read().decode())" >"$out/metrics.txt"
: >"$out/journal.jsonl"
for batch in "${batches[@]}"; do
  "${temper[@]}" report "$batch" --format json >"$out/report-$batch.json"
  "${temper[@]}" watch "$batch" --no-follow --json >>"$out/journal.jsonl"
done
kill "$temperd_pid"; wait "$temperd_pid" || true; temperd_pid=

python3 - "$out" "$wall" <<'EOF'
import collections, json, sys
out, wall = sys.argv[1], float(sys.argv[2])
events = [json.loads(line) for line in open(f"{out}/journal.jsonl")]
def data(e):
    d = e.get("data_json")
    return json.loads(d) if isinstance(d, str) and d else e.get("data", {}) or {}
roles = collections.defaultdict(lambda: collections.Counter())
attempts = sum(e.get("type") in ("attempt.kept", "attempt.reverted") for e in events)
for e in events:
    u, role = e.get("usage") or {}, e.get("role", "")
    if int(u.get("prompt_tokens", 0) or 0) > 0:
        r = roles[role]
        r["calls"] += 1
        r["prompt"] += int(u.get("prompt_tokens", 0))
        r["cached"] += int(u.get("cached_prompt_tokens", 0) or 0)
        r["generated"] += int(u.get("completion_tokens", 0) or 0)
    t = e.get("type")
    if t == "worker.unusable_answer": roles["worker"]["unusable"] += 1
    if t == "reflector.failed": roles["reflector"]["unusable"] += 1
    if t == "architect.fallback": roles["architect"]["unusable"] += 1
    if role == "architect" and "corrections" in data(e): roles["architect"]["unusable"] += len(data(e)["corrections"])
print(f"real model loop: wall {wall:.0f} s, {attempts} attempts")
for role, r in sorted(roles.items()):
    if not r["calls"]: continue
    print(f"  {role:9s} {r['calls']:3d} calls, {r['unusable']:2d} unusable; prompt {r['prompt']} "
          f"({100 * r['cached'] / max(1, r['prompt']):.0f}% cached), generated {r['generated']}; per attempt: "
          f"prompt {r['prompt'] / max(1, attempts):.0f}, generated {r['generated'] / max(1, attempts):.0f}")
metrics = {}
try:
    for line in open(f"{out}/metrics.txt"):
        if line.startswith("temper_engine_") and "{" in line:
            name, value = line.rsplit(" ", 1)
            metrics[name.split("{")[0]] = metrics.get(name.split("{")[0], 0) + float(value)
except FileNotFoundError:
    pass
if metrics:
    drafts, taken = metrics.get("temper_engine_draft_tokens_total", 0), metrics.get("temper_engine_draft_tokens_accepted_total", 0)
    passes = metrics.get("temper_engine_verify_passes_total", 0)
    print(f"  engine: {metrics.get('temper_engine_generated_tokens_total', 0):.0f} generated in "
          f"{metrics.get('temper_engine_forward_passes_total', 0):.0f} passes; drafts {taken:.0f}/{drafts:.0f} accepted "
          f"({100 * taken / max(1, drafts):.0f}%), {(taken + passes) / max(1, passes):.2f} tokens per verification pass; "
          f"prefix cache {metrics.get('temper_engine_prompt_tokens_cached_total', 0):.0f}/"
          f"{metrics.get('temper_engine_prompt_tokens_total', 0):.0f} prompt tokens")
import glob
rules = []
for path in sorted(glob.glob(f"{out}/report-*.json")):
    report = json.load(open(path))
    rules += report["rules"] if "rules" in report else report["batch"]["rules"]
states = collections.Counter(r.get("state", "?") for r in rules)
print("  rules: " + ", ".join(f"{n} {s}" for s, n in sorted(states.items())))
for r in rules:
    print(f"    {r.get('rule_id') or r.get('rule')}: {r.get('state')}: {str(r.get('detail', ''))[:160]}")
EOF
echo "artifacts in $out"
