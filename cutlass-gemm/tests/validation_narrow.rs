//! FP8 and block-scaled validation rules (tensor-wise, blockwise, MX/NVFP4), checked on any
//! machine with plans for described devices: each rule gets an input that breaks it, and the error
//! names the operand.

use cutlass_gemm::numeric::{E4M3, E5M2};
use cutlass_gemm::{
    Arch, BlockwiseGemm, DataType, DeviceInfo, Error, Gemm, GemmProblem, KernelRule, Layout,
    LayoutPairs, LayoutRule, MatrixLayout, OperandName, ProblemRule, Quantity,
};
use half::bf16;

const H100: DeviceInfo = DeviceInfo {
    ordinal: 0,
    compute_capability: (9, 0),
    sm_count: 132,
};
const RTX5090: DeviceInfo = DeviceInfo {
    ordinal: 0,
    compute_capability: (12, 0),
    sm_count: 170,
};

fn layouts(a: Layout, b: Layout, d: Layout) -> GemmProblem {
    let m = |l: Layout| match l {
        Layout::RowMajor => MatrixLayout::row_major(),
        Layout::ColumnMajor => MatrixLayout::col_major(),
    };
    GemmProblem::new(1000, 504, 1040)
        .with_a(m(a))
        .with_b(m(b))
        .with_c(m(d))
        .with_d(m(d))
}

const ROW: Layout = Layout::RowMajor;
const COL: Layout = Layout::ColumnMajor;

#[test]
fn fp8_plans_in_tn_with_either_output_order() {
    for d in [ROW, COL] {
        let g = Gemm::<E4M3, E4M3, bf16>::plan(H100, &layouts(ROW, COL, d), None).unwrap();
        let s = g.kernel_spec();
        assert_eq!(
            (s.a.ty, s.b.ty),
            (cutlass_gemm::DataType::E4M3, cutlass_gemm::DataType::E4M3)
        );
        assert_eq!(s.layout_name(), "TN");
        assert!(
            s.blockwise.is_none(),
            "a plain plan must not pick a blockwise kernel"
        );
        assert_eq!(g.is_swapped(), d == COL);
    }
}

#[test]
fn fp8_layouts_hopper_cannot_read_are_rejected_naming_the_operand() {
    // (A, B) layouts and the operand at fault, for both output orders.
    for d in [ROW, COL] {
        for (a, b, fault) in [
            (COL, COL, OperandName::A),
            (ROW, ROW, OperandName::B),
            (COL, ROW, OperandName::A),
        ] {
            match Gemm::<E4M3, E5M2, bf16>::plan(H100, &layouts(a, b, d), None).unwrap_err() {
                Error::UnsupportedLayout { operand, rule } => {
                    assert_eq!(operand, fault, "{a:?} {b:?} {d:?}: {rule}");
                    let layout = if fault == OperandName::A { a } else { b };
                    assert_eq!(
                        rule,
                        LayoutRule::KernelLayouts {
                            layout,
                            a: DataType::E4M3,
                            b: DataType::E5M2,
                            arch: Arch::Sm90a,
                            d,
                            allowed: [(ROW, COL)].into_iter().collect(),
                        },
                        "{a:?} {b:?} {d:?}"
                    );
                    let text = rule.to_string();
                    assert!(
                        text.contains("take TN only") && text.contains("K-major only"),
                        "{text}"
                    );
                }
                e => panic!("{a:?} {b:?} {d:?}: unexpected {e:?}"),
            }
        }
    }
}

#[test]
fn layout_rules_follow_the_catalog_of_the_device_architecture() {
    // SM120 (Tables 16-20) is TN-only for every type; the rule comes from the catalog's data.
    match Gemm::<E4M3, E4M3, bf16>::plan(RTX5090, &layouts(COL, ROW, ROW), None).unwrap_err() {
        Error::UnsupportedLayout {
            operand: OperandName::A,
            rule:
                LayoutRule::KernelLayouts {
                    layout,
                    arch,
                    allowed,
                    ..
                },
        } => {
            assert_eq!(layout, COL);
            assert_eq!(arch, Arch::Sm120a);
            assert_eq!(allowed, [(ROW, COL)].into_iter().collect::<LayoutPairs>());
        }
        e => panic!("unexpected {e:?}"),
    }
}

