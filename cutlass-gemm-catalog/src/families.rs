//! Named sets of catalog entries: the kernel families that the crates' cargo features select, and
//! the presets that `CUTLASS_RS_KERNELS` accepts besides name patterns.
//!
//! | family (cargo feature) | architecture | entries |
//! |---|---|---|
//! | `bf16`, `f16` | SM90 | the default set's kernels with inputs of that type |
//! | `fp8` | SM90 | the default set's FP8 tensor-wise kernels (e4m3 x e4m3 -> bf16) |
//! | `fp8-blockwise` | SM90 | the default set's FP8 kernels with 1x128 x 128x128 blockwise scales |
//! | `tf32`, `i8` | SM90 | every tf32 (dense s8) entry of the catalog |
//! | `sm100`, `sm120` | SM100, SM120 | a starter set of block-scaled and narrow-precision kernels |
//! | `weight-only` | SM90 | 4-bit, FP8 and int8 weights times bf16/f16 activations ([`crate::catalog::is_default_weight_only`]) |
//!
//! | preset | entries |
//! |---|---|
//! | `default` | [`crate::catalog::is_default`]: the `bf16`, `f16`, `fp8` and `fp8-blockwise` families |
//! | `gpu-tests` | what the GPU tests run: the default set, the `tf32`, `i8`, `sm100`, `sm120` and `weight-only` families, [`GPU_TEST_KERNELS`] and the f32-bias kernels ([`crate::catalog::f32_bias_epilogue`]) |

use crate::catalog::{self, is_default, is_default_weight_only};
use crate::spec::KernelSpec;
use crate::types::{Arch, DataType};

/// A family of kernels that a cargo feature of `cutlass-gemm` (and `cutlass-gemm-sys`) builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// SM90 bf16 x bf16 kernels of the default set.
    Bf16,
    /// SM90 f16 x f16 kernels of the default set.
    F16,
    /// SM90 FP8 tensor-wise kernels of the default set.
    Fp8,
    /// SM90 FP8 kernels with blockwise scales of the default set.
    Fp8Blockwise,
    /// Every SM90 tf32 entry.
    Tf32,
    /// Every SM90 s8 x s8 entry (not the weight-only kernels' s8 weights).
    I8,
    /// SM100 block-scaled and narrow-precision kernels (the names in [`SM100_STARTER`]).
    Sm100,
    /// SM120 block-scaled kernels (the names in [`SM120_STARTER`]).
    Sm120,
    /// SM90 weight-only kernels: s4, u4, e4m3 and s8 weights times bf16 and f16 activations
    /// ([`crate::catalog::SM90_TILES_WEIGHT_ONLY`]).
    WeightOnly,
}

/// The SM100 kernels of the `sm100` family (each of them whose epilogue takes it also with the
/// fused epilogue, [`crate::catalog::sm1xx_fused`]): NVFP4 and MXFP4 to f16, block-scaled NVFP4 outputs
/// from NVFP4 and MXFP4 inputs, and plain e2m1 x e4m3 (CUTLASS's Blackwell narrow-precision walkthrough among them);
/// grouped bf16 (1SM), e4m3 (2SM), MXFP8 and NVFP4 (1SM) to bf16 ([`crate::catalog::sm1xx_grouped`]);
/// weight-only s4 (1SM) and u4 with zeros (2SM) times bf16, groups of 128
/// ([`crate::catalog::sm100_weight_only`]).
pub const SM100_STARTER: &[&str] = &[
    "cutlass3x_sm100_bstensorop_gemm_ue4m3xe2m1_ue4m3xe2m1_f32_f16_f16_128x128x256_1x1x1_0_tnt_align32_o_vs16_1sm",
    "cutlass3x_sm100_bstensorop_gemm_ue4m3xe2m1_ue4m3xe2m1_f32_f16_ue4m3xe2m1_256x256x256_2x1x1_0_tnt_align32_o_vs16_2sm_epi_tma_epiVs16t",
    "cutlass3x_sm100_bstensorop_gemm_ue8m0xe2m1_ue8m0xe2m1_f32_f16_f16_256x256x256_2x1x1_0_tnt_align32_o_vs32_2sm_epi_tma",
    "cutlass3x_sm100_bstensorop_gemm_ue8m0xe2m1_ue8m0xe2m1_f32_f16_ue4m3xe2m1_256x256x128_4x4x1_0_ntt_align128_q_2sm_epi_tma_epiVs16t",
    "cutlass3x_sm100_tensorop_gemm_e2m1_e4m3_f32_f16_f16_128x128x128_1x1x1_0_tnt_align128_1sm",
    "cutlass3x_sm100_tensorop_gemm_grouped_bf16_bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnt_align8_1sm",
    "cutlass3x_sm100_tensorop_gemm_grouped_e4m3_e4m3_f32_bf16_bf16_256x128x128_2x1x1_0_tnt_align16_2sm_epi_tma",
    "cutlass3x_sm100_bstensorop_gemm_grouped_ue8m0xe4m3_ue8m0xe4m3_f32_bf16_bf16_128x128x128_1x1x1_0_tnt_align16_o_vs32_1sm",
    "cutlass3x_sm100_bstensorop_gemm_grouped_ue4m3xe2m1_ue4m3xe2m1_f32_bf16_bf16_128x128x256_1x1x1_0_tnt_align32_o_vs16_1sm",
    "cutlass3x_sm100_tensorop_gemm_s4_bf16_f32_bf16_bf16_scl_g128_128x64x128_1x1x1_0_tnn_align32_1sm",
    "cutlass3x_sm100_tensorop_gemm_u4_bf16_f32_bf16_bf16_sclzr_g128_256x128x128_2x1x1_0_tnn_align32_2sm_epi_tma",
];

