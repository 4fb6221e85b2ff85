// The fused epilogue of the kernels named ..._evt_scale_bias{type}_act (the catalog's
// Fusion::ScaleBiasActivation). Part of cutlass-gemm-sys (csrc/); not generated. Included by those
// kernels' generated sources only, after the shim.
//
//   D = act(alpha * row_scale[m] * col_scale[n] * acc + beta * C + row_bias[m] + col_bias[n])
//
// as CUTLASS epilogue visitor trees (EVT) for the SM90 TMA warp-specialized epilogues. Every
// vector is optional at run time (a null pointer reads as 1 for a scale and 0 for a bias, without
// a memory access), and so is the activation, so one kernel serves a plain GEMM, a Linear layer's
// bias and activation, and FP8's per-row and per-column ("rowwise") scales. beta * C stays
// CUTLASS's optimized node: C is not read when beta is 0.
//
// On SM90 the kernel holds six instances of CUTLASS's collective epilogue and runs one per launch
// (DispatchingEpilogue): where no row scale, column scale or row bias is given (a Linear layer's
// bias and activation, a plain GEMM), a tree without those three broadcasts whose activation is
// fixed at compile time, one per activation; else the whole tree with the activation chosen per
// fragment. The lean trees run about 1.5 % slower than CUTLASS's plain epilogue (1.010 on two
// tiles, 1.015 over the broad set); the whole tree, with its broadcasts staged through shared
// memory and its branch per fragment, 4-13 % slower.
// SM100 and SM120 kernels use the whole tree (ScaleBiasActivation) directly.
#pragma once

#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass_rs_activation.cuh"
#include "cutlass_rs_shim.hpp"

namespace cutlass_rs {

// The activation node's run-time arguments: the CUTLASS_RS_ACTIVATION_* code, and whether the
// whole tree is needed (a row scale, column scale or row bias is given, or C is read).
struct ActivationArguments {
  int kind = CUTLASS_RS_ACTIVATION_IDENTITY;
  int whole_tree = 1;
};

// x (a value or an Array of them) through the activation Kind (identity for an unknown code), by
// the formulas of the hand-written kernels (cutlass_rs_activation.cuh: the hardware tanh, and
// SiLU with the approximate exponential and division): CUTLASS's own SiLU divides exactly and
// its tanh is volatile asm, which made SiLU cost the plain GEMM's time again on epilogue-bound
// shapes.
template <int Kind, class T>
CUTLASS_DEVICE T activation_as(T const &x) {
  if constexpr (cute::is_same_v<T, float>) {
    return activate_as<Kind>(x);
  } else {
    T y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < int(T::kElements); ++i) {
      y[i] = activate_as<Kind>(x[i]);
    }
    return y;
  }
}

// An activation chosen at run time, for Sm90Compute: the node passes its Arguments to the call.
// The branch is uniform across the grid.
template <class T>
struct RuntimeActivation {
  // One type for every T: the node keeps the arguments of RuntimeActivation<float> and passes
  // them to RuntimeActivation<Array<float, N>>.
  using Arguments = ActivationArguments;

  CUTLASS_DEVICE T operator()(T const &x, Arguments const &args) const {
    return with_activation(args.kind,
                           [&](auto k) -> T { return activation_as<decltype(k)::value>(x); });
  }
};

// The activation Kind fixed at compile time. Its arguments are RuntimeActivation's (ignored), so
// that the trees' parameters have one layout.
template <int Kind>
struct FixedActivation {
  template <class T>
  struct Fn {
    using Arguments = ActivationArguments;
    CUTLASS_DEVICE T operator()(T const &x, Arguments const &) const {
      return activation_as<Kind>(x);
    }
  };
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

// A broadcast the lean trees do not read: Node's arguments, parameters and shared storage (so
// that both trees have one parameter layout) and a constant, 1 for a scale and -0 for a bias
// (x * 1 and x + -0 are x, so the compiler drops the operation).
template <class Node, bool IsScale>
struct Absent : Node {
  using Node::Node;

