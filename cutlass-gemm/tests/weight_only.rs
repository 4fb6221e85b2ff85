//! Weight-only GEMM plans on described devices, on any machine: the weight rules, the kernel
//! choice (or, in a build without the `weight-only` feature, the error that names it), refusals of
//! kernels of the other registries, GPTQ's act-order check, and the host dequantization worked out
//! by hand.

use cutlass_gemm::plans::weight_only::{GEMV_MAX_TOKENS, GEMV_TOKENS};
use cutlass_gemm::reference;
use cutlass_gemm::{
    built_weight_only_kernels, BuildHint, DeviceInfo, Error, Extent, Family, Gemm, GemmProblem,
    KernelRule, ProblemRule, WeightFormat, WeightOnlyGemm, WeightOnlyProblem, WeightRule,
};
use half::{bf16, f16};

const H100: DeviceInfo = DeviceInfo {
    ordinal: 0,
    compute_capability: (9, 0),
    sm_count: 132,
};

fn weight_rule(err: Error) -> WeightRule {
    match err {
        Error::InvalidProblem {
            reason: ProblemRule::Weight { rule },
        } => rule,
        other => panic!("not a weight rule: {other}"),
    }
}

#[test]
fn weight_rules_are_typed() {
    let plan = |m, n, k, g| {
        WeightOnlyGemm::<bf16>::plan(
            H100,
            &WeightOnlyProblem::new(m, n, k, g, WeightFormat::Symmetric),
            None,
        )
    };
    assert_eq!(
        weight_rule(plan(1, 4100, 4096, 128).unwrap_err()),
        WeightRule::Rows {
            n: 4100,
            multiple: 16
        }
    );
    assert_eq!(
        weight_rule(plan(1, 4096, 4000, 128).unwrap_err()),
        WeightRule::Columns {
            k: 4000,
            multiple: 64
        }
    );
    for g in [0, 32, 100, 192] {
        assert_eq!(
            weight_rule(plan(1, 4096, 4096, g).unwrap_err()),
            WeightRule::GroupSize {
                group_size: g,
                k: 4096
            },
            "group {g}"
        );
    }
    assert!(matches!(
        plan(0, 4096, 4096, 128).unwrap_err(),
        Error::InvalidProblem {
            reason: ProblemRule::ZeroExtent(Extent::M)
        }
    ));
    assert!(matches!(
        plan(1, 0, 4096, 128).unwrap_err(),
        Error::InvalidProblem {
            reason: ProblemRule::ZeroExtent(Extent::N)
        }
    ));
    let p = WeightOnlyProblem::new(1, 4096, 4096, 128, WeightFormat::Symmetric)
        .with_scalars(f32::NAN, 0.0);
    assert!(matches!(
        WeightOnlyGemm::<bf16>::plan(H100, &p, None).unwrap_err(),
        Error::InvalidProblem {
            reason: ProblemRule::NonFiniteScalars { .. }
        }
    ));
    // The messages say the rule.
    let text = plan(1, 4096, 4096, 100).unwrap_err().to_string();
    assert!(text.contains("group size 100"), "{text}");
}

#[test]
fn act_order_is_refused_naming_the_column() {
    let g: Vec<i32> = (0..256).map(|i| i / 128).collect();
    cutlass_gemm::plans::weight_only::check_group_index(&g, 256, 128).unwrap();
    let mut act = g.clone();
    act[5] = 1;
    assert_eq!(
        weight_rule(
            cutlass_gemm::plans::weight_only::check_group_index(&act, 256, 128).unwrap_err()
        ),
        WeightRule::ActOrder {
            column: 5,
            group: 1
        }
    );
    assert!(matches!(
        cutlass_gemm::plans::weight_only::check_group_index(&g[..255], 256, 128).unwrap_err(),
        Error::BufferTooSmall { .. }
    ));
}

/// A group size of 0 is refused with the group-size rule, whatever `g_idx` holds (found by
/// `tests/fuzz_plans.rs`: the check divided each column by it and panicked).
#[test]
fn group_index_refuses_a_group_size_of_zero() {
    use cutlass_gemm::plans::weight_only::check_group_index;
    for (g_idx, k) in [(vec![0; 256], 256), (vec![0; 255], 256), (vec![], 0)] {
        assert_eq!(
            weight_rule(check_group_index(&g_idx, k, 0).unwrap_err()),
            WeightRule::GroupSize { group_size: 0, k },
            "{} entries, k = {k}",
            g_idx.len()
        );
    }
}

