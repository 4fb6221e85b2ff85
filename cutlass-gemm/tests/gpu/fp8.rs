//! FP8 GEMMs on a Hopper GPU against the f64 host reference, and the host paths of the SM100 and
//! SM120 kernels of this build.
//!
//! Every test here is `#[ignore = "needs a CUDA GPU"]`: CI (no GPU) lists them as ignored; on a GPU
//! machine run `cargo test --release --test gpu_fp8 -- --include-ignored`. A test asked to run
//! without a device fails. Each test runs every matching kernel of the build (build with
//! `CUTLASS_RS_KERNELS=default,...` to add more); it fails if the build has none.
//!
//! Tolerances, per format:
//! - *Exact inputs* (the main checks): A and B hold integers in [-3, 3] (exact in e4m3 and e5m2),
//!   C integers in [-8, 8], alpha, beta and blockwise scales powers of two. Every product is an
//!   integer of magnitude at most 9 and every partial sum inside one 128-deep k-block is at most
//!   1152 < 2^11, exact even in Hopper's FP8 wgmma accumulator (which keeps about 14 bits, see
//!   DeepSeek-V3 §3.3.2); the promoted f32 sums stay below 2^24 units of their resolution, so the
//!   whole computation is exact until D is rounded. The bound is one rounding of the output:
//!   `u_out * |ref|` (u = 2^-8 for bf16, 2^-11 for f16, 2^-24 for f32), plus the output's smallest
//!   subnormal step for results near zero.
//! - *Random values* (a sanity check of realistic data): FP8 values of random magnitude. Inside a
//!   k-block the accumulator keeps about 14 bits: a worst-case bound of 128 additions with
//!   relative error 2^-13 each is 2^-6 of the block's `sum |a b|`; across blocks f32 adds
//!   `2 k u_f32`; the output rounding adds `2 u_out |ref|`. Bound:
//!   `2 u_out |ref| + (2^-6 + 2 k 2^-24) * sum |alpha a b| + |beta c| u_f32`.

use crate::common::*;

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use cutlass_gemm::formats::scale_layout::{ScaleFactorLayout, ScaleMajor};
use cutlass_gemm::numeric::{E4M3, E5M2};
use cutlass_gemm::quantize::host;
use cutlass_gemm::quantize::{self, Fp8Block};
use cutlass_gemm::reference::{self, Reference};
use cutlass_gemm::{
    built_kernels, BlockwiseGemm, DataType, DeviceInfo, Element, Error, Fp8, Gemm, GemmProblem,
    KernelSchedule, Layout, MatrixLayout, OperandName, RawArgs, ScheduleHints, TileScheduler,
    Workspace,
};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::Rng;

/// Values for one operand: integers in [-r, r] (`exact`) or random magnitudes, NaN in the gaps.
fn matrix<T: Element>(
    rng: &mut StdRng,
    g: &cutlass_gemm::ResolvedMatrix,
    exact: bool,
    r: i32,
) -> Vec<T> {
    let mut v = vec![T::POISON; g.required_len()];
    for l in 0..g.batch {
        for i in 0..g.rows {
            for j in 0..g.cols {
                let x = if exact {
                    rng.random_range(-r..=r) as f64
                } else {
                    rng.random_range(-1.0..1.0) * 2f64.powi(rng.random_range(-4..=4))
                };
                v[g.offset(l, i, j)] = T::from_f64(x);
            }
        }
    }
    v
}

/// The larger of the output's rounding bound for exact inputs and its smallest step near zero.
fn exact_bound<TD: Element>(reference: f64) -> f64 {
    let tiny = match TD::DATA_TYPE {
        DataType::F16 => 6.0e-8,
        _ => 1.0e-40,
    };
    TD::UNIT_ROUNDOFF * reference.abs() + tiny
}

/// Compares D with the reference under `bound(ref, magnitude)`; returns the worst error / bound.
fn check<TD: Element>(
    what: &str,
    d: &[TD],
    gd: &cutlass_gemm::ResolvedMatrix,
    r: &Reference,
    bound: impl Fn(f64, f64) -> f64,
) -> f64 {
    let (m, n, _, batch) = r.shape;
    let mut worst = 0.0f64;
    let mut covered = vec![false; d.len()];
    for l in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let idx = (l * m + i) * n + j;
                let off = gd.offset(l, i, j);
                covered[off] = true;
                let (got, want) = (d[off].to_f64(), r.value[idx]);
                let b = bound(want, r.magnitude[idx]);
                let err = (got - want).abs();
                assert!(
                    err <= b,
                    "{what}: D[{l},{i},{j}] = {got}, reference {want}, bound {b}"
                );
                worst = worst.max(err / b);
            }
        }
    }
    for (idx, (v, cov)) in d.iter().zip(covered).enumerate() {
        if !cov {
            assert_eq!(
                v.to_bits_u64(),
                TD::POISON.to_bits_u64(),
                "{what}: stray write at {idx}"
            );
        }
    }
    worst
}

fn ml(l: Layout) -> MatrixLayout {
    match l {
        Layout::RowMajor => MatrixLayout::row_major(),
        Layout::ColumnMajor => MatrixLayout::col_major(),
    }
}

/// Non-tile-multiple shapes that keep 16-byte alignment: m in {40, 264, 1000}, n in {24, 520},
/// k in {16, 144, 1040} (k a multiple of 16 e4m3 elements; m and n multiples of 8 for a
/// 16-bit D in either order).
const MS: [usize; 3] = [40, 264, 1000];
const NS: [usize; 2] = [24, 520];
const KS: [usize; 3] = [16, 144, 1040];

/// The sweep's shapes: every m, n and k of MS, NS and KS (all multiples of 8 and of 16 for k).
fn sweep() -> Vec<(usize, usize, usize)> {
    let all: Vec<_> = MS
        .iter()
        .flat_map(|&m| {
            NS.iter()
                .flat_map(move |&n| KS.iter().map(move |&k| (m, n, k)))
        })
        .collect();
    if quick() {
        // One problem off every tile multiple.
        return vec![all[all.len() / 2]];
    }
    all
}