#[test]
fn integer_and_tf32_layout_rules_come_from_the_catalog() {
    use cutlass_gemm::numeric::Tf32;
    // s8 on Hopper: TN only, like FP8 (wgmma reads 8-bit operands K-major from shared memory).
    for (a, b, fault) in [(COL, COL, OperandName::A), (ROW, ROW, OperandName::B)] {
        match Gemm::<i8, i8, i32>::plan(H100, &layouts(a, b, ROW), None).unwrap_err() {
            Error::UnsupportedLayout {
                operand,
                rule: LayoutRule::KernelLayouts { allowed, .. },
            } => {
                assert_eq!(operand, fault, "{a:?} {b:?}");
                assert_eq!(allowed.iter().collect::<Vec<_>>(), [(ROW, COL)]);
                assert_eq!(allowed.to_string(), "TN");
            }
            e => panic!("s8 {a:?} {b:?}: unexpected {e:?}"),
        }
    }
    // tf32: TN, NT and NN; TT is not in the catalog.
    match Gemm::<Tf32, Tf32, f32>::plan(H100, &layouts(ROW, ROW, ROW), None).unwrap_err() {
        Error::UnsupportedLayout {
            rule: LayoutRule::KernelLayouts { allowed, .. },
            ..
        } => {
            for (a, b) in [(COL, COL), (COL, ROW), (ROW, COL)] {
                assert!(allowed.contains(a, b), "{allowed}");
            }
            assert!(!allowed.contains(ROW, ROW), "{allowed}");
            assert_eq!(allowed.to_string(), "NN, NT, TN");
        }
        e => panic!("tf32 TT: unexpected {e:?}"),
    }
    // The layouts the catalog has plan, or fail only because this build lacks the kernel.
    let tn = Gemm::<i8, i8, i32>::plan(H100, &layouts(ROW, COL, ROW), None);
    let nn = Gemm::<Tf32, Tf32, f32>::plan(H100, &layouts(COL, COL, ROW), None);
    for r in [tn.map(|g| g.kernel_name()), nn.map(|g| g.kernel_name())] {
        match r {
            Ok(name) => assert!(name.contains("_s8_s8_s32_") || name.contains("_tf32_tf32_")),
            Err(Error::NoKernel { .. }) => {}
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
}

#[test]
fn tensor_scales_fold_into_alpha() {
    let p = GemmProblem::new(64, 64, 64)
        .with_scalars(2.0, 0.0)
        .with_tensor_scales(0.25, 3.0);
    assert_eq!(p.alpha, 1.5);
}

fn bw(p: &GemmProblem) -> cutlass_gemm::Result<BlockwiseGemm<E4M3, E4M3, bf16>> {
    BlockwiseGemm::plan(H100, p, None)
}

#[test]
fn blockwise_plans_and_reports_its_scale_counts() {
    let g = bw(&GemmProblem::new(1000, 504, 1040).with_batch(2)).unwrap();
    assert!(g
        .kernel_name()
        .starts_with("cutlass3x_sm90_tensorop_gemm_1x128f32xe4m3_128x128f32xe4m3_"));
    // A: m * ceil(k/128) per batch; B: ceil(n/128) * ceil(k/128) per batch.
    assert_eq!(g.scale_lens(), (2 * 1000 * 9, 2 * 4 * 9));
    g.check_scale_lengths(2 * 1000 * 9, 2 * 4 * 9).unwrap();
    assert!(matches!(
        g.check_scale_lengths(2 * 1000 * 9 - 1, 2 * 4 * 9).unwrap_err(),
        Error::BufferTooSmall { operand: OperandName::ScalesA, len, required } if (len, required) == (17999, 18000)
    ));
    assert!(matches!(
        g.check_scale_lengths(2 * 1000 * 9, 2 * 4 * 9 - 1)
            .unwrap_err(),
        Error::BufferTooSmall {
            operand: OperandName::ScalesB,
            ..
        }
    ));
}

#[test]
fn blockwise_layout_and_shape_rules() {
    for (p, op, want) in [
        (
            layouts(ROW, COL, COL),
            OperandName::D,
            LayoutRule::BlockwiseRowMajorD,
        ),
        (
            layouts(COL, COL, ROW),
            OperandName::A,
            LayoutRule::BlockwiseRowMajorA,
        ),
        (
            layouts(ROW, ROW, ROW),
            OperandName::B,
            LayoutRule::BlockwiseColumnMajorB,
        ),
    ] {
        match bw(&p).unwrap_err() {
            Error::UnsupportedLayout { operand, rule } => {
                assert_eq!((operand, rule), (op, want))
            }
            e => panic!("unexpected {e:?}"),
        }
    }
    // m not a multiple of 4 (A's scales are loaded by TMA as M-major rows of m floats): the kernel
    // runs m = 1004 on padded copies of A, its scales and D.
    let g = bw(&GemmProblem::new(1002, 504, 1040)).unwrap();
    assert_eq!(
        g.plan_inner().staged_operands(),
        vec![OperandName::A, OperandName::D, OperandName::ScalesA]
    );
    // The scales keep the caller's layout and count.
    assert_eq!(g.scale_lens(), (1002 * 9, 4 * 9));
    // k off the 16-element alignment: A and B are padded to k = 1040 with zeros.
    let g = bw(&GemmProblem::new(1000, 504, 1032)).unwrap();
    assert_eq!(
        g.plan_inner().staged_operands(),
        vec![OperandName::A, OperandName::B]
    );
    assert!(g.workspace_size() >= (1000 + 504) * 1040);
}

#[test]
fn blockwise_and_plain_kernels_are_not_interchangeable() {
    let p = GemmProblem::new(256, 256, 256);
    let bw_name = bw(&p).unwrap().kernel_name();
    assert!(matches!(
        Gemm::<E4M3, E4M3, bf16>::plan(H100, &p, Some(bw_name)).unwrap_err(),
        Error::KernelMismatch {
            reason: KernelRule::Blockwise,
            ..
        }
    ));
    let plain = Gemm::<E4M3, E4M3, bf16>::plan(H100, &p, None).unwrap();
    assert!(matches!(
        BlockwiseGemm::<E4M3, E4M3, bf16>::plan(H100, &p, Some(plain.kernel_name())).unwrap_err(),
        Error::KernelMismatch {
            reason: KernelRule::NotBlockwise,
            ..
        }
    ));
}

#[test]
fn blockwise_scale_pointers_are_checked_before_the_kernel() {
    let g = bw(&GemmProblem::new(256, 256, 256)).unwrap();
    let (a, sa, b, sb, d) = (
        0x1000_0000u64,
        0x2000_0000u64,
        0x3000_0000u64,
        0x4000_0000u64,
        0x5000_0000u64,
    );
    // SAFETY: every call fails its checks before a pointer is used.
    unsafe {
        assert!(matches!(
            g.run_raw(a, sa + 4, b, sb, None, d, 0, 0, std::ptr::null_mut())
                .unwrap_err(),
            Error::Misaligned {
                operand: OperandName::ScalesA,
                what: Quantity::Pointer,
                value: 0x2000_0004,
                required: 16,
            }
        ));
        assert!(matches!(
            g.run_raw(a, sa, b, sb + 8, None, d, 0, 0, std::ptr::null_mut())
                .unwrap_err(),
            Error::Misaligned {
                operand: OperandName::ScalesB,
                what: Quantity::Pointer,
                ..
            }
        ));
        // The plain entry point of a blockwise plan has no scales to pass.
        assert!(matches!(
            g.plan_inner()
                .run_raw(a, b, None, d, 0, 0, std::ptr::null_mut())
                .unwrap_err(),
            Error::InvalidProblem {
                reason: ProblemRule::ScalesRequired,
            }
        ));
    }
}

const B200: DeviceInfo = DeviceInfo {
    ordinal: 0,
    compute_capability: (10, 0),
    sm_count: 148,
};

#[test]
fn block_scaled_plans_check_layouts_and_batches_before_looking_for_kernels() {
    use cutlass_gemm::numeric::E2M1;
    use cutlass_gemm::BlockScaledGemm;
    // D (and C) must be row-major.
    match BlockScaledGemm::<E2M1, E2M1, half::f16>::plan_mx(B200, &layouts(ROW, COL, COL), None)
        .unwrap_err()
    {
        Error::UnsupportedLayout { operand, rule } => {
            // C comes first.
            assert_eq!(operand, OperandName::C, "{rule}");
            assert_eq!(rule, LayoutRule::NarrowRowMajorOutput);
            assert!(rule.to_string().contains("row-major D"), "{rule}");
        }
        e => panic!("unexpected {e:?}"),
    }
    // A and B may take any layout the catalog has for the types: the plan looks for a kernel in
    // that layout (and names the layout when this build has none).
    for (a, b, name) in [(COL, COL, "NN"), (ROW, ROW, "TT"), (COL, ROW, "NT")] {
        match BlockScaledGemm::<E2M1, E2M1, half::f16>::plan_mx(B200, &layouts(a, b, ROW), None) {
            Ok(g) => assert_eq!(g.kernel_spec().layout_name(), name),
            Err(Error::NoKernel { request, .. }) => assert!(request.ends_with(name), "{request}"),
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert!(matches!(
        BlockScaledGemm::<E2M1, E2M1, half::f16>::plan_nvfp4(
            B200,
            &GemmProblem::new(256, 256, 256).with_batch(2),
            None
        )
        .unwrap_err(),
        Error::InvalidProblem {
            reason: ProblemRule::NarrowNotPacked,
        }
    ));
    // A valid problem plans when the build has an NVFP4 kernel (GPU-test builds) and otherwise
    // says which kernels there are (the default build); a named SM90 kernel is not block-scaled.
    let p = GemmProblem::new(256, 256, 256);
    let nvfp4_built = cutlass_gemm::built_kernels().iter().any(|k| {
        k.spec.block_scale.is_some_and(|b| b.vec == 16)
            && k.spec.d.ty == cutlass_gemm::DataType::F16
            && k.spec.arch.runs_on(B200.compute_capability)
            && !k.spec.fusion.is_fused()
    });
    match BlockScaledGemm::<E2M1, E2M1, half::f16>::plan_nvfp4(B200, &p, None) {
        Ok(g) => {
            assert!(nvfp4_built);
            let bs = g.kernel_spec().block_scale.unwrap();
            assert_eq!((bs.sf, bs.vec), (cutlass_gemm::DataType::UE4M3, 16));
        }
        Err(Error::NoKernel { .. }) => assert!(!nvfp4_built),
        Err(e) => panic!("unexpected {e:?}"),
    }
    let sm90 = cutlass_gemm::built_kernels()[0];
    // A kernel without block scales makes a plain plan, whose A is e2m1 (row-major here).
    let want = if sm90.spec.blockwise.is_some() {
        KernelRule::Blockwise
    } else {
        KernelRule::Operand {
            operand: OperandName::A,
            kernel: (sm90.spec.a.ty, sm90.spec.a.layout),
            required: (DataType::E2M1, ROW),
        }
    };
    match BlockScaledGemm::<E2M1, E2M1, half::f16>::plan_any_arch(B200, &p, sm90.name).unwrap_err()
    {
        Error::KernelMismatch { name, reason } => {
            assert_eq!(name, sm90.name);
            assert_eq!(reason, want);
        }
        e => panic!("unexpected {e:?}"),
    }
}

#[test]
fn plain_plans_never_pick_block_scaled_or_sparse_kernels() {
    // On SM120, e4m3 x e4m3 -> f16 exists only as a block-scaled (mx_float8) kernel: a plain FP8
    // plan must not take it (it would run without scale factors). With such a kernel in the build
    // (GPU-test builds) the plan finds no plain kernel; naming it is a mismatch.
    let p = GemmProblem::new(256, 256, 256);
    match Gemm::<E4M3, E4M3, half::f16>::plan(RTX5090, &p, None) {
        Ok(g) => {
            let s = g.kernel_spec();
            assert!(
                s.block_scale.is_none() && !s.op_class.is_sparse(),
                "{}",
                g.kernel_name()
            );
        }
        Err(Error::NoKernel { .. }) | Err(Error::ArchMismatch { .. }) => {}
        Err(e) => panic!("unexpected {e:?}"),
    }
    for k in cutlass_gemm::built_kernels()
        .iter()
        .filter(|k| k.spec.block_scale.is_some() && k.spec.a.ty == cutlass_gemm::DataType::E4M3)
    {
        assert!(matches!(
            Gemm::<E4M3, E4M3, half::f16>::plan(RTX5090, &p, Some(k.name)),
            Err(Error::KernelMismatch {
                reason: KernelRule::BlockScaled,
                ..
            }) | Err(Error::ArchMismatch { .. })
        ));
    }
}

#[test]
fn nvfp4_output_plans_take_only_nvfp4_output_kernels() {
    use cutlass_gemm::numeric::E2M1;
    use cutlass_gemm::BlockScaledGemm;
    let p = GemmProblem::new(512, 384, 1024);
    let out_kernel = cutlass_gemm::built_kernels()
        .iter()
        .find(|k| k.spec.output_scale.is_some() && k.spec.layout_name() == "TN");
    match BlockScaledGemm::<E2M1, E2M1, half::f16>::plan_nvfp4_to_nvfp4(B200, &p, None) {
        Ok(g) => {
            assert!(out_kernel.is_some());
            assert!(g.kernel_spec().output_scale.is_some());
        }
        Err(Error::NoKernel { .. }) => assert!(out_kernel.is_none()),
        Err(e) => panic!("unexpected {e:?}"),
    }
    if let Some(k) = out_kernel {
        // A plain NVFP4 plan does not take a kernel that writes an NVFP4 D.
        assert!(matches!(
            BlockScaledGemm::<E2M1, E2M1, half::f16>::plan_nvfp4(B200, &p, Some(k.name))
                .unwrap_err(),
            Error::KernelMismatch {
                reason: KernelRule::Nvfp4Output,
                ..
            }
        ));
    }
    // The walkthrough entry (MX in, NVFP4 out, NT) serves MX-to-NVFP4 plans in NT only.
    let nt = GemmProblem::new(512, 384, 1024)
        .with_a(MatrixLayout::col_major())
        .with_b(MatrixLayout::row_major());
    let walkthrough = cutlass_gemm::built_kernels()
        .iter()
        .find(|k| k.spec.output_scale.is_some() && k.spec.layout_name() == "NT");
    match BlockScaledGemm::<E2M1, E2M1, half::f16>::plan_mx_to_nvfp4(B200, &nt, None) {
        Ok(g) => {
            assert!(walkthrough.is_some());
            assert_eq!(g.kernel_spec().layout_name(), "NT");
            assert_eq!(g.kernel_spec().block_scale.unwrap().vec, 32);
        }
        Err(Error::NoKernel { .. }) => assert!(walkthrough.is_none()),
        Err(e) => panic!("unexpected {e:?}"),
    }
    if let Some(k) = walkthrough {
        // Not in TN, not as an NVFP4-input plan.
        let tn = GemmProblem::new(512, 384, 1024);
        assert!(matches!(
            BlockScaledGemm::<E2M1, E2M1, half::f16>::plan_mx_to_nvfp4(B200, &tn, Some(k.name))
                .unwrap_err(),
            Error::KernelMismatch {
                reason: KernelRule::Operand {
                    operand: OperandName::A,
                    kernel: (DataType::E2M1, COL),
                    required: (DataType::E2M1, ROW),
                },
                ..
            }
        ));
        assert!(matches!(
            BlockScaledGemm::<E2M1, E2M1, half::f16>::plan_nvfp4_to_nvfp4(B200, &nt, Some(k.name))
                .unwrap_err(),
            Error::KernelMismatch {
                reason: KernelRule::BlockScales {
                    kernel: (DataType::UE8M0, 32),
                    required: cutlass_gemm::ScaleFamily::Nvfp4,
                },
                ..
            }
        ));
    }
}