/// A device described with no SMs (or a negative count) plans as one with a single SM. Found by
/// `tests/fuzz_plans.rs`: the count reached CUTLASS, which reads one below 1 as "query the
/// device" and, without one, divided by zero sizing a stream-K kernel's workspace (SIGFPE).
#[test]
fn a_device_described_without_sms_plans_as_one_sm() {
    for format in [WeightFormat::Symmetric, WeightFormat::ZeroPoint] {
        // 17 tokens: a stream-K kernel (fewer take the decode GEMV).
        let p = WeightOnlyProblem::new(17, 4096, 4096, 128, format);
        let with =
            |sm_count| WeightOnlyGemm::<bf16>::plan(DeviceInfo { sm_count, ..H100 }, &p, None);
        let one = match with(1) {
            Ok(g) => g,
            // A build without the kernels.
            Err(Error::NoKernel { .. }) => continue,
            Err(e) => panic!("{e}"),
        };
        for sm_count in [0, -1, i32::MIN] {
            let g = with(sm_count).unwrap();
            assert_eq!(
                (g.kernel_name(), g.splits(), g.workspace_size()),
                (one.kernel_name(), one.splits(), one.workspace_size()),
                "{sm_count} SMs"
            );
        }
    }
}

#[test]
fn the_choice_follows_the_tokens_or_names_the_feature() {
    let p = |m| WeightOnlyProblem::new(m, 4096, 4096, 128, WeightFormat::ZeroPoint);
    if !cutlass_gemm::sys::WEIGHT_GEMV_BUILT {
        // A build without the `weight-only` feature: the error says how to get the kernels, the
        // decode GEMV's included.
        match WeightOnlyGemm::<bf16>::plan(H100, &p(1), Some(cutlass_gemm::WEIGHT_ONLY_GEMV))
            .unwrap_err()
        {
            Error::NoKernel { build_with, .. } => {
                assert_eq!(build_with, BuildHint::Feature(Family::WeightOnly))
            }
            other => panic!("{other}"),
        }
        for ty in [0, 1] {
            let err = if ty == 0 {
                WeightOnlyGemm::<bf16>::plan(H100, &p(1), None).unwrap_err()
            } else {
                WeightOnlyGemm::<f16>::plan(H100, &p(1), None).unwrap_err()
            };
            match err {
                Error::NoKernel { build_with, .. } => {
                    assert_eq!(build_with, BuildHint::Feature(Family::WeightOnly))
                }
                other => panic!("{other}"),
            }
        }
        return;
    }
    // The decode GEMV up to 16 tokens, on any weight.
    let gemv = |m, n| {
        WeightOnlyGemm::<bf16>::plan(
            H100,
            &WeightOnlyProblem::new(m, n, 4096, 128, WeightFormat::ZeroPoint),
            None,
        )
        .unwrap()
        .is_gemv()
    };
    for (m, n, want) in [
        (1, 4096, true),
        (8, 28672, true),
        (9, 28672, true),
        (16, 4096, true),
        (16, 57344, true),
        (17, 4096, false),
        (17, 57344, false),
    ] {
        assert_eq!(gemv(m, n), want, "{m} tokens, n = {n}");
    }
    assert_eq!(
        WeightOnlyGemm::<bf16>::plan(H100, &p(1), None)
            .unwrap()
            .kernel_name(),
        cutlass_gemm::WEIGHT_ONLY_GEMV
    );
    let tile = |m| {
        let plan = WeightOnlyGemm::<bf16>::plan(H100, &p(m), None).unwrap();
        let spec = cutlass_gemm_catalog::catalog::find(plan.kernel_name()).unwrap();
        assert_eq!(spec.a.ty, cutlass_gemm::DataType::U4);
        assert!(plan.kernel_name().contains("_sclzr_shfl_"));
        (spec.tile[0], spec.tile[1])
    };
    // Past the GEMV, zero points: 128x32 (their 128x16 tile is slower), then 128x64, 128x128
    // stream-K up to 1024 tokens, 128x256 persistent beyond.
    assert_eq!(tile(17), (128, 32));
    assert_eq!(tile(32), (128, 32));
    assert_eq!(tile(33), (128, 64));
    assert_eq!(tile(64), (128, 64));
    assert_eq!(tile(65), (128, 128));
    assert_eq!(tile(1024), (128, 128));
    assert_eq!(tile(1025), (128, 256));
    assert_eq!(tile(8192), (128, 256));
    // Symmetric weights take the s4 kernels: the GEMV up to 16 tokens, then 128x32.
    let s = |m, n| {
        WeightOnlyGemm::<f16>::plan(
            H100,
            &WeightOnlyProblem::new(m, n, 4096, 128, WeightFormat::Symmetric),
            None,
        )
        .unwrap()
        .kernel_name()
    };
    assert_eq!(s(16, 28672), cutlass_gemm::WEIGHT_ONLY_GEMV);
    assert!(s(17, 28672).contains("_s4_f16_f32_f16_f16_scl_shfl_128x32x64_"));
    assert!(s(17, 4096).contains("_s4_f16_f32_f16_f16_scl_shfl_128x32x64_"));
    // Split-K 4 where the output tiles fill at most a quarter of the SMs over a long k (4096
    // rows at decode: 32 tiles for 132 SMs), none where they are many or k is short.
    let splits = |m, n, k| {
        WeightOnlyGemm::<bf16>::plan(
            H100,
            &WeightOnlyProblem::new(m, n, k, 128, WeightFormat::ZeroPoint),
            None,
        )
        .unwrap()
        .splits()
    };
    assert_eq!(splits(17, 4096, 4096), 4);
    assert_eq!(splits(64, 4096, 14336), 4);
    assert_eq!(splits(17, 6144, 4096), 0);
    assert_eq!(splits(17, 768, 768), 0);
    assert_eq!(splits(4096, 4096, 4096), 0);
    // Split-K on a persistent kernel is refused; on a stream-K one taken.
    let persistent = WeightOnlyGemm::<bf16>::plan(H100, &p(4096), None).unwrap();
    assert!(matches!(
        persistent.with_splits(4).unwrap_err(),
        Error::KernelMismatch {
            reason: KernelRule::SplitKNeedsStreamK { splits: 4 },
            ..
        }
    ));
    WeightOnlyGemm::<bf16>::plan(H100, &p(17), None)
        .unwrap()
        .with_splits(4)
        .unwrap();
    // The GEMV has no split-K, and takes at most 32 tokens when named.
    let named = |m| WeightOnlyGemm::<bf16>::plan(H100, &p(m), Some(cutlass_gemm::WEIGHT_ONLY_GEMV));
    assert!(matches!(
        named(1).unwrap().with_splits(4).unwrap_err(),
        Error::KernelMismatch {
            reason: KernelRule::SplitKNeedsStreamK { splits: 4 },
            ..
        }
    ));
    assert_eq!(named(32).unwrap().workspace_size(), 0);
    assert!(matches!(
        named(33).unwrap_err(),
        Error::KernelMismatch {
            reason: KernelRule::GemvTokens { m: 33, max: 32 },
            ..
        }
    ));
    // Compiled for the build's architectures only: an SM120 device in this SM90 build.
    let sm120 = DeviceInfo {
        compute_capability: (12, 0),
        ..H100
    };
    if !cutlass_gemm::sys::BUILT_ARCHS.contains("120a") {
        match WeightOnlyGemm::<bf16>::plan(sm120, &p(1), Some(cutlass_gemm::WEIGHT_ONLY_GEMV))
            .unwrap_err()
        {
            Error::NoKernel { build_with, .. } => assert_eq!(
                build_with,
                BuildHint::Architecture(cutlass_gemm_catalog::Arch::Sm120a)
            ),
            other => panic!("{other}"),
        }
    }
}