/// Shapes TMA cannot read in place (m odd, n and k off the 16-element alignment, a 2 x 2 x 2
/// product, a vocabulary-like n): served through padded copies in the workspace.
const ODD_SHAPES: [(usize, usize, usize); 5] = [
    (257, 1001, 1032),
    (2, 2, 2),
    (3, 5, 7),
    (1, 250, 130),
    (66, 4099, 264),
];

/// One tensor-wise FP8 kernel over the sweep, both D orders (TN is the only A/B layout Hopper's
/// wgmma reads for 8-bit operands), exact inputs, with and without C.
fn tensorwise<TA: Fp8, TB: Fp8, TD: Element>(
    name: &str,
    shapes: &[(usize, usize, usize)],
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
) -> usize {
    let ctx = stream.context();
    let mut runs = 0;
    let mut worst = 0.0f64;
    for &(m, n, k) in shapes {
        for d_layout in [Layout::RowMajor, Layout::ColumnMajor] {
            let with_c = (m + n + k) % 2 == 0;
            let p = GemmProblem::new(m, n, k)
                .with_c(ml(d_layout))
                .with_d(ml(d_layout))
                .with_scalars(0.5, if with_c { 0.25 } else { 0.0 })
                .with_tensor_scales(4.0, 0.5);
            // A column-major D is computed as Dᵀ = Bᵀ·Aᵀ, by the kernel with A's and B's
            // types exchanged: for a mixed pair that is another kernel, chosen by type.
            let mirrored = d_layout == Layout::ColumnMajor && TA::DATA_TYPE != TB::DATA_TYPE;
            let g = if mirrored {
                match Gemm::<TA, TB, TD>::new(ctx, &p) {
                    Ok(g) => g,
                    Err(Error::NoKernel { .. }) => {
                        println!("{name}: column-major D needs the {} x {} kernel, not in this build: not run", TB::DATA_TYPE, TA::DATA_TYPE);
                        continue;
                    }
                    Err(e) => panic!("{name} {p:?}: {e}"),
                }
            } else {
                Gemm::<TA, TB, TD>::with_kernel(ctx, &p, name)
                    .unwrap_or_else(|e| panic!("{name} {p:?}: {e}"))
            };
            let (ga, gb, gc, gd) = (
                g.operand(OperandName::A),
                g.operand(OperandName::B),
                g.operand(OperandName::C),
                g.operand(OperandName::D),
            );
            let a: Vec<TA> = matrix(rng, &ga, true, 3);
            let b: Vec<TB> = matrix(rng, &gb, true, 3);
            let c: Vec<TD> = matrix(rng, &gc, true, 8);
            let (da, db, dc) = (
                stream.clone_htod(&a).unwrap(),
                stream.clone_htod(&b).unwrap(),
                stream.clone_htod(&c).unwrap(),
            );
            let mut dd: CudaSlice<TD> = stream
                .clone_htod(&vec![TD::POISON; gd.required_len()])
                .unwrap();
            let c_arg: Option<&dyn DevicePtr<TD>> = if with_c { Some(&dc) } else { None };
            g.run(stream, &da, &db, c_arg, &mut dd, Workspace::Managed)
                .unwrap_or_else(|e| panic!("{name} {p:?}: {e}"));
            let d = stream.clone_dtoh(&dd).unwrap();
            let r = reference::gemm(&p, &a, &b, with_c.then_some(&c[..])).unwrap();
            let what = format!("{} m{m} n{n} k{k} D {d_layout:?}", g.kernel_name());
            worst = worst.max(check(&what, &d, &gd, &r, |v, _| exact_bound::<TD>(v)));
            runs += 1;
        }
    }
    // Random magnitudes, one shape, the loose bound.
    let p = GemmProblem::new(264, 520, 1040);
    let g = Gemm::<TA, TB, TD>::with_kernel(ctx, &p, name).unwrap();
    let (ga, gb, gd) = (
        g.operand(OperandName::A),
        g.operand(OperandName::B),
        g.operand(OperandName::D),
    );
    let a: Vec<TA> = matrix(rng, &ga, false, 0);
    let b: Vec<TB> = matrix(rng, &gb, false, 0);
    let (da, db) = (
        stream.clone_htod(&a).unwrap(),
        stream.clone_htod(&b).unwrap(),
    );
    let mut dd: CudaSlice<TD> = stream
        .clone_htod(&vec![TD::POISON; gd.required_len()])
        .unwrap();
    g.run(stream, &da, &db, None, &mut dd, Workspace::Managed)
        .unwrap();
    let d = stream.clone_dtoh(&dd).unwrap();
    let r = reference::gemm(&p, &a, &b, None::<&[TD]>).unwrap();
    let random = check(&format!("{name} random"), &d, &gd, &r, |v, mag| {
        loose_bound::<TD>(v, mag, 1040)
    });
    println!(
        "{name}: {runs} exact problems, worst error/bound {worst:.3}; random values {random:.4}"
    );
    runs + 1
}

/// Dispatches a built kernel to the generic test for its types.
macro_rules! for_types {
    ($spec:expr, $f:ident, $($args:expr),*) => {{
        use DataType::*;
        match ($spec.a.ty, $spec.b.ty, $spec.d.ty) {
            (E4M3, E4M3, Bf16) => $f::<E4M3T, E4M3T, bf16>($($args),*),
            (E4M3, E4M3, F16) => $f::<E4M3T, E4M3T, f16>($($args),*),
            (E4M3, E4M3, F32) => $f::<E4M3T, E4M3T, f32>($($args),*),
            (E4M3, E5M2, Bf16) => $f::<E4M3T, E5M2T, bf16>($($args),*),
            (E4M3, E5M2, F16) => $f::<E4M3T, E5M2T, f16>($($args),*),
            (E4M3, E5M2, F32) => $f::<E4M3T, E5M2T, f32>($($args),*),
            (E5M2, E4M3, Bf16) => $f::<E5M2T, E4M3T, bf16>($($args),*),
            (E5M2, E4M3, F16) => $f::<E5M2T, E4M3T, f16>($($args),*),
            (E5M2, E4M3, F32) => $f::<E5M2T, E4M3T, f32>($($args),*),
            (E5M2, E5M2, Bf16) => $f::<E5M2T, E5M2T, bf16>($($args),*),
            (E5M2, E5M2, F16) => $f::<E5M2T, E5M2T, f16>($($args),*),
            (E5M2, E5M2, F32) => $f::<E5M2T, E5M2T, f32>($($args),*),
            other => panic!("no test dispatch for {other:?}"),
        }
    }};
}
type E4M3T = E4M3;
type E5M2T = E5M2;

