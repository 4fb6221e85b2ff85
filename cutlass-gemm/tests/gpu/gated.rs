//! Gated GEMMs (SwiGLU, GeGLU, ReGLU in the epilogue) on every gated kernel of the build, element
//! by element against the f64 host reference (`reference::gated`, whose bound carries the
//! activation's error through the product), the weight interleaved by `interleave_gate_up` from
//! two separate weights (bf16, f16, and e4m3 inputs with a bf16 output, whose tensor-wise scale
//! is alpha and rowwise scales the epilogue's); and the launch-time checks.

use crate::common::*;

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use cutlass_gemm::numeric::E4M3;
use cutlass_gemm::reference::{self, HostEpilogue, Strided};
use cutlass_gemm::{
    interleave_gate_up, Activation, BiasAxis, Element, Epilogue, EpilogueOperands, Error,
    GatedGemm, GemmProblem, OperandName, ProblemRule, Workspace,
};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::Rng;

fn random<T: Element>(rng: &mut StdRng, len: usize, scale: f64) -> Vec<T> {
    (0..len)
        .map(|_| T::from_f64(rng.random_range(-scale..scale)))
        .collect()
}

/// Runs the plan on random operands (the gate and up weights separate, interleaved on the host)
/// and compares with the reference; returns the worst error over its bound.
fn run_gated<T: Element, O: Element>(
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    g: &GatedGemm<T, O>,
) -> f64 {
    let p = *g.problem();
    let e = g.epilogue();
    let (m, n, k) = (p.m, p.n, p.k);
    // FP8 inputs are integers in [-3, 3]: every partial sum of a 128-deep k-block is exact in
    // Hopper's FP8 accumulator (about 14 bits; tests/gpu/fp8.rs), so the reference's f32
    // accumulation bound holds. Random FP8 values would need the accumulator's own bound.
    let inputs = |rng: &mut StdRng, len: usize| -> Vec<T> {
        if T::DATA_TYPE.bits() == 8 {
            (0..len)
                .map(|_| T::from_f64(rng.random_range(-3i32..=3) as f64))
                .collect()
        } else {
            random(rng, len, 1.0)
        }
    };
    let x: Vec<T> = inputs(rng, m * k);
    let gate: Vec<T> = inputs(rng, n * k);
    let up: Vec<T> = inputs(rng, n * k);
    let w = interleave_gate_up(&gate, &up, n, k).unwrap();
    let bias_gate: Vec<O> = random(rng, n, 2.0);
    let bias_up: Vec<O> = random(rng, n, 2.0);
    let bias = interleave_gate_up(&bias_gate, &bias_up, n, 1).unwrap();
    let rows: Vec<f32> = (0..m).map(|_| rng.random_range(0.25f32..2.0)).collect();
    let cols: Vec<f32> = (0..2 * n).map(|_| rng.random_range(0.25f32..2.0)).collect();
    let (dx, dw, dbias) = (
        stream.clone_htod(&x).unwrap(),
        stream.clone_htod(&w).unwrap(),
        stream.clone_htod(&bias).unwrap(),
    );
    let (drows, dcols) = (
        stream.clone_htod(&rows).unwrap(),
        stream.clone_htod(&cols).unwrap(),
    );
    let mut dd: CudaSlice<O> = stream.clone_htod(&vec![O::POISON; m * n]).unwrap();
    let ops = EpilogueOperands {
        bias: e.bias.map(|_| &dbias as &dyn DevicePtr<O>),
        bias_f32: None,
        row_scales: e.row_scales.then_some(&drows as &dyn DevicePtr<f32>),
        col_scales: e.col_scales.then_some(&dcols as &dyn DevicePtr<f32>),
    };
    g.run(&stream.clone(), &dx, &dw, &mut dd, &ops, Workspace::Managed)
        .unwrap_or_else(|err| panic!("{} {p:?} {}: {err}", g.kernel_name(), e.describe()));
    let d = stream.clone_dtoh(&dd).unwrap();
    let inner = GemmProblem { n: 2 * n, ..p };
    let sa = Strided::new(&x, inner.resolve(OperandName::A).unwrap(), OperandName::A).unwrap();
    let sb = Strided::new(&w, inner.resolve(OperandName::B).unwrap(), OperandName::B).unwrap();
    let bias64: Vec<f64> = bias.iter().map(|v| v.to_f64()).collect();
    let host = HostEpilogue {
        activation: e.activation,
        bias: e.bias.map(|_| (BiasAxis::PerColumn, &bias64[..])),
        row_scales: e.row_scales.then_some(&rows[..]),
        col_scales: e.col_scales.then_some(&cols[..]),
    };
    let r = reference::gated(&p, &sa, &sb, &host).unwrap();
    let cmp = reference::compare(&d, &p.resolve(OperandName::D).unwrap(), &r);
    assert!(
        cmp.passed(),
        "{} {p:?} {}: {cmp:?}",
        g.kernel_name(),
        e.describe()
    );
    cmp.max_error_ratio
}

