"""Prints the procedural names of the SM90 GEMMs CUTLASS's own generator emits for the types of
this catalog (16-bit, tf32, int8, FP8 and FP8 blockwise, the grouped 16-bit, FP8 and FP8 blockwise kernels, and the
mixed-input ones), at
its exhaustive instantiation level.

    python3 cutlass_generator_sm90.py [--wgmma-n 96,176,...]

The exhaustive level (9992) takes the wgmma shapes of levels 0-2 (N = 8, 16, 32, 64, 128, 256).
`--wgmma-n` adds the level-3 shapes with those N (the generator's level 9993 restricted to them,
so that the output stays the size of level 9992's plus what the catalog uses: level 3 in full
is five times as many names).

Used by tests/names_match_cutlass_library.rs with PYTHONPATH pointing at the nvidia-cutlass wheel.
"""
import argparse
import sys

from cutlass_library import generator as g
from cutlass_library import sm90_shapes
from cutlass_library.library import GemmKind
from cutlass_library.manifest import Manifest

ours = argparse.ArgumentParser()
ours.add_argument("--wgmma-n", default="")
extra_n = {int(v) for v in ours.parse_args().wgmma_n.split(",") if v}
level = "9992"
if extra_n:
    level = "9993"
    # The generator reads these dicts (imported by reference) when it lists wgmma shapes: keep
    # levels 0-2 and the level-3 shapes with the asked-for N, drop the other level-3 ones.
    for table in (sm90_shapes.SM90_WGMMA_SHAPES_FP16_BF16_DENSE, sm90_shapes.SM90_WGMMA_SHAPES_TF32_DENSE,
                  sm90_shapes.SM90_WGMMA_SHAPES_FP8_DENSE, sm90_shapes.SM90_WGMMA_SHAPES_INT8_DENSE):
        for shape, min_level in list(table.items()):
            if min_level == 3 and shape[1] not in extra_n:
                table[shape] = 10

args = g.define_parser().parse_args(
    ["--architectures", "90a", "--cuda-version", "13.0", "--kernels", "all",
     "--instantiation-level", level])
manifest = Manifest(args)
for fn in (g.GenerateSM90_TensorOp_16b_WGMMA_gemm, g.GenerateSM90_TensorOp_tf32_WGMMA_gemm,
           g.GenerateSM90_TensorOp_int8_WGMMA_gemm, g.GenerateSM90_TensorOp_fp8_WGMMA_gemm,
           g.GenerateSM90_TensorOp_fp8_WGMMA_gemm_with_blockwise):
    fn(manifest, "13.0")
# The grouped (pointer-array) kernels, which the generator emits for 16-bit and FP8 types.
for fn in (g.GenerateSM90_TensorOp_16b_WGMMA_gemm, g.GenerateSM90_TensorOp_fp8_WGMMA_gemm):
    fn(manifest, "13.0", gemm_kind=GemmKind.GroupedUniversal3x)
g.GenerateSM90_TensorOp_fp8_WGMMA_gemm_with_blockwise(
    manifest, "13.0", gemm_kind=GemmKind.GroupedBlockwiseUniversal3x)
# The mixed-input (weight-only) kernels.
g.GenerateSM90_TensorOp_mixed_dtype_WGMMA_gemm(manifest, "13.0")
out = sys.stdout
for by_cc in manifest.operations.values():
    for ops in by_cc.values():
        for op_list in ops.values():
            for op in op_list:
                out.write(op.procedural_name() + "\n")
