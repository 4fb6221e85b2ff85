#!/usr/bin/env python3
"""Which kernels cuBLAS / cuBLASLt run for the benchmark suite, and how fast (a lead for the menu).

Runs on the GPU machine with its PyTorch (no build needed): for every shape of a shapes TSV, a
bf16 matmul (torch.mm -> cuBLAS), an FP8 e4m3 tensor-wise matmul without and with fast
accumulation (torch._scaled_mm -> cuBLASLt), in the linear-layer layout of the profiler (A [m, k]
row-major, B an [n, k] row-major weight, D [m, n] row-major bf16). Prints, per shape and type, the
kernel names torch's profiler saw and the median time of CUDA-event-timed launches over inputs
rotated across more than the L2. Lead only: PyTorch's cuBLAS may set other attributes (workspace)
than the profiler's own cuBLAS calls; the profiler's ratios stay what docs/performance.md reports.

usage: python3 tools/cublas_kernels.py shapes.tsv [--types bf16,e4m3,e4m3fast] [--ms 20] [--once]
"""
import argparse
import statistics
import sys

import torch


def shapes_of(path):
    out = []
    for line in open(path):
        if line.startswith("#") or line.startswith("name\t") or not line.strip():
            continue
        f = line.rstrip("\n").split("\t")
        out.append((f[0], int(f[1]), int(f[2]), int(f[3])))
    return out


def make_op(ty, m, n, k, sets):
    dev = "cuda"
    if ty == "bf16":
        ins = [(torch.randn(m, k, device=dev, dtype=torch.bfloat16),
                torch.randn(n, k, device=dev, dtype=torch.bfloat16)) for _ in range(sets)]
        return lambda i: torch.mm(ins[i][0], ins[i][1].t())
    fast = ty == "e4m3fast"
    ins = [(torch.randn(m, k, device=dev).to(torch.float8_e4m3fn),
            torch.randn(n, k, device=dev).to(torch.float8_e4m3fn)) for _ in range(sets)]
    one = torch.ones((), device=dev)
    return lambda i: torch._scaled_mm(ins[i][0], ins[i][1].t(), one, one,
                                      out_dtype=torch.bfloat16, use_fast_accum=fast)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes")
    ap.add_argument("--types", default="bf16,e4m3,e4m3fast")
    ap.add_argument("--ms", type=float, default=20.0)
    ap.add_argument("--once", action="store_true", help="one launch per shape and type (under ncu)")
    args = ap.parse_args()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    print("device", torch.cuda.get_device_name(0), "torch", torch.__version__,
          "cublas", torch.backends.cuda.preferred_blas_library(), file=sys.stderr)
    print("shape\ttype\tm\tn\tk\tus\ttflops\tkernels")
    for name, m, n, k in shapes_of(args.shapes):
        for ty in args.types.split(","):
            esz = 2 if ty == "bf16" else 1
            per = (m * k + n * k) * esz
            sets = max(2, min(64, 2 * l2 // max(per, 1) + 1))
            op = make_op(ty, m, n, k, sets)
            for i in range(sets):
                op(i)
            torch.cuda.synchronize()
            if args.once:
                torch.cuda.nvtx.range_push(f"{name}:{ty}")
                op(0)
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_pop()
                continue
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                op(0)
                torch.cuda.synchronize()
            kernels = sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
            # Calibrate the launch count to about args.ms per timed batch.
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); op(0); e.record(); e.synchronize()
            reps = max(5, int(args.ms / max(s.elapsed_time(e), 1e-3)))
            times = []
            for _ in range(5):
                s.record()
                for r in range(reps):
                    op(r % sets)
                e.record(); e.synchronize()
                times.append(s.elapsed_time(e) * 1e3 / reps)
            us = statistics.median(times)
            print(f"{name}\t{ty}\t{m}\t{n}\t{k}\t{us:.2f}\t{2*m*n*k/us/1e6:.1f}\t{' | '.join(kernels)}", flush=True)


if __name__ == "__main__":
    main()