fn is_fp8(t: DataType) -> bool {
    matches!(t, DataType::E4M3 | DataType::E5M2)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_tensorwise_every_built_kernel_matches_the_reference() {
    let (_ctx, stream) = gemm_device();
    let mut rng = rng();
    let kernels: Vec<_> = built_kernels()
        .iter()
        .filter(|k| k.spec.arch == cutlass_gemm::Arch::Sm90a)
        .filter(|k| is_fp8(k.spec.a.ty) && k.spec.blockwise.is_none())
        // The gated kernels (D of half the GEMM's columns) are gated.rs's.
        .filter(|k| !k.spec.fusion.is_gated())
        .collect();
    assert!(!kernels.is_empty(), "this build has no SM90 FP8 kernel");
    let mut total = 0;
    for k in &kernels {
        total += for_types!(k.spec, tensorwise, k.name, &sweep(), &stream, &mut rng);
    }
    println!(
        "{} tensor-wise FP8 kernels, {total} problems",
        kernels.len()
    );
}

/// The CUTLASS schedule whose mainloop an overlapped-promotion schedule wraps.
fn twin_schedule(s: KernelSchedule) -> Option<KernelSchedule> {
    match s {
        KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap => {
            Some(KernelSchedule::TmaWarpSpecializedCooperative)
        }
        KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap => {
            Some(KernelSchedule::TmaWarpSpecializedPingpong)
        }
        KernelSchedule::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap => {
            Some(KernelSchedule::TmaWarpSpecializedCooperativeFp8Blockwise)
        }
        _ => None,
    }
}

/// This crate's overlapped-promotion FP8 kernels add the same k-tile partial sums, in the same
/// order, as CUTLASS's f32-promoting kernel of the same tile, cluster and scheduler (promotion once
/// per 128-deep k-tile): their outputs must be identical, bit for bit, on random data where the
/// FP8 accumulator rounds. Every overlapped kernel of the build is compared with its CUTLASS twin
/// when the build has it (the GPU-test build has the cooperative ones' twins, for bf16 outputs;
/// the pingpong tiles have no f32-promoting CUTLASS kernel in the catalog: the reference test
/// above checks them); the sliced wide-tile kernels with the 128x128 overlapped kernel.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_overlapped_promotion_matches_cutlass_bit_for_bit() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let built = built_kernels();
    let overlapped: Vec<_> = built
        .iter()
        .filter(|k| twin_schedule(k.spec.kernel_schedule).is_some())
        .collect();
    assert!(
        !overlapped.is_empty(),
        "this build has no overlapped-promotion FP8 kernel"
    );
    let mut compared = 0;
    for k in &overlapped {
        let mut twin_spec = k.spec;
        twin_spec.kernel_schedule = twin_schedule(k.spec.kernel_schedule).unwrap();
        // The sliced kernels (tile N > 144) have no CUTLASS twin that runs (CUTLASS's promoting
        // kernels of those tiles spill and are not in the catalog); slicing N changes only which
        // wgmma computes an element, so they must equal the 128x128 (1x2x1) overlapped kernel.
        let mut square = k.spec;
        square.tile = [128, 128, 128];
        square.cluster = [1, 2, 1];
        let twin = built.iter().find(|t| t.spec == twin_spec).or_else(|| {
            k.spec
                .uses_sliced_promotion()
                .then(|| built.iter().find(|t| t.spec == square))
                .flatten()
        });
        let Some(twin) = twin else {
            println!(
                "{}: its CUTLASS twin is not in this build: not compared",
                k.name
            );
            continue;
        };
        for (m, n, kk) in [(264, 520, 1040), (1000, 1032, 4096), (128, 4096, 7168)] {
            let p = GemmProblem::new(m, n, kk)
                .with_c(MatrixLayout::row_major())
                .with_scalars(0.5, 0.25);
            let blockwise = k.spec.blockwise.is_some();
            // Operands sized by the tensor-wise plan (the same matrices for both kinds).
            let g = Gemm::<E4M3, E4M3, bf16>::new(&ctx, &p).unwrap();
            let a: Vec<E4M3> = matrix(&mut rng, &g.operand(OperandName::A), false, 0);
            let b: Vec<E4M3> = matrix(&mut rng, &g.operand(OperandName::B), false, 0);
            let c: Vec<bf16> = matrix(&mut rng, &g.operand(OperandName::C), false, 0);
            // Blockwise scales of random magnitude: A's per row and 128 of K, B's per 128x128.
            let (kb, nb) = (kk.div_ceil(128), n.div_ceil(128));
            let mut scale = |len: usize| -> Vec<f32> {
                (0..len)
                    .map(|_| rng.random_range(0.5f32..2.0) * 2f32.powi(rng.random_range(-3..=3)))
                    .collect()
            };
            let (sa, sb) = (scale(kb * m), scale(kb * nb));
            let (da, db, dc) = (
                stream.clone_htod(&a).unwrap(),
                stream.clone_htod(&b).unwrap(),
                stream.clone_htod(&c).unwrap(),
            );
            let (dsa, dsb) = (
                stream.clone_htod(&sa).unwrap(),
                stream.clone_htod(&sb).unwrap(),
            );
            let run = |name: &str| -> Vec<bf16> {
                let fail = |e: Error| -> ! { panic!("{name} {m}x{n}x{kk}: {e}") };
                let mut dd: CudaSlice<bf16> = stream
                    .clone_htod(&vec![
                        bf16::POISON;
                        g.operand(OperandName::D).required_len()
                    ])
                    .unwrap();
                if blockwise {
                    let bg = BlockwiseGemm::<E4M3, E4M3, bf16>::with_kernel(&ctx, &p, name)
                        .unwrap_or_else(|e| fail(e));
                    assert_eq!(bg.scale_lens(), (sa.len(), sb.len()));
                    bg.run(
                        &stream,
                        &da,
                        &dsa,
                        &db,
                        &dsb,
                        Some(&dc),
                        &mut dd,
                        Workspace::Managed,
                    )
                    .unwrap_or_else(|e| fail(e));
                } else {
                    Gemm::<E4M3, E4M3, bf16>::with_kernel(&ctx, &p, name)
                        .unwrap_or_else(|e| fail(e))
                        .run(&stream, &da, &db, Some(&dc), &mut dd, Workspace::Managed)
                        .unwrap_or_else(|e| fail(e));
                }
                stream.clone_dtoh(&dd).unwrap()
            };
            let ours = run(k.name);
            let theirs = run(twin.name);
            let differ = ours
                .iter()
                .zip(&theirs)
                .filter(|(x, y)| x.to_bits() != y.to_bits())
                .count();
            assert_eq!(
                differ,
                0,
                "{} and {} differ in {differ} of {} outputs at {m}x{n}x{kk}",
                k.name,
                twin.name,
                ours.len()
            );
            compared += 1;
        }
        println!("{}: bit-identical to {} on 3 problems", k.name, twin.name);
    }
    println!(
        "{} overlapped-promotion kernels, {compared} problems compared bit for bit",
        overlapped.len()
    );
}

