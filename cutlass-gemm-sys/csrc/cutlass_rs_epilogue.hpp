// The fused epilogue of the kernels named ..._evt_scale_bias{type}_act (the catalog's
// Fusion::ScaleBiasActivation). Part of cutlass-gemm-sys (csrc/); not generated. Included by those
// kernels' generated sources only, after the shim.
//
//   D = act(alpha * row_scale[m] * col_scale[n] * acc + beta * C + row_bias[m] + col_bias[n])
//
// as one CUTLASS epilogue visitor tree (EVT) for the SM90 TMA warp-specialized epilogues. Every
// vector is optional at run time (a null pointer reads as 1 for a scale and 0 for a bias, without
// a memory access), and the activation is a run-time argument, so one kernel serves a plain GEMM,
// a Linear layer's bias and activation, and FP8's per-row and per-column ("rowwise") scales.
// beta * C stays CUTLASS's optimized node: C is not read when beta is 0.
#pragma once

#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/epilogue/thread/activation.h"

#include "cutlass_rs_shim.hpp"

namespace cutlass_rs {

// An activation chosen at run time (CUTLASS_RS_ACTIVATION_*), for Sm90Compute: the node passes
// its Arguments (the code) to the call. The branch is uniform across the grid.
struct ActivationArguments {
  int kind = CUTLASS_RS_ACTIVATION_IDENTITY;
};

template <class T>
struct RuntimeActivation {
  // One type for every T: the node keeps the arguments of RuntimeActivation<float> and passes
  // them to RuntimeActivation<Array<float, N>>.
  using Arguments = ActivationArguments;

  CUTLASS_HOST_DEVICE T operator()(T const &x, Arguments const &args) const {
    using namespace cutlass::epilogue::thread;
    switch (args.kind) {
      case CUTLASS_RS_ACTIVATION_RELU:
        return ReLu<T>{}(x);
      case CUTLASS_RS_ACTIVATION_GELU_TANH:
        return GELU_taylor<T>{}(x);
      case CUTLASS_RS_ACTIVATION_GELU_ERF:
        return GELU<T>{}(x);
      case CUTLASS_RS_ACTIVATION_SILU:
        return SiLu<T>{}(x);
      default:
        return x;
    }
  }
};

namespace evt {
using namespace cute;
using namespace cutlass::epilogue::fusion;
constexpr auto RN = cutlass::FloatRoundStyle::round_to_nearest;
using F32 = float;

// A vector along M (one value per row: broadcast across a row of the tile) and along N.
template <class Tile, class T>
using PerRow = Sm90ColBroadcast<0, Tile, T, F32, Stride<_1, _0, int64_t>>;
template <class Tile, class T>
using PerCol = Sm90RowBroadcast<0, Tile, T, F32, Stride<_0, _1, int64_t>>;
using Scalar = Sm90ScalarBroadcast<F32, Stride<_0, _0, int64_t>>;

// row_scale[m] * acc, then col_scale[n] * that.
template <class Tile>
using Scaled = Sm90EVT<Sm90Compute<cutlass::multiplies, F32, F32, RN>, PerCol<Tile, F32>,
                       Sm90EVT<Sm90Compute<cutlass::multiplies, F32, F32, RN>, PerRow<Tile, F32>,
                               Sm90AccFetch>>;
// alpha * scaled + col_bias[n], then row_bias[m] + that.
template <class Tile, class Bias>
using Biased =
    Sm90EVT<Sm90Compute<cutlass::plus, F32, F32, RN>, PerRow<Tile, Bias>,
             Sm90EVT<Sm90Compute<cutlass::homogeneous_multiply_add, F32, F32, RN>, Scalar,
                      Scaled<Tile>, PerCol<Tile, Bias>>>;
}  // namespace evt

// The whole tree: act(beta * C + biased).
template <class Tile, class ElementD, class ElementC, class Bias>
using ScaleBiasActivation = cutlass::epilogue::fusion::Sm90EVT<
    cutlass::epilogue::fusion::Sm90Compute<RuntimeActivation, ElementD, float, evt::RN>,
    cutlass::epilogue::fusion::Sm90EVT<
        cutlass::epilogue::fusion::Sm90Compute<cutlass::homogeneous_multiply_add, float, float,
                                               evt::RN>,
        evt::Scalar, cutlass::epilogue::fusion::Sm90SrcFetch<ElementC>,
        evt::Biased<Tile, Bias>>>;

// The tree's arguments from the C ABI's (declared in the shim, which calls it for epilogues whose
// arguments have no alpha).
// A bias pointer of the C ABI (void) that converts to the tree's bias pointer type.
struct BiasPointer {
  const void *p;
  template <class T>
  operator const T *() const {
    return static_cast<const T *>(p);
  }
};

template <class Thread>
Thread fused_arguments(const cutlass_rs_gemm_args *a) {
  // Broadcast arguments are {pointer, value when null, stride}; the biases' null value (0) and
  // every stride (0 between batches) are the defaults.
  return Thread{
      {
          // beta * C + biased
          {{a->beta}, {nullptr}, {}},  // beta
          {},                          // C
          {
              // row_bias[m] + (alpha * scaled + col_bias[n])
              {BiasPointer{a->row_bias}},
              {
                  {{a->alpha}, {nullptr}, {}},  // alpha
                  {
                      // col_scale[n] * (row_scale[m] * acc)
                      {a->col_scale, 1.0f, {}},
                      {{a->row_scale, 1.0f, {}}, {}, {}},
                      {},
                  },
                  {BiasPointer{a->col_bias}},
                  {},
              },
              {},
          },
          {},
      },
      {a->activation},
  };
}

}  // namespace cutlass_rs
