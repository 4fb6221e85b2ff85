// The activations of the fused epilogues outside CUTLASS's epilogue visitor trees: the unfused
// twin (cutlass_rs_elementwise.cu) and the weight-only decode GEMV (cutlass_rs_weight_gemv.cu).
// Hand-written, not generated. In f32, the formulas of the activations CUTLASS applies in
// cutlass_rs_epilogue.hpp (cutlass/epilogue/thread/activation.h), to within their rounding.
#pragma once

#include "cutlass_rs_abi.h"

namespace cutlass_rs {

// x through the CUTLASS_RS_ACTIVATION_* `kind` (identity for an unknown code).
__device__ inline float activate(float x, int kind) {
  switch (kind) {
    case CUTLASS_RS_ACTIVATION_RELU:
      return fmaxf(x, 0.0f);
    case CUTLASS_RS_ACTIVATION_GELU_TANH: {
      float t;
      asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(0.7978845608028654f * x * (1.0f + 0.044715f * x * x)));
      return 0.5f * x * (1.0f + t);
    }
    case CUTLASS_RS_ACTIVATION_GELU_ERF:
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case CUTLASS_RS_ACTIVATION_SILU:
      return x / (1.0f + __expf(-x));
    default:
      return x;
  }
}

}  // namespace cutlass_rs