/// The SM120 kernels of the `sm120` family (and its fused twin): MXFP8 to f16; grouped NVFP4 to bf16.
pub const SM120_STARTER: &[&str] = &[
    "cutlass3x_sm120_bstensorop_gemm_ue8m0xe4m3_ue8m0xe4m3_f32_f16_f16_128x128x128_1x1x1_0_tnt_align16_warpspecialized_cooperative",
    "cutlass3x_sm120_bstensorop_gemm_grouped_ue4m3xe2m1_ue4m3xe2m1_f32_bf16_bf16_128x128x128_1x1x1_0_tnt_align32_warpspecialized_cooperative",
];

/// SM90 kernels the GPU tests run beyond the families: CUTLASS's own f32-promoting FP8 kernels
/// that the default set's overlapped ones are checked against bit for bit, the four layouts of the
/// 16-bit kernels with an f32 output, FP8 with other type pairs and outputs, and CUTLASS's other
/// FP8 schedules.
pub const GPU_TEST_KERNELS: &[&str] = &[
    "cutlass3x_sm90_tensorop_gemm_1x128f32xe4m3_128x128f32xe4m3_f32_bf16_bf16_128x128x128_1x2x1_0_tnt_align16_warpspecialized_cooperative_epi_tma",
    "cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_bf16_bf16_128x128x128_1x2x1_0_tnt_align16_warpspecialized_cooperative_epi_tma",
    "cutlass3x_sm90_tensorop_gemm_1x128f32xe4m3_128x128f32xe4m3_f32_f32_f32_128x128x128_1x2x1_0_tnt_align16_warpspecialized_cooperative_epi_tma",
    "cutlass3x_sm90_tensorop_gemm_1x128f32xe4m3_128x128f32xe5m2_f32_bf16_bf16_128x128x128_1x2x1_0_tnt_align16_warpspecialized_cooperative_epi_tma",
    "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_f32_f32_128x256x64_2x1x1_0_tnt_align8_warpspecialized_cooperative_epi_tma",
    "cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_bf16_bf16_128x128x128_1x2x1_0_tnt_align16_warpspecialized_epi_nosmem",
    "cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_bf16_bf16_128x256x128_1x2x1_0_tnt_align16_warpspecialized_cooperative_fp8_fastaccum_epi_tma",
    "cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_bf16_bf16_64x128x128_1x2x1_0_tnt_align16_warpspecialized_pingpong_fp8_fastaccum_epi_tma",
    "cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_f32_f32_128x128x128_1x2x1_0_tnt_align16_warpspecialized_cooperative_epi_tma",
    "cutlass3x_sm90_tensorop_gemm_e4m3_e5m2_f32_bf16_bf16_128x128x128_1x2x1_0_tnt_align16_warpspecialized_cooperative_epi_tma",
    "cutlass3x_sm90_tensorop_gemm_e5m2_e4m3_f32_bf16_bf16_128x128x128_1x2x1_0_tnt_align16_warpspecialized_cooperative_epi_tma",
    "cutlass3x_sm90_tensorop_gemm_e5m2_e5m2_f32_f16_f16_128x128x128_1x2x1_0_tnt_align16_warpspecialized_cooperative_epi_tma",
    "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_f32_f32_128x256x64_2x1x1_0_tnt_align8_warpspecialized_cooperative_epi_tma",
    // The f16 epilogues with an auxiliary output (catalog::SM90_TILES_AUX; bf16's are default).
    "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_f16_f16_128x256x64_2x1x1_0_tnt_align8_warpspecialized_cooperative_epi_tma_evt_biasf16_act_aux",
    "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_f16_f16_128x128x64_1x2x1_0_tnt_align8_warpspecialized_cooperative_epi_tma_evt_biasf16_act_aux",
    "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_f16_f16_64x128x64_1x2x1_0_tnt_align8_warpspecialized_pingpong_epi_tma_evt_biasf16_act_aux",
    // Split-K with a reduction: the f32 twins of catalog::SM90_MENU_16BIT_PARTIALS.
    "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_f32_f32_64x8x64_1x2x1_0_tnn_align8_warpspecialized_pingpong_epi_tma",
    "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_f32_f32_64x16x64_2x1x1_0_tnn_align8_warpspecialized_pingpong_epi_tma",
    "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_f32_f32_64x64x64_1x2x1_0_tnt_align8_warpspecialized_pingpong_epi_tma",
    "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_f32_f32_64x8x64_1x2x1_0_tnn_align8_warpspecialized_pingpong_epi_tma",
    "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_f32_f32_64x16x64_2x1x1_0_tnn_align8_warpspecialized_pingpong_epi_tma",
    "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_f32_f32_64x64x64_1x2x1_0_tnt_align8_warpspecialized_pingpong_epi_tma",
];

