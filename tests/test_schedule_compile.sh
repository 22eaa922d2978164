#!/usr/bin/env bash
# The compile side of precision schedules and fallbacks (compiler/compile_plans.h): graphs/tiny.lua
# with a train{} that adds `schedule = { phases }` and `fallback = { ... }` (a second train{}
# call sets only what it names) compiles into a folder of plans:
#  1. DIR/{kernels.cu,plan} is the last phase's, DIR/phaseK/ each other phase's, DIR/fallback/
#     the fallback's, each with its policy, and DIR/phases.json says so, byte for byte;
#  2. the phases may take fp32, amp_fp16, amp_bf16 and fp16_wide, which keep one layout of
#     parameters and optimizer state; fp64 keeps master weights in f64 and is refused;
#  3. a fallback to a fixed scale keeps the last phase's policy at scale_init = S, scale_fixed = 1,
#     and needs a policy with a loss scaler;
#  4. bad schedules and fallbacks are refused at the train{} line, writing nothing;
#  5. --policy may only repeat the last phase's; --forward makes one plan and no phases.json;
#     a plain graph compiled into the folder removes an earlier schedule's files;
#  6. the report lists the phases; --dump prints each plan's IR;
#  7. a plan train makes again (--lr) gets the phases too, and its temp folder goes whole;
#  8. graphs/minimind.lua, which has no schedule, compiles to the committed plan.
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

graph() { # NAME TRAIN-FIELDS: $tmp/NAME.lua, tiny with one more train{} call
  printf 'include "tiny.lua"\ntrain {\n  %s\n}\n' "$2" >"$tmp/$1.lua"
}
compile() { # NAME OUT [FLAGS...]
  local name=$1 out=$2; shift 2
  ./mmc compile "$tmp/$name.lua" -I graphs -o "$out" "$@"
}
policy_of() { sed -n 's/^policy name=\([^ ]*\) .*/\1/p' "$1/plan"; }
train_line() { grep '^train ' "$1/plan"; }

# ---- 1. the example of README: a schedule and a fallback
graph main 'loss_scale = { max = 65536, hysteresis = 2 },
  schedule = { {updates = 1000, policy = "fp32"}, {policy = "amp_fp16"} },
  fallback = { overflow_rate = 0.01, window = 100, min_scale = 1, to = "amp_bf16" },'
compile main "$tmp/out" >"$tmp/report.txt"
for f in kernels.cu plan phase1/kernels.cu phase1/plan fallback/kernels.cu fallback/plan phases.json; do
  [ -f "$tmp/out/$f" ] || bad "no $f"
done
python3 - "$tmp/out/phases.json" <<'PY' || fail=1
import json, sys
text = open(sys.argv[1]).read()
want = ('{"phases": [{"updates": 1000, "policy": "fp32", "dir": "phase1"}, {"policy": "amp_fp16", "dir": "."}], '
        '"fallback": {"overflow_rate": 0.01, "window": 100, "min_scale": 1, "policy": "amp_bf16", "scale": 0, '
        '"dir": "fallback"}}')
if text.rstrip("\n") != want:
    sys.exit("phases.json is\n%s\nwant\n%s" % (text, want))
parsed = json.loads(text, object_pairs_hook=list)  # the keys in their order
if parsed != json.loads(want, object_pairs_hook=list):
    sys.exit("phases.json parses to %r" % parsed)
PY
[ "$(policy_of "$tmp/out")" = amp_fp16 ] || bad "the folder's plan has policy $(policy_of "$tmp/out"), want amp_fp16"
[ "$(policy_of "$tmp/out/phase1")" = fp32 ] || bad "phase1 has policy $(policy_of "$tmp/out/phase1"), want fp32"
[ "$(policy_of "$tmp/out/fallback")" = amp_bf16 ] || bad "the fallback has policy $(policy_of "$tmp/out/fallback")"
# the same settings in every plan (the loss scaler's too); fp32 has no loss scaling
for d in out out/phase1 out/fallback; do
  train_line "$tmp/$d" | grep -q ' scale_max=65536 .*scale_hysteresis=2 ' || bad "$d: train line $(train_line "$tmp/$d")"
