"""Prints CUTLASS's own procedural names for kernel specs read from stdin.

One spec per line, tab-separated:
arch a b acc c d layout_a layout_b layout_c align_a align_b align_c align_d tile cluster stages
kernel_schedule epilogue_schedule tile_scheduler
(tile and cluster as MxNxK; layouts as t/n; schedules as cutlass_library enum member names).
Used by tests/names_match_cutlass_library.rs with PYTHONPATH pointing at the nvidia-cutlass wheel.
"""
import sys

from cutlass_library.gemm_operation import GemmOperation
from cutlass_library.library import (
    DataType, EpilogueScheduleType, GemmKind, KernelScheduleType, LayoutType, MathInstruction,
    OpcodeClass, TensorDescription, TileDescription, TileSchedulerType, MathOperation,
    EpilogueFunctor3x,
)

TYPES = {"f16": DataType.f16, "bf16": DataType.bf16, "f32": DataType.f32}
LAYOUTS = {"t": LayoutType.RowMajor, "n": LayoutType.ColumnMajor}

for line in sys.stdin:
    f = line.rstrip("\n").split("\t")
    if len(f) < 19:
        continue
    (arch, a, b, acc, c, d, la, lb, lc, aa, ab, ac, ad, tile, cluster, stages, ks, es, ts) = f[:19]
    tile = [int(x) for x in tile.split("x")]
    cluster = [int(x) for x in cluster.split("x")]
    math = MathInstruction([64, tile[1], 16], TYPES[a], TYPES[b], TYPES[acc],
                           OpcodeClass.TensorOp, MathOperation.multiply_add)
    td = TileDescription(tile, int(stages), [4, 1, 1], math, int(arch), int(arch), cluster)
    op = GemmOperation(
        GemmKind.Universal3x, int(arch), td,
        TensorDescription(TYPES[a], LAYOUTS[la], int(aa)),
        TensorDescription(TYPES[b], LAYOUTS[lb], int(ab)),
        TensorDescription(TYPES[c], LAYOUTS[lc], int(ac)),
        TYPES[acc],
        EpilogueFunctor3x.LinearCombination,
        D=TensorDescription(TYPES[d], LAYOUTS[lc], int(ad)),
        kernel_schedule=getattr(KernelScheduleType, ks),
        epilogue_schedule=getattr(EpilogueScheduleType, es),
        tile_scheduler=getattr(TileSchedulerType, ts),
    )
    print(op.procedural_name())