/// Every gated kernel of the build for inputs T and output O: every activation, with and without
/// the bias and the scales, on shapes with an m off the tile, an n off the tile's half and a k off
/// the tile.
fn every_gated_kernel<T: Element, O: Element>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
) -> usize {
    let mut rng = rng();
    let mut runs = 0;
    let mut worst = 0.0f64;
    let kernels: Vec<_> = cutlass_gemm::built_kernels()
        .iter()
        .filter(|k| {
            k.spec.fusion.is_gated() && k.spec.a.ty == T::DATA_TYPE && k.spec.d.ty == O::DATA_TYPE
        })
        .collect();
    for k in kernels {
        let mut epilogues: Vec<Epilogue> = Activation::ALL
            .iter()
            .map(|&a| Epilogue::NONE.with_activation(a))
            .collect();
        epilogues.push(Epilogue::bias().with_activation(Activation::Silu));
        epilogues.push(
            Epilogue::rowwise()
                .with_bias(BiasAxis::PerColumn)
                .with_activation(Activation::GeluTanh),
        );
        if quick() {
            epilogues.truncate(2);
        }
        for (i, e) in epilogues.into_iter().enumerate() {
            let (m, n, kk) = [(301, 392, 208), (1, 64, 64), (130, 136, 4096)][i % 3];
            // FP8's integer inputs make sums of about 2·√k: a tensor-wise scale (a power of two,
            // exact) near 1 / (4·√k) brings the activations' inputs to where they differ.
            let alpha = if T::DATA_TYPE.bits() == 8 {
                (-(4.0 * (kk as f32).sqrt()).log2().round()).exp2()
            } else {
                0.75
            };
            let p = GemmProblem::new(m, n, kk).with_scalars(alpha, 0.0);
            let g = GatedGemm::<T, O>::plan(
                cutlass_gemm::DeviceInfo::query(ctx).unwrap(),
                &p,
                e.activation,
                Some(k.name),
            )
            .unwrap_or_else(|err| panic!("{} {p:?}: {err}", k.name))
            .with_epilogue(e)
            .unwrap();
            worst = worst.max(run_gated(stream, &mut rng, &g));
            runs += 1;
        }
    }
    println!(
        "{} -> {}: {runs} gated runs, worst error/bound {worst:.3}",
        T::DATA_TYPE,
        O::DATA_TYPE
    );
    runs
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bf16_gated_epilogues_on_every_kernel() {
    let (ctx, stream) = gemm_device();
    let runs = every_gated_kernel::<bf16, bf16>(&ctx, &stream);
    assert!(runs >= 3 * 2, "{runs}");
}

/// e4m3 activations and weights, bf16 out: the two gated kernels of the default set, with
/// alpha as the tensor-wise scale and the rowwise scales in the epilogue.
#[test]
#[ignore = "needs a CUDA GPU"]
fn e4m3_gated_epilogues_on_every_kernel() {
    let (ctx, stream) = gemm_device();
    let runs = every_gated_kernel::<E4M3, bf16>(&ctx, &stream);
    assert!(runs >= 2 * 2, "{runs}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_gated_epilogues_on_every_kernel() {
    let (ctx, stream) = gemm_device();
    let runs = every_gated_kernel::<f16, f16>(&ctx, &stream);
    assert!(runs >= 3 * 2, "{runs}");
}

/// The library's own choice on MLP shapes (Llama-3-8B's 14336 outputs at a few token counts),
/// against the reference on a sample of rows (the whole reference would take minutes).
#[test]
#[ignore = "needs a CUDA GPU"]
fn gated_mlp_shapes_with_the_libraries_choice() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    for (m, n, k) in [(16, 1024, 512), (512, 2048, 1024), (2048, 512, 256)] {
        let p = GemmProblem::new(m, n, k);
        let g = GatedGemm::<bf16>::new(&ctx, &p, Activation::Silu).unwrap();
        println!("{m} x {n} x {k}: {}", g.kernel_name());
        run_gated(&stream, &mut rng, &g);
    }
}

/// The launch checks: short buffers, D overlapping the weight, a missing bias, a misaligned
/// pointer.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gated_operands_are_checked() {
    let (ctx, stream) = gemm_device();
    let p = GemmProblem::new(64, 128, 64);
    let g = GatedGemm::<bf16>::new(&ctx, &p, Activation::Silu)
        .unwrap()
        .with_epilogue(Epilogue::bias().with_activation(Activation::Silu))
        .unwrap();
    let x = stream.alloc_zeros::<bf16>(64 * 64).unwrap();
    let w = stream.alloc_zeros::<bf16>(256 * 64).unwrap();
    let mut d = stream.alloc_zeros::<bf16>(64 * 128 + 8).unwrap();
    let bias = stream.alloc_zeros::<bf16>(256).unwrap();
    let short = stream.alloc_zeros::<bf16>(64 * 128 - 1).unwrap();
    let with_bias = EpilogueOperands::bias(&bias);
    let err = g
        .run(
            &stream,
            &x,
            &w,
            &mut d,
            &EpilogueOperands::default(),
            Workspace::Managed,
        )
        .unwrap_err();
    assert!(matches!(
        err,
        Error::InvalidProblem {
            reason: ProblemRule::EpilogueOperandMissing {
                operand: OperandName::Bias
            }
        }
    ));
    let mut short = short;
    let err = g
        .run(&stream, &x, &w, &mut short, &with_bias, Workspace::Managed)
        .unwrap_err();
    assert!(matches!(
        err,
        Error::BufferTooSmall {
            operand: OperandName::D,
            ..
        }
    ));
    let err = g
        .run(
            &stream,
            &x,
            &w.slice(8..),
            &mut d,
            &with_bias,
            Workspace::Managed,
        )
        .unwrap_err();
    assert!(matches!(
        err,
        Error::BufferTooSmall {
            operand: OperandName::B,
            ..
        }
    ));
    let mut d_off = d.slice_mut(1..);
    let err = g
        .run(&stream, &x, &w, &mut d_off, &with_bias, Workspace::Managed)
        .unwrap_err();
    assert!(matches!(
        err,
        Error::Misaligned {
            operand: OperandName::D,
            ..
        }
    ));
    g.run(&stream, &x, &w, &mut d, &with_bias, Workspace::Managed)
        .unwrap();
}
