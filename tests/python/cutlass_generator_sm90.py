"""Prints the procedural names of the SM90 GEMMs CUTLASS's own generator emits for the types of
this catalog (16-bit, tf32, int8, FP8 and FP8 blockwise), at its exhaustive instantiation level.

Used by tests/names_match_cutlass_library.rs with PYTHONPATH pointing at the nvidia-cutlass wheel.
"""
import sys

from cutlass_library import generator as g
from cutlass_library.manifest import Manifest

args = g.define_parser().parse_args(
    ["--architectures", "90a", "--cuda-version", "13.0", "--kernels", "all",
     "--instantiation-level", "9992"])
manifest = Manifest(args)
for fn in (g.GenerateSM90_TensorOp_16b_WGMMA_gemm, g.GenerateSM90_TensorOp_tf32_WGMMA_gemm,
           g.GenerateSM90_TensorOp_int8_WGMMA_gemm, g.GenerateSM90_TensorOp_fp8_WGMMA_gemm,
           g.GenerateSM90_TensorOp_fp8_WGMMA_gemm_with_blockwise):
    fn(manifest, "13.0")
out = sys.stdout
for by_cc in manifest.operations.values():
    for ops in by_cc.values():
        for op_list in ops.values():
            for op in op_list:
                out.write(op.procedural_name() + "\n")