/// One blockwise kernel over the sweep (D row-major: blockwise plans take no other), with exact
/// inputs and power-of-two scales; `splits` > 0 plans split-K (stream-K kernels).
fn blockwise<TA: Fp8, TB: Fp8, TD: Element>(
    name: &str,
    shapes: &[(usize, usize, usize)],
    splits: u16,
    batches: &[usize],
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
) -> usize {
    let ctx = stream.context();
    let mut runs = 0;
    let mut worst = 0.0f64;
    for &(m, n, k) in shapes {
        for &batch in batches {
            let with_c = (m + n + k + batch) % 2 == 0;
            let p = GemmProblem::new(m, n, k)
                .with_batch(batch)
                .with_scalars(0.5, if with_c { 0.25 } else { 0.0 });
            let mut g = BlockwiseGemm::<TA, TB, TD>::with_kernel(ctx, &p, name)
                .unwrap_or_else(|e| panic!("{name} {p:?}: {e}"));
            if splits > 0 {
                g = g
                    .with_schedule(ScheduleHints {
                        splits,
                        ..Default::default()
                    })
                    .unwrap_or_else(|e| panic!("{name} {p:?} splits {splits}: {e}"));
            }
            let inner = g.plan_inner();
            let (ga, gb, gc, gd) = (
                inner.operand(OperandName::A),
                inner.operand(OperandName::B),
                inner.operand(OperandName::C),
                inner.operand(OperandName::D),
            );
            let a: Vec<TA> = matrix(rng, &ga, true, 3);
            let b: Vec<TB> = matrix(rng, &gb, true, 3);
            let c: Vec<TD> = matrix(rng, &gc, true, 8);
            let (kb, nb) = (k.div_ceil(128), n.div_ceil(128));
            // Scales in MN order, batch after batch: A's [l][kb][m], B's [l][kb][nb].
            let pow2 = |rng: &mut StdRng| 2f32.powi(rng.random_range(-2..=2));
            let sa: Vec<f32> = (0..batch * kb * m).map(|_| pow2(rng)).collect();
            let sb: Vec<f32> = (0..batch * kb * nb).map(|_| pow2(rng)).collect();
            assert_eq!(g.scale_lens(), (sa.len(), sb.len()));
            // The reference on dequantized operands.
            let a_deq: Vec<f64> = (0..a.len())
                .map(|i| {
                    let (l, rest) = (i / ga.batch_stride, i % ga.batch_stride);
                    let (row, col) = (rest / ga.ld, rest % ga.ld);
                    let s = sa[l * kb * m + (col / 128) * m + row] as f64;
                    a[i].to_f64() * s
                })
                .collect();
            let b_deq: Vec<f64> = (0..b.len())
                .map(|i| {
                    // B is column-major k x n: element (row = k index, col = n index).
                    let (l, rest) = (i / gb.batch_stride, i % gb.batch_stride);
                    let (col, row) = (rest / gb.ld, rest % gb.ld);
                    let s = sb[l * kb * nb + (row / 128) * nb + col / 128] as f64;
                    b[i].to_f64() * s
                })
                .collect();
            let (da, db, dc) = (
                stream.clone_htod(&a).unwrap(),
                stream.clone_htod(&b).unwrap(),
                stream.clone_htod(&c).unwrap(),
            );
            let (dsa, dsb) = (
                stream.clone_htod(&sa).unwrap(),
                stream.clone_htod(&sb).unwrap(),
            );
            let mut dd: CudaSlice<TD> = stream
                .clone_htod(&vec![TD::POISON; gd.required_len()])
                .unwrap();
            let c_arg: Option<&dyn DevicePtr<TD>> = if with_c { Some(&dc) } else { None };
            g.run(
                stream,
                &da,
                &dsa,
                &db,
                &dsb,
                c_arg,
                &mut dd,
                Workspace::Managed,
            )
            .unwrap_or_else(|e| panic!("{name} {p:?}: {e}"));
            let d = stream.clone_dtoh(&dd).unwrap();
            let r = reference::gemm(&p, &a_deq, &b_deq, with_c.then_some(&c[..])).unwrap();
            let what = format!("{name} m{m} n{n} k{k} batch {batch} splits {splits}");
            worst = worst.max(check(&what, &d, &gd, &r, |v, _| exact_bound::<TD>(v)));
            runs += 1;
        }
    }
    println!("{name} (splits {splits}): {runs} exact problems, worst error/bound {worst:.3}");
    runs
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_blockwise_every_built_kernel_matches_the_reference() {
    let (_ctx, stream) = gemm_device();
    let mut rng = rng();
    let kernels: Vec<_> = built_kernels()
        .iter()
        .filter(|k| k.spec.blockwise.is_some())
        .collect();
    assert!(!kernels.is_empty(), "this build has no blockwise kernel");
    let mut total = 0;
    for k in &kernels {
        total += for_types!(
            k.spec,
            blockwise,
            k.name,
            &sweep(),
            0,
            &[1, 2],
            &stream,
            &mut rng
        );
        // Stream-K: few output tiles over a long K, so that the K loop of a tile is shared out
        // (CUTLASS's stream-K decomposition, and split-K 2 and 3 with partial tiles reduced in
        // the workspace). The sums stay exact: |Σ| < 4096 · 9 · 16 · 2^4 < 2^24 units of 2^-4.
        if k.spec.tile_scheduler == TileScheduler::StreamK {
            for splits in [0, 2, 3] {
                total += for_types!(
                    k.spec,
                    blockwise,
                    k.name,
                    &LONG_K_SHAPES,
                    splits,
                    &[1, 2],
                    &stream,
                    &mut rng
                );
            }
        }
    }
    println!("{} blockwise FP8 kernels, {total} problems", kernels.len());
}

/// The FP8 blockwise decode GEMV, named, on exact inputs (sums exact in f32, so the result is the
/// reference's rounded once): 1 to 32 tokens (one to four groups of 8, m off a multiple of 4, of 8
/// and at each group's end), n of one 16-row slice, off a multiple of 128 (400) and of several
/// blocks, k of one chunk, of an odd number of 64-column chunks (192: the last k-block half full)
/// and long (4096), with and without C, bf16 and f16 D.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_blockwise_decode_gemv_matches_the_reference() {
    let (_ctx, stream) = gemm_device();
    let mut rng = rng();
    let ms: &[usize] = if quick() {
        &[1, 9, 32]
    } else {
        &[1, 3, 7, 8, 9, 16, 17, 24, 25, 32]
    };
    let shapes: Vec<(usize, usize, usize)> = ms
        .iter()
        .flat_map(|&m| [(m, 16, 64), (m, 400, 192), (m, 256, 4096)])
        .collect();
    let gemv = cutlass_gemm::BLOCKWISE_GEMV;
    let total = blockwise::<E4M3, E4M3, bf16>(gemv, &shapes, 0, &[1], &stream, &mut rng)
        + blockwise::<E4M3, E4M3, f16>(gemv, &shapes, 0, &[1], &stream, &mut rng);
    println!("the blockwise decode GEMV: {total} exact problems");
}

