//! One kernel instantiation as data, and its procedural name.

use crate::types::{Arch, DataType, Layout};

/// One operand of a GEMM as a kernel sees it: element type, layout and alignment in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Operand {
    /// Element type.
    pub ty: DataType,
    /// Layout in memory.
    pub layout: Layout,
    /// Alignment in elements that the kernel requires of the base pointer, the leading dimension,
    /// the batch stride and the contiguous extent.
    pub align: u32,
}

impl Operand {
    /// An operand aligned for TMA: 16 bytes.
    pub const fn tma(ty: DataType, layout: Layout) -> Operand {
        Operand {
            ty,
            layout,
            align: ty.tma_alignment(),
        }
    }
}

/// The mainloop schedule (`KernelSchedule` in CUTLASS), as CUTLASS's dispatch policies name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KernelSchedule {
    /// `KernelTmaWarpSpecializedCooperative` (SM90, SM120): two consumer warp groups share a tile.
    TmaWarpSpecializedCooperative,
    /// `KernelTmaWarpSpecializedPingpong` (SM90, SM120): consumer warp groups alternate tiles.
    TmaWarpSpecializedPingpong,
    /// `KernelTmaWarpSpecialized` (SM90): one consumer warp group, not persistent.
    TmaWarpSpecialized,
    /// `KernelTmaWarpSpecializedCooperativeFP8FastAccum` (SM90 FP8): cooperative, accumulating in
    /// the tensor core's FP8 accumulator without periodic promotion to f32.
    TmaWarpSpecializedCooperativeFp8FastAccum,
    /// `KernelTmaWarpSpecializedPingpongFP8FastAccum` (SM90 FP8): pingpong with fast accumulation.
    TmaWarpSpecializedPingpongFp8FastAccum,
    /// `KernelTmaWarpSpecializedCooperativeFP8Blockwise` (SM90 FP8 with blockwise scales of A and B
    /// applied to the f32 accumulator once per k-block).
    TmaWarpSpecializedCooperativeFp8Blockwise,
    /// This crate's own (not in `cutlass_library`): CUTLASS's cooperative FP8 kernel with the
    /// f32-promoting mainloop's `mma` replaced by one that promotes as often (once per 128-deep
    /// k-tile, CUTLASS's default) but overlaps the promotion with the next k-tile's wgmmas
    /// (`cutlass-gemm-sys/csrc/cutlass_rs_sm90_fp8.hpp`); results are bit-identical to the CUTLASS
    /// kernel of the same tile and cluster.
    TmaWarpSpecializedCooperativeFp8Overlap,
    /// This crate's own: CUTLASS's pingpong FP8 kernel with the same overlapped-promotion `mma`.
    TmaWarpSpecializedPingpongFp8Overlap,
    /// This crate's own: CUTLASS's FP8 blockwise kernel with the per-k-tile scaling overlapped
    /// the same way (`cutlass-gemm-sys/csrc/cutlass_rs_sm90_fp8_blockwise.hpp`); bit-identical results.
    TmaWarpSpecializedCooperativeFp8BlockwiseOverlap,
    /// `KernelTmaWarpSpecialized1SmSm100`.
    Sm100OneSm,
    /// `KernelTmaWarpSpecialized2SmSm100`.
    Sm100TwoSm,
    /// `KernelTmaWarpSpecialized1SmMxf8f6f4Sm100`.
    Sm100Mxf8f6f4OneSm,
    /// `KernelTmaWarpSpecialized2SmMxf8f6f4Sm100`.
    Sm100Mxf8f6f4TwoSm,
    /// `KernelTmaWarpSpecialized1SmMxf4Sm100`.
    Sm100Mxf4OneSm,
    /// `KernelTmaWarpSpecialized2SmMxf4Sm100`.
    Sm100Mxf4TwoSm,
    /// `KernelTmaWarpSpecialized1SmNvf4Sm100`.
    Sm100Nvf4OneSm,
    /// `KernelTmaWarpSpecialized2SmNvf4Sm100`.
    Sm100Nvf4TwoSm,
    /// `KernelTmaWarpSpecializedMxf8f6f4Sm120` (cooperative).
    Sm120Mxf8f6f4Cooperative,
    /// `KernelTmaWarpSpecializedPingpongMxf8f6f4Sm120`.
    Sm120Mxf8f6f4Pingpong,
    /// `KernelPtrArrayTmaWarpSpecializedCooperative` (SM90 grouped GEMM): the cooperative kernel
    /// over a device array of problems, one per group, with their operand pointers and strides
    /// (f32-promoting FP8 mainloop for e4m3/e5m2 operands).
    PtrArrayTmaWarpSpecializedCooperative,
    /// `KernelPtrArrayTmaWarpSpecializedPingpong` (SM90 grouped GEMM): the pingpong kernel over a
    /// device array of problems.
    PtrArrayTmaWarpSpecializedPingpong,
    /// `KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise` (SM90 grouped FP8 GEMM with
    /// blockwise f32 scales of A and B, a scale pointer per group).
    PtrArrayTmaWarpSpecializedCooperativeFp8Blockwise,
    /// `KernelPtrArrayTmaWarpSpecializedPingpongFP8Blockwise`.
    PtrArrayTmaWarpSpecializedPingpongFp8Blockwise,
    /// This crate's own: CUTLASS's grouped FP8 blockwise cooperative kernel with the per-k-tile
    /// scaling overlapped with the tensor cores, as in
    /// [`KernelSchedule::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap`] (the same main loop
    /// wrapper; bit-identical results).
    PtrArrayTmaWarpSpecializedCooperativeFp8BlockwiseOverlap,
    /// The pingpong twin of
    /// [`KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8BlockwiseOverlap`].
    PtrArrayTmaWarpSpecializedPingpongFp8BlockwiseOverlap,
    /// `KernelSparseTmaWarpSpecialized1SmSm100` (structured-sparse A).
    Sm100SparseOneSm,
    /// `KernelSparseTmaWarpSpecialized2SmSm100`.
    Sm100SparseTwoSm,
    /// `KernelSparseTmaWarpSpecialized1SmMxf8f6f4Sm100` (sparse, block-scaled).
    Sm100SparseMxf8f6f4OneSm,
    /// `KernelSparseTmaWarpSpecialized2SmMxf8f6f4Sm100`.
    Sm100SparseMxf8f6f4TwoSm,
    /// `KernelSparseTmaWarpSpecialized1SmNvf4Sm100` (sparse, block-scaled FP4).
    Sm100SparseNvf4OneSm,
    /// `KernelSparseTmaWarpSpecialized2SmNvf4Sm100`.
    Sm100SparseNvf4TwoSm,
    /// `collective::KernelScheduleAuto` on SM100: the builder takes a 2SM MMA where the cluster's
    /// m is even and the tile's m a multiple of 128, a 1SM MMA otherwise
    /// ([`KernelSpec::mma_sms`]); paired with `EpilogueScheduleAuto`.
    Sm100Auto,
    /// `KernelTmaWarpSpecialized1SmBlockScaledSm100`: the auto block-scaled policy (the builder
    /// picks the instruction kind from the types), standing in for a row's block-scaled policy.
    Sm100BlockScaledOneSm,
    /// `KernelTmaWarpSpecialized2SmBlockScaledSm100`.
    Sm100BlockScaledTwoSm,
    /// `KernelSparseTmaWarpSpecialized1SmMxf4Sm100` (sparse, block-scaled FP4 with one ue8m0 per
    /// 32 elements): what CUTLASS 4.2 builds for sparse mx_float4, where the seed's Table 10
    /// names the Nvf4 policy, which needs 16-element scale vectors.
    Sm100SparseMxf4OneSm,
    /// `KernelSparseTmaWarpSpecialized2SmMxf4Sm100`.
    Sm100SparseMxf4TwoSm,
    /// `KernelSparseTmaWarpSpecialized1SmBlockScaledSm100`: the auto sparse block-scaled policy
    /// (the builder picks the instruction from the types).
    Sm100SparseBlockScaledOneSm,
    /// `KernelSparseTmaWarpSpecialized2SmBlockScaledSm100`.
    Sm100SparseBlockScaledTwoSm,
    /// `KernelPtrArrayTmaWarpSpecialized1SmSm100` (SM100 grouped GEMM, 1SM MMA): the pointer-array
    /// kernel over a device array of problems, as on SM90.
    PtrArraySm100OneSm,
    /// `KernelPtrArrayTmaWarpSpecialized2SmSm100` (SM100 grouped GEMM, 2SM MMA).
    PtrArraySm100TwoSm,
    /// `KernelPtrArrayTmaWarpSpecialized1SmMxf8f6f4Sm100` (SM100 grouped block-scaled GEMM:
    /// MX operands, one scale-factor pointer and layout per group).
    PtrArraySm100Mxf8f6f4OneSm,
    /// `KernelPtrArrayTmaWarpSpecialized2SmMxf8f6f4Sm100`.
    PtrArraySm100Mxf8f6f4TwoSm,
    /// `KernelPtrArrayTmaWarpSpecialized1SmNvf4Sm100` (SM100 grouped NVFP4 GEMM).
    PtrArraySm100Nvf4OneSm,
    /// `KernelPtrArrayTmaWarpSpecialized2SmNvf4Sm100`.
    PtrArraySm100Nvf4TwoSm,
    /// `KernelTmaWarpSpecialized1SmMixedInputSm100` (SM100 mixed-input: a 4-bit weight converted
    /// to the 16-bit type in shared memory by transform warps, then `tcgen05.mma kind::f16`).
    Sm100MixedInputOneSm,
    /// `KernelTmaWarpSpecialized2SmMixedInputSm100`.
    Sm100MixedInputTwoSm,
}

