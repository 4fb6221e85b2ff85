//! Grouped GEMMs (mixture-of-experts layers) against the f64 host reference, group by group:
//! every grouped kernel of the build, the contiguous and masked layouts, empty groups, one-row
//! groups, skewed routing, a group larger than one wave of the GPU, offsets past the end (clamped),
//! per-group alphas, and the masked layout captured in a CUDA graph and replayed with new counts.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use cutlass_gemm::numeric::E4M3;
use cutlass_gemm::reference::{self, GroupReference};
use cutlass_gemm::{
    built_grouped_kernels, DataType, Element, GemmProblem, GroupedGemm, GroupedInputs,
    GroupedListGemm, GroupedListProblem, GroupedProblem, Workspace,
};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::Rng;

use crate::common::{gemm_device, loose_bound, rng};

/// Small integers: every product and sum of them is exact in the f32 accumulator, so the only
/// error is D's rounding (inside the reference's bound).
fn integers<T: Element>(rng: &mut StdRng, len: usize, max: i32) -> Vec<T> {
    (0..len)
        .map(|_| T::from_f64(f64::from(rng.random_range(-max..=max))))
        .collect()
}

struct Case {
    problem: GroupedProblem,
    group_rows: Vec<i32>,
    alphas: Option<Vec<f32>>,
}

/// Runs one case on one kernel into a poisoned D; checks every group against the reference and
/// that the rows no group owns still hold the poison. Returns D.
fn run_case<T: Element, TD: Element>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    kernel: &str,
    case: &Case,
) -> Vec<TD> {
    let p = &case.problem;
    let plan = GroupedGemm::<T, TD>::with_kernel(ctx, p, kernel).unwrap();
    let (data, mut dd) = CaseData::<T, TD>::new(stream, rng, case);
    plan.run(stream, &data.inputs(case), &mut dd, Workspace::Managed)
        .unwrap();
    let d = stream.clone_dtoh(&dd).unwrap();
    let refs = reference::grouped(
        p,
        &data.a,
        &data.b,
        &case.group_rows,
        case.alphas.as_deref(),
        (p.beta != 0.0).then_some(&data.c[..]),
    )
    .unwrap();
    check_groups(kernel, p, &d, &refs);
    d
}

/// A case's operands: small integers (A and B up to 2, C up to 3), on the host and the device.
struct CaseData<T: Element, TD: Element> {
    a: Vec<T>,
    b: Vec<T>,
    c: Vec<TD>,
    da: CudaSlice<T>,
    db: CudaSlice<T>,
    dc: CudaSlice<TD>,
    rows: CudaSlice<i32>,
    alphas: Option<CudaSlice<f32>>,
}

impl<T: Element, TD: Element> CaseData<T, TD> {
    /// The operands, and D poisoned.
    fn new(stream: &Arc<CudaStream>, rng: &mut StdRng, case: &Case) -> (Self, CudaSlice<TD>) {
        let p = &case.problem;
        let a: Vec<T> = integers(rng, p.a_len(), 2);
        let b: Vec<T> = integers(rng, p.b_len(), 2);
        let c: Vec<TD> = integers(rng, p.d_len(), 3);
        let dd = stream.clone_htod(&vec![TD::POISON; p.d_len()]).unwrap();
        let data = CaseData {
            da: stream.clone_htod(&a).unwrap(),
            db: stream.clone_htod(&b).unwrap(),
            dc: stream.clone_htod(&c).unwrap(),
            rows: stream.clone_htod(&case.group_rows).unwrap(),
            alphas: case.alphas.as_ref().map(|x| stream.clone_htod(x).unwrap()),
            a,
            b,
            c,
        };
        (data, dd)
    }

    /// The launch's inputs: A, B, the rows per group, the case's alphas, and C when beta reads it.
    fn inputs(&self, case: &Case) -> GroupedInputs<'_, T, TD> {
        let mut inputs = GroupedInputs::new(&self.da, &self.db, &self.rows);
        if let Some(x) = &self.alphas {
            inputs = inputs.with_alphas(x);
        }
        if case.problem.beta != 0.0 {
            inputs = inputs.with_c(&self.dc);
        }
        inputs
    }
}

/// Checks every group's rows of D against the reference (no element at all when every group is
/// empty) and that the rows no group owns still hold the poison.
fn check_groups<TD: Element>(kernel: &str, p: &GroupedProblem, d: &[TD], refs: &[GroupReference]) {
    let cmp = reference::compare_grouped(d, refs);
    let rows: usize = refs
        .iter()
        .filter_map(|g| g.reference.as_ref().map(|r| r.shape.0))
        .sum();
    assert!(
        cmp.failures == 0 && cmp.checked == rows * p.n,
        "{kernel}: {cmp:?}"
    );
    assert_eq!(
        untouched(d, refs, p.n),
        0,
        "{kernel}: rows no group owns were written"
    );
    println!(
        "{kernel}: {} groups, {} elements checked, worst error / bound {:.3}",
        p.groups, cmp.checked, cmp.max_error_ratio
    );
}

/// Elements outside every group's rows that are not the poison any more.
fn untouched<TD: Element>(d: &[TD], refs: &[GroupReference], n: usize) -> usize {
    let mut owned = vec![false; d.len()];
    for g in refs {
        if let Some(r) = &g.reference {
            let (m, _, _, _) = r.shape;
            owned[g.d_offset..g.d_offset + m * n].fill(true);
        }
    }
    d.iter()
        .zip(&owned)
        .filter(|(x, o)| !**o && x.to_bits_u64() != TD::POISON.to_bits_u64())
        .count()
}

