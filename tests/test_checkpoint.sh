#!/usr/bin/env bash
# Checkpoints and --init: a run folder's model.safetensors holds every parameter under
# MiniMind's names, the tied embedding under both of its keys; --init takes a file with
# either key alone; a missing, an extra or a misshapen tensor is refused with its name;
# `mmc export --dtype f16` writes the weights rounded to fp16, as MiniMind's torch.save does.
# A damaged file is refused by --init and by export, naming the tensor and the byte: a
# shape whose byte count overflows, offsets that overlap, a name twice, a nan weight, a
# header longer than the file, a FIFO in place of the file.
set -u
cd "$(dirname "$0")/.."
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
./mmc compile graphs/tiny.lua -o "$tmp/plan" --quiet || exit 1
./mmc init "$tmp/plan" -o "$tmp/w" --seed 2 || exit 1
# the initial weights are filled on every core; each element comes from its own place in its
# tensor's stream, so one thread makes the same bytes
MMC_THREADS=1 ./mmc init "$tmp/plan" -o "$tmp/w1" --seed 2 >/dev/null || exit 1
cmp -s "$tmp/w/model.safetensors" "$tmp/w1/model.safetensors" || { echo "init: other weights on one thread than on all cores"; fail=1; }
python3 tests/make_byte_tokens.py README.md "$tmp/text.bin"
# variants of the weights file, edited with the standard library only
python3 - "$tmp" <<'PY' || exit 1
import json, struct, sys
d = sys.argv[1]
raw = open(f"{d}/w/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head, data = json.loads(raw[8:8 + n]), raw[8 + n:]
meta = head.pop("__metadata__", None)
names = sorted(head)
assert "model.embed_tokens.weight" in names and "lm_head.weight" in names, names
assert len(names) == 21, len(names)  # 20 parameters, the tied one twice

def write(path, entries):
    out, body = {}, b""
    for name, (dtype, shape, blob) in entries.items():
        out[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(body), len(body) + len(blob)]}
        body += blob
    h = json.dumps(out).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + body)

