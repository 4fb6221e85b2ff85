//! Fused epilogues (bias, activation, row and column scales) on every fused kernel of the build,
//! element by element against the f64 host reference (`reference::fused`, whose bound carries the
//! activation's own error), and the launch-time checks of their vectors.

use crate::common::*;

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use cutlass_gemm::numeric::E4M3;
use cutlass_gemm::reference::{self, Comparison, HostEpilogue, Strided};
use cutlass_gemm::{
    Activation, BiasAxis, BiasElement, BlockwiseGemm, DataType, Element, Epilogue,
    EpilogueOperands, Error, Gemm, GemmProblem, Layout, MatrixLayout, OperandName, ProblemRule,
    Workspace,
};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::Rng;

/// Random values in [-scale, scale) rounded to T; for FP8 operands (`T` of 8 bits) integers in
/// [-3, 3] instead: Hopper's FP8 tensor cores do not accumulate in full f32, and with small
/// integers every sum is exact, so the bound checks the epilogue alone (as `fp8.rs` does).
fn random<T: Element>(rng: &mut StdRng, g: &cutlass_gemm::ResolvedMatrix, scale: f64) -> Vec<T> {
    let mut v = vec![T::POISON; g.required_len()];
    for l in 0..g.batch {
        for i in 0..g.rows {
            for j in 0..g.cols {
                let x = if T::DATA_TYPE.bits() == 8 {
                    rng.random_range(-3i32..=3) as f64
                } else {
                    rng.random_range(-scale..scale)
                };
                v[g.offset(l, i, j)] = T::from_f64(x);
            }
        }
    }
    v
}

/// The epilogues each kernel runs: every activation, both bias axes, the rowwise scales, C. On
/// SM90 those without row scale, column scale, row bias (in the kernel's orientation: a swapped
/// kernel's row bias is the user's column bias) and C run the lean trees, one per activation, the
/// others the whole tree.
fn epilogues() -> Vec<(Epilogue, bool)> {
    let mut out = vec![
        (Epilogue::bias(), false),
        (Epilogue::bias().with_bias(BiasAxis::PerRow), true),
        (Epilogue::rowwise(), false),
        (
            Epilogue::rowwise()
                .with_bias(BiasAxis::PerColumn)
                .with_activation(Activation::Silu),
            true,
        ),
    ];
    for act in Activation::ALL {
        out.push((Epilogue::bias().with_activation(act), false));
    }
    out.push((Epilogue::NONE.with_activation(Activation::GeluTanh), false));
    // Without row vectors but with C: SM90 kernels run the whole tree (C is read), not a lean one;
    // its activation chosen at run time, GELU's two forms included.
    out.push((Epilogue::bias().with_activation(Activation::Relu), true));
    out.push((Epilogue::bias().with_activation(Activation::GeluTanh), true));
    out.push((
        Epilogue::bias()
            .with_bias(BiasAxis::PerRow)
            .with_activation(Activation::GeluErf),
        false,
    ));
    out
}

/// The epilogues [`every_fused_kernel`] runs on each kernel.
fn epilogues_per_kernel() -> usize {
    if quick() {
        2
    } else {
        epilogues().len()
    }
}

