//! Validation rules, checked on any machine: every input error is caught before a kernel is
//! called. Plans are made for described devices (`DeviceInfo`), which is the same code path
//! `Gemm::new` takes after querying the real device.

use cutlass_gemm::numeric::{Tf32, E5M2};
use cutlass_gemm::{
    built_kernels, BuildHint, DataType, DeviceInfo, Error, Extent, Family, Gemm, GemmProblem,
    KernelRule, Layout, MatrixLayout, OperandName, ProblemRule, Quantity, Scalar, ScheduleHints,
    SplitKRule, TileScheduler,
};
use half::{bf16, f16};

const H100: DeviceInfo = DeviceInfo {
    ordinal: 0,
    compute_capability: (9, 0),
    sm_count: 132,
};
const B200: DeviceInfo = DeviceInfo {
    ordinal: 0,
    compute_capability: (10, 0),
    sm_count: 148,
};
/// A device of an architecture no kernel of the catalog targets (compute capability 13.0).
const FUTURE: DeviceInfo = DeviceInfo {
    ordinal: 0,
    compute_capability: (13, 0),
    sm_count: 200,
};
const RTX5090: DeviceInfo = DeviceInfo {
    ordinal: 0,
    compute_capability: (12, 0),
    sm_count: 170,
};

/// The default bf16 kernel (TMA epilogue).
const TMA_KERNEL: &str = "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_2x1x1_0_tnt_align8_warpspecialized_cooperative_epi_tma";

fn plan(p: &GemmProblem) -> cutlass_gemm::Result<Gemm<bf16, bf16, bf16>> {
    Gemm::plan(H100, p, None)
}

fn catalog_default_set() -> Vec<cutlass_gemm::KernelSpec> {
    cutlass_gemm_catalog::catalog::select(
        &[cutlass_gemm::Arch::Sm90a],
        &cutlass_gemm_catalog::catalog::NameFilter::parse(""),
    )
}

#[test]
fn the_default_build_contains_sm90_kernels() {
    let k = built_kernels();
    assert!(
        k.len() >= 8,
        "the tests need the default kernel set; this build has {}",
        k.len()
    );
    // The default kernels are there (builds for GPU tests add others, SM100/SM120 ones too).
    // Grouped kernels are in a registry of their own.
    let grouped = cutlass_gemm::built_grouped_kernels();
    for spec in catalog_default_set() {
        let built = if spec.kernel_schedule.is_grouped() {
            grouped.iter().any(|k| k.spec == spec)
        } else {
            k.iter().any(|k| k.spec == spec)
        };
        assert!(built, "default kernel {} missing", spec.name());
    }
    assert!(k.iter().all(|k| !k.spec.kernel_schedule.is_grouped()));
    assert!(grouped.iter().all(|k| k.spec.kernel_schedule.is_grouped()));
}

#[test]
fn a_valid_problem_plans_in_every_layout_and_output_order() {
    for (a, b) in [
        (MatrixLayout::row_major(), MatrixLayout::col_major()),
        (MatrixLayout::col_major(), MatrixLayout::row_major()),
        (MatrixLayout::col_major(), MatrixLayout::col_major()),
        (MatrixLayout::row_major(), MatrixLayout::row_major()),
    ] {
        for d in [MatrixLayout::row_major(), MatrixLayout::col_major()] {
            let p = GemmProblem::new(1000, 504, 1032)
                .with_a(a)
                .with_b(b)
                .with_d(d);
            let g = plan(&p).unwrap();
            assert_eq!(g.is_swapped(), d.layout == Layout::ColumnMajor);
            // The kernel's A/B layouts: swapped problems exchange and transpose A and B.
            let spec = g.kernel_spec();
            let (ka, kb) = if g.is_swapped() {
                (b.layout.transposed(), a.layout.transposed())
            } else {
                (a.layout, b.layout)
            };
            assert_eq!((spec.a.layout, spec.b.layout), (ka, kb), "{p:?}");
            let f = Gemm::<f16, f16, f16>::plan(H100, &p, None).unwrap();
            assert_eq!(f.kernel_spec().a.ty, cutlass_gemm::DataType::F16);
        }
    }
}

#[test]
fn ld_smaller_than_the_row_is_rejected() {
    let p = GemmProblem::new(64, 64, 128).with_a(MatrixLayout::row_major().with_ld(120));
    match plan(&p).unwrap_err() {
        Error::LeadingDimension {
            operand: OperandName::A,
            ld: 120,
            min: 128,
            layout: Layout::RowMajor,
            rows: 64,
            cols: 128,
        } => {}
        e => panic!("unexpected {e:?}"),
    }
    let p = GemmProblem::new(64, 64, 128).with_b(MatrixLayout::row_major().with_ld(63));
    assert!(matches!(
        plan(&p).unwrap_err(),
        Error::LeadingDimension {
            operand: OperandName::B,
            ld: 63,
            min: 64,
            ..
        }
    ));
    let p = GemmProblem::new(64, 64, 128).with_d(MatrixLayout::col_major().with_ld(32));
    assert!(matches!(
        plan(&p).unwrap_err(),
        Error::LeadingDimension {
            operand: OperandName::D,
            min: 64,
            ..
        }
    ));
}

#[test]
fn operands_tma_cannot_address_are_served_through_padded_copies() {
    let staged = |p: &GemmProblem| plan(p).unwrap().staged_operands();
    use OperandName::{A, B, C, D};
    // ld not a multiple of 8 bf16 elements (16 bytes): only A is copied.
    let p = GemmProblem::new(64, 64, 128).with_a(MatrixLayout::row_major().with_ld(130));
    assert_eq!(staged(&p), vec![A]);
    // k (A's and B's contiguous extent) not a multiple of 8: both are padded with zeros.
    assert_eq!(staged(&GemmProblem::new(64, 64, 100)), vec![A, B]);
    // n not a multiple of 8 with row-major D: the automatic choice takes a kernel whose epilogue
    // stores elements itself (C and D of alignment 1), and nothing is copied.
    let g = plan(&GemmProblem::new(64, 60, 128)).unwrap();
    assert!(g.staged_operands().is_empty());
    assert_eq!(g.kernel_spec().d.align, 1, "{}", g.kernel_name());
    // A TMA-epilogue kernel, named: B (k x n, k contiguous) gets padded columns, D is written
    // padded and copied back; with beta = 0 C is not read and not copied.
    let pinned = |p: &GemmProblem| {
        Gemm::<bf16, bf16, bf16>::plan(H100, p, Some(TMA_KERNEL))
            .unwrap()
            .staged_operands()
    };
    assert_eq!(pinned(&GemmProblem::new(64, 60, 128)), vec![B, D]);
    let with_c = GemmProblem::new(64, 60, 128).with_scalars(1.0, 1.0);
    assert_eq!(pinned(&with_c), vec![B, C, D]);
    // The same n with a column-major D: the kernel computes Dᵀ, whose contiguous extent is m.
    assert!(staged(&GemmProblem::new(64, 60, 128).with_d(MatrixLayout::col_major())).is_empty());
    // Batch stride not a multiple of 8.
    let p = GemmProblem::new(64, 64, 128)
        .with_batch(2)
        .with_b(MatrixLayout::col_major().with_batch_stride(64 * 128 + 4));
    assert_eq!(staged(&p), vec![B]);
    // A 2 x 2 by 2 x 2 product, as candle's tests have.
    assert_eq!(pinned(&GemmProblem::new(2, 2, 2)), vec![A, B, D]);
    assert!(staged(&GemmProblem::new(2, 2, 2)).contains(&A));
    // Aligned problems copy nothing and need no more workspace than the kernel's.
    let g = plan(&GemmProblem::new(4096, 4096, 4096)).unwrap();
    assert!(g.staged_operands().is_empty());
    // GPT-2's vocabulary: no copies with the automatic choice; the workspace of a TMA-epilogue
    // kernel holds the padded copies.
    let p = GemmProblem::new(512, 50257, 768);
    assert!(staged(&p).is_empty());
    let g = Gemm::<bf16, bf16, bf16>::plan(H100, &p, Some(TMA_KERNEL)).unwrap();
    assert_eq!(g.staged_operands(), vec![B, D]);
    assert!(g.workspace_size() >= 2 * (768 * 50264 + 512 * 50264));
    // Overlapping batches.
    let p = GemmProblem::new(64, 64, 128)
        .with_batch(2)
        .with_d(MatrixLayout::row_major().with_batch_stride(64));
    assert!(matches!(
        plan(&p).unwrap_err(),
        Error::BatchStride {
            operand: OperandName::D,
            stride: 64,
            min: 4096
        }
    ));
}