/// Offsets of a contiguous layout from rows per group.
fn offsets(rows: &[usize]) -> Vec<i32> {
    let mut o = vec![0i32];
    for r in rows {
        o.push(o.last().unwrap() + *r as i32);
    }
    o
}

fn contiguous_cases(n: usize, k: usize) -> Vec<Case> {
    let case = |rows: &[usize], alphas: Option<Vec<f32>>, beta: f32| {
        let total: usize = rows.iter().sum();
        Case {
            problem: GroupedProblem::contiguous(rows.len(), total, n, k).with_scalars(1.0, beta),
            group_rows: offsets(rows),
            alphas,
        }
    };
    vec![
        // Empty groups, one-row groups, uneven ones.
        case(&[3, 0, 1, 17, 0, 64, 130, 1], None, 0.0),
        // Skewed routing: one group holds most rows; per-group alphas; C.
        case(&[700, 2, 0, 5], Some(vec![0.5, 2.0, 1.0, -0.25]), 1.0),
    ]
}

/// Every grouped kernel of the build without blockwise scales on the contiguous layout (empty, one-row and skewed groups,
/// alphas, C).
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_grouped_kernel_matches_the_reference_on_contiguous_groups() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    // (The blockwise ones take scales: blockwise_grouped_kernels_match_the_reference.)
    let info = cutlass_gemm::DeviceInfo::query(&ctx).unwrap();
    // (SM100/SM120 ones run their host path only: sm1xx_grouped_kernels_run_their_host_path...)
    let kernels: Vec<_> = built_grouped_kernels()
        .iter()
        .filter(|k| {
            k.spec.blockwise.is_none()
                && k.spec.block_scale.is_none()
                && k.spec.arch.runs_on(info.compute_capability)
        })
        .collect();
    assert!(!kernels.is_empty(), "this build has no grouped kernel");
    for k in kernels {
        for case in contiguous_cases(384, 256) {
            match (k.spec.a.ty, k.spec.d.ty) {
                (DataType::Bf16, DataType::Bf16) => {
                    run_case::<bf16, bf16>(&ctx, &stream, &mut rng, k.name, &case);
                }
                (DataType::F16, DataType::F16) => {
                    run_case::<f16, f16>(&ctx, &stream, &mut rng, k.name, &case);
                }
                (DataType::E4M3, DataType::Bf16) => {
                    run_case::<E4M3, bf16>(&ctx, &stream, &mut rng, k.name, &case);
                }
                other => panic!("{}: no test for {other:?}", k.name),
            }
        }
    }
}

/// A group larger than one wave of the GPU (more tiles than SMs) beside small ones, with the
/// kernel the plan chooses; and offsets past the end of A, clamped on the device (the groups they
/// name end at the plan's rows; nothing past it is read or written).
#[test]
#[ignore = "needs a CUDA GPU"]
fn large_groups_and_clamped_offsets() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let (n, k) = (2048, 128);
    let rows = [4096usize, 1, 0, 300];
    let total: usize = rows.iter().sum();
    let case = Case {
        problem: GroupedProblem::contiguous(rows.len(), total, n, k),
        group_rows: offsets(&rows),
        alphas: None,
    };
    let plan = GroupedGemm::<bf16, bf16>::new(&ctx, &case.problem).unwrap();
    let tiles = 4096 / plan_tile_m(&plan) * (n / 256);
    assert!(tiles > 132, "the first group spans more than one wave");
    run_case::<bf16, bf16>(&ctx, &stream, &mut rng, plan.kernel_name(), &case);
    // Offsets past the rows: the last group's end and a middle group's start and end.
    let clamped = Case {
        problem: GroupedProblem::contiguous(4, 200, 256, 128),
        group_rows: vec![0, 50, 180, 10_000, 1 << 30],
        alphas: None,
    };
    let plan = GroupedGemm::<bf16, bf16>::new(&ctx, &clamped.problem).unwrap();
    assert!(plan.check_group_rows(&clamped.group_rows).is_err());
    run_case::<bf16, bf16>(&ctx, &stream, &mut rng, plan.kernel_name(), &clamped);
}

fn plan_tile_m<T: Element, TD: Element>(plan: &GroupedGemm<T, TD>) -> usize {
    cutlass_gemm_catalog::catalog::find(plan.kernel_name())
        .unwrap()
        .tile[0] as usize
}

