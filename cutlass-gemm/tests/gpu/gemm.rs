//! GEMMs on a Hopper GPU against the f64 host reference.
//!
//! Every test here is `#[ignore = "needs a CUDA GPU"]`: CI (no GPU) lists them as ignored; on a GPU
//! machine run `cargo test --release --test gpu_gemm -- --include-ignored`. A test that finds no
//! device when it is asked to run fails rather than passing silently.
//!
//! Inputs are fresh random values each run (the seed is printed; set `CUTLASS_RS_TEST_SEED` to
//! replay). D is poisoned with NaN before every launch, including the padding between rows, and
//! the padding must still be poison afterwards.

use crate::common::*;

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use cutlass_gemm::numeric::Tf32;
use cutlass_gemm::reference::{self, Comparison};
use cutlass_gemm::{
    Element, Error, Gemm, GemmProblem, KernelRule, Layout, MatrixLayout, OperandName,
    ScheduleHints, SplitKRule, Workspace,
};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::Rng;

/// Random values in [-1, 1) rounded to T (integers in [-32, 32) for the integer types: small
/// enough that the f32 epilogue of an integer GEMM stays exact), poison in the gaps a layout
/// leaves unused.
fn random_matrix<T: Element>(rng: &mut StdRng, geometry: &cutlass_gemm::ResolvedMatrix) -> Vec<T> {
    let integer = T::DATA_TYPE.is_integer();
    let mut v = vec![T::POISON; geometry.required_len()];
    for l in 0..geometry.batch {
        for i in 0..geometry.rows {
            for j in 0..geometry.cols {
                v[geometry.offset(l, i, j)] = if integer {
                    T::from_f64(rng.random_range(-32i32..32) as f64)
                } else {
                    T::from_f64(rng.random_range(-1.0..1.0))
                };
            }
        }
    }
    v
}

/// Runs one problem and compares with the reference; asserts the padding of D is untouched.
fn run_and_check<TA: Element, TB: Element, TD: Element>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    p: &GemmProblem,
    with_c: bool,
) -> Comparison {
    run_and_check_with::<TA, TB, TD>(ctx, stream, rng, p, with_c, None)
}

/// [`run_and_check`] with the named kernel.
fn run_and_check_with<TA: Element, TB: Element, TD: Element>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    p: &GemmProblem,
    with_c: bool,
    kernel: Option<&str>,
) -> Comparison {
    let g = match kernel {
        Some(name) => Gemm::<TA, TB, TD>::with_kernel(ctx, p, name),
        None => Gemm::<TA, TB, TD>::new(ctx, p),
    }
    .unwrap_or_else(|e| panic!("{kernel:?} {p:?}: {e}"));
    check_plan(&g, stream, rng, with_c)
}

/// Runs a plan on random operands (C when `with_c`) and checks D against the f64 reference with
/// the crate's bound, and that nothing outside D's geometry was written.
fn check_plan<TA: Element, TB: Element, TD: Element>(
    g: &Gemm<TA, TB, TD>,
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    with_c: bool,
) -> Comparison {
    let p = g.problem();
    let (ga, gb, gc, gd) = (
        g.operand(OperandName::A),
        g.operand(OperandName::B),
        g.operand(OperandName::C),
        g.operand(OperandName::D),
    );
    let a: Vec<TA> = random_matrix(rng, &ga);
    let b: Vec<TB> = random_matrix(rng, &gb);
    let c: Vec<TD> = random_matrix(rng, &gc);
    let poison = vec![TD::POISON; gd.required_len()];
    let da = stream.clone_htod(&a).unwrap();
    let db = stream.clone_htod(&b).unwrap();
    let dc = stream.clone_htod(&c).unwrap();
    let mut dd: CudaSlice<TD> = stream.clone_htod(&poison).unwrap();
    let c_arg: Option<&dyn cudarc::driver::DevicePtr<TD>> = if with_c { Some(&dc) } else { None };
    g.run(stream, &da, &db, c_arg, &mut dd, Workspace::Managed)
        .unwrap_or_else(|e| panic!("{} {p:?}: {e}", g.kernel_name()));
    let d = stream.clone_dtoh(&dd).unwrap();
    let r = reference::gemm(p, &a, &b, if with_c { Some(&c[..]) } else { None }).unwrap();
    let cmp = reference::compare(&d, &gd, &r);
    assert!(cmp.passed(), "{} {p:?}: {cmp:?}", g.kernel_name());
    // Everything D's geometry does not cover must still be poison (no stray writes).
    let mut covered = vec![false; d.len()];
    for l in 0..gd.batch {
        for i in 0..gd.rows {
            for j in 0..gd.cols {
                covered[gd.offset(l, i, j)] = true;
            }
        }
    }
    for (idx, (v, cov)) in d.iter().zip(covered).enumerate() {
        if !cov {
            assert_eq!(
                v.to_bits_u64(),
                TD::POISON.to_bits_u64(),
                "stray write at {idx} ({p:?})"
            );
        }
    }
    cmp
}

const LAYOUTS: [(&str, Layout, Layout); 4] = [
    ("TN", Layout::RowMajor, Layout::ColumnMajor),
    ("NT", Layout::ColumnMajor, Layout::RowMajor),
    ("NN", Layout::ColumnMajor, Layout::ColumnMajor),
    ("TT", Layout::RowMajor, Layout::RowMajor),
];

fn ml(l: Layout) -> MatrixLayout {
    match l {
        Layout::RowMajor => MatrixLayout::row_major(),
        Layout::ColumnMajor => MatrixLayout::col_major(),
    }
}