/// Runs `g` (planned with its epilogue) on random operands and vectors, and compares with the
/// reference. `scale` is the range of 16-bit operands (FP8 ones are small integers: [`random`]).
#[allow(clippy::too_many_arguments)]
fn run_fused<TA: Element, TB: Element, TD: Element>(
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    g: &Gemm<TA, TB, TD>,
    with_c: bool,
    scale: f64,
    blockwise: Option<&BlockwiseGemm<E4M3, E4M3, TD>>,
) -> Comparison {
    let p = *g.problem();
    let e = g.epilogue();
    let (ga, gb, gc, gd) = (
        g.operand(OperandName::A),
        g.operand(OperandName::B),
        g.operand(OperandName::C),
        g.operand(OperandName::D),
    );
    let a: Vec<TA> = random(rng, &ga, scale);
    let b: Vec<TB> = random(rng, &gb, scale);
    let c: Vec<TD> = random(rng, &gc, 1.0);
    let bias_len = match e.bias {
        Some(BiasAxis::PerColumn) => p.n,
        Some(BiasAxis::PerRow) => p.m,
        None => 0,
    };
    // An f32 bias keeps bits that D's type drops (values in [-2, 2) at f32's resolution); one of
    // D's type is rounded to it.
    let f32_bias = e.bias_element == BiasElement::F32;
    let bias_f32: Vec<f32> = (0..bias_len)
        .map(|_| rng.random_range(-2.0f32..2.0))
        .collect();
    let bias: Vec<TD> = bias_f32.iter().map(|&x| TD::from_f64(x as f64)).collect();
    let rows: Vec<f32> = (0..p.m).map(|_| rng.random_range(0.25f32..2.0)).collect();
    let cols: Vec<f32> = (0..p.n).map(|_| rng.random_range(0.25f32..2.0)).collect();
    let (da, db, dc) = (
        stream.clone_htod(&a).unwrap(),
        stream.clone_htod(&b).unwrap(),
        stream.clone_htod(&c).unwrap(),
    );
    let dbias = stream.clone_htod(&bias).unwrap();
    let dbias_f32 = stream.clone_htod(&bias_f32).unwrap();
    let (drows, dcols) = (
        stream.clone_htod(&rows).unwrap(),
        stream.clone_htod(&cols).unwrap(),
    );
    let mut dd: CudaSlice<TD> = stream
        .clone_htod(&vec![TD::POISON; gd.required_len()])
        .unwrap();
    let ops = EpilogueOperands {
        bias: e
            .bias
            .filter(|_| !f32_bias)
            .map(|_| &dbias as &dyn DevicePtr<TD>),
        bias_f32: e
            .bias
            .filter(|_| f32_bias)
            .map(|_| &dbias_f32 as &dyn DevicePtr<f32>),
        row_scales: e.row_scales.then_some(&drows as &dyn DevicePtr<f32>),
        col_scales: e.col_scales.then_some(&dcols as &dyn DevicePtr<f32>),
    };
    let c_arg: Option<&dyn DevicePtr<TD>> = if with_c { Some(&dc) } else { None };
    match blockwise {
        Some(bw) => {
            // Unit blockwise scales: the epilogue is what is checked here (the scales are
            // checked by the blockwise tests).
            let (la, lb) = bw.scale_lens();
            let (sa, sb) = (
                stream.clone_htod(&vec![1.0f32; la]).unwrap(),
                stream.clone_htod(&vec![1.0f32; lb]).unwrap(),
            );
            // SAFETY: the same element type (the blockwise plan is E4M3 x E4M3).
            let (a8, b8): (&CudaSlice<E4M3>, &CudaSlice<E4M3>) = unsafe {
                (
                    &*(&da as *const CudaSlice<TA> as *const CudaSlice<E4M3>),
                    &*(&db as *const CudaSlice<TB> as *const CudaSlice<E4M3>),
                )
            };
            bw.run_fused(
                stream,
                a8,
                &sa,
                b8,
                &sb,
                c_arg,
                &mut dd,
                &ops,
                Workspace::Managed,
            )
        }
        None => g.run_fused(stream, &da, &db, c_arg, &mut dd, &ops, Workspace::Managed),
    }
    .unwrap_or_else(|err| panic!("{} {}: {err}", g.kernel_name(), e.describe()));
    let d = stream.clone_dtoh(&dd).unwrap();
    let bias64: Vec<f64> = if f32_bias {
        bias_f32.iter().map(|&x| x as f64).collect()
    } else {
        bias.iter().map(|x| x.to_f64()).collect()
    };
    let host = HostEpilogue {
        activation: e.activation,
        bias: e.bias.map(|axis| (axis, &bias64[..])),
        row_scales: e.row_scales.then_some(&rows[..]),
        col_scales: e.col_scales.then_some(&cols[..]),
    };
    let sa = Strided::new(&a, ga, OperandName::A).unwrap();
    let sb = Strided::new(&b, gb, OperandName::B).unwrap();
    let sc = Strided::new(&c, gc, OperandName::C).unwrap();
    let r = reference::fused(
        &p,
        &sa,
        &sb,
        with_c.then_some(&sc as &dyn reference::HostMatrix),
        &host,
    )
    .unwrap();
    let cmp = reference::compare(&d, &gd, &r);
    if g.epilogue_is_separate() {
        // A plain kernel then the separate pass: D rounded twice (see
        // `unfused_pass_matches_the_reference`).
        let pre = reference::fused(
            &p,
            &sa,
            &sb,
            with_c.then_some(&sc as &dyn reference::HostMatrix),
            &HostEpilogue {
                activation: Activation::Identity,
                ..host
            },
        )
        .unwrap();
        let u = TD::UNIT_ROUNDOFF;
        let mut outside = 0;
        for i in 0..p.m {
            for j in 0..p.n {
                let at = i * p.n + j;
                let (want, got) = (r.value[at], d[gd.offset(0, i, j)].to_f64());
                let column_bias = if e.bias.is_some() { bias64[j] } else { 0.0 };
                let x = (pre.value[at] - column_bias).abs();
                let bound = 2.0 * u * want.abs()
                    + 1.13 * u * x
                    + 2.0 * p.k as f64 * 2f64.powi(-24) * r.magnitude[at]
                    + r.extra_error[at];
                outside += usize::from((got - want).abs() > bound);
            }
        }
        assert_eq!(
            outside,
            0,
            "{} {p:?} {} (separate pass): outside the double-rounding bound",
            g.kernel_name(),
            e.describe()
        );
        return cmp;
    }
    assert!(
        cmp.passed(),
        "{} {p:?} {}: {cmp:?}",
        g.kernel_name(),
        e.describe()
    );
    cmp
}