/// The masked layout (a fixed capacity per expert, counts on the device) captured in a CUDA graph
/// once and replayed: with new counts written into the counts buffer between replays, each replay
/// matches the reference of its counts, and two replays with the same counts are bit-identical.
#[test]
#[ignore = "needs a CUDA GPU"]
fn masked_groups_replay_from_a_cuda_graph_with_new_counts() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let (groups, capacity, n, k) = (16usize, 64usize, 512usize, 256usize);
    let p = GroupedProblem::masked(groups, capacity, n, k).with_expected_rows(8);
    let plan = GroupedGemm::<bf16, bf16>::new(&ctx, &p).unwrap();
    let a: Vec<bf16> = integers(&mut rng, p.a_len(), 2);
    let b: Vec<bf16> = integers(&mut rng, p.b_len(), 2);
    let da = stream.clone_htod(&a).unwrap();
    let db = stream.clone_htod(&b).unwrap();
    let mut counts = stream.alloc_zeros::<i32>(groups).unwrap();
    let mut dd = stream
        .clone_htod(&vec![<bf16 as Element>::POISON; p.d_len()])
        .unwrap();
    let mut ws = stream.alloc_zeros::<u8>(plan.workspace_size()).unwrap();
    stream.synchronize().unwrap();
    let capture = ctx.new_stream().unwrap();
    let mode = cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    let flags = cudarc::driver::sys::CUgraphInstantiate_flags(0);
    // SAFETY: re-enabled below; nothing else uses these buffers meanwhile (cudarc's cross-stream
    // event waits cannot be captured).
    unsafe { ctx.disable_event_tracking() };
    capture.begin_capture(mode).unwrap();
    plan.run(
        &capture,
        &GroupedInputs::new(&da, &db, &counts),
        &mut dd,
        Workspace::Buffer(&mut ws),
    )
    .unwrap();
    let graph = capture.end_capture(flags).unwrap().expect("a graph");
    unsafe { ctx.enable_event_tracking() };
    let mut previous: Option<Vec<bf16>> = None;
    for step in 0..4 {
        // Steps 0 and 1 replay the same counts; then new ones (some over the capacity: clamped).
        let host: Vec<i32> = if step <= 1 {
            (0..groups as i32).map(|g| (g * 5) % 13).collect()
        } else {
            (0..groups)
                .map(|_| rng.random_range(-2..=capacity as i32 + 5))
                .collect()
        };
        capture.memcpy_htod(&host, &mut counts).unwrap();
        capture
            .memcpy_htod(&vec![<bf16 as Element>::POISON; p.d_len()], &mut dd)
            .unwrap();
        graph.launch().unwrap();
        capture.synchronize().unwrap();
        let d = capture.clone_dtoh(&dd).unwrap();
        let refs = reference::grouped(&p, &a, &b, &host, None, None::<&[bf16]>).unwrap();
        let cmp = reference::compare_grouped(&d, &refs);
        assert!(cmp.passed(), "step {step}: {cmp:?}");
        assert_eq!(untouched(&d, &refs, n), 0, "step {step}");
        if step == 1 {
            let same = d
                .iter()
                .zip(previous.as_ref().unwrap())
                .filter(|(x, y)| x.to_bits() == y.to_bits())
                .count();
            assert_eq!(same, d.len(), "replays of the same counts differ");
        }
        println!(
            "{} step {step}: counts {host:?}, {} elements checked, worst error / bound {:.3}",
            plan.kernel_name(),
            cmp.checked,
            cmp.max_error_ratio
        );
        previous = Some(d);
    }
}

/// Bad input is refused before any launch, with the operand and the rule: short weights, short
/// offsets, a misaligned A.
#[test]
#[ignore = "needs a CUDA GPU"]
fn grouped_launches_check_their_buffers() {
    let (ctx, stream) = gemm_device();
    let p = GroupedProblem::contiguous(4, 64, 256, 128);
    let plan = GroupedGemm::<bf16, bf16>::new(&ctx, &p).unwrap();
    let a = stream.alloc_zeros::<bf16>(p.a_len()).unwrap();
    let b = stream.alloc_zeros::<bf16>(p.b_len()).unwrap();
    let short_b = stream.alloc_zeros::<bf16>(p.b_len() - 1).unwrap();
    let rows = stream.clone_htod(&[0i32, 16, 32, 48, 64]).unwrap();
    let short_rows = stream.clone_htod(&[0i32, 16, 32, 48]).unwrap();
    let mut d = stream.alloc_zeros::<bf16>(p.d_len()).unwrap();
    use cutlass_gemm::{Error, OperandName, Quantity};
    let err = plan
        .run(
            &stream,
            &GroupedInputs::new(&a, &short_b, &rows),
            &mut d,
            Workspace::Managed,
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::BufferTooSmall {
                operand: OperandName::B,
                ..
            }
        ),
        "{err}"
    );
    let err = plan
        .run(
            &stream,
            &GroupedInputs::new(&a, &b, &short_rows),
            &mut d,
            Workspace::Managed,
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::BufferTooSmall {
                operand: OperandName::GroupRows,
                ..
            }
        ),
        "{err}"
    );
    let big = stream.alloc_zeros::<bf16>(p.a_len() + 8).unwrap();
    let err = plan
        .run(
            &stream,
            &GroupedInputs::new(&big.slice(1..), &b, &rows),
            &mut d,
            Workspace::Managed,
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Misaligned {
                operand: OperandName::A,
                what: Quantity::Pointer,
                ..
            }
        ),
        "{err}"
    );
}

