//! The epilogue with an auxiliary output (`Epilogue::with_aux_output`: D = act(Z) and Aux = Z, with
//! Z = alpha·A·B + beta·C + bias): every aux kernel of the build, every activation, with and
//! without bias and C, batched, and through the library's choice; D and Aux each element by
//! element against the f64 reference (`reference::fused`, with the activation for D and without
//! it for Aux); and the launch-time checks of Aux.

use crate::common::*;

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use cutlass_gemm::reference::{self, HostEpilogue, Strided};
use cutlass_gemm::{
    Activation, Element, Epilogue, EpilogueOperands, Error, Gemm, GemmProblem, MatrixLayout,
    OperandName, ProblemRule, Workspace,
};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::Rng;

fn random<T: Element>(rng: &mut StdRng, g: &cutlass_gemm::ResolvedMatrix) -> Vec<T> {
    let mut v = vec![T::POISON; g.required_len()];
    for l in 0..g.batch {
        for i in 0..g.rows {
            for j in 0..g.cols {
                v[g.offset(l, i, j)] = T::from_f64(rng.random_range(-1.0..1.0));
            }
        }
    }
    v
}

/// Runs `g` (planned with an aux epilogue) on random operands; checks D and Aux against the
/// reference and that neither writes outside its m x n extent. Returns the worst error/bound.
fn run_aux<T: Element>(
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    g: &Gemm<T, T, T>,
    with_c: bool,
) -> f64 {
    let p = *g.problem();
    let e = g.epilogue();
    assert!(e.aux_output);
    assert!(
        g.kernel_spec().fusion.has_aux(),
        "{}: {}",
        g.kernel_name(),
        e.describe()
    );
    let [ga, gb, gc, gd] = [
        OperandName::A,
        OperandName::B,
        OperandName::C,
        OperandName::D,
    ]
    .map(|o| g.operand(o));
    let a: Vec<T> = random(rng, &ga);
    let b: Vec<T> = random(rng, &gb);
    let c: Vec<T> = random(rng, &gc);
    let bias: Vec<T> = (0..if e.bias.is_some() { p.n } else { 0 })
        .map(|_| T::from_f64(rng.random_range(-2.0..2.0)))
        .collect();
    let (da, db, dc, dbias) = (
        stream.clone_htod(&a).unwrap(),
        stream.clone_htod(&b).unwrap(),
        stream.clone_htod(&c).unwrap(),
        stream.clone_htod(&bias).unwrap(),
    );
    let poison = vec![T::POISON; gd.required_len()];
    let mut dd: CudaSlice<T> = stream.clone_htod(&poison).unwrap();
    let mut daux: CudaSlice<T> = stream.clone_htod(&poison).unwrap();
    let ops = EpilogueOperands {
        bias: e.bias.map(|_| &dbias as &dyn DevicePtr<T>),
        ..Default::default()
    };
    let c_arg: Option<&dyn DevicePtr<T>> = if with_c { Some(&dc) } else { None };
    g.run_with_aux(
        stream,
        &da,
        &db,
        c_arg,
        &mut dd,
        &mut daux,
        &ops,
        Workspace::Managed,
    )
    .unwrap_or_else(|err| panic!("{} {}: {err}", g.kernel_name(), e.describe()));
    let d = stream.clone_dtoh(&dd).unwrap();
    let aux = stream.clone_dtoh(&daux).unwrap();
    let bias64: Vec<f64> = bias.iter().map(|x| x.to_f64()).collect();
    let host = HostEpilogue {
        activation: e.activation,
        bias: e.bias.map(|axis| (axis, &bias64[..])),
        ..Default::default()
    };
    let sa = Strided::new(&a, ga, OperandName::A).unwrap();
    let sb = Strided::new(&b, gb, OperandName::B).unwrap();
    let sc = Strided::new(&c, gc, OperandName::C).unwrap();
    let c_ref = with_c.then_some(&sc as &dyn reference::HostMatrix);
    let want_d = reference::fused(&p, &sa, &sb, c_ref, &host).unwrap();
    let want_aux = reference::fused(
        &p,
        &sa,
        &sb,
        c_ref,
        &HostEpilogue {
            activation: Activation::Identity,
            ..host
        },
    )
    .unwrap();
    let what = format!("{} {p:?} {}", g.kernel_name(), e.describe());
    let cmp_d = reference::compare(&d, &gd, &want_d);
    assert!(cmp_d.passed(), "{what}: D {cmp_d:?}");
    let cmp_aux = reference::compare(&aux, &gd, &want_aux);
    assert!(cmp_aux.passed(), "{what}: Aux {cmp_aux:?}");
    // Nothing outside the m x n extent (the padding of a leading dimension, between batches)
    // was written.
    for (name, out) in [("D", &d), ("Aux", &aux)] {
        let mut inside = vec![false; gd.required_len()];
        for l in 0..p.batch {
            for i in 0..p.m {
                for j in 0..p.n {
                    inside[gd.offset(l, i, j)] = true;
                }
            }
        }
        let stray = (0..out.len())
            .filter(|&x| !inside[x] && out[x].to_bits_u64() != T::POISON.to_bits_u64())
            .count();
        assert_eq!(stray, 0, "{what}: {name} written outside its extent");
    }
    cmp_d.max_error_ratio.max(cmp_aux.max_error_ratio)
}

