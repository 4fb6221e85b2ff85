// The epilogue of the kernels named ..._bias{type}_act_aux{type} (the catalog's
// Fusion::BiasActivationAux): a Linear layer's bias and activation that also writes the
// pre-activation value, for a backward pass (cuBLASLt's GELU_AUX_BIAS). Part of cutlass-gemm-sys
// (csrc/); not generated. Included by those kernels' generated sources only, after the shim.
//
//   Z = alpha * acc + beta * C + col_bias[n]      (f32)
//   Aux = Z in the aux type,  D = act(Z) in D's type
//
// CUTLASS's own visitor tree for this (LinCombPerColBiasEltActAux on the SM90 TMA epilogues: Aux
// goes through shared memory and TMA like D), with the activation chosen at run time
// (RuntimeActivation of cutlass_rs_epilogue.hpp: the formulas of every other epilogue of this
// crate). Aux has D's layout, leading dimension and batch stride.
//
// C ABI: the kernels take Aux's address in cutlass_rs_gemm_args::sfd (the field of a D that a
// kernel writes besides D; these kernels have no block-scaled output), the bias in col_bias and
// the activation code in activation. row_scale, col_scale and row_bias are not read: the catalog's
// rules and the Rust API refuse them for these kernels.
#pragma once

#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass_rs_epilogue.hpp"
#include "cutlass_rs_shim.hpp"

namespace cutlass_rs {

// The catalog's Fusion::BiasActivationAux as a CUTLASS fusion operation: CUTLASS's
// LinCombPerColBiasEltActAux (so that the epilogue builder lays out Aux's shared memory), a
// row-major Aux, f32 compute and scalars. FusionCallbacks below gives it this crate's arguments.
template <class ElementD, class ElementC, class Bias, class ElementAux>
struct BiasActivationAuxFusion
    : cutlass::epilogue::fusion::LinCombPerColBiasEltActAux<
          cutlass::layout::RowMajor, RuntimeActivation, ElementD, float, ElementAux, Bias,
          ElementC, float> {};

// The run-time arguments (from the C ABI's, by fused_arguments). Not CUTLASS's: their alpha
// would make the shim set only alpha and beta (has_alpha).
struct BiasActivationAuxArguments {
  float scale = 1.0f;          // alpha
  float source_scale = 0.0f;   // beta
  const void *bias = nullptr;  // n values of the bias type, or null (0)
  void *aux = nullptr;         // Aux, m x n per matrix of the batch
  int64_t ld_aux = 0;          // D's
  int64_t batch_stride_aux = 0;
  ActivationArguments activation{};
};

template <>
inline BiasActivationAuxArguments fused_arguments<BiasActivationAuxArguments>(
    const cutlass_rs_gemm_args *a) {
  return BiasActivationAuxArguments{
      a->alpha,         a->beta, a->col_bias, a->sfd, a->ldd, a->batch_stride_d,
      {a->activation, 1},
  };
}

}  // namespace cutlass_rs

namespace cutlass::epilogue::fusion {

// CUTLASS's callbacks for LinCombPerColBiasEltActAux, taking BiasActivationAuxArguments.
template <int StagesC, int StagesD, int FragmentSize, bool ReuseSmemC, bool DelayTmaStore,
          class ElementD, class ElementC, class Bias, class ElementAux, class CtaTileShapeMNK,
          class EpilogueTile, class SmemLayoutAtom, class CopyOpR2S>
struct FusionCallbacks<
    epilogue::Sm90TmaWarpSpecialized<StagesC, StagesD, FragmentSize, ReuseSmemC, DelayTmaStore>,
    cutlass_rs::BiasActivationAuxFusion<ElementD, ElementC, Bias, ElementAux>, CtaTileShapeMNK,
    EpilogueTile, SmemLayoutAtom, CopyOpR2S>
    : FusionCallbacks<
          epilogue::Sm90TmaWarpSpecialized<StagesC, StagesD, FragmentSize, ReuseSmemC,
                                           DelayTmaStore>,
          LinCombPerColBiasEltActAux<cutlass::layout::RowMajor, cutlass_rs::RuntimeActivation,
                                     ElementD, float, ElementAux, Bias, ElementC, float>,
          CtaTileShapeMNK, EpilogueTile, SmemLayoutAtom, CopyOpR2S> {
  using Cutlass = FusionCallbacks<
      epilogue::Sm90TmaWarpSpecialized<StagesC, StagesD, FragmentSize, ReuseSmemC, DelayTmaStore>,
      LinCombPerColBiasEltActAux<cutlass::layout::RowMajor, cutlass_rs::RuntimeActivation,
                                 ElementD, float, ElementAux, Bias, ElementC, float>,
      CtaTileShapeMNK, EpilogueTile, SmemLayoutAtom, CopyOpR2S>;
  using Operation = cutlass_rs::BiasActivationAuxFusion<ElementD, ElementC, Bias, ElementAux>;
  using Arguments = cutlass_rs::BiasActivationAuxArguments;
  using typename Cutlass::Params;

  static typename Cutlass::Arguments cutlass_arguments(Arguments const &a) {
    typename Cutlass::Arguments args{};
    args.alpha = a.scale;
    args.beta = a.source_scale;
    args.bias_ptr = static_cast<Bias const *>(a.bias);
    args.activation = a.activation;
    args.aux_ptr = static_cast<ElementAux *>(a.aux);
    args.dAux = {a.ld_aux, cute::_1{}, a.batch_stride_aux};
    return args;
  }

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const &problem_shape,
                                                  Arguments const &args, void *workspace) {
    return Cutlass::to_underlying_arguments(problem_shape, cutlass_arguments(args), workspace);
  }

  template <class ProblemShape>
  static bool can_implement(ProblemShape const &problem_shape, Arguments const &args) {
    return args.aux != nullptr && Cutlass::can_implement(problem_shape, cutlass_arguments(args));
  }

  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const &problem_shape, Arguments const &args) {
    return Cutlass::get_workspace_size(problem_shape, cutlass_arguments(args));
  }

  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const &problem_shape,
                                              Arguments const &args, void *workspace,
                                              cudaStream_t stream,
                                              CudaHostAdapter *cuda_adapter = nullptr) {
    return Cutlass::initialize_workspace(problem_shape, cutlass_arguments(args), workspace,
                                         stream, cuda_adapter);
  }

  using Cutlass::Cutlass;
};

}  // namespace cutlass::epilogue::fusion