/// The sweep for alignment `a`: m in {a, 512-3a, 1000+a}, n in {a, 512-2a},
/// k in {a, 384-a, 1024+a}, in all four layouts.
fn sweep<T: Element>() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let a = T::DATA_TYPE.tma_alignment() as usize;
    let mut count = 0;
    let mut worst: f64 = 0.0;
    for (name, la, lb) in LAYOUTS {
        for m in [a, 512 - 3 * a, 1000 + a] {
            for n in [a, 512 - 2 * a] {
                for k in [a, 384 - a, 1024 + a] {
                    let p = GemmProblem::new(m, n, k).with_a(ml(la)).with_b(ml(lb));
                    let cmp = run_and_check::<T, T, T>(&ctx, &stream, &mut rng, &p, false);
                    worst = worst.max(cmp.max_error_ratio);
                    count += 1;
                }
            }
        }
        println!("{} {name}: ok", T::DATA_TYPE);
    }
    println!(
        "{} sweep: {count} problems, worst error / bound = {worst:.3}",
        T::DATA_TYPE
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_sweep_all_layouts() {
    sweep::<f16>();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bf16_sweep_all_layouts() {
    sweep::<bf16>();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f32_output_and_beta_with_c() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    for (m, n, k) in [(8, 8, 8), (488, 496, 360), (1008, 496, 1032)] {
        let p = GemmProblem::new(m, n, k).with_scalars(0.75, -1.25);
        run_and_check::<bf16, bf16, f32>(&ctx, &stream, &mut rng, &p, true);
        run_and_check::<f16, f16, f32>(&ctx, &stream, &mut rng, &p, true);
        run_and_check::<bf16, bf16, bf16>(&ctx, &stream, &mut rng, &p, true);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn column_major_output_in_all_layouts() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    for (_, la, lb) in LAYOUTS {
        let p = GemmProblem::new(1000, 496, 376)
            .with_a(ml(la))
            .with_b(ml(lb))
            .with_d(MatrixLayout::col_major())
            .with_scalars(1.5, 0.5);
        run_and_check::<bf16, bf16, bf16>(&ctx, &stream, &mut rng, &p, true);
        run_and_check::<f16, f16, f16>(&ctx, &stream, &mut rng, &p, true);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn batched_with_padded_leading_dimensions_and_strides() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let (m, n, k, l) = (264, 136, 200, 3);
    for (_, la, lb) in LAYOUTS {
        let lda = if la == Layout::RowMajor {
            k + 24
        } else {
            m + 8
        };
        let ldb = if lb == Layout::RowMajor {
            n + 16
        } else {
            k + 8
        };
        let p = GemmProblem::new(m, n, k)
            .with_batch(l)
            .with_a(ml(la).with_ld(lda).with_batch_stride(lda * m.max(k) + 64))
            .with_b(ml(lb).with_ld(ldb).with_batch_stride(ldb * n.max(k) + 8))
            .with_c(MatrixLayout::row_major().with_ld(n + 8))
            .with_d(
                MatrixLayout::row_major()
                    .with_ld(n + 40)
                    .with_batch_stride(m * (n + 40) + 16),
            )
            .with_scalars(1.0, 1.0);
        run_and_check::<bf16, bf16, bf16>(&ctx, &stream, &mut rng, &p, true);
        // The default build has f32-output kernels for TN only.
        if (la, lb) == (Layout::RowMajor, Layout::ColumnMajor) {
            let no_c = p.with_d(MatrixLayout::row_major()).with_scalars(-0.5, 0.0);
            run_and_check::<f16, f16, f32>(&ctx, &stream, &mut rng, &no_c, false);
        }
    }
}

/// Shapes and geometries the TMA kernels cannot address in place, by the automatic choice, in all
/// four A/B layouts and both D orders, with C: tiny and odd extents, k = 4095, a vocabulary-sized
/// n, leading dimensions and batch strides off the 16-byte alignment. The plan serves them
/// through padded copies; results must match the f64 reference and D's padding stay untouched.
fn any_shape<T: Element, TD: Element>(layouts: &[(&str, Layout, Layout)]) {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let mut runs = 0;
    let mut staged = 0;
    let mut worst: f64 = 0.0;
    let shapes = [
        (1, 1, 1),
        (2, 2, 2),
        (3, 5, 7),
        (17, 33, 4095),
        (257, 1001, 129),
    ];
    for &(_, la, lb) in layouts {
        for d in [Layout::RowMajor, Layout::ColumnMajor] {
            for (i, &(m, n, k)) in shapes.iter().enumerate() {
                let beta = if i % 2 == 0 { 0.5 } else { 0.0 };
                let p = GemmProblem::new(m, n, k)
                    .with_a(ml(la))
                    .with_b(ml(lb))
                    .with_c(ml(d))
                    .with_d(ml(d))
                    .with_scalars(1.25, beta);
                staged += usize::from(
                    !Gemm::<T, T, TD>::new(&ctx, &p)
                        .unwrap()
                        .staged_operands()
                        .is_empty(),
                );
                let cmp = run_and_check::<T, T, TD>(&ctx, &stream, &mut rng, &p, beta != 0.0);
                worst = worst.max(cmp.max_error_ratio);
                runs += 1;
            }
            // Odd leading dimensions and batch strides (batch 3).
            let (m, n, k) = (37, 45, 53);
            let ld = |l: Layout, rows: usize, cols: usize| match l {
                Layout::RowMajor => cols + 3,
                Layout::ColumnMajor => rows + 5,
            };
            let geometry = |l: Layout, rows: usize, cols: usize| {
                let ld = ld(l, rows, cols);
                ml(l).with_ld(ld).with_batch_stride(ld * rows.max(cols) + 7)
            };
            let p = GemmProblem::new(m, n, k)
                .with_batch(3)
                .with_a(geometry(la, m, k))
                .with_b(geometry(lb, k, n))
                .with_c(geometry(d, m, n))
                .with_d(geometry(d, m, n))
                .with_scalars(0.5, -1.0);
            let cmp = run_and_check::<T, T, TD>(&ctx, &stream, &mut rng, &p, true);
            worst = worst.max(cmp.max_error_ratio);
            runs += 1;
        }
    }
    // A vocabulary-sized n (GPT-2's 50257) with the TN layout of a language-model head.
    if layouts.iter().any(|&(name, _, _)| name == "TN") {
        let p = GemmProblem::new(8, 50257, 768);
        let cmp = run_and_check::<T, T, TD>(&ctx, &stream, &mut rng, &p, false);
        worst = worst.max(cmp.max_error_ratio);
        runs += 1;
    }
    // A kernel with a TMA epilogue, named: an n off the alignment then stages B and D (the
    // automatic choice takes a kernel that stores D itself, where the build has one).
    let tma = cutlass_gemm::built_kernels()
        .iter()
        .find(|k| {
            let s = &k.spec;
            s.arch == cutlass_gemm::Arch::Sm90a
                && (s.a.ty, s.b.ty, s.d.ty) == (T::DATA_TYPE, T::DATA_TYPE, TD::DATA_TYPE)
                && s.layout_name() == "TN"
                && s.d.layout == Layout::RowMajor
                && s.d.align == s.d.ty.tma_alignment()
                && s.blockwise.is_none()
        })
        .expect("a TN kernel with a TMA epilogue")
        .name;
    for (m, n, k) in [(17, 33, 4095), (257, 1001, 129)] {
        let p = GemmProblem::new(m, n, k).with_scalars(0.5, 2.0);
        let cmp = run_and_check_with::<T, T, TD>(&ctx, &stream, &mut rng, &p, true, Some(tma));
        worst = worst.max(cmp.max_error_ratio);
        runs += 1;
    }
    // In place (C is D) with a staged D: D is copied in, accumulated and copied back.
    let p = GemmProblem::new(5, 7, 9).with_scalars(1.0, 1.0);
    let g = Gemm::<T, T, TD>::with_kernel(&ctx, &p, tma).unwrap();
    assert!(g.staged_operands().contains(&OperandName::D));
    let a: Vec<T> = random_matrix(&mut rng, &g.operand(OperandName::A));
    let b: Vec<T> = random_matrix(&mut rng, &g.operand(OperandName::B));
    let c: Vec<TD> = random_matrix(&mut rng, &g.operand(OperandName::D));
    let (da, db) = (
        stream.clone_htod(&a).unwrap(),
        stream.clone_htod(&b).unwrap(),
    );
    let mut dd = stream.clone_htod(&c).unwrap();
    // Twice: each launch is checked against the reference from the D it started from (each
    // rounds to TD once, so a second launch is not 2 A·B + C rounded once).
    let mut before = c;
    for launch in 0..2 {
        g.run_in_place(&stream, &da, &db, &mut dd, Workspace::Managed)
            .unwrap();
        let d = stream.clone_dtoh(&dd).unwrap();
        let r = reference::gemm(&p, &a, &b, Some(&before[..])).unwrap();
        let cmp = reference::compare(&d, &g.operand(OperandName::D), &r);
        assert!(cmp.passed(), "in place, launch {launch}: {cmp:?}");
        before = d;
    }
    println!(
        "{} -> {} any shape: {runs} problems ({staged} with staged operands), worst error / bound = {worst:.3}",
        T::DATA_TYPE,
        TD::DATA_TYPE
    );
    assert!(staged > 0);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bf16_any_shape_in_all_layouts() {
    any_shape::<bf16, bf16>(&LAYOUTS);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_any_shape_in_all_layouts() {
    any_shape::<f16, f16>(&LAYOUTS);
}

/// tf32 (f32 output): Hopper reads 32-bit operands K-major, so TN.
#[test]
#[ignore = "needs a CUDA GPU"]
fn tf32_any_shape() {
    any_shape::<Tf32, f32>(&LAYOUTS[..1]);
}

/// Problems near the limits: more than 65535 batches (beyond a grid's y and z), k = 2^17 + 8, and
/// an odd k over many batches (the staging copies stride over their grid).
#[test]
#[ignore = "needs a CUDA GPU"]
fn large_problems_stay_correct() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    for p in [
        GemmProblem::new(16, 16, 16).with_batch(70_000),
        GemmProblem::new(64, 64, (1 << 17) + 8).with_scalars(1.0, 0.5),
        GemmProblem::new(5, 8, 13).with_batch(70_001),
    ] {
        let cmp = run_and_check::<bf16, bf16, bf16>(&ctx, &stream, &mut rng, &p, p.beta != 0.0);
        println!(
            "m {} n {} k {} batch {}: worst error / bound = {:.3}",
            p.m, p.n, p.k, p.batch, cmp.max_error_ratio
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn in_place_accumulation_and_plan_reuse() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let (m, n, k) = (512, 256, 128);
    let p = GemmProblem::new(m, n, k).with_scalars(1.0, 1.0);
    let g = Gemm::<bf16, bf16, f32>::new(&ctx, &p).unwrap();
    let a: Vec<bf16> = random_matrix(&mut rng, &g.operand(OperandName::A));
    let b: Vec<bf16> = random_matrix(&mut rng, &g.operand(OperandName::B));
    let da = stream.clone_htod(&a).unwrap();
    let db = stream.clone_htod(&b).unwrap();
    let mut dd = stream.alloc_zeros::<f32>(m * n).unwrap();
    // D += A·B three times: D = 3 A·B.
    for _ in 0..3 {
        g.run_in_place(&stream, &da, &db, &mut dd, Workspace::Managed)
            .unwrap();
    }
    let d = stream.clone_dtoh(&dd).unwrap();
    let r = reference::gemm(&p.with_scalars(3.0, 0.0), &a, &b, None::<&[f32]>).unwrap();
    let cmp = reference::compare(&d, &g.operand(OperandName::D), &r);
    assert!(cmp.passed(), "{cmp:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_buffers_on_the_device_get_typed_errors() {
    let (ctx, stream) = gemm_device();
    let (m, n, k) = (256, 256, 256);
    let g = Gemm::<bf16, bf16, bf16>::new(&ctx, &GemmProblem::new(m, n, k)).unwrap();
    let a = stream.alloc_zeros::<bf16>(m * k + 8).unwrap();
    let b = stream.alloc_zeros::<bf16>(k * n).unwrap();
    let short = stream.alloc_zeros::<bf16>(k * n - 1).unwrap();
    let mut d = stream.alloc_zeros::<bf16>(m * n).unwrap();
    let err = g
        .run(&stream, &a, &short, None, &mut d, Workspace::Managed)
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
    // A view one element in: 2 bytes off the 16-byte alignment.
    let a_off = a.slice(1..);
    let err = g
        .run(&stream, &a_off, &b, None, &mut d, Workspace::Managed)
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Misaligned {
                operand: OperandName::A,
                what: cutlass_gemm::Quantity::Pointer,
                required: 16,
                ..
            }
        ),
        "{err}"
    );
    println!(
        "workspace of {}: {} bytes",
        g.kernel_name(),
        g.workspace_size()
    );
    if g.workspace_size() > 0 {
        let mut tiny_ws = stream.alloc_zeros::<u8>(g.workspace_size() - 1).unwrap();
        let err = g
            .run(
                &stream,
                &a,
                &b,
                None,
                &mut d,
                Workspace::Buffer(&mut tiny_ws),
            )
            .unwrap_err();
        assert!(matches!(
            err,
            Error::BufferTooSmall {
                operand: OperandName::Workspace,
                ..
            }
        ));
    }
    // The device is Hopper: every built kernel is sm90a, and an SM100 device description is refused.
    assert_eq!(
        ctx.compute_capability().unwrap().0,
        9,
        "these GPU tests target Hopper"
    );
    // Nothing above launched a kernel: D is still zero.
    assert!(stream
        .clone_dtoh(&d)
        .unwrap()
        .iter()
        .all(|v| v.to_f32() == 0.0));
}

/// Every SM90 kernel of the build with A and B of type T and D of type TD (the performance
/// menu's stream-K and column-major-output kernels among them), by name, on problems that are not
/// tile multiples, with C and the given alpha and beta: in the orientation each serves for a
/// row-major D (kernels with a column-major D compute Dᵀ = Bᵀ·Aᵀ with the small M on their N side)
/// and for a column-major D, in every A/B layout the kernel takes. The gated kernels, which `Gemm`
/// does not plan (their D has half the GEMM's columns), are `gated.rs`'s; those that write an
/// auxiliary output, which a plain plan refuses, `aux.rs`'s.
fn every_kernel<T: Element, TD: Element>((alpha, beta): (f32, f32)) {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let kernels: Vec<_> = cutlass_gemm::built_kernels()
        .iter()
        .filter(|k| k.spec.arch == cutlass_gemm::Arch::Sm90a && k.spec.a.ty == T::DATA_TYPE)
        .filter(|k| k.spec.blockwise.is_none() && k.spec.b.ty == T::DATA_TYPE)
        .filter(|k| !k.spec.fusion.is_gated() && !k.spec.fusion.has_aux())
        .filter(|k| k.spec.d.ty == TD::DATA_TYPE)
        .collect();
    assert!(
        !kernels.is_empty(),
        "no {} -> {} kernel in this build",
        T::DATA_TYPE,
        TD::DATA_TYPE
    );
    // Extents that are no tile multiples, each a multiple of the operands' 16-byte alignment
    // (8-bit types need 16 elements; the others' 4 or 8 divide the first set).
    let shapes: &[(usize, usize, usize)] = if T::DATA_TYPE.tma_alignment() == 16 {
        &[(16, 272, 1040), (208, 528, 144), (1008, 32, 528)]
    } else {
        &[(16, 264, 1032), (200, 520, 136), (1000, 24, 520)]
    };
    let shapes = if quick() { &shapes[..1] } else { shapes };
    let mut runs = 0;
    let mut worst: f64 = 0.0;
    for k in &kernels {
        let mut served = 0;
        for (_, la, lb) in LAYOUTS {
            for d in [Layout::RowMajor, Layout::ColumnMajor] {
                for &(m, n, kk) in shapes {
                    let p = GemmProblem::new(m, n, kk)
                        .with_a(ml(la))
                        .with_b(ml(lb))
                        .with_c(ml(d))
                        .with_d(ml(d))
                        .with_scalars(alpha, beta);
                    if Gemm::<T, T, TD>::with_kernel(&ctx, &p, k.name).is_err() {
                        continue;
                    }
                    let cmp = run_and_check_with::<T, T, TD>(
                        &ctx,
                        &stream,
                        &mut rng,
                        &p,
                        true,
                        Some(k.name),
                    );
                    worst = worst.max(cmp.max_error_ratio);
                    runs += 1;
                    served += 1;
                }
            }
        }
        assert!(served > 0, "{}: no problem planned with it", k.name);
    }
    println!(
        "{} -> {}: {} kernels, {runs} problems by name (alpha {alpha}, beta {beta}), worst error / bound = {worst:.3}",
        T::DATA_TYPE,
        TD::DATA_TYPE,
        kernels.len()
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bf16_every_built_kernel_by_name() {
    every_kernel::<bf16, bf16>((0.75, 0.5));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_every_built_kernel_by_name() {
    every_kernel::<f16, f16>((0.75, 0.5));
}

/// tf32 kernels (f32 output) on exact tf32 inputs, against the f64 reference.
#[test]
#[ignore = "needs a CUDA GPU"]
fn tf32_every_built_kernel_by_name() {
    every_kernel::<Tf32, f32>((0.75, 0.5));
}

/// s8 x s8 -> s32 kernels: the s32 sums are exact, the f32 epilogue's result rounds to the
/// nearest integer (the bound admits no off-by-one at these magnitudes).
#[test]
#[ignore = "needs a CUDA GPU"]
fn s8_to_s32_every_built_kernel_by_name() {
    every_kernel::<i8, i32>((0.75, 0.5));
}

/// s8 x s8 -> s8: alpha = 1/64 puts about half of the results beyond the s8 range, where the
/// epilogue must saturate (the reference saturates too).
#[test]
#[ignore = "needs a CUDA GPU"]
fn s8_to_s8_rounds_and_saturates() {
    every_kernel::<i8, i8>((1.0 / 64.0, 0.5));
}

/// s8 x s8 -> s32 with alpha = 1 and beta = 0 is exact: every element equal to the integer
/// reference, for the heuristic's choice from decode-size M to a large K.
#[test]
#[ignore = "needs a CUDA GPU"]
fn s8_to_s32_is_exact() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    for (m, n, k) in [
        (16, 4096, 4096),
        (128, 1024, 8192),
        (1008, 272, 528),
        (4096, 512, 1024),
    ] {
        let p = GemmProblem::new(m, n, k);
        let g = Gemm::<i8, i8, i32>::new(&ctx, &p).unwrap();
        let a: Vec<i8> = random_matrix(&mut rng, &g.operand(OperandName::A));
        let b: Vec<i8> = random_matrix(&mut rng, &g.operand(OperandName::B));
        let mut dd = stream.alloc_zeros::<i32>(m * n).unwrap();
        g.run(
            &stream,
            &stream.clone_htod(&a).unwrap(),
            &stream.clone_htod(&b).unwrap(),
            None,
            &mut dd,
            Workspace::Managed,
        )
        .unwrap();
        let d = stream.clone_dtoh(&dd).unwrap();
        let r = reference::gemm::<i8, i8, i32>(&p, &a, &b, None).unwrap();
        let wrong = d
            .iter()
            .zip(&r.value)
            .filter(|(x, y)| **x as f64 != **y)
            .count();
        assert_eq!(wrong, 0, "{m}x{n}x{k} {}", g.kernel_name());
        println!("s8 -> s32 {m}x{n}x{k} exact ({})", g.kernel_name());
    }
}

/// A planned GEMM replays from a CUDA graph with the same result as a direct launch: the
/// heuristic's plan for a decode-size problem, and, when the build has them, a swapped stream-K
/// kernel (its workspace reset is captured too) with split-K.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_graph_replay_matches_a_direct_launch() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let (m, n, k) = (16, 4096, 4096);
    let p = GemmProblem::new(m, n, k);
    let mut plans = vec![Gemm::<bf16, bf16, bf16>::new(&ctx, &p).unwrap()];
    if let Some(kn) = cutlass_gemm::built_kernels().iter().find(|kn| {
        kn.spec.a.ty == cutlass_gemm::DataType::Bf16
            && kn.spec.d.layout == Layout::ColumnMajor
            && kn.spec.tile_scheduler == cutlass_gemm::TileScheduler::StreamK
    }) {
        let g = Gemm::<bf16, bf16, bf16>::with_kernel(&ctx, &p, kn.name).unwrap();
        assert!(g.is_swapped());
        plans.push(g);
        let g = Gemm::<bf16, bf16, bf16>::with_kernel(&ctx, &p, kn.name)
            .unwrap()
            .with_schedule(cutlass_gemm::ScheduleHints {
                splits: 4,
                ..Default::default()
            })
            .unwrap();
        plans.push(g);
    }
    let a: Vec<bf16> = random_matrix(&mut rng, &plans[0].operand(OperandName::A));
    let b: Vec<bf16> = random_matrix(&mut rng, &plans[0].operand(OperandName::B));
    let (da, db) = (
        stream.clone_htod(&a).unwrap(),
        stream.clone_htod(&b).unwrap(),
    );
    let r = reference::gemm(&p, &a, &b, None::<&[bf16]>).unwrap();
    for g in &plans {
        let mut direct = stream.alloc_zeros::<bf16>(m * n).unwrap();
        let mut ws = stream.alloc_zeros::<u8>(g.workspace_size().max(1)).unwrap();
        g.run(
            &stream,
            &da,
            &db,
            None,
            &mut direct,
            Workspace::Buffer(&mut ws),
        )
        .unwrap();
        let want = stream.clone_dtoh(&direct).unwrap();
        let cmp = reference::compare(&want, &g.operand(OperandName::D), &r);
        assert!(cmp.passed(), "{}: {cmp:?}", g.kernel_name());
        // Capture on a second stream, replay three times into a poisoned D. Two ways: the raw
        // entry point (pointers resolved before the capture), and the safe one with cudarc's
        // per-buffer event tracking switched off (its cross-stream event waits cannot be
        // captured).
        let capture = ctx.new_stream().unwrap();
        let mut dd = capture.clone_htod(&vec![bf16::NAN; m * n]).unwrap();
        capture.synchronize().unwrap();
        stream.synchronize().unwrap();
        let (pa, pb) = (da.device_ptr(&capture).0, db.device_ptr(&capture).0);
        let pd = dd.device_ptr(&capture).0;
        let (pw, ws_len) = (ws.device_ptr(&capture).0, ws.len());
        capture.synchronize().unwrap();
        let mode = cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        let flags = cudarc::driver::sys::CUgraphInstantiate_flags(0);
        capture.begin_capture(mode).unwrap();
        // SAFETY: the buffers hold the problem's extents and outlive the graph's launches.
        unsafe { g.run_raw(pa, pb, None, pd, pw, ws_len, capture.cu_stream()) }.unwrap();
        let raw_graph = capture.end_capture(flags).unwrap().expect("a graph");
        // SAFETY: re-enabled below; nothing else uses these buffers meanwhile.
        unsafe { ctx.disable_event_tracking() };
        capture.begin_capture(mode).unwrap();
        g.run(
            &capture,
            &da,
            &db,
            None,
            &mut dd,
            Workspace::Buffer(&mut ws),
        )
        .unwrap();
        let safe_graph = capture.end_capture(flags).unwrap().expect("a graph");
        unsafe { ctx.enable_event_tracking() };
        for graph in [&raw_graph, &safe_graph] {
            for _ in 0..3 {
                graph.launch().unwrap();
            }
        }
        capture.synchronize().unwrap();
        let got = capture.clone_dtoh(&dd).unwrap();
        let same = got
            .iter()
            .zip(&want)
            .filter(|(x, y)| x.to_bits() == y.to_bits())
            .count();
        println!(
            "{} {:?}: worst error / bound {:.3}; graph replay, {same} of {} elements bit-identical to the direct launch",
            g.kernel_name(),
            g.schedule(),
            cmp.max_error_ratio,
            want.len()
        );
        assert_eq!(same, want.len());
    }
}

/// Programmatic dependent launch keeps dependent GEMMs ordered. A chain of GEMMs over two buffers,
/// X' = X·W: each step reads the D of the step before (read after write) and writes the buffer the
/// step before read (write after read). Run back to back on one stream with the plans' default
/// (programmatic dependent launch where the kernel has it) and without it, and as a CUDA graph
/// captured with it (programmatic edges, replayed with no host gaps), the chains agree bit for
/// bit; the first step agrees with the f64 host reference. The buffer that is read second holds
/// NaN before the chain, so a step that read early would poison everything after it. The chain
/// times are printed for information (host clock; each step's buffers differ from the step
/// before, so every call also builds its kernel parameters on the host).
#[test]
#[ignore = "needs a CUDA GPU"]
fn programmatic_dependent_launch_keeps_a_chain_of_dependent_gemms_ordered() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    const STEPS: usize = 48;
    let mut chains = Vec::new();
    for (m, k) in [(16, 4096), (128, 4096), (64, 1024), (4096, 4096)] {
        // X (m x k, row-major) times W (k x k): D is m x k row-major, the next step's A.
        let p = GemmProblem::new(m, k, k);
        let g = Gemm::<bf16, bf16, bf16>::new(&ctx, &p).unwrap();
        assert_eq!(
            g.programmatic_dependent_launch(),
            g.kernel_spec().supports_programmatic_dependent_launch()
        );
        let x: Vec<bf16> = random_matrix(&mut rng, &g.operand(OperandName::A));
        // Uniform in +-sqrt(3 / k): the values keep about their size along the chain.
        let s = (3.0 / k as f64).sqrt();
        let w: Vec<bf16> = (0..g.operand(OperandName::B).required_len())
            .map(|_| bf16::from_f64(rng.random_range(-s..s)))
            .collect();
        let dw = stream.clone_htod(&w).unwrap();
        let mut ws = stream.alloc_zeros::<u8>(g.workspace_size().max(1)).unwrap();
        let mut bufs = [
            stream.clone_htod(&x).unwrap(),
            stream.clone_htod(&vec![bf16::NAN; m * k]).unwrap(),
        ];
        // The chain's last D and its time; then the first step alone.
        let mut run_chain = |plan: &Gemm<bf16, bf16, bf16>| -> (Vec<bf16>, f64, Vec<bf16>) {
            stream.memcpy_htod(&x, &mut bufs[0]).unwrap();
            stream
                .memcpy_htod(&vec![bf16::NAN; m * k], &mut bufs[1])
                .unwrap();
            stream.synchronize().unwrap();
            let t = std::time::Instant::now();
            for step in 0..STEPS {
                let [b0, b1] = &mut bufs;
                let (src, dst) = if step % 2 == 0 {
                    (&*b0, b1)
                } else {
                    (&*b1, b0)
                };
                plan.run(&stream, src, &dw, None, dst, Workspace::Buffer(&mut ws))
                    .unwrap();
            }
            stream.synchronize().unwrap();
            let secs = t.elapsed().as_secs_f64();
            let last = stream.clone_dtoh(&bufs[STEPS % 2]).unwrap();
            stream.memcpy_htod(&x, &mut bufs[0]).unwrap();
            let [b0, b1] = &mut bufs;
            plan.run(&stream, &*b0, &dw, None, b1, Workspace::Buffer(&mut ws))
                .unwrap();
            (last, secs, stream.clone_dtoh(&bufs[1]).unwrap())
        };
        // A first chain loads the kernel and warms the launch path; the two timed chains follow.
        run_chain(&g);
        let no_pdl = g.clone().with_programmatic_dependent_launch(false);
        let (off, t_off, first_off) = run_chain(&no_pdl);
        let (on, t_on, first_on) = run_chain(&g);
        let r = reference::gemm(&p, &x, &w, None::<&[bf16]>).unwrap();
        let cmp = reference::compare(&first_on, &g.operand(OperandName::D), &r);
        assert!(cmp.passed(), "{} {m}x{k}x{k}: {cmp:?}", g.kernel_name());
        let bits = |v: &[bf16]| v.iter().map(|x| x.to_bits()).collect::<Vec<u16>>();
        assert_eq!(bits(&first_on), bits(&first_off));
        assert!(
            on.iter().all(|v| v.is_finite()),
            "{}: NaN reached the end of the chain",
            g.kernel_name()
        );
        assert!(
            bits(&on) == bits(&off),
            "{} {m}x{k}x{k}: the chains with and without PDL differ",
            g.kernel_name()
        );
        println!(
            "{} {m}x{k}x{k}, {STEPS} dependent steps: PDL {}, {:.1} us a step; without, {:.1} us a step; bit-identical",
            g.kernel_name(),
            if g.programmatic_dependent_launch() { "on" } else { "not supported" },
            t_on * 1e6 / STEPS as f64,
            t_off * 1e6 / STEPS as f64,
        );
        chains.push((g, x, dw, ws, bufs, on));
    }
    assert!(
        chains.iter().any(|c| c.0.programmatic_dependent_launch()),
        "no chain ran with programmatic dependent launch"
    );
    // The graphs last: a second stream puts cudarc in multi-stream mode (event tracking), which
    // the stream chains above are timed without.
    for (g, x, dw, mut ws, mut bufs, on) in chains {
        graph_chain(&ctx, &stream, &g, &mut bufs, &dw, &mut ws, &x, STEPS, &on);
    }
}

/// The chain of [`programmatic_dependent_launch_keeps_a_chain_of_dependent_gemms_ordered`] captured
/// into a CUDA graph from the raw entry points (programmatic edges between the launches) and
/// replayed twice: the same bits as `want`.
#[allow(clippy::too_many_arguments)]
fn graph_chain(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    g: &Gemm<bf16, bf16, bf16>,
    bufs: &mut [CudaSlice<bf16>; 2],
    w: &CudaSlice<bf16>,
    ws: &mut CudaSlice<u8>,
    x: &[bf16],
    steps: usize,
    want: &[bf16],
) {
    let (m, k) = (g.problem().m, g.problem().k);
    let capture = ctx.new_stream().unwrap();
    stream.synchronize().unwrap();
    let p = [
        bufs[0].device_ptr(&capture).0,
        bufs[1].device_ptr(&capture).0,
    ];
    let pw = w.device_ptr(&capture).0;
    let (pws, ws_len) = (ws.device_ptr(&capture).0, ws.len());
    capture.synchronize().unwrap();
    let mode = cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    capture.begin_capture(mode).unwrap();
    for step in 0..steps {
        let (src, dst) = if step % 2 == 0 { (0, 1) } else { (1, 0) };
        // SAFETY: the buffers hold m x k and k x k elements and outlive the graph's launches.
        unsafe { g.run_raw(p[src], pw, None, p[dst], pws, ws_len, capture.cu_stream()) }.unwrap();
    }
    let graph = capture
        .end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0))
        .unwrap()
        .expect("a graph");
    for replay in 0..2 {
        capture.memcpy_htod(x, &mut bufs[0]).unwrap();
        capture
            .memcpy_htod(&vec![bf16::NAN; m * k], &mut bufs[1])
            .unwrap();
        graph.launch().unwrap();
        capture.synchronize().unwrap();
        let got = capture.clone_dtoh(&bufs[steps % 2]).unwrap();
        let same = got
            .iter()
            .zip(want)
            .filter(|(a, b)| a.to_bits() == b.to_bits())
            .count();
        assert_eq!(
            same,
            want.len(),
            "{}: graph replay {replay} differs from the stream chain",
            g.kernel_name()
        );
    }
    println!(
        "  {}: graph of the {steps} steps replayed twice: bit-identical",
        g.kernel_name()
    );
}

/// The 16-bit decode GEMV, named and as the library's choice, against the f64 reference with the
/// crate's bound: 1 to 32 tokens (one to four groups of 8, m off each group's end), n of one
/// 16-row slice and off a multiple of 64, k of one run, odd runs and long, padded leading
/// dimensions, with and without C, bf16 and f16; then NaN and infinity in X and W propagate to
/// their token's row and weight's column of D only.
fn dense_decode_gemv<T: Element>() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let gemv = cutlass_gemm::DENSE_GEMV;
    let ms: &[usize] = if quick() {
        &[1, 9, 32]
    } else {
        &[1, 3, 8, 9, 16, 17, 25, 32]
    };
    let mut runs = 0;
    for &m in ms {
        for (n, k) in [(16, 64), (400, 192), (1040, 4096)] {
            for with_c in [false, true] {
                let p = GemmProblem::new(m, n, k)
                    .with_a(MatrixLayout::row_major().with_ld(k + 8 * (m % 2)))
                    .with_scalars(0.75, if with_c { 0.5 } else { 0.0 });
                let cmp =
                    run_and_check_with::<T, T, T>(&ctx, &stream, &mut rng, &p, with_c, Some(gemv));
                assert!(cmp.passed());
                runs += 1;
            }
        }
        // The library's choice up to DENSE_GEMV_TOKENS.
        let g = Gemm::<T, T, T>::new(&ctx, &GemmProblem::new(m, 4096, 4096)).unwrap();
        assert_eq!(g.is_gemv(), m <= cutlass_gemm::DENSE_GEMV_TOKENS, "m = {m}");
    }
    // NaN in X's token 2, +Inf in W's row 5 (with a finite product elsewhere): row 2 and column 5
    // of D are NaN (Inf times values of both signs), everything else finite and as the reference.
    let (m, n, k) = (4, 32, 128);
    let p = GemmProblem::new(m, n, k);
    let mut a: Vec<T> = (0..m * k)
        .map(|_| T::from_f64(rng.random_range(-2..=2) as f64))
        .collect();
    let mut b: Vec<T> = (0..n * k)
        .map(|_| T::from_f64(rng.random_range(-2..=2) as f64))
        .collect();
    a[2 * k + 7] = T::from_f64(f64::NAN);
    b[5 * k + 3] = T::from_f64(f64::INFINITY);
    // Make the Inf meet values of both signs so that its column is NaN for every token.
    for t in 0..m {
        a[t * k + 3] = T::from_f64(1.0);
        a[t * k + 4] = T::from_f64(-1.0);
    }
    b[5 * k + 4] = T::from_f64(f64::INFINITY);
    let g = Gemm::<T, T, T>::with_kernel(&ctx, &p, gemv).unwrap();
    let (da, db) = (
        stream.clone_htod(&a).unwrap(),
        stream.clone_htod(&b).unwrap(),
    );
    let mut dd = stream.clone_htod(&vec![T::POISON; m * n]).unwrap();
    g.run(&stream, &da, &db, None, &mut dd, Workspace::Managed)
        .unwrap();
    let d = stream.clone_dtoh(&dd).unwrap();
    for t in 0..m {
        for j in 0..n {
            let v = d[t * n + j].to_f64();
            if t == 2 || j == 5 {
                assert!(v.is_nan(), "D[{t}][{j}] = {v}, not NaN");
            } else {
                // Small integers: the f32 sum is exact, D its rounding to T.
                let want: f64 = (0..k)
                    .map(|i| a[t * k + i].to_f64() * b[j * k + i].to_f64())
                    .sum();
                assert_eq!(v, T::from_f64(want).to_f64(), "D[{t}][{j}]");
            }
        }
    }
    println!(
        "{}: the 16-bit decode GEMV, {runs} problems and NaN/Inf propagation",
        T::DATA_TYPE
    );
}

/// Split-K with a reduction (`with_schedule` on a kernel that is not stream-K: a batch of K slices
/// on the kernel's f32-output twin, then the reduction) against the f64 reference with the crate's
/// bound: each tile with a twin (the swapped 64x8 and 64x16, the 64x64 pingpong, the 128x256
/// cooperative), 2 to 8 slices,
/// m off the tiles' ends, with C (beta 0.5, alpha 0.75) and without, a padded A, and C as D; then
/// the refusals: slices of unequal length, a batch.
fn split_k_with_reduction<T: Element>() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let ty = T::DATA_TYPE.to_string();
    let tiles = [
        "64x8x64_1x2x1_0_tnn_align8_warpspecialized_pingpong_epi_tma",
        "64x16x64_2x1x1_0_tnn_align8_warpspecialized_pingpong_epi_tma",
        "64x64x64_1x2x1_0_tnt_align8_warpspecialized_pingpong_epi_tma",
        "128x256x64_2x1x1_0_tnt_align8_warpspecialized_cooperative_epi_tma",
    ];
    let mut runs = 0;
    for tile in tiles {
        let name = format!("cutlass3x_sm90_tensorop_gemm_{ty}_{ty}_f32_{ty}_{ty}_{tile}");
        let twin = format!("cutlass3x_sm90_tensorop_gemm_{ty}_{ty}_f32_f32_f32_{tile}");
        for (m, n, k, splits) in [
            (1, 256, 1024, 2),
            (13, 520, 3584, 7),
            (40, 4096, 2048, 4),
            (129, 192, 4608, 8),
        ] {
            for with_c in [false, true] {
                let p = GemmProblem::new(m, n, k)
                    .with_a(MatrixLayout::row_major().with_ld(k + 8 * (m % 2)))
                    .with_scalars(0.75, if with_c { 0.5 } else { 0.0 });
                let g = Gemm::<T, T, T>::with_kernel(&ctx, &p, &name)
                    .and_then(|g| {
                        let hints = ScheduleHints {
                            splits,
                            ..g.schedule()
                        };
                        g.with_schedule(hints)
                    })
                    .unwrap_or_else(|e| panic!("{name} {p:?} split {splits}: {e}"));
                assert_eq!(g.split_k_kernel(), Some(twin.as_str()));
                assert!(g.workspace_size() >= splits as usize * m * n * 4);
                assert!(check_plan(&g, &stream, &mut rng, with_c).passed());
                runs += 1;
            }
        }
        // C as D: D = 0.75 A.B + 0.5 D.
        let (m, n, k) = (24, 264, 2048);
        let p = GemmProblem::new(m, n, k).with_scalars(0.75, 0.5);
        let g = Gemm::<T, T, T>::with_kernel(&ctx, &p, &name)
            .and_then(|g| {
                let hints = ScheduleHints {
                    splits: 4,
                    ..g.schedule()
                };
                g.with_schedule(hints)
            })
            .unwrap();
        let a: Vec<T> = (0..m * k)
            .map(|_| T::from_f64(rng.random_range(-2..=2) as f64))
            .collect();
        let b: Vec<T> = (0..n * k)
            .map(|_| T::from_f64(rng.random_range(-2..=2) as f64))
            .collect();
        let c: Vec<T> = (0..m * n)
            .map(|_| T::from_f64(rng.random_range(-4..=4) as f64))
            .collect();
        let (da, db) = (
            stream.clone_htod(&a).unwrap(),
            stream.clone_htod(&b).unwrap(),
        );
        let mut dd = stream.clone_htod(&c).unwrap();
        g.run_in_place(&stream, &da, &db, &mut dd, Workspace::Managed)
            .unwrap();
        let d = stream.clone_dtoh(&dd).unwrap();
        let want = reference::gemm(&p, &a, &b, Some(&c[..])).unwrap();
        let cmp = reference::compare(&d, &g.operand(OperandName::D), &want);
        assert!(cmp.passed(), "{name} in place: {cmp:?}");
        runs += 1;
        // Refusals, typed: k = 3584 does not split into 3 slices of a multiple of 8; a batch.
        let refused = |p: &GemmProblem, splits: u16| {
            Gemm::<T, T, T>::with_kernel(&ctx, p, &name)
                .and_then(|g| {
                    let hints = ScheduleHints {
                        splits,
                        ..g.schedule()
                    };
                    g.with_schedule(hints)
                })
                .unwrap_err()
        };
        assert!(matches!(
            refused(&GemmProblem::new(16, 512, 3584), 3),
            Error::KernelMismatch {
                reason: KernelRule::SplitK {
                    splits: 3,
                    rule: SplitKRule::Slices { k: 3584, splits: 3 }
                },
                ..
            }
        ));
        assert!(matches!(
            refused(&GemmProblem::new(16, 512, 1024).with_batch(2), 2),
            Error::KernelMismatch {
                reason: KernelRule::SplitK {
                    rule: SplitKRule::Batch { batch: 2 },
                    ..
                },
                ..
            }
        ));
    }
    println!(
        "{}: split-K with a reduction, {runs} problems against the reference",
        T::DATA_TYPE
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bf16_split_k_with_reduction_matches_the_reference() {
    split_k_with_reduction::<bf16>();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_split_k_with_reduction_matches_the_reference() {
    split_k_with_reduction::<f16>();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bf16_dense_decode_gemv_matches_the_reference() {
    dense_decode_gemv::<bf16>();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_dense_decode_gemv_matches_the_reference() {
    dense_decode_gemv::<f16>();
}