impl KernelSchedule {
    /// Every schedule.
    pub const ALL: &'static [KernelSchedule] = &[
        KernelSchedule::TmaWarpSpecializedCooperative,
        KernelSchedule::TmaWarpSpecializedPingpong,
        KernelSchedule::TmaWarpSpecialized,
        KernelSchedule::TmaWarpSpecializedCooperativeFp8FastAccum,
        KernelSchedule::TmaWarpSpecializedPingpongFp8FastAccum,
        KernelSchedule::TmaWarpSpecializedCooperativeFp8Blockwise,
        KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap,
        KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap,
        KernelSchedule::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap,
        KernelSchedule::Sm100OneSm,
        KernelSchedule::Sm100TwoSm,
        KernelSchedule::Sm100Mxf8f6f4OneSm,
        KernelSchedule::Sm100Mxf8f6f4TwoSm,
        KernelSchedule::Sm100Mxf4OneSm,
        KernelSchedule::Sm100Mxf4TwoSm,
        KernelSchedule::Sm100Nvf4OneSm,
        KernelSchedule::Sm100Nvf4TwoSm,
        KernelSchedule::Sm120Mxf8f6f4Cooperative,
        KernelSchedule::Sm120Mxf8f6f4Pingpong,
        KernelSchedule::PtrArrayTmaWarpSpecializedCooperative,
        KernelSchedule::PtrArrayTmaWarpSpecializedPingpong,
        KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8Blockwise,
        KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8Blockwise,
        KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8BlockwiseOverlap,
        KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8BlockwiseOverlap,
        KernelSchedule::Sm100SparseOneSm,
        KernelSchedule::Sm100SparseTwoSm,
        KernelSchedule::Sm100SparseMxf8f6f4OneSm,
        KernelSchedule::Sm100SparseMxf8f6f4TwoSm,
        KernelSchedule::Sm100SparseNvf4OneSm,
        KernelSchedule::Sm100SparseNvf4TwoSm,
        KernelSchedule::Sm100Auto,
        KernelSchedule::Sm100BlockScaledOneSm,
        KernelSchedule::Sm100BlockScaledTwoSm,
        KernelSchedule::Sm100SparseMxf4OneSm,
        KernelSchedule::Sm100SparseMxf4TwoSm,
        KernelSchedule::Sm100SparseBlockScaledOneSm,
        KernelSchedule::Sm100SparseBlockScaledTwoSm,
        KernelSchedule::PtrArraySm100OneSm,
        KernelSchedule::PtrArraySm100TwoSm,
        KernelSchedule::PtrArraySm100Mxf8f6f4OneSm,
        KernelSchedule::PtrArraySm100Mxf8f6f4TwoSm,
        KernelSchedule::PtrArraySm100Nvf4OneSm,
        KernelSchedule::PtrArraySm100Nvf4TwoSm,
        KernelSchedule::Sm100MixedInputOneSm,
        KernelSchedule::Sm100MixedInputTwoSm,
    ];

    /// The suffix in procedural names (`KernelScheduleSuffixes` in `cutlass_library`).
    pub const fn suffix(self) -> &'static str {
        match self {
            KernelSchedule::TmaWarpSpecializedCooperative => "_warpspecialized_cooperative",
            KernelSchedule::TmaWarpSpecializedPingpong => "_warpspecialized_pingpong",
            KernelSchedule::TmaWarpSpecialized => "_warpspecialized",
            KernelSchedule::TmaWarpSpecializedCooperativeFp8FastAccum => {
                "_warpspecialized_cooperative_fp8_fastaccum"
            }
            KernelSchedule::TmaWarpSpecializedPingpongFp8FastAccum => {
                "_warpspecialized_pingpong_fp8_fastaccum"
            }
            KernelSchedule::TmaWarpSpecializedCooperativeFp8Blockwise => {
                "_warpspecialized_cooperative"
            }
            // Ours: cutlass_library's cooperative suffix plus a word of its own.
            KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap
            | KernelSchedule::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap
            | KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8BlockwiseOverlap => {
                "_warpspecialized_cooperative_fp8_overlap"
            }
            KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap
            | KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8BlockwiseOverlap => {
                "_warpspecialized_pingpong_fp8_overlap"
            }
            KernelSchedule::Sm100OneSm => "_1sm",
            KernelSchedule::Sm100TwoSm => "_2sm",
            KernelSchedule::Sm100Mxf8f6f4OneSm => "_q_1sm",
            KernelSchedule::Sm100Mxf8f6f4TwoSm => "_q_2sm",
            KernelSchedule::Sm100Mxf4OneSm => "_o_vs32_1sm",
            KernelSchedule::Sm100Mxf4TwoSm => "_o_vs32_2sm",
            KernelSchedule::Sm100Nvf4OneSm => "_o_vs16_1sm",
            KernelSchedule::Sm100Nvf4TwoSm => "_o_vs16_2sm",
            KernelSchedule::Sm120Mxf8f6f4Cooperative => "_cooperative_q",
            KernelSchedule::Sm120Mxf8f6f4Pingpong => "_pingpong_q",
            KernelSchedule::PtrArrayTmaWarpSpecializedCooperative
            | KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8Blockwise => {
                "_warpspecialized_cooperative"
            }
            KernelSchedule::PtrArrayTmaWarpSpecializedPingpong
            | KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8Blockwise => {
                "_warpspecialized_pingpong"
            }
            KernelSchedule::Sm100SparseOneSm => "_1sm",
            KernelSchedule::Sm100SparseTwoSm => "_2sm",
            // cutlass_library 4.2 has no sparse block-scaled schedules; these follow its dense
            // block-scaled suffixes.
            KernelSchedule::Sm100SparseMxf8f6f4OneSm => "_q_1sm",
            KernelSchedule::Sm100SparseMxf8f6f4TwoSm => "_q_2sm",
            KernelSchedule::Sm100SparseNvf4OneSm => "_o_vs16_1sm",
            KernelSchedule::Sm100SparseNvf4TwoSm => "_o_vs16_2sm",
            KernelSchedule::Sm100Auto => "",
            KernelSchedule::Sm100BlockScaledOneSm => "_1sm",
            KernelSchedule::Sm100BlockScaledTwoSm => "_2sm",
            KernelSchedule::Sm100SparseMxf4OneSm => "_o_vs32_1sm",
            KernelSchedule::Sm100SparseMxf4TwoSm => "_o_vs32_2sm",
            KernelSchedule::Sm100SparseBlockScaledOneSm => "_1sm",
            KernelSchedule::Sm100SparseBlockScaledTwoSm => "_2sm",
            KernelSchedule::PtrArraySm100OneSm => "_1sm",
            KernelSchedule::PtrArraySm100TwoSm => "_2sm",
            // cutlass_library's (not the dense twins' `_q_`).
            KernelSchedule::PtrArraySm100Mxf8f6f4OneSm => "_o_vs32_1sm",
            KernelSchedule::PtrArraySm100Mxf8f6f4TwoSm => "_o_vs32_2sm",
            KernelSchedule::PtrArraySm100Nvf4OneSm => "_o_vs16_1sm",
            KernelSchedule::PtrArraySm100Nvf4TwoSm => "_o_vs16_2sm",
            KernelSchedule::Sm100MixedInputOneSm => "_1sm",
            KernelSchedule::Sm100MixedInputTwoSm => "_2sm",
        }
    }

    /// The policy's name, as in CUTLASS (without `cutlass::gemm::`).
    pub const fn policy(self) -> &'static str {
        match self {
            KernelSchedule::TmaWarpSpecializedCooperative => "KernelTmaWarpSpecializedCooperative",
            KernelSchedule::TmaWarpSpecializedPingpong => "KernelTmaWarpSpecializedPingpong",
            KernelSchedule::TmaWarpSpecialized => "KernelTmaWarpSpecialized",
            KernelSchedule::TmaWarpSpecializedCooperativeFp8FastAccum => {
                "KernelTmaWarpSpecializedCooperativeFP8FastAccum"
            }
            KernelSchedule::TmaWarpSpecializedPingpongFp8FastAccum => {
                "KernelTmaWarpSpecializedPingpongFP8FastAccum"
            }
            KernelSchedule::TmaWarpSpecializedCooperativeFp8Blockwise => {
                "KernelTmaWarpSpecializedCooperativeFP8Blockwise"
            }
            KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap => {
                "KernelTmaWarpSpecializedCooperativeFP8Overlap"
            }
            KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap => {
                "KernelTmaWarpSpecializedPingpongFP8Overlap"
            }
            KernelSchedule::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap => {
                "KernelTmaWarpSpecializedCooperativeFP8BlockwiseOverlap"
            }
            KernelSchedule::Sm100OneSm => "KernelTmaWarpSpecialized1SmSm100",
            KernelSchedule::Sm100TwoSm => "KernelTmaWarpSpecialized2SmSm100",
            KernelSchedule::Sm100Mxf8f6f4OneSm => "KernelTmaWarpSpecialized1SmMxf8f6f4Sm100",
            KernelSchedule::Sm100Mxf8f6f4TwoSm => "KernelTmaWarpSpecialized2SmMxf8f6f4Sm100",
            KernelSchedule::Sm100Mxf4OneSm => "KernelTmaWarpSpecialized1SmMxf4Sm100",
            KernelSchedule::Sm100Mxf4TwoSm => "KernelTmaWarpSpecialized2SmMxf4Sm100",
            KernelSchedule::Sm100Nvf4OneSm => "KernelTmaWarpSpecialized1SmNvf4Sm100",
            KernelSchedule::Sm100Nvf4TwoSm => "KernelTmaWarpSpecialized2SmNvf4Sm100",
            KernelSchedule::Sm120Mxf8f6f4Cooperative => "KernelTmaWarpSpecializedMxf8f6f4Sm120",
            KernelSchedule::Sm120Mxf8f6f4Pingpong => {
                "KernelTmaWarpSpecializedPingpongMxf8f6f4Sm120"
            }
            KernelSchedule::PtrArrayTmaWarpSpecializedCooperative => {
                "KernelPtrArrayTmaWarpSpecializedCooperative"
            }
            KernelSchedule::PtrArrayTmaWarpSpecializedPingpong => {
                "KernelPtrArrayTmaWarpSpecializedPingpong"
            }
            KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8Blockwise => {
                "KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise"
            }
            KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8Blockwise => {
                "KernelPtrArrayTmaWarpSpecializedPingpongFP8Blockwise"
            }
            KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8BlockwiseOverlap => {
                "KernelPtrArrayTmaWarpSpecializedCooperativeFP8BlockwiseOverlap"
            }
            KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8BlockwiseOverlap => {
                "KernelPtrArrayTmaWarpSpecializedPingpongFP8BlockwiseOverlap"
            }
            KernelSchedule::Sm100SparseOneSm => "KernelSparseTmaWarpSpecialized1SmSm100",
            KernelSchedule::Sm100SparseTwoSm => "KernelSparseTmaWarpSpecialized2SmSm100",
            KernelSchedule::Sm100SparseMxf8f6f4OneSm => {
                "KernelSparseTmaWarpSpecialized1SmMxf8f6f4Sm100"
            }
            KernelSchedule::Sm100SparseMxf8f6f4TwoSm => {
                "KernelSparseTmaWarpSpecialized2SmMxf8f6f4Sm100"
            }
            KernelSchedule::Sm100SparseNvf4OneSm => "KernelSparseTmaWarpSpecialized1SmNvf4Sm100",
            KernelSchedule::Sm100SparseNvf4TwoSm => "KernelSparseTmaWarpSpecialized2SmNvf4Sm100",
            KernelSchedule::Sm100Auto => "collective::KernelScheduleAuto",
            KernelSchedule::Sm100BlockScaledOneSm => "KernelTmaWarpSpecialized1SmBlockScaledSm100",
            KernelSchedule::Sm100BlockScaledTwoSm => "KernelTmaWarpSpecialized2SmBlockScaledSm100",
            KernelSchedule::Sm100SparseMxf4OneSm => "KernelSparseTmaWarpSpecialized1SmMxf4Sm100",
            KernelSchedule::Sm100SparseMxf4TwoSm => "KernelSparseTmaWarpSpecialized2SmMxf4Sm100",
            KernelSchedule::Sm100SparseBlockScaledOneSm => {
                "KernelSparseTmaWarpSpecialized1SmBlockScaledSm100"
            }
            KernelSchedule::Sm100SparseBlockScaledTwoSm => {
                "KernelSparseTmaWarpSpecialized2SmBlockScaledSm100"
            }
            KernelSchedule::PtrArraySm100OneSm => "KernelPtrArrayTmaWarpSpecialized1SmSm100",
            KernelSchedule::PtrArraySm100TwoSm => "KernelPtrArrayTmaWarpSpecialized2SmSm100",
            KernelSchedule::PtrArraySm100Mxf8f6f4OneSm => {
                "KernelPtrArrayTmaWarpSpecialized1SmMxf8f6f4Sm100"
            }
            KernelSchedule::PtrArraySm100Mxf8f6f4TwoSm => {
                "KernelPtrArrayTmaWarpSpecialized2SmMxf8f6f4Sm100"
            }
            KernelSchedule::PtrArraySm100Nvf4OneSm => {
                "KernelPtrArrayTmaWarpSpecialized1SmNvf4Sm100"
            }
            KernelSchedule::PtrArraySm100Nvf4TwoSm => {
                "KernelPtrArrayTmaWarpSpecialized2SmNvf4Sm100"
            }
            KernelSchedule::Sm100MixedInputOneSm => "KernelTmaWarpSpecialized1SmMixedInputSm100",
            KernelSchedule::Sm100MixedInputTwoSm => "KernelTmaWarpSpecialized2SmMixedInputSm100",
        }
    }

    /// Whether this schedule serves a tile-table row that names `policy`: its own policy, or, for
    /// the schedules the tables do not name, the policy they stand in for: the auto block-scaled
    /// ones any block-scaled policy of their SM count (dense or sparse as they are), the sparse
    /// Mxf4 one the Nvf4 sparse policy that Table 10 names for sparse mx_float4 (`catalog::sm1xx`;
    /// with 32-element scale vectors, which `validate` checks).
    pub fn stands_in_for(self, policy: &str) -> bool {
        if policy == self.policy() {
            return true;
        }
        // A grouped kernel serves the rows its dense twin serves.
        if let Some(dense) = self.dense_twin() {
            return dense.stands_in_for(policy);
        }
        let Some(named) = KernelSchedule::from_policy(policy) else {
            return false;
        };
        let same_kind = named.sms() == self.sms() && named.is_sparse() == self.is_sparse();
        match self {
            // Any dense SM100 policy: the builder picks the MMA (`KernelSpec::mma_sms`).
            KernelSchedule::Sm100Auto => matches!(
                named,
                KernelSchedule::Sm100OneSm
                    | KernelSchedule::Sm100TwoSm
                    | KernelSchedule::Sm100Mxf8f6f4OneSm
                    | KernelSchedule::Sm100Mxf8f6f4TwoSm
                    | KernelSchedule::Sm100Mxf4OneSm
                    | KernelSchedule::Sm100Mxf4TwoSm
                    | KernelSchedule::Sm100Nvf4OneSm
                    | KernelSchedule::Sm100Nvf4TwoSm
            ),
            KernelSchedule::Sm100BlockScaledOneSm
            | KernelSchedule::Sm100BlockScaledTwoSm
            | KernelSchedule::Sm100SparseBlockScaledOneSm
            | KernelSchedule::Sm100SparseBlockScaledTwoSm => same_kind && named.is_block_scaled(),
            KernelSchedule::Sm100SparseMxf4OneSm | KernelSchedule::Sm100SparseMxf4TwoSm => {
                same_kind
                    && matches!(
                        named,
                        KernelSchedule::Sm100SparseNvf4OneSm | KernelSchedule::Sm100SparseNvf4TwoSm
                    )
            }
            _ => false,
        }
    }

    /// The dense (one-problem) schedule a grouped SM100 schedule mirrors, or an SM90 pointer-array
    /// one (which SM120's builder also takes); `None` for the others.
    pub const fn dense_twin(self) -> Option<KernelSchedule> {
        Some(match self {
            KernelSchedule::PtrArraySm100OneSm => KernelSchedule::Sm100OneSm,
            KernelSchedule::PtrArraySm100TwoSm => KernelSchedule::Sm100TwoSm,
            KernelSchedule::PtrArraySm100Mxf8f6f4OneSm => KernelSchedule::Sm100Mxf8f6f4OneSm,
            KernelSchedule::PtrArraySm100Mxf8f6f4TwoSm => KernelSchedule::Sm100Mxf8f6f4TwoSm,
            KernelSchedule::PtrArraySm100Nvf4OneSm => KernelSchedule::Sm100Nvf4OneSm,
            KernelSchedule::PtrArraySm100Nvf4TwoSm => KernelSchedule::Sm100Nvf4TwoSm,
            KernelSchedule::PtrArrayTmaWarpSpecializedCooperative => {
                KernelSchedule::TmaWarpSpecializedCooperative
            }
            KernelSchedule::PtrArrayTmaWarpSpecializedPingpong => {
                KernelSchedule::TmaWarpSpecializedPingpong
            }
            _ => return None,
        })
    }

    /// The grouped twin of a dense schedule ([`KernelSchedule::dense_twin`]'s inverse).
    pub fn grouped_twin(self) -> Option<KernelSchedule> {
        KernelSchedule::ALL
            .iter()
            .copied()
            .find(|g| g.dense_twin() == Some(self))
    }

    /// Whether the schedule is one of SM100's block-scaled ones (dense or sparse).
    pub const fn is_block_scaled(self) -> bool {
        let sparse_block_scaled = self.is_sparse()
            && !matches!(
                self,
                KernelSchedule::Sm100SparseOneSm | KernelSchedule::Sm100SparseTwoSm
            );
        sparse_block_scaled
            || matches!(
                self,
                KernelSchedule::Sm100Mxf8f6f4OneSm
                    | KernelSchedule::Sm100Mxf8f6f4TwoSm
                    | KernelSchedule::Sm100Mxf4OneSm
                    | KernelSchedule::Sm100Mxf4TwoSm
                    | KernelSchedule::Sm100Nvf4OneSm
                    | KernelSchedule::Sm100Nvf4TwoSm
                    | KernelSchedule::Sm100BlockScaledOneSm
                    | KernelSchedule::Sm100BlockScaledTwoSm
                    | KernelSchedule::PtrArraySm100Mxf8f6f4OneSm
                    | KernelSchedule::PtrArraySm100Mxf8f6f4TwoSm
                    | KernelSchedule::PtrArraySm100Nvf4OneSm
                    | KernelSchedule::PtrArraySm100Nvf4TwoSm
            )
    }

    /// The schedule a CUTLASS dispatch-policy name denotes.
    pub fn from_policy(name: &str) -> Option<KernelSchedule> {
        KernelSchedule::ALL
            .iter()
            .copied()
            .find(|k| k.policy() == name)
    }

    /// The C++ policy type given to CUTLASS's collective builder.
    pub fn cpp_type(self) -> String {
        match self {
            // The builder makes CUTLASS's FP8 mainloop, which mainloop_wrapper wraps.
            KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap => {
                KernelSchedule::TmaWarpSpecializedCooperative.cpp_type()
            }
            KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap => {
                KernelSchedule::TmaWarpSpecializedPingpong.cpp_type()
            }
            KernelSchedule::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap => {
                KernelSchedule::TmaWarpSpecializedCooperativeFp8Blockwise.cpp_type()
            }
            KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8BlockwiseOverlap => {
                KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8Blockwise.cpp_type()
            }
            KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8BlockwiseOverlap => {
                KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8Blockwise.cpp_type()
            }
            _ => format!("cutlass::gemm::{}", self.policy()),
        }
    }

    /// This crate's class template that wraps the builder's collective mainloop, with the header
    /// that defines it (`cutlass-gemm-sys/csrc`), for the schedules that are this crate's own.
    pub const fn mainloop_wrapper(self) -> Option<(&'static str, &'static str)> {
        match self {
            KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap
            | KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap => Some((
                "cutlass_rs::Sm90Fp8OverlappedPromotion",
                "cutlass_rs_sm90_fp8.hpp",
            )),
            KernelSchedule::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap
            | KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8BlockwiseOverlap
            | KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8BlockwiseOverlap => Some((
                "cutlass_rs::Sm90Fp8BlockwiseOverlappedPromotion",
                "cutlass_rs_sm90_fp8_blockwise.hpp",
            )),
            _ => None,
        }
    }

    /// SMs per MMA (2 for the 2SM schedules).
    pub const fn sms(self) -> u8 {
        match self {
            KernelSchedule::Sm100TwoSm
            | KernelSchedule::Sm100Mxf8f6f4TwoSm
            | KernelSchedule::Sm100Mxf4TwoSm
            | KernelSchedule::Sm100Nvf4TwoSm
            | KernelSchedule::Sm100SparseTwoSm
            | KernelSchedule::Sm100SparseMxf8f6f4TwoSm
            | KernelSchedule::Sm100SparseNvf4TwoSm
            | KernelSchedule::Sm100SparseMxf4TwoSm
            | KernelSchedule::Sm100SparseBlockScaledTwoSm
            | KernelSchedule::Sm100BlockScaledTwoSm
            | KernelSchedule::PtrArraySm100TwoSm
            | KernelSchedule::PtrArraySm100Mxf8f6f4TwoSm
            | KernelSchedule::PtrArraySm100Nvf4TwoSm
            | KernelSchedule::Sm100MixedInputTwoSm => 2,
            _ => 1,
        }
    }

    /// Whether the schedule is for a structured-sparse A.
    pub const fn is_sparse(self) -> bool {
        matches!(
            self,
            KernelSchedule::Sm100SparseOneSm
                | KernelSchedule::Sm100SparseTwoSm
                | KernelSchedule::Sm100SparseMxf8f6f4OneSm
                | KernelSchedule::Sm100SparseMxf8f6f4TwoSm
                | KernelSchedule::Sm100SparseNvf4OneSm
                | KernelSchedule::Sm100SparseNvf4TwoSm
                | KernelSchedule::Sm100SparseMxf4OneSm
                | KernelSchedule::Sm100SparseMxf4TwoSm
                | KernelSchedule::Sm100SparseBlockScaledOneSm
                | KernelSchedule::Sm100SparseBlockScaledTwoSm
        )
    }

    /// Whether the schedule is a grouped ("pointer-array") one: the kernel runs many problems of
    /// their own shapes and operands, read from device arrays, in one launch.
    pub const fn is_grouped(self) -> bool {
        matches!(
            self,
            KernelSchedule::PtrArrayTmaWarpSpecializedCooperative
                | KernelSchedule::PtrArrayTmaWarpSpecializedPingpong
                | KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8Blockwise
                | KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8Blockwise
                | KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8BlockwiseOverlap
                | KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8BlockwiseOverlap
                | KernelSchedule::PtrArraySm100OneSm
                | KernelSchedule::PtrArraySm100TwoSm
                | KernelSchedule::PtrArraySm100Mxf8f6f4OneSm
                | KernelSchedule::PtrArraySm100Mxf8f6f4TwoSm
                | KernelSchedule::PtrArraySm100Nvf4OneSm
                | KernelSchedule::PtrArraySm100Nvf4TwoSm
        )
    }

    /// Whether the schedule is a pingpong one (two consumer warp groups on two tiles, taking turns
    /// at the tensor cores).
    pub const fn is_pingpong(self) -> bool {
        matches!(
            self,
            KernelSchedule::TmaWarpSpecializedPingpong
                | KernelSchedule::TmaWarpSpecializedPingpongFp8FastAccum
                | KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap
                | KernelSchedule::PtrArrayTmaWarpSpecializedPingpong
                | KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8Blockwise
                | KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8BlockwiseOverlap
        )
    }

    /// Whether the schedule scales A and B blockwise (f32 scales applied per k-block in the main
    /// loop).
    pub const fn is_blockwise(self) -> bool {
        matches!(
            self,
            KernelSchedule::TmaWarpSpecializedCooperativeFp8Blockwise
                | KernelSchedule::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap
                | KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8Blockwise
                | KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8Blockwise
                | KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8BlockwiseOverlap
                | KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8BlockwiseOverlap
        )
    }

    /// Short name for listings.
    pub const fn short_name(self) -> &'static str {
        self.policy()
    }
}