#[test]
fn malformed_problems_are_rejected() {
    let rule = |p: &GemmProblem| match plan(p).unwrap_err() {
        Error::InvalidProblem { reason } => reason,
        e => panic!("unexpected {e:?}"),
    };
    assert_eq!(
        rule(&GemmProblem::new(0, 64, 64)),
        ProblemRule::ZeroExtent(Extent::M)
    );
    assert_eq!(
        rule(&GemmProblem::new(64, 64, 64).with_batch(0)),
        ProblemRule::ZeroBatch
    );
    assert_eq!(
        rule(&GemmProblem::new(64, 64, 1 << 31)),
        ProblemRule::ExtentTooLarge {
            extent: Extent::K,
            value: 1 << 31
        }
    );
    // NaN compares equal to itself in a rule (bit for bit).
    assert_eq!(
        rule(&GemmProblem::new(64, 64, 64).with_scalars(f32::NAN, 0.0)),
        ProblemRule::NonFiniteScalars {
            alpha: Scalar(f32::NAN),
            beta: Scalar(0.0)
        }
    );
    let p = GemmProblem::new(64, 64, 64).with_c(MatrixLayout::col_major());
    assert_eq!(rule(&p), ProblemRule::CLayoutDiffersFromD);
}

#[test]
fn kernels_for_another_architecture_are_refused() {
    let p = GemmProblem::new(256, 256, 256);
    // SM90a kernels are SASS for exactly 9.0: refused on Blackwell and on a future architecture.
    for dev in [B200, RTX5090, FUTURE] {
        match Gemm::<bf16, bf16, bf16>::plan(dev, &p, None).unwrap_err() {
            Error::ArchMismatch { arch, device, .. } => {
                assert_eq!(arch, cutlass_gemm::Arch::Sm90a);
                assert_eq!(device, dev.compute_capability);
            }
            e => panic!("unexpected {e:?}"),
        }
        let name = built_kernels()[0].name;
        assert!(matches!(
            Gemm::<bf16, bf16, bf16>::plan(dev, &p, Some(name)).unwrap_err(),
            Error::ArchMismatch { .. }
        ));
    }
    let e = Gemm::<bf16, bf16, bf16>::plan(B200, &p, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("sm90a") && e.contains("10.0"), "{e}");
    let e = Gemm::<bf16, bf16, bf16>::plan(FUTURE, &p, Some(built_kernels()[0].name))
        .unwrap_err()
        .to_string();
    assert!(e.contains("sm90a") && e.contains("13.0"), "{e}");
}

#[test]
fn kernel_choice_by_name_and_type_is_checked() {
    let p = GemmProblem::new(256, 256, 256);
    assert!(matches!(
        Gemm::<bf16, bf16, bf16>::plan(H100, &p, Some("cutlass3x_sm90_no_such_kernel"))
            .unwrap_err(),
        Error::KernelNotBuilt { .. }
    ));
    // A TN bf16 kernel cannot serve an NN problem.
    let tn = built_kernels()
        .iter()
        .find(|k| {
            k.spec.layout_name() == "TN"
                && k.spec.a.ty == cutlass_gemm::DataType::Bf16
                && k.spec.d.ty == cutlass_gemm::DataType::Bf16
        })
        .unwrap();
    let nn = p.with_a(MatrixLayout::col_major());
    match Gemm::<bf16, bf16, bf16>::plan(H100, &nn, Some(tn.name)).unwrap_err() {
        Error::KernelMismatch { name, reason } => {
            assert_eq!(name, tn.name);
            assert_eq!(
                reason,
                KernelRule::Operand {
                    operand: OperandName::A,
                    kernel: (DataType::Bf16, Layout::RowMajor),
                    required: (DataType::Bf16, Layout::ColumnMajor),
                }
            );
        }
        e => panic!("unexpected {e:?}"),
    }
    assert_eq!(
        Gemm::<bf16, bf16, bf16>::plan(H100, &p, Some(tn.name))
            .unwrap()
            .kernel_name(),
        tn.name
    );
    // f32 inputs have no SM90 kernel in this catalog.
    let e = Gemm::<f32, f32, f32>::plan(H100, &p, None).unwrap_err();
    assert!(
        matches!(
            &e,
            Error::NoKernel {
                build_with: BuildHint::NotInCatalog,
                ..
            }
        ),
        "{e}"
    );
    // Mixed f16 x bf16 neither.
    assert!(matches!(
        Gemm::<f16, bf16, f32>::plan(H100, &p, None).unwrap_err(),
        Error::NoKernel { .. }
    ));
}

/// A request that the catalog serves but the build lacks names the feature that builds it and the
/// nearest built kernels, in a line or two.
#[test]
fn missing_kernels_name_the_feature_that_builds_them() {
    let p = GemmProblem::new(256, 256, 256);
    let tf32_built = built_kernels()
        .iter()
        .any(|k| k.spec.a.ty == cutlass_gemm::DataType::Tf32);
    match Gemm::<Tf32, Tf32, f32>::plan(H100, &p, None) {
        Ok(_) => assert!(tf32_built),
        Err(e) => {
            assert!(!tf32_built);
            let Error::NoKernel {
                nearest,
                build_with,
                ..
            } = &e
            else {
                panic!("{e}");
            };
            assert_eq!(*build_with, BuildHint::Feature(Family::Tf32));
            assert_eq!(nearest.len(), built_kernels().len().min(3));
            let text = e.to_string();
            assert!(text.contains("`tf32`") && !text.contains('\n'), "{text}");
        }
    }
    // By name: the feature of the kernel's family, or the filter that adds it.
    let tf32 = cutlass_gemm_catalog::catalog::all()
        .into_iter()
        .find(|s| s.a.ty == cutlass_gemm::DataType::Tf32)
        .unwrap();
    if !tf32_built {
        let e = Gemm::<Tf32, Tf32, f32>::plan(H100, &p, Some(&tf32.name())).unwrap_err();
        assert!(
            matches!(
                &e,
                Error::KernelNotBuilt {
                    build_with: BuildHint::Feature(Family::Tf32),
                    ..
                }
            ),
            "{e}"
        );
    }
    let e5m2 = "cutlass3x_sm90_tensorop_gemm_e5m2_e5m2_f32_f16_f16_128x128x128_1x2x1_0_tnt_align16_warpspecialized_cooperative_epi_tma";
    if !built_kernels().iter().any(|k| k.name == e5m2) {
        let e = Gemm::<E5M2, E5M2, f16>::plan(H100, &p, Some(e5m2)).unwrap_err();
        assert!(
            matches!(&e, Error::KernelNotBuilt { build_with: BuildHint::Kernels(n), .. } if n == e5m2),
            "{e}"
        );
        assert!(e
            .to_string()
            .contains(&format!("CUTLASS_RS_KERNELS=default,{e5m2}")));
    }
}

#[test]
fn too_short_buffers_are_rejected() {
    let p = GemmProblem::new(128, 64, 256).with_batch(3).with_a(
        MatrixLayout::row_major()
            .with_ld(264)
            .with_batch_stride(128 * 264 + 8),
    );
    let g = plan(&p).unwrap();
    // A reaches (3-1) * (128*264+8) + 127*264 + 256 elements.
    let need_a = 2 * (128 * 264 + 8) + 127 * 264 + 256;
    assert_eq!(g.operand(OperandName::A).required_len(), need_a);
    assert!(g
        .check_lengths(need_a, 3 * 64 * 256, None, 3 * 128 * 64)
        .is_ok());
    match g
        .check_lengths(need_a - 1, 3 * 64 * 256, None, 3 * 128 * 64)
        .unwrap_err()
    {
        Error::BufferTooSmall {
            operand: OperandName::A,
            len,
            required,
        } => {
            assert_eq!((len, required), (need_a - 1, need_a))
        }
        e => panic!("unexpected {e:?}"),
    }
    assert!(matches!(
        g.check_lengths(need_a, 3 * 64 * 256, Some(10), 3 * 128 * 64)
            .unwrap_err(),
        Error::BufferTooSmall {
            operand: OperandName::C,
            ..
        }
    ));
    assert!(matches!(
        g.check_lengths(need_a, 3 * 64 * 256, None, 3 * 128 * 64 - 1)
            .unwrap_err(),
        Error::BufferTooSmall {
            operand: OperandName::D,
            ..
        }
    ));
}

