//! Grouped GEMM plans on described devices, on any machine: the kernel choice, the rules checked
//! before a launch, the host checks of offsets and counts, and the grouped host reference on a
//! problem small enough to work out by hand.

use cutlass_gemm::numeric::E4M3;
use cutlass_gemm::plans::grouped::SWAPPED_ROWS;
use cutlass_gemm::reference;
use cutlass_gemm::{
    DeviceInfo, Error, Extent, GroupRowsRule, GroupedGemm, GroupedProblem, KernelRule, OperandName,
    ProblemRule, Quantity,
};
use half::{bf16, f16};

const H100: DeviceInfo = DeviceInfo {
    ordinal: 0,
    compute_capability: (9, 0),
    sm_count: 132,
};
const A100: DeviceInfo = DeviceInfo {
    ordinal: 0,
    compute_capability: (8, 0),
    sm_count: 108,
};

fn tile(name: &str) -> [u32; 3] {
    cutlass_gemm_catalog::catalog::find(name).unwrap().tile
}

#[test]
fn the_choice_follows_the_rows_per_group() {
    let pick = |p: GroupedProblem| {
        let g = GroupedGemm::<bf16, bf16>::plan(H100, &p, None).unwrap();
        assert!(g.kernel_name().contains("_gemm_grouped_"));
        assert!(g.workspace_size() > 0);
        let t = tile(g.kernel_name());
        (t[0], t[1], g.kernel_name().contains("pingpong"))
    };
    // Decode: up to SWAPPED_ROWS rows per expert, the swapped 64x16x128 pingpong kernel (a
    // column-major D: each group's rows on its N side); up to 64, the 64x128 pingpong tile.
    let swapped = |p: GroupedProblem| {
        let g = GroupedGemm::<bf16, bf16>::plan(H100, &p, None).unwrap();
        let spec = cutlass_gemm_catalog::catalog::find(g.kernel_name()).unwrap();
        spec.d.layout == cutlass_gemm::Layout::ColumnMajor
    };
    assert_eq!(SWAPPED_ROWS, 8);
    for (groups, rows, expected) in [(256, 64 * 8, 2), (8, 64, 8), (128, 1, 1), (8, 8 * 8 + 1, 9)] {
        let p = GroupedProblem::contiguous(groups, rows, 2048, 7168);
        assert_eq!(p.rows_per_group(), expected);
        assert_eq!(
            swapped(p),
            expected <= SWAPPED_ROWS,
            "{expected} rows per group"
        );
        let want = if expected <= SWAPPED_ROWS {
            (64, 16, true)
        } else {
            (64, 128, true)
        };
        assert_eq!(pick(p), want, "{expected} rows per group");
    }
    assert_eq!(
        pick(GroupedProblem::contiguous(8, 8 * 64, 2048, 7168)),
        (64, 128, true)
    );
    // 65 to 128 rows: 64x256 pingpong; more: 128x256 cooperative.
    assert_eq!(
        pick(GroupedProblem::contiguous(8, 8 * 100, 4096, 4096)),
        (64, 256, true)
    );
    assert_eq!(
        pick(GroupedProblem::contiguous(8, 8 * 200, 4096, 4096)),
        (128, 256, false)
    );
    assert_eq!(
        pick(GroupedProblem::contiguous(8, 8 * 2048, 14336, 4096)),
        (128, 256, false)
    );
    // The masked layout's hint.
    let masked = GroupedProblem::masked(128, 4096, 768, 2048);
    assert_eq!(pick(masked), (128, 256, false));
    assert_eq!(pick(masked.with_expected_rows(16)), (64, 128, true));
    assert_eq!(pick(masked.with_expected_rows(4)), (64, 16, true));
    // f16 the same; e4m3 has no 64x256 tile: 128x128 cooperative (cluster 1x2x1) past 64 rows.
    let g = GroupedGemm::<f16, f16>::plan(
        H100,
        &GroupedProblem::contiguous(8, 8 * 100, 4096, 4096),
        None,
    )
    .unwrap();
    assert_eq!(tile(g.kernel_name())[..2], [64, 256]);
    let g = GroupedGemm::<E4M3, bf16>::plan(
        H100,
        &GroupedProblem::contiguous(8, 8 * 100, 4096, 4096),
        None,
    )
    .unwrap();
    let spec = cutlass_gemm_catalog::catalog::find(g.kernel_name()).unwrap();
    assert_eq!((spec.tile, spec.cluster), ([128, 128, 128], [1, 2, 1]));
    let g = GroupedGemm::<E4M3, bf16>::plan(
        H100,
        &GroupedProblem::contiguous(8, 8 * 10, 4096, 4096),
        None,
    )
    .unwrap();
    assert_eq!(tile(g.kernel_name())[..2], [64, 128]);
    // e4m3 at decode: its swapped tile, 128x16x128 cooperative.
    let g = GroupedGemm::<E4M3, bf16>::plan(
        H100,
        &GroupedProblem::contiguous(8, 8 * 2, 4096, 4096),
        None,
    )
    .unwrap();
    let spec = cutlass_gemm_catalog::catalog::find(g.kernel_name()).unwrap();
    assert_eq!(spec.tile, [128, 16, 128]);
    assert_eq!(spec.d.layout, cutlass_gemm::Layout::ColumnMajor);
}