#[test]
fn kernels_of_other_registries_are_refused() {
    let p = WeightOnlyProblem::new(1, 4096, 4096, 128, WeightFormat::Symmetric);
    let plain = "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_2x1x1_0_tnt_align8_warpspecialized_cooperative_epi_tma";
    assert!(matches!(
        WeightOnlyGemm::<bf16>::plan(H100, &p, Some(plain)).unwrap_err(),
        Error::KernelMismatch {
            reason: KernelRule::WeightOnly { kernel: false },
            ..
        }
    ));
    let weight_only = "cutlass3x_sm90_tensorop_gemm_s4_bf16_f32_bf16_bf16_scl_shfl_128x16x64_1x1x1_0_tnn_align32_stream_k_warpspecialized_cooperative_epi_tma";
    assert!(cutlass_gemm_catalog::catalog::find(weight_only).is_some());
    let err =
        Gemm::<bf16, bf16, bf16>::plan(H100, &GemmProblem::new(16, 4096, 4096), Some(weight_only))
            .unwrap_err();
    assert!(
        matches!(
            err,
            Error::KernelMismatch {
                reason: KernelRule::WeightOnly { kernel: true },
                ..
            }
        ),
        "{err}"
    );
    if !cutlass_gemm::sys::WEIGHT_GEMV_BUILT {
        assert!(matches!(
            WeightOnlyGemm::<bf16>::plan(H100, &p, Some(weight_only)).unwrap_err(),
            Error::KernelNotBuilt {
                build_with: BuildHint::Feature(Family::WeightOnly),
                ..
            }
        ));
    } else {
        // A kernel of the other activation type.
        assert!(matches!(
            WeightOnlyGemm::<f16>::plan(H100, &p, Some(weight_only)).unwrap_err(),
            Error::KernelMismatch {
                reason: KernelRule::Operand { .. },
                ..
            }
        ));
    }
}