/// A list of problems of different extents in one launch (the list layout): each D against the
/// f64 reference of its own problem, a problem with no rows skipped (its D keeps its poison), and
/// a k off the alignment refused before the launch.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_list_of_problems_of_any_extents_in_one_launch() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let shapes = [
        (7, 256, 64),
        (0, 128, 128),
        (300, 64, 512),
        (1, 1024, 256),
        (64, 8, 8),
    ];
    let host: Vec<(Vec<bf16>, Vec<bf16>)> = shapes
        .iter()
        .map(|&(m, n, k)| (integers(&mut rng, m * k, 2), integers(&mut rng, n * k, 2)))
        .collect();
    let dev: Vec<_> = host
        .iter()
        .map(|(a, b)| {
            (
                stream
                    .clone_htod(
                        &a.clone()
                            .into_iter()
                            .chain([bf16::ZERO; 8])
                            .collect::<Vec<_>>(),
                    )
                    .unwrap(),
                stream.clone_htod(b).unwrap(),
            )
        })
        .collect();
    // Expecting 64 rows per problem takes a row-major kernel, 1 row the swapped one (each
    // problem's Dᵀ = Bᵀ·Aᵀ); both serve every problem of the list.
    let mut layouts = Vec::new();
    for expected in [64, 1] {
        let plan = GroupedListGemm::<bf16, bf16>::new(&ctx, shapes.len(), expected)
            .unwrap()
            .with_alpha(0.5)
            .unwrap();
        let spec = cutlass_gemm_catalog::catalog::find(plan.kernel_name()).unwrap();
        layouts.push(spec.d.layout);
        let mut outs: Vec<_> = shapes
            .iter()
            .map(|&(m, n, _)| {
                stream
                    .clone_htod(&vec![<bf16 as Element>::POISON; (m * n).max(8)])
                    .unwrap()
            })
            .collect();
        let problems: Vec<GroupedListProblem<'_, bf16>> = shapes
            .iter()
            .zip(&dev)
            .map(|(&(m, n, k), (a, b))| GroupedListProblem { m, n, k, a, b })
            .collect();
        {
            let mut refs: Vec<&mut dyn cudarc::driver::DevicePtrMut<bf16>> = outs
                .iter_mut()
                .map(|d| d as &mut dyn cudarc::driver::DevicePtrMut<bf16>)
                .collect();
            plan.run(&stream, &problems, &mut refs, Workspace::Managed)
                .unwrap();
        }
        for (i, (&(m, n, k), (a, b))) in shapes.iter().zip(&host).enumerate() {
            let d = stream.clone_dtoh(&outs[i]).unwrap();
            if m == 0 {
                assert!(d
                    .iter()
                    .all(|x| x.to_bits() == <bf16 as Element>::POISON.to_bits()));
                continue;
            }
            let p = GemmProblem::new(m, n, k).with_scalars(0.5, 0.0);
            let r = reference::gemm(&p, a, b, None::<&[bf16]>).unwrap();
            let cmp = reference::compare(&d, &p.resolve(cutlass_gemm::OperandName::D).unwrap(), &r);
            assert!(cmp.passed(), "problem {i} ({m}x{n}x{k}): {cmp:?}");
            println!(
                "{}: problem {i} {m}x{n}x{k}, worst error / bound {:.3}",
                plan.kernel_name(),
                cmp.max_error_ratio
            );
        }
    }
    if cutlass_gemm::built_grouped_kernels()
        .iter()
        .any(|k| k.spec.d.layout == cutlass_gemm::Layout::ColumnMajor)
    {
        assert_eq!(
            layouts,
            [
                cutlass_gemm::Layout::RowMajor,
                cutlass_gemm::Layout::ColumnMajor
            ]
        );
    }
    let plan = GroupedListGemm::<bf16, bf16>::new(&ctx, shapes.len(), 64)
        .unwrap()
        .with_alpha(0.5)
        .unwrap();
    // k = 100 is off bf16's 8-element alignment: refused, nothing launched.
    let bad = [GroupedListProblem {
        m: 4,
        n: 64,
        k: 100,
        a: &dev[2].0,
        b: &dev[2].1,
    }];
    let mut d = stream.alloc_zeros::<bf16>(4 * 64).unwrap();
    let mut refs: Vec<&mut dyn cudarc::driver::DevicePtrMut<bf16>> = vec![&mut d];
    let err = plan
        .run(&stream, &bad, &mut refs, Workspace::Managed)
        .unwrap_err();
    assert!(
        matches!(
            err,
            cutlass_gemm::Error::Misaligned {
                operand: cutlass_gemm::OperandName::A,
                ..
            }
        ),
        "{err}"
    );
}

/// Powers of two from 2^-2 to 2^2: scales that keep every product exact.
fn pow2_scales(rng: &mut StdRng, len: usize) -> Vec<f32> {
    (0..len)
        .map(|_| 2f32.powi(rng.random_range(-2..=2)))
        .collect()
}

/// One blockwise case on one kernel: small integers in e4m3 and power-of-two scales (every product
/// and sum exact, so D's rounding is the only error), D poisoned first.
fn run_blockwise_case<TD: Element>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    kernel: &str,
    case: &Case,
) {
    use cutlass_gemm::GroupedBlockwiseGemm;
    let p = &case.problem;
    let plan = GroupedBlockwiseGemm::<TD>::with_kernel(ctx, p, kernel).unwrap();
    let (data, mut dd) = CaseData::<E4M3, TD>::new(stream, rng, case);
    let (sa_len, sb_len) = plan.scale_lens();
    let (sa, sb) = (pow2_scales(rng, sa_len), pow2_scales(rng, sb_len));
    let (dsa, dsb) = (
        stream.clone_htod(&sa).unwrap(),
        stream.clone_htod(&sb).unwrap(),
    );
    plan.run(
        stream,
        &data.inputs(case),
        &dsa,
        &dsb,
        &mut dd,
        Workspace::Managed,
    )
    .unwrap();
    let d = stream.clone_dtoh(&dd).unwrap();
    let refs = reference::grouped_blockwise(
        p,
        &data.a,
        &sa,
        &data.b,
        &sb,
        &case.group_rows,
        case.alphas.as_deref(),
        (p.beta != 0.0).then_some(&data.c[..]),
    )
    .unwrap();
    check_groups(kernel, p, &d, &refs);
}

