//! Numerics at the edges, against the f64 reference with IEEE semantics: NaN and ±Inf in A, B and
//! C propagate (NaN·x, Inf·0 and Inf − Inf give NaN; Inf·x gives a signed Inf); a sum past the f32
//! accumulator's range, or past D's type on the final conversion, gives ±Inf (no saturation for
//! floating-point D); subnormal inputs and results are kept, not flushed; beta = 0 reads no C, so
//! a NaN there does not reach D (BLAS's rule). FP8 inputs: the saturation points (±448 for e4m3),
//! subnormals (2^-9) and NaN. Non-finite alpha or beta is refused before any launch
//! (`ProblemRule::NonFiniteScalars`, tests/validation.rs). Every SM90 kernel of the build for
//! the element type runs the same operands.

use crate::common::*;

use std::sync::Arc;

use cudarc::driver::CudaStream;
use cutlass_gemm::numeric::E4M3;
use cutlass_gemm::{
    built_kernels, reference, Arch, Element, Gemm, GemmProblem, OperandName, Workspace,
};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::Rng;

#[derive(Debug, PartialEq, Eq)]
enum Class {
    Nan,
    Inf(bool),
    Finite,
}

fn class(v: f64) -> Class {
    if v.is_nan() {
        Class::Nan
    } else if v.is_infinite() {
        Class::Inf(v > 0.0)
    } else {
        Class::Finite
    }
}

/// Checks D (row-major m x n) against the reference: the same class (NaN, +Inf, -Inf, finite) for
/// every element, the reference's bound for the finite ones, and the listed elements bit for bit.
fn check<TD: Element>(
    what: &str,
    d: &[TD],
    r: &reference::Reference,
    exact: &[(usize, usize)],
) -> (usize, usize) {
    let (m, n, k, _) = r.shape;
    let (mut specials, mut finite) = (0, 0);
    for i in 0..m {
        for j in 0..n {
            let want = TD::from_f64(r.value[i * n + j]).to_f64();
            let got = d[i * n + j].to_f64();
            assert_eq!(
                class(got),
                class(want),
                "{what}: D[{i}][{j}] = {got}, reference {want}"
            );
            if class(want) == Class::Finite {
                let bound = reference::tolerance::<TD>(want, r.magnitude[i * n + j], k);
                assert!(
                    (got - want).abs() <= bound,
                    "{what}: D[{i}][{j}] = {got}, reference {want}, bound {bound}"
                );
                finite += 1;
            } else {
                specials += 1;
            }
        }
    }
    for &(i, j) in exact {
        let want = TD::from_f64(r.value[i * n + j]);
        assert_eq!(
            d[i * n + j].to_bits_u64(),
            want.to_bits_u64(),
            "{what}: D[{i}][{j}] = {:e}, want {:e} exactly",
            d[i * n + j].to_f64(),
            want.to_f64()
        );
    }
    (specials, finite)
}

/// The special values of one 16-bit test: A (m x k) and B (n x k), both K-major (TN), and the
/// elements whose value is known exactly.
struct Specials<T> {
    a: Vec<T>,
    b: Vec<T>,
    exact: Vec<(usize, usize)>,
}

const M: usize = 64;
const N: usize = 96;
const K: usize = 256;

