"""Prints CUTLASS's own procedural names for kernel specs read from stdin.

One spec per line, tab-separated:
arch a b acc c d layout_a layout_b layout_c align_a align_b align_c align_d tile cluster stages
kernel_schedule epilogue_schedule tile_scheduler op_class sf_type blockwise sfd
(tile and cluster as MxNxK; layouts as t/n; schedules as cutlass_library enum member names;
op_class tensorop, bstensorop or sptensorop; sf_type the scale-factor type of block-scaled entries, else -;
blockwise the scale block MxNxK of blockwise-scaled entries, else -; sfd the scale type and vector
of a block-scaled output as TYPExVEC, else -; mixed the MixedInputMode member of mixed-input
entries, with +shfl when shuffled, else -).
Used by tests/names_match_cutlass_library.rs with PYTHONPATH pointing at the nvidia-cutlass wheel.
"""
import sys

from cutlass_library.gemm_operation import GemmOperation
from cutlass_library.library import (
    DataType, EpilogueScheduleType, GemmKind, KernelScheduleType, LayoutType, MathInstruction,
    OpcodeClass, TensorDescription, TileDescription, TileSchedulerType, MathOperation,
    EpilogueFunctor3x, MixedInputMode,
)

TYPES = {n: getattr(DataType, n) for n in
         ["f16", "bf16", "f32", "tf32", "s8", "u8", "s32", "e4m3", "e5m2", "e2m3", "e3m2", "e2m1", "ue8m0", "ue4m3",
          "s4", "u4"]}
LAYOUTS = {"t": LayoutType.RowMajor, "n": LayoutType.ColumnMajor}

for line in sys.stdin:
    f = line.rstrip("\n").split("\t")
    if len(f) < 24:
        continue
    (arch, a, b, acc, c, d, la, lb, lc, aa, ab, ac, ad, tile, cluster, stages, ks, es, ts, opc, sf, bw, sfd,
     mixed) = f[:24]
    tile = [int(x) for x in tile.split("x")]
    cluster = [int(x) for x in cluster.split("x")]
    opclass = {"bstensorop": OpcodeClass.BlockScaledTensorOp,
               "sptensorop": OpcodeClass.SparseTensorOp}.get(opc, OpcodeClass.TensorOp)
    math = MathInstruction([tile[0], tile[1], 16], TYPES[a], TYPES[b], TYPES[acc],
                           opclass, MathOperation.multiply_add)
    td = TileDescription(tile, int(stages), [4, 1, 1], math, int(arch), int(arch), cluster)
    extra = {}
    kind = GemmKind.Universal3x
    if opc == "bstensorop":
        kind = GemmKind.BlockScaledUniversal3x
        sfd_tensor, sfd_vec = TensorDescription(DataType.void, LAYOUTS[lc]), 0
        if sfd != "-":
            sfd_type, sfd_vec = sfd.split("x")
            sfd_tensor, sfd_vec = TensorDescription(TYPES[sfd_type], LAYOUTS[lc]), int(sfd_vec)
        extra = dict(ScaleFactorA=TYPES[sf], ScaleFactorB=TYPES[sf],
                     ScaleFactorD={"tensor": sfd_tensor, "vector_size": sfd_vec})
    if opc == "sptensorop":
        kind = GemmKind.SparseUniversal3x
    if ks.startswith("PtrArray"):
        kind = GemmKind.GroupedBlockScaledUniversal3x if opc == "bstensorop" else GemmKind.GroupedUniversal3x
    if bw != "-":
        kind = GemmKind.GroupedBlockwiseUniversal3x if ks.startswith("PtrArray") else GemmKind.BlockwiseUniversal3x
        vm, vn, vk = (int(x) for x in bw.split("x"))
        extra = dict(ScaleFactorMVecSize=vm, ScaleFactorNVecSize=vn, ScaleFactorKVecSize=vk)
    if mixed != "-":
        mode, _, shuffle = mixed.partition("+")
        extra = dict(mixed_input_mode=getattr(MixedInputMode, mode), mixed_input_shuffle=shuffle == "shfl")
    op = GemmOperation(
        kind, int(arch), td,
        TensorDescription(TYPES[a], LAYOUTS[la], int(aa)),
        TensorDescription(TYPES[b], LAYOUTS[lb], int(ab)),
        TensorDescription(TYPES[c], LAYOUTS[lc], int(ac)),
        TYPES[acc],
        EpilogueFunctor3x.LinearCombination,
        D=TensorDescription(TYPES[d], LAYOUTS[lc], int(ad)),
        kernel_schedule=getattr(KernelScheduleType, ks),
        epilogue_schedule=getattr(EpilogueScheduleType, es),
        tile_scheduler=getattr(TileSchedulerType, ts),
        **extra,
    )
    print(op.procedural_name())
