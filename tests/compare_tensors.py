#!/usr/bin/env python3
"""Compares two safetensors files of gradients (or any tensors) by name: the relative L2
error of each tensor and the relative error of their "loss" metadata. Standard library only,
so CI needs no numpy.

usage: compare_tensors.py GOT.safetensors WANT.safetensors --loss-tol R --tensor-tol R"""
import argparse
import array
import json
import math
import struct
import sys


def read(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    tensors = {}
    for name, e in header.items():
        code = {"F32": "f", "F64": "d"}[e["dtype"]]
        b0, b1 = e["data_offsets"]
        a = array.array(code)
        a.frombytes(data[b0:b1])
        if sys.byteorder != "little":
            a.byteswap()
        tensors[name] = a
    return tensors, meta


def rel_l2(a, b):
    d = sum((x - y) ** 2 for x, y in zip(a, b))
    s = sum(y * y for y in b)
    return math.sqrt(d / s) if s > 0 else math.sqrt(d)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("got")
    p.add_argument("want")
    p.add_argument("--loss-tol", type=float, required=True)
    p.add_argument("--tensor-tol", type=float, required=True)
    p.add_argument("--scale", type=float, default=1.0, help="divide GOT's tensors by this first")
    a = p.parse_args()
    got, gm = read(a.got)
    want, wm = read(a.want)
    ok = True
    lg, lw = float(gm["loss"]), float(wm["loss"])
    lerr = abs(lg - lw) / abs(lw)
    print(f"loss {lg:.9g} vs {lw:.9g}: relative error {lerr:.2e} (tolerance {a.loss_tol:g})")
    ok &= lerr <= a.loss_tol
    worst, worst_name = 0.0, ""
    for name, w in want.items():
        if name not in got:
            print(f"missing tensor {name}")
            ok = False
            continue
        e = rel_l2([x / a.scale for x in got[name]], list(w))
        if e > worst:
            worst, worst_name = e, name
        if e > a.tensor_tol or math.isnan(e):
            print(f"{name}: relative L2 error {e:.2e} > {a.tensor_tol:g}")
            ok = False
    print(f"{len(want)} tensors: worst relative L2 error {worst:.2e} ({worst_name}), tolerance {a.tensor_tol:g}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