#[test]
fn plans_refuse_what_no_kernel_serves() {
    let p = GroupedProblem::contiguous(8, 64, 256, 256);
    // An output type no grouped kernel writes.
    let err = GroupedGemm::<bf16, f32>::plan(H100, &p, None).unwrap_err();
    assert!(matches!(err, Error::NoKernel { .. }), "{err}");
    // A device that cannot run SM90 kernels.
    let err = GroupedGemm::<bf16, bf16>::plan(A100, &p, None).unwrap_err();
    assert!(matches!(err, Error::NoKernel { .. }), "{err}");
    // A named kernel that is not grouped, or of other types.
    let plain = "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_2x1x1_0_tnt_align8_warpspecialized_cooperative_epi_tma";
    let err = GroupedGemm::<bf16, bf16>::plan(H100, &p, Some(plain)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::KernelMismatch {
                reason: KernelRule::Grouped { kernel: false },
                ..
            }
        ),
        "{err}"
    );
    let f16_kernel = cutlass_gemm::built_grouped_kernels()
        .iter()
        .find(|k| k.spec.a.ty == cutlass_gemm::DataType::F16)
        .unwrap()
        .name;
    let err = GroupedGemm::<bf16, bf16>::plan(H100, &p, Some(f16_kernel)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::KernelMismatch {
                reason: KernelRule::Operand {
                    operand: OperandName::A,
                    ..
                },
                ..
            }
        ),
        "{err}"
    );
    let err = GroupedGemm::<bf16, bf16>::plan(A100, &p, Some(f16_kernel)).unwrap_err();
    assert!(matches!(err, Error::KernelMismatch { .. }), "{err}");
    // And a plain GEMM naming a grouped kernel.
    let err = cutlass_gemm::Gemm::<f16, f16, f16>::plan(
        H100,
        &cutlass_gemm::GemmProblem::new(64, 256, 256),
        Some(f16_kernel),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::KernelMismatch {
                reason: KernelRule::Grouped { kernel: true },
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn plans_check_extents_and_alignment() {
    let ok = GroupedProblem::contiguous(8, 64, 256, 256);
    let check = |p: GroupedProblem| GroupedGemm::<bf16, bf16>::plan(H100, &p, None).unwrap_err();
    let err = check(GroupedProblem { groups: 0, ..ok });
    assert!(
        matches!(
            err,
            Error::InvalidProblem {
                reason: ProblemRule::ZeroExtent(Extent::Groups)
            }
        ),
        "{err}"
    );
    let err = check(GroupedProblem::contiguous(8, 0, 256, 256));
    assert!(
        matches!(
            err,
            Error::InvalidProblem {
                reason: ProblemRule::ZeroExtent(Extent::M)
            }
        ),
        "{err}"
    );
    // k off A's 8-element (16-byte) alignment; n off D's.
    let err = check(GroupedProblem::contiguous(8, 64, 256, 100));
    assert!(
        matches!(
            err,
            Error::Misaligned {
                operand: OperandName::A,
                what: Quantity::Extent(Extent::K),
                value: 100,
                required: 8
            }
        ),
        "{err}"
    );
    let err = check(GroupedProblem::contiguous(8, 64, 250, 256));
    assert!(
        matches!(
            err,
            Error::Misaligned {
                operand: OperandName::D,
                what: Quantity::Extent(Extent::N),
                ..
            }
        ),
        "{err}"
    );
    // e4m3 needs k a multiple of 16.
    let err =
        GroupedGemm::<E4M3, bf16>::plan(H100, &GroupedProblem::contiguous(8, 64, 256, 72), None)
            .unwrap_err();
    assert!(
        matches!(err, Error::Misaligned { required: 16, .. }),
        "{err}"
    );
    let err = check(GroupedProblem {
        alpha: f32::NAN,
        ..ok
    });
    assert!(
        matches!(
            err,
            Error::InvalidProblem {
                reason: ProblemRule::NonFiniteScalars { .. }
            }
        ),
        "{err}"
    );
    let err = check(GroupedProblem::masked(1 << 30, 1 << 30, 1 << 30, 1 << 30));
    assert!(
        matches!(
            err,
            Error::InvalidProblem {
                reason: ProblemRule::OperandReachOverflows { .. }
            }
        ),
        "{err}"
    );
}

#[test]
fn host_offsets_and_counts_are_checked() {
    let p = GroupedProblem::contiguous(3, 10, 256, 256);
    let g = GroupedGemm::<bf16, bf16>::plan(H100, &p, None).unwrap();
    g.check_group_rows(&[0, 4, 4, 10]).unwrap();
    g.check_group_rows(&[2, 4, 4, 7]).unwrap();
    let rule = |rows: &[i32]| match g.check_group_rows(rows).unwrap_err() {
        Error::InvalidProblem { reason } => reason,
        other => panic!("{other}"),
    };
    assert_eq!(
        rule(&[0, 4, 10]),
        ProblemRule::GroupRowsLength {
            found: 3,
            required: 4
        }
    );
    assert_eq!(
        rule(&[0, 5, 4, 10]),
        ProblemRule::GroupRows {
            index: 2,
            value: 4,
            rule: GroupRowsRule::Decreasing { previous: 5 }
        }
    );
    assert_eq!(
        rule(&[-1, 5, 6, 10]),
        ProblemRule::GroupRows {
            index: 0,
            value: -1,
            rule: GroupRowsRule::Negative
        }
    );
    assert_eq!(
        rule(&[0, 5, 6, 11]),
        ProblemRule::GroupRows {
            index: 3,
            value: 11,
            rule: GroupRowsRule::PastEnd { limit: 10 }
        }
    );
    // Masked: counts up to the capacity, in any order.
    let m = GroupedProblem::masked(3, 8, 256, 256);
    let g = GroupedGemm::<bf16, bf16>::plan(H100, &m, None).unwrap();
    g.check_group_rows(&[8, 0, 3]).unwrap();
    assert!(matches!(
        g.check_group_rows(&[8, 9, 3]).unwrap_err(),
        Error::InvalidProblem {
            reason: ProblemRule::GroupRows {
                index: 1,
                rule: GroupRowsRule::PastEnd { limit: 8 },
                ..
            }
        }
    ));
    assert!(g.check_group_rows(&[1, 2, 3, 4]).is_err());
}

/// The grouped reference on a problem worked out by hand: two groups of a contiguous layout (rows
/// 0..1 and 1..3 of A), k = 2, n = 2; per-group alphas; beta with C. And the device's clamping of
/// offsets, reproduced: an end past the rows stops at the rows.
#[test]
fn the_grouped_reference_by_hand() {
    let p = GroupedProblem::contiguous(2, 3, 2, 2).with_scalars(1.0, 1.0);
    let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    // Weights: group 0 [[1, 0], [0, 1]] (identity), group 1 [[1, 1], [2, 0]] (rows are n).
    let b = [1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 0.0];
    let c = [10.0f32; 6];
    let refs = reference::grouped(&p, &a, &b, &[0, 1, 3], Some(&[2.0, 0.5]), Some(&c[..])).unwrap();
    // Group 0: 2 * [1, 2] + 10; group 1: 0.5 * [[3+4, 2*3], [5+6, 2*5]] + 10.
    assert_eq!(refs[0].d_offset, 0);
    assert_eq!(refs[0].reference.as_ref().unwrap().value, [12.0, 14.0]);
    assert_eq!(refs[1].d_offset, 2);
    assert_eq!(
        refs[1].reference.as_ref().unwrap().value,
        [13.5, 13.0, 15.5, 15.0]
    );
    // Offsets past the rows are clamped as on the device: group 1 keeps rows 1..3.
    let refs =
        reference::grouped(&p, &a, &b, &[0, 1, 99], Some(&[2.0, 0.5]), Some(&c[..])).unwrap();
    assert_eq!(refs[1].reference.as_ref().unwrap().shape.0, 2);
    // Masked: group g's rows start at g * capacity; counts clamp to it.
    let m = GroupedProblem::masked(2, 2, 2, 2);
    let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
    let refs = reference::grouped(&m, &a, &b, &[1, 7], None, None::<&[f32]>).unwrap();
    assert_eq!(refs[0].reference.as_ref().unwrap().value, [1.0, 2.0]);
    assert_eq!(refs[1].d_offset, 4);
    // Group 1 rows [5, 6] and [7, 8] times [[1, 1], [2, 0]]ᵀ.
    assert_eq!(
        refs[1].reference.as_ref().unwrap().value,
        [11.0, 10.0, 15.0, 14.0]
    );
}

#[test]
fn list_plans_check_the_group_count() {
    use cutlass_gemm::GroupedListGemm;
    let err = GroupedListGemm::<bf16, bf16>::plan(H100, 0, 8, None).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidProblem {
                reason: ProblemRule::ZeroExtent(Extent::Groups)
            }
        ),
        "{err}"
    );
    let g = GroupedListGemm::<bf16, bf16>::plan(H100, 16, 8, None).unwrap();
    assert_eq!(tile(g.kernel_name())[0], 64);
    // The kernel's workspace, then a 88-byte entry per problem.
    assert!(g.workspace_size() >= 16 * 88);
    assert!(g.clone().with_alpha(f32::INFINITY).is_err());
}

