#!/usr/bin/env bash
# The options of mmc compile that say what a graph file may do: -I DIR lets `include` and
# `precision "file"` read below another folder (and only then), --lua-steps and --lua-memory
# lower and raise the limits, and a value out of range is refused in one line. The graph
# errors themselves are tests/bad_graphs/*.lua; the fuzzing, test_fuzz_graphs.
set -u
cd "$(dirname "$0")/.."
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
expect_error() { # what, message fragment, command...
  local what=$1 want=$2; shift 2
  if "$@" >"$tmp/stdout" 2>"$tmp/stderr"; then echo "$what: exit 0, want an error"; fail=1; return; fi
  [ "$(wc -l <"$tmp/stderr")" -eq 1 ] || { echo "$what: want one line on stderr:"; cat "$tmp/stderr"; fail=1; }
  grep -qF -- "$want" "$tmp/stderr" || { echo "$what: message lacks '$want': $(cat "$tmp/stderr")"; fail=1; }
  [ ! -e "$tmp/out" ] || { echo "$what: wrote $tmp/out"; fail=1; rm -rf "$tmp/out"; }
}
expect_ok() { # what, command...
  local what=$1; shift
  "$@" >"$tmp/stdout" 2>"$tmp/stderr" || { echo "$what: failed: $(cat "$tmp/stderr")"; fail=1; }
  rm -rf "$tmp/out"
}

# a variant in a folder of its own reaches the shipped architecture only through -I
mkdir -p "$tmp/variant"
printf 'include "tiny.lua"\nprecision "fp32.lua"\n' >"$tmp/variant/variant.lua"
printf 'return policy { name = "fp32_copy", master = "f32", loss_scaling = false, rule { class = "lower_precision", compute = "f32" } }\n' \
  >"$tmp/variant/fp32.lua"
expect_error "include without -I" "include: cannot open tiny.lua: no such file below $tmp/variant (mmc compile -I DIR adds a folder)" \
  ./mmc compile "$tmp/variant/variant.lua" -o "$tmp/out"
expect_ok "include with -I graphs" ./mmc compile "$tmp/variant/variant.lua" -I graphs -o "$tmp/out" --quiet
expect_ok "include with -Igraphs" ./mmc compile "$tmp/variant/variant.lua" -Igraphs -o "$tmp/out" --quiet
# -I adds folders to read below, not a way out: a link in the variant's folder to a file
# outside both is refused
ln -s /etc/passwd "$tmp/variant/passwd.lua"
printf 'include "passwd.lua"\n' >"$tmp/variant/link.lua"
expect_error "a link out" "is /etc/passwd, outside the folders a graph file may read ($tmp/variant," \
  ./mmc compile "$tmp/variant/link.lua" -I graphs -o "$tmp/out"
expect_error "-I of no folder" "-I $tmp/none: no such folder" ./mmc compile graphs/tiny.lua -I "$tmp/none" -o "$tmp/out"

# the limits: the real graphs run far below the defaults, and a lowered one stops them
expect_ok "minimind at 200000 steps and 1 MiB" ./mmc compile graphs/minimind.lua --lua-steps 200000 --lua-memory 1 -o "$tmp/out" --quiet
expect_error "minimind at 10000 steps" "the graph file ran past its limit of 10000 Lua steps (mmc compile --lua-steps N raises it)" \
  ./mmc compile graphs/minimind.lua --lua-steps 10000 -o "$tmp/out"
printf 'local t = {}\nfor i = 1, 1e6 do t[i] = i end\nloss(sum_all(param("w", {2}, "ones")))\n' >"$tmp/table.lua"
expect_error "a table of 10^6 at 1 MiB" "the graph file's Lua state ran past its limit of 1 MiB (mmc compile --lua-memory MiB raises it)" \
  ./mmc compile "$tmp/table.lua" --lua-memory 1 --lua-steps 1000000000 -o "$tmp/out"
expect_ok "a table of 10^6 at the defaults" ./mmc compile "$tmp/table.lua" -o "$tmp/out" --quiet
for bad in "--lua-steps 9999" "--lua-steps 1e9" "--lua-steps 2000000000000000" "--lua-memory 0" "--lua-memory 1048577" "--lua-memory lots"; do
  expect_error "$bad" "compile: ${bad%% *} needs an integer from" ./mmc compile graphs/tiny.lua $bad -o "$tmp/out"
done
exit $fail