/// How a mixed-input (weight-only) kernel turns its narrow operand into the MMA's type:
/// `cutlass_library`'s `MixedInputMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum MixedInputMode {
    /// Converted only (`_cvt`).
    ConvertOnly,
    /// Converted, then multiplied by a scale per group of k and row (`_scl`).
    ScaleOnly,
    /// Converted, multiplied by a scale, then a zero added, per group of k and row (`_sclzr`).
    ScaleWithZeroPoint,
}

impl MixedInputMode {
    /// The suffix of `cutlass_library`'s procedural names.
    pub const fn suffix(self) -> &'static str {
        match self {
            MixedInputMode::ConvertOnly => "_cvt",
            MixedInputMode::ScaleOnly => "_scl",
            MixedInputMode::ScaleWithZeroPoint => "_sclzr",
        }
    }

    /// Whether the kernel reads zeros beside the scales.
    pub const fn has_zeros(self) -> bool {
        matches!(self, MixedInputMode::ScaleWithZeroPoint)
    }
}

/// A mixed-input kernel's narrow operand (A, the quantized weight): how it is dequantized,
/// whether it is read in the packed ("shuffled") order of `cutlass-gemm-sys`'s
/// `cutlass_rs_weight_pack` (`_shfl` in `cutlass_library`'s names), and the group size of its
/// scales where the kernel fixes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MixedInput {
    /// The dequantization.
    pub mode: MixedInputMode,
    /// Read in the packed order.
    pub shuffled: bool,
    /// The scales' group size along k where the kernel fixes it at compile time (SM100: CUTLASS's
    /// `Sm100MixedInputBlockwiseScaleConfig<1, group>`), 0 where it takes it at run time (SM90).
    pub group: u32,
}

