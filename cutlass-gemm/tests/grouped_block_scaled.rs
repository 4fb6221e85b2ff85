//! Grouped block-scaled plans (SM100/SM120 MXFP8 and NVFP4) on any machine: where each group's
//! scale factors lie, and the typed errors of planning in a build without such kernels.

use cutlass_gemm::formats::scale_layout::ScaleFactorLayout;
use cutlass_gemm::{
    BuildHint, DeviceInfo, Error, GroupedBlockFormat, GroupedBlockScaledGemm, GroupedProblem,
    GroupedScaleLayout, KernelRule,
};
use cutlass_gemm_catalog::Family;
use half::bf16;
use proptest::prelude::*;

const B200: DeviceInfo = DeviceInfo {
    ordinal: 0,
    compute_capability: (10, 0),
    sm_count: 148,
};

/// The byte ranges of every group's scale factors of A for these rows per group.
fn ranges_a(layout: &GroupedScaleLayout, offsets: &[usize]) -> Vec<(usize, usize)> {
    offsets
        .windows(2)
        .enumerate()
        .map(|(g, w)| {
            let start = layout.group_a(g, w[0]);
            (start, start + layout.group_len(w[1] - w[0]))
        })
        .collect()
}

#[test]
fn a_worked_example_of_the_contiguous_layout() {
    // NVFP4, k = 4096: 256 scale columns (already a multiple of 4), 32 KiB per 128 rows.
    let p = GroupedProblem::contiguous(3, 300, 512, 4096);
    let l = GroupedScaleLayout::new(&p, GroupedBlockFormat::Nvfp4);
    assert_eq!(l.cols, 256);
    assert_eq!(l.row_block(), 32768);
    // Offsets 0, 1, 200, 300: group 0 (1 row) takes block 0, group 1 (199 rows, starting at row 1)
    // blocks 1-2, group 2 (100 rows, starting at row 200) block 200 / 128 + 2 = 3.
    assert_eq!(
        ranges_a(&l, &[0, 1, 200, 300]),
        [(0, 32768), (32768, 98304), (98304, 131072)]
    );
    // ceil(300 / 128) + 3 - 1 = 5 blocks of A; 4 blocks per weight of 512 rows.
    assert_eq!(l.lens(), (5 * 32768, 3 * 4 * 32768));
    assert_eq!(l.group_b(2), 8 * 32768);
    // MXFP8, k = 100: ceil(100 / 32) = 4 columns; k = 160: 5, padded to 8.
    let mx = |k| {
        GroupedScaleLayout::new(
            &GroupedProblem::contiguous(1, 1, 16, k),
            GroupedBlockFormat::Mxfp8,
        )
        .cols
    };
    assert_eq!((mx(100), mx(160)), (4, 8));
}

proptest! {
    /// However the rows fall into groups (empty ones included), each group's scale factors of A
    /// are whole row blocks of their own, inside the buffer the layout asks for; likewise the
    /// weights' and the masked layout's.
    #[test]
    fn group_scale_factors_never_overlap_and_fit(
        sizes in prop::collection::vec(0usize..400, 1..24),
        k in 1usize..3000,
        n in 1usize..700,
        nvfp4 in any::<bool>(),
    ) {
        let format = if nvfp4 { GroupedBlockFormat::Nvfp4 } else { GroupedBlockFormat::Mxfp8 };
        let rows: usize = sizes.iter().sum::<usize>().max(1);
        let groups = sizes.len();
        let mut offsets = vec![0];
        for s in &sizes {
            offsets.push(offsets.last().unwrap() + s);
        }
        for problem in [
            GroupedProblem::contiguous(groups, rows, n, k),
            GroupedProblem::masked(groups, *sizes.iter().max().unwrap().max(&1), n, k),
        ] {
            let l = GroupedScaleLayout::new(&problem, format);
            // A group's share is the size of CUTLASS's layout (as this crate's quantizers write
            // it) for a tensor of that many rows: ScaleFactorLayout, an independent model of
            // Sm1xxBlockScaledConfig.
            for rows in [1, 127, 128, 129, sizes[0], n] {
                prop_assert_eq!(
                    l.group_len(rows),
                    ScaleFactorLayout::new(rows, k, 1, format.vec()).size()
                );
            }
            let (len_a, len_b) = l.lens();
            let a = if matches!(problem.layout, cutlass_gemm::GroupedLayout::Masked { .. }) {
                (0..groups).map(|g| (l.group_a(g, 0), l.group_a(g, 0) + l.group_len(sizes[g]))).collect()
            } else {
                ranges_a(&l, &offsets)
            };
            let b: Vec<(usize, usize)> = (0..groups).map(|g| (l.group_b(g), l.group_b(g) + l.group_len(n))).collect();
            for (ranges, len) in [(a, len_a), (b, len_b)] {
                for (i, r) in ranges.iter().enumerate() {
                    prop_assert!(r.1 <= len, "group {} ends at {} past {}", i, r.1, len);
                    for s in &ranges[i + 1..] {
                        prop_assert!(r.1 <= s.0 || s.1 <= r.0 || r.0 == r.1 || s.0 == s.1, "{:?} overlaps {:?}", r, s);
                    }
                }
            }
        }
    }
}

#[test]
fn a_plan_takes_a_kernel_of_the_format_or_says_how_to_build_one() {
    let p = GroupedProblem::contiguous(8, 1024, 4096, 4096);
    for (format, vec) in [
        (GroupedBlockFormat::Nvfp4, 16),
        (GroupedBlockFormat::Mxfp8, 32),
    ] {
        let built = cutlass_gemm::built_grouped_kernels().iter().any(|k| {
            k.spec.arch == cutlass_gemm_catalog::Arch::Sm100a
                && k.spec.block_scale.is_some_and(|b| b.vec == vec)
                && k.spec.d.ty == cutlass_gemm_catalog::DataType::Bf16
        });
        let plan = GroupedBlockScaledGemm::<bf16>::plan(B200, &p, format, None);
        match (built, plan) {
            (true, Ok(g)) => {
                assert!(
                    g.kernel_name().contains("_bstensorop_gemm_grouped_"),
                    "{}",
                    g.kernel_name()
                );
                assert_eq!(g.format(), format);
                assert!(g.workspace_size() > 0);
            }
            // The default build has none; the sm100 family has NVFP4 and MXFP8 ones.
            (false, Err(Error::NoKernel { build_with, .. })) => {
                assert_eq!(build_with, BuildHint::Feature(Family::Sm100), "{format:?}")
            }
            (built, other) => panic!("{format:?} (built: {built}): {other:?}"),
        }
    }
}

#[test]
fn a_named_kernel_without_block_scales_is_refused() {
    let p = GroupedProblem::contiguous(8, 1024, 4096, 4096);
    let Some(plain) = cutlass_gemm::built_grouped_kernels().iter().find(|k| {
        k.spec.block_scale.is_none() && k.spec.d.ty == cutlass_gemm_catalog::DataType::Bf16
    }) else {
        panic!("the default build has bf16 grouped kernels");
    };
    let err = GroupedBlockScaledGemm::<bf16>::plan_any_arch(B200, &p, plain.name).unwrap_err();
    assert!(
        matches!(
            err,
            Error::KernelMismatch {
                reason: KernelRule::NoBlockScales,
                ..
            }
        ),
        "{err}"
    );
}