/// D (bf16, row-major, no C) of the blockwise GEMM planned with the kernel of this name (the
/// decode GEMV's name plans the GEMV, which the plan must then report).
fn run_blockwise_named(
    stream: &Arc<CudaStream>,
    p: &GemmProblem,
    name: &str,
    (a, sa): (&CudaSlice<E4M3>, &CudaSlice<f32>),
    (b, sb): (&CudaSlice<E4M3>, &CudaSlice<f32>),
) -> Vec<bf16> {
    let g = BlockwiseGemm::<E4M3, E4M3, bf16>::with_kernel(stream.context(), p, name).unwrap();
    assert_eq!(g.is_gemv(), name == cutlass_gemm::BLOCKWISE_GEMV);
    let mut dd = stream.alloc_zeros::<bf16>(p.m * p.n).unwrap();
    g.run(stream, a, sa, b, sb, None, &mut dd, Workspace::Managed)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    stream.clone_dtoh(&dd).unwrap()
}

/// A dense blockwise CUTLASS kernel of this build with a bf16 D and CUTLASS's epilogue.
fn plain_blockwise_kernel() -> &'static str {
    built_kernels()
        .iter()
        .find(|kn| {
            kn.spec.blockwise.is_some()
                && !kn.spec.kernel_schedule.is_grouped()
                && !kn.spec.fusion.is_fused()
                && kn.spec.d.ty == DataType::Bf16
        })
        .expect("a blockwise kernel")
        .name
}

/// Every finite e4m3 value through the decode GEMV and the CUTLASS kernel: X of subnormals only
/// against W = 1 (the sums exact: a flushed subnormal would show), then random finite bytes of
/// both with power-of-two scales against the f64 reference, the GEMV within the crate's bound
/// (f32 sums of exact products), the CUTLASS kernel within the module's bound for random values
/// (its wgmma keeps about 14 bits inside a k-block: it failed the crate's bound here by 10 %).
#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_blockwise_decode_gemv_reads_every_finite_e4m3_value() {
    let (_ctx, stream) = gemm_device();
    let mut rng = rng();
    let (m, n, k) = (5, 272, 640);
    let p = GemmProblem::new(m, n, k);
    let cutlass = plain_blockwise_kernel();
    let finite = |rng: &mut StdRng| loop {
        let b: u8 = rng.random();
        if b & 0x7F != 0x7F {
            return E4M3::from_bits(b);
        }
    };
    let subnormal =
        |rng: &mut StdRng| E4M3::from_bits(rng.random_range(1..=7u8) | (rng.random::<u8>() & 0x80));
    let (kb, nb) = (k.div_ceil(128), n.div_ceil(128));
    for case in ["subnormal X, W = 1", "every finite value"] {
        let (a, b, sa, sb): (Vec<E4M3>, Vec<E4M3>, Vec<f32>, Vec<f32>) = if case.starts_with("sub")
        {
            (
                (0..m * k).map(|_| subnormal(&mut rng)).collect(),
                vec![E4M3::from_f32(1.0); n * k],
                vec![1.0; kb * m],
                vec![1.0; kb * nb],
            )
        } else {
            (
                (0..m * k).map(|_| finite(&mut rng)).collect(),
                (0..n * k).map(|_| finite(&mut rng)).collect(),
                (0..kb * m)
                    .map(|_| 2f32.powi(rng.random_range(-8..=8)))
                    .collect(),
                (0..kb * nb)
                    .map(|_| 2f32.powi(rng.random_range(-8..=8)))
                    .collect(),
            )
        };
        let a_deq: Vec<f64> = (0..m * k)
            .map(|i| a[i].to_f64() * sa[(i % k / 128) * m + i / k] as f64)
            .collect();
        let b_deq: Vec<f64> = (0..n * k)
            .map(|i| b[i].to_f64() * sb[(i % k / 128) * nb + i / k / 128] as f64)
            .collect();
        let r = reference::gemm(&p, &a_deq, &b_deq, None::<&[bf16]>).unwrap();
        let (da, db) = (
            stream.clone_htod(&a).unwrap(),
            stream.clone_htod(&b).unwrap(),
        );
        let (dsa, dsb) = (
            stream.clone_htod(&sa).unwrap(),
            stream.clone_htod(&sb).unwrap(),
        );
        for name in [cutlass_gemm::BLOCKWISE_GEMV, cutlass] {
            let d = run_blockwise_named(&stream, &p, name, (&da, &dsa), (&db, &dsb));
            let mut worst = 0.0f64;
            for (i, v) in d.iter().enumerate() {
                let (v, want) = (v.to_f64(), r.value[i]);
                // The GEMV's sums are f32 sums of exact products (the crate's bound); the CUTLASS
                // kernel's FP8 wgmma keeps about 14 bits inside a k-block (the module's bound for
                // random values: 2^-6 of the block's sum |a b|).
                let bound = if case.starts_with("sub") {
                    exact_bound::<bf16>(want)
                } else if name == cutlass_gemm::BLOCKWISE_GEMV {
                    reference::tolerance::<bf16>(want, r.magnitude[i], k)
                } else {
                    2.0 * bf16::UNIT_ROUNDOFF * want.abs()
                        + (2f64.powi(-6) + 2.0 * k as f64 * 2f64.powi(-24)) * r.magnitude[i]
                };
                assert!(
                    (v - want).abs() <= bound,
                    "{name}, {case}: D[{}][{}] = {v}, want {want} (bound {bound})",
                    i / n,
                    i % n
                );
                worst = worst.max((v - want).abs() / bound);
            }
            println!("{name}, {case}: worst error/bound {worst:.3}");
        }
    }
}