/// Every fused kernel of the build for these types, each epilogue, on a problem with an odd m (and
/// for the swapped kernels a column-major D).
fn every_fused_kernel<TA: Element, TB: Element, TD: Element>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    scale: f64,
) -> usize {
    let mut runs = 0;
    let mut worst = 0.0f64;
    for k in cutlass_gemm::built_kernels().iter().filter(|k| {
        k.spec.fusion.is_fused()
            && k.spec.blockwise.is_none()
            && (k.spec.a.ty, k.spec.b.ty, k.spec.d.ty)
                == (TA::DATA_TYPE, TB::DATA_TYPE, TD::DATA_TYPE)
    }) {
        // A column-major kernel D serves the user's row-major D swapped (m and n exchanged).
        let swapped = k.spec.d.layout == Layout::ColumnMajor;
        let (m, n) = if swapped { (24, 392) } else { (301, 392) };
        let kk = if TA::DATA_TYPE.bits() == 8 { 384 } else { 200 };
        let epilogues = epilogues();
        let epilogues = if quick() {
            &epilogues[..2]
        } else {
            &epilogues[..]
        };
        // The f32-bias kernels run each epilogue with its bias (if any) in f32.
        let f32_bias = k.spec.fusion.bias_type() == Some(DataType::F32);
        let as_built = |e: Epilogue| {
            if f32_bias && e.bias.is_some() {
                e.with_f32_bias()
            } else {
                e
            }
        };
        for (i, &(e, with_c)) in epilogues.iter().enumerate() {
            let e = as_built(e);
            let p = GemmProblem::new(m, n, kk).with_scalars(0.75, if with_c { 0.5 } else { 0.0 });
            let p = if swapped && i % 2 == 1 {
                // The user's column-major D (the kernel's row-major one) through a transposed
                // plan: the per-row vectors become the kernel's per-column ones.
                p.with_d(MatrixLayout::col_major())
                    .with_c(MatrixLayout::col_major())
            } else {
                p
            };
            let g = match Gemm::<TA, TB, TD>::with_kernel(ctx, &p, k.name) {
                Ok(g) => g,
                Err(err) => panic!("{} {p:?}: {err}", k.name),
            };
            let g = g.with_epilogue(e).unwrap();
            assert_eq!(g.kernel_name(), k.name, "the pinned kernel stays");
            let cmp = run_fused(stream, rng, &g, with_c, scale, None);
            worst = worst.max(cmp.max_error_ratio);
            runs += 1;
        }
        // More tiles than SMs, so that each CTA of the persistent kernels runs several (the lean
        // trees' epilogue is made anew for each tile's store), with a lean and a whole tree.
        if !quick() {
            let (m, n) = if swapped {
                (64, 2304 * 8)
            } else {
                (2304, 2048)
            };
            for (e, with_c) in [
                (
                    Epilogue::bias().with_activation(Activation::GeluTanh),
                    false,
                ),
                (Epilogue::bias().with_activation(Activation::Silu), true),
            ] {
                let e = as_built(e);
                let p =
                    GemmProblem::new(m, n, 64).with_scalars(0.75, if with_c { 0.5 } else { 0.0 });
                let g = Gemm::<TA, TB, TD>::with_kernel(ctx, &p, k.name)
                    .unwrap_or_else(|err| panic!("{} {p:?}: {err}", k.name))
                    .with_epilogue(e)
                    .unwrap();
                let cmp = run_fused(stream, rng, &g, with_c, scale, None);
                worst = worst.max(cmp.max_error_ratio);
                runs += 1;
            }
        }
    }
    println!(
        "{} x {} -> {}: {runs} fused runs, worst error/bound {worst:.3}",
        TA::DATA_TYPE,
        TB::DATA_TYPE,
        TD::DATA_TYPE
    );
    runs
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bf16_fused_epilogues_on_every_kernel() {
    let (ctx, stream) = gemm_device();
    // The default build's five bf16 fused kernels at least.
    let runs = every_fused_kernel::<bf16, bf16, bf16>(&ctx, &stream, &mut rng(), 1.0);
    assert!(runs >= 5 * epilogues_per_kernel(), "{runs}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_fused_epilogues_on_every_kernel() {
    let (ctx, stream) = gemm_device();
    let runs = every_fused_kernel::<f16, f16, f16>(&ctx, &stream, &mut rng(), 1.0);
    assert!(runs >= 4 * epilogues_per_kernel(), "{runs}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_rowwise_and_fused_epilogues_on_every_kernel() {
    let (ctx, stream) = gemm_device();
    let runs = every_fused_kernel::<E4M3, E4M3, bf16>(&ctx, &stream, &mut rng(), 4.0);
    assert!(runs >= 4 * epilogues_per_kernel(), "{runs}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_blockwise_with_bias_and_activation() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let mut runs = 0;
    for (m, n, k) in [(256, 384, 512), (257, 392, 300)] {
        for (e, with_c) in epilogues() {
            let p = GemmProblem::new(m, n, k).with_scalars(0.5, if with_c { 0.25 } else { 0.0 });
            let bw = BlockwiseGemm::<E4M3, E4M3, bf16>::new(&ctx, &p)
                .unwrap()
                .with_epilogue(e)
                .unwrap();
            let g = bw.plan_inner().clone();
            run_fused(&stream, &mut rng, &g, with_c, 4.0, Some(&bw));
            runs += 1;
        }
    }
    println!("blockwise: {runs} fused runs");
}

/// The 16-bit decode GEMV computes every fused epilogue (chosen up to its tokens, named beyond: one
/// to four groups of eight tokens), in bf16 and f16, against the reference.
#[test]
#[ignore = "needs a CUDA GPU"]
fn dense_gemv_computes_the_fused_epilogues() {
    fn each<T: Element>(ctx: &Arc<CudaContext>, stream: &Arc<CudaStream>, rng: &mut StdRng) {
        for (m, named) in [(1, false), (5, false), (8, false), (13, true), (32, true)] {
            let p = GemmProblem::new(m, 272, 576);
            for (e, with_c) in epilogues().into_iter().take(epilogues_per_kernel()) {
                let g = if named {
                    Gemm::<T, T, T>::with_kernel(ctx, &p, cutlass_gemm::DENSE_GEMV)
                } else {
                    Gemm::<T, T, T>::new(ctx, &p)
                }
                .unwrap()
                .with_epilogue(e)
                .unwrap();
                assert!(g.is_gemv(), "m = {m} {}", e.describe());
                run_fused(stream, rng, &g, with_c, 1.0, None);
            }
        }
    }
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    each::<bf16>(&ctx, &stream, &mut rng);
    each::<f16>(&ctx, &stream, &mut rng);
}

/// Odd shapes whose padded extents stage the vectors too (n = 1001: the bias and column scales are
/// copied into the workspace, zero-filled), through whichever kernel the plan picks.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fused_epilogues_on_odd_shapes() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    for (m, n, k) in [
        (7, 1001, 4095),
        (257, 50257, 64),
        (64, 50257, 768),
        (1, 4096, 512),
        (2, 2, 2),
    ] {
        for e in [
            Epilogue::bias().with_activation(Activation::GeluTanh),
            Epilogue::rowwise().with_bias(BiasAxis::PerRow),
        ] {
            let p = GemmProblem::new(m, n, k);
            let g = Gemm::<bf16, bf16, bf16>::new(&ctx, &p)
                .unwrap()
                .with_epilogue(e)
                .unwrap();
            // Where the fused kernels would copy B into a padded buffer larger than D (n = 50257,
            // m <= k), a bias per column and an activation run as a separate pass after the plain
            // kernel.
            let separate =
                n == 50257 && m <= k && !e.row_scales && e.bias == Some(BiasAxis::PerColumn);
            assert_eq!(g.epilogue_is_separate(), separate, "{m} x {n} x {k}");
            assert!(separate || g.kernel_spec().fusion.is_fused());
            run_fused(&stream, &mut rng, &g, false, 1.0, None);
            // With C too.
            run_fused(&stream, &mut rng, &g, true, 1.0, None);
        }
    }
}

/// The vectors are checked before the launch: missing, unexpected, short, misaligned, or
/// overlapping D.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fused_epilogue_operands_are_checked() {
    let (ctx, stream) = gemm_device();
    let p = GemmProblem::new(128, 256, 64);
    let g = Gemm::<bf16, bf16, bf16>::new(&ctx, &p)
        .unwrap()
        .with_epilogue(Epilogue::bias())
        .unwrap();
    let a = stream.alloc_zeros::<bf16>(128 * 64).unwrap();
    let b = stream.alloc_zeros::<bf16>(256 * 64).unwrap();
    let mut d = stream.alloc_zeros::<bf16>(128 * 256 + 8).unwrap();
    let bias = stream.alloc_zeros::<bf16>(256 + 8).unwrap();
    let scales = stream.alloc_zeros::<f32>(256).unwrap();
    let run = |ops: &EpilogueOperands<'_, bf16>, d: &mut CudaSlice<bf16>| {
        g.run_fused(&stream, &a, &b, None, d, ops, Workspace::Managed)
    };
    let missing = run(&EpilogueOperands::default(), &mut d).unwrap_err();
    assert!(matches!(
        missing,
        Error::InvalidProblem {
            reason: ProblemRule::EpilogueOperandMissing {
                operand: OperandName::Bias
            }
        }
    ));
    let extra = EpilogueOperands {
        bias: Some(&bias),
        bias_f32: None,
        row_scales: Some(&scales),
        col_scales: None,
    };
    assert!(matches!(
        run(&extra, &mut d).unwrap_err(),
        Error::InvalidProblem {
            reason: ProblemRule::EpilogueOperandNotTaken {
                operand: OperandName::RowScales
            }
        }
    ));
    let short = bias.slice(0..255);
    assert!(matches!(
        run(&EpilogueOperands::bias(&short), &mut d).unwrap_err(),
        Error::BufferTooSmall {
            operand: OperandName::Bias,
            ..
        }
    ));
    let misaligned = bias.slice(1..257);
    assert!(matches!(
        run(&EpilogueOperands::bias(&misaligned), &mut d).unwrap_err(),
        Error::Misaligned {
            operand: OperandName::Bias,
            ..
        }
    ));
    // A plain run of a plan with a bias is refused too (run takes no vectors).
    assert!(g
        .run(&stream, &a, &b, None, &mut d, Workspace::Managed)
        .is_err());
    assert!(DataType::Bf16.bits() == 16);
    let _ = ctx;
}