impl MixedInput {
    /// The suffix of `cutlass_library`'s procedural names: the mode's, then `_shfl`; then, for a
    /// fixed group size (which `cutlass_library` has no SM100 mixed-input kernels to name), this
    /// crate's `_g{group}`.
    pub fn suffix(self) -> String {
        format!(
            "{}{}{}",
            self.mode.suffix(),
            if self.shuffled { "_shfl" } else { "" },
            if self.group > 0 {
                format!("_g{}", self.group)
            } else {
                String::new()
            }
        )
    }
}

/// What the epilogue computes from the accumulator (the fusion; [`EpilogueSchedule`] says how it
/// runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fusion {
    /// `D = alpha·acc + beta·C`: CUTLASS's `LinearCombination`, the fusion `cutlass_library`'s
    /// kernels (and names) have.
    LinearCombination,
    /// `D = act(alpha · s_row[m] · s_col[n] · acc + beta·C + bias_row[m] + bias_col[n])`, this
    /// crate's epilogue visitor tree (`cutlass-gemm-sys/csrc/cutlass_rs_epilogue.hpp`): f32 scales
    /// per row and per column (FP8's "rowwise" recipe), a bias per row or per column (a Linear
    /// layer's), then ReLU, GELU (tanh or erf), SiLU or nothing. Every vector is optional and the
    /// activation is chosen at run time, so one kernel serves every combination (a missing scale
    /// is 1, a missing bias 0, and a missing C is not read). The vectors are shared by the batch.
    /// Not in `cutlass_library`: names add `_evt_scale_bias{bias type}_act`.
    ScaleBiasActivation {
        /// The element type of the bias vectors (the output type or f32).
        bias: DataType,
    },
    /// A gated linear unit (SwiGLU, GeGLU, ReGLU) for an MLP's first projection, this crate's
    /// epilogue (`cutlass-gemm-sys/csrc/cutlass_rs_gated_epilogue.hpp`). B holds the gate and up
    /// projections interleaved in blocks of 8 columns (columns `16j..16j+7` the gate's
    /// `8j..8j+7`, the next 8 the up projection's); with `h = alpha · s_row[m] · s_col[n] · acc +
    /// bias[n]` over the GEMM's `n` columns, `D[m][8j + i] = act(h[m][16j + i]) · h[m][16j + 8 +
    /// i]`: D has `n / 2` columns. The vectors are optional and the activation is chosen at run
    /// time, as in [`Fusion::ScaleBiasActivation`]; C is not read. Stored from registers, so it
    /// runs with [`EpilogueSchedule::NoSmemWarpSpecialized`]. Not in `cutlass_library`: names add
    /// `_glu_scale_bias{bias type}_act`.
    Gated {
        /// The element type of the bias vector (the output type or f32).
        bias: DataType,
    },
    /// A Linear layer's bias and activation that also writes the pre-activation value (cuBLASLt's
    /// `GELU_AUX_BIAS`, for a backward pass): with `Z = alpha·acc + beta·C + bias[n]` in f32,
    /// `D = act(Z)` and `Aux = Z`, Aux of D's type, layout and leading dimension. CUTLASS's
    /// `LinCombPerColBiasEltActAux` visitor tree on SM90's TMA epilogues, with this crate's
    /// activations chosen at run time (`cutlass-gemm-sys/csrc/cutlass_rs_aux_epilogue.hpp`). No
    /// row or column scales and no per-row bias. Not in `cutlass_library`'s names: names add
    /// `_evt_bias{bias type}_act_aux`.
    BiasActivationAux {
        /// The element type of the bias vector (the output type or f32).
        bias: DataType,
    },
}

impl Fusion {
    /// The suffix in procedural names (none for CUTLASS's `LinearCombination`).
    pub fn suffix(self) -> String {
        match self {
            Fusion::LinearCombination => String::new(),
            Fusion::ScaleBiasActivation { bias } => {
                format!("_evt_scale_bias{}_act", bias.short_name())
            }
            Fusion::Gated { bias } => format!("_glu_scale_bias{}_act", bias.short_name()),
            Fusion::BiasActivationAux { bias } => {
                format!("_evt_bias{}_act_aux", bias.short_name())
            }
        }
    }

    /// Whether the epilogue also writes the pre-activation value ([`Fusion::BiasActivationAux`]).
    pub fn has_aux(self) -> bool {
        matches!(self, Fusion::BiasActivationAux { .. })
    }

    /// Whether the epilogue is gated ([`Fusion::Gated`]): D has half the GEMM's columns.
    pub fn is_gated(self) -> bool {
        matches!(self, Fusion::Gated { .. })
    }

    /// The element type of the epilogue's bias vector, if it takes one.
    pub fn bias_type(self) -> Option<DataType> {
        match self {
            Fusion::LinearCombination => None,
            Fusion::ScaleBiasActivation { bias }
            | Fusion::Gated { bias }
            | Fusion::BiasActivationAux { bias } => Some(bias),
        }
    }

    /// Whether this is [`Fusion::ScaleBiasActivation`], the fused epilogue of plain GEMMs (per-row
    /// and per-column vectors and an activation over D as the GEMM computes it); the gated
    /// epilogue, which halves D, is [`Fusion::is_gated`].
    pub fn is_fused(self) -> bool {
        matches!(self, Fusion::ScaleBiasActivation { .. })
    }
}

/// The epilogue schedule (`EpilogueSchedule` in CUTLASS; Table 14 for SM100).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EpilogueSchedule {
    /// `TmaWarpSpecializedCooperative`: TMA-store epilogue for SM90 cooperative mainloops.
    TmaWarpSpecializedCooperative,
    /// `TmaWarpSpecialized`: TMA-store epilogue for SM90 pingpong mainloops.
    TmaWarpSpecialized,
    /// `TmaWarpSpecialized1Sm` (SM100, 1SM MMA).
    TmaWarpSpecialized1Sm,
    /// `TmaWarpSpecialized2Sm` (SM100, 2SM MMA).
    TmaWarpSpecialized2Sm,
    /// `collective::EpilogueScheduleAuto` (required on SM120).
    Auto,
    /// `NoSmemWarpSpecialized` (SM90): stores D straight from registers, no shared memory.
    NoSmemWarpSpecialized,
    /// `NoSmemWarpSpecialized1Sm` (SM100, 1SM MMA; Table 14): D from tensor memory straight to
    /// global memory, no shared memory.
    NoSmemWarpSpecialized1Sm,
    /// `NoSmemWarpSpecialized2Sm` (SM100, 2SM MMA; Table 14).
    NoSmemWarpSpecialized2Sm,
    /// `PtrArrayTmaWarpSpecializedCooperative` (SM90 grouped, cooperative mainloops).
    PtrArrayTmaWarpSpecializedCooperative,
    /// `PtrArrayTmaWarpSpecializedPingpong` (SM90 grouped, pingpong mainloops).
    PtrArrayTmaWarpSpecializedPingpong,
    /// `PtrArrayTmaWarpSpecialized1Sm` (SM100 grouped, 1SM MMA).
    PtrArrayTmaWarpSpecialized1Sm,
    /// `PtrArrayTmaWarpSpecialized2Sm` (SM100 grouped, 2SM MMA).
    PtrArrayTmaWarpSpecialized2Sm,
}

impl EpilogueSchedule {
    /// The suffix in procedural names (`EpilogueScheduleSuffixes` in `cutlass_library`).
    pub const fn suffix(self) -> &'static str {
        match self {
            EpilogueSchedule::TmaWarpSpecializedCooperative
            | EpilogueSchedule::TmaWarpSpecialized
            | EpilogueSchedule::TmaWarpSpecialized2Sm
            | EpilogueSchedule::PtrArrayTmaWarpSpecializedCooperative
            | EpilogueSchedule::PtrArrayTmaWarpSpecializedPingpong
            | EpilogueSchedule::PtrArrayTmaWarpSpecialized2Sm => "_epi_tma",
            EpilogueSchedule::TmaWarpSpecialized1Sm
            | EpilogueSchedule::PtrArrayTmaWarpSpecialized1Sm
            | EpilogueSchedule::Auto => "",
            EpilogueSchedule::NoSmemWarpSpecialized
            | EpilogueSchedule::NoSmemWarpSpecialized1Sm
            | EpilogueSchedule::NoSmemWarpSpecialized2Sm => "_epi_nosmem",
        }
    }

    /// The C++ policy type.
    pub const fn cpp_type(self) -> &'static str {
        match self {
            EpilogueSchedule::TmaWarpSpecializedCooperative => {
                "cutlass::epilogue::TmaWarpSpecializedCooperative"
            }
            EpilogueSchedule::TmaWarpSpecialized => "cutlass::epilogue::TmaWarpSpecialized",
            EpilogueSchedule::TmaWarpSpecialized1Sm => "cutlass::epilogue::TmaWarpSpecialized1Sm",
            EpilogueSchedule::TmaWarpSpecialized2Sm => "cutlass::epilogue::TmaWarpSpecialized2Sm",
            EpilogueSchedule::Auto => "cutlass::epilogue::collective::EpilogueScheduleAuto",
            EpilogueSchedule::NoSmemWarpSpecialized => "cutlass::epilogue::NoSmemWarpSpecialized",
            EpilogueSchedule::NoSmemWarpSpecialized1Sm => {
                "cutlass::epilogue::NoSmemWarpSpecialized1Sm"
            }
            EpilogueSchedule::NoSmemWarpSpecialized2Sm => {
                "cutlass::epilogue::NoSmemWarpSpecialized2Sm"
            }
            EpilogueSchedule::PtrArrayTmaWarpSpecializedCooperative => {
                "cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative"
            }
            EpilogueSchedule::PtrArrayTmaWarpSpecializedPingpong => {
                "cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong"
            }
            EpilogueSchedule::PtrArrayTmaWarpSpecialized1Sm => {
                "cutlass::epilogue::PtrArrayTmaWarpSpecialized1Sm"
            }
            EpilogueSchedule::PtrArrayTmaWarpSpecialized2Sm => {
                "cutlass::epilogue::PtrArrayTmaWarpSpecialized2Sm"
            }
        }
    }
}

/// The operation class (`OpcodeClass` in `cutlass_library`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpClass {
    /// `OpClassTensorOp`: dense, no block scaling.
    TensorOp,
    /// `OpClassBlockScaledTensorOp`: mx/nv block-scaled operands.
    BlockScaledTensorOp,
    /// `OpClassSparseTensorOp`: 2:4 structured-sparse A (compressed A plus metadata E).
    SparseTensorOp,
    /// `OpClassBlockScaledSparseTensorOp`: structured-sparse A with mx/nv block scaling.
    BlockScaledSparseTensorOp,
}

impl OpClass {
    /// Whether A is structured-sparse.
    pub const fn is_sparse(self) -> bool {
        matches!(
            self,
            OpClass::SparseTensorOp | OpClass::BlockScaledSparseTensorOp
        )
    }

    /// The name in procedural names.
    pub const fn name(self) -> &'static str {
        match self {
            OpClass::TensorOp => "tensorop",
            OpClass::BlockScaledTensorOp => "bstensorop",
            OpClass::SparseTensorOp => "sptensorop",
            // Not in cutlass_library 4.2 (it has no sparse block-scaled kernels): ours.
            OpClass::BlockScaledSparseTensorOp => "bssptensorop",
        }
    }

    /// The C++ tag.
    pub const fn cpp_type(self) -> &'static str {
        match self {
            OpClass::TensorOp => "cutlass::arch::OpClassTensorOp",
            OpClass::BlockScaledTensorOp => "cutlass::arch::OpClassBlockScaledTensorOp",
            OpClass::SparseTensorOp => "cutlass::arch::OpClassSparseTensorOp",
            OpClass::BlockScaledSparseTensorOp => "cutlass::arch::OpClassBlockScaledSparseTensorOp",
        }
    }
}

/// Block scaling of A and B: the scale-factor type and the elements of K per scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockScale {
    /// ue8m0 (mx) or ue4m3 (nv).
    pub sf: DataType,
    /// Elements of K per scale factor (32 or 16).
    pub vec: u32,
}