  CUTLASS_DEVICE bool is_producer_load_needed() const { return false; }
  CUTLASS_DEVICE bool is_C_load_needed() const { return false; }

  template <class... Args>
  CUTLASS_DEVICE auto get_producer_load_callbacks(ProducerLoadArgs<Args...> const &) {
    return EmptyProducerLoadCallbacks{};
  }

  struct ConsumerStoreCallbacks : EmptyConsumerStoreCallbacks {
    template <class ElementAccumulator, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<F32, FragmentSize> visit(
        cutlass::Array<ElementAccumulator, FragmentSize> const &, int, int, int) {
      cutlass::Array<F32, FragmentSize> value;
      value.fill(IsScale ? 1.0f : -0.0f);
      return value;
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(ConsumerStoreArgs<Args...> const &) {
    return ConsumerStoreCallbacks{};
  }
};

template <bool Read, class Node, bool IsScale>
using Maybe = cute::conditional_t<Read, Node, Absent<Node, IsScale>>;

// The tree, with (Vectors) or without the row scale, column scale and row bias:
// act(beta * C + (row_bias[m] + (alpha * (col_scale[n] * (row_scale[m] * acc)) + col_bias[n]))).
template <class Tile, class ElementD, class ElementC, class Bias, template <class> class Act,
          bool Vectors>
using Tree = Sm90EVT<
    Sm90Compute<Act, ElementD, F32, RN>,
    Sm90EVT<
        Sm90Compute<cutlass::homogeneous_multiply_add, F32, F32, RN>, Scalar,
        Sm90SrcFetch<ElementC>,
        Sm90EVT<Sm90Compute<cutlass::plus, F32, F32, RN>, Maybe<Vectors, PerRow<Tile, Bias>, false>,
                 Sm90EVT<Sm90Compute<cutlass::homogeneous_multiply_add, F32, F32, RN>, Scalar,
                          Sm90EVT<Sm90Compute<cutlass::multiplies, F32, F32, RN>,
                                  Maybe<Vectors, PerCol<Tile, F32>, true>,
                                  Sm90EVT<Sm90Compute<cutlass::multiplies, F32, F32, RN>,
                                          Maybe<Vectors, PerRow<Tile, F32>, true>, Sm90AccFetch>>,
                          PerCol<Tile, Bias>>>>>;
}  // namespace evt

// The whole tree with the activation chosen at run time: the fusion callbacks of the SM100 and
// SM120 kernels, and the instance the SM90 kernels run when a row or column vector is given.
template <class Tile, class ElementD, class ElementC, class Bias>
using ScaleBiasActivation = evt::Tree<Tile, ElementD, ElementC, Bias, RuntimeActivation, true>;

// The lean tree with the activation Kind.
template <class Tile, class ElementD, class ElementC, class Bias, int Kind>
using ScaleBiasActivationLean =
    evt::Tree<Tile, ElementD, ElementC, Bias, FixedActivation<Kind>::template Fn, false>;

// The fusion tag of the SM90 kernels' generated sources, for which the epilogue builder below
// gives a DispatchingEpilogue.
template <class Tile, class ElementD, class ElementC, class Bias>
struct ScaleBiasActivationFusion {};

// CUTLASS's SM90 TMA collective epilogue on the whole tree (Full) and on the lean trees (Lean,
// one per activation code, in code order), one chosen per launch from the activation node's
// arguments. The kernel sees Full's interface; store runs the chosen tree. The instances share
// the kernel's parameters and shared memory: their types differ only in the nodes' compile-time
// behaviour, and the checks below hold their layouts equal.
//
// A lean instance is made for each tile's store, so it keeps no state across tiles. CUTLASS's
// collective keeps one (a count of stores, when D reuses C's shared memory) for releasing C's
// buffers to the producer warp; it matters only where C is read, and lean trees run only where
// it is not (beta = 0: fused_arguments sets `whole_tree` otherwise).
template <class Full, class... Lean>
class DispatchingEpilogue : public Full {
  static_assert(sizeof...(Lean) == CUTLASS_RS_ACTIVATION_SILU + 1, "one lean tree per activation");
  template <class E>
  static constexpr bool same_layout =
      sizeof(typename E::Params) == sizeof(typename Full::Params) &&
      alignof(typename E::Params) == alignof(typename Full::Params) &&
      sizeof(typename E::TensorStorage) == sizeof(typename Full::TensorStorage) &&
      alignof(typename E::TensorStorage) == alignof(typename Full::TensorStorage) &&
      sizeof(decltype(E::Params::thread)) == sizeof(decltype(Full::Params::thread)) &&
      cute::is_same_v<decltype(E::Params::tma_load_c), decltype(Full::Params::tma_load_c)> &&
      cute::is_same_v<decltype(E::Params::tma_store_d), decltype(Full::Params::tma_store_d)> &&
      cute::is_same_v<typename E::LoadPipeline, typename Full::LoadPipeline> &&
      cute::is_same_v<typename E::LoadPipelineState, typename Full::LoadPipelineState> &&
      cute::is_same_v<typename E::StorePipeline, typename Full::StorePipeline> &&
      cute::is_same_v<typename E::StorePipelineState, typename Full::StorePipelineState>;
  static_assert((same_layout<Lean> && ...), "the trees' parameters and storage must match");