#[test]
fn the_feature_builds_fifty_kernels() {
    use cutlass_gemm_catalog::catalog;
    let family: Vec<_> = catalog::all()
        .into_iter()
        .filter(|s| Family::WeightOnly.contains(s))
        .collect();
    assert_eq!(family.len(), 50);
    // Per activation type: five tiles with scales only, four with zero points, five each for FP8
    // and int8 weights; bf16 also three of them with the fused epilogue per weight format.
    for (weight, n) in [
        (cutlass_gemm::DataType::S4, 5),
        (cutlass_gemm::DataType::U4, 4),
        (cutlass_gemm::DataType::E4M3, 5),
        (cutlass_gemm::DataType::I8, 5),
    ] {
        for wide in [cutlass_gemm::DataType::Bf16, cutlass_gemm::DataType::F16] {
            let of = |fused: bool| {
                family
                    .iter()
                    .filter(|s| (s.a.ty, s.b.ty) == (weight, wide) && s.fusion.is_fused() == fused)
                    .count()
            };
            assert_eq!(of(false), n);
            assert_eq!(
                of(true),
                if wide == cutlass_gemm::DataType::Bf16 {
                    3
                } else {
                    0
                }
            );
        }
    }
    for s in &family {
        // 4-bit weights in the packed order, FP8 and int8 ones as stored.
        assert!(
            s.name().contains("_scl_shfl_")
                || s.name().contains("_sclzr_shfl_")
                || ((s.name().contains("_e4m3_") || s.name().contains("_s8_"))
                    && s.name().contains("_scl_")),
            "{}",
            s.name()
        );
        assert!(!catalog::is_default(s), "{}", s.name());
    }
    assert!(catalog::all()
        .iter()
        .filter(|s| catalog::is_default(s))
        .all(|s| s.mixed_input.is_none()));
}

/// One 16 x 64 weight in groups of 64, worked out by hand: values 0..15 cycling, scale 0.75 in
/// row 0 and 1.25 elsewhere; zero points 3.
#[test]
fn host_dequantization_rounds_once_as_the_kernels_do() {
    let (n, k, g) = (16, 64, 64);
    let values: Vec<u8> = (0..n * k / 2)
        .map(|b| {
            let e = 2 * b;
            ((e % 16) | (((e + 1) % 16) << 4)) as u8
        })
        .collect();
    let scales: Vec<bf16> = (0..n)
        .map(|j| bf16::from_f32(if j == 0 { 0.75 } else { 1.25 }))
        .collect();
    // Signed: nibble 9 is -7.
    let w = reference::dequantize_weight(&values, true, &scales, None, n, k, g).unwrap();
    assert_eq!(w[0].to_f32(), 0.0);
    assert_eq!(w[1].to_f32(), 0.75);
    assert_eq!(w[9].to_f32(), -7.0 * 0.75);
    assert_eq!(w[k + 7].to_f32(), 7.0 * 1.25);
    assert_eq!(w[k + 8].to_f32(), -8.0 * 1.25);
    // Unsigned with zeros z = -s · 3.
    let zeros: Vec<bf16> = scales
        .iter()
        .map(|s| bf16::from_f32(-s.to_f32() * 3.0))
        .collect();
    let w = reference::dequantize_weight(&values, false, &scales, Some(&zeros), n, k, g).unwrap();
    assert_eq!(w[0].to_f32(), -2.25);
    assert_eq!(w[15].to_f32(), 12.0 * 0.75);
    // One rounding (a fused multiply-add): q · s is not rounded before the zero is added.
    let s = bf16::from_f32(1.0 + 1.0 / 128.0);
    assert_eq!(s.to_f32(), 1.0078125);
    let scales = vec![s; n];
    let z = vec![bf16::from_f32(-15.0); n];
    let w = reference::dequantize_weight(&values, false, &scales, Some(&z), n, k, g).unwrap();
    // Column 15 holds q = 15: 15 · s - 15 = 0.1171875, exact in bf16; rounding 15 · s =
    // 15.1171875 to bf16 first (15.125) would give 0.125.
    assert_eq!(w[15].to_f32(), 0.1171875);
    // Lengths are checked.
    assert!(matches!(
        reference::dequantize_weight(&values[1..], false, &scales, None, n, k, g).unwrap_err(),
        Error::BufferTooSmall { .. }
    ));
}