/// Blockwise scaling of A and B (SM90 FP8): f32 scales, one per `m x k` block of A and one per
/// `n x k` block of B (`Sm90BlockwiseScaleConfig<m, n, k, order, order>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Blockwise {
    /// Rows of A per scale (1: one scale per row, the activations of the 1x128 recipe).
    pub m: u32,
    /// Columns of B per scale (128 for 128x128 weight blocks).
    pub n: u32,
    /// Elements of K per scale (128).
    pub k: u32,
    /// The order of both operands' scales.
    pub order: ScaleOrder,
}

/// The order of blockwise scales in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScaleOrder {
    /// M- and N-major (the scales of one k-block contiguous): `Sm90BlockwiseScaleConfig`'s
    /// default and what `cutlass_library` emits; no name suffix.
    MnMajor,
    /// K-major (row-major `[row blocks, k blocks]`: the scales of one row contiguous, as a
    /// per-token quantizer writes them and DeepSeek-V3's checkpoints store the weights'). The
    /// grouped kernels take this order, since a group's rows start anywhere in A: each group's
    /// scales are then a contiguous run of the whole tensor's. Named with the suffix `_sfk`
    /// (`cutlass_library` 4.2 has no name for it).
    KMajor,
}

impl ScaleOrder {
    /// The name suffix ([`ScaleOrder::KMajor`]'s `_sfk`, nothing for CUTLASS's default).
    pub const fn suffix(self) -> &'static str {
        match self {
            ScaleOrder::MnMajor => "",
            ScaleOrder::KMajor => "_sfk",
        }
    }

    /// The `cute::GMMA::Major` of `Sm90BlockwiseScaleConfig`.
    pub const fn cpp_major(self) -> &'static str {
        match self {
            ScaleOrder::MnMajor => "cute::GMMA::Major::MN",
            ScaleOrder::KMajor => "cute::GMMA::Major::K",
        }
    }
}

/// Where a catalog entry comes from in CUTLASS's tables: its type row (Tables 1–3) and tile table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Origin {
    /// The type table (1–3).
    pub type_table: u8,
    /// The row in it.
    pub type_row: u8,
    /// The tile table (4–13, 16–20).
    pub tile_table: u8,
}

/// The tile scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TileScheduler {
    /// The persistent data-parallel scheduler (CUTLASS's default; no name suffix).
    Persistent,
    /// Stream-K (`cutlass::gemm::StreamKScheduler`): the K loop of the output tiles is divided
    /// evenly over the SMs, partial tiles are reduced in a workspace. Cooperative kernels only.
    StreamK,
}

impl TileScheduler {
    /// The suffix in procedural names (`TileSchedulerSuffixes` in `cutlass_library`).
    pub const fn suffix(self) -> &'static str {
        match self {
            TileScheduler::Persistent => "",
            TileScheduler::StreamK => "_stream_k",
        }
    }

    /// The C++ tag type.
    pub const fn cpp_type(self) -> &'static str {
        match self {
            TileScheduler::Persistent => "cutlass::gemm::PersistentScheduler",
            TileScheduler::StreamK => "cutlass::gemm::StreamKScheduler",
        }
    }
}

/// One GEMM kernel instantiation: everything that the generated code, the name and the runtime
/// checks depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelSpec {
    /// Target architecture.
    pub arch: Arch,
    /// Operation class.
    pub op_class: OpClass,
    /// Block scaling of A and B (block-scaled entries).
    pub block_scale: Option<BlockScale>,
    /// Blockwise f32 scaling of A and B (SM90 FP8 blockwise entries).
    pub blockwise: Option<Blockwise>,
    /// Block-scaled output: D quantized with its scale factors (SFD, row-major like D) by the
    /// `LinCombBlockScaleFactor` epilogue (SM100/SM120 block-scaled entries).
    pub output_scale: Option<BlockScale>,
    /// The table rows this entry comes from (SM100/SM120 entries).
    pub origin: Option<Origin>,
    /// A (m x k).
    pub a: Operand,
    /// B (k x n).
    pub b: Operand,
    /// C (m x n), the source of the epilogue.
    pub c: Operand,
    /// D (m x n), the output.
    pub d: Operand,
    /// Accumulator type.
    pub accumulator: DataType,
    /// Type of alpha, beta and the epilogue's arithmetic.
    pub compute: DataType,
    /// Tile (m, n, k) in elements: the CTA tile on SM90 and SM120, the MMA tile on SM100 (what the
    /// CUTLASS's tables and the collective builders take).
    pub tile: [u32; 3],
    /// Cluster shape (m, n, k) in CTAs.
    pub cluster: [u32; 3],
    /// Pipeline stages; 0 lets the collective builder choose (`StageCountAutoCarveout`).
    pub stages: u32,
    /// Mainloop schedule.
    pub kernel_schedule: KernelSchedule,
    /// Epilogue schedule.
    pub epilogue_schedule: EpilogueSchedule,
    /// What the epilogue computes.
    pub fusion: Fusion,
    /// Tile scheduler.
    pub tile_scheduler: TileScheduler,
    /// Mixed-input (weight-only) kernels: how A, the narrow operand, is dequantized.
    pub mixed_input: Option<MixedInput>,
}

/// The most f32 accumulator values a thread of the overlapped FP8 mainloops holds
/// (`cutlass-gemm-sys/csrc/cutlass_rs_sm90_fp8.hpp`: three of them, the f32 one and two k-tiles', fit
/// the consumer warp groups' 232 registers up to this; ptxas reports no spills at 72). Wider
/// tensor-wise cooperative tiles take the sliced mainloop.
pub const OVERLAP_MAX_ACCUMULATORS: u32 = 72;

impl KernelSpec {
    /// The procedural name, compatible with `cutlass_library`'s `GemmOperation.procedural_name()`
    /// for CUTLASS 3.x kernels:
    /// `cutlass3x_sm{arch}_{op}_{gemm|gemm_grouped|spgemm}_{a}_{b}_{acc}_{c}_{d}{mixed}_{tile}_{cluster}_{stages}_{layouts}_align{n}{scheduler}{schedule}{epilogue}`,
    /// `{mixed}` being [`MixedInput::suffix`] for mixed-input kernels, plus [`Fusion::suffix`] for
    /// this crate's fused epilogues.
    ///
    /// It names the generated file, the C symbols and what `CUTLASS_RS_KERNELS` matches.
    pub fn name(&self) -> String {
        let join = |v: &[u32; 3]| format!("{}x{}x{}", v[0], v[1], v[2]);
        format!(
            "cutlass3x_sm{arch}_{op}_{core}_{a}_{b}_{acc}_{c}_{d}{mixed}_{tile}_{cluster}_{stages}_{la}{lb}{lc}_align{align}{sched}{ks}{es}{fusion}{order}",
            arch = self.arch.number(),
            op = self.op_class.name(),
            core = if self.op_class.is_sparse() {
                "spgemm"
            } else if self.kernel_schedule.is_grouped() {
                "gemm_grouped"
            } else {
                "gemm"
            },
            a = self.operand_type_name(self.a.ty, false),
            b = self.operand_type_name(self.b.ty, true),
            acc = self.accumulator.short_name(),
            c = self.c.ty.short_name(),
            d = match self.output_scale {
                Some(o) => format!("{}x{}", o.sf.short_name(), self.d.ty.short_name()),
                None => self.d.ty.short_name().to_string(),
            },
            mixed = self.mixed_input.map(|x| x.suffix()).unwrap_or_default(),
            tile = join(&self.tile),
            cluster = join(&self.cluster),
            stages = self.stages,
            la = self.a.layout.letter(),
            lb = self.b.layout.letter(),
            lc = self.c.layout.letter(),
            align = self.a.align.max(self.b.align),
            sched = self.tile_scheduler.suffix(),
            ks = self.kernel_schedule.suffix(),
            es = match self.output_scale {
                // cutlass_library: `_epiVs{vector}{layout of SFD}`.
                Some(o) => format!(
                    "{}_epiVs{}{}",
                    self.epilogue_schedule.suffix(),
                    o.vec,
                    self.d.layout.letter()
                ),
                None => self.epilogue_schedule.suffix().to_string(),
            },
            fusion = self.fusion.suffix(),
            order = self.blockwise.map_or("", |b| b.order.suffix()),
        )
    }

    /// The rules of Tables 1–20 for an entry that names its table rows: the type row allows these
    /// types, this layout and these alignments; the tile table serves the type row, and one of its
    /// rows has this tile with a Y for this layout and this policy.
    fn check_against_seed(&self, name: &str, o: Origin) -> Result<(), String> {
        let row = crate::tables::type_row(o.type_table, o.type_row).ok_or_else(|| {
            format!(
                "{name}: no type row {}.{} in Tables 1-3",
                o.type_table, o.type_row
            )
        })?;
        if !row.type_pairs().contains(&(self.a.ty, self.b.ty)) {
            return Err(format!(
                "{name}: Table {} row {} ({} x {}) does not take {} x {}",
                o.type_table,
                o.type_row,
                row.a.seed_name(),
                row.b.seed_name(),
                self.a.ty,
                self.b.ty
            ));
        }
        if !row.layouts().contains(&(self.a.layout, self.b.layout)) {
            return Err(format!(
                "{name}: Table {} row {} allows TN only, not {}",
                o.type_table,
                o.type_row,
                self.layout_name()
            ));
        }
        if self.a.align != row.align_a.for_layout(self.a.layout) || self.b.align != row.align_b {
            return Err(format!(
                "{name}: Table {} row {} needs alignments {} / {} elements, not {} / {}",
                o.type_table,
                o.type_row,
                row.align_a.for_layout(self.a.layout),
                row.align_b,
                self.a.align,
                self.b.align
            ));
        }
        let table = crate::tile_tables::TILE_TABLES
            .iter()
            .find(|t| t.table == o.tile_table)
            .ok_or_else(|| format!("{name}: no tile table {}", o.tile_table))?;
        if table.arch != self.arch || !table.type_rows.contains(&(o.type_table, o.type_row)) {
            return Err(format!(
                "{name}: tile table {} does not serve Table {} row {} on {}",
                o.tile_table, o.type_table, o.type_row, self.arch
            ));
        }
        let policy = self.kernel_schedule.policy();
        if matches!(
            self.kernel_schedule,
            KernelSchedule::Sm100SparseMxf4OneSm | KernelSchedule::Sm100SparseMxf4TwoSm
        ) && self.block_scale.is_none_or(|b| b.vec != 32)
        {
            return Err(format!(
                "{name}: {policy} takes 32-element scale vectors only"
            ));
        }
        let tile_rows: Vec<&crate::tables::TileRow> = table
            .rows
            .iter()
            .filter(|r| r.sparse == row.sparse && r.m == self.tile[0] && r.n == self.tile[1])
            .collect();
        if tile_rows.is_empty() {
            return Err(format!(
                "{name}: tile table {} has no {}x{} tile",
                o.tile_table, self.tile[0], self.tile[1]
            ));
        }
        if !tile_rows.iter().any(|r| {
            r.allows(self.a.layout, self.b.layout)
                && r.policies
                    .iter()
                    .any(|p| self.kernel_schedule.stands_in_for(p))
        }) {
            return Err(format!(
                "{name}: tile table {} marks {}x{} with {policy} N for {}",
                o.tile_table,
                self.tile[0],
                self.tile[1],
                self.layout_name()
            ));
        }
        Ok(())
    }

    /// The A (`is_b == false`) or B operand's type as procedural names write it: `e4m3`,
    /// `ue8m0xe2m1` (block-scaled: scale type x element type) or `1x128f32xe4m3` (blockwise:
    /// scale block, scale type x element type).
    pub fn operand_label(&self, is_b: bool) -> String {
        self.operand_type_name(if is_b { self.b.ty } else { self.a.ty }, is_b)
    }

