#!/usr/bin/env python3
"""Fits the constants of cutlass-gemm/src/selection/heuristic.rs to the profiler's exhaustive runs.

Reads the profiler's exhaustive runs in bench/training/ (README there): the bf16 and e4m3 suite
on an H200 and on an H100 (the `-early` files with an earlier menu; the H200 e4m3 file with
CUTLASS's f32-promoting kernels only), the decode (M = 16 and 128, swapped 64x8 and 64x16 tiles),
M = 128 (64x96 2x1x1) and mid-size (M = 32-512 and small cubes) shapes, the M = 4096 e4m3 shapes
with the sliced 128x192 and 128x256 tiles (e4m3-large-sliced-h100.csv scored only), and
tf32-i8-suite-h100.csv, all written by
`cutlass-profiler profile --kernels all --csv ...`, and fits to all of them. Prints, for the
constants in heuristic.rs (PARAMS below) and for a random-search refit (`--refit`: seed 7 from
the previous constants gives PARAMS with `--holdout=gemma2,llama3` or `--per-race`, not
without. The anchors e512 and e1k, which only the swapped 64x8 and 64x16 tiles reach, pick the
same kernels on the data anywhere in 0.1-0.3 and e512 <= e1k <= e2k):
how close the model's pick comes to the fastest
measured kernel (geometric mean and worst of best_time / picked_time) per type, and bf16
leave-one-shape-out (refit on bf16 alone without the shape). The model here must stay the one
estimate_us() implements.

    python3 tools/fit_heuristic.py [--refit] [--per-race] [--holdout=FAMILY,...]
"""
import csv
import math
import os
import random
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PARAMS = dict(ext=0.963, e32k=0.64, e16k=0.618, e8k=0.498, e4k=0.496, e2k=0.413, e1k=0.312, e512=0.213,
              pp=0.846, ws=0.756, skfix=17.51, sk8fix=8.466, sk8=1.086, fix=4.126, bw=3.634e6,
              cta_bw=9.868e4, pad=1.445, l2bw=1.206e7)
# The starting point of the fits (physical guesses, no data): leave-one-out refits start here so
# that the left-out shape never informed the constants.
BASE = dict(ext=1.0, e32k=1.0, e16k=0.72, e8k=0.675, e4k=0.43, e2k=0.30, e1k=0.2, e512=0.1, pp=1.0,
            ws=0.9, skfix=13.7, sk8fix=13.7, sk8=1.0, fix=3.4, bw=3.2e6, cta_bw=1.17e5, pad=1.0, l2bw=1.2e7)


# Kernels measured in a CSV and left out of the menu afterwards (catalog.rs says why).
LEFT_OUT = ("_64x32x64_1x2x1_",)
# Candidates measured on the broad set that the default set did not take (catalog.rs says why).
BROAD_LEFT_OUT = ("bf16_bf16_128x128x64_1x2x1_0_tnt_align8_stream_k",
                  "bf16_bf16_128x32x128_1x1x1_0_tnn_align8_stream_k",
                  "bf16_bf16_64x16x64_2x1x1_0_tnn",
                  "e4m3_e4m3_f32_bf16_bf16_128x128x128_1x2x1_0_tnt_align16_stream_k",
                  "e4m3_e4m3_f32_bf16_bf16_128x64x128_1x1x1_0_tnn_align16_stream_k")
# The e4m3 candidates of 2026-12-07 that the default set did not take (catalog.rs says why), and
# the fused-epilogue twins that `--kernels all` times beside the plain kernels (a plain GEMM never
# runs them).
E4M3_LEFT_OUT = ("e4m3_e4m3_f32_bf16_bf16_128x64x128_", "e4m3_e4m3_f32_bf16_bf16_64x96x128_1x2x1_",
                 "e4m3_e4m3_f32_bf16_bf16_64x64x128_1x2x1_",
                 "e4m3_e4m3_f32_bf16_bf16_128x32x128_1x1x1_0_tnn_align16_stream_k", "_evt_")


# The model families the 2026-12-07 e4m3 choices were made on (the default set's three e4m3
# additions); every other family of those runs is scored only.
FIT_FAMILIES = ("llama2-7b", "mistral-7b", "qwen25-7b", "gpt2", "gemma2-9b")


# `--per-race`: correct each kernel's time for the clock's drift by the reference's time in its own
# race, where the CSV has it (docs/performance.md, Method).
PER_RACE = "--per-race" in sys.argv


