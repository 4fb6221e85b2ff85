//! Catalog entries CUTLASS 4.2 refuses to compile, each with the static assertion that refuses
//! it. The catalog lists them (the seed's tables name them), `cutlass-profiler list` marks them,
//! the build skips them with a warning instead of failing in nvcc, and the census
//! (`cutlass-gemm-catalog/census.tsv`) shows each failing with exactly this assertion.

use std::fmt;

use crate::spec::{KernelSchedule, KernelSpec};
use crate::types::{Arch, DataType, Layout};

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
    /// SM120's `Mxf8f6f4` policies (`..._q`) hold A and B in shared memory one byte per element
    /// (FP4 and FP6 unpacked); where two stages of them and their scale factors fill the 101 376
    /// bytes of shared memory, the epilogue leaves room for one stage only (Table 19's 256x128x128
    /// and 128x128x256 rows).
    Sm120Mxf8f6f4Stages,
    /// The f8f6f4 instructions read 4- and 6-bit operands unpacked in shared memory, which TMA
    /// loads in rows of 128 elements: such an operand needs its tile's extent along its
    /// contiguous dimension a multiple of 128 (256 for sparse A's K, and for a 2-SM tile's N,
    /// which the two SMs split), or, when it is not K-major, its M (per SM) or K.
    Mxf8f6f4UnpackedTile,
}

/// Shared memory of an SM120 CTA, bytes (`cutlass::arch::sm120_smem_capacity_bytes`).
const SM120_SMEM_BYTES: u64 = 101_376;

