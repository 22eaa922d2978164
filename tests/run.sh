#!/usr/bin/env bash
# Runs every test that needs no GPU: the C test binaries (build/tests/test_*) and the
# shell tests (tests/test_*.sh), from the repository root. Prints one line per test and
# a summary; exits non-zero if any failed.
set -u
cd "$(dirname "$0")/.."
pass=0; fail=0; failed=()
for t in build/tests/test_* tests/test_*.sh; do
  [ -e "$t" ] || continue
  case "$t" in *.d|*.o) continue;; esac
  name=$(basename "$t")
  start=$(date +%s)
  if [ "${t%.sh}" != "$t" ]; then out=$(bash "$t" 2>&1); rc=$?; else out=$("$t" 2>&1); rc=$?; fi
  secs=$(( $(date +%s) - start ))
  if [ $rc -eq 0 ]; then pass=$((pass+1)); echo "ok   $name (${secs}s)"
  else fail=$((fail+1)); failed+=("$name"); echo "FAIL $name (${secs}s)"; echo "$out" | tail -40 | sed 's/^/     /'; fi
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