def load(path, exclude_fast=True, a_type=None, left_out=(), per_race=None):
    data, shapes, races = {}, {}, {}
    for r in csv.DictReader(open(path)):
        if r["Provider"] != "cutlass-rs" or (exclude_fast and "fastaccum" in r["Operation"]):
            continue
        if any(part in r["Operation"] for part in LEFT_OUT + tuple(left_out)):
            continue
        if a_type and not r["A"].startswith(a_type + ":"):
            continue
        s = r["shape"]
        shapes[s] = (int(r["m"]), int(r["n"]), int(r["k"]))
        t = float(r["Runtime"]) * 1e3
        data.setdefault(s, {})[r["Operation"]] = t
        if r.get("ratio_vs_reference") and float(r["ratio_vs_reference"]) > 0:
            races.setdefault(s, {})[r["Operation"]] = t * float(r["ratio_vs_reference"])
    if PER_RACE if per_race is None else per_race:
        # Each time scaled by how far its race's reference ran from the shape's median reference
        # time (the clock drifts over an exhaustive run), except where the reference ran more
        # than a fifth off it (a stall): as the profiler's `--kernels all` summary (report.rs).
        for s, refs in races.items():
            v = sorted(refs.values())
            m = (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2
            for op, ref in refs.items():
                if op in data[s] and abs(ref / m - 1.0) <= 0.2:
                    data[s][op] *= m / ref
    # A CUTLASS FP8 kernel is never picked when its overlapped-promotion twin is there
    # (heuristic.rs, superseded()).
    for ks in data.values():
        for name in [n for n in ks if "_fp8_overlap" in n]:
            ks.pop(name.replace("_fp8_overlap", ""), None)
    return data, shapes


SPECS = {}


def spec(name):
    if name in SPECS:
        return SPECS[name]
    t = re.search(r"_(\d+)x(\d+)x(\d+)_(\d)x(\d)x1_0_(...)_align", name)
    sched = ("pingpong" if "pingpong" in name else
             ("ws" if "nosmem" in name and "cooperative" not in name else "coop"))
    SPECS[name] = dict(tm=int(t.group(1)), tn=int(t.group(2)), cm=int(t.group(4)),
                       cn=int(t.group(5)), sk="stream_k" in name, sched=sched,
                       swapped=t.group(6)[2] == "n",
                       # C and D of alignment 1: the cooperative and pingpong kernels with an
                       # epilogue without shared memory (catalog.rs SM90_MENU_16BIT_UNALIGNED_OUTPUT).
                       scalar_epi="nosmem" in name and sched != "ws",
                       # The overlapped FP8 cooperative kernels with a two-CTA cluster, whose
                       # raster runs across it (heuristic.rs, default_schedule).
                       fp8_pair="_fp8_overlap" in name and sched == "coop"
                       and int(t.group(4)) * int(t.group(5)) == 2)
    return SPECS[name]


def cluster_tiles(sp, m, n, swap=True):
    """Output tiles in whole clusters (a cluster's CTAs beyond the problem still occupy SMs), for
    the problem m x n (swap: exchanged first for a swapped kernel)."""
    if swap and sp["swapped"]:
        m, n = n, m
    cm, cn = sp["cm"], sp["cn"]
    return -(-math.ceil(m / sp["tm"]) // cm) * cm * (-(-math.ceil(n / sp["tn"]) // cn) * cn)


def unshared_panel(sp, m, n):
    """Rows (or columns) of the long side's panel each CTA reads for itself on a lopsided problem
    (one side at least 8x the other), 0 otherwise: the last tie-break (heuristic.rs)."""
    if sp["swapped"]:
        m, n = n, m
    if max(m, n) < 8 * min(m, n):
        return 0
    tm, tn, cm, cn = sp["tm"], sp["tn"], sp["cm"], sp["cn"]
    if n >= m:
        return tn // (cm if math.ceil(m / tm) >= cm else 1)
    return tm // (cn if math.ceil(n / tn) >= cn else 1)


def raster_rank(sp, m):
    """The tie-break before `unshared_panel` (heuristic.rs, `raster_rank`): of the FP8 cooperative two-CTA clusters,
    2x1x1 (raster along N) below 4096 rows of M, 1x2x1 (raster along M) from there."""
    if not sp["fp8_pair"]:
        return 0
    return int((sp["cm"] == 2) == (m >= 4096))


def estimate(p, sp, m, n, k, eb, speed, ob, fp8, sms=132):
    if sp["swapped"]:
        m, n = n, m
    tm, tn = sp["tm"], sp["tn"]
    # Linear in log2(area) between the anchors at 512 ... 32768 elements (heuristic.rs).
    anchors = [p["e512"], p["e1k"], p["e2k"], p["e4k"], p["e8k"], p["e16k"], p["e32k"]]
    x = min(max(math.log2(tm * tn) - 9.0, 0.0), 6.0)
    i = min(int(x), 5)
    eff = anchors[i] * (1 - (x - i)) + anchors[i + 1] * (x - i)
    eff *= {"pingpong": p["pp"], "ws": p["ws"]}.get(sp["sched"], 1.0)
    # CuTe's extended wgmma shapes (tile N other than 8 ... 256 powers of two and 96, 192).
    if tn not in (8, 16, 32, 64, 96, 128, 192, 256):
        eff *= p["ext"]
    tiles = cluster_tiles(sp, m, n, swap=False)
    waste = 1 - m / (math.ceil(m / tm) * tm)
    tile_us = 2 * tm * tn * k / (7.5e6 * eff * speed) * (1 + p["pad"] * waste)
    tile_bytes = (tm + tn) * k * eb
    total = (m * k + n * k) * eb + m * n * ob
    if sp["sk"]:
        per, fixed = tiles / sms, p["fix"] + (p["sk8fix"] if fp8 else p["skfix"])
    else:
        per, fixed = math.ceil(tiles / sms), p["fix"]
    # FP8 stream-K kernels run slower than the even share predicts (heuristic.rs).
    slow = p["sk8"] if sp["sk"] and fp8 else 1.0
    # L2 -> SM traffic of all tiles: each CTA reads its A and B panels; a cluster's peers share
    # (multicast) the panel they have in common (heuristic.rs).
    cm, cn = sp["cm"], sp["cn"]
    mt, nt = math.ceil(m / tm), math.ceil(n / tn)
    em = cm if mt >= cm else 1
    en = cn if nt >= cn else 1
    l2 = mt * nt * (tm / en + tn / em) * k * eb
    t = max(per * tile_us, per * tile_bytes / p["cta_bw"], total / p["bw"],
            l2 / p["l2bw"]) * slow + fixed
    # An epilogue that stores each element itself: one more pass over D (heuristic.rs,
    # scalar_epilogue_us). A TMA epilogue cannot store an n off the alignment in place: B and D go
    # through padded copies (staging_us), each read and written once more, 3 us a copy.
    if sp["scalar_epi"]:
        t += m * n * ob / 3.36e6
    align = 16 // ob
    if not sp["scalar_epi"] and (n if not sp["swapped"] else m) % align:
        nn, mm = (n, m) if not sp["swapped"] else (m, n)
        pad = -(-nn // align) * align
        t += ((nn + pad) * k * eb + (nn + pad) * mm * ob) / 3.36e6 + 6.0
    return t


def score(p, sets, skip=None, only=None):
    logs = []
    for (data, shapes), eb, speed, ob, fp8 in sets:
        for s, ks in data.items():
            if s == skip or (only and s != only):
                continue
            m, n, k = shapes[s]
            # The row-major 64x32 tile only up to one tile row of M (heuristic.rs, choose()).
            rows = [kn for kn in ks if (spec(kn)["tm"], spec(kn)["tn"]) != (64, 32)
                    or spec(kn)["swapped"] or m <= 64]
            ks = {kn: ks[kn] for kn in rows} if rows else ks
            # Ties (memory-bound problems, where the DRAM term binds) go to the smaller tile,
            # then to fewer idle CTAs, then to the FP8 raster, then to the cluster that shares
            # the streamed operand.
            pick = min(ks, key=lambda kn: (estimate(p, spec(kn), m, n, k, eb, speed, ob, fp8),
                                           spec(kn)["tm"] * spec(kn)["tn"],
                                           cluster_tiles(spec(kn), m, n),
                                           raster_rank(spec(kn), m),
                                           unshared_panel(spec(kn), m, n)))
            logs.append(math.log(min(ks.values()) / ks[pick]))
    return math.exp(sum(logs) / len(logs)), math.exp(min(logs))


def refit(sets, skip=None, iters=5000, seed=7, start=BASE):
    random.seed(seed)
    best = dict(start)
    bs = score(best, sets, skip=skip)
    for _ in range(iters):
        p = dict(best)
        for key in random.sample(list(p), 2):
            p[key] *= math.exp(random.gauss(0, 0.12))
        e = [p[x] for x in ("e32k", "e16k", "e8k", "e4k", "e2k", "e1k", "e512")]
        if not (all(0.02 < x <= 1 for x in e) and all(e[i] >= e[i + 1] for i in range(6))):
            continue
        sc = score(p, sets, skip=skip)
        if sc[0] + 0.3 * sc[1] > bs[0] + 0.3 * bs[1]:
            best, bs = p, sc
    return best


BF16 = (2, 1.0, 2, False)
E4M3 = (1, 2.0, 2, True)
TF32 = (4, 0.5, 4, False)
S8 = (1, 2.0, 4, False)


def main():
    perf = os.path.join(ROOT, "bench/training")
    # (data,) + (input bytes, speed relative to bf16, output bytes, FP8)
    def dataset(name, kind, a_type=None, left_out=(), per_race=None):
        return [(load(os.path.join(perf, name), a_type=a_type, left_out=left_out,
                      per_race=per_race),) + kind]

    bf16 = dataset("bf16-suite-h200.csv", BF16)
    bf16_h100 = dataset("bf16-suite-h100-early.csv", BF16)
    tf32 = dataset("tf32-i8-suite-h100.csv", TF32, a_type="tf32")
    s8 = dataset("tf32-i8-suite-h100.csv", S8, a_type="s8")
    e4m3 = dataset("e4m3-suite-h200.csv", E4M3)
    e4m3_h100 = dataset("e4m3-suite-h100-early.csv", E4M3)
    # 2026-11-24: the menus with the 176/96/32-wide 16-bit and 144/96/32-wide FP8 tiles.
    bf16_h100b = dataset("bf16-suite-h100.csv", BF16)
    e4m3_h100b = dataset("e4m3-suite-h100.csv", E4M3)
    # The M = 16 and 128 shapes again, with the swapped 64x8 and 64x16 pingpong tiles.
    bf16_dec = dataset("bf16-decode-h100.csv", BF16)
    e4m3_dec = dataset("e4m3-decode-h100.csv", E4M3)
    # The M = 128 shapes with the 64x96 pingpong tile on a 2x1x1 cluster as well.
    bf16_m128 = dataset("bf16-m128-h100.csv", BF16)
    e4m3_m128 = dataset("e4m3-m128-h100.csv", E4M3)
    # Mid-size problems (M = 32-512, 128³-1024³), which the narrow swapped tiles must not take
    # beyond M = 32: what the L2 term is for.
    bf16_mid = dataset("bf16-mid-h100.csv", BF16)
    e4m3_mid = dataset("e4m3-mid-h100.csv", E4M3)
    # The M = 4096 shapes with the sliced 128x192 and 128x256 FP8 tiles (2026-11-24, third
    # session).
    e4m3_large = dataset("e4m3-large-h100.csv", E4M3)
    e4m3_ab = dataset("e4m3-large-sliced-h100.csv", E4M3)
    # The linear layers of eight model families (bench/shapes-broad.tsv), every kernel of the
    # default build and candidate additions, kernel against kernel (2026-11-25); scored on the
    # default set's kernels (the candidates it did not take left out).
    broad_bf16 = dataset("broad-bf16-e4m3-h100.csv", BF16, a_type="bf16", left_out=BROAD_LEFT_OUT)
    broad_e4m3 = dataset("broad-bf16-e4m3-h100.csv", E4M3, a_type="e4m3", left_out=BROAD_LEFT_OUT)
    # The broad set's e4m3 shapes again (2026-12-07), every kernel of a build with the default set
    # and eight candidates, and three model families outside it (docs/perf/heldout-shapes.tsv:
    # Phi-3-mini, Falcon-7B, Yi-6B): what the 128x128 2x1x1 and the two 64x32 pingpong kernels
    # were chosen on (five families, the others scored). Both scored only: the shipped constants
    # predate them, and `--refit` reproduces those.
    broad_e4m3b = dataset("e4m3-broad-candidates-h100.csv", E4M3, left_out=E4M3_LEFT_OUT)
    heldout_e4m3 = dataset("e4m3-heldout-candidates-h100.csv", E4M3, left_out=E4M3_LEFT_OUT)
    holdout = set()
    for a in sys.argv[1:]:
        if a.startswith("--holdout="):
            holdout = set(a.split("=", 1)[1].split(","))

    def family(shape):
        return shape.split("-")[0]

    def model(shape):
        # "qwen25-14b-o-m512" -> "qwen25-14b", "gpt2-fc-m1024" -> "gpt2".
        parts = shape.split("-")
        return "-".join(parts[:2]) if re.fullmatch(r"\d+b", parts[1]) else parts[0]

    def split(sets, keep, of=family):
        out = []
        for (data, shapes), *kind in sets:
            d = {s: v for s, v in data.items() if keep(of(s))}
            out.append(((d, shapes),) + tuple(kind))
        return out

    # The large e4m3 tiles by name (128x256 and 128x192 1x2x1, 128x128 1x2x1 and 2x1x1), each in
    # its own race against cuBLASLt, twice, on the 90 shapes of the broad set, the suite and the
    # three families outside them where the heuristic takes 128x256 or 128x192
    # (docs/perf/e4m3-large-tiles-ab-shapes.tsv, 2026-12-07), scored only, drift-corrected. Not to
    # fit on: these runs put the 128x256 tile 5 % behind 128x128 2x1x1, but a heuristic that
    # followed them lost 0.2-0.8 % on the broad set against the one before in each of four runs in
    # one process (the 128x256 tile ran 0.99x cuBLASLt in the heuristic's own runs where it read
    # 0.92-0.93x by name; docs/performance.md).
    ab = [dataset("e4m3-large-tiles-ab-h100-run%d.csv" % r, E4M3, per_race=True) for r in (1, 2)]
    ab_fit = [split(d, lambda f: f in FIT_FAMILIES, of=model) for d in ab]
    ab_held = [split(d, lambda f: f not in FIT_FAMILIES, of=model) for d in ab]

    broad = broad_bf16 + broad_e4m3
    fit_set = (bf16 + bf16_h100 + bf16_h100b + bf16_dec + bf16_m128 + bf16_mid + e4m3 + e4m3_h100
               + e4m3_h100b + e4m3_dec + e4m3_m128 + e4m3_mid + e4m3_large + tf32 + s8
               + split(broad, lambda f: f not in holdout))
    iters = next((int(a.split("=")[1]) for a in sys.argv if a.startswith("--iters=")), 1500)
    p = refit(fit_set, start=PARAMS, iters=iters) if "--refit" in sys.argv else PARAMS
    print("constants:", {k: round(v, 3) for k, v in p.items()})
    for name, st in ([("bf16 (H200)", bf16), ("bf16 (H100)", bf16_h100), ("e4m3 (H200)", e4m3),
                     ("e4m3 (H100, overlapped)", e4m3_h100), ("bf16 (H100, new tiles)", bf16_h100b),
                     ("e4m3 (H100, new tiles)", e4m3_h100b), ("bf16 (H100, decode, 64x8/64x16)", bf16_dec),
                     ("e4m3 (H100, decode, 64x8/64x16)", e4m3_dec),
                     ("bf16 (H100, M = 128, 64x96 2x1x1)", bf16_m128),
                     ("e4m3 (H100, M = 128, 64x96 2x1x1)", e4m3_m128),
                     ("bf16 (H100, mid-size)", bf16_mid), ("e4m3 (H100, mid-size)", e4m3_mid),
                     ("e4m3 (H100, M = 4096, sliced 128x192/128x256)", e4m3_large),
                     ("e4m3 (H100, M = 4096, 1x2x1 tiles A/B, scored only)", e4m3_ab),
                     ("tf32", tf32), ("s8", s8),
                     ("bf16 (H100, broad set)", broad_bf16), ("e4m3 (H100, broad set)", broad_e4m3),
                     ("e4m3 (H100, broad set, 2026-12-07 menu)", broad_e4m3b),
                     ("e4m3 (H100, held-out families, scored only)", heldout_e4m3)]
                    + [("e4m3 (H100, large tiles by name, run %d, %s)" % (r + 1, part), sets[r])
                       for part, sets in (("fitted families", ab_fit),
                                          ("other families, scored only", ab_held))
                       for r in (0, 1)]):
        print("%s: geomean %.3f, worst %.3f" % ((name,) + score(p, st)))
    if holdout:
        for name, st in [("bf16", broad_bf16), ("e4m3", broad_e4m3),
                         ("e4m3 (2026-12-07 menu)", broad_e4m3b)]:
            held = split(st, lambda f: f in holdout)
            print("%s, held-out families %s (not fitted on): geomean %.3f, worst %.3f"
                  % ((name, ",".join(sorted(holdout))) + score(p, held)))
    if "--loo" not in sys.argv:
        return
    loo = [score(refit(bf16, skip=s, iters=1500), bf16, only=s)[0] for s in bf16[0][0][0]]
    print("bf16 leave-one-shape-out (refit without the shape): geomean %.3f, worst %.3f"
          % (math.exp(sum(map(math.log, loo)) / len(loo)), min(loo)))


if __name__ == "__main__":
    main()