/// FP8 and int8 weights: one scale per output channel (a group as long as k); the decode GEMV up
/// to 16 tokens (and named up to its most), the CUTLASS kernels of the format beyond.
#[test]
fn fp8_weights_take_one_group_the_gemv_then_the_cutlass_kernels() {
    per_channel_weights_take_one_group(WeightFormat::Fp8, "_e4m3_");
}

#[test]
fn int8_weights_take_one_group_the_gemv_then_the_cutlass_kernels() {
    per_channel_weights_take_one_group(WeightFormat::Int8, "_s8_");
}

fn per_channel_weights_take_one_group(format: WeightFormat, weight_type: &str) {
    let p = |m, g| WeightOnlyProblem::new(m, 4096, 4096, g, format);
    assert_eq!(
        weight_rule(WeightOnlyGemm::<bf16>::plan(H100, &p(1, 128), None).unwrap_err()),
        WeightRule::PerChannel {
            group_size: 128,
            k: 4096
        }
    );
    if !cutlass_gemm::sys::WEIGHT_GEMV_BUILT {
        match WeightOnlyGemm::<bf16>::plan(H100, &p(1, 4096), None).unwrap_err() {
            Error::NoKernel { build_with, .. } => {
                assert_eq!(build_with, BuildHint::Feature(Family::WeightOnly))
            }
            other => panic!("{other}"),
        }
        return;
    }
    let named =
        |m| WeightOnlyGemm::<bf16>::plan(H100, &p(m, 4096), Some(cutlass_gemm::WEIGHT_ONLY_GEMV));
    for m in [1, 17, GEMV_MAX_TOKENS] {
        let plan = named(m).unwrap();
        assert!(plan.is_gemv());
        plan.prepare().unwrap();
    }
    match named(GEMV_MAX_TOKENS + 1).unwrap_err() {
        Error::KernelMismatch {
            reason: KernelRule::GemvTokens { .. },
            ..
        } => {}
        other => panic!("{other}"),
    }
    for m in [1, 16, 17, 64, 65, 4096] {
        let bf16_plan = WeightOnlyGemm::<bf16>::plan(H100, &p(m, 4096), None).unwrap();
        let f16_plan = WeightOnlyGemm::<f16>::plan(H100, &p(m, 4096), None).unwrap();
        for (gemv, name) in [
            (bf16_plan.is_gemv(), bf16_plan.kernel_name()),
            (f16_plan.is_gemv(), f16_plan.kernel_name()),
        ] {
            assert_eq!(gemv, m <= GEMV_TOKENS, "{m}: {name}");
            if !gemv {
                assert!(
                    name.contains(weight_type) && name.contains("_scl_"),
                    "{m}: {name}"
                );
                assert!(!name.contains("_shfl_"), "{name}");
            }
        }
    }
}