#[test]
fn misaligned_and_aliased_pointers_are_rejected_before_the_kernel() {
    let g = plan(&GemmProblem::new(128, 128, 128)).unwrap();
    let (a, b, d) = (0x1000_0000u64, 0x2000_0000u64, 0x3000_0000u64);
    let null_stream = std::ptr::null_mut();
    // SAFETY: every call below fails its checks before any pointer is used.
    unsafe {
        match g.run_raw(a + 2, b, None, d, 0, 0, null_stream).unwrap_err() {
            Error::Misaligned {
                operand: OperandName::A,
                what: Quantity::Pointer,
                value,
                required: 16,
            } => assert_eq!(value, a + 2),
            e => panic!("unexpected {e:?}"),
        }
        assert!(matches!(
            g.run_raw(a, b, None, d + 8, 0, 0, null_stream).unwrap_err(),
            Error::Misaligned {
                operand: OperandName::D,
                what: Quantity::Pointer,
                ..
            }
        ));
        // D overlapping the end of A.
        assert!(matches!(
            g.run_raw(a, b, None, a + 128 * 128 * 2 - 16, 0, 0, null_stream)
                .unwrap_err(),
            Error::Aliasing {
                output: OperandName::D,
                input: OperandName::A
            }
        ));
        // Beta without C.
        let gb = plan(&GemmProblem::new(128, 128, 128).with_scalars(1.0, 0.5)).unwrap();
        match gb.run_raw(a, b, None, d, 0, 0, null_stream).unwrap_err() {
            Error::InvalidProblem { reason } => {
                assert_eq!(reason, ProblemRule::BetaWithoutC { beta: Scalar(0.5) })
            }
            e => panic!("unexpected {e:?}"),
        }
    }
}

#[test]
fn schedule_hints_are_checked_against_their_ranges_and_the_kernel() {
    let p = GemmProblem::new(256, 256, 256);
    for bad in [
        ScheduleHints {
            swizzle: 3,
            ..Default::default()
        },
        ScheduleHints {
            raster: 3,
            ..Default::default()
        },
    ] {
        match plan(&p).unwrap().with_schedule(bad).unwrap_err() {
            Error::InvalidProblem { reason } => {
                assert_eq!(reason, ProblemRule::ScheduleOutOfRange(bad))
            }
            e => panic!("unexpected {e:?}"),
        }
    }
    // Split-K on a kernel that is not stream-K: over a batch of K slices on the kernel's f32-output
    // twin, then a reduction. The default set's 128x256 (2x1x1) cooperative tile has its twin.
    let name = |ty: &str, rest: &str| {
        format!("cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_{ty}_{ty}_{rest}")
    };
    let wide = name(
        "bf16",
        "128x256x64_2x1x1_0_tnt_align8_warpspecialized_cooperative_epi_tma",
    );
    let twin = name(
        "f32",
        "128x256x64_2x1x1_0_tnt_align8_warpspecialized_cooperative_epi_tma",
    );
    let split = |splits| ScheduleHints {
        splits,
        ..Default::default()
    };
    let on = |p: &GemmProblem, kernel: &str, splits| {
        Gemm::<bf16, bf16, bf16>::plan(H100, p, Some(kernel))
            .unwrap()
            .with_schedule(split(splits))
    };
    let (m, n, k) = (256, 512, 4096);
    let g = on(&GemmProblem::new(m, n, k), &wide, 4).unwrap();
    assert_eq!(g.split_k_kernel(), Some(twin.as_str()));
    assert_eq!(g.schedule().splits, 4);
    assert!(
        g.workspace_size() >= 4 * m * n * 4,
        "{}",
        g.workspace_size()
    );
    // Back to one slice: the plain plan.
    let g = g.with_schedule(split(0)).unwrap();
    assert_eq!(g.split_k_kernel(), None);
    let refused = |p: &GemmProblem, kernel: &str, splits| match on(p, kernel, splits).unwrap_err() {
        Error::KernelMismatch {
            name,
            reason: KernelRule::SplitK { splits: s, rule },
        } => {
            assert_eq!((name.as_str(), s), (kernel, splits));
            rule
        }
        e => panic!("unexpected {e:?}"),
    };
    // Slices of equal length and a multiple of 8 elements; one GEMM; no padded copy.
    assert_eq!(
        refused(&GemmProblem::new(256, 512, 4096), &wide, 3),
        SplitKRule::Slices { k: 4096, splits: 3 }
    );
    assert_eq!(
        refused(&GemmProblem::new(256, 512, 4104), &wide, 2),
        SplitKRule::Slices { k: 4104, splits: 2 }
    );
    assert_eq!(
        refused(&GemmProblem::new(256, 512, 4096).with_batch(2), &wide, 2),
        SplitKRule::Batch { batch: 2 }
    );
    // n = 100 is not a multiple of 8: the plan pads operands into copies.
    assert!(matches!(
        refused(&GemmProblem::new(256, 100, 4096), &wide, 2),
        SplitKRule::Staged { .. }
    ));
    // A tile without a twin in the catalog, and a fused kernel.
    let no_twin = built_kernels()
        .iter()
        .find(|k| {
            k.spec.tile == [128, 176, 64]
                && k.spec.a.ty == DataType::Bf16
                && k.spec.d.ty == DataType::Bf16
        })
        .expect("the default set has the 128x176 bf16 tile");
    assert_eq!(
        refused(&GemmProblem::new(256, 512, 4096), no_twin.name, 2),
        SplitKRule::NoPartialsKernel
    );
    let fused = format!("{wide}_evt_scale_biasbf16_act");
    assert_eq!(
        refused(&GemmProblem::new(256, 512, 4096), &fused, 2),
        SplitKRule::NoPartialsKernel
    );
    // A twin in the catalog that this build lacks: the error names it and how to build it.
    let pingpong = name(
        "bf16",
        "64x64x64_1x2x1_0_tnt_align8_warpspecialized_pingpong_epi_tma",
    );
    let pingpong_twin = name(
        "f32",
        "64x64x64_1x2x1_0_tnt_align8_warpspecialized_pingpong_epi_tma",
    );
    if !built_kernels().iter().any(|k| k.name == pingpong_twin) {
        match on(&GemmProblem::new(64, 512, 4096), &pingpong, 2).unwrap_err() {
            Error::KernelNotBuilt { name, build_with } => {
                assert_eq!(name, pingpong_twin);
                assert_eq!(build_with, BuildHint::Kernels(pingpong_twin.clone()));
            }
            e => panic!("unexpected {e:?}"),
        }
    }
    // The GEMV has no split-K.
    let gemv = Gemm::<bf16, bf16, bf16>::plan(
        H100,
        &GemmProblem::new(4, 512, 4096),
        Some(cutlass_gemm::DENSE_GEMV),
    );
    if let Ok(g) = gemv {
        assert_eq!(
            g.with_schedule(split(2)).unwrap_err().to_string(),
            format!(
                "kernel {} does not serve this problem: split-K (2 splits) needs a stream-K kernel",
                cutlass_gemm::DENSE_GEMV
            )
        );
    }
}

#[test]
fn error_messages_keep_addresses_in_hex_and_counts_in_decimal() {
    let g = plan(&GemmProblem::new(128, 128, 128)).unwrap();
    // SAFETY: the call fails its checks before any pointer is used.
    let e = unsafe {
        g.run_raw(
            0x1000_0002,
            0x2000_0000,
            None,
            0x3000_0000,
            0,
            0,
            std::ptr::null_mut(),
        )
    }
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("operand A: pointer 0x10000002 is not a multiple of 16 bytes ("),
        "{e}"
    );
    let e = plan(&GemmProblem::new(0, 64, 64)).unwrap_err().to_string();
    assert_eq!(
        e,
        "invalid GEMM problem: m is 0; every extent must be at least 1"
    );
}

#[test]
fn errors_name_the_operand_and_the_rule() {
    let e = plan(&GemmProblem::new(64, 64, 128).with_a(MatrixLayout::row_major().with_ld(120)))
        .unwrap_err()
        .to_string();
    assert!(e.contains("operand A") && e.contains("at least 128"), "{e}");
}

#[test]
fn relaunch_without_a_launch_is_refused_before_any_cuda_call() {
    // The relaunch entry point checks this thread's launch state first: no launch, no CUDA call
    // (this runs without a GPU).
    let k = &built_kernels()[0];
    // SAFETY: nothing is launched (the kernel has no launch state on this thread).
    let e = unsafe { k.relaunch_raw(std::ptr::null_mut()) }.unwrap_err();
    match e {
        Error::Cutlass {
            status, message, ..
        } => {
            assert_eq!(status, cutlass_gemm::sys::CUTLASS_RS_ERROR_INVALID);
            assert!(message.contains("nothing to relaunch"), "{message}");
        }
        e => panic!("unexpected {e:?}"),
    }
}