/// Every grouped blockwise kernel of the build against the f64 reference on exact data: the
/// contiguous layout (empty, one-row and skewed groups, alphas, C, k = 272 ending in a partial
/// k-block, n = 384 of three scale blocks) and the masked layout (a count past the capacity,
/// clamped; an empty group).
#[test]
#[ignore = "needs a CUDA GPU"]
fn blockwise_grouped_kernels_match_the_reference() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let kernels: Vec<_> = built_grouped_kernels()
        .iter()
        .filter(|k| k.spec.blockwise.is_some())
        .collect();
    assert!(
        !kernels.is_empty(),
        "this build has no grouped blockwise kernel"
    );
    let mut cases = contiguous_cases(384, 272);
    cases.push(Case {
        problem: GroupedProblem::masked(4, 40, 256, 256).with_scalars(0.5, 0.0),
        group_rows: vec![40, 0, 7, 100],
        alphas: None,
    });
    for k in kernels {
        for case in &cases {
            match k.spec.d.ty {
                DataType::Bf16 => run_blockwise_case::<bf16>(&ctx, &stream, &mut rng, k.name, case),
                DataType::F16 => run_blockwise_case::<f16>(&ctx, &stream, &mut rng, k.name, case),
                other => panic!("{}: no test for {other:?}", k.name),
            }
        }
    }
}

/// The DeepSeek-V3 recipe end to end on the grouped kernel: bf16 tokens sorted by expert and the
/// experts' weights quantized on the GPU with K-major scales (1x128, 128x128), then
/// `run_tensors`; the reference reads the host quantizer's dequantized values (bit-exact with the
/// GPU's), with the FP8 accumulation's bound. Then the typed refusals of tensors the kernel
/// cannot read.
#[test]
#[ignore = "needs a CUDA GPU"]
fn blockwise_grouped_recipe_with_gpu_quantized_operands() {
    use cutlass_gemm::formats::scale_layout::ScaleMajor;
    use cutlass_gemm::quantize::{self, host, Fp8Block};
    use cutlass_gemm::{Error, GroupedBlockwiseGemm, OperandName, ScaleRule};
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let (groups, n, k) = (6, 256, 1040);
    let rows = [300usize, 0, 1, 77, 129, 20];
    let total: usize = rows.iter().sum();
    let x: Vec<f32> = (0..total * k)
        .map(|_| rng.random_range(-1.0f32..1.0) * 2f32.powi(rng.random_range(-6..=6)))
        .collect();
    let w: Vec<f32> = (0..groups * n * k)
        .map(|_| rng.random_range(-1.0f32..1.0) * 0.05)
        .collect();
    let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
    let wb: Vec<bf16> = w.iter().map(|&v| bf16::from_f32(v)).collect();
    let (dx, dw) = (
        stream.clone_htod(&xb).unwrap(),
        stream.clone_htod(&wb).unwrap(),
    );
    let qa = quantize::quantize_fp8_blockwise(
        &stream,
        &dx,
        total,
        k,
        Fp8Block::Group1x128,
        ScaleMajor::K,
    )
    .unwrap();
    let qw = quantize::quantize_fp8_blockwise(
        &stream,
        &dw,
        groups * n,
        k,
        Fp8Block::Block128x128,
        ScaleMajor::K,
    )
    .unwrap();
    let p = GroupedProblem::contiguous(groups, total, n, k);
    let plan = GroupedBlockwiseGemm::<bf16>::new(&ctx, &p).unwrap();
    let group_rows = offsets(&rows);
    let drows = plan.upload_group_rows(&stream, &group_rows).unwrap();
    let mut dd = stream.clone_htod(&vec![bf16::POISON; p.d_len()]).unwrap();
    plan.run_tensors(&stream, &qa, &qw, &drows, &mut dd, Workspace::Managed)
        .unwrap();
    let d = stream.clone_dtoh(&dd).unwrap();
    let xf: Vec<f32> = xb.iter().map(|v| v.to_f32()).collect();
    let wf: Vec<f32> = wb.iter().map(|v| v.to_f32()).collect();
    let (qe, qs) = host::quantize_fp8_blockwise(&xf, total, k, 1, 128);
    let (we, wsc) = host::quantize_fp8_blockwise(&wf, groups * n, k, 128, 128);
    let refs =
        reference::grouped_blockwise(&p, &qe, &qs, &we, &wsc, &group_rows, None, None::<&[bf16]>)
            .unwrap();
    // Hopper's FP8 MMA does not accumulate in full f32 within a k-block: the bound of
    // tests/gpu/fp8.rs's recipe.
    let mut worst = 0.0f64;
    let mut checked = 0;
    for g in &refs {
        let Some(r) = &g.reference else { continue };
        for (i, (&want, &mag)) in r.value.iter().zip(&r.magnitude).enumerate() {
            let got = d[g.d_offset + i].to_f64();
            let bound = loose_bound::<bf16>(want, mag, k);
            let ratio = (got - want).abs() / bound;
            assert!(
                ratio <= 1.0,
                "group {} element {i}: {got} vs {want} (bound {bound})",
                g.group
            );
            worst = worst.max(ratio);
            checked += 1;
        }
    }
    assert_eq!(checked, total * n);
    assert_eq!(untouched(&d, &refs, n), 0);
    println!(
        "{}: recipe {total} rows in {groups} groups, n {n}, k {k}: worst error/bound {worst:.4}",
        plan.kernel_name()
    );
    // M-/N-major scales are refused, naming them, with nothing launched.
    let mn = quantize::quantize_fp8_blockwise(
        &stream,
        &dx,
        total,
        k,
        Fp8Block::Group1x128,
        ScaleMajor::MN,
    )
    .unwrap();
    let err = plan
        .run_tensors(&stream, &mn, &qw, &drows, &mut dd, Workspace::Managed)
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::ScaleMismatch {
                operand: OperandName::ScalesA,
                rule: ScaleRule::Fp8ScaleMajor {
                    required: ScaleMajor::K,
                    found: ScaleMajor::MN
                }
            }
        ),
        "{err}"
    );
    // Short scales through run.
    let short = stream.clone_htod(&vec![1.0f32; 10]).unwrap();
    let inputs = GroupedInputs::new(&qa.data, &qw.data, &drows);
    let err = plan
        .run(
            &stream,
            &inputs,
            &short,
            &qw.scales,
            &mut dd,
            Workspace::Managed,
        )
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
    assert_eq!(
        stream.clone_dtoh(&dd).unwrap(),
        d,
        "refusals launched nothing"
    );
}

