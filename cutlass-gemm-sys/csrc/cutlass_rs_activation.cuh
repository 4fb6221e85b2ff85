// The activations of every fused epilogue: the scale-bias-activation trees
// (cutlass_rs_epilogue.hpp), the gated epilogue, the unfused twin (cutlass_rs_elementwise.cu) and
// the weight-only decode GEMV (cutlass_rs_weight_gemv.cu), so that all compute the same values.
// Hand-written, not generated. In f32; GELU's tanh form with the hardware tanh, SiLU with the
// approximate exponential and division.
#pragma once

#include <type_traits>

#include "cutlass_rs_abi.h"

namespace cutlass_rs {

// x through the CUTLASS_RS_ACTIVATION_* code Kind, fixed at compile time (identity for an unknown
// code): for loops that run one activation over many values, with the choice made once outside.
template <int Kind>
__device__ inline float activate_as(float x) {
  if constexpr (Kind == CUTLASS_RS_ACTIVATION_RELU) {
    // Not fmaxf, which would turn NaN into 0: NaN stays NaN, as with PyTorch's relu.
    return x < 0.0f ? 0.0f : x;
  } else if constexpr (Kind == CUTLASS_RS_ACTIVATION_GELU_TANH) {
    float t;
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(0.7978845608028654f * x * (1.0f + 0.044715f * x * x)));
    return 0.5f * x * (1.0f + t);
  } else if constexpr (Kind == CUTLASS_RS_ACTIVATION_GELU_ERF) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  } else if constexpr (Kind == CUTLASS_RS_ACTIVATION_SILU) {
    // The approximate division (2 ulp); where exp(-x) overflows it gives 0, SiLU's limit.
    return __fdividef(x, 1.0f + __expf(-x));
  } else {
    return x;
  }
}

// Returns f(std::integral_constant<int, K>{}) with K the activation code `kind` (identity for an
// unknown code): one instantiation per activation, the branch taken once. Every instantiation of
// f returns the same type.
template <class F>
__device__ inline decltype(auto) with_activation(int kind, F &&f) {
  switch (kind) {
    case CUTLASS_RS_ACTIVATION_RELU:
      return f(std::integral_constant<int, CUTLASS_RS_ACTIVATION_RELU>{});
    case CUTLASS_RS_ACTIVATION_GELU_TANH:
      return f(std::integral_constant<int, CUTLASS_RS_ACTIVATION_GELU_TANH>{});
    case CUTLASS_RS_ACTIVATION_GELU_ERF:
      return f(std::integral_constant<int, CUTLASS_RS_ACTIVATION_GELU_ERF>{});
    case CUTLASS_RS_ACTIVATION_SILU:
      return f(std::integral_constant<int, CUTLASS_RS_ACTIVATION_SILU>{});
    default:
      return f(std::integral_constant<int, CUTLASS_RS_ACTIVATION_IDENTITY>{});
  }
}

// x through the CUTLASS_RS_ACTIVATION_* `kind` (identity for an unknown code).
__device__ inline float activate(float x, int kind) {
  return with_activation(kind, [&](auto k) { return activate_as<decltype(k)::value>(x); });
}

}  // namespace cutlass_rs