done
train_line "$tmp/out/phase1" | grep -q ' loss_scaling=0 ' || bad "phase1 (fp32) scales the loss"
# ---- 6. the report
want='precision schedule: updates 1-1000 fp32 (phase1/), 1001- amp_fp16 (this plan); fallback: amp_bf16 (fallback/) when more than 1% of 100 updates overflow, or the scale falls below 1'
grep -qxF "$want" "$tmp/report.txt" || { bad "the report lacks the schedule line:"; sed -n 1,4p "$tmp/report.txt"; }
./mmc compile "$tmp/main.lua" -I graphs --dump frontend >"$tmp/dump.txt"
[ "$(grep '^# plan ' "$tmp/dump.txt" | tr '\n' '|')" = "# plan phase1 (policy fp32)|# plan . (policy amp_fp16)|# plan fallback (policy amp_bf16)|" ] \
  || bad "--dump: $(grep '^# plan ' "$tmp/dump.txt")"

# ---- 2. four phases of the policies that share a layout, a fallback to a fixed scale, a
# phase's policy from a file beside the graph (found as `precision "file"` is)
sed 's/name = "fp32"/name = "my_fp32"/' graphs/policies/fp32.lua >"$tmp/my_fp32.lua"
graph four 'schedule = { {updates = 10, policy = "my_fp32.lua"}, {updates = 5, policy = "fp16_wide"},
               {updates = 7, policy = "amp_bf16"}, {policy = "amp_fp16"} },
  fallback = { min_scale = 4, to = 1024 },'
compile four "$tmp/four" >"$tmp/report4.txt" || bad "four phases refused"
want='{"phases": [{"updates": 10, "policy": "my_fp32", "dir": "phase1"}, {"updates": 5, "policy": "fp16_wide", "dir": "phase2"}, {"updates": 7, "policy": "amp_bf16", "dir": "phase3"}, {"policy": "amp_fp16", "dir": "."}], "fallback": {"overflow_rate": 0, "window": 0, "min_scale": 4, "policy": "amp_fp16", "scale": 1024, "dir": "fallback"}}'
[ "$(cat "$tmp/four/phases.json")" = "$want" ] || bad "four: phases.json $(cat "$tmp/four/phases.json")"
grep -q "^policy name=my_fp32 .* source=$tmp/my_fp32.lua\$" "$tmp/four/phase1/plan" || bad "phase1: $(grep ^policy "$tmp/four/phase1/plan")"
[ "$(policy_of "$tmp/four/phase2")" = fp16_wide ] || bad "phase2 has policy $(policy_of "$tmp/four/phase2")"
[ "$(policy_of "$tmp/four/phase3")" = amp_bf16 ] || bad "phase3 has policy $(policy_of "$tmp/four/phase3")"
[ "$(policy_of "$tmp/four/fallback")" = amp_fp16 ] || bad "the fixed-scale fallback has policy $(policy_of "$tmp/four/fallback")"
train_line "$tmp/four/fallback" | grep -q ' scale_init=1024 .* scale_fixed=1 ' || bad "fallback: $(train_line "$tmp/four/fallback")"
train_line "$tmp/four" | grep -q ' scale_init=65536 .* scale_fixed=0 ' || bad "the last phase: $(train_line "$tmp/four")"
grep -qF 'precision schedule: updates 1-10 my_fp32 (phase1/), 11-15 fp16_wide (phase2/), 16-22 amp_bf16 (phase3/), 23- amp_fp16 (this plan); fallback: amp_fp16 at a fixed loss scale of 1024 (fallback/) when the scale falls below 4' \
  "$tmp/report4.txt" || { bad "four: the report's schedule line:"; sed -n 3p "$tmp/report4.txt"; }
# a fallback without a schedule: the folder's plan is the one phase
graph alone 'fallback = { overflow_rate = 0.25, window = 8, to = "amp_bf16" },'
compile alone "$tmp/alone" --quiet
want='{"phases": [{"policy": "amp_fp16", "dir": "."}], "fallback": {"overflow_rate": 0.25, "window": 8, "min_scale": 0, "policy": "amp_bf16", "scale": 0, "dir": "fallback"}}'
[ "$(cat "$tmp/alone/phases.json")" = "$want" ] || bad "fallback alone: phases.json $(cat "$tmp/alone/phases.json")"
if [ -e "$tmp/alone/phase1" ]; then bad "fallback alone: a phase1/"; fi
# a recompile with fewer phases removes the phases it no longer has
compile main "$tmp/four" --quiet
if [ -e "$tmp/four/phase2" ] || [ -e "$tmp/four/phase3" ]; then bad "phase2/ or phase3/ of the earlier compile left"; fi
[ "$(policy_of "$tmp/four/phase1")" = fp32 ] || bad "phase1 not written again"