#[test]
fn operands_whose_reach_overflows_are_refused() {
    // Strides below TMA's 2^40-byte limit whose reach over the extents passes 2^64 elements: a
    // wrapped length would let a short buffer pass the length checks.
    let rows = 1 << 30;
    let p = GemmProblem::new(rows, 64, 64).with_a(MatrixLayout::row_major().with_ld(1 << 35));
    match plan(&p).unwrap_err() {
        Error::InvalidProblem { reason } => assert_eq!(
            reason,
            ProblemRule::OperandReachOverflows {
                operand: OperandName::A
            }
        ),
        e => panic!("unexpected {e:?}"),
    }
    let batched = GemmProblem::new(64, 64, 64)
        .with_batch((1 << 31) - 1)
        .with_b(MatrixLayout::col_major().with_batch_stride(1 << 38));
    let e = plan(&batched).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid GEMM problem: operand B: the elements its extents, leading dimension and batch \
         stride reach overflow the address space"
    );
}

#[test]
fn padding_past_cutlass_extent_limit_is_a_typed_error() {
    // Found by tests/fuzz.rs: m at CUTLASS's limit, with a column-major f32 D that the kernels
    // serve through padded copies, used to reach the kernel's size query and come back as a
    // CUTLASS status.
    let p = GemmProblem::new((1 << 31) - 1, 1, 1)
        .with_c(MatrixLayout::col_major())
        .with_d(MatrixLayout::col_major());
    match Gemm::<bf16, bf16, f32>::plan(H100, &p, None).unwrap_err() {
        Error::InvalidProblem {
            reason:
                ProblemRule::PaddedExtentTooLarge {
                    extent,
                    value,
                    padded,
                },
        } => {
            assert_eq!((extent, value), (Extent::M, (1 << 31) - 1));
            assert!(padded > value, "{padded}");
        }
        e => panic!("unexpected {e:?}"),
    }
}

/// A device described with no SMs (or a negative count) plans as one with a single SM, as the
/// kernel choice counts it. Found by tests/fuzz_plans.rs: the count reached CUTLASS, which reads
/// one below 1 as "query the device" and, without one, divided by zero sizing a stream-K
/// kernel's workspace (the process died of SIGFPE).
#[test]
fn a_device_described_without_sms_plans_as_one_sm() {
    let p = GemmProblem::new(17, 50257, 4095);
    let stream_k: Vec<&str> = built_kernels()
        .iter()
        .filter(|k| {
            k.spec.tile_scheduler == TileScheduler::StreamK
                && (k.spec.a.ty, k.spec.d.ty) == (DataType::Bf16, DataType::Bf16)
        })
        .map(|k| k.name)
        .collect();
    assert!(
        !stream_k.is_empty(),
        "the default build has bf16 stream-K kernels"
    );
    let with = |sm_count, name| {
        Gemm::<bf16, bf16, bf16>::plan(DeviceInfo { sm_count, ..H100 }, &p, name).unwrap()
    };
    for name in stream_k.into_iter().map(Some).chain([None]) {
        let one = with(1, name);
        for sm_count in [0, -1, i32::MIN] {
            let g = with(sm_count, name);
            assert_eq!(
                (g.kernel_name(), g.workspace_size()),
                (one.kernel_name(), one.workspace_size()),
                "{sm_count} SMs"
            );
        }
    }
}

/// Problems at the limits of the address space and of CUTLASS's extents plan, or are refused with
/// a typed error, also under overflow checks (`cargo test` without `--release`). Found by
/// tests/fuzz_plans.rs: the kernel choice's time estimates multiplied elements, extents and
/// element sizes in a `usize` (in release they wrapped, and the estimates were wrong).
#[test]
fn time_estimates_at_the_limits_do_not_overflow() {
    // A batch stride near the end of the address space on an operand the plan stages (k = 1 is
    // off B's 8-element alignment): the copy's estimate counted 2^64 bytes.
    let p = GemmProblem::new(1, 1, 1)
        .with_batch(3)
        .with_b(MatrixLayout::col_major().with_batch_stride(1 << 62))
        .with_scalars(1.0, 1.0);
    let g = Gemm::<bf16, bf16, bf16>::plan(H100, &p, None).unwrap();
    assert!(g.staged_operands().contains(&OperandName::B));
    assert_eq!(g.operand(OperandName::B).required_len(), (1 << 63) + 1);
    // m and k at CUTLASS's limit: A's 2^62 elements are 2^66 bits.
    let max = i32::MAX as usize;
    let err =
        Gemm::<bf16, bf16, bf16>::plan(H100, &GemmProblem::new(max, 8, max - 7), None).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidProblem {
                reason: ProblemRule::StrideTooLarge {
                    operand: OperandName::A
                }
            }
        ),
        "{err}"
    );
}

/// The default set's bf16 gated kernel at 128x256 (SiLU and friends in the epilogue).
const GATED_KERNEL: &str = "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_2x1x1_0_tnt_align8_warpspecialized_cooperative_epi_nosmem_glu_scale_biasbf16_act";

#[test]
fn gated_gemms_check_their_rules_before_any_launch() {
    use cutlass_gemm::{Activation, BiasAxis, Epilogue, GatedGemm, LayoutRule};
    let gated = |p: &GemmProblem, kernel: Option<&str>| {
        GatedGemm::<bf16>::plan(H100, p, Activation::Silu, kernel)
    };
    // The library's choice is a gated kernel of the input type; its workspace is sized.
    let g = gated(&GemmProblem::new(512, 14336, 4096), None).unwrap();
    assert!(g.kernel_spec().fusion.is_gated(), "{}", g.kernel_name());
    assert_eq!(g.kernel_spec().a.ty, DataType::Bf16);
    assert_eq!(
        g.required_lens(),
        [512 * 4096, 2 * 14336 * 4096, 512 * 14336]
    );
    let g = gated(&GemmProblem::new(512, 14336, 4096), Some(GATED_KERNEL)).unwrap();
    assert_eq!(g.kernel_name(), GATED_KERNEL);
    // Outputs in blocks of 8.
    assert!(matches!(
        gated(&GemmProblem::new(16, 1004, 64), None),
        Err(Error::InvalidProblem {
            reason: ProblemRule::GatedOutputs { n: 1004 }
        })
    ));
    // k and leading dimensions of 16 bytes (TMA), D's of 2 elements.
    assert!(matches!(
        gated(&GemmProblem::new(16, 1024, 100), None),
        Err(Error::Misaligned {
            operand: OperandName::A,
            what: Quantity::Extent(Extent::K),
            ..
        })
    ));
    let odd_d = GemmProblem::new(16, 1024, 64).with_d(MatrixLayout::row_major().with_ld(1025));
    assert!(matches!(
        gated(&odd_d, None),
        Err(Error::Misaligned {
            operand: OperandName::D,
            what: Quantity::LeadingDimension,
            ..
        })
    ));
    // Strides TMA cannot address (2^40 bytes).
    let far = GemmProblem::new(1, 1024, 64).with_a(MatrixLayout::row_major().with_ld(1 << 39));
    assert!(matches!(
        gated(&far, None),
        Err(Error::InvalidProblem {
            reason: ProblemRule::StrideTooLarge {
                operand: OperandName::A
            }
        })
    ));
    // Layouts: A row-major, the weight as a column-major B, D row-major.
    for p in [
        GemmProblem::new(16, 1024, 64).with_a(MatrixLayout::col_major()),
        GemmProblem::new(16, 1024, 64).with_b(MatrixLayout::row_major()),
        GemmProblem::new(16, 1024, 64).with_d(MatrixLayout::col_major()),
    ] {
        assert!(matches!(
            gated(&p, None),
            Err(Error::UnsupportedLayout {
                rule: LayoutRule::GatedLayouts,
                ..
            })
        ));
    }
    // No C.
    assert!(matches!(
        gated(&GemmProblem::new(16, 1024, 64).with_scalars(1.0, 0.5), None),
        Err(Error::InvalidProblem {
            reason: ProblemRule::BetaWithoutC { .. }
        })
    ));
    // A bias per row.
    assert!(matches!(
        gated(&GemmProblem::new(16, 1024, 64), None)
            .unwrap()
            .with_epilogue(Epilogue::bias().with_bias(BiasAxis::PerRow)),
        Err(Error::InvalidProblem {
            reason: ProblemRule::GatedRowBias
        })
    ));
    // A plain kernel for a gated plan, a gated kernel for a plain one.
    assert!(matches!(
        gated(&GemmProblem::new(16, 1024, 64), Some(TMA_KERNEL)),
        Err(Error::KernelMismatch {
            reason: KernelRule::Gated { kernel: false },
            ..
        })
    ));
    assert!(matches!(
        Gemm::<bf16, bf16, bf16>::plan(H100, &GemmProblem::new(16, 1024, 64), Some(GATED_KERNEL)),
        Err(Error::KernelMismatch {
            reason: KernelRule::Gated { kernel: true },
            ..
        })
    ));
    // Plain GEMMs never choose a gated kernel.
    for (m, n, k) in [(16, 1024, 64), (512, 28672, 4096), (4096, 4096, 4096)] {
        let g = plan(&GemmProblem::new(m, n, k)).unwrap();
        assert!(!g.kernel_spec().fusion.is_gated(), "{}", g.kernel_name());
    }
    // e4m3 inputs with a bf16 output: a gated e4m3 kernel; k in 16-byte steps (16 elements);
    // no gated kernel writes e4m3, nor takes f16 inputs with a bf16 output.
    use cutlass_gemm::numeric::E4M3;
    let fp8 = |p: &GemmProblem| GatedGemm::<E4M3, bf16>::plan(H100, p, Activation::Silu, None);
    for m in [16, 512, 4096] {
        let g = fp8(&GemmProblem::new(m, 14336, 4096)).unwrap();
        let spec = g.kernel_spec();
        assert!(spec.fusion.is_gated(), "{}", g.kernel_name());
        assert_eq!((spec.a.ty, spec.d.ty), (DataType::E4M3, DataType::Bf16));
    }
    assert!(matches!(
        fp8(&GemmProblem::new(16, 1024, 72)),
        Err(Error::Misaligned {
            operand: OperandName::A,
            what: Quantity::Extent(Extent::K),
            ..
        })
    ));
    let small = GemmProblem::new(16, 1024, 64);
    let e4m3_out = GatedGemm::<E4M3, E4M3>::plan(H100, &small, Activation::Silu, None);
    let f16_in = GatedGemm::<f16, bf16>::plan(H100, &small, Activation::Silu, None);
    assert!(matches!(e4m3_out, Err(Error::NoKernel { .. })));
    assert!(matches!(f16_in, Err(Error::NoKernel { .. })));
    // A bf16 gated kernel named for an e4m3 plan: the operand that differs.
    assert!(matches!(
        GatedGemm::<E4M3, bf16>::plan(H100, &small, Activation::Silu, Some(GATED_KERNEL)),
        Err(Error::KernelMismatch {
            reason: KernelRule::Operand {
                operand: OperandName::A,
                ..
            },
            ..
        })
    ));
}