#[test]
fn blockwise_plans_choose_among_the_blockwise_kernels() {
    use cutlass_gemm::GroupedBlockwiseGemm;
    let spec = |name: &str| cutlass_gemm_catalog::catalog::find(name).unwrap();
    // Prefill: the cooperative 128x128 tile; decode: the 64x128 pingpong tile. Both take
    // K-major scales (`_sfk`), and the scale counts follow the layout.
    let p = GroupedProblem::contiguous(8, 8 * 512, 4096, 7168);
    let g = GroupedBlockwiseGemm::<bf16>::plan(H100, &p, None).unwrap();
    let s = spec(g.kernel_name());
    assert!(s.blockwise.is_some() && g.kernel_name().ends_with("_sfk"));
    assert_eq!((s.tile, s.cluster), ([128, 128, 128], [1, 2, 1]));
    assert_eq!(g.scale_lens(), (8 * 512 * 56, 8 * 32 * 56));
    let p = GroupedProblem::masked(256, 16, 2048, 7168).with_expected_rows(4);
    let g = GroupedBlockwiseGemm::<bf16>::plan(H100, &p, None).unwrap();
    assert_eq!(spec(g.kernel_name()).tile, [64, 128, 128]);
    // Masked: every group's capacity has scale rows; k and n not multiples of 128 round up.
    let p = GroupedProblem::masked(3, 10, 200, 272);
    let g = GroupedBlockwiseGemm::<bf16>::plan(H100, &p, None).unwrap();
    assert_eq!(g.scale_lens(), (3 * 10 * 3, 3 * 2 * 3));
    // A plain e4m3 grouped plan never picks a blockwise kernel, and naming one is refused
    // either way round.
    let plain = GroupedGemm::<E4M3, bf16>::plan(H100, &p, None).unwrap();
    assert!(spec(plain.kernel_name()).blockwise.is_none());
    let err = GroupedGemm::<E4M3, bf16>::plan(H100, &p, Some(g.kernel_name())).unwrap_err();
    assert!(
        matches!(
            err,
            Error::KernelMismatch {
                reason: KernelRule::Blockwise,
                ..
            }
        ),
        "{err}"
    );
    let err = GroupedBlockwiseGemm::<bf16>::plan(H100, &p, Some(plain.kernel_name())).unwrap_err();
    assert!(
        matches!(
            err,
            Error::KernelMismatch {
                reason: KernelRule::NotBlockwise,
                ..
            }
        ),
        "{err}"
    );
    // k must keep each row of A 16-byte aligned (e4m3: a multiple of 16).
    let err =
        GroupedBlockwiseGemm::<bf16>::plan(H100, &GroupedProblem::contiguous(2, 8, 256, 200), None)
            .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Misaligned {
                operand: OperandName::A,
                what: Quantity::Extent(Extent::K),
                ..
            }
        ),
        "{err}"
    );
    // No blockwise kernel writes f32, and none runs on an A100.
    let p = GroupedProblem::contiguous(2, 8, 256, 256);
    let err = GroupedBlockwiseGemm::<f32>::plan(H100, &p, None).unwrap_err();
    assert!(matches!(err, Error::NoKernel { .. }), "{err}");
    let err = GroupedBlockwiseGemm::<bf16>::plan(A100, &p, None).unwrap_err();
    assert!(matches!(err, Error::NoKernel { .. }), "{err}");
}