    fn operand_type_name(&self, ty: DataType, is_b: bool) -> String {
        if let Some(bw) = self.blockwise {
            // `{vec_mn}x{vec_k}{acc}x{type}`, as cutlass_library names blockwise operands.
            let mn = if is_b { bw.n } else { bw.m };
            return format!(
                "{mn}x{}{}x{}",
                bw.k,
                self.accumulator.short_name(),
                ty.short_name()
            );
        }
        match self.block_scale {
            Some(bs) => format!("{}x{}", bs.sf.short_name(), ty.short_name()),
            None => ty.short_name().to_string(),
        }
    }

    /// This crate's class template that wraps the builder's collective mainloop, with the header
    /// that defines it (`cutlass-gemm-sys/csrc`): the schedule's
    /// ([`KernelSchedule::mainloop_wrapper`]), except for the tensor-wise cooperative overlapped
    /// kernels whose three accumulators would not fit the registers (more than 72 values a
    /// thread: tile N > 144), which take the sliced mainloop (f32 accumulator plus one N slice's
    /// k-tile accumulator, the promotion hidden across the two warp groups).
    pub fn mainloop_wrapper(&self) -> Option<(&'static str, &'static str)> {
        if self.uses_sliced_promotion() {
            return Some((
                "cutlass_rs::Sm90Fp8SlicedPromotion",
                "cutlass_rs_sm90_fp8_sliced.hpp",
            ));
        }
        self.kernel_schedule.mainloop_wrapper()
    }

    /// Whether this is a tensor-wise cooperative overlapped FP8 kernel too wide for three
    /// accumulators (more than [`OVERLAP_MAX_ACCUMULATORS`] values a thread), which the sliced
    /// mainloop serves ([`KernelSpec::mainloop_wrapper`]).
    pub fn uses_sliced_promotion(&self) -> bool {
        self.kernel_schedule == KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap
            && self.tile[0] * self.tile[1] / 256 > OVERLAP_MAX_ACCUMULATORS
    }

    /// Whether the kernel is built for programmatic dependent launch (CUDA's programmatic stream
    /// serialization): SM90 kernels with CUTLASS's grid dependency control compiled in
    /// (`CUTLASS_ENABLE_GDC_FOR_SM90`), which wait (`griddepcontrol.wait`) for the kernel before
    /// them in the stream before their first global memory access and let the kernel after them
    /// start once their last tile's main loop is done. Not:
    /// - stream-K kernels: their workspace is zeroed by a separate operation before each launch,
    ///   and their partial-tile reductions would have to be ordered after it as well;
    /// - blockwise-scaled kernels: CUTLASS 4.2's cooperative kernel loads the scales in a producer
    ///   warp (`MainloopAux`) that does not wait, so scales written by the kernel before could be
    ///   read early;
    /// - SM100 and SM120 kernels, which this build launches through CUTLASS's adapter without it;
    /// - grouped kernels: their tile scheduler reads the group array, which the launch before them
    ///   writes, before the kernel's first wait.
    /// - weight-only (mixed-input) kernels, which this build launches without it (not measured
    ///   with it yet).
    pub fn supports_programmatic_dependent_launch(&self) -> bool {
        self.arch == Arch::Sm90a
            && self.blockwise.is_none()
            && !self.kernel_schedule.is_grouped()
            && self.mixed_input.is_none()
            && self.tile_scheduler == TileScheduler::Persistent
    }

    /// Whether an SM90 kernel's tile N is one of CuTe's extended wgmma shapes (144, 176, ...: not
    /// 8, 16, 32, 64, 96, 128, 192 or 256). CuTe's instruction selector (`ss_op_selector`) offers
    /// those only with `CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED`; without it, it falls back to the
    /// largest base shape that divides N (nine 64x16 wgmmas for N = 144, nine reads of A from
    /// shared memory where one would do).
    pub fn uses_extended_wgmma_shape(&self) -> bool {
        self.arch == Arch::Sm90a && ![8, 16, 32, 64, 96, 128, 192, 256].contains(&self.tile[1])
    }

    /// The two-letter A/B layout, as in CUTLASS's tables (`TN` = row-major A, column-major B).
    pub fn layout_name(&self) -> String {
        let up = |l: Layout| l.letter().to_ascii_uppercase();
        format!("{}{}", up(self.a.layout), up(self.b.layout))
    }

    /// The rules of [`Fusion::ScaleBiasActivation`]: an SM90 kernel with a TMA epilogue (the visitor
    /// tree runs in CUTLASS's TMA warp-specialized epilogues only), a floating-point f32
    /// accumulator and output, no block-scaled output, and a bias of the output type or f32.
    fn check_fusion(&self, name: &str) -> Result<(), String> {
        if let Fusion::Gated { bias } = self.fusion {
            return self.check_gated(name, bias);
        }
        if let Fusion::BiasActivationAux { bias } = self.fusion {
            return self.check_aux(name, bias);
        }
        let Fusion::ScaleBiasActivation { bias } = self.fusion else {
            return Ok(());
        };
        // The tree's broadcasts are laid out over the CTA's tile: the catalog's tile, or its
        // half along M for SM100's 2SM MMAs (two CTAs per tile; codegen gives the CTA's).
        let tma_epilogue = match self.arch {
            Arch::Sm90a => matches!(
                self.epilogue_schedule,
                EpilogueSchedule::TmaWarpSpecialized
                    | EpilogueSchedule::TmaWarpSpecializedCooperative
            ),
            Arch::Sm100a => matches!(
                self.epilogue_schedule,
                EpilogueSchedule::TmaWarpSpecialized1Sm | EpilogueSchedule::TmaWarpSpecialized2Sm
            ),
            Arch::Sm120a => self.epilogue_schedule == EpilogueSchedule::Auto,
        };
        if !tma_epilogue || self.op_class.is_sparse() {
            return Err(format!(
                "{name}: the scale-bias-activation epilogue needs a TMA epilogue (SM90, SM100 1SM or 2SM, SM120), dense"
            ));
        }
        if self.output_scale.is_some()
            || self.accumulator != DataType::F32
            || !matches!(self.d.ty, DataType::Bf16 | DataType::F16 | DataType::F32)
        {
            return Err(format!(
                "{name}: the scale-bias-activation epilogue needs an f32 accumulator and a bf16, f16 or f32 D"
            ));
        }
        self.check_bias_type(name, bias)
    }

    /// The bias rule of this crate's epilogues: D's type or f32.
    fn check_bias_type(&self, name: &str, bias: DataType) -> Result<(), String> {
        if bias != self.d.ty && bias != DataType::F32 {
            return Err(format!(
                "{name}: the bias of a fused epilogue is of D's type or f32, not {bias}"
            ));
        }
        Ok(())
    }

    /// A dense SM90 GEMM with one scale (alpha) for A·B: not sparse, grouped, mixed-input,
    /// blockwise or block-scaled, and no block-scaled D (what this crate's own SM90 epilogues
    /// take).
    fn is_dense_plain_sm90(&self) -> bool {
        self.arch == Arch::Sm90a
            && !self.op_class.is_sparse()
            && !self.kernel_schedule.is_grouped()
            && self.mixed_input.is_none()
            && self.blockwise.is_none()
            && self.block_scale.is_none()
            && self.output_scale.is_none()
    }

    /// The rules of [`Fusion::BiasActivationAux`]: a dense SM90 kernel on CUTLASS's cooperative or
    /// pingpong main loop with its TMA epilogue (the auxiliary output goes through shared memory
    /// and TMA like D), bf16 or f16 inputs with an f32 accumulator, C and D of the input type, D
    /// row-major (Aux has D's layout), and a bias of D's type or f32.
    fn check_aux(&self, name: &str, bias: DataType) -> Result<(), String> {
        let plain = self.is_dense_plain_sm90() && self.mainloop_wrapper().is_none();
        let schedules = matches!(
            (self.kernel_schedule, self.epilogue_schedule),
            (
                KernelSchedule::TmaWarpSpecializedCooperative,
                EpilogueSchedule::TmaWarpSpecializedCooperative
            ) | (
                KernelSchedule::TmaWarpSpecializedPingpong,
                EpilogueSchedule::TmaWarpSpecialized
            )
        );
        if !plain || !schedules {
            return Err(format!(
                "{name}: the auxiliary-output epilogue runs on dense SM90 kernels with CUTLASS's cooperative or pingpong main loop and its TMA epilogue"
            ));
        }
        let sixteen = matches!(self.a.ty, DataType::Bf16 | DataType::F16);
        if !sixteen
            || self.b.ty != self.a.ty
            || self.c.ty != self.a.ty
            || self.d.ty != self.a.ty
            || self.accumulator != DataType::F32
            || self.d.layout != Layout::RowMajor
        {
            return Err(format!(
                "{name}: the auxiliary-output epilogue needs bf16 or f16 inputs, C and D of the input type, an f32 accumulator and a row-major D"
            ));
        }
        self.check_bias_type(name, bias)
    }

    /// The rules of [`Fusion::Gated`]: a dense SM90 TN kernel on CUTLASS's cooperative or pingpong
    /// main loop, or for FP8 this crate's overlapped-promotion ones up to 72 accumulators a thread
    /// (not the sliced main loop), with the persistent scheduler (the epilogue reads the
    /// warpgroup MMA's accumulator layout and runs once per output tile), the epilogue without
    /// shared memory, an f32 accumulator, bf16 or f16 inputs with C and D of the input type, or
    /// e4m3/e5m2 inputs (tensor-wise scales in alpha, row and column scales in the epilogue) with
    /// a bf16 or f16 C and D, both row-major, whole 16-column gate/up blocks per tile, and a bias
    /// of D's type or f32.
    fn check_gated(&self, name: &str, bias: DataType) -> Result<(), String> {
        let plain = self.is_dense_plain_sm90()
            && self.tile_scheduler == TileScheduler::Persistent
            && !self.uses_sliced_promotion()
            && matches!(
                self.kernel_schedule,
                KernelSchedule::TmaWarpSpecializedCooperative
                    | KernelSchedule::TmaWarpSpecializedPingpong
                    | KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap
                    | KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap
            );
        if !plain || self.epilogue_schedule != EpilogueSchedule::NoSmemWarpSpecialized {
            return Err(format!(
                "{name}: the gated epilogue runs on dense SM90 cooperative or pingpong kernels (FP8: overlapped promotion, not sliced) with the persistent scheduler and NoSmemWarpSpecialized"
            ));
        }
        let ty = self.a.ty;
        let fp8 = |t: DataType| matches!(t, DataType::E4M3 | DataType::E5M2);
        let types = if fp8(ty) {
            fp8(self.b.ty) && matches!(self.d.ty, DataType::Bf16 | DataType::F16)
        } else {
            matches!(ty, DataType::Bf16 | DataType::F16) && self.b.ty == ty && self.d.ty == ty
        };
        let fp8_schedule = matches!(
            self.kernel_schedule,
            KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap
                | KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap
        );
        if !types
            || fp8_schedule != fp8(ty)
            || self.c.ty != self.d.ty
            || self.accumulator != DataType::F32
            || (self.a.layout, self.b.layout, self.c.layout, self.d.layout)
                != (
                    Layout::RowMajor,
                    Layout::ColumnMajor,
                    Layout::RowMajor,
                    Layout::RowMajor,
                )
        {
            return Err(format!(
                "{name}: the gated epilogue takes bf16 or f16 TN operands with C and D row-major of the input type, or e4m3/e5m2 ones (overlapped promotion) with a bf16 or f16 C and D, and an f32 accumulator"
            ));
        }
        if self.tile[1] % 16 != 0 {
            return Err(format!(
                "{name}: the gated epilogue's tile holds whole 16-column gate/up blocks (tile n {})",
                self.tile[1]
            ));
        }
        self.check_bias_type(name, bias)
    }