/// The FP8 blockwise decode GEMV: the library takes it up to `BLOCKWISE_GEMV_TOKENS` tokens where
/// it serves (in a build that compiled the hand-written kernels for SM90), named it is refused with
/// the rule the problem breaks, and it never takes a batch, a fused epilogue or split-K.
#[test]
fn blockwise_decode_gemv_rules() {
    use cutlass_gemm::numeric::E4M3;
    use cutlass_gemm::{BlockwiseGemm, Epilogue, GemvRule, BLOCKWISE_GEMV};
    let built = !cutlass_gemm::sys::BUILT_ARCHS.is_empty();
    let bw = |p: &GemmProblem, name: Option<&str>| {
        BlockwiseGemm::<E4M3, E4M3, bf16>::plan(H100, p, name)
    };
    let refused = |p: &GemmProblem| match bw(p, Some(BLOCKWISE_GEMV)) {
        Err(Error::KernelMismatch {
            reason: KernelRule::BlockwiseGemv { rule },
            ..
        }) => rule,
        other => panic!("{p:?}: {other:?}"),
    };
    if !built {
        assert_eq!(
            refused(&GemmProblem::new(16, 4096, 4096)),
            GemvRule::NotBuilt
        );
        return;
    }
    for (m, gemv) in [
        (1, true),
        (cutlass_gemm::BLOCKWISE_GEMV_TOKENS, true),
        (cutlass_gemm::BLOCKWISE_GEMV_TOKENS + 1, false),
        (128, false),
    ] {
        let g = bw(&GemmProblem::new(m, 3584, 18944), None).unwrap();
        assert_eq!(g.is_gemv(), gemv, "m = {m}");
        assert_eq!(g.kernel_name() == BLOCKWISE_GEMV, gemv);
        if gemv {
            assert_eq!(g.workspace_size(), 0);
            assert!(g.plan_inner().staged_operands().is_empty());
        }
    }
    // m = 7 stages A's scales for the CUTLASS kernel; the GEMV reads them in place.
    let g = bw(&GemmProblem::new(7, 256, 512), None).unwrap();
    assert!(g.is_gemv() && g.plan_inner().staged_operands().is_empty());
    // Named for 32 tokens it serves; for more, a batch, odd extents or leading dimensions, no.
    assert!(bw(&GemmProblem::new(32, 256, 512), Some(BLOCKWISE_GEMV))
        .unwrap()
        .is_gemv());
    assert_eq!(
        refused(&GemmProblem::new(33, 256, 512)),
        GemvRule::Tokens { m: 33, max: 32 }
    );
    assert_eq!(
        refused(&GemmProblem::new(8, 256, 512).with_batch(2)),
        GemvRule::Batch { batch: 2 }
    );
    assert_eq!(
        refused(&GemmProblem::new(8, 264, 512)),
        GemvRule::Extents { n: 264, k: 512 }
    );
    assert_eq!(
        refused(&GemmProblem::new(8, 256, 520)),
        GemvRule::Extents { n: 256, k: 520 }
    );
    let p = GemmProblem::new(8, 256, 512).with_a(MatrixLayout::row_major().with_ld(520));
    assert_eq!(
        refused(&p),
        GemvRule::LeadingDimension {
            operand: OperandName::A,
            ld: 520
        }
    );
    // The library's choice moves to a CUTLASS kernel in those cases.
    let g = bw(&GemmProblem::new(8, 264, 512), None).unwrap();
    assert!(!g.is_gemv() && g.kernel_name() != BLOCKWISE_GEMV);
    // A fused epilogue: the chosen GEMV gives way to a fused kernel, the named one is refused.
    let p = GemmProblem::new(8, 256, 512);
    let fused = bw(&p, None)
        .unwrap()
        .with_epilogue(Epilogue::bias())
        .unwrap();
    assert!(!fused.is_gemv());
    assert!(matches!(
        bw(&p, Some(BLOCKWISE_GEMV))
            .unwrap()
            .with_epilogue(Epilogue::bias()),
        Err(Error::KernelMismatch {
            reason: KernelRule::BlockwiseGemv {
                rule: GemvRule::Epilogue
            },
            ..
        })
    ));
    // No split-K.
    assert!(matches!(
        bw(&p, None).unwrap().with_schedule(ScheduleHints {
            splits: 2,
            ..Default::default()
        }),
        Err(Error::KernelMismatch {
            reason: KernelRule::SplitKNeedsStreamK { splits: 2 },
            ..
        })
    ));
    // Plain (tensor-wise) FP8 plans never name it.
    assert!(matches!(
        Gemm::<E4M3, E4M3, bf16>::plan(H100, &p, Some(BLOCKWISE_GEMV)),
        Err(Error::KernelMismatch {
            reason: KernelRule::BlockwiseGemv {
                rule: GemvRule::Types
            },
            ..
        })
    ));
}