/// Every aux kernel of the build for T: every activation with a bias, none without, C, batches
/// and a leading dimension wider than n, and more tiles than SMs.
fn every_aux_kernel<T: Element>(ctx: &Arc<CudaContext>, stream: &Arc<CudaStream>) -> usize {
    let mut rng = rng();
    let (mut runs, mut worst) = (0, 0.0f64);
    for k in cutlass_gemm::built_kernels()
        .iter()
        .filter(|k| k.spec.fusion.has_aux() && k.spec.d.ty == T::DATA_TYPE)
    {
        let mut cases: Vec<(GemmProblem, Epilogue, bool)> = Activation::ALL
            .iter()
            .map(|&act| {
                (
                    GemmProblem::new(301, 392, 200).with_scalars(0.75, 0.0),
                    Epilogue::bias().with_activation(act),
                    false,
                )
            })
            .collect();
        cases.push((
            GemmProblem::new(301, 392, 200).with_scalars(0.75, 0.5),
            Epilogue::bias().with_activation(Activation::GeluTanh),
            true,
        ));
        cases.push((
            GemmProblem::new(77, 136, 64).with_scalars(1.0, 0.0),
            Epilogue::NONE.with_activation(Activation::GeluErf),
            false,
        ));
        // Two matrices, D (and Aux) with rows 8 elements wider than n.
        cases.push((
            GemmProblem::new(130, 264, 96)
                .with_batch(2)
                .with_d(MatrixLayout::row_major().with_ld(272))
                .with_c(MatrixLayout::row_major().with_ld(272))
                .with_scalars(0.5, 1.0),
            Epilogue::bias().with_activation(Activation::Silu),
            true,
        ));
        if !quick() {
            cases.push((
                GemmProblem::new(2304, 2048, 64),
                Epilogue::bias().with_activation(Activation::GeluTanh),
                false,
            ));
        }
        for (p, e, with_c) in cases {
            let g = Gemm::<T, T, T>::with_kernel_and_epilogue(ctx, &p, k.name, e.with_aux_output())
                .unwrap_or_else(|err| panic!("{} {p:?}: {err}", k.name));
            assert_eq!(g.kernel_name(), k.name, "the pinned kernel stays");
            worst = worst.max(run_aux(stream, &mut rng, &g, with_c));
            runs += 1;
        }
    }
    println!(
        "{}: {runs} aux runs, worst error/bound {worst:.3}",
        T::DATA_TYPE
    );
    runs
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bf16_aux_output_on_every_kernel() {
    let (ctx, stream) = gemm_device();
    // The default build's three bf16 aux kernels at least.
    let runs = every_aux_kernel::<bf16>(&ctx, &stream);
    assert!(runs >= 3 * 7, "{runs}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_aux_output_on_every_kernel() {
    let (ctx, stream) = gemm_device();
    // The gpu-tests preset's three f16 aux kernels (not in the default build).
    let runs = every_aux_kernel::<f16>(&ctx, &stream);
    assert!(runs >= 3 * 7, "{runs}");
}

/// The library's choice: an MLP's up projection with GELU at several token counts.
#[test]
#[ignore = "needs a CUDA GPU"]
fn aux_output_with_the_libraries_choice() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    for (m, n, k) in [
        (16, 3072, 768),
        (512, 4096, 1024),
        (4096, 3072, 768),
        (1000, 1000, 512),
    ] {
        let p = GemmProblem::new(m, n, k).with_b(MatrixLayout::col_major());
        let g = Gemm::<bf16, bf16, bf16>::new(&ctx, &p)
            .unwrap()
            .with_epilogue(
                Epilogue::bias()
                    .with_activation(Activation::GeluTanh)
                    .with_aux_output(),
            )
            .unwrap_or_else(|err| panic!("{p:?}: {err}"));
        run_aux(&stream, &mut rng, &g, false);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn aux_operand_is_checked() {
    let (ctx, stream) = gemm_device();
    let p = GemmProblem::new(128, 256, 64).with_b(MatrixLayout::col_major());
    let e = Epilogue::bias().with_activation(Activation::GeluTanh);
    let g = Gemm::<bf16, bf16, bf16>::new(&ctx, &p)
        .unwrap()
        .with_epilogue(e.with_aux_output())
        .unwrap();
    let a = stream.alloc_zeros::<bf16>(128 * 64).unwrap();
    let b = stream.alloc_zeros::<bf16>(256 * 64).unwrap();
    let mut d = stream.alloc_zeros::<bf16>(128 * 256).unwrap();
    let mut aux = stream.alloc_zeros::<bf16>(128 * 256 + 8).unwrap();
    let bias = stream.alloc_zeros::<bf16>(256).unwrap();
    let ops = EpilogueOperands::bias(&bias);
    // Without Aux: run_fused is refused, naming it.
    assert!(matches!(
        g.run_fused(&stream, &a, &b, None, &mut d, &ops, Workspace::Managed)
            .unwrap_err(),
        Error::InvalidProblem {
            reason: ProblemRule::EpilogueOperandMissing {
                operand: OperandName::Aux
            }
        }
    ));
    // Short, misaligned.
    let mut short = aux.slice_mut(0..128 * 256 - 1);
    assert!(matches!(
        g.run_with_aux(
            &stream,
            &a,
            &b,
            None,
            &mut d,
            &mut short,
            &ops,
            Workspace::Managed
        )
        .unwrap_err(),
        Error::BufferTooSmall {
            operand: OperandName::Aux,
            ..
        }
    ));
    let mut misaligned = aux.slice_mut(1..128 * 256 + 1);
    assert!(matches!(
        g.run_with_aux(
            &stream,
            &a,
            &b,
            None,
            &mut d,
            &mut misaligned,
            &ops,
            Workspace::Managed
        )
        .unwrap_err(),
        Error::Misaligned {
            operand: OperandName::Aux,
            ..
        }
    ));
    // Aux over D (safe Rust cannot alias two mutable buffers: a second handle to D's memory,
    // which the check refuses before any launch).
    let d_ptr = {
        let (p, _guard) = d.device_ptr(&stream);
        p
    };
    // SAFETY: the handle is leaked below, never freed; nothing is launched on it.
    let mut over = unsafe { stream.upgrade_device_ptr::<bf16>(d_ptr, 128 * 256) };
    let aliased = g.run_with_aux(
        &stream,
        &a,
        &b,
        None,
        &mut d,
        &mut over,
        &ops,
        Workspace::Managed,
    );
    over.leak();
    assert!(
        matches!(
            aliased,
            Err(Error::Aliasing {
                output: OperandName::Aux,
                input: OperandName::D
            })
        ),
        "{aliased:?}"
    );
    // A plan without the aux output takes none.
    let plain = Gemm::<bf16, bf16, bf16>::new(&ctx, &p)
        .unwrap()
        .with_epilogue(e)
        .unwrap();
    assert!(matches!(
        plain
            .run_with_aux(
                &stream,
                &a,
                &b,
                None,
                &mut d,
                &mut aux,
                &ops,
                Workspace::Managed
            )
            .unwrap_err(),
        Error::InvalidProblem {
            reason: ProblemRule::EpilogueOperandNotTaken {
                operand: OperandName::Aux
            }
        }
    ));
}