entries = {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in head.items()}
only_lm = {k: v for k, v in entries.items() if k != "model.embed_tokens.weight"}
write(f"{d}/only_lm_head.safetensors", only_lm)
missing = {k: v for k, v in entries.items() if k != "model.norm.weight"}
write(f"{d}/missing.safetensors", missing)
extra = dict(entries, **{"model.layers.9.mlp.up_proj.weight": entries["model.norm.weight"]})
write(f"{d}/extra.safetensors", extra)
bad = dict(entries)
dt, shape, blob = bad["model.norm.weight"]
bad["model.norm.weight"] = (dt, [shape[0] // 2], blob[: len(blob) // 2])
write(f"{d}/misshapen.safetensors", bad)

def write_text(path, text):  # the header text as given, then the same data
    h = text.encode() + b" " * (-len(text.encode()) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)

norm = head["model.norm.weight"]
# 2^62 elements of 4 bytes are 2^64 bytes, 0 in 64-bit arithmetic: the offsets of an empty tensor
huge = dict(head, **{"model.norm.weight": dict(norm, shape=[2**62], data_offsets=[norm["data_offsets"][0]] * 2)})
write_text(f"{d}/huge.safetensors", json.dumps(huge))
second = sorted(head, key=lambda k: head[k]["data_offsets"][0])[1]
lap = dict(head, **{second: dict(head[second], data_offsets=[o - 4 for o in head[second]["data_offsets"]])})
write_text(f"{d}/overlap.safetensors", json.dumps(lap))
h = json.dumps(head)
at = h.index('"model.norm.weight"')
write_text(f"{d}/twice.safetensors", h[:at] + '"model.norm.weight": ' + json.dumps(norm) + ", " + h[at:])
nan_byte = 8 + n + norm["data_offsets"][0] + 8  # element 2 of model.norm.weight
raw_nan = bytearray(raw)
raw_nan[nan_byte:nan_byte + 4] = struct.pack("<f", float("nan"))
open(f"{d}/nan.safetensors", "wb").write(raw_nan)
open(f"{d}/nan_byte", "w").write(f"{nan_byte}\n")
open(f"{d}/long.safetensors", "wb").write(struct.pack("<Q", 2**62) + raw[8:])
PY
step() { ./mmc step "$tmp/plan" --backend ref --data "$tmp/text.bin" --init "$1" -o "$2" 2>"$tmp/err" >/dev/null; }
step "$tmp/w/model.safetensors" "$tmp/g_both.st" || { cat "$tmp/err"; fail=1; }
step "$tmp/only_lm_head.safetensors" "$tmp/g_lm.st" || { cat "$tmp/err"; fail=1; }
cmp -s "$tmp/g_both.st" "$tmp/g_lm.st" || { echo "the tied weight loaded from lm_head.weight alone differs"; fail=1; }
expect() { # file, message
  if step "$1" "$tmp/g_bad.st"; then echo "$1 was accepted"; fail=1; return; fi
  grep -qF -- "$2" "$tmp/err" || { echo "unexpected message: $(cat "$tmp/err")"; fail=1; }
}
expect "$tmp/missing.safetensors" "missing.safetensors: no tensor model.norm.weight"
expect "$tmp/extra.safetensors" "tensor model.layers.9.mlp.up_proj.weight is not a parameter of this model"
expect "$tmp/misshapen.safetensors" "tensor model.norm.weight has shape [32], the model needs [64]"
expect "$tmp/huge.safetensors" "tensor model.norm.weight: 4611686018427387904 elements of 4 bytes are more than 2^63 bytes"
expect "$tmp/overlap.safetensors" "its data overlaps that of"
expect "$tmp/twice.safetensors" "bad JSON header: duplicate object key"
expect "$tmp/nan.safetensors" "nan.safetensors: byte $(cat "$tmp/nan_byte"): tensor model.norm.weight: element 2 is nan"
expect "$tmp/long.safetensors" "long.safetensors: byte 0: a header of 4611686018427387904 bytes in a file of"
mkfifo "$tmp/fifo.safetensors"
if timeout 20 ./mmc step "$tmp/plan" --backend ref --data "$tmp/text.bin" --init "$tmp/fifo.safetensors" -o "$tmp/g.st" 2>"$tmp/err"; then
  echo "a FIFO as --init accepted"; fail=1
fi
grep -qF "fifo.safetensors: is a FIFO; a safetensors file must be a regular file" "$tmp/err" || { echo "unexpected: $(cat "$tmp/err")"; fail=1; }
for f in huge nan; do # export reads the same way: nothing is written past a buffer, no nan goes out
  if ./mmc export "$tmp/$f.safetensors" -o "$tmp/$f.out.safetensors" 2>"$tmp/err"; then echo "export of $f accepted"; fail=1; fi
  [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF "$f.safetensors: byte " "$tmp/err" || { echo "export $f: $(cat "$tmp/err")"; fail=1; }
  [ ! -e "$tmp/$f.out.safetensors" ] || { echo "a refused export wrote $f.out.safetensors"; fail=1; }
done
./mmc export "$tmp/w" --dtype f16 -o "$tmp/fp16.safetensors" || fail=1
python3 - "$tmp/w/model.safetensors" "$tmp/fp16.safetensors" <<'PY' || fail=1
import array, json, struct, sys
def read(p):
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n]); h.pop("__metadata__", None)
    return h, raw[8 + n:]
h32, d32 = read(sys.argv[1]); h16, d16 = read(sys.argv[2])
assert sorted(h32) == sorted(h16)
for k in h32:
    assert h16[k]["dtype"] == "F16" and h16[k]["shape"] == h32[k]["shape"], k
    a = array.array("f"); a.frombytes(d32[slice(*h32[k]["data_offsets"])])
    b = d16[slice(*h16[k]["data_offsets"])]
    want = struct.pack("<%de" % len(a), *a)  # Python's half conversion rounds to nearest even
    assert b == want, k
print(f"export: {len(h16)} tensors rounded to f16 exactly as struct's 'e' format rounds")
PY
exit $fail