#[test]
fn the_grouped_blockwise_reference_by_hand() {
    // Two groups of one weight each (n = 2, k = 130: two k-blocks, the second of 2 elements).
    let e = |v: f32| E4M3::from_f32(v);
    let (n, k) = (2, 130);
    let p = GroupedProblem::contiguous(2, 3, n, k);
    // A: row r is r + 1 in the first k-block and 1 in the second; scales 2 and 0.5 per row.
    let a: Vec<E4M3> = (0..3 * k)
        .map(|i| {
            if i % k < 128 {
                e((i / k + 1) as f32)
            } else {
                e(1.0)
            }
        })
        .collect();
    let sa = [2.0f32, 0.5, 2.0, 0.5, 2.0, 0.5];
    // Weights all ones; group 0's scales 1 and 4, group 1's 0.25 and 1 (one block row each).
    let b = vec![e(1.0); 2 * n * k];
    let sb = [1.0f32, 4.0, 0.25, 1.0];
    let refs = reference::grouped_blockwise(&p, &a, &sa, &b, &sb, &[0, 1, 3], None, None::<&[f32]>)
        .unwrap();
    // Row r of group g: 128 * (r + 1) * 2 * sb[g][0] + 2 * 1 * 0.5 * sb[g][1].
    assert_eq!(refs[0].reference.as_ref().unwrap().value, [260.0, 260.0]);
    assert_eq!(
        refs[1].reference.as_ref().unwrap().value,
        [129.0, 129.0, 193.0, 193.0]
    );
    // Short scales are refused, naming them.
    let err =
        reference::grouped_blockwise(&p, &a, &sa[..5], &b, &sb, &[0, 1, 3], None, None::<&[f32]>)
            .unwrap_err();
    assert!(
        matches!(
            err,
            Error::BufferTooSmall {
                operand: OperandName::ScalesA,
                ..
            }
        ),
        "{err}"
    );
}
