//! Compiles one SM100 block-scaled (2SM), one SM100 f8f6f4 and one SM120 entry, and their
//! fused-epilogue twins, to PTX with the bootstrapped nvcc (`cutlass-profiler census`) and checks
//! the MMA instruction each contains
//! against the kind, CTA group and scale-vector size the seed's tables imply. Runs in CI (no GPU
//! needed: PTX only).

mod census_support;
use census_support::run_census;

const ENTRIES: [&str; 3] = [
    "cutlass3x_sm100_bstensorop_gemm_ue8m0xe2m1_ue8m0xe2m1_f32_f16_f16_256x256x256_2x1x1_0_tnt_align32_o_vs32_2sm_epi_tma",
    "cutlass3x_sm100_tensorop_gemm_e2m1_e4m3_f32_f16_f16_128x128x128_1x1x1_0_tnt_align128_1sm",
    "cutlass3x_sm120_bstensorop_gemm_ue8m0xe4m3_ue8m0xe4m3_f32_f16_f16_128x128x128_1x1x1_0_tnt_align16_warpspecialized_cooperative",
];

#[test]
fn blackwell_entries_compile_to_the_expected_mma() {
    let names: Vec<String> = {
        let all: Vec<String> = cutlass_gemm_catalog::catalog::all()
            .iter()
            .map(|s| s.name())
            .collect();
        ENTRIES
            .iter()
            .map(|n| {
                assert!(all.iter().any(|a| a == n), "{n} is not in the catalog");
                n.to_string()
            })
            .collect()
    };
    let (text, rows) = run_census("census-ci.tsv", &["--filter", &names.join(",")]);
    // A name without a glob matches as a substring: the entries' fused-epilogue twins
    // (`..._evt_scale_bias{type}_act`, one each) compile too.
    let twins = cutlass_gemm_catalog::catalog::all()
        .into_iter()
        .filter(|s| {
            let plain = cutlass_gemm_catalog::KernelSpec {
                fusion: cutlass_gemm_catalog::Fusion::LinearCombination,
                ..*s
            };
            s.fusion.is_fused() && ENTRIES.contains(&plain.name().as_str())
        })
        .count();
    assert_eq!(twins, 3);
    assert_eq!(rows.len(), ENTRIES.len() + twins, "{text}");
    for r in &rows {
        assert_eq!(r[1], "pass", "{} failed to compile: {}", r[0], r[3]);
        assert_eq!(r[4], "1", "{}: found {}, expected {}", r[0], r[3], {
            let spec = cutlass_gemm_catalog::catalog::find(&r[0]).unwrap();
            cutlass_gemm_catalog::catalog::expected_mma(&spec)
        });
        println!("{}\t{}", r[0], r[3]);
    }
}
