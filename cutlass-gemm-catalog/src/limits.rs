//! Catalog entries CUTLASS 4.2 refuses to compile, each with the static assertion that refuses
//! it. The catalog lists them (the seed's tables name them), `cutlass-profiler list` marks them,
//! the build skips them with a warning instead of failing in nvcc, and the census
//! (`cutlass-gemm-catalog/census.tsv`) shows each failing with exactly this assertion.

use std::fmt;

use crate::spec::{KernelSchedule, KernelSpec};
use crate::types::{Arch, DataType};

/// Why CUTLASS 4.2 cannot build an entry: a rule over the entry's configuration, and the
/// assertion it trips.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CutlassLimit {
    /// SM120's cooperative kernel splits a tile's rows between two consumer warp groups of 64:
    /// a tile of fewer than 128 rows (Table 16's 64xN cooperative rows) does not compile.
    Sm120CooperativeTileM,
    /// SM100's structured-sparse configuration knows `int8_t` but not `uint8_t` (Table 1 row
    /// 10's u8 x u8 sparse rows).
    SparseU8,
    /// The sparse block-scaled policies with 16 elements per scale factor (`..._o_vs16_...`, the
    /// NVFP4 ones Table 10 lists) given MX scales (ue8m0, 32 elements per scale).
    SparseScaleVector,
}

impl CutlassLimit {
    /// Every limit.
    pub const ALL: [CutlassLimit; 3] = [
        CutlassLimit::Sm120CooperativeTileM,
        CutlassLimit::SparseU8,
        CutlassLimit::SparseScaleVector,
    ];

    /// The static assertion's message, as nvcc prints it.
    pub const fn assertion(self) -> &'static str {
        match self {
            CutlassLimit::Sm120CooperativeTileM => {
                "Cooperative kernel requires Tile Size to be greater than or equal to 128 along the M-dimension."
            }
            CutlassLimit::SparseU8 => {
                "Ambiguous Input Type Config (failed to choose Instruction type)"
            }
            CutlassLimit::SparseScaleVector => {
                "Kernel Schedule policy doesn't match the scale factor vector size."
            }
        }
    }

    /// Where CUTLASS 4.2.0 asserts it (under `include/cutlass/gemm/`).
    pub const fn source(self) -> &'static str {
        match self {
            CutlassLimit::Sm120CooperativeTileM => {
                "kernel/sm120_gemm_tma_warpspecialized_cooperative_asymmetric_dma.hpp:351"
            }
            CutlassLimit::SparseU8 => "collective/builders/sm1xx_sparse_config.inl:92",
            CutlassLimit::SparseScaleVector => "collective/builders/sm1xx_common.inl:652",
        }
    }
}

impl fmt::Display for CutlassLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CUTLASS 4.2 cannot build it: \"{}\" ({})",
            self.assertion(),
            self.source()
        )
    }
}

impl KernelSpec {
    /// The CUTLASS 4.2 limit this entry trips, if any.
    pub fn cutlass_limit(&self) -> Option<CutlassLimit> {
        let sparse = self.op_class.is_sparse();
        if self.arch == Arch::Sm120a
            && self.kernel_schedule == KernelSchedule::TmaWarpSpecializedCooperative
            && self.tile[0] < 128
        {
            return Some(CutlassLimit::Sm120CooperativeTileM);
        }
        if sparse
            && self.arch == Arch::Sm100a
            && (self.a.ty, self.b.ty) == (DataType::U8, DataType::U8)
        {
            return Some(CutlassLimit::SparseU8);
        }
        if sparse
            && matches!(
                self.kernel_schedule,
                KernelSchedule::Sm100SparseNvf4OneSm | KernelSchedule::Sm100SparseNvf4TwoSm
            )
            && self.block_scale.is_some_and(|b| b.vec != 16)
        {
            return Some(CutlassLimit::SparseScaleVector);
        }
        None
    }
}