    /// A mixed-input kernel's orientation: TN (the weight row-major as A, the activations
    /// column-major as B), C and D column-major of B's type, an f32 accumulator.
    fn mixed_input_orientation(&self) -> bool {
        (self.a.layout, self.b.layout, self.c.layout, self.d.layout)
            == (
                Layout::RowMajor,
                Layout::ColumnMajor,
                Layout::ColumnMajor,
                Layout::ColumnMajor,
            )
            && self.c.ty == self.b.ty
            && self.d.ty == self.b.ty
            && self.accumulator == DataType::F32
    }

    /// The rules of SM100 mixed-input (weight-only) kernels, and that only they take the mixed-input
    /// schedules: an s4 weight with scales or a u4 one with scales and zeros (A, K-major as stored,
    /// not packed), scales in groups of 64 or 128 along k fixed at compile time, a bf16/f16 B, TN
    /// with C and D column-major of B's type, an f32 accumulator, CUTLASS's linear combination,
    /// the persistent scheduler, no seed row, and a tile N (the tokens) of at most 128
    /// (`sm100_mixed_input_umma_builder.inl`). The MMA tile, cluster and epilogue follow the
    /// SM100 rules of `validate`.
    fn check_sm100_mixed_input(&self, name: &str) -> Result<(), String> {
        let schedule = matches!(
            self.kernel_schedule,
            KernelSchedule::Sm100MixedInputOneSm | KernelSchedule::Sm100MixedInputTwoSm
        );
        let Some(mx) = self.mixed_input else {
            if schedule {
                return Err(format!(
                    "{name}: the SM100 mixed-input schedules need a mixed-input entry"
                ));
            }
            return Ok(());
        };
        let format_ok = matches!(
            (self.a.ty, mx.mode),
            (DataType::S4, MixedInputMode::ScaleOnly)
                | (DataType::U4, MixedInputMode::ScaleWithZeroPoint)
        );
        if !schedule
            || !format_ok
            || !matches!(self.b.ty, DataType::Bf16 | DataType::F16)
            || mx.shuffled
            || ![64, 128].contains(&mx.group)
        {
            return Err(format!(
                "{name}: an SM100 mixed-input entry takes the mixed-input schedule, an s4 weight with scales (_scl) or a u4 one with zeros (_sclzr) as stored (no _shfl), groups of 64 or 128 (_g64, _g128) and a bf16/f16 B"
            ));
        }
        if !self.mixed_input_orientation()
            || self.fusion != Fusion::LinearCombination
            || self.tile_scheduler != TileScheduler::Persistent
            || self.origin.is_some()
            || self.tile[1] > 128
            || self.tile[2] % mx.group.min(self.tile[2]) != 0
        {
            return Err(format!(
                "{name}: an SM100 mixed-input kernel is TN with C and D column-major of B's type, an f32 accumulator, CUTLASS's linear combination, the persistent scheduler, no seed row, a tile N of at most 128 and a tile k that is a multiple of the group size or within one group"
            ));
        }
        Ok(())
    }

    /// The rules of SM90 mixed-input (weight-only) kernels, and that only they mix operand widths:
    /// an s4/u4 A (the weight, read in the packed order) or an e4m3 one (read as stored, scales
    /// only) and a bf16/f16 B, dequantized with scales (and zeros), TN with C and D column-major of B's type (the weight is the MMA's A so that it
    /// passes through registers; D is then Y transposed), an f32 accumulator, CUTLASS's linear
    /// combination, and the cooperative or pingpong TMA schedules with their TMA epilogues.
    fn check_mixed_input(&self, name: &str) -> Result<(), String> {
        let Some(mx) = self.mixed_input else {
            if self.a.ty.bits() != self.b.ty.bits() {
                return Err(format!(
                    "{name}: SM90 operands of different widths need a mixed-input kernel"
                ));
            }
            return Ok(());
        };
        if !matches!(
            self.a.ty,
            DataType::S4 | DataType::U4 | DataType::E4M3 | DataType::I8
        ) || !matches!(self.b.ty, DataType::Bf16 | DataType::F16)
        {
            return Err(format!(
                "{name}: the catalog's mixed-input kernels take an s4/u4/e4m3/s8 A (the weight) and a bf16/f16 B"
            ));
        }
        let four_bit = self.a.ty.bits() == 4;
        if mx.group != 0 {
            return Err(format!(
                "{name}: SM90 mixed-input kernels take the group size at run time (no _g suffix)"
            ));
        }
        if mx.mode == MixedInputMode::ConvertOnly || mx.shuffled != four_bit {
            return Err(format!(
                "{name}: the catalog's mixed-input kernels scale their weight (_scl, _sclzr) and read a 4-bit one in the packed order (_shfl), an 8-bit one as stored"
            ));
        }
        if !four_bit && mx.mode != MixedInputMode::ScaleOnly {
            return Err(format!(
                "{name}: an e4m3 or s8 weight takes scales only (_scl)"
            ));
        }
        if !self.mixed_input_orientation() {
            return Err(format!(
                "{name}: a mixed-input kernel is TN with C and D column-major of B's type and an f32 accumulator"
            ));
        }
        let schedules = matches!(
            (self.kernel_schedule, self.epilogue_schedule),
            (
                KernelSchedule::TmaWarpSpecializedCooperative,
                EpilogueSchedule::TmaWarpSpecializedCooperative
            ) | (
                KernelSchedule::TmaWarpSpecializedPingpong,
                EpilogueSchedule::TmaWarpSpecialized
            )
        );
        let bias_of_d = match self.fusion {
            Fusion::ScaleBiasActivation { bias } => bias == self.d.ty,
            _ => true,
        };
        if !schedules || !bias_of_d || self.blockwise.is_some() {
            return Err(format!(
                "{name}: a mixed-input kernel takes the cooperative or pingpong TMA schedule with its TMA epilogue, and CUTLASS's linear combination or the fused epilogue with a bias of D's type"
            ));
        }
        Ok(())
    }

    /// SMs per MMA (SM100): the schedule's, or for `KernelScheduleAuto` what CUTLASS 4.2's builder
    /// picks (`sm100_make_trivial_tiled_mma`): 2 where the cluster's m is even and the tile's m a
    /// multiple of 128, else 1.
    pub fn mma_sms(&self) -> u8 {
        if self.kernel_schedule == KernelSchedule::Sm100Auto {
            if self.cluster[0] % 2 == 0 && self.tile[0] % 128 == 0 {
                2
            } else {
                1
            }
        } else {
            self.kernel_schedule.sms()
        }
    }