impl CutlassLimit {
    /// Every limit.
    pub const ALL: [CutlassLimit; 5] = [
        CutlassLimit::Sm120CooperativeTileM,
        CutlassLimit::SparseU8,
        CutlassLimit::SparseScaleVector,
        CutlassLimit::Sm120Mxf8f6f4Stages,
        CutlassLimit::Mxf8f6f4UnpackedTile,
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
            CutlassLimit::Sm120Mxf8f6f4Stages => {
                "Specialization requires Stages set to value 2 or more."
            }
            CutlassLimit::Mxf8f6f4UnpackedTile => {
                "TileSize and MNK Major does not met with MMA Mix 8-bit TMA load requirement"
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
            CutlassLimit::Sm120Mxf8f6f4Stages => "collective/sm120_blockscaled_mma_tma.hpp:209",
            CutlassLimit::Mxf8f6f4UnpackedTile => {
                "collective/builders/sm1xx_common.inl:203 (sm1xx_gemm_check_for_f8f6f4_mix8bit_requirement)"
            }
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

/// Entries whose PTX holds another MMA kind than the tables imply, and why: (the start of their
/// names, the ends of their names, the instruction found).
pub const KNOWN_KIND_DIVERGENCES: &[(&str, &[&str], &str)] = &[
    // Table 20 gives row 3.3 (mx_float4 x mx_float4, kind::mxf8f6f4) the generic cooperative and
    // pingpong policies; with them CUTLASS 4.2's SM120 builder picks kind::mxf4nvf4 with one ue8m0
    // per 32 (scale_vec::2X) for FP4 x FP4 in TN. The explicit Mxf8f6f4 policies of Table 19 give
    // the row's kind (those entries pass).
    (
        "cutlass3x_sm120_bstensorop_gemm_ue8m0xe2m1_ue8m0xe2m1_f32_f16_f16_",
        &[
            "_tnt_align128_warpspecialized_cooperative",
            "_tnt_align128_warpspecialized_pingpong",
        ],
        "mma.sync.aligned.kind::mxf4nvf4.block_scale.scale_vec::2X",
    ),
    // The same on SM100: on Table 11's row 3.3 tiles the policies that leave the instruction to
    // the builder (`KernelScheduleAuto`, names ending `_align128`, and the auto block-scaled
    // `KernelTmaWarpSpecialized{1,2}SmBlockScaledSm100`, `_align128_{1,2}sm`) let CUTLASS 4.2 pick
    // kind::mxf4 (one ue8m0 per 32) for FP4 x FP4 in TN; the explicit Mxf8f6f4 policies (`_q_`)
    // give the row's kind.
    (
        "cutlass3x_sm100_bstensorop_gemm_ue8m0xe2m1_ue8m0xe2m1_f32_f16_f16_",
        &[
            "_tnt_align128",
            "_tnt_align128_1sm",
            "_tnt_align128_2sm_epi_tma",
        ],
        "kind::mxf4.block_scale.block32",
    ),
];

/// Whether a census result for `spec` agrees with the catalog: compiled (`passed`) with the MMA
/// kind the tables imply (`kind_ok`, or a [`KNOWN_KIND_DIVERGENCES`] entry whose instruction is
/// in `ptx`) and no [`CutlassLimit`], or failed with the assertion of the limit that marks it.
/// `ptx` is the census's fourth column: the MMA instructions found, or the compiler's error.
pub fn check_census_result(
    spec: &KernelSpec,
    passed: bool,
    ptx: &str,
    kind_ok: bool,
) -> Result<(), String> {
    let name = spec.name();
    match (passed, spec.cutlass_limit()) {
        (true, Some(limit)) => Err(format!("{name} compiles but is marked: {limit}")),
        (true, None) => {
            let diverges = KNOWN_KIND_DIVERGENCES.iter().any(|(start, ends, found)| {
                name.starts_with(start)
                    && ends.iter().any(|e| name.ends_with(e))
                    && ptx.contains(found)
            });
            if (kind_ok || diverges) && !ptx.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "{name} compiles but its PTX ({ptx}) lacks {}",
                    crate::catalog::expected_mma(spec)
                ))
            }
        }
        (false, Some(limit)) if ptx.contains(limit.assertion()) => Ok(()),
        (false, _) => Err(format!(
            "{name}: a failure no rule of KernelSpec::cutlass_limit explains: {ptx}"
        )),
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
        if self.arch == Arch::Sm120a
            && matches!(
                self.kernel_schedule,
                KernelSchedule::Sm120Mxf8f6f4Cooperative | KernelSchedule::Sm120Mxf8f6f4Pingpong
            )
        {
            // One stage: A and B a byte per element, and one scale factor per `vec` of them.
            let [m, n, k] = self.tile.map(u64::from);
            let vec = self.block_scale.map_or(32, |b| u64::from(b.vec));
            let stage = (m + n) * k + (m + n) * k / vec;
            if 2 * stage >= SM120_SMEM_BYTES {
                return Some(CutlassLimit::Sm120Mxf8f6f4Stages);
            }
        }
        if self.arch != Arch::Sm90a && crate::catalog::expected_mma(self).contains("f8f6f4") {
            let two_sm = self.mma_sms() == 2;
            let [m, n, k] = self.tile;
            let m = if two_sm { m / 2 } else { m };
            let unpacked = |t: DataType| matches!(t.bits(), 4 | 6);
            let a_ok = !unpacked(self.a.ty)
                || match self.a.layout {
                    Layout::RowMajor => k % if sparse { 256 } else { 128 } == 0,
                    Layout::ColumnMajor => m % 128 == 0,
                };
            let b_ok = !unpacked(self.b.ty)
                || match self.b.layout {
                    Layout::RowMajor => n % if two_sm { 256 } else { 128 } == 0,
                    Layout::ColumnMajor => k % 128 == 0,
                };
            if !(a_ok && b_ok) {
                return Some(CutlassLimit::Mxf8f6f4UnpackedTile);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;

    /// A census result agrees with the catalog only as the rules say: a marked entry must fail
    /// with its assertion, an unmarked one compile with the implied kind.
    #[test]
    fn census_results_are_judged_by_the_rules() {
        let all = catalog::all();
        let marked = all.iter().find(|s| s.cutlass_limit().is_some()).unwrap();
        let limit = marked.cutlass_limit().unwrap();
        let plain = all.iter().find(|s| s.cutlass_limit().is_none()).unwrap();
        let assertion = format!(
            "error: static assertion failed with \"{}\"",
            limit.assertion()
        );
        assert!(check_census_result(marked, false, &assertion, false).is_ok());
        assert!(check_census_result(marked, false, "error: something else", false).is_err());
        assert!(check_census_result(marked, true, "mma", true).is_err());
        assert!(check_census_result(plain, true, "mma", true).is_ok());
        assert!(check_census_result(plain, true, "mma", false).is_err());
        assert!(check_census_result(plain, true, "", true).is_err());
        assert!(check_census_result(plain, false, &assertion, false).is_err());
    }

    /// Each rule marks some catalog entry, and the SM120 stage rule only the Table 19 tiles whose
    /// two stages fill shared memory (the 128x128x128 `_q` entries build).
    #[test]
    fn every_rule_marks_entries_and_the_stage_rule_follows_the_arithmetic() {
        let all = catalog::all();
        for limit in CutlassLimit::ALL {
            assert!(
                all.iter().any(|s| s.cutlass_limit() == Some(limit)),
                "{limit:?} marks no entry"
            );
        }
        let q: Vec<&KernelSpec> = all
            .iter()
            .filter(|s| {
                matches!(
                    s.kernel_schedule,
                    KernelSchedule::Sm120Mxf8f6f4Cooperative
                        | KernelSchedule::Sm120Mxf8f6f4Pingpong
                )
            })
            .collect();
        assert!(!q.is_empty());
        for s in q {
            let refused = s.cutlass_limit() == Some(CutlassLimit::Sm120Mxf8f6f4Stages);
            assert_eq!(refused, s.tile != [128, 128, 128], "{}", s.name());
        }
        assert!(CutlassLimit::SparseU8
            .to_string()
            .contains("sm1xx_sparse_config.inl:92"));
    }
}