# ---- 4. refused, at the train{} line (line 2 of the graph), and nothing written
expect_error() { # WHAT MESSAGE FLAGS... (the graph is $tmp/x.lua)
  local what=$1 want=$2; shift 2
  rm -rf "$tmp/x_out"
  if ./mmc compile "$tmp/x.lua" -I graphs -o "$tmp/x_out" --quiet "$@" 2>"$tmp/err"; then bad "$what: compiled"; return; fi
  grep -qF -- "$want" "$tmp/err" || bad "$what: message $(cat "$tmp/err"), want '$want'"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || bad "$what: more than one line on stderr"
  if [ -e "$tmp/x_out" ]; then bad "$what: wrote $tmp/x_out"; fi
}
refuse() { graph x "$2"; expect_error "$1" "$3"; }
at="$tmp/x.lua:2: "
refuse "fp64 phase" 'schedule = { {updates = 10, policy = "fp64"}, {policy = "amp_fp16"} }' \
  "${at}phase 1 (fp64) keeps master weights in f64 and the last phase in f32: every phase must keep the same parameter layout"
refuse "fp64 fallback" 'fallback = { overflow_rate = 0.5, window = 10, to = "fp64" }' \
  "${at}the fallback (fp64) keeps master weights in f64 and the plan in f32"
refuse "no updates in a middle phase" 'schedule = { {policy = "fp32"}, {updates = 3, policy = "amp_bf16"}, {policy = "amp_fp16"} }' \
  "${at}train: schedule phase 1 needs updates = N"
refuse "updates = 0" 'schedule = { {updates = 0, policy = "fp32"}, {policy = "amp_fp16"} }' \
  "${at}train: schedule phase 1: updates must be a whole number of optimizer updates, at least 1, got 0"
refuse "updates = 2.5" 'schedule = { {updates = 2.5, policy = "fp32"}, {policy = "amp_fp16"} }' \
  "${at}train: schedule phase 1: updates must be a whole number"
refuse "updates on the last phase" 'schedule = { {updates = 5, policy = "fp32"}, {updates = 5, policy = "amp_fp16"} }' \
  "${at}train: schedule phase 2 is the last: it runs to the end of the run, so it takes no updates"
refuse "unknown policy" 'schedule = { {updates = 5, policy = "fp31"}, {policy = "amp_fp16"} }' \
  "${at}train: schedule phase 1: no built-in policy 'fp31'"
refuse "no policy" 'schedule = { {updates = 5}, {policy = "amp_fp16"} }' "${at}train: schedule phase 1 needs policy ="
refuse "one phase" 'schedule = { {policy = "amp_fp16"} }' "${at}train: a precision schedule needs at least 2 phases, got 1"
refuse "unknown key in a phase" 'schedule = { {updates = 5, policy = "fp32", steps = 3}, {policy = "amp_fp16"} }' \
  "${at}train: schedule phase 1: unknown option 'steps' (known: updates, policy)"
refuse "a key beside the phases" 'schedule = { {updates = 5, policy = "fp32"}, {policy = "amp_fp16"}, after = 3 }' \
  "${at}train: schedule = { ... } is the precision schedule, a list of phases"
refuse "unknown lr schedule" 'schedule = "cosine"' "${at}train: schedule must be minimind_cosine or constant, got 'cosine'"
refuse "fallback without a condition" 'fallback = { to = "amp_bf16" }' \
  "${at}train: fallback needs a condition: overflow_rate = R with window = W, or min_scale = S"
refuse "fallback min_scale = 0 alone" 'fallback = { min_scale = 0, to = "amp_bf16" }' "${at}train: fallback needs a condition"
refuse "overflow_rate without window" 'fallback = { overflow_rate = 0.1, to = "amp_bf16" }' \
  "${at}train: fallback: overflow_rate and window go together"
refuse "overflow_rate = 0" 'fallback = { overflow_rate = 0, window = 5, to = "amp_bf16" }' \
  "${at}train: fallback: overflow_rate must be a share of the updates, 0 < R <= 1, got 0"
refuse "overflow_rate > 1" 'fallback = { overflow_rate = 2, window = 5, to = "amp_bf16" }' "${at}train: fallback: overflow_rate must be"
refuse "window = 0" 'fallback = { overflow_rate = 0.5, window = 0, to = "amp_bf16" }' \
  "${at}train: fallback: window must be a whole number of updates, at least 1, got 0"
refuse "min_scale < 0" 'fallback = { min_scale = -1, to = "amp_bf16" }' "${at}train: fallback: min_scale must be a loss scale >= 0"
refuse "fallback to = 0" 'fallback = { min_scale = 1, to = 0 }' \
  "${at}train: fallback: to = 0: a fixed loss scale must be above 0"