impl Family {
    /// Every family, in feature order.
    pub const ALL: [Family; 9] = [
        Family::Bf16,
        Family::F16,
        Family::Fp8,
        Family::Fp8Blockwise,
        Family::Tf32,
        Family::I8,
        Family::Sm100,
        Family::Sm120,
        Family::WeightOnly,
    ];

    /// The families of the crates' default features: together, the default set.
    pub const DEFAULT: [Family; 4] = [Family::Bf16, Family::F16, Family::Fp8, Family::Fp8Blockwise];

    /// The cargo feature that selects the family.
    pub fn feature(self) -> &'static str {
        match self {
            Family::Bf16 => "bf16",
            Family::F16 => "f16",
            Family::Fp8 => "fp8",
            Family::Fp8Blockwise => "fp8-blockwise",
            Family::Tf32 => "tf32",
            Family::I8 => "i8",
            Family::Sm100 => "sm100",
            Family::Sm120 => "sm120",
            Family::WeightOnly => "weight-only",
        }
    }

    /// The family a cargo feature names.
    pub fn from_feature(feature: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.feature() == feature)
    }

    /// The architecture of the family's kernels.
    pub fn arch(self) -> Arch {
        match self {
            Family::Sm100 => Arch::Sm100a,
            Family::Sm120 => Arch::Sm120a,
            _ => Arch::Sm90a,
        }
    }

    /// Whether the family holds this entry.
    pub fn contains(self, spec: &KernelSpec) -> bool {
        if spec.arch != self.arch() {
            return false;
        }
        let fp8 = |t: DataType| matches!(t, DataType::E4M3 | DataType::E5M2);
        match self {
            Family::Bf16 => is_default(spec) && spec.a.ty == DataType::Bf16,
            Family::F16 => is_default(spec) && spec.a.ty == DataType::F16,
            Family::Fp8 => is_default(spec) && fp8(spec.a.ty) && spec.blockwise.is_none(),
            Family::Fp8Blockwise => is_default(spec) && spec.blockwise.is_some(),
            Family::Tf32 => spec.a.ty == DataType::Tf32,
            // Dense s8 GEMMs (the int8 weights of the weight-only kernels are `weight-only`'s).
            Family::I8 => spec.a.ty == DataType::I8 && spec.mixed_input.is_none(),
            Family::WeightOnly => is_default_weight_only(spec),
            // The starter kernels, with CUTLASS's epilogue and with the fused one.
            Family::Sm100 | Family::Sm120 => {
                let starter = if self == Family::Sm100 {
                    SM100_STARTER
                } else {
                    SM120_STARTER
                };
                let plain = KernelSpec {
                    fusion: crate::Fusion::LinearCombination,
                    ..*spec
                };
                starter.contains(&plain.name().as_str())
            }
        }
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.feature())
    }
}

/// The families (of `families`) that hold this entry.
pub fn families_of(spec: &KernelSpec) -> Vec<Family> {
    Family::ALL
        .into_iter()
        .filter(|f| f.contains(spec))
        .collect()
}