/// e4m3's NaN bytes through the decode GEMV (which reads them as finite values and flags them)
/// and through the CUTLASS kernel: a NaN in X's token 3 makes row 3 of D NaN, one in W's row 17
/// column 17; every other output equals the reference, in both.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_blockwise_decode_gemv_propagates_nan_bytes() {
    let (_ctx, stream) = gemm_device();
    let mut rng = rng();
    let (m, n, k) = (9, 48, 384);
    let p = GemmProblem::new(m, n, k);
    let names = [cutlass_gemm::BLOCKWISE_GEMV, plain_blockwise_kernel()];
    let mut a: Vec<E4M3> = (0..m * k)
        .map(|_| E4M3::from_f32(rng.random_range(-3..=3) as f32))
        .collect();
    let mut b: Vec<E4M3> = (0..n * k)
        .map(|_| E4M3::from_f32(rng.random_range(-3..=3) as f32))
        .collect();
    // Byte 0x7F at token 3, k = 300 (the third k-block); 0xFF at W's row 17, k = 5 (B column-major:
    // W[17][5] at 17 k + 5).
    a[3 * k + 300] = E4M3::from_bits(0x7F);
    b[17 * k + 5] = E4M3::from_bits(0xFF);
    let (kb, nb) = (k.div_ceil(128), n.div_ceil(128));
    let sa: Vec<f32> = (0..kb * m).map(|i| 2f32.powi(i as i32 % 3 - 1)).collect();
    let sb: Vec<f32> = (0..kb * nb).map(|i| 2f32.powi(i as i32 % 2)).collect();
    // The reference without the NaN bytes (their outputs are checked for NaN).
    let value = |v: E4M3| {
        if v.to_bits() & 0x7F == 0x7F {
            0.0
        } else {
            v.to_f64()
        }
    };
    let a_deq: Vec<f64> = (0..m * k)
        .map(|i| value(a[i]) * sa[(i % k / 128) * m + i / k] as f64)
        .collect();
    let b_deq: Vec<f64> = (0..n * k)
        .map(|i| value(b[i]) * sb[(i % k / 128) * nb + i / k / 128] as f64)
        .collect();
    let r = reference::gemm(&p, &a_deq, &b_deq, None::<&[bf16]>).unwrap();
    let (da, db) = (
        stream.clone_htod(&a).unwrap(),
        stream.clone_htod(&b).unwrap(),
    );
    let (dsa, dsb) = (
        stream.clone_htod(&sa).unwrap(),
        stream.clone_htod(&sb).unwrap(),
    );
    for name in names {
        let d = run_blockwise_named(&stream, &p, name, (&da, &dsa), (&db, &dsb));
        for t in 0..m {
            for j in 0..n {
                let v = d[t * n + j].to_f64();
                if t == 3 || j == 17 {
                    assert!(v.is_nan(), "{name}: D[{t}][{j}] = {v}, not NaN");
                } else {
                    let want = r.value[t * n + j];
                    assert!(
                        (v - want).abs() <= exact_bound::<bf16>(want),
                        "{name}: D[{t}][{j}] = {v}, want {want}"
                    );
                }
            }
        }
        println!("{name}: NaN rows and columns as the inputs' NaN bytes");
    }
}

/// Few output tiles over a long K (a decode-size M; m off the scale rows' multiple of 4 in one).
const LONG_K_SHAPES: [(usize, usize, usize); 3] =
    [(16, 256, 4096), (40, 520, 4096), (7, 384, 2944)];

/// Shapes TMA cannot read in place, on every SM90 e4m3 x e4m3 -> bf16 kernel (the default build's
/// FP8 types), tensor-wise (both D orders) and blockwise: the plan pads the kernel's problem and
/// serves the operands concerned through copies, with the same exact-input bounds as the sweep.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_any_shape_runs_through_padded_copies() {
    let (_ctx, stream) = gemm_device();
    let mut rng = rng();
    let mut total = 0;
    // (The gated kernels, whose D has half the GEMM's columns, are gated.rs's.)
    for k in built_kernels().iter().filter(|k| {
        k.spec.arch == cutlass_gemm::Arch::Sm90a
            && (k.spec.a.ty, k.spec.b.ty, k.spec.d.ty)
                == (DataType::E4M3, DataType::E4M3, DataType::Bf16)
            && !k.spec.fusion.is_gated()
    }) {
        total += if k.spec.blockwise.is_some() {
            blockwise::<E4M3, E4M3, bf16>(k.name, &ODD_SHAPES, 0, &[1, 2], &stream, &mut rng)
        } else {
            tensorwise::<E4M3, E4M3, bf16>(k.name, &ODD_SHAPES, &stream, &mut rng)
        };
    }
    assert!(total > 0, "this build has no e4m3 x e4m3 -> bf16 kernel");
    println!("odd FP8 shapes: {total} problems");
}

