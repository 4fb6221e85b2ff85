// The packed order of the weight-only kernels' 4-bit weights. Part of cutlass-gemm-sys (csrc/); not
// generated. Included by the weight-only kernels (the layout type of their narrow operand) and by
// cutlass_rs_weight_pack.cu (which writes weights in that order), so that both use one definition.
#pragma once

#include "cute/tensor.hpp"
#include "cute/atom/mma_traits_sm90_gmma.hpp"
#include "cutlass/detail/layout.hpp"
#include "cutlass/layout/matrix.h"
#include "cutlass_rs_weight_only_abi.h"

namespace cutlass_rs {
namespace weight {

// The order in which a thread of a register-sourced SM90 wgmma holds the values of A it converts:
// each of a warp's 32 threads holds 8 values of a 16 x 16 (rows x k) block of A. The atom maps that
// block's (row, k) to an offset where thread t's values are the 8 consecutive ones from 8 t, in the
// order 0 2 4 6 1 3 5 7 of the thread's values (the order CUTLASS's int4 -> 16-bit converters
// unpack nibbles in: two registers of four values from one 32-bit load). One 128-bit shared memory
// load then serves a thread's k-block, instead of four 8-bit ones.
template <class Wide>
CUTE_HOST_DEVICE constexpr auto pack_atom() {
  using namespace cute;
  // wgmma's thread-value layout of A (64 x 16, 128 threads x 8 values) for a register-sourced
  // 16-bit MMA; its first warp covers rows 0-15.
  using Mma = decltype(SM90::GMMA::rs_op_selector<Wide, Wide, float, Shape<_64, _16, _16>>());
  auto tv = typename MMA_Traits<Mma>::ALayout{};
  auto warp_tv = make_layout_like(composition(tv, make_shape(_32{}, size<1>(tv))));
  // (row, k) of the 16 x 16 block -> thread + 32 * value.
  auto block_to_tv = right_inverse(warp_tv).with_shape(make_shape(_16{}, _16{}));
  // thread + 32 * value -> thread * 8 + the value's place in 0 2 4 6 1 3 5 7.
  auto tv_to_offset = Layout<Shape<_32, Shape<_2, _4>>, Stride<_8, Stride<_4, _1>>>{};
  return composition(tv_to_offset, block_to_tv);
}

static_assert(CUTLASS_RS_WEIGHT_PACK_ROWS == 16 && CUTLASS_RS_WEIGHT_PACK_COLS == 16,
              "the ABI's packing granule is the atom's block");

// The layout of an n x k (x batch) packed weight: atoms tiled down n first, then along k.
template <class Wide>
using PackedLayout = decltype(cute::tile_to_shape(
    pack_atom<Wide>(), cute::Layout<cute::Shape<int, int, int>,
                                    cutlass::detail::TagToStrideA_t<cutlass::layout::RowMajor>>{}));

template <class Wide>
CUTE_HOST_DEVICE auto packed_layout(int n, int k) {
  return cute::tile_to_shape(pack_atom<Wide>(), cute::make_shape(n, k, 1));
}

}  // namespace weight
}  // namespace cutlass_rs