/// One SM100 dense grouped kernel's host path on this (non-Blackwell) GPU: planned with
/// `plan_any_arch`, every check and CUTLASS's `can_implement` and kernel parameters run by
/// `prepare`, the launch refused with the architecture error, short buffers refused by name.
fn sm1xx_dense_host_path<T: Element, TD: Element>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    info: cutlass_gemm::DeviceInfo,
    name: &str,
    p: &GroupedProblem,
    group_rows: &[i32],
) {
    assert!(matches!(
        GroupedGemm::<T, TD>::with_kernel(ctx, p, name).unwrap_err(),
        cutlass_gemm::Error::ArchMismatch { .. }
    ));
    let plan = GroupedGemm::<T, TD>::plan_any_arch(info, p, name).unwrap();
    assert!(plan.workspace_size() > 0);
    let a = stream
        .clone_htod(&vec![T::from_f64(0.0); p.a_len()])
        .unwrap();
    let b = stream
        .clone_htod(&vec![T::from_f64(0.0); p.b_len()])
        .unwrap();
    let rows = plan.upload_group_rows(stream, group_rows).unwrap();
    let mut d = stream
        .clone_htod(&vec![TD::from_f64(0.0); p.d_len()])
        .unwrap();
    let inputs = GroupedInputs::new(&a, &b, &rows);
    plan.prepare(stream, &inputs, &mut d, Workspace::Managed)
        .unwrap_or_else(|e| panic!("{name}: host path: {e}"));
    match plan
        .run(stream, &inputs, &mut d, Workspace::Managed)
        .unwrap_err()
    {
        cutlass_gemm::Error::ArchMismatch { arch, device, .. } => {
            assert_eq!(
                (arch, device),
                (plan_spec(name).arch, info.compute_capability)
            )
        }
        e => panic!("{name}: unexpected {e:?}"),
    }
    let mut short = stream
        .clone_htod(&vec![TD::from_f64(0.0); p.d_len() - 1])
        .unwrap();
    assert!(matches!(
        plan.prepare(stream, &inputs, &mut short, Workspace::Managed)
            .unwrap_err(),
        cutlass_gemm::Error::BufferTooSmall {
            operand: cutlass_gemm::OperandName::D,
            ..
        }
    ));
}

fn plan_spec(name: &str) -> cutlass_gemm::KernelSpec {
    built_grouped_kernels()
        .iter()
        .find(|k| k.name == name)
        .unwrap()
        .spec
}