  template <int I>
  using LeanAt = cute::tuple_element_t<I, cute::tuple<Lean...>>;

 public:
  using typename Full::LoadPipeline;
  using typename Full::LoadPipelineState;
  using typename Full::Params;
  using typename Full::StorePipeline;
  using typename Full::StorePipelineState;
  using typename Full::TensorStorage;

  CUTLASS_HOST_DEVICE
  DispatchingEpilogue(Params const &params, TensorStorage &tensors)
      : Full(params, tensors), params_(params), tensors_(tensors) {}

  template <class ProblemShapeMNKL, class TileShapeMNK, class TileCoordMNKL, class AccEngine,
            class AccLayout, class TiledMma>
  CUTLASS_DEVICE auto store(LoadPipeline load_pipeline, LoadPipelineState load_pipe_consumer_state,
                            StorePipeline store_pipeline,
                            StorePipelineState store_pipe_producer_state,
                            ProblemShapeMNKL problem_shape_mnkl, TileShapeMNK tile_shape_MNK,
                            TileCoordMNKL tile_coord_mnkl,
                            cute::Tensor<AccEngine, AccLayout> accumulators, TiledMma tiled_mma,
                            int thread_idx, TensorStorage &shared_tensors, int subtile_idx = -1) {
    auto run = [&](auto &e) CUTLASS_LAMBDA_FUNC_INLINE {
      using E = cute::remove_cvref_t<decltype(e)>;
      return e.store(load_pipeline, load_pipe_consumer_state, store_pipeline,
                     store_pipe_producer_state, problem_shape_mnkl, tile_shape_MNK,
                     tile_coord_mnkl, accumulators, tiled_mma, thread_idx,
                     reinterpret_cast<typename E::TensorStorage &>(shared_tensors), subtile_idx);
    };
    ActivationArguments const &act = params_.thread.op_1;
    // An unknown code is the identity in both trees (RuntimeActivation, with_activation).
    if (!act.whole_tree) {
      return with_activation(act.kind, [&](auto k) { return run_lean<decltype(k)::value>(run); });
    }
    return run(static_cast<Full &>(*this));
  }

 private:
  template <int I, class F>
  CUTLASS_DEVICE auto run_lean(F &run) {
    using E = LeanAt<I>;
    E e(reinterpret_cast<typename E::Params const &>(params_),
        reinterpret_cast<typename E::TensorStorage &>(tensors_));
    return run(e);
  }

