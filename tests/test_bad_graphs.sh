#!/usr/bin/env bash
# Bad graph files (tests/bad_graphs/*.lua) give one message on stderr naming the Lua
# file:line and, for shape errors, the shapes involved; mmc exits non-zero and writes
# nothing. Each file lists what its message must contain in "-- expect:" lines. Settings that
# change the plan (-D, --policy, ...) need -o, so the committed generated/ stays as it is.
set -u
cd "$(dirname "$0")/.."
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
check() { # name, expect-file, command...
  local name=$1 spec=$2; shift 2
  "$@" >"$tmp/stdout" 2>"$tmp/stderr"; local rc=$?
  local lines; lines=$(wc -l <"$tmp/stderr")
  if [ $rc -eq 0 ]; then echo "$name: exit 0, want non-zero"; fail=1; fi
  if [ "$lines" -ne 1 ]; then echo "$name: $lines lines on stderr, want 1:"; cat "$tmp/stderr"; fail=1; fi
  if [ -e "$tmp/out" ]; then echo "$name: wrote $tmp/out"; fail=1; rm -rf "$tmp/out"; fi
  while IFS= read -r want; do
    grep -qF -- "$want" "$tmp/stderr" || { echo "$name: message lacks '$want': $(cat "$tmp/stderr")"; fail=1; }
  done < <(sed -n 's/^-- expect: //p' "$spec")
}
for f in tests/bad_graphs/*.lua; do
  case "$f" in *bad_policy_file.lua) continue;; esac
  check "$(basename "$f")" "$f" ./mmc compile "$f" -o "$tmp/out"
done
check bad_policy_file.lua tests/bad_graphs/bad_policy_file.lua \
  ./mmc compile graphs/tiny.lua --policy tests/bad_graphs/bad_policy_file.lua -o "$tmp/out"
printf -- '-- expect: -D heds: graphs/tiny.lua has no config key '"'"'heds'"'"'\n' >"$tmp/define.spec"
check "unknown -D key" "$tmp/define.spec" ./mmc compile graphs/tiny.lua -D heds=3 -o "$tmp/out"
printf -- '-- expect: --dump fuzion: no such pass\n' >"$tmp/dump.spec"
check "unknown pass" "$tmp/dump.spec" ./mmc compile graphs/tiny.lua --dump fuzion
# other settings without -o would overwrite the committed plan in generated/: refused
sum=$(cat generated/*/plan generated/*/kernels.cu | sha256sum)
printf -- '-- expect: compile: -D makes another plan than the committed one in generated/: give it a folder with -o DIR\n' >"$tmp/gen.spec"
check "-D without -o" "$tmp/gen.spec" ./mmc compile graphs/minimind.lua -D batch=2
printf -- '-- expect: compile: --policy makes another plan\n' >"$tmp/gen.spec"
check "--policy without -o" "$tmp/gen.spec" ./mmc compile graphs/minimind.lua --policy fp32
[ "$(cat generated/*/plan generated/*/kernels.cu | sha256sum)" = "$sum" ] || { echo "generated/ changed"; fail=1; }
exit $fail