/// The unfused twin (a plain GEMM, then `apply_unfused`) against the same reference.
#[test]
#[ignore = "needs a CUDA GPU"]
fn unfused_pass_matches_the_reference() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let (m, n, k) = (300, 1000, 256);
    let p = GemmProblem::new(m, n, k);
    let g = Gemm::<bf16, bf16, bf16>::new(&ctx, &p).unwrap();
    let (ga, gb, gd) = (
        g.operand(OperandName::A),
        g.operand(OperandName::B),
        g.operand(OperandName::D),
    );
    let a: Vec<bf16> = random(&mut rng, &ga, 1.0);
    let b: Vec<bf16> = random(&mut rng, &gb, 1.0);
    let bias: Vec<bf16> = (0..n)
        .map(|_| bf16::from_f64(rng.random_range(-2.0..2.0)))
        .collect();
    let (da, db, dbias) = (
        stream.clone_htod(&a).unwrap(),
        stream.clone_htod(&b).unwrap(),
        stream.clone_htod(&bias).unwrap(),
    );
    for act in Activation::ALL {
        let mut dd = stream.alloc_zeros::<bf16>(m * n).unwrap();
        g.run(&stream, &da, &db, None, &mut dd, Workspace::Managed)
            .unwrap();
        cutlass_gemm::plans::epilogue::apply_unfused(
            &stream,
            &mut dd,
            (m, n, n),
            Some(&dbias),
            act,
        )
        .unwrap();
        let d = stream.clone_dtoh(&dd).unwrap();
        let bias64: Vec<f64> = bias.iter().map(|x| x.to_f64()).collect();
        let host = HostEpilogue {
            activation: act,
            bias: Some((BiasAxis::PerColumn, &bias64[..])),
            ..Default::default()
        };
        let sa = Strided::new(&a, ga, OperandName::A).unwrap();
        let sb = Strided::new(&b, gb, OperandName::B).unwrap();
        let r = reference::fused(&p, &sa, &sb, None, &host).unwrap();
        // The unfused pass rounds twice: the GEMM's output to bf16 (u |pre - bias|, which the
        // activation carries by at most 1.13), then the pass's result; plus what the fused bound
        // has (accumulation, the epilogue's f32 arithmetic, the hardware tanh).
        let pre = reference::fused(
            &p,
            &sa,
            &sb,
            None,
            &HostEpilogue {
                activation: Activation::Identity,
                ..host
            },
        )
        .unwrap();
        let u = 2f64.powi(-8);
        let outside = (0..m * n)
            .filter(|&i| {
                let (want, got) = (r.value[i], d[i].to_f64());
                let x = (pre.value[i] - bias64[i % n]).abs();
                let bound = 2.0 * u * want.abs()
                    + 1.13 * u * x
                    + 2.0 * k as f64 * 2f64.powi(-24) * r.magnitude[i]
                    + r.extra_error[i];
                (got - want).abs() > bound
            })
            .count();
        let cmp = reference::compare(&d, &gd, &r);
        println!(
            "unfused {act}: {outside} outside the double-rounding bound; against the fused bound: {} of {} outside, worst ratio {:.2}",
            cmp.failures, cmp.checked, cmp.max_error_ratio
        );
        assert_eq!(outside, 0, "{act}");
    }
}