/// e4m3 1.0, 1.5, 1.875, the smallest subnormal (2^-9), -448 and 448, scaled by 0.75 and by
/// 1 + 2^-7: every product is exact in bf16 but 1.875 · (1 + 2^-7) = 1.8896484375, which rounds
/// to 1.890625.
#[test]
fn fp8_host_dequantization_rounds_the_product_once() {
    let row = [0x38u8, 0x3C, 0x3F, 0x01, 0xFE, 0x7E];
    let values: Vec<u8> = (0..2)
        .flat_map(|_| row.iter().copied().cycle().take(64))
        .chain(std::iter::repeat_n(0, 14 * 64))
        .collect();
    let mut scales = vec![bf16::from_f32(1.0); 16];
    scales[0] = bf16::from_f32(0.75);
    scales[1] = bf16::from_f32(1.0 + 1.0 / 128.0);
    let w = reference::dequantize_fp8_weight(&values, &scales, 16, 64).unwrap();
    let got = |j: usize, i: usize| w[j * 64 + i].to_f32();
    let exact = [0.75, 1.125, 1.40625, 0.75 / 512.0, -336.0, 336.0];
    for (i, want) in exact.iter().enumerate() {
        assert_eq!(got(0, i), *want, "row 0, value {i}");
    }
    assert_eq!(got(1, 0), 1.0078125);
    assert_eq!(got(1, 2), 1.890625);
    assert_eq!(got(2, 0), 0.0);
    // Lengths are checked: n · k bytes, n scales.
    assert!(reference::dequantize_fp8_weight(&values[1..], &scales, 16, 64).is_err());
    assert!(reference::dequantize_fp8_weight(&values, &scales[1..], 16, 64).is_err());
}