/// The Triton recipe end to end: bf16 activations and weights quantized on the GPU (1x128 and
/// 128x128, MN-major scales), then the blockwise GEMM; the reference uses the host quantizer's
/// dequantized values (bit-exact with the GPU's, tests/gpu/quantize.rs).
#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_blockwise_recipe_with_gpu_quantized_operands() {
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let (m, n, k) = (520, 392, 1040);
    let x: Vec<f32> = (0..m * k)
        .map(|_| rng.random_range(-1.0f32..1.0) * 2f32.powi(rng.random_range(-6..=6)))
        .collect();
    let w: Vec<f32> = (0..n * k)
        .map(|_| rng.random_range(-1.0f32..1.0) * 0.05)
        .collect();
    let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
    let wb: Vec<bf16> = w.iter().map(|&v| bf16::from_f32(v)).collect();
    let (dx, dw) = (
        stream.clone_htod(&xb).unwrap(),
        stream.clone_htod(&wb).unwrap(),
    );
    let qa =
        quantize::quantize_fp8_blockwise(&stream, &dx, m, k, Fp8Block::Group1x128, ScaleMajor::MN)
            .unwrap();
    let qb = quantize::quantize_fp8_blockwise(
        &stream,
        &dw,
        n,
        k,
        Fp8Block::Block128x128,
        ScaleMajor::MN,
    )
    .unwrap();
    let p = GemmProblem::new(m, n, k);
    let g = BlockwiseGemm::<E4M3, E4M3, bf16>::new(&ctx, &p).unwrap();
    let mut dd: CudaSlice<bf16> = stream.clone_htod(&vec![bf16::POISON; m * n]).unwrap();
    g.run_tensors(&stream, &qa, &qb, None, &mut dd, Workspace::Managed)
        .unwrap();
    let d = stream.clone_dtoh(&dd).unwrap();
    // Host side: the same quantization, dequantized (A row-major m x k; W row-major n x k is B
    // column-major k x n).
    let xf: Vec<f32> = xb.iter().map(|v| v.to_f32()).collect();
    let wf: Vec<f32> = wb.iter().map(|v| v.to_f32()).collect();
    let (qe, qs) = host::quantize_fp8_blockwise(&xf, m, k, 1, 128);
    let (we, ws) = host::quantize_fp8_blockwise(&wf, n, k, 128, 128);
    let a_deq = host::dequantize_fp8_blockwise(&qe, &qs, m, k, 1, 128);
    let b_deq = host::dequantize_fp8_blockwise(&we, &ws, n, k, 128, 128);
    let r = reference::gemm(&p, &a_deq, &b_deq, None::<&[bf16]>).unwrap();
    let gd = g.plan_inner().operand(OperandName::D);
    let worst = check("recipe", &d, &gd, &r, |v, mag| {
        loose_bound::<bf16>(v, mag, k)
    });
    println!("recipe {m}x{n}x{k}: worst error/bound {worst:.4}");
    // Typed errors for tensors the kernel cannot read.
    let wrong_block = quantize::quantize_fp8_blockwise(
        &stream,
        &dx,
        m,
        k,
        Fp8Block::Block128x128,
        ScaleMajor::MN,
    )
    .unwrap();
    assert!(matches!(
        g.run_tensors(
            &stream,
            &wrong_block,
            &qb,
            None,
            &mut dd,
            Workspace::Managed
        )
        .unwrap_err(),
        Error::ScaleMismatch {
            operand: OperandName::ScalesA,
            rule: cutlass_gemm::ScaleRule::Fp8Block {
                required: Fp8Block::Group1x128,
                found: Fp8Block::Block128x128,
            },
        }
    ));
    let wrong_major =
        quantize::quantize_fp8_blockwise(&stream, &dw, n, k, Fp8Block::Block128x128, ScaleMajor::K)
            .unwrap();
    match g
        .run_tensors(
            &stream,
            &qa,
            &wrong_major,
            None,
            &mut dd,
            Workspace::Managed,
        )
        .unwrap_err()
    {
        Error::ScaleMismatch {
            operand: OperandName::ScalesB,
            rule,
        } => {
            assert_eq!(
                rule,
                cutlass_gemm::ScaleRule::Fp8ScaleMajor {
                    required: ScaleMajor::MN,
                    found: ScaleMajor::K
                }
            );
            assert!(rule.to_string().contains("ScaleMajor::MN"), "{rule}")
        }
        e => panic!("unexpected {e:?}"),
    }
    // Too few scales through the slice API.
    let short = stream.clone_htod(&vec![1.0f32; 10]).unwrap();
    assert!(matches!(
        g.run(
            &stream,
            &qa.data,
            &short,
            &qb.data,
            &qb.scales,
            None,
            &mut dd,
            Workspace::Managed
        )
        .unwrap_err(),
        Error::BufferTooSmall {
            operand: OperandName::ScalesA,
            ..
        }
    ));
}

/// Bytes of `elements` values of a (possibly sub-byte) type.
fn bytes(ty: DataType, elements: usize) -> usize {
    (elements * ty.bits() as usize).div_ceil(8)
}

/// Whether the driver refuses this kernel's TMA descriptors on this device: sub-byte A or B (TMA
/// unpacking data types) before SM100.
fn refuses_tma(s: &cutlass_gemm::KernelSpec, info: &DeviceInfo) -> bool {
    (s.a.ty.bits() < 8 || s.b.ty.bits() < 8) && info.compute_capability.0 < 10
}

