// Part of cutlass-gemm-sys (csrc/cutlass_rs_weight_only_sm100.hpp); not generated, copied next to
// the generated sources. The arguments of the SM100 weight-only (mixed-input) kernels, which
// otherwise share the SM90 ones' C ABI and entry points (cutlass_rs_weight_only.hpp): the weight
// K-major as stored (n x k, two 4-bit values a byte), and the scales' layout built from the
// problem (CUTLASS's Sm100MixedInputBlockwiseScaleConfig, its group size fixed at compile time)
// instead of a stride and a run-time group size. Apart from cutlass_rs_weight_only.hpp so that
// the SM90 kernels' cached objects stay valid.
#pragma once

#include <stdexcept>

#include "cutlass_rs_weight_only.hpp"

namespace cutlass_rs {
namespace weight {

// The CUTLASS arguments of an SM100 weight-only kernel whose scales come in groups of kGroup along
// k. A different group size throws (the entry points return CUTLASS_RS_ERROR_EXCEPTION): the
// crate refuses it with a typed error first.
template <class Gemm, class ScaleConfig, int kGroup>
typename Gemm::Arguments sm100_arguments(const cutlass_rs_weight_only_args *a) {
  using Kernel = typename Gemm::GemmKernel;
  if (a->group_size != kGroup) throw std::invalid_argument("group size");
  const int n = static_cast<int>(a->n), m = static_cast<int>(a->m), k = static_cast<int>(a->k);
  typename Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  // The kernel computes Y^T = W . X^T: the weight's n rows are its M, the tokens its N.
  args.problem_shape = {n, m, k, 1};
  args.mainloop.ptr_A = static_cast<decltype(args.mainloop.ptr_A)>(a->w);
  args.mainloop.dA = make_stride<typename Kernel::StrideA>(a->k, int64_t(a->n) * a->k);
  args.mainloop.ptr_B = static_cast<decltype(args.mainloop.ptr_B)>(a->x);
  args.mainloop.dB = make_stride<typename Kernel::StrideB>(a->ldx, a->ldx * a->m);
  args.mainloop.ptr_S = static_cast<decltype(args.mainloop.ptr_S)>(a->scales);
  args.mainloop.layout_S = ScaleConfig::tile_atom_to_shape_scale(cute::make_shape(n, k, 1));
  args.mainloop.ptr_Z = static_cast<decltype(args.mainloop.ptr_Z)>(a->zeros);
  args.epilogue.ptr_C = static_cast<decltype(args.epilogue.ptr_C)>(a->c);
  args.epilogue.dC = make_stride<typename Kernel::StrideC>(a->ldc, a->ldc * a->m);
  args.epilogue.ptr_D = static_cast<decltype(args.epilogue.ptr_D)>(a->d);
  args.epilogue.dD = make_stride<typename Kernel::StrideD>(a->ldd, a->ldd * a->m);
  args.epilogue.thread.alpha = a->alpha;
  args.epilogue.thread.beta = a->beta;
  args.hw_info.device_id = a->device_id;
  args.hw_info.sm_count = a->sm_count;
  return args;
}

}  // namespace weight
}  // namespace cutlass_rs

// Makes cutlass_rs::weight::make_arguments<GEMM> (which the shared entry points call) the SM100
// arguments: an explicit specialization, before CUTLASS_RS_DEFINE_WEIGHT_ONLY_ENTRY_POINTS
// instantiates them.
#define CUTLASS_RS_SM100_WEIGHT_ONLY_ARGUMENTS(GEMM, SCALE_CONFIG, GROUP)                  \
  namespace cutlass_rs {                                                                   \
  namespace weight {                                                                       \
  template <>                                                                              \
  typename ::GEMM::Arguments make_arguments<::GEMM>(const cutlass_rs_weight_only_args *a) { \
    return sm100_arguments<::GEMM, ::SCALE_CONFIG, GROUP>(a);                              \
  }                                                                                        \
  }                                                                                        \
  }