/// One SM100/SM120 block-scaled grouped kernel's host path, as [`sm1xx_dense_host_path`], over
/// byte buffers of the lengths the plan asks for; a scale-factor buffer one byte short is refused
/// by name.
fn sm1xx_block_scaled_host_path(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    info: cutlass_gemm::DeviceInfo,
    name: &str,
    p: &GroupedProblem,
    group_rows: &[i32],
) {
    use cutlass_gemm::{GroupedBlockScaledGemm, GroupedBlockScaledInputs};
    assert!(matches!(
        GroupedBlockScaledGemm::<bf16>::with_kernel(ctx, p, name).unwrap_err(),
        cutlass_gemm::Error::ArchMismatch { .. }
    ));
    let plan = GroupedBlockScaledGemm::<bf16>::plan_any_arch(info, p, name).unwrap();
    let (a_len, b_len) = plan.data_lens();
    let (sa_len, sb_len) = plan.scale_lens();
    let [a, sa, b, sb] =
        [a_len, sa_len, b_len, sb_len].map(|n| stream.alloc_zeros::<u8>(n).unwrap());
    let rows = plan.upload_group_rows(stream, group_rows).unwrap();
    let alphas = stream.clone_htod(&vec![0.5f32; p.groups]).unwrap();
    let mut d = stream.alloc_zeros::<bf16>(p.d_len()).unwrap();
    let inputs = GroupedBlockScaledInputs::new(&a, &sa, &b, &sb, &rows).with_alphas(&alphas);
    let spec = plan_spec(name);
    // CUTLASS's grouped kernels encode placeholder TMA descriptors on the host (address 0; the
    // device writes each group's). For NVFP4 operands a Hopper driver refuses their sub-byte
    // unpacking type, as for the dense kernels (blockscaled::expect_host_path), but the grouped
    // host path only prints that ("Failed to initialize the TMA descriptor") and goes on: prepare
    // returns Ok here, with everything else of the host path run.
    plan.prepare(stream, &inputs, &mut d, Workspace::Managed)
        .unwrap_or_else(|e| panic!("{name}: host path: {e}"));
    let ws = plan.workspace_size();
    match plan
        .run(stream, &inputs, &mut d, Workspace::Managed)
        .unwrap_err()
    {
        cutlass_gemm::Error::ArchMismatch { arch, device, .. } => {
            assert_eq!((arch, device), (spec.arch, info.compute_capability))
        }
        e => panic!("{name}: unexpected {e:?}"),
    }
    let short = stream.alloc_zeros::<u8>(sa_len - 1).unwrap();
    let bad = GroupedBlockScaledInputs::new(&a, &short, &b, &sb, &rows);
    assert!(matches!(
        plan.prepare(stream, &bad, &mut d, Workspace::Managed)
            .unwrap_err(),
        cutlass_gemm::Error::BufferTooSmall {
            operand: cutlass_gemm::OperandName::ScalesA,
            ..
        }
    ));
    println!(
        "{name} ({:?}): host path ok (workspace {ws} bytes), launch refused on {:?}",
        p.layout, info.compute_capability
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn sm1xx_grouped_kernels_run_their_host_path_and_refuse_the_launch() {
    let (ctx, stream) = gemm_device();
    let info = cutlass_gemm::DeviceInfo::query(&ctx).unwrap();
    let kernels: Vec<_> = built_grouped_kernels()
        .iter()
        .filter(|k| {
            k.spec.arch != cutlass_gemm::Arch::Sm90a
                && !k.spec.arch.runs_on(info.compute_capability)
        })
        .collect();
    // On a Hopper GPU, the sm100 and sm120 families' five grouped kernels of the gpu-tests preset;
    // on a Blackwell GPU, those of the other Blackwell architecture.
    assert!(
        !kernels.is_empty(),
        "no grouped kernel of another architecture than {:?} in this build",
        info.compute_capability
    );
    let cases = [
        (
            GroupedProblem::contiguous(4, 700, 512, 1024),
            vec![0, 1, 1, 300, 700],
        ),
        (
            GroupedProblem::masked(4, 160, 512, 1024),
            vec![0, 160, 7, 129],
        ),
    ];
    for k in kernels {
        for (p, rows) in &cases {
            match (k.spec.block_scale, k.spec.a.ty) {
                (Some(_), _) => sm1xx_block_scaled_host_path(&ctx, &stream, info, k.name, p, rows),
                (None, DataType::Bf16) => {
                    sm1xx_dense_host_path::<bf16, bf16>(&ctx, &stream, info, k.name, p, rows)
                }
                (None, DataType::F16) => {
                    sm1xx_dense_host_path::<f16, f16>(&ctx, &stream, info, k.name, p, rows)
                }
                (None, DataType::E4M3) => {
                    sm1xx_dense_host_path::<E4M3, bf16>(&ctx, &stream, info, k.name, p, rows)
                }
                (None, other) => panic!("{}: no test for {other} inputs", k.name),
            }
        }
    }
}

/// The bytes of one group quantized as a tensor of its own: `(elements, scale factors, tensor
/// scale)`, with this crate's GPU quantizers.
fn quantized_alone(
    stream: &Arc<CudaStream>,
    format: cutlass_gemm::GroupedBlockFormat,
    x: &[bf16],
    rows: usize,
    k: usize,
) -> (Vec<u8>, Vec<u8>, f32) {
    use cutlass_gemm::quantize;
    let dx = stream.clone_htod(x).unwrap();
    match format {
        cutlass_gemm::GroupedBlockFormat::Mxfp8 => {
            let t = quantize::quantize_mx::<E4M3, bf16>(stream, &dx, rows, k).unwrap();
            let sf: Vec<u8> = stream
                .clone_dtoh(&t.scales)
                .unwrap()
                .iter()
                .map(|s| s.to_bits())
                .collect();
            (stream.clone_dtoh(&t.data).unwrap(), sf, 1.0)
        }
        _ => {
            let t = quantize::quantize_nvfp4::<bf16>(stream, &dx, rows, k).unwrap();
            let sf: Vec<u8> = stream
                .clone_dtoh(&t.scales)
                .unwrap()
                .iter()
                .map(|s| s.to_bits())
                .collect();
            let gs = t.global_scale(stream).unwrap();
            (stream.clone_dtoh(&t.data).unwrap(), sf, gs)
        }
    }
}

/// The block-scaled grouped operands quantized group by group land where the C ABI says each
/// group's kernel reads them (cutlass_rs_grouped_abi.h, written out here rather than taken from
/// GroupedScaleLayout): A's factors of group g from row block start_g / 128 + g (contiguous) or
/// g * ceil(capacity / 128) (masked), expert g's from g * ceil(n / 128), 128 * cols bytes per
/// block with cols = 4 * ceil(ceil(k / vec) / 4); each group's bytes equal to quantizing it alone,
/// every other byte zero. Then the kernels' host path over them. Runs on any GPU (quantizers and
/// copies only).
#[test]
#[ignore = "needs a CUDA GPU"]
fn block_scaled_grouped_operands_land_where_the_kernels_read_them() {
    use cutlass_gemm::{GroupedBlockFormat, GroupedBlockScaledGemm, GroupedBlockScaledInputs};
    let (ctx, stream) = gemm_device();
    let info = cutlass_gemm::DeviceInfo::query(&ctx).unwrap();
    let mut rng = rng();
    let kernels: Vec<_> = built_grouped_kernels()
        .iter()
        .filter(|k| k.spec.block_scale.is_some())
        .collect();
    assert!(
        kernels.len() >= 3,
        "{} block-scaled grouped kernels built",
        kernels.len()
    );
    let (n, k) = (256usize, 320usize);
    let cases = [
        (
            GroupedProblem::contiguous(4, 700, n, k),
            vec![0, 1, 1, 300, 700],
        ),
        (GroupedProblem::masked(3, 160, n, k), vec![0, 160, 7]),
    ];
    for kernel in kernels {
        for (p, group_rows) in &cases {
            let plan = GroupedBlockScaledGemm::<bf16>::plan_any_arch(info, p, kernel.name).unwrap();
            let format = plan.format();
            let vec = match format {
                GroupedBlockFormat::Mxfp8 => 32,
                _ => 16,
            };
            let cols = k.div_ceil(vec).div_ceil(4) * 4;
            let block = 128 * cols;
            let bytes = |elements: usize| elements * if vec == 16 { 1 } else { 2 } / 2;
            let x: Vec<bf16> = (0..p.a_len())
                .map(|_| bf16::from_f32(rng.random_range(-4.0f32..4.0)))
                .collect();
            let w: Vec<bf16> = (0..p.b_len())
                .map(|_| bf16::from_f32(rng.random_range(-1.0f32..1.0)))
                .collect();
            let a = plan
                .quantize_a(&stream, &stream.clone_htod(&x).unwrap(), group_rows)
                .unwrap();
            let b = plan
                .quantize_weights(&stream, &stream.clone_htod(&w).unwrap())
                .unwrap();
            let (a_data, a_sf) = (
                stream.clone_dtoh(&a.data).unwrap(),
                stream.clone_dtoh(&a.scales).unwrap(),
            );
            let (b_data, b_sf) = (
                stream.clone_dtoh(&b.data).unwrap(),
                stream.clone_dtoh(&b.scales).unwrap(),
            );
            // (first row, rows, first scale block) per group, from the ABI's rules.
            let a_groups: Vec<(usize, usize, usize)> = (0..p.groups)
                .map(|g| match p.layout {
                    cutlass_gemm::GroupedLayout::Contiguous { .. } => {
                        let (s, e) = (group_rows[g] as usize, group_rows[g + 1] as usize);
                        (s, e - s, s / 128 + g)
                    }
                    cutlass_gemm::GroupedLayout::Masked { capacity } => (
                        g * capacity,
                        group_rows[g] as usize,
                        g * capacity.div_ceil(128),
                    ),
                })
                .collect();
            let b_groups: Vec<(usize, usize, usize)> = (0..p.groups)
                .map(|g| (g * n, n, g * n.div_ceil(128)))
                .collect();
            for (what, src, groups, data, sf, scales) in [
                ("A", &x, &a_groups, &a_data, &a_sf, &a.tensor_scales),
                ("weights", &w, &b_groups, &b_data, &b_sf, &b.tensor_scales),
            ] {
                let mut owned = vec![false; sf.len()];
                for (g, &(first, rows, sf_block)) in groups.iter().enumerate() {
                    if rows == 0 {
                        assert_eq!(scales[g], 1.0);
                        continue;
                    }
                    let (d, s, ts) = quantized_alone(
                        &stream,
                        format,
                        &src[first * k..(first + rows) * k],
                        rows,
                        k,
                    );
                    let at = bytes(first * k);
                    assert_eq!(
                        &data[at..at + d.len()],
                        &d[..],
                        "{} {what} group {g}: elements",
                        kernel.name
                    );
                    let sf_at = sf_block * block;
                    assert_eq!(s.len(), rows.div_ceil(128) * block);
                    assert_eq!(
                        &sf[sf_at..sf_at + s.len()],
                        &s[..],
                        "{} {what} group {g}: scale factors",
                        kernel.name
                    );
                    owned[sf_at..sf_at + s.len()]
                        .iter_mut()
                        .for_each(|o| *o = true);
                    assert_eq!(
                        scales[g], ts,
                        "{} {what} group {g}: tensor scale",
                        kernel.name
                    );
                }
                assert!(
                    sf.iter().zip(&owned).all(|(&v, &o)| o || v == 0),
                    "{} {what}: bytes no group owns are zero",
                    kernel.name
                );
            }
            let rows = plan.upload_group_rows(&stream, group_rows).unwrap();
            let alphas: Vec<f32> = a
                .tensor_scales
                .iter()
                .zip(&b.tensor_scales)
                .map(|(x, y)| x * y)
                .collect();
            let alphas = stream.clone_htod(&alphas).unwrap();
            let mut d = stream.alloc_zeros::<bf16>(p.d_len()).unwrap();
            let inputs =
                GroupedBlockScaledInputs::new(&a.data, &a.scales, &b.data, &b.scales, &rows)
                    .with_alphas(&alphas);
            plan.prepare(&stream, &inputs, &mut d, Workspace::Managed)
                .unwrap_or_else(|e| panic!("{}: host path: {e}", kernel.name));
        }
    }
}