/// The 16-bit decode GEMV: the library takes it for a linear layer of at most `DENSE_GEMV_TOKENS`
/// tokens on a weight of at most `DENSE_GEMV_MAX_WEIGHT` elements (in a build that compiled the
/// hand-written kernels for SM90); named, it takes up to 32 tokens of that orientation and refuses
/// others with the rule.
#[test]
fn dense_decode_gemv_rules() {
    use cutlass_gemm::{
        Activation, BiasAxis, Epilogue, GemvRule, DENSE_GEMV, DENSE_GEMV_MAX_WEIGHT,
        DENSE_GEMV_TOKENS,
    };
    if cutlass_gemm::sys::BUILT_ARCHS.is_empty() {
        return;
    }
    let refused = |p: &GemmProblem| match Gemm::<bf16, bf16, bf16>::plan(H100, p, Some(DENSE_GEMV))
    {
        Err(Error::KernelMismatch {
            reason: KernelRule::DenseGemv { rule },
            ..
        }) => rule,
        other => panic!("{p:?}: {other:?}"),
    };
    // Chosen: few tokens, a small weight; not for more tokens or a larger weight.
    let chosen = |m: usize, n: usize, k: usize| plan(&GemmProblem::new(m, n, k)).unwrap().is_gemv();
    assert!(chosen(1, 2304, 768) && chosen(DENSE_GEMV_TOKENS, 4096, 4096));
    assert!(!chosen(DENSE_GEMV_TOKENS + 1, 4096, 4096));
    assert!(DENSE_GEMV_MAX_WEIGHT < 8192 * 8192 && !chosen(1, 8192, 8192));
    let g = plan(&GemmProblem::new(1, 2304, 768)).unwrap();
    assert_eq!((g.kernel_name(), g.workspace_size()), (DENSE_GEMV, 0));
    // A fused epilogue keeps the GEMV, chosen or named (it computes the epilogue), with a fused
    // CUTLASS kernel behind it; past the GEMV's tokens the plan is a fused kernel's.
    let bias_gelu = Epilogue::bias().with_activation(Activation::GeluTanh);
    for e in [bias_gelu, Epilogue::rowwise().with_bias(BiasAxis::PerRow)] {
        let fused = plan(&GemmProblem::new(1, 2304, 768))
            .unwrap()
            .with_epilogue(e)
            .unwrap();
        assert!(fused.is_gemv() && fused.kernel_spec().fusion.is_fused());
        assert_eq!(fused.epilogue(), e);
        let named = Gemm::<bf16, bf16, bf16>::plan(
            H100,
            &GemmProblem::new(32, 8192, 8192),
            Some(DENSE_GEMV),
        )
        .unwrap()
        .with_epilogue(e)
        .unwrap();
        assert!(named.is_gemv());
    }
    let wide = plan(&GemmProblem::new(DENSE_GEMV_TOKENS + 1, 2304, 768))
        .unwrap()
        .with_epilogue(bias_gelu)
        .unwrap();
    assert!(!wide.is_gemv() && wide.kernel_spec().fusion.is_fused());
    // Named: any weight, up to 32 tokens, the linear layer's orientation only.
    assert!(Gemm::<bf16, bf16, bf16>::plan(
        H100,
        &GemmProblem::new(32, 8192, 8192),
        Some(DENSE_GEMV)
    )
    .unwrap()
    .is_gemv());
    assert_eq!(
        refused(&GemmProblem::new(33, 256, 512)),
        GemvRule::Tokens { m: 33, max: 32 }
    );
    let nt = GemmProblem::new(4, 256, 512)
        .with_a(MatrixLayout::col_major())
        .with_b(MatrixLayout::row_major());
    assert_eq!(refused(&nt), GemvRule::Types);
    let column_major_d = GemmProblem::new(4, 256, 512).with_d(MatrixLayout::col_major());
    assert_eq!(refused(&column_major_d), GemvRule::Types);
    assert_eq!(
        refused(&GemmProblem::new(4, 256, 520)),
        GemvRule::Extents { n: 256, k: 520 }
    );
    let p = GemmProblem::new(4, 256, 512).with_b(MatrixLayout::col_major().with_ld(516));
    assert_eq!(
        refused(&p),
        GemvRule::LeadingDimension {
            operand: OperandName::B,
            ld: 516
        }
    );
    // FP8 tensor-wise plans: not its types.
    assert!(matches!(
        Gemm::<cutlass_gemm::numeric::E4M3, cutlass_gemm::numeric::E4M3, bf16>::plan(
            H100,
            &GemmProblem::new(4, 256, 512),
            Some(DENSE_GEMV)
        ),
        Err(Error::KernelMismatch {
            reason: KernelRule::DenseGemv {
                rule: GemvRule::Types
            },
            ..
        })
    ));
}

/// The swapped 64x16 decode tile stands in for the 64x8 one where 64x8's tiles spill into a second
/// wave, and only for it (H200 measurements in docs/performance.md).
#[test]
fn the_64x16_decode_tile_stands_in_for_the_64x8_one_only() {
    let name = |m, n, k| {
        Gemm::<bf16, bf16, bf16>::plan(H100, &GemmProblem::new(m, n, k), None)
            .unwrap()
            .kernel_name()
    };
    // 4608 rows at 16 tokens: 144 tiles of 64x8 for 132 SMs, 72 of 64x16 (0.70x -> 0.90x cuBLAS).
    assert!(name(16, 4608, 3584).contains("_64x16x64_2x1x1_0_tnn_"));
    // 4096 rows at 16 tokens: 128 tiles of 64x8, one wave.
    assert!(name(16, 4096, 4096).contains("_64x8x64_1x2x1_0_tnn_"));
    // 32 tokens over a long K: the stream-K 128x16 tile (0.84x against 0.68x for 64x16), and the
    // 64x64 pingpong tile on a wide layer (0.87x against 0.76x).
    assert!(name(32, 5120, 13824).contains("_128x16x128_1x1x1_0_tnn_"));
    assert!(name(32, 8192, 28672).contains("_64x64x64_1x2x1_0_tnt_"));
}

/// The 64x128 pingpong tile pairs its CTAs along M (2x1x1, sharing the weights' panel) where M
/// has two tile rows or more, and along N (1x2x1) below (H200 measurements in
/// docs/performance.md).
#[test]
fn the_64x128_tile_pairs_its_ctas_along_m_from_two_tile_rows() {
    let name = |m, n, k| {
        Gemm::<bf16, bf16, bf16>::plan(H100, &GemmProblem::new(m, n, k), None)
            .unwrap()
            .kernel_name()
    };
    // 256 x 3584 x 4096: 0.67x -> 0.87x cuBLAS with the 2x1x1 cluster.
    assert!(name(256, 3584, 4096).contains("_64x128x64_2x1x1_0_tnt_"));
    assert!(name(128, 8192, 8192).contains("_64x128x64_2x1x1_0_tnt_"));
}

/// A fused bias-and-activation plan keeps the plain kernel and runs the epilogue as a separate
/// pass over D only where the fused kernels would copy an input larger than D into a padded
/// buffer that the plain plan reads in place (or none serves): GPT-2's LM head (n = 50257) below
/// k = 768 tokens. Scales, a bias per row or a column-major D keep the fused plan.
#[test]
fn fused_plans_run_a_separate_pass_where_the_fused_kernels_would_copy_an_input() {
    use cutlass_gemm::{Activation, BiasAxis, Epilogue};
    if cutlass_gemm::sys::BUILT_ARCHS.is_empty() {
        return;
    }
    let bias_gelu = Epilogue::bias().with_activation(Activation::GeluTanh);
    let inputs = |g: &Gemm<bf16, bf16, bf16>| {
        g.staged_operands()
            .iter()
            .any(|o| matches!(o, OperandName::A | OperandName::B))
    };
    let mut separate = Vec::new();
    for (m, n, k) in [
        (1, 50257, 768),
        (8, 50257, 768),
        (128, 50257, 768),
        (2048, 50257, 768),
        (257, 50257, 64),
        (7, 1001, 4095),
        (2, 2, 2),
        (1, 4096, 512),
        (512, 4096, 4096),
        (300, 1000, 256),
        (64, 32001, 4096),
        (64, 4096, 4095),
    ] {
        let p = GemmProblem::new(m, n, k);
        let plain = plan(&p).unwrap();
        let g = plan(&p).unwrap().with_epilogue(bias_gelu).unwrap();
        if g.epilogue_is_separate() {
            assert_eq!(g.kernel_name(), plain.kernel_name(), "{m} x {n} x {k}");
            assert!(
                m <= k,
                "{m} x {n} x {k}: the pass over D costs more than copying B"
            );
            assert!(!inputs(&plain), "{m} x {n} x {k}");
            assert_eq!(g.workspace_size(), plain.workspace_size());
            separate.push((m, n, k));
        } else {
            assert!(
                g.is_gemv() || g.kernel_spec().fusion.is_fused(),
                "{m} x {n} x {k}: {}",
                g.kernel_name()
            );
            // The fused plan reads its inputs in place, or the plain one copies them too, or the
            // copy is smaller than D (B: m > k).
            assert!(!inputs(&g) || inputs(&plain) || m > k, "{m} x {n} x {k}");
        }
        assert_eq!(g.epilogue(), bias_gelu);
        // Row scales or a bias per row: never the separate pass.
        for e in [
            Epilogue::rowwise().with_bias(BiasAxis::PerColumn),
            Epilogue::bias().with_bias(BiasAxis::PerRow),
        ] {
            let g = plan(&p).unwrap().with_epilogue(e).unwrap();
            assert!(
                !g.epilogue_is_separate(),
                "{m} x {n} x {k} {}",
                e.describe()
            );
        }
        // A column-major D: never (the pass takes a row-major D).
        let col = p.with_d(MatrixLayout::col_major());
        if let Ok(g) = plan(&col).and_then(|g| g.with_epilogue(bias_gelu)) {
            assert!(!g.epilogue_is_separate(), "{m} x {n} x {k} column-major D");
        }
    }
    println!("separate pass: {separate:?}");
    assert!(separate.contains(&(1, 50257, 768)) && separate.contains(&(128, 50257, 768)));
    assert!(!separate.contains(&(2048, 50257, 768)));
}