    /// Checks the rules that make a spec instantiable; `Err` says which rule fails.
    pub fn validate(&self) -> Result<(), String> {
        let name = self.name();
        // An SM90 epilogue without shared memory stores each element itself: C and D need no TMA
        // alignment there (any alignment that divides the TMA one).
        let scalar_epilogue = self.arch == Arch::Sm90a
            && self.epilogue_schedule == EpilogueSchedule::NoSmemWarpSpecialized;
        for (op, o) in [("A", self.a), ("B", self.b), ("C", self.c), ("D", self.d)] {
            let output = op == "C" || op == "D";
            if scalar_epilogue && output && o.align >= 1 && o.ty.tma_alignment() % o.align == 0 {
                continue;
            }
            if o.align == 0 || (o.align * o.ty.bits()) % 128 != 0 {
                return Err(format!(
                    "{name}: operand {op} alignment {} elements of {} is not a multiple of 16 bytes, as TMA needs",
                    o.align, o.ty
                ));
            }
        }
        if self.c.layout != self.d.layout {
            return Err(format!("{name}: C and D must have the same layout"));
        }
        self.check_fusion(&name)?;
        if self.tile.iter().chain(self.cluster.iter()).any(|&v| v == 0) {
            return Err(format!("{name}: tile and cluster extents must be positive"));
        }
        if let Some(o) = self.origin {
            self.check_against_seed(&name, o)?;
        } else if self.arch != Arch::Sm90a && self.mixed_input.is_none() {
            // The SM100 mixed-input entries come from CUTLASS's builder, not from a table row
            // (the tables have no mixed-width 16-bit rows): `check_sm100_mixed_input`.
            return Err(format!(
                "{name}: SM100/SM120 entries must name their seed rows (origin)"
            ));
        }
        if let Some(o) = self.output_scale {
            if self.block_scale.is_none() || self.arch == Arch::Sm90a {
                return Err(format!(
                    "{name}: block-scaled outputs come with block-scaled SM100/SM120 kernels"
                ));
            }
            let ok = match o.sf {
                DataType::UE8M0 => o.vec == 32,
                DataType::UE4M3 => o.vec == 16,
                _ => false,
            };
            if !ok || !matches!(self.d.ty.bits(), 4 | 6 | 8) || self.d.ty == DataType::UE8M0 {
                return Err(format!(
                    "{name}: a block-scaled output is FP8/FP6/FP4 with ue8m0 per 32 or ue4m3 per 16"
                ));
            }
        }
        if self.blockwise.is_some() && self.arch != Arch::Sm90a {
            return Err(format!(
                "{name}: blockwise (f32-scale) entries are SM90 only in this catalog"
            ));
        }
        match self.arch {
            Arch::Sm90a => {
                let cluster_size: u32 = self.cluster.iter().product();
                if cluster_size > 8 || self.cluster[2] != 1 {
                    return Err(format!(
                        "{name}: SM90 clusters have at most 8 CTAs and cluster k = 1"
                    ));
                }
                // A mixed-input kernel's k tile is counted in its MMA's (the wide operand's) type.
                let tile_k_bytes = self.tile[2] * self.a.ty.bits().max(self.b.ty.bits()) / 8;
                if tile_k_bytes % 128 != 0 {
                    return Err(format!(
                        "{name}: SM90 tile k must span a multiple of 128 bytes (one 128B swizzle atom)"
                    ));
                }
                use KernelSchedule as K;
                let (min_m, epilogues): (u32, &[EpilogueSchedule]) = match self.kernel_schedule {
                    K::TmaWarpSpecializedCooperative
                    | K::TmaWarpSpecializedCooperativeFp8FastAccum
                    | K::TmaWarpSpecializedCooperativeFp8Blockwise
                    | K::TmaWarpSpecializedCooperativeFp8Overlap
                    | K::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap => (
                        128,
                        &[
                            EpilogueSchedule::TmaWarpSpecializedCooperative,
                            EpilogueSchedule::NoSmemWarpSpecialized,
                        ],
                    ),
                    K::TmaWarpSpecializedPingpong
                    | K::TmaWarpSpecializedPingpongFp8FastAccum
                    | K::TmaWarpSpecializedPingpongFp8Overlap => (
                        64,
                        &[
                            EpilogueSchedule::TmaWarpSpecialized,
                            EpilogueSchedule::NoSmemWarpSpecialized,
                        ],
                    ),
                    K::TmaWarpSpecialized => (64, &[EpilogueSchedule::NoSmemWarpSpecialized]),
                    K::PtrArrayTmaWarpSpecializedCooperative
                    | K::PtrArrayTmaWarpSpecializedCooperativeFp8Blockwise
                    | K::PtrArrayTmaWarpSpecializedCooperativeFp8BlockwiseOverlap => (
                        128,
                        &[EpilogueSchedule::PtrArrayTmaWarpSpecializedCooperative],
                    ),
                    K::PtrArrayTmaWarpSpecializedPingpong
                    | K::PtrArrayTmaWarpSpecializedPingpongFp8Blockwise
                    | K::PtrArrayTmaWarpSpecializedPingpongFp8BlockwiseOverlap => {
                        (64, &[EpilogueSchedule::PtrArrayTmaWarpSpecializedPingpong])
                    }
                    other => {
                        return Err(format!(
                            "{name}: {} is not an SM90 schedule",
                            other.policy()
                        ));
                    }
                };
                if self.tile[0] % min_m != 0 {
                    return Err(format!(
                        "{name}: {} needs tile m a multiple of {min_m}",
                        self.kernel_schedule.policy()
                    ));
                }
                if !epilogues.contains(&self.epilogue_schedule) {
                    return Err(format!(
                        "{name}: {} does not pair with the {} epilogue",
                        self.kernel_schedule.policy(),
                        self.epilogue_schedule.cpp_type()
                    ));
                }
                // CUTLASS's SM90 stream-K reduces partial tiles in the cooperative kernel only
                // (`sm90_gemm_tma_warpspecialized_pingpong.hpp` refuses it); the blockwise main
                // loops scale each k-tile's products before adding them, so partial tiles add up
                // (CUTLASS's example 67 runs its blockwise kernel with stream-K).
                if self.tile_scheduler == TileScheduler::StreamK
                    && !matches!(
                        self.kernel_schedule,
                        K::TmaWarpSpecializedCooperative
                            | K::TmaWarpSpecializedCooperativeFp8FastAccum
                            | K::TmaWarpSpecializedCooperativeFp8Overlap
                            | K::TmaWarpSpecializedCooperativeFp8Blockwise
                            | K::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap
                    )
                {
                    return Err(format!(
                        "{name}: the stream-K scheduler needs a cooperative schedule"
                    ));
                }
                // Grouped kernels: CUTLASS 4.2's SM90 pointer-array kernels take the persistent
                // group scheduler only, and this catalog gives them CUTLASS's linear combination
                // over dense operands of one width (its mixed-width grouped kernels are another
                // mainloop).
                if self.kernel_schedule.is_grouped()
                    && (self.tile_scheduler != TileScheduler::Persistent
                        || self.fusion != Fusion::LinearCombination
                        || self.a.ty.bits() != self.b.ty.bits()
                        || self.a.ty.bits() < 8)
                {
                    return Err(format!(
                        "{name}: SM90 grouped kernels take the persistent group scheduler, CUTLASS's linear-combination epilogue and 8- or 16-bit operands of one width"
                    ));
                }
                // A group's rows start anywhere in A, so its scales are a contiguous run of the
                // whole tensor's only when they are K-major with one scale per row; the other
                // kernels keep CUTLASS's M-/N-major order.
                if let Some(bw) = self.blockwise {
                    let grouped = self.kernel_schedule.is_grouped();
                    let order = if grouped {
                        ScaleOrder::KMajor
                    } else {
                        ScaleOrder::MnMajor
                    };
                    if bw.order != order || (grouped && bw.m != 1) {
                        return Err(format!(
                            "{name}: blockwise scales are {order:?} on {} kernels (one scale per row of A on grouped ones)",
                            if grouped { "grouped" } else { "non-grouped" }
                        ));
                    }
                }
                self.check_mixed_input(&name)?;
                let fp8 = |t: DataType| matches!(t, DataType::E4M3 | DataType::E5M2);
                let fp8_only = matches!(
                    self.kernel_schedule,
                    K::TmaWarpSpecializedCooperativeFp8FastAccum
                        | K::TmaWarpSpecializedPingpongFp8FastAccum
                        | K::TmaWarpSpecializedCooperativeFp8Blockwise
                        | K::TmaWarpSpecializedCooperativeFp8Overlap
                        | K::TmaWarpSpecializedPingpongFp8Overlap
                        | K::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap
                        | K::PtrArrayTmaWarpSpecializedCooperativeFp8Blockwise
                        | K::PtrArrayTmaWarpSpecializedPingpongFp8Blockwise
                        | K::PtrArrayTmaWarpSpecializedCooperativeFp8BlockwiseOverlap
                        | K::PtrArrayTmaWarpSpecializedPingpongFp8BlockwiseOverlap
                );
                if fp8_only && !(fp8(self.a.ty) && fp8(self.b.ty)) {
                    return Err(format!(
                        "{name}: {} takes e4m3/e5m2 operands only",
                        self.kernel_schedule.policy()
                    ));
                }
                // Three accumulators (f32, two k-tiles) of at most 72 values per thread must fit
                // the consumer warp groups' 232 registers (up to a 128x144 cooperative tile or a
                // 64x144 pingpong tile; ptxas reports no spills at 72); promotion per k-tile is
                // CUTLASS's default interval (4 wgmmas of k = 32) only at tile k = 128.
                // The sliced mainloop (cutlass_rs_sm90_fp8_sliced.hpp) takes the tensor-wise
                // cooperative tiles 128 x N past that, up to 128x256: the f32 accumulator (up to
                // 128 values) plus one N slice's k-tile accumulator.
                let per_thread = match self.kernel_schedule {
                    K::TmaWarpSpecializedCooperativeFp8Overlap
                    | K::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap
                    | K::PtrArrayTmaWarpSpecializedCooperativeFp8BlockwiseOverlap => Some(256),
                    K::TmaWarpSpecializedPingpongFp8Overlap
                    | K::PtrArrayTmaWarpSpecializedPingpongFp8BlockwiseOverlap => Some(128),
                    _ => None,
                }
                .map(|threads| self.tile[0] * self.tile[1] / threads);
                let sliced = self.kernel_schedule == K::TmaWarpSpecializedCooperativeFp8Overlap
                    && self.tile[0] == 128
                    && self.tile[1] <= 256
                    && self.tile[1] % 16 == 0;
                if per_thread.is_some_and(|v| v > OVERLAP_MAX_ACCUMULATORS && !sliced)
                    || (per_thread.is_some() && self.tile[2] != 128)
                {
                    return Err(format!(
                        "{name}: the overlapped FP8 mainloop needs tile k = 128 and at most 72 accumulators per thread (up to 128x144 cooperative, 64x144 pingpong; the tensor-wise cooperative one takes 128 x N up to 128x256, N a multiple of 16, sliced)"
                    ));
                }
                let blockwise_schedule = self.kernel_schedule.is_blockwise();
                match self.blockwise {
                    Some(bw) => {
                        if !blockwise_schedule {
                            return Err(format!(
                                "{name}: blockwise scales need the FP8 blockwise schedule"
                            ));
                        }
                        if bw.m == 0
                            || bw.n == 0
                            || self.tile[0] % bw.m != 0
                            || self.tile[1] % bw.n != 0
                            || bw.k != self.tile[2]
                            || self.accumulator != DataType::F32
                        {
                            return Err(format!(
                                "{name}: blockwise scale blocks {}x{}x{} must divide the tile {}x{} and span its k ({}), with an f32 accumulator",
                                bw.m, bw.n, bw.k, self.tile[0], self.tile[1], self.tile[2]
                            ));
                        }
                    }
                    None if blockwise_schedule => {
                        return Err(format!(
                            "{name}: the FP8 blockwise schedule needs blockwise scales"
                        ));
                    }
                    None => {}
                }
                if self.block_scale.is_some() {
                    return Err(format!("{name}: SM90 has no block-scaled (mx/nv) MMA"));
                }
                if self.a.ty.bits() == 8
                    && (self.a.layout, self.b.layout) != (Layout::RowMajor, Layout::ColumnMajor)
                {
                    return Err(format!(
                        "{name}: SM90 wgmma reads 8-bit operands K-major only: layout TN, not {}",
                        self.layout_name()
                    ));
                }
                if self.a.ty == DataType::Tf32
                    && (self.a.layout, self.b.layout) == (Layout::RowMajor, Layout::RowMajor)
                {
                    return Err(format!(
                        "{name}: tf32 TT needs CUTLASS's transposed epilogue, which the catalog does not use"
                    ));
                }
                if self.tile[1] % 8 != 0 || self.tile[1] > 256 {
                    return Err(format!(
                        "{name}: the wgmma n extent must be a multiple of 8 and at most 256"
                    ));
                }
            }
            Arch::Sm100a => {
                self.check_sm100_mixed_input(&name)?;
                let sms = self.mma_sms() as u32;
                if self.cluster[0] % sms != 0 {
                    return Err(format!(
                        "{name}: a {sms}SM MMA needs cluster m a multiple of {sms}"
                    ));
                }
                let tm_ok = if sms == 2 {
                    [128, 256].contains(&self.tile[0])
                } else {
                    [64, 128].contains(&self.tile[0])
                };
                if !tm_ok {
                    return Err(format!(
                        "{name}: MMA tile m {} is not valid for a {sms}SM MMA",
                        self.tile[0]
                    ));
                }
                // Table 14: the TMA epilogue of the MMA's SM count, or (dense, and sparse
                // without block scaling) the one without shared memory.
                let (tma, nosmem) = if sms == 2 {
                    (
                        EpilogueSchedule::TmaWarpSpecialized2Sm,
                        EpilogueSchedule::NoSmemWarpSpecialized2Sm,
                    )
                } else {
                    (
                        EpilogueSchedule::TmaWarpSpecialized1Sm,
                        EpilogueSchedule::NoSmemWarpSpecialized1Sm,
                    )
                };
                // Grouped kernels: the pointer-array epilogue of the MMA's SM count, the
                // persistent group scheduler, CUTLASS's linear combination, a dense D.
                let grouped = self.kernel_schedule.is_grouped();
                let (tma, nosmem) = match (grouped, sms) {
                    (true, 2) => (EpilogueSchedule::PtrArrayTmaWarpSpecialized2Sm, tma),
                    (true, _) => (EpilogueSchedule::PtrArrayTmaWarpSpecialized1Sm, tma),
                    (false, _) => (tma, nosmem),
                };
                if grouped
                    && (self.tile_scheduler != TileScheduler::Persistent
                        || self.fusion != Fusion::LinearCombination
                        || self.output_scale.is_some()
                        || self.op_class.is_sparse())
                {
                    return Err(format!(
                        "{name}: SM100 grouped kernels take the persistent group scheduler, CUTLASS's linear-combination epilogue, dense operands and a plain D"
                    ));
                }
                let nosmem_ok = self.op_class != OpClass::BlockScaledSparseTensorOp
                    && self.output_scale.is_none()
                    && !grouped;
                let auto = self.kernel_schedule == KernelSchedule::Sm100Auto;
                if auto != (self.epilogue_schedule == EpilogueSchedule::Auto) {
                    return Err(format!(
                        "{name}: KernelScheduleAuto goes with EpilogueScheduleAuto, and only it"
                    ));
                }
                if !auto
                    && self.epilogue_schedule != tma
                    && !(self.epilogue_schedule == nosmem && nosmem_ok)
                {
                    return Err(format!(
                        "{name}: a {sms}SM mainloop needs the {sms}SM epilogue (Table 14: TMA, or without shared memory for dense and sparse legacy types)"
                    ));
                }
            }
            Arch::Sm120a => {
                if self.mixed_input.is_some() {
                    return Err(format!(
                        "{name}: the catalog has no SM120 mixed-input kernels"
                    ));
                }
                if self.cluster != [1, 1, 1] {
                    return Err(format!(
                        "{name}: SM120 has no multicast: the cluster must be 1x1x1"
                    ));
                }
                if (self.a.layout, self.b.layout) != (Layout::RowMajor, Layout::ColumnMajor) {
                    return Err(format!("{name}: SM120 supports the TN layout only"));
                }
                if self.epilogue_schedule != EpilogueSchedule::Auto {
                    return Err(format!("{name}: SM120 needs EpilogueScheduleAuto"));
                }
                // CUTLASS 4.2 builds SM120 pointer-array kernels for block-scaled operands only
                // (`sm120_mma_builder.inl` refuses the dense ones), from SM90's schedule tags.
                if self.kernel_schedule.is_grouped()
                    && (self.block_scale.is_none()
                        || self.kernel_schedule.dense_twin().is_none()
                        || self.tile_scheduler != TileScheduler::Persistent
                        || self.fusion != Fusion::LinearCombination
                        || self.output_scale.is_some())
                {
                    return Err(format!(
                        "{name}: SM120 grouped kernels are block-scaled, with the cooperative or pingpong pointer-array schedule, the persistent group scheduler, CUTLASS's linear combination and a plain D"
                    ));
                }
                if matches!(self.d.ty, DataType::E2M3 | DataType::E3M2) {
                    let lead = if self.d.layout == Layout::RowMajor {
                        self.tile[1]
                    } else {
                        self.tile[0]
                    };
                    if lead != 128 {
                        return Err(format!("{name}: a float6 output needs tile 128 along its leading dimension (SM120)"));
                    }
                }
            }
        }
        Ok(())
    }
}
