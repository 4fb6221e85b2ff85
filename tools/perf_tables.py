#!/usr/bin/env python3
"""Markdown tables for docs/performance.md from `cutlass-profiler profile --pdl both --csv` runs.

    python3 tools/perf_tables.py RUN1.csv [RUN2.csv ...]

Per type (bf16, f16, e4m3, fp8bw): the geometric mean and the lowest ratio to the reference
library (reference time / our time, measured in the same process and round) in each run, kernel
against kernel (our plan without programmatic dependent launch, which cuBLAS does not use) and as
the library launches (with it, where the kernel has it); then, for the first run, one row per
shape: TFLOP/s of our plan without PDL and of the reference measured beside it. Kernels without PDL count with their one measurement in both columns.
"""
import csv
import math
import re
import sys
from collections import OrderedDict


def kind(row):
    a = row["A"].split(":")[0]
    if a == "e4m3" and ("1x128f32" in row["Operation"] or row["Provider"].endswith("blockwise")):
        return "fp8bw"
    return a


def load(path):
    """{type: OrderedDict(shape -> {'off' | 'on': (ratio, our row, the reference's row)})}"""
    out = {}
    rows = list(csv.DictReader(open(path)))
    for i, r in enumerate(rows):
        if r["Provider"] != "cutlass-rs":
            continue
        ref = rows[i + 1] if i + 1 < len(rows) and rows[i + 1]["Provider"] != "cutlass-rs" else None
        t = kind(r)
        shape = out.setdefault(t, OrderedDict()).setdefault(r["shape"], {})
        ratio = float(r["ratio_vs_reference"]) if r["ratio_vs_reference"] else float("nan")
        mode = r.get("pdl", "-")
        if mode in ("off", "-"):
            shape["off"] = (ratio, r, ref)
        if mode in ("on", "-"):
            shape["on"] = (ratio, r, ref)
    return out


def geomean(xs):
    xs = [x for x in xs if x == x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def short(name):
    if not name.startswith("cutlass3x_"):
        return name
    parts = name.split("_")
    tile = next((p for p in parts if re.fullmatch(r"\d+x\d+x\d+", p)), "")
    cluster = parts[parts.index(tile) + 1] if tile in parts else ""
    sched = "stream-K " if "stream_k" in name else ""
    body = "pingpong" if "pingpong" in name else "cooperative" if "cooperative" in name else "ws"
    extra = " overlap" if "fp8_overlap" in name else ""
    swap = " swapped" if "_tnn_" in name else ""
    return f"{tile} {cluster} {sched}{body}{extra}{swap}"


def main():
    runs = [load(p) for p in sys.argv[1:]]
    # Runs measured with `--pdl off` only have no PDL column.
    pdl = all(any(r.get("pdl") == "on" for r in csv.DictReader(open(p))) for p in sys.argv[1:])
    modes = ("off", "on") if pdl else ("off",)
    types = [t for t in ("bf16", "f16", "e4m3", "fp8bw") if t in runs[0]]
    print("| type | reference | kernel against kernel (no PDL): geomean, lowest |"
          + (" as launched (PDL): geomean, lowest |" if pdl else ""))
    print("|---|---|---|" + ("---|" if pdl else ""))
    for t in types:
        ref = next(s["off"][2] for s in runs[0][t].values() if s["off"][2])["Provider"]
        cells = []
        for mode in modes:
            parts = []
            for run in runs:
                rs = [s[mode][0] for s in run[t].values() if mode in s]
                parts.append(f"{geomean(rs):.3f}x, {min(rs):.3f}x")
            cells.append(" / ".join(parts))
        print(f"| {t} | {ref} | " + " | ".join(cells) + " |")
    for t in types:
        print(f"\n### {t} (run 1 per shape{'; run 2 ratio beside' if len(runs) > 1 else ''})\n")
        print("| shape | m x n x k | kernel | ours TFLOP/s | reference TFLOP/s | ratio, no PDL |"
              + (" ratio, PDL |" if pdl else "") + (" run 2, no PDL |" if len(runs) > 1 else ""))
        print("|---|---|---|---|---|---|" + ("---|" if pdl else "") + ("---|" if len(runs) > 1 else ""))
        for shape, s in runs[0][t].items():
            r_off, row, ref = s["off"]
            r_on = s.get("on", (float("nan"),))[0]
            tf = lambda r: float(r["GFLOPs"]) / 1e3
            line = (f"| {shape} | {row['m']} x {row['n']} x {row['k']} | {short(row['Operation'])} | "
                    f"{tf(row):.1f} | {tf(ref) if ref else float('nan'):.1f} | {r_off:.3f} |"
                    + (f" {r_on:.3f} |" if pdl else ""))
            if len(runs) > 1:
                other = runs[1][t].get(shape, {}).get("off")
                line += f" {other[0]:.3f} |" if other else " - |"
            print(line)


if __name__ == "__main__":
    main()