fn specials<T: Element>(rng: &mut StdRng) -> Specials<T> {
    let mut a: Vec<f64> = (0..M * K).map(|_| rng.random_range(-1.0..1.0)).collect();
    let mut b: Vec<f64> = (0..N * K).map(|_| rng.random_range(-1.0..1.0)).collect();
    let big = if T::DATA_TYPE == cutlass_gemm::DataType::F16 {
        256.0 // 256 · 256 · 256 terms = 2^24 > f16's 65504: D's conversion overflows
    } else {
        2f64.powi(100) // 2^100 · 2^100 · 256 terms > f32's 2^128: the accumulator overflows
    };
    let tiny = if T::DATA_TYPE == cutlass_gemm::DataType::F16 {
        2f64.powi(-20) // an f16 subnormal (its smallest normal is 2^-14)
    } else {
        2f64.powi(-130) // a bf16 subnormal (its smallest normal is 2^-126)
    };
    a[3 * K + 5] = f64::NAN; // row 3 of D: NaN
    a[7 * K + 10] = f64::INFINITY; // row 7: ±Inf by the sign of B's column
    b[11 * K + 20] = f64::NEG_INFINITY; // column 11: ±Inf
    a[17 * K + 30] = f64::INFINITY; // row 17: Inf · 0 = NaN where B[j][30] is 0
    for j in (0..N).step_by(2) {
        b[j * K + 30] = 0.0;
    }
    a[19 * K + 40] = f64::INFINITY; // Inf − Inf = NaN at (19, 23)
    a[19 * K + 41] = f64::INFINITY;
    b[23 * K + 40] = 1.0;
    b[23 * K + 41] = -1.0;
    for q in 0..K {
        a[29 * K + q] = big; // (29, 31): past the range
        b[31 * K + q] = big;
    }
    for q in 0..K {
        a[37 * K + q] = if q == 0 { tiny } else { 0.0 }; // row 37: subnormal products
        b[41 * K + q] = if q == 0 { 1.0 } else { 0.0 }; // (37, 41) = tiny exactly
    }
    let exact = vec![(37, 41), (29, 31)];
    Specials {
        a: a.into_iter().map(T::from_f64).collect(),
        b: b.into_iter().map(T::from_f64).collect(),
        exact,
    }
}