/// The SM100 and SM120 kernels of this build, driven on this (Hopper) GPU up to the launch:
/// can_implement, the workspace size and the kernel parameters with TMA descriptors encoded by
/// the driver for real device buffers; then a launch, which returns the architecture error.
#[test]
#[ignore = "needs a CUDA GPU"]
fn blackwell_kernels_host_paths_run_on_hopper_and_launches_are_refused() {
    let (ctx, stream) = gemm_device();
    let info = DeviceInfo::query(&ctx).unwrap();
    let kernels: Vec<_> = built_kernels()
        .iter()
        .filter(|k| k.spec.arch != cutlass_gemm::Arch::Sm90a)
        .collect();
    assert!(
        !kernels.is_empty(),
        "this build has no SM100/SM120 kernel (build with CUTLASS_RS_ARCHS=90a,100a,120a)"
    );
    for k in &kernels {
        let s = k.spec;
        assert!(
            !s.arch.runs_on(info.compute_capability),
            "{} runs here",
            k.name
        );
        let (m, n, kk, batch) = (512usize, 384usize, 1024usize, 2usize);
        let alloc = |ty: DataType, elements: usize| -> CudaSlice<u8> {
            stream
                .alloc_zeros::<u8>(bytes(ty, elements).max(16))
                .unwrap()
        };
        let (a, b, c, d) = (
            alloc(s.a.ty, m * kk * batch),
            alloc(s.b.ty, kk * n * batch),
            alloc(s.c.ty, m * n * batch),
            alloc(s.d.ty, m * n * batch),
        );
        let sf = s.block_scale.map(|bs| {
            let la = ScaleFactorLayout::new(m, kk, batch, bs.vec as usize);
            let lb = ScaleFactorLayout::new(n, kk, batch, bs.vec as usize);
            (
                alloc(DataType::UE8M0, la.size()),
                alloc(DataType::UE8M0, lb.size()),
            )
        });
        // A block-scaled D: its scale factors and the device scalar the epilogue divides by.
        let sfd = s.output_scale.map(|o| {
            let l = ScaleFactorLayout::new(m, n, batch, o.vec as usize);
            (
                alloc(DataType::UE8M0, l.size()),
                stream.clone_htod(&[1.0f32]).unwrap(),
            )
        });
        let ptr = |x: &CudaSlice<u8>| x.device_ptr(&stream).0;
        let ld = |layout: Layout, rows: usize, cols: usize| match layout {
            Layout::RowMajor => cols,
            Layout::ColumnMajor => rows,
        };
        let args = RawArgs {
            m,
            n,
            k: kk,
            batch,
            a: ptr(&a),
            lda: ld(s.a.layout, m, kk),
            batch_stride_a: m * kk,
            b: ptr(&b),
            ldb: ld(s.b.layout, kk, n),
            batch_stride_b: kk * n,
            c: ptr(&c),
            ldc: n,
            batch_stride_c: m * n,
            d: ptr(&d),
            ldd: n,
            batch_stride_d: m * n,
            sfa: sf.as_ref().map_or(0, |(x, _)| ptr(x)),
            sfb: sf.as_ref().map_or(0, |(_, y)| ptr(y)),
            sfd: sfd.as_ref().map_or(0, |(x, _)| ptr(x)),
            norm_constant: sfd.as_ref().map_or(0, |(_, c)| c.device_ptr(&stream).0),
            alpha: 1.0,
            beta: 0.0,
            schedule: Default::default(),
            programmatic_dependent_launch: false,
            ..Default::default()
        };
        if sfd.is_some() {
            // Without the output's scale-factor buffer the shim refuses before CUTLASS sees it.
            let no_sfd = RawArgs { sfd: 0, ..args };
            // SAFETY: refused before any pointer is used.
            match unsafe { k.prepare_raw(&info, &no_sfd) } {
                Err(Error::Cutlass { status, .. }) => {
                    assert_eq!(status, cutlass_gemm::sys::CUTLASS_RS_ERROR_NULL_ARGUMENT)
                }
                other => panic!("{}: no SFD gave {other:?}", k.name),
            }
        }
        // SAFETY: every buffer is a device allocation of this context covering the extents
        // `args` describes; prepare_raw launches nothing.
        let prepared = unsafe { k.prepare_raw(&info, &args) };
        let ws = match prepared {
            Ok(ws) => {
                assert!(
                    !refuses_tma(&s, &info),
                    "{}: expected the driver to refuse",
                    k.name
                );
                ws
            }
            // Sub-byte operands use TMA's unpacking data types, which the driver encodes only
            // for SM100 devices: on this GPU everything up to that descriptor ran.
            Err(Error::Cutlass { status, .. })
                if status == cutlass_gemm::sys::CUTLASS_RS_ERROR_TMA_DESCRIPTOR
                    && refuses_tma(&s, &info) =>
            {
                println!("{}: host path ran up to the sub-byte TMA descriptors, which this device's driver refuses (expected before SM100)", k.name);
                0
            }
            Err(e) => panic!("{}: host path failed: {e}", k.name),
        };
        // A broken argument is refused on the host too (K not a multiple of the TMA alignment).
        let bad = RawArgs { k: kk - 1, ..args };
        // SAFETY: as above; a smaller K reaches less memory.
        let refused = unsafe { k.prepare_raw(&info, &bad) };
        assert!(
            matches!(refused, Err(Error::Cutlass { .. })),
            "{}: K = {} accepted: {refused:?}",
            k.name,
            kk - 1
        );
        // SAFETY: run_raw refuses before calling into the kernel (checked below).
        let launched = unsafe { k.run_raw(&info, &args, 0, ws, stream.cu_stream()) };
        match launched {
            Err(Error::ArchMismatch { arch, device, .. }) => {
                assert_eq!((arch, device), (s.arch, info.compute_capability))
            }
            other => panic!(
                "{}: launch on {:?} gave {other:?}",
                k.name, info.compute_capability
            ),
        }
        println!(
            "{}: {}, launch refused: {} kernel on sm_{}{}",
            k.name,
            if refuses_tma(&s, &info) {
                "host path up to the sub-byte TMA descriptors".to_string()
            } else {
                format!("host path ok (workspace {ws} bytes)")
            },
            s.arch,
            info.compute_capability.0,
            info.compute_capability.1
        );
    }
    println!(
        "{} SM100/SM120 kernels driven up to the launch",
        kernels.len()
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_plan_errors_on_a_real_device() {
    let (ctx, _stream) = gemm_device();
    let p = GemmProblem::new(256, 256, 256).with_a(MatrixLayout::col_major());
    assert!(matches!(
        Gemm::<E4M3, E4M3, bf16>::new(&ctx, &p).unwrap_err(),
        Error::UnsupportedLayout {
            operand: OperandName::A,
            rule: cutlass_gemm::LayoutRule::KernelLayouts {
                layout: cutlass_gemm::Layout::ColumnMajor,
                ..
            },
        }
    ));
}