/// The default set's bf16 aux kernel at 128x256.
const AUX_KERNEL: &str = "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_2x1x1_0_tnt_align8_warpspecialized_cooperative_epi_tma_evt_biasbf16_act_aux";

#[test]
fn aux_output_plans_check_their_rules() {
    use cutlass_gemm::numeric::E4M3;
    use cutlass_gemm::{Activation, AuxRule, BiasAxis, Epilogue, GatedGemm};
    let gelu_aux = Epilogue::bias()
        .with_activation(Activation::GeluTanh)
        .with_aux_output();
    let linear = |m, n, k| GemmProblem::new(m, n, k).with_b(MatrixLayout::col_major());
    // The library's choice at every token count is an aux kernel, in the kernel: never the decode
    // GEMV (1-16 tokens take it without the aux output), a separate pass or a padded copy.
    for (m, n, k) in [
        (1, 4096, 4096),
        (16, 3072, 768),
        (512, 11008, 4096),
        (4096, 4096, 4096),
        (1000, 1000, 512),
    ] {
        let g = plan(&linear(m, n, k))
            .unwrap()
            .with_epilogue(gelu_aux)
            .unwrap();
        assert!(g.kernel_spec().fusion.has_aux(), "{}", g.kernel_name());
        assert!(!g.is_gemv() && !g.epilogue_is_separate());
        assert!(g.staged_operands().is_empty(), "{:?}", g.staged_operands());
        assert_eq!(g.epilogue(), gelu_aux);
        // Plain and fused plans never choose one.
        let plain = plan(&linear(m, n, k)).unwrap();
        assert!(
            !plain.kernel_spec().fusion.has_aux(),
            "{}",
            plain.kernel_name()
        );
        let fused = plain.with_epilogue(Epilogue::bias()).unwrap();
        assert!(
            !fused.kernel_spec().fusion.has_aux(),
            "{}",
            fused.kernel_name()
        );
    }
    let refused = |r: cutlass_gemm::Result<Gemm<bf16, bf16, bf16>>, want: AuxRule| match r {
        Err(Error::InvalidProblem {
            reason: ProblemRule::AuxOutput { rule },
        }) => assert_eq!(rule, want),
        other => panic!(
            "expected {want:?}, got {:?}",
            other.map(|g| g.kernel_name())
        ),
    };
    let p = linear(512, 4096, 1024);
    // Scales and a bias per row.
    for e in [
        Epilogue::rowwise(),
        Epilogue::bias().with_bias(BiasAxis::PerRow),
        Epilogue::NONE
            .with_activation(Activation::Relu)
            .with_bias(BiasAxis::PerRow),
    ] {
        refused(
            plan(&p).unwrap().with_epilogue(e.with_aux_output()),
            AuxRule::Vectors,
        );
    }
    // D with rows the kernels' TMA cannot store in place (a padded copy), n off 8.
    let odd_ld = p.with_d(MatrixLayout::row_major().with_ld(4097));
    refused(
        plan(&odd_ld).unwrap().with_epilogue(gelu_aux),
        AuxRule::Staged,
    );
    refused(
        plan(&linear(512, 4095, 1024))
            .unwrap()
            .with_epilogue(gelu_aux),
        AuxRule::Staged,
    );
    // A column-major D (the kernels that would compute Dᵀ take no bias per column).
    for m in [16, 512] {
        let col = linear(m, 4096, 1024)
            .with_c(MatrixLayout::col_major())
            .with_d(MatrixLayout::col_major());
        refused(
            plan(&col).unwrap().with_epilogue(gelu_aux),
            AuxRule::ColumnMajorD,
        );
    }
    // Split-K with a separate reduction.
    let g = plan(&p).unwrap().with_epilogue(gelu_aux).unwrap();
    assert!(matches!(
        g.with_schedule(ScheduleHints {
            splits: 4,
            ..Default::default()
        }),
        Err(Error::InvalidProblem {
            reason: ProblemRule::AuxOutput {
                rule: AuxRule::Staged
            }
        })
    ));
    // Other plans: an f32 D, FP8, gated.
    let f32_out = Gemm::<bf16, bf16, f32>::plan(H100, &p, None)
        .unwrap()
        .with_epilogue(gelu_aux);
    assert!(matches!(
        f32_out,
        Err(Error::InvalidProblem {
            reason: ProblemRule::AuxOutput {
                rule: AuxRule::Plan
            }
        })
    ));
    let fp8 = Gemm::<E4M3, E4M3, bf16>::plan(H100, &p, None)
        .unwrap()
        .with_epilogue(gelu_aux);
    assert!(matches!(
        fp8,
        Err(Error::InvalidProblem {
            reason: ProblemRule::AuxOutput {
                rule: AuxRule::Plan
            }
        })
    ));
    let gated = GatedGemm::<bf16>::plan(
        H100,
        &GemmProblem::new(512, 4096, 1024),
        Activation::Silu,
        None,
    )
    .unwrap()
    .with_epilogue(gelu_aux);
    assert!(matches!(
        gated,
        Err(Error::InvalidProblem {
            reason: ProblemRule::AuxOutput {
                rule: AuxRule::Plan
            }
        })
    ));
    // Named kernels: an aux kernel serves aux plans only; a plain kernel is refused for one.
    let named = Gemm::<bf16, bf16, bf16>::plan(H100, &p, Some(AUX_KERNEL)).map(|g| g.kernel_name());
    assert!(
        matches!(
            named,
            Err(Error::KernelMismatch {
                reason: KernelRule::AuxOutput { kernel: true },
                ..
            })
        ),
        "{named:?}"
    );
    // Named with the epilogue from the start, it serves.
    let g =
        Gemm::<bf16, bf16, bf16>::plan_with_epilogue(H100, &p, gelu_aux, Some(AUX_KERNEL)).unwrap();
    assert_eq!(g.kernel_name(), AUX_KERNEL);
    // An aux plan given an epilogue without Aux leaves the aux kernel (unpinned: planned again;
    // pinned: refused).
    for e in [Epilogue::NONE, Epilogue::bias()] {
        let unpinned = plan(&p).unwrap().with_epilogue(gelu_aux).unwrap();
        let again = unpinned.with_epilogue(e).unwrap();
        assert!(
            !again.kernel_spec().fusion.has_aux(),
            "{}",
            again.kernel_name()
        );
        assert!(matches!(
            g.clone().with_epilogue(e),
            Err(Error::KernelMismatch {
                reason: KernelRule::AuxOutput { kernel: true },
                ..
            })
        ));
    }
    assert!(matches!(
        Gemm::<bf16, bf16, bf16>::plan_with_epilogue(H100, &odd_ld, gelu_aux, Some(AUX_KERNEL)),
        Err(Error::InvalidProblem {
            reason: ProblemRule::AuxOutput {
                rule: AuxRule::Staged
            }
        })
    ));
    assert!(matches!(
        Gemm::<bf16, bf16, bf16>::plan(H100, &p, Some(TMA_KERNEL))
            .unwrap()
            .with_epilogue(gelu_aux),
        Err(Error::KernelMismatch {
            reason: KernelRule::AuxOutput { kernel: false },
            ..
        })
    ));
    assert!(matches!(
        Gemm::<bf16, bf16, bf16>::plan(H100, &linear(16, 256, 64), Some(cutlass_gemm::DENSE_GEMV))
            .unwrap()
            .with_epilogue(gelu_aux),
        Err(Error::KernelMismatch {
            reason: KernelRule::AuxOutput { kernel: false },
            ..
        })
    )); // The same rule where the GEMV is named with the aux epilogue from the start.
    assert!(matches!(
        Gemm::<bf16, bf16, bf16>::plan_with_epilogue(
            H100,
            &linear(16, 256, 64),
            gelu_aux,
            Some(cutlass_gemm::DENSE_GEMV)
        ),
        Err(Error::KernelMismatch {
            reason: KernelRule::AuxOutput { kernel: false },
            ..
        })
    ));
}