fn every_kernel_on_specials<T: Element, TD: Element>(stream: &Arc<CudaStream>, rng: &mut StdRng) {
    let ctx = stream.context();
    let s = specials::<T>(rng);
    let (da, db) = (
        stream.clone_htod(&s.a).unwrap(),
        stream.clone_htod(&s.b).unwrap(),
    );
    // C: NaN everywhere but where beta reads it: with beta = 0 it must not reach D; with beta = 1
    // the one NaN at (50, 60) must, and -Inf at (51, 61).
    let nan_c = vec![TD::from_f64(f64::NAN); M * N];
    let mut one_c = vec![TD::from_f64(0.5); M * N];
    one_c[50 * N + 60] = TD::from_f64(f64::NAN);
    one_c[51 * N + 61] = TD::from_f64(f64::NEG_INFINITY);
    let (dnan, done) = (
        stream.clone_htod(&nan_c).unwrap(),
        stream.clone_htod(&one_c).unwrap(),
    );
    let kernels: Vec<_> = built_kernels()
        .iter()
        .filter(|k| k.spec.arch == Arch::Sm90a)
        .filter(|k| k.spec.a.ty == T::DATA_TYPE && k.spec.b.ty == T::DATA_TYPE)
        .filter(|k| k.spec.d.ty == TD::DATA_TYPE && k.spec.blockwise.is_none())
        .map(|k| Some(k.name))
        .chain([None])
        .collect();
    let mut runs = 0;
    for name in &kernels {
        for beta in [0.0f32, 1.0] {
            let p = GemmProblem::new(M, N, K).with_scalars(1.0, beta);
            let g = match name {
                Some(n) => match Gemm::<T, T, TD>::with_kernel(ctx, &p, n) {
                    Ok(g) => g,
                    Err(_) => continue, // the kernel serves another layout of D
                },
                None => Gemm::<T, T, TD>::new(ctx, &p).unwrap(),
            };
            let c = if beta == 0.0 { &dnan } else { &done };
            let mut dd = stream.clone_htod(&vec![TD::POISON; M * N]).unwrap();
            g.run(stream, &da, &db, Some(c), &mut dd, Workspace::Managed)
                .unwrap_or_else(|e| panic!("{}: {e}", g.kernel_name()));
            let d = stream.clone_dtoh(&dd).unwrap();
            let host_c = if beta == 0.0 { &nan_c } else { &one_c };
            let r = reference::gemm(&p, &s.a, &s.b, Some(&host_c[..])).unwrap();
            let what = format!("{} beta {beta}", g.kernel_name());
            let (specials, _) = check(&what, &d, &r, &s.exact);
            assert!(specials >= 2 * N, "{what}: {specials} special elements");
            assert_eq!(g.operand(OperandName::D).ld, N);
            runs += 1;
        }
    }
    println!(
        "{} -> {}: {} plans on NaN, ±Inf, overflow, subnormal and C-NaN operands: classes, bounds and exact elements as the reference",
        T::DATA_TYPE,
        TD::DATA_TYPE,
        runs
    );
    assert!(runs >= 2);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn nan_inf_overflow_and_subnormals_in_16_bit_gemms() {
    let (_ctx, stream) = gemm_device();
    let mut rng = rng();
    every_kernel_on_specials::<bf16, bf16>(&stream, &mut rng);
    every_kernel_on_specials::<f16, f16>(&stream, &mut rng);
    every_kernel_on_specials::<bf16, f32>(&stream, &mut rng);
}

/// e4m3 x e4m3 -> bf16 at its edges: ±448 (the largest e4m3), 2^-9 (the smallest subnormal),
/// NaN; tensor-wise plans of every FP8 kernel of the build.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_saturation_points_subnormals_and_nan() {
    let (ctx, stream) = gemm_device();
    let (m, n, k) = (64, 64, 128);
    let mut a = vec![0.0f64; m * k];
    let mut b = vec![0.0f64; n * k];
    for q in 0..64 {
        a[q] = 448.0; // (0, 0) = 64 · 448² = 12 845 056 (exact in f32 and in bf16's rounding)
        b[q] = 448.0;
        a[k + q] = -448.0; // (1, 0) = −12 845 056
    }
    a[2 * k] = 2f64.powi(-9); // (2, 1) = 2^-18: a product of two subnormals
    b[k] = 2f64.powi(-9);
    a[3 * k + 7] = f64::NAN; // row 3: NaN
    for q in 0..k {
        a[4 * k + q] = if q % 2 == 0 { 1.0 } else { -0.5 }; // a finite row against all columns
        b[(n - 1) * k + q] = if q % 3 == 0 { 0.25 } else { 2.0 };
    }
    let ha: Vec<E4M3> = a.iter().map(|&v| E4M3::from_f64(v)).collect();
    let hb: Vec<E4M3> = b.iter().map(|&v| E4M3::from_f64(v)).collect();
    assert!(ha[3 * k + 7].to_f64().is_nan() && ha[0].to_f64() == 448.0);
    assert_eq!(ha[2 * k].to_f64(), 2f64.powi(-9));
    let (da, db) = (
        stream.clone_htod(&ha).unwrap(),
        stream.clone_htod(&hb).unwrap(),
    );
    let p = GemmProblem::new(m, n, k);
    let names: Vec<_> = built_kernels()
        .iter()
        .filter(|kn| kn.spec.arch == Arch::Sm90a)
        .filter(|kn| kn.spec.a.ty == E4M3::DATA_TYPE && kn.spec.b.ty == E4M3::DATA_TYPE)
        .filter(|kn| kn.spec.d.ty == bf16::DATA_TYPE && kn.spec.blockwise.is_none())
        .map(|kn| kn.name)
        .collect();
    let mut runs = 0;
    for name in &names {
        let Ok(g) = Gemm::<E4M3, E4M3, bf16>::with_kernel(&ctx, &p, name) else {
            continue;
        };
        let mut dd = stream.clone_htod(&vec![bf16::POISON; m * n]).unwrap();
        g.run(&stream, &da, &db, None, &mut dd, Workspace::Managed)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let d = stream.clone_dtoh(&dd).unwrap();
        let r = reference::gemm(&p, &ha, &hb, None::<&[bf16]>).unwrap();
        let (specials, _) = check(name, &d, &r, &[(0, 0), (1, 0), (2, 1)]);
        assert_eq!(specials, n, "{name}: row 3 NaN");
        runs += 1;
    }
    assert!(runs > 0, "no e4m3 -> bf16 kernel served the problem");
    println!("e4m3 -> bf16: {runs} kernels at ±448, 2^-9 subnormals and NaN: as the reference");
}