  Params const &params_;
  TensorStorage &tensors_;
};

// The SM90 TMA epilogue of ScaleBiasActivationFusion: CUTLASS's builder for each tree.
template <class Tile, class ElementD, class ElementC, class Bias, class... BuilderArgs>
struct DispatchingEpilogueBuilder;

template <class Tile, class ElementD, class ElementC, class Bias, class Arch, class OpClass,
          class TileShape, class ClusterShape, class EpilogueTile, class ElementAccumulator,
          class ElementCompute, class ElementC_, class LayoutC, class AlignC, class ElementD_,
          class LayoutD, class AlignD, class Schedule>
struct DispatchingEpilogueBuilder<Tile, ElementD, ElementC, Bias, Arch, OpClass, TileShape,
                                  ClusterShape, EpilogueTile, ElementAccumulator, ElementCompute,
                                  ElementC_, LayoutC, AlignC, ElementD_, LayoutD, AlignD, Schedule> {
  template <class Callbacks>
  using With = typename cutlass::epilogue::collective::CollectiveBuilder<
      Arch, OpClass, TileShape, ClusterShape, EpilogueTile, ElementAccumulator, ElementCompute,
      ElementC_, LayoutC, AlignC::value, ElementD_, LayoutD, AlignD::value, Schedule,
      Callbacks>::CollectiveOp;
  template <int Kind>
  using Lean = With<ScaleBiasActivationLean<Tile, ElementD, ElementC, Bias, Kind>>;
  using CollectiveOp = DispatchingEpilogue<
      With<ScaleBiasActivation<Tile, ElementD, ElementC, Bias>>,
      Lean<CUTLASS_RS_ACTIVATION_IDENTITY>, Lean<CUTLASS_RS_ACTIVATION_RELU>,
      Lean<CUTLASS_RS_ACTIVATION_GELU_TANH>, Lean<CUTLASS_RS_ACTIVATION_GELU_ERF>,
      Lean<CUTLASS_RS_ACTIVATION_SILU>>;
};

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
      {a->activation, a->row_scale != nullptr || a->col_scale != nullptr ||
                          a->row_bias != nullptr || a->beta != 0.0f},
  };
}

}  // namespace cutlass_rs

namespace cutlass::epilogue::collective {

// The epilogue builder for the scale-bias-activation fusion tag on SM90's two TMA epilogue
// schedules (concrete schedules, so that these are more specialized than CUTLASS's own).
#define CUTLASS_RS_DISPATCHING_BUILDER(SCHEDULE)                                                  \
  template <class OpClass, class TileShape, class ClusterShape, class EpilogueTile,               \
            class ElementAccumulator, class ElementCompute, class ElementC_, class LayoutC,       \
            int AlignC, class ElementD_, class LayoutD, int AlignD, class Tile, class ElementD,   \
            class ElementC, class Bias>                                                           \
  struct CollectiveBuilder<arch::Sm90, OpClass, TileShape, ClusterShape, EpilogueTile,            \
                           ElementAccumulator, ElementCompute, ElementC_, LayoutC, AlignC,        \
                           ElementD_, LayoutD, AlignD, SCHEDULE,                                  \
                           cutlass_rs::ScaleBiasActivationFusion<Tile, ElementD, ElementC, Bias>, \
                           void>                                                                  \
      : cutlass_rs::DispatchingEpilogueBuilder<                                                   \
            Tile, ElementD, ElementC, Bias, arch::Sm90, OpClass, TileShape, ClusterShape,         \
            EpilogueTile, ElementAccumulator, ElementCompute, ElementC_, LayoutC,                 \
            cute::Int<AlignC>, ElementD_, LayoutD, cute::Int<AlignD>, SCHEDULE> {};
CUTLASS_RS_DISPATCHING_BUILDER(TmaWarpSpecialized)
CUTLASS_RS_DISPATCHING_BUILDER(TmaWarpSpecializedCooperative)
#undef CUTLASS_RS_DISPATCHING_BUILDER

}  // namespace cutlass::epilogue::collective