refuse "fallback without to" 'fallback = { min_scale = 1 }' "${at}train: fallback needs to = a policy"
refuse "fallback to an unknown policy" 'fallback = { min_scale = 1, to = "amp_bf17" }' "${at}train: fallback: no built-in policy 'amp_bf17'"
refuse "unknown key in fallback" 'fallback = { min_scale = 1, to = "amp_bf16", after = 3 }' \
  "${at}train: fallback: unknown option 'after' (known: overflow_rate, window, min_scale, to)"
refuse "fixed scale, no scaler" 'schedule = { {updates = 5, policy = "amp_fp16"}, {policy = "fp32"} }, fallback = { min_scale = 1, to = 1024 }' \
  "${at}fallback to a fixed scale needs a policy with a loss scaler"
refuse "fixed scale above max" 'loss_scale = { init = 256, max = 512 }, fallback = { min_scale = 1, to = 1024 }' \
  "${at}fallback: to = 1024, a fixed loss scale above loss_scale's max 512"
# a policy file outside the folders a graph file may read
refuse "policy outside" 'schedule = { {updates = 5, policy = "/etc/passwd"}, {policy = "amp_fp16"} }' "${at}train: /etc/passwd"

# ---- 5. --policy, --forward, and a plain graph into a folder that held a schedule
cp "$tmp/main.lua" "$tmp/x.lua"
expect_error "--policy of another phase" "the schedule of $tmp/x.lua:2 names the policies of its phases; leave --policy out" --policy fp32
compile main "$tmp/p" --quiet --policy amp_fp16 || bad "--policy of the last phase refused"
[ -f "$tmp/p/phases.json" ] || bad "--policy amp_fp16: no phases.json"
compile main "$tmp/out" --quiet --forward
if [ -e "$tmp/out/phases.json" ]; then bad "--forward left a phases.json"; fi
if [ -e "$tmp/out/phase1" ] || [ -e "$tmp/out/fallback" ]; then bad "--forward left phase1/ or fallback/"; fi
grep -q "^policy name=amp_fp16 " "$tmp/out/plan" || bad "--forward: the graph's policy"
./mmc compile "$tmp/main.lua" -I graphs -o "$tmp/f2" --quiet --forward --policy fp32 || bad "--forward --policy fp32 refused"
if [ -e "$tmp/f2/phases.json" ]; then bad "--forward --policy: a phases.json"; fi
compile main "$tmp/out" --quiet
[ -f "$tmp/out/phases.json" ] || bad "no phases.json after compiling the schedule again"
./mmc compile graphs/tiny.lua -o "$tmp/out" --quiet
for f in phases.json phase1 fallback; do if [ -e "$tmp/out/$f" ]; then bad "a plain compile left $f"; fi; done
[ "$(policy_of "$tmp/out")" = amp_fp16 ] || bad "the plain plan"

# ---- 7. train's remade plan (--lr) holds the phases, and its temp folder is removed whole
sed "s|include \"tiny.lua\"|include \"$PWD/graphs/tiny.lua\"|" "$tmp/main.lua" >"$tmp/abs.lua" # no -I when made again
./mmc compile "$tmp/abs.lua" -I graphs -o "$tmp/abs" --quiet
python3 tests/make_byte_tokens.py README.md "$tmp/text.bin"
before=$(ls -d /tmp/mmc-plan-* 2>/dev/null | sort || true)
./mmc train "$tmp/abs" --backend ref --data "$tmp/text.bin" --steps 1 --lr 1e-4 --quiet >"$tmp/train.out" 2>&1 \
  || { bad "train --lr on a schedule's plan:"; cat "$tmp/train.out"; }
after=$(ls -d /tmp/mmc-plan-* 2>/dev/null | sort || true)
for d in $(comm -13 <(echo "$before") <(echo "$after")); do # a folder of another process holds another graph
  if grep -qs "^source $tmp/abs.lua\$" "$d/plan" "$d/phase1/plan" "$d/fallback/plan"; then bad "train left $d"; fi
done

# ---- 8. no schedule: the committed plan
./mmc compile graphs/minimind.lua -o "$tmp/minimind" --quiet
cmp -s "$tmp/minimind/plan" generated/minimind/plan || bad "graphs/minimind.lua compiles to another plan than generated/minimind/plan"
cmp -s "$tmp/minimind/kernels.cu" generated/minimind/kernels.cu || bad "graphs/minimind.lua: other kernels than generated/"
if [ -e "$tmp/minimind/phases.json" ]; then bad "graphs/minimind.lua: a phases.json"; fi

[ $fail -eq 0 ] && echo "schedule compile: ok"
exit $fail