/// A named set of kernels that `CUTLASS_RS_KERNELS` accepts among its patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Preset {
    /// The default set ([`is_default`]): what the default features build.
    Default,
    /// Everything the GPU tests run.
    GpuTests,
}

impl Preset {
    /// Every preset.
    pub const ALL: [Preset; 2] = [Preset::Default, Preset::GpuTests];

    /// The word that names the preset in `CUTLASS_RS_KERNELS`.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Default => "default",
            Preset::GpuTests => "gpu-tests",
        }
    }

    /// The preset a word names.
    pub fn parse(word: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| p.name() == word)
    }

    /// The architectures whose entries the preset holds: built with the preset unless
    /// `CUTLASS_RS_ARCHS` says otherwise.
    pub fn archs(self) -> &'static [Arch] {
        match self {
            Preset::Default => &[Arch::Sm90a],
            Preset::GpuTests => &[Arch::Sm90a, Arch::Sm100a, Arch::Sm120a],
        }
    }

    /// Whether the preset holds this entry.
    pub fn contains(self, spec: &KernelSpec) -> bool {
        match self {
            Preset::Default => is_default(spec),
            Preset::GpuTests => {
                is_default(spec)
                    || [
                        Family::Tf32,
                        Family::I8,
                        Family::Sm100,
                        Family::Sm120,
                        Family::WeightOnly,
                    ]
                    .iter()
                    .any(|f| f.contains(spec))
                    || GPU_TEST_KERNELS.contains(&spec.name().as_str())
                    || catalog::is_f32_bias_twin(spec)
            }
        }
    }
}

/// The entries of `families` for the architectures `archs`.
pub fn select_families(archs: &[Arch], families: &[Family]) -> Vec<KernelSpec> {
    catalog::all()
        .into_iter()
        .filter(|s| archs.contains(&s.arch) && families.iter().any(|f| f.contains(s)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_kernels_are_catalog_entries() {
        for name in SM100_STARTER
            .iter()
            .chain(SM120_STARTER)
            .chain(GPU_TEST_KERNELS)
        {
            assert!(
                catalog::find(name).is_some(),
                "{name} is not in the catalog"
            );
        }
    }

    #[test]
    fn default_families_make_the_default_set() {
        let all_archs = [Arch::Sm90a, Arch::Sm100a, Arch::Sm120a];
        let by_families = select_families(&all_archs, &Family::DEFAULT);
        let default: Vec<KernelSpec> = catalog::all().into_iter().filter(is_default).collect();
        assert_eq!(by_families, default);
        // Each default entry belongs to exactly one default family.
        for s in &default {
            let n = Family::DEFAULT.iter().filter(|f| f.contains(s)).count();
            assert_eq!(n, 1, "{}", s.name());
        }
    }

    #[test]
    fn every_family_is_non_empty_and_of_its_architecture() {
        for f in Family::ALL {
            let sel = select_families(&[f.arch()], &[f]);
            assert!(!sel.is_empty(), "{f}");
            assert!(sel.iter().all(|s| s.arch == f.arch()));
            assert_eq!(Family::from_feature(f.feature()), Some(f));
        }
        assert_eq!(select_families(&[Arch::Sm90a], &[Family::Sm100]), []);
    }

    #[test]
    fn gpu_tests_preset_holds_the_default_set_and_the_named_kernels() {
        let all = catalog::all();
        let gpu: Vec<&KernelSpec> = all
            .iter()
            .filter(|s| Preset::GpuTests.contains(s))
            .collect();
        assert!(all
            .iter()
            .filter(|s| is_default(s))
            .all(|s| Preset::GpuTests.contains(s)));
        assert!(gpu
            .iter()
            .all(|s| Preset::GpuTests.archs().contains(&s.arch)));
        // The starter kernels, and the fused twins of the dense SM100 ones with a plain D (1SM and
        // 2SM) and of the dense SM120 one.
        let sm1xx: Vec<&&KernelSpec> = gpu.iter().filter(|s| s.arch != Arch::Sm90a).collect();
        let fused = sm1xx.iter().filter(|s| s.fusion.is_fused()).count();
        assert_eq!(
            sm1xx.len() - fused,
            SM100_STARTER.len() + SM120_STARTER.len()
        );
        assert_eq!(
            fused,
            4,
            "{:?}",
            sm1xx.iter().map(|s| s.name()).collect::<Vec<_>>()
        );
        assert_eq!(Preset::parse("gpu-tests"), Some(Preset::GpuTests));
        assert_eq!(Preset::parse("nothing"), None);
    }
}