/// The weight's order decides what reads it: the packed order the SM90 kernels and the decode GEMV
/// read (what the constructors make of a 4-bit weight), the plain one the SM100 kernels read (with
/// their group size fixed at 128). A plan for one order never takes a kernel of the other; named,
/// such a kernel is refused with the rule; FP8 and int8 weights have the plain order only.
#[test]
fn the_weight_order_decides_the_kernels() {
    use cutlass_gemm::WeightOrder::{Packed, Plain};
    const B200: DeviceInfo = DeviceInfo {
        ordinal: 0,
        compute_capability: (10, 0),
        sm_count: 148,
    };
    let p = |m, format| WeightOnlyProblem::new(m, 4096, 4096, 128, format);
    assert_eq!(p(1, WeightFormat::Symmetric).order, Packed);
    assert_eq!(p(1, WeightFormat::ZeroPoint).order, Packed);
    let fp8 = WeightOnlyProblem::new(1, 4096, 4096, 4096, WeightFormat::Fp8);
    assert_eq!(fp8.order, Plain);
    assert_eq!(
        weight_rule(fp8.with_order(Packed).check().unwrap_err()),
        WeightRule::Order {
            weight: Packed,
            required: Plain
        }
    );
    // The catalog's SM100 entries read the plain order in groups of 128, the SM90 ones the packed
    // order with the group size given at run time.
    let sm100 = "cutlass3x_sm100_tensorop_gemm_s4_bf16_f32_bf16_bf16_scl_g128_128x64x128_1x1x1_0_tnn_align32_1sm";
    let spec = cutlass_gemm_catalog::catalog::find(sm100).unwrap();
    assert_eq!(cutlass_gemm::WeightOrder::of_kernel(&spec), Plain);
    assert_eq!(spec.mixed_input.unwrap().group, 128);
    let sm90 = "cutlass3x_sm90_tensorop_gemm_s4_bf16_f32_bf16_bf16_scl_shfl_128x16x64_1x1x1_0_tnn_align32_stream_k_warpspecialized_cooperative_epi_tma";
    let spec = cutlass_gemm_catalog::catalog::find(sm90).unwrap();
    assert_eq!(cutlass_gemm::WeightOrder::of_kernel(&spec), Packed);
    assert_eq!(spec.mixed_input.unwrap().group, 0);
    // A plain 4-bit weight on Hopper: nothing reads it, whatever the build (the decode GEMV reads
    // the packed order), and the error says no catalog entry would.
    for m in [1, 17, 4096] {
        match WeightOnlyGemm::<bf16>::plan(
            H100,
            &p(m, WeightFormat::Symmetric).with_order(Plain),
            None,
        )
        .unwrap_err()
        {
            Error::NoKernel {
                request,
                build_with,
                ..
            } => {
                assert_eq!(build_with, BuildHint::NotInCatalog, "{m} tokens");
                assert!(request.contains("plain order"), "{request}");
            }
            other => panic!("{m} tokens: {other}"),
        }
    }
    let named_gemv = WeightOnlyGemm::<bf16>::plan(
        H100,
        &p(1, WeightFormat::Symmetric).with_order(Plain),
        Some(cutlass_gemm::WEIGHT_ONLY_GEMV),
    );
    assert!(matches!(
        named_gemv.unwrap_err(),
        Error::KernelMismatch {
            reason: KernelRule::WeightOrder {
                kernel: Packed,
                plan: Plain
            },
            ..
        }
    ));
    // On SM100 past the GEMV's tokens a packed weight has no kernel (the SM90 ones do not run
    // there); a plain one takes an SM100 kernel of the `sm100` family, or the error names it.
    match WeightOnlyGemm::<bf16>::plan(B200, &p(64, WeightFormat::Symmetric), None).unwrap_err() {
        Error::NoKernel { build_with, .. } => assert_eq!(build_with, BuildHint::NotInCatalog),
        other => panic!("{other}"),
    }
    // The built SM100 s4 x bf16 tiles' N: the narrowest that holds the tokens, else the widest.
    let built_n: Vec<u32> = built_weight_only_kernels()
        .iter()
        .filter(|k| {
            k.spec.arch == cutlass_gemm::Arch::Sm100a
                && (k.spec.a.ty, k.spec.b.ty)
                    == (cutlass_gemm::DataType::S4, cutlass_gemm::DataType::Bf16)
        })
        .map(|k| k.spec.tile[1])
        .collect();
    for m in [17, 64, 65, 4096] {
        let plain = p(m, WeightFormat::Symmetric).with_order(Plain);
        match WeightOnlyGemm::<bf16>::plan(B200, &plain, None) {
            Ok(g) => {
                let spec = cutlass_gemm_catalog::catalog::find(g.kernel_name()).unwrap();
                assert_eq!(spec.arch, cutlass_gemm::Arch::Sm100a);
                let want = built_n
                    .iter()
                    .copied()
                    .filter(|&n| n as usize >= m)
                    .min()
                    .or_else(|| built_n.iter().copied().max());
                assert_eq!(Some(spec.tile[1]), want, "{m} tokens");
                assert_eq!(g.splits(), 0);
            }
            Err(Error::NoKernel { build_with, .. }) => {
                assert_eq!(build_with, BuildHint::Feature(Family::Sm100), "{m} tokens")
            }
            Err(other) => panic!("{m} tokens: {other}"),
        }
        // Groups of 64: no SM100 kernel takes them.
        let g64 =
            WeightOnlyProblem::new(m, 4096, 4096, 64, WeightFormat::Symmetric).with_order(Plain);
        match WeightOnlyGemm::<bf16>::plan(B200, &g64, None).unwrap_err() {
            Error::NoKernel { build_with, .. } => assert_eq!(build_with, BuildHint::NotInCatalog),
            other => panic!("{other}"),
        }
    }
    // Named: the kernel's order and group size are the plan's, or the rule says why not.
    if built_weight_only_kernels().iter().any(|k| k.name == sm100) {
        let named = |problem: &WeightOnlyProblem| {
            WeightOnlyGemm::<bf16>::plan_any_arch(H100, problem, sm100).map(|g| g.kernel_name())
        };
        assert_eq!(
            named(&p(64, WeightFormat::Symmetric).with_order(Plain)).unwrap(),
            sm100
        );
        assert!(matches!(
            named(&p(64, WeightFormat::Symmetric)).unwrap_err(),
            Error::KernelMismatch {
                reason: KernelRule::WeightOrder {
                    kernel: Plain,
                    plan: Packed
                },
                ..
            }
        ));
        let g64 =
            WeightOnlyProblem::new(64, 4096, 4096, 64, WeightFormat::Symmetric).with_order(Plain);
        assert!(matches!(
            named(&g64).unwrap_err(),
            Error::KernelMismatch {
                reason: KernelRule::WeightGroupSize {
                    kernel: 128,
                    plan: 64
                },
                ..
            }
        ));
        // Without plan_any_arch, Hopper cannot run it.
        assert!(matches!(
            WeightOnlyGemm::<bf16>::plan(
                H100,
                &p(64, WeightFormat::Symmetric).with_order(Plain),
                Some(sm100)
            )
            .unwrap_err(),
            Error::ArchMismatch { .. }
        ));
    }
}