/// An f32 bias (`Epilogue::with_f32_bias`): 16-bit plans take it in any build, in the kernel where
/// an f32-bias kernel is built (`catalog::f32_bias_epilogue`, not in the default set), through the
/// decode GEMV, else as the separate pass after the plain kernel; plans that need a fused kernel
/// (scales, a bias per row) without one built say which kernel to add, and so does a plan that
/// insists on the kernel (`with_epilogue_in_kernel`); the gated plans, whose kernels read a bias of
/// D's type, refuse it by the kernel rule (the weight-only ones: `tests/gpu/weight_only.rs`, which
/// needs their feature); `Epilogue::is_none` ignores the element type of an absent bias.
#[test]
fn f32_bias_plans_take_the_kernel_the_decode_gemv_or_the_separate_pass() {
    use cutlass_gemm::numeric::E4M3;
    use cutlass_gemm::{Activation, BiasAxis, BiasElement, Epilogue, GatedGemm};
    let e = Epilogue::bias()
        .with_activation(Activation::GeluTanh)
        .with_f32_bias();
    assert_eq!(e.bias, Some(BiasAxis::PerColumn));
    assert_eq!(e.bias_element, BiasElement::F32);
    assert_eq!(e.bias_type(DataType::Bf16), Some(DataType::F32));
    assert_eq!(
        Epilogue::bias().bias_type(DataType::F16),
        Some(DataType::F16)
    );
    assert_eq!(e.describe(), "bias(col,f32)+gelu-tanh");
    let f32_kernels = |ty: DataType| {
        built_kernels().iter().any(|k| {
            k.spec.fusion.bias_type() == Some(DataType::F32)
                && k.spec.a.ty == ty
                && k.spec.arch.runs_on((9, 0))
        })
    };
    let linear = |m, n, k| GemmProblem::new(m, n, k).with_b(MatrixLayout::col_major());
    // 16-bit, a bias per column: in the kernel, the GEMV, or the separate pass; never a kernel
    // that reads a bf16 bias.
    for (m, n, k) in [
        (4, 4096, 4096),
        (512, 11008, 4096),
        (4096, 4096, 4096),
        (300, 1000, 256),
    ] {
        let g = plan(&linear(m, n, k)).unwrap().with_epilogue(e).unwrap();
        assert_eq!(g.epilogue(), e);
        if m <= 16 {
            assert!(g.is_gemv(), "{m}: {}", g.kernel_name());
        } else if f32_kernels(DataType::Bf16) {
            assert!(!g.epilogue_is_separate());
            assert_eq!(g.kernel_spec().fusion.bias_type(), Some(DataType::F32));
        } else {
            assert!(g.epilogue_is_separate(), "{m}: {}", g.kernel_name());
            assert!(!g.kernel_spec().fusion.is_fused());
        }
        // The D-typed bias keeps the default fused kernels.
        let d_typed = plan(&linear(m, n, k))
            .unwrap()
            .with_epilogue(Epilogue::bias().with_activation(Activation::GeluTanh))
            .unwrap();
        assert!(
            d_typed.is_gemv() || d_typed.kernel_spec().fusion.bias_type() == Some(DataType::Bf16)
        );
    }
    // FP8 tensor-wise (bf16 D) with a bias per column: the f32-bias kernel, or the separate pass.
    let fp8 = Gemm::<E4M3, E4M3, bf16>::plan(H100, &linear(512, 4096, 1024), None)
        .unwrap()
        .with_epilogue(e)
        .unwrap();
    if f32_kernels(DataType::E4M3) {
        assert_eq!(fp8.kernel_spec().fusion.bias_type(), Some(DataType::F32));
    } else {
        assert!(fp8.epilogue_is_separate(), "{}", fp8.kernel_name());
    }
    // A bias per row (which the separate pass does not take) and FP8's rowwise scales need an
    // f32-bias kernel: without one, NoKernel names one to add.
    let needs_kernel = [
        plan(&linear(512, 4096, 1024))
            .unwrap()
            .with_epilogue(Epilogue::bias().with_bias(BiasAxis::PerRow).with_f32_bias())
            .map(|g| g.kernel_name()),
        Gemm::<E4M3, E4M3, bf16>::plan(H100, &linear(512, 4096, 1024), None)
            .unwrap()
            .with_epilogue(Epilogue::rowwise().with_f32_bias())
            .map(|g| g.kernel_name()),
    ];
    for (r, ty) in needs_kernel
        .into_iter()
        .zip([DataType::Bf16, DataType::E4M3])
    {
        match r {
            Ok(name) => {
                assert!(f32_kernels(ty), "{name}");
                assert!(name.contains("_evt_scale_biasf32_act"), "{name}");
            }
            Err(Error::NoKernel { build_with, .. }) => {
                assert!(!f32_kernels(ty));
                match build_with {
                    BuildHint::Kernels(name) => {
                        assert!(name.contains("_evt_scale_biasf32_act"), "{name}")
                    }
                    other => panic!("{other:?}"),
                }
            }
            Err(other) => panic!("{other}"),
        }
    }
    // A named kernel that reads a bf16 bias is refused by the bias rule.
    let named = Gemm::<bf16, bf16, bf16>::plan(H100, &linear(512, 4096, 1024), Some(TMA_KERNEL))
        .unwrap()
        .with_epilogue(e);
    assert!(matches!(
        named,
        Err(Error::KernelMismatch {
            reason: KernelRule::NoFusedEpilogue | KernelRule::BiasType { .. },
            ..
        })
    ));
    let fused_bf16 = built_kernels()
        .iter()
        .find(|k| {
            k.spec.fusion.bias_type() == Some(DataType::Bf16)
                && k.spec.fusion.is_fused()
                && k.spec.a.ty == DataType::Bf16
                && k.spec.d.layout == Layout::RowMajor
        })
        .expect("the default set's fused bf16 kernels");
    match Gemm::<bf16, bf16, bf16>::plan(H100, &linear(512, 4096, 1024), Some(fused_bf16.name))
        .unwrap()
        .with_epilogue(e)
    {
        Err(Error::KernelMismatch {
            reason: KernelRule::BiasType { kernel, required },
            ..
        }) => assert_eq!((kernel, required), (DataType::Bf16, DataType::F32)),
        other => panic!("{:?}", other.map(|g| g.kernel_name())),
    }
    // Insisting on the kernel: an f32-bias kernel, or NoKernel naming one.
    let in_kernel = plan(&linear(4096, 4096, 4096))
        .unwrap()
        .with_epilogue_in_kernel(e);
    match in_kernel {
        Ok(g) => {
            assert!(f32_kernels(DataType::Bf16));
            assert_eq!(g.kernel_spec().fusion.bias_type(), Some(DataType::F32));
        }
        Err(Error::NoKernel {
            build_with: BuildHint::Kernels(name),
            ..
        }) => {
            assert!(!f32_kernels(DataType::Bf16));
            assert!(name.contains("_evt_scale_biasf32_act"), "{name}");
        }
        Err(other) => panic!("{other}"),
    }
    // A fused plan (a bf16 bias) given an f32 bias instead, without an f32-bias kernel: the pass
    // follows a plain kernel, not the fused one.
    let fused = plan(&linear(4096, 4096, 4096))
        .unwrap()
        .with_epilogue(Epilogue::bias())
        .unwrap();
    assert!(fused.kernel_spec().fusion.is_fused());
    let moved = fused.with_epilogue(e).unwrap();
    if moved.epilogue_is_separate() {
        assert!(
            !moved.kernel_spec().fusion.is_fused(),
            "{}",
            moved.kernel_name()
        );
    } else {
        assert_eq!(moved.kernel_spec().fusion.bias_type(), Some(DataType::F32));
    }
    let no_bias = Epilogue {
        bias: None,
        ..Epilogue::bias().with_f32_bias()
    };
    assert!(no_bias.is_none());
    // The gated kernels read a bias of D's type.
    let gated = GatedGemm::<bf16>::plan(
        H100,
        &GemmProblem::new(512, 4096, 4096),
        Activation::Silu,
        None,
    )
    .unwrap()
    .with_epilogue(Epilogue::bias().with_f32_bias());
    match gated {
        Err(Error::KernelMismatch {
            reason: KernelRule::BiasType { kernel, required },
            ..
        }) => assert_eq!((kernel, required), (DataType::Bf16, DataType::F32)),
        other => panic!("{:?}", other.map(|g| g.kernel_name())),
    }
}