/// An f32 bias is added to the f32 value before D is rounded, not rounded to D's type first: with
/// beta = -1 and C the bias rounded to D's type, D holds the part of the bias that D's type drops
/// at its magnitude (300 + u, u in [0, 1): bf16 keeps steps of 2 there, f16 of 0.25), which a
/// bias rounded first would lose. On the decode GEMV and every f32-bias kernel of the build.
#[test]
#[ignore = "needs a CUDA GPU"]
fn f32_bias_is_added_before_rounding() {
    fn each<T: Element>(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        rng: &mut StdRng,
    ) -> usize {
        let cc = cutlass_gemm::DeviceInfo::query(ctx)
            .unwrap()
            .compute_capability;
        let mut plans: Vec<(usize, Option<&'static str>)> = vec![(4, None)];
        for k in cutlass_gemm::built_kernels().iter().filter(|k| {
            k.spec.fusion.bias_type() == Some(DataType::F32)
                && (k.spec.a.ty, k.spec.d.ty) == (T::DATA_TYPE, T::DATA_TYPE)
                && k.spec.arch.runs_on(cc)
        }) {
            plans.push((301, Some(k.name)));
        }
        let mut runs = 0;
        for (m, name) in plans {
            // n a multiple of 16, so that the decode GEMV takes the 4-token problem.
            let (n, k) = (400, 256);
            let p = GemmProblem::new(m, n, k).with_scalars(2f32.powi(-6), -1.0);
            for act in [Activation::Identity, Activation::Silu] {
                let e = Epilogue::bias().with_activation(act).with_f32_bias();
                let g = match name {
                    Some(name) => Gemm::<T, T, T>::with_kernel(ctx, &p, name),
                    None => Gemm::<T, T, T>::new(ctx, &p),
                }
                .unwrap()
                .with_epilogue(e)
                .unwrap();
                assert_eq!(g.is_gemv(), name.is_none(), "{}", g.kernel_name());
                assert!(!g.epilogue_is_separate());
                let (ga, gb, gc, gd) = (
                    g.operand(OperandName::A),
                    g.operand(OperandName::B),
                    g.operand(OperandName::C),
                    g.operand(OperandName::D),
                );
                let a: Vec<T> = random(rng, &ga, 1.0);
                let b: Vec<T> = random(rng, &gb, 1.0);
                let bias: Vec<f32> = (0..n)
                    .map(|_| 300.0 + rng.random_range(0.0f32..1.0))
                    .collect();
                // C = the bias rounded to T, in every row.
                let mut c = vec![T::POISON; gc.required_len()];
                for i in 0..m {
                    for j in 0..n {
                        c[gc.offset(0, i, j)] = T::from_f64(bias[j] as f64);
                    }
                }
                // What the test can tell apart: the bias's part below T's step at 300.
                let dropped = bias
                    .iter()
                    .map(|&x| (x as f64 - T::from_f64(x as f64).to_f64()).abs())
                    .fold(0.0, f64::max);
                assert!(dropped > 0.1, "{dropped}");
                let (da, db, dc) = (
                    stream.clone_htod(&a).unwrap(),
                    stream.clone_htod(&b).unwrap(),
                    stream.clone_htod(&c).unwrap(),
                );
                let dbias = stream.clone_htod(&bias).unwrap();
                let mut dd: CudaSlice<T> = stream
                    .clone_htod(&vec![T::POISON; gd.required_len()])
                    .unwrap();
                g.run_fused(
                    stream,
                    &da,
                    &db,
                    Some(&dc),
                    &mut dd,
                    &EpilogueOperands::bias_f32(&dbias),
                    Workspace::Managed,
                )
                .unwrap_or_else(|err| panic!("{}: {err}", g.kernel_name()));
                let d = stream.clone_dtoh(&dd).unwrap();
                let bias64: Vec<f64> = bias.iter().map(|&x| x as f64).collect();
                let host = HostEpilogue {
                    activation: act,
                    bias: Some((BiasAxis::PerColumn, &bias64[..])),
                    ..Default::default()
                };
                let sa = Strided::new(&a, ga, OperandName::A).unwrap();
                let sb = Strided::new(&b, gb, OperandName::B).unwrap();
                let sc = Strided::new(&c, gc, OperandName::C).unwrap();
                let r =
                    reference::fused(&p, &sa, &sb, Some(&sc as &dyn reference::HostMatrix), &host)
                        .unwrap();
                let cmp = reference::compare(&d, &gd, &r);
                assert!(cmp.passed(), "{} {act}: {cmp:?}", g.kernel_name());
                runs += 1;
            }
        }
        runs
    }
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let runs = each::<bf16>(&ctx, &stream, &mut rng) + each::<f16>(&ctx, &stream, &mut rng);
    println!("f32 bias before rounding: {runs} runs");
    assert!(runs >= 4, "{runs}");
}

/// The library's choice with an f32 bias on each path it has: the decode GEMV, an f32-bias kernel
/// where one is built (else the separate pass), the separate pass where no f32-bias kernel takes
/// the layouts (A column-major), and a column-major D (an f32-bias kernel swapped, or NoKernel
/// naming one where none is built); against the reference, with C and without.
#[test]
#[ignore = "needs a CUDA GPU"]
fn f32_bias_on_every_path() {
    fn each<T: Element>(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        rng: &mut StdRng,
    ) -> [usize; 3] {
        let built = cutlass_gemm::built_kernels().iter().any(|k| {
            k.spec.fusion.bias_type() == Some(DataType::F32) && k.spec.a.ty == T::DATA_TYPE
        });
        let e = Epilogue::bias()
            .with_activation(Activation::GeluTanh)
            .with_f32_bias();
        let mut paths = [0; 3];
        for p in [
            GemmProblem::new(4, 272, 576),
            GemmProblem::new(300, 392, 256),
            GemmProblem::new(300, 392, 256).with_a(MatrixLayout::col_major()),
            GemmProblem::new(96, 392, 256)
                .with_d(MatrixLayout::col_major())
                .with_c(MatrixLayout::col_major()),
        ] {
            for with_c in [false, true] {
                let p = p.with_scalars(0.75, if with_c { 0.5 } else { 0.0 });
                let g = match Gemm::<T, T, T>::new(ctx, &p).unwrap().with_epilogue(e) {
                    Ok(g) => g,
                    // Without an f32-bias kernel a column-major D (no separate pass) is refused,
                    // naming one.
                    Err(Error::NoKernel {
                        build_with: cutlass_gemm::BuildHint::Kernels(name),
                        ..
                    }) if !built && p.d.layout == Layout::ColumnMajor => {
                        assert!(name.contains("_evt_scale_biasf32_act"), "{name}");
                        continue;
                    }
                    Err(err) => panic!("{p:?}: {err}"),
                };
                if p.a.layout == Layout::ColumnMajor {
                    assert!(g.epilogue_is_separate(), "{}", g.kernel_name());
                } else if p.m > 16 && built {
                    assert_eq!(g.kernel_spec().fusion.bias_type(), Some(DataType::F32));
                }
                let path = if g.is_gemv() {
                    0
                } else if g.epilogue_is_separate() {
                    1
                } else {
                    2
                };
                paths[path] += 1;
                run_fused(stream, rng, &g, with_c, 1.0, None);
            }
        }
        paths
    }
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    for paths in [
        each::<bf16>(&ctx, &stream, &mut rng),
        each::<f16>(&ctx, &stream, &mut rng),
    ] {
        println!("f32 bias: {paths:?} runs on the GEMV, the separate pass, an f32-bias kernel");
        assert!(paths[0] >= 2 && paths[1] >= 2, "{paths:?}");
    }
}

/// An f32 bias is checked like the others, and by its type: a plan with an f32 bias takes
/// `EpilogueOperands::bias_f32` and refuses a bias of D's type, and the other way round.
#[test]
#[ignore = "needs a CUDA GPU"]
fn f32_bias_operands_are_checked() {
    let (ctx, stream) = gemm_device();
    let p = GemmProblem::new(128, 256, 64);
    let plan = |e: Epilogue| {
        Gemm::<bf16, bf16, bf16>::new(&ctx, &p)
            .unwrap()
            .with_epilogue(e)
            .unwrap()
    };
    let (f32_plan, d_typed_plan) = (
        plan(Epilogue::bias().with_f32_bias()),
        plan(Epilogue::bias()),
    );
    let a = stream.alloc_zeros::<bf16>(128 * 64).unwrap();
    let b = stream.alloc_zeros::<bf16>(256 * 64).unwrap();
    let mut d = stream.alloc_zeros::<bf16>(128 * 256).unwrap();
    let bias16 = stream.alloc_zeros::<bf16>(256).unwrap();
    let bias32 = stream.alloc_zeros::<f32>(256 + 4).unwrap();
    let run =
        |g: &Gemm<bf16, bf16, bf16>, ops: &EpilogueOperands<'_, bf16>, d: &mut CudaSlice<bf16>| {
            g.run_fused(&stream, &a, &b, None, d, ops, Workspace::Managed)
        };
    let element = |r: cutlass_gemm::Result<()>| match r {
        Err(Error::InvalidProblem {
            reason: ProblemRule::BiasElement { plan, given },
        }) => (plan, given),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        element(run(&f32_plan, &EpilogueOperands::bias(&bias16), &mut d)),
        (DataType::F32, DataType::Bf16)
    );
    assert_eq!(
        element(run(
            &d_typed_plan,
            &EpilogueOperands::bias_f32(&bias32),
            &mut d
        )),
        (DataType::Bf16, DataType::F32)
    );
    let both = EpilogueOperands {
        bias: Some(&bias16),
        bias_f32: Some(&bias32),
        row_scales: None,
        col_scales: None,
    };
    assert!(matches!(
        run(&f32_plan, &both, &mut d).unwrap_err(),
        Error::InvalidProblem {
            reason: ProblemRule::BiasGivenTwice
        }
    ));
    let short = bias32.slice(0..255);
    assert!(matches!(
        run(&f32_plan, &EpilogueOperands::bias_f32(&short), &mut d).unwrap_err(),
        Error::BufferTooSmall {
            operand: OperandName::Bias,
            ..
        }
    ));
    let misaligned = bias32.slice(1..257);
    assert!(matches!(
        run(&f32_plan, &EpilogueOperands::bias_f32(&misaligned), &mut d).unwrap_err(),
        Error::Misaligned {
            operand: OperandName::Bias,
            ..
        }
    ));
    run(&f32_plan, &EpilogueOperands::bias_f32(&bias32), &mut d).unwrap();
    stream.synchronize().unwrap();
}
