//! Weight-only GEMMs (4-bit, FP8 and int8 weights, bf16/f16 activations) against the f64 host reference over
//! the weight as the host dequantizes it: every weight-only kernel of the build, tokens from 1 to
//! past a tile, group sizes 64, 128 and k, rows that are not a multiple of the tile; GPTQ and AWQ
//! checkpoints made here (packed bit for bit as the weight from the plain values); the GPU
//! quantizer against its definition, read back through the kernel; typed refusals.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use cutlass_gemm::plans::weight_only::{GEMV_MAX_TOKENS, GEMV_TOKENS};
use cutlass_gemm::reference;
use cutlass_gemm::{
    built_weight_only_kernels, Arch, DataType, Element, Error, ProblemRule, QuantizedWeight,
    WeightFormat, WeightOnlyGemm, WeightOnlyInput, WeightOnlyProblem, WeightRule, Workspace,
    WEIGHT_ONLY_GEMV,
};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::Rng;

use crate::common::{device, kernel_filter, quick, rng};

/// Random 4-bit values (plain order: two per byte, the even column low), scales that are small
/// multiples of 1/64 (so that q · s is exact in bf16) and zero points.
struct HostWeight<T> {
    values: Vec<u8>,
    scales: Vec<T>,
    zero_points: Option<Vec<u8>>,
    n: usize,
    k: usize,
    group_size: usize,
}

impl<T: Element> HostWeight<T> {
    fn random(rng: &mut StdRng, n: usize, k: usize, group_size: usize, zp: bool) -> Self {
        let groups = k / group_size;
        HostWeight {
            values: (0..n * k / 2).map(|_| rng.random::<u8>()).collect(),
            scales: (0..groups * n)
                .map(|_| T::from_f64(f64::from(rng.random_range(1..=24)) / 64.0))
                .collect(),
            zero_points: zp.then(|| (0..groups * n).map(|_| rng.random_range(0..16)).collect()),
            n,
            k,
            group_size,
        }
    }

    fn q(&self, j: usize, i: usize) -> u32 {
        let e = j * self.k + i;
        u32::from((self.values[e / 2] >> ((e % 2) * 4)) & 0xF)
    }

    /// The kernels' zeros: -s · zp rounded once.
    fn zeros(&self) -> Option<Vec<T>> {
        self.zero_points.as_ref().map(|zp| {
            zp.iter()
                .zip(&self.scales)
                .map(|(&z, s)| T::from_f64(-s.to_f64() * f64::from(z)))
                .collect()
        })
    }

    fn dequantized(&self) -> Vec<T> {
        let zeros = self.zeros();
        reference::dequantize_weight(
            &self.values,
            self.zero_points.is_none(),
            &self.scales,
            zeros.as_deref(),
            self.n,
            self.k,
            self.group_size,
        )
        .unwrap()
    }

    /// The GEMV's bound beyond the reference's for X (`m x k`): see
    /// [`reference::weight_only_gemv_error`].
    fn gemv_error(&self, p: &WeightOnlyProblem, x: &[T]) -> Vec<f64> {
        let zeros = self.zeros();
        reference::weight_only_gemv_error(
            p,
            x,
            &self.values,
            self.zero_points.is_none(),
            &self.scales,
            zeros.as_deref(),
        )
        .unwrap()
    }

    fn upload(&self, stream: &Arc<CudaStream>) -> QuantizedWeight<T>
    where
        T: WeightOnlyInput,
    {
        let values = stream.clone_htod(&self.values).unwrap();
        let scales = stream.clone_htod(&self.scales).unwrap();
        let zp = self
            .zero_points
            .as_ref()
            .map(|z| stream.clone_htod(z).unwrap());
        QuantizedWeight::from_plain(
            stream,
            &values,
            &scales,
            zp.as_ref(),
            self.n,
            self.k,
            self.group_size,
        )
        .unwrap()
    }

    /// GPTQ's qweight (k / 8 x n words, eight values of a column each) and qzeros (groups x n / 8,
    /// stored as zp - 1: GPTQ's original format).
    fn gptq(&self) -> (Vec<i32>, Vec<i32>) {
        let mut qweight = vec![0u32; self.k / 8 * self.n];
        for i in 0..self.k {
            for j in 0..self.n {
                qweight[(i / 8) * self.n + j] |= self.q(j, i) << (4 * (i % 8));
            }
        }
        let zp = self.zero_points.as_ref().unwrap();
        let mut qzeros = vec![0u32; zp.len() / 8];
        for (e, &z) in zp.iter().enumerate() {
            let (g, j) = (e / self.n, e % self.n);
            let stored = (u32::from(z) + 15) % 16; // zp - 1, wrapping as GPTQ's packer does
            qzeros[g * (self.n / 8) + j / 8] |= stored << (4 * (j % 8));
        }
        let words = |v: Vec<u32>| v.into_iter().map(|w| w as i32).collect();
        (words(qweight), words(qzeros))
    }

    /// AWQ's qweight (k x n / 8 words, in the order 0 2 4 6 1 3 5 7) and qzeros.
    fn awq(&self) -> (Vec<i32>, Vec<i32>) {
        const ORDER: [usize; 8] = [0, 2, 4, 6, 1, 3, 5, 7];
        let mut qweight = vec![0u32; self.k * self.n / 8];
        for i in 0..self.k {
            for w in 0..self.n / 8 {
                for (p, &o) in ORDER.iter().enumerate() {
                    qweight[i * (self.n / 8) + w] |= self.q(w * 8 + o, i) << (4 * p);
                }
            }
        }
        let zp = self.zero_points.as_ref().unwrap();
        let groups = self.k / self.group_size;
        let mut qzeros = vec![0u32; groups * self.n / 8];
        for g in 0..groups {
            for w in 0..self.n / 8 {
                for (p, &o) in ORDER.iter().enumerate() {
                    qzeros[g * (self.n / 8) + w] |=
                        u32::from(zp[g * self.n + w * 8 + o]) << (4 * p);
                }
            }
        }
        let words = |v: Vec<u32>| v.into_iter().map(|w| w as i32).collect();
        (words(qweight), words(qzeros))
    }
}

fn integers<T: Element>(rng: &mut StdRng, len: usize, max: i32) -> Vec<T> {
    (0..len)
        .map(|_| T::from_f64(f64::from(rng.random_range(-max..=max))))
        .collect()
}

/// A weight as the host dequantizes it, for [`check`].
trait HostDequantized<T> {
    /// (n, k, group size).
    fn extents(&self) -> (usize, usize, usize);
    /// `n x k` row-major, as the CUTLASS kernels dequantize it.
    fn dequantized(&self) -> Vec<T>;
    /// The decode GEMV's bound beyond the reference's for X (`m x k`).
    fn gemv_error(&self, p: &WeightOnlyProblem, x: &[T]) -> Vec<f64>;
}

impl<T: Element> HostDequantized<T> for HostWeight<T> {
    fn extents(&self) -> (usize, usize, usize) {
        (self.n, self.k, self.group_size)
    }
    fn dequantized(&self) -> Vec<T> {
        HostWeight::dequantized(self)
    }
    fn gemv_error(&self, p: &WeightOnlyProblem, x: &[T]) -> Vec<f64> {
        HostWeight::gemv_error(self, p, x)
    }
}

/// A per-channel weight's bytes (`n x k` row-major: e4m3 values, or s8 ones as their two's
/// complement bytes when `int8`) and scales.
struct HostFp8<T> {
    values: Vec<u8>,
    scales: Vec<T>,
    n: usize,
    k: usize,
    int8: bool,
}

impl<T> HostFp8<T> {
    fn signed(&self) -> Vec<i8> {
        self.values.iter().map(|&b| b as i8).collect()
    }
}

impl<T: Element> HostDequantized<T> for HostFp8<T> {
    fn extents(&self) -> (usize, usize, usize) {
        (self.n, self.k, self.k)
    }
    fn dequantized(&self) -> Vec<T> {
        if self.int8 {
            reference::dequantize_int8_weight(&self.signed(), &self.scales, self.n, self.k)
        } else {
            reference::dequantize_fp8_weight(&self.values, &self.scales, self.n, self.k)
        }
        .unwrap()
    }
    fn gemv_error(&self, p: &WeightOnlyProblem, x: &[T]) -> Vec<f64> {
        if self.int8 {
            reference::int8_weight_gemv_error(p, x, &self.signed(), &self.scales)
        } else {
            reference::fp8_weight_gemv_error(p, x, &self.values, &self.scales)
        }
        .unwrap()
    }
}

/// Runs `m` tokens through the weight on one kernel (or the library's choice) into a poisoned Y
/// and compares it with the reference; returns the plan's kernel name.
#[allow(clippy::too_many_arguments)]
fn check<T: WeightOnlyInput>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    w: &dyn HostDequantized<T>,
    qw: &QuantizedWeight<T>,
    m: usize,
    beta: f32,
    kernel: Option<&str>,
) -> &'static str {
    let p = WeightOnlyProblem::for_weight(m, qw).with_scalars(1.5, beta);
    let plan = match kernel {
        Some(name) => WeightOnlyGemm::<T>::with_kernel(ctx, &p, name),
        None => WeightOnlyGemm::<T>::new(ctx, &p),
    }
    .unwrap();
    let (n, k, group_size) = w.extents();
    let x: Vec<T> = integers(rng, m * k, 2);
    let c: Vec<T> = integers(rng, m * n, 3);
    let dx = stream.clone_htod(&x).unwrap();
    let dc = stream.clone_htod(&c).unwrap();
    let mut dy = stream.clone_htod(&vec![T::POISON; m * n]).unwrap();
    let cin = (beta != 0.0).then_some(&dc as &dyn cudarc::driver::DevicePtr<T>);
    plan.run(stream, &dx, qw, cin, &mut dy, Workspace::Managed)
        .unwrap();
    let y = stream.clone_dtoh(&dy).unwrap();
    let mut want =
        reference::weight_only(&p, &x, &w.dequantized(), (beta != 0.0).then_some(&c[..])).unwrap();
    if plan.is_gemv() {
        want.extra_error = w.gemv_error(&p, &x);
    }
    let geometry = cutlass_gemm::GemmProblem::new(m, n, k)
        .resolve(cutlass_gemm::OperandName::D)
        .unwrap();
    let cmp = reference::compare(&y, &geometry, &want);
    assert!(
        cmp.passed(),
        "{} m={m} n={n} k={k} g={group_size}: {cmp:?}",
        plan.kernel_name()
    );
    plan.kernel_name()
}

/// The weight rule with which `plan.run` refuses `w` (a panic if it runs or fails otherwise).
fn weight_refusal<T: WeightOnlyInput>(
    plan: &WeightOnlyGemm<T>,
    stream: &Arc<CudaStream>,
    x: &CudaSlice<T>,
    w: &QuantizedWeight<T>,
    y: &mut CudaSlice<T>,
) -> WeightRule {
    match plan
        .run(stream, x, w, None, y, Workspace::Managed)
        .unwrap_err()
    {
        Error::InvalidProblem {
            reason: ProblemRule::Weight { rule },
        } => rule,
        other => panic!("{other}"),
    }
}

/// The build's SM90 weight-only kernels for these types (the SM100 ones, which read the plain
/// order, run their host path in `plain_order_round_trips_and_sm100_kernels_run_their_host_path`).
fn kernels_for(wide: DataType, zp: bool) -> Vec<&'static str> {
    let weight = if zp { DataType::U4 } else { DataType::S4 };
    built_weight_only_kernels()
        .iter()
        .filter(|k| k.spec.arch == Arch::Sm90a && k.spec.b.ty == wide && k.spec.a.ty == weight)
        .map(|k| k.name)
        .collect()
}

fn every_kernel<T: WeightOnlyInput>() {
    let (ctx, stream) = device();
    let mut rng = rng();
    let filter = kernel_filter();
    let filtered = filter.is_some();
    for zp in [false, true] {
        let kernels = kernels_for(T::DATA_TYPE, zp);
        assert!(
            !kernels.is_empty(),
            "no {} weight-only kernel in this build (features weight-only)",
            T::DATA_TYPE
        );
        let kernels: Vec<&str> = kernels
            .into_iter()
            .filter(|k| filter.as_deref().is_none_or(|text| k.contains(text)))
            .collect();
        // n = 272: 17 blocks of 16 rows, not a multiple of any tile m.
        let problems = [(272, 512, 64), (256, 1024, 128), (128, 384, 384)];
        let (problems, tokens) = if quick() {
            (&problems[..1], &[1, 17][..])
        } else {
            (&problems[..], &[1, 5, 16, 17, 64, 100, 257][..])
        };
        for &(n, k, g) in problems {
            let w = HostWeight::<T>::random(&mut rng, n, k, g, zp);
            let qw = w.upload(&stream);
            for &kernel in &kernels {
                for &m in tokens {
                    let beta = if m % 2 == 1 { 0.5 } else { 0.0 };
                    check(&ctx, &stream, &mut rng, &w, &qw, m, beta, Some(kernel));
                }
                println!("{kernel}: {} problems as the reference", tokens.len());
            }
            if filtered {
                continue;
            }
            // The library's choice, by tokens.
            for m in [1, 16, 33, 64, 200] {
                check(&ctx, &stream, &mut rng, &w, &qw, m, 0.0, None);
            }
        }
        if filtered {
            continue;
        }
        // Few output tiles over a long k: past the GEMV's tokens the library's choice takes
        // split-K 4.
        let w = HostWeight::<T>::random(&mut rng, 512, 2048, 128, zp);
        let qw = w.upload(&stream);
        for m in [GEMV_TOKENS + 1, 32, 64] {
            let p = WeightOnlyProblem::for_weight(m, &qw);
            assert_eq!(WeightOnlyGemm::<T>::new(&ctx, &p).unwrap().splits(), 4);
            check(&ctx, &stream, &mut rng, &w, &qw, m, 0.5, None);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bf16_weight_only_kernels_match_the_reference() {
    every_kernel::<bf16>();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_weight_only_kernels_match_the_reference() {
    every_kernel::<f16>();
}

fn same<T: cudarc::driver::DeviceRepr + PartialEq + std::fmt::Debug + Clone + Default>(
    stream: &Arc<CudaStream>,
    a: &CudaSlice<T>,
    b: &CudaSlice<T>,
) -> bool {
    stream.clone_dtoh(a).unwrap() == stream.clone_dtoh(b).unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gptq_and_awq_checkpoints_load_bit_for_bit() {
    let (ctx, stream) = device();
    let mut rng = rng();
    let (n, k, g) = (256, 512, 128);
    for w in [
        HostWeight::<f16>::random(&mut rng, n, k, g, true),
        HostWeight::<f16>::random(&mut rng, n, k, 64, true),
    ] {
        let plain = w.upload(&stream);
        let scales = stream.clone_htod(&w.scales).unwrap();
        let (gq, gz) = w.gptq();
        let (gq, gz) = (
            stream.clone_htod(&gq).unwrap(),
            stream.clone_htod(&gz).unwrap(),
        );
        let g_idx: Vec<i32> = (0..k).map(|i| (i / w.group_size) as i32).collect();
        let gptq = QuantizedWeight::from_gptq(
            &stream,
            &gq,
            &gz,
            &scales,
            Some(&g_idx),
            n,
            k,
            w.group_size,
            1,
        )
        .unwrap();
        let (aq, az) = w.awq();
        let (aq, az) = (
            stream.clone_htod(&aq).unwrap(),
            stream.clone_htod(&az).unwrap(),
        );
        let awq =
            QuantizedWeight::from_awq(&stream, &aq, &az, &scales, n, k, w.group_size).unwrap();
        for (name, q) in [("gptq", &gptq), ("awq", &awq)] {
            assert!(
                same(&stream, q.packed(), plain.packed()),
                "{name}: packed values"
            );
            assert!(
                same(&stream, q.zeros().unwrap(), plain.zeros().unwrap()),
                "{name}: zeros"
            );
            assert!(same(&stream, q.scales(), plain.scales()), "{name}: scales");
            check(&ctx, &stream, &mut rng, &w, q, 16, 0.0, None);
        }
        // Act-order: a g_idx that is not column / group_size is refused, naming the column.
        let mut act = g_idx.clone();
        act.swap(0, k - 1);
        let err = QuantizedWeight::from_gptq(
            &stream,
            &gq,
            &gz,
            &scales,
            Some(&act),
            n,
            k,
            w.group_size,
            1,
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidProblem {
                    reason: ProblemRule::Weight {
                        rule: WeightRule::ActOrder { column: 0, .. }
                    }
                }
            ),
            "{err}"
        );
    }
}

/// The weight as the library's kernel for it dequantizes it, read back through X = I (k x k): Y =
/// dequant(W)ᵀ, each element one exact product. Returns it `n x k` row-major, and the kernel.
fn dequantized_on_gpu<T: WeightOnlyInput>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    qw: &QuantizedWeight<T>,
) -> (Vec<f64>, &'static str) {
    let (n, k) = (qw.n(), qw.k());
    let mut eye = vec![T::from_f64(0.0); k * k];
    for i in 0..k {
        eye[i * k + i] = T::from_f64(1.0);
    }
    let p = WeightOnlyProblem::for_weight(k, qw);
    let plan = WeightOnlyGemm::<T>::new(ctx, &p).unwrap();
    let dx = stream.clone_htod(&eye).unwrap();
    // A finite poison (T::POISON is NaN, which rows expected to be NaN would pass as unwritten).
    let mut dy = stream
        .clone_htod(&vec![T::from_f64(12345.0); k * n])
        .unwrap();
    plan.run(stream, &dx, qw, None, &mut dy, Workspace::Managed)
        .unwrap();
    let y = stream.clone_dtoh(&dy).unwrap();
    let w = (0..n * k)
        .map(|e| y[(e % k) * n + e / k].to_f64())
        .collect();
    (w, plan.kernel_name())
}

/// The quantizer's definition, on the host: per group the scale rounded to T, then the values.
fn quantize_host<T: Element>(w: &[T], n: usize, k: usize, g: usize, zp: bool) -> Vec<f64> {
    let mut out = vec![0.0; n * k];
    for j in 0..n {
        for group in 0..k / g {
            let row = &w[j * k + group * g..j * k + (group + 1) * g];
            let v: Vec<f64> = row.iter().map(|x| f64::from(x.to_f64() as f32)).collect();
            let lo = v.iter().copied().fold(0.0, f64::min);
            let hi = v.iter().copied().fold(0.0, f64::max);
            let amax = v.iter().fold(0.0f64, |a, x| a.max(x.abs()));
            if v.iter().any(|x| !x.is_finite()) {
                // Scale NaN: the group dequantizes to NaN.
                out[j * k + group * g..j * k + (group + 1) * g].fill(f64::NAN);
                continue;
            }
            let raw = if zp {
                ((hi - lo) as f32 / 15.0) as f64
            } else {
                (amax as f32 / 7.0) as f64
            };
            let mut s = T::from_f64(if raw > 0.0 { raw } else { 1.0 }).to_f64();
            if s <= 0.0 || s.is_infinite() {
                s = 1.0;
            }
            let z = if zp {
                ((-lo as f32 / s as f32).round_ties_even()).clamp(0.0, 15.0) as f64
            } else {
                0.0
            };
            let (qlo, qhi) = if zp { (0.0, 15.0) } else { (-8.0, 7.0) };
            let zero = T::from_f64(-s * z).to_f64();
            for (i, x) in v.iter().enumerate() {
                let q = ((*x as f32 / s as f32).round_ties_even() as f64 + z).clamp(qlo, qhi);
                // One rounding: the kernels' multiply and add fuse.
                out[j * k + group * g + i] =
                    T::from_f64(q * s + if zp { zero } else { 0.0 }).to_f64();
            }
        }
    }
    out
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn quantizer_matches_its_definition_through_the_kernel() {
    let (ctx, stream) = device();
    let mut rng = rng();
    let (n, k, g) = (128, 256, 64);
    for zp in [false, true] {
        let mut w: Vec<bf16> = (0..n * k)
            .map(|_| bf16::from_f64(rng.random_range(-1.0..1.0) * if zp { 1.0 } else { 0.5 }))
            .collect();
        // Values 4 bits cannot hold: their groups (row 3's second, row 70's last) get the scale
        // NaN, and the rows read back as NaN (X = I: NaN times 0 is NaN).
        w[3 * k + g + 5] = bf16::NAN;
        w[70 * k + k - 1] = bf16::INFINITY;
        let nan_groups = [(3, 1), (70, k / g - 1)];
        let dw = stream.clone_htod(&w).unwrap();
        let format = if zp {
            WeightFormat::ZeroPoint
        } else {
            WeightFormat::Symmetric
        };
        let qw = QuantizedWeight::quantize(&stream, &dw, n, k, g, format).unwrap();
        let scales = stream.clone_dtoh(qw.scales()).unwrap();
        for (e, s) in scales.iter().enumerate() {
            let (group, j) = (e / n, e % n);
            assert_eq!(
                s.is_nan(),
                nan_groups.contains(&(j, group)),
                "scale of row {j} group {group}"
            );
        }
        let (y, _) = dequantized_on_gpu(&ctx, &stream, &qw);
        let want = quantize_host(&w, n, k, g, zp);
        let mut worst = 0.0f64;
        for j in 0..n {
            for i in 0..k {
                let got = y[j * k + i];
                if nan_groups.iter().any(|&(row, _)| row == j) {
                    assert!(got.is_nan(), "w[{j}][{i}]: {got}");
                    assert_eq!(want[j * k + i].is_nan(), nan_groups.contains(&(j, i / g)));
                    continue;
                }
                assert_eq!(
                    got,
                    want[j * k + i],
                    "{format:?} w[{j}][{i}] = {}",
                    w[j * k + i]
                );
                worst = worst.max((got - w[j * k + i].to_f64()).abs());
            }
        }
        // The quantization error is at most half a step (plus the roundings) of the widest group.
        assert!(
            worst <= if zp { 2.0 / 15.0 } else { 0.5 / 7.0 } * 0.6,
            "{format:?}: {worst}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn weight_only_refusals_name_the_rule() {
    let (ctx, stream) = device();
    let mut rng = rng();
    let w = HostWeight::<bf16>::random(&mut rng, 256, 512, 128, false);
    let qw = w.upload(&stream);
    let p = WeightOnlyProblem::for_weight(8, &qw);
    let plan = WeightOnlyGemm::<bf16>::new(&ctx, &p).unwrap();
    let dx = stream
        .clone_htod(&vec![bf16::from_f64(1.0); 8 * 512])
        .unwrap();
    let mut dy = stream.clone_htod(&vec![bf16::POISON; 8 * 256]).unwrap();
    // A weight of other extents or another format than the plan's.
    let other = HostWeight::<bf16>::random(&mut rng, 256, 512, 64, false).upload(&stream);
    let rule = weight_refusal(&plan, &stream, &dx, &other, &mut dy);
    assert!(matches!(rule, WeightRule::Extents { .. }), "{rule:?}");
    let zp = HostWeight::<bf16>::random(&mut rng, 256, 512, 128, true).upload(&stream);
    let rule = weight_refusal(&plan, &stream, &dx, &zp, &mut dy);
    assert!(matches!(rule, WeightRule::Format { .. }), "{rule:?}");
    // X shorter than m x k.
    let short = stream
        .clone_htod(&vec![bf16::from_f64(1.0); 8 * 512 - 1])
        .unwrap();
    let err = plan
        .run(&stream, &short, &qw, None, &mut dy, Workspace::Managed)
        .unwrap_err();
    assert!(matches!(err, Error::BufferTooSmall { .. }), "{err}");
    // Y still poison: nothing ran.
    assert!(stream
        .clone_dtoh(&dy)
        .unwrap()
        .iter()
        .all(|v| v.to_bits() == bf16::POISON.to_bits()));
    // The host path of every SM90 kernel runs up to the launch (the SM100 ones': below).
    for k in built_weight_only_kernels()
        .iter()
        .filter(|k| k.spec.arch == Arch::Sm90a)
    {
        let (format, group) = match k.spec.a.ty {
            DataType::U4 => (WeightFormat::ZeroPoint, 128),
            DataType::E4M3 => (WeightFormat::Fp8, 4096),
            DataType::I8 => (WeightFormat::Int8, 4096),
            _ => (WeightFormat::Symmetric, 128),
        };
        let p = WeightOnlyProblem::new(16, 4096, 4096, group, format);
        match k.spec.b.ty {
            DataType::Bf16 => WeightOnlyGemm::<bf16>::with_kernel(&ctx, &p, k.name)
                .unwrap()
                .prepare()
                .unwrap(),
            _ => WeightOnlyGemm::<f16>::with_kernel(&ctx, &p, k.name)
                .unwrap()
                .prepare()
                .unwrap(),
        }
    }
}

/// The FP8 quantizer's definition on the host: per row `s = max|w| / 448` rounded to T (1 where
/// that rounds to 0 or overflows), `q = e4m3(w / s)` (f32 division, RNE, saturating).
fn quantize_fp8_host<T: Element>(w: &[T], n: usize, k: usize) -> HostFp8<T> {
    let mut values = Vec::with_capacity(n * k);
    let mut scales = Vec::with_capacity(n);
    for row in w.chunks_exact(k).take(n) {
        if row.iter().any(|x| !x.to_f64().is_finite()) {
            scales.push(T::from_f64(f64::NAN));
            values.extend(std::iter::repeat_n(0x7F, k));
            continue;
        }
        let amax = row
            .iter()
            .fold(0.0f32, |a, x| a.max((x.to_f64() as f32).abs()));
        let mut s = T::from_f64(f64::from(amax / 448.0)).to_f64() as f32;
        if s.is_nan() || s <= 0.0 || s.is_infinite() {
            s = 1.0;
        }
        scales.push(T::from_f64(f64::from(s)));
        values.extend(
            row.iter()
                .map(|x| cutlass_gemm::numeric::E4M3::from_f32(x.to_f64() as f32 / s).to_bits()),
        );
    }
    HostFp8 {
        values,
        scales,
        n,
        k,
        int8: false,
    }
}

/// What tells the two per-channel weight formats apart in their tests.
struct PerChannel<T> {
    format: WeightFormat,
    /// The weight's element type in the kernels' names.
    ty: DataType,
    /// The quantizer's definition on the host.
    host: fn(&[T], usize, usize) -> HostFp8<T>,
    /// The most a value `x` quantized with the scale `s` may differ from `x` after dequantization
    /// (the product's rounding to T aside).
    error: fn(f64, f64) -> f64,
}

impl<T: WeightOnlyInput> PerChannel<T> {
    /// The weight from a checkpoint's tensors (`from_fp8`, `from_int8`).
    fn load(&self, stream: &Arc<CudaStream>, host: &HostFp8<T>) -> QuantizedWeight<T> {
        let ds = stream.clone_htod(&host.scales).unwrap();
        if host.int8 {
            let dq = stream.clone_htod(&host.signed()).unwrap();
            QuantizedWeight::from_int8(stream, &dq, &ds, host.n, host.k).unwrap()
        } else {
            let dq = stream.clone_htod(&host.values).unwrap();
            QuantizedWeight::from_fp8(stream, &dq, &ds, host.n, host.k).unwrap()
        }
    }
}

/// Weights with a scale per output channel (FP8, int8): the GPU quantizer bit for bit against its
/// definition (rows of different magnitudes, a row of zeros, one whose largest value is 1000 times
/// the rest, whose others quantize to few bits), within the format's quantization error; the
/// weight from a checkpoint's tensors the same; every kernel of the build for the format, the
/// decode GEMV at 1 to 32 tokens and the library's choice at 1 to 1100 tokens against the f64
/// reference over the host's dequantized weight (the GEMV within its bound beyond it); X = I,
/// which reads the dequantized weight back exactly; then `more` for each problem (the weight, its
/// host definition), and the refusal of a group other than k.
fn per_channel_weights<T: WeightOnlyInput>(
    f: &PerChannel<T>,
    mut more: impl FnMut(&Arc<CudaContext>, &Arc<CudaStream>, &mut StdRng, &HostFp8<T>),
) -> (Arc<CudaContext>, Arc<CudaStream>, StdRng) {
    let (ctx, stream) = device();
    let mut rng = rng();
    let kernels: Vec<&str> = built_weight_only_kernels()
        .iter()
        .filter(|k| k.spec.b.ty == T::DATA_TYPE && k.spec.a.ty == f.ty)
        .map(|k| k.name)
        .collect();
    assert!(
        !kernels.is_empty(),
        "no {} {:?} weight-only kernel in this build (features weight-only)",
        T::DATA_TYPE,
        f.format
    );
    let filter = kernel_filter();
    let problems: &[(usize, usize)] = if quick() {
        &[(272, 512)]
    } else {
        &[(272, 512), (256, 1024)]
    };
    let tokens: &[usize] = if quick() {
        &[1, 17]
    } else {
        &[1, 5, 16, 17, 64, 100, 257]
    };
    for &(n, k) in problems {
        let w: Vec<T> = (0..n * k)
            .map(|e| {
                let (j, i) = (e / k, e % k);
                let v = rng.random_range(-1.0..1.0) * 2f64.powi(j as i32 % 13 - 6);
                T::from_f64(match j {
                    3 => 0.0,
                    5 if i == 7 => 1000.0,
                    _ => v,
                })
            })
            .collect();
        let dw = stream.clone_htod(&w).unwrap();
        let qw = QuantizedWeight::quantize(&stream, &dw, n, k, k, f.format).unwrap();
        assert_eq!(qw.format(), f.format);
        assert_eq!(qw.group_size(), k);
        let host = (f.host)(&w, n, k);
        assert_eq!(stream.clone_dtoh(qw.packed()).unwrap(), host.values);
        let scales = stream.clone_dtoh(qw.scales()).unwrap();
        assert!(scales
            .iter()
            .zip(&host.scales)
            .all(|(a, b)| a.to_f64() == b.to_f64()));
        assert_eq!(scales[3].to_f64(), 1.0, "a row of zeros gets the scale 1");
        // The quantization's error, plus the product's rounding (at least half of T's smallest
        // subnormal step where it falls below T's normal range).
        let half_subnormal = match T::DATA_TYPE {
            DataType::F16 => 2f64.powi(-25),
            _ => 2f64.powi(-134),
        };
        let deq = host.dequantized();
        for (e, (x, d)) in w.iter().zip(&deq).enumerate() {
            let s = host.scales[e / k].to_f64();
            let (x, d) = (x.to_f64(), d.to_f64());
            let bound = (f.error)(x, s) + 2.0 * T::UNIT_ROUNDOFF * x.abs() + half_subnormal;
            assert!((x - d).abs() <= bound, "w[{e}] = {x}, dequantized {d}");
        }
        // From a checkpoint's tensors: the same weight.
        let loaded = f.load(&stream, &host);
        assert!(same(&stream, loaded.packed(), qw.packed()));
        let bits = |v: Vec<T>| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(stream.clone_dtoh(loaded.scales()).unwrap()),
            bits(stream.clone_dtoh(qw.scales()).unwrap())
        );
        for &kernel in kernels
            .iter()
            .filter(|k| filter.as_deref().is_none_or(|text| k.contains(text)))
        {
            for &m in tokens {
                let beta = if m % 2 == 1 { 0.5 } else { 0.0 };
                check(&ctx, &stream, &mut rng, &host, &qw, m, beta, Some(kernel));
            }
            println!("{kernel}: {} problems as the reference", tokens.len());
        }
        // The decode GEMV by name, at every token count it takes (its shapes change at 9, 17
        // and 25 tokens; 272 rows are an odd count of 16-row slices).
        let gemv_tokens: &[usize] = if quick() {
            &[1, 16]
        } else {
            &[1, 2, 7, 8, 9, 16, 17, 24, 25, 32]
        };
        for &m in gemv_tokens {
            let beta = if m % 2 == 1 { 0.5 } else { 0.0 };
            check(
                &ctx,
                &stream,
                &mut rng,
                &host,
                &qw,
                m,
                beta,
                Some(WEIGHT_ONLY_GEMV),
            );
        }
        println!(
            "{WEIGHT_ONLY_GEMV}: {} problems as the reference",
            gemv_tokens.len()
        );
        let name_part = format!("_{}_", f.ty);
        for m in [1, 16, 17, 33, 64, 200, 1100] {
            let name = check(&ctx, &stream, &mut rng, &host, &qw, m, 0.0, None);
            if m <= GEMV_TOKENS {
                assert_eq!(name, WEIGHT_ONLY_GEMV);
            } else {
                assert!(name.contains(&name_part), "{name}");
            }
        }
        let (y, kernel) = dequantized_on_gpu(&ctx, &stream, &qw);
        for (e, (got, want)) in y.iter().zip(&deq).enumerate() {
            assert_eq!(*got, want.to_f64(), "{kernel} w[{}][{}]", e / k, e % k);
        }
        more(&ctx, &stream, &mut rng, &host);
    }
    // Refusal: a group other than k.
    let p = WeightOnlyProblem::new(16, 256, 512, 128, f.format);
    assert!(matches!(
        WeightOnlyGemm::<T>::new(&ctx, &p).unwrap_err(),
        Error::InvalidProblem {
            reason: ProblemRule::Weight {
                rule: WeightRule::PerChannel {
                    group_size: 128,
                    k: 512
                }
            }
        }
    ));
    (ctx, stream, rng)
}

/// A weight of another format on plans of `format` (the GEMV's and a kernel's): refused, naming
/// both formats.
fn other_format_refused<T: WeightOnlyInput>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    other: &QuantizedWeight<T>,
    format: WeightFormat,
) {
    for m in [16, 17] {
        let p = WeightOnlyProblem::new(m, 256, 512, 512, format);
        let plan = WeightOnlyGemm::<T>::new(ctx, &p).unwrap();
        assert_eq!(plan.is_gemv(), m <= GEMV_TOKENS);
        let dx = stream.clone_htod(&vec![T::from_f64(1.0); m * 512]).unwrap();
        let mut dy = stream.clone_htod(&vec![T::POISON; m * 256]).unwrap();
        assert_eq!(
            weight_refusal(&plan, stream, &dx, other, &mut dy),
            WeightRule::Format {
                weight: other.format(),
                plan: format
            }
        );
    }
}

/// FP8 weights (e4m3 with a scale per output channel, values that saturate among them):
/// [`per_channel_weights`], and a 4-bit weight refused on FP8 plans.
fn fp8_weights<T: WeightOnlyInput>() {
    let f = PerChannel {
        format: WeightFormat::Fp8,
        ty: DataType::E4M3,
        host: quantize_fp8_host::<T>,
        // Half an e4m3 step of the value, or of the smallest subnormal, times the scale.
        error: |x, s| (x.abs() / 16.0).max(s * 2f64.powi(-10)),
    };
    let (ctx, stream, mut rng) = per_channel_weights(&f, |_, _, _, _| {});
    let four_bit = HostWeight::<T>::random(&mut rng, 256, 512, 512, false).upload(&stream);
    other_format_refused(&ctx, &stream, &four_bit, WeightFormat::Fp8);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bf16_fp8_weights_match_the_reference() {
    fp8_weights::<bf16>();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_fp8_weights_match_the_reference() {
    fp8_weights::<f16>();
}

/// The int8 quantizer's definition on the host: per row `s = max|w| / 127` rounded to T (1 where
/// that rounds to 0 or overflows), `q = clamp(round(w / s), -127, 127)` (f32 division, ties to
/// even); a row holding NaN or ±Inf gets the scale NaN and the values 0.
fn quantize_int8_host<T: Element>(w: &[T], n: usize, k: usize) -> HostFp8<T> {
    let mut values = Vec::with_capacity(n * k);
    let mut scales = Vec::with_capacity(n);
    for row in w.chunks_exact(k).take(n) {
        if row.iter().any(|x| !x.to_f64().is_finite()) {
            scales.push(T::from_f64(f64::NAN));
            values.extend(std::iter::repeat_n(0, k));
            continue;
        }
        let amax = row
            .iter()
            .fold(0.0f32, |a, x| a.max((x.to_f64() as f32).abs()));
        let mut s = T::from_f64(f64::from(amax / 127.0)).to_f64() as f32;
        if s.is_nan() || s <= 0.0 || s.is_infinite() {
            s = 1.0;
        }
        scales.push(T::from_f64(f64::from(s)));
        values.extend(row.iter().map(|x| {
            let q = (x.to_f64() as f32 / s)
                .round_ties_even()
                .clamp(-127.0, 127.0);
            q as i8 as u8
        }));
    }
    HostFp8 {
        values,
        scales,
        n,
        k,
        int8: true,
    }
}

/// int8 weights (s8 with a scale per output channel): [`per_channel_weights`]; every s8 value,
/// -128 (which the quantizer never writes) and 127 included, from a checkpoint; rows holding NaN
/// and +Inf through the quantizer, the GEMV and a CUTLASS kernel (with ReLU for bf16); an FP8
/// weight refused on int8 plans.
fn int8_weights<T: WeightOnlyInput>() {
    let f = PerChannel {
        format: WeightFormat::Int8,
        ty: DataType::I8,
        host: quantize_int8_host::<T>,
        // Half a step (the scale), and the scale's rounding to T (which may push the largest value
        // past 127 s, clamped).
        error: |_, s| s * (0.5 + 127.0 * 2.0 * T::UNIT_ROUNDOFF),
    };
    let (ctx, stream, mut rng) = per_channel_weights(&f, |ctx, stream, rng, host| {
        // Every s8 value, -128 and 127 included, through the GEMV and a CUTLASS kernel (scales of
        // 1/64, so that the sums stay within f16's range).
        let mut extremes = host.values.clone();
        for (e, v) in extremes.iter_mut().enumerate() {
            match e % 7 {
                0 => *v = 0x80,
                1 => *v = 0x7F,
                _ => {}
            }
        }
        let extremes = HostFp8 {
            values: extremes,
            scales: vec![T::from_f64(1.0 / 64.0); host.n],
            n: host.n,
            k: host.k,
            int8: true,
        };
        let qx = f.load(stream, &extremes);
        for m in [1, 9, 17] {
            check(ctx, stream, rng, &extremes, &qx, m, 0.0, None);
        }
    });
    // The quantizer on rows holding NaN and +Inf: the scale NaN, the values 0 (its definition),
    // and NaN for every token of those rows through the GEMV and a CUTLASS kernel.
    let (n, k) = (64, 512);
    let mut w: Vec<T> = (0..n * k)
        .map(|_| T::from_f64(rng.random_range(-1.0..1.0)))
        .collect();
    w[5 * k + 100] = T::from_f64(f64::NAN);
    w[40 * k] = T::from_f64(f64::INFINITY);
    let nan_rows = [5, 40];
    let dw = stream.clone_htod(&w).unwrap();
    let qw = QuantizedWeight::quantize_int8(&stream, &dw, n, k).unwrap();
    let host = quantize_int8_host(&w, n, k);
    assert_eq!(stream.clone_dtoh(qw.packed()).unwrap(), host.values);
    let scales = stream.clone_dtoh(qw.scales()).unwrap();
    for (j, (got, want)) in scales.iter().zip(&host.scales).enumerate() {
        let (got, want) = (got.to_f64(), want.to_f64());
        assert!(
            got == want || (got.is_nan() && want.is_nan()),
            "scale {j}: {got}, {want}"
        );
        assert_eq!(got.is_nan(), nan_rows.contains(&j), "scale {j}");
    }
    let mut clean = host;
    for j in nan_rows {
        clean.scales[j] = T::from_f64(1.0);
    }
    let relu = T::DATA_TYPE == DataType::Bf16;
    for m in [1, 16, 17] {
        let name = check_nan_rows(
            &ctx, &stream, &mut rng, &clean, &qw, &nan_rows, m, relu, None,
        );
        assert_eq!(name == WEIGHT_ONLY_GEMV, m <= GEMV_TOKENS, "{name}");
    }
    // An FP8 weight on int8 plans.
    let ones = stream
        .clone_htod(&vec![T::from_f64(1.0); 256 * 512])
        .unwrap();
    let fp8 = QuantizedWeight::quantize_fp8(&stream, &ones, 256, 512).unwrap();
    other_format_refused(&ctx, &stream, &fp8, WeightFormat::Int8);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bf16_int8_weights_match_the_reference() {
    int8_weights::<bf16>();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_int8_weights_match_the_reference() {
    int8_weights::<f16>();
}

/// Runs `m` tokens through an FP8 weight whose rows `nan_rows` hold NaN bytes (with ReLU after
/// the GEMM when `relu`): every token of those rows must be NaN, and the others the reference's
/// values over `clean` (the weight with its NaN bytes made 0) within their bounds. Returns the
/// plan's kernel name.
#[allow(clippy::too_many_arguments)]
fn check_nan_rows<T: WeightOnlyInput>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    rng: &mut StdRng,
    clean: &HostFp8<T>,
    qw: &QuantizedWeight<T>,
    nan_rows: &[usize],
    m: usize,
    relu: bool,
    kernel: Option<&str>,
) -> &'static str {
    use cutlass_gemm::{Activation, Epilogue};
    let (n, k) = (clean.n, clean.k);
    let p = WeightOnlyProblem::for_weight(m, qw).with_scalars(1.5, 0.0);
    let mut plan = match kernel {
        Some(name) => WeightOnlyGemm::<T>::with_kernel(ctx, &p, name),
        None => WeightOnlyGemm::<T>::new(ctx, &p),
    }
    .unwrap();
    if relu {
        plan = plan
            .with_epilogue(Epilogue::NONE.with_activation(Activation::Relu))
            .unwrap();
    }
    let x: Vec<T> = integers(rng, m * k, 2);
    let dx = stream.clone_htod(&x).unwrap();
    // A finite poison: T::POISON is NaN, which an unwritten NaN row would pass as.
    let mut dy = stream
        .clone_htod(&vec![T::from_f64(12345.0); m * n])
        .unwrap();
    if relu {
        let none = cutlass_gemm::EpilogueOperands {
            bias: None,
            bias_f32: None,
            row_scales: None,
            col_scales: None,
        };
        plan.run_fused(stream, &dx, qw, None, &mut dy, &none, Workspace::Managed)
    } else {
        plan.run(stream, &dx, qw, None, &mut dy, Workspace::Managed)
    }
    .unwrap();
    let mut y = stream.clone_dtoh(&dy).unwrap();
    let mut want = reference::weight_only(&p, &x, &clean.dequantized(), None).unwrap();
    if plan.is_gemv() {
        want.extra_error = clean.gemv_error(&p, &x);
    }
    if relu {
        // ReLU's Lipschitz constant is 1: the bounds stand.
        for v in &mut want.value {
            *v = v.max(0.0);
        }
    }
    let name = plan.kernel_name();
    for t in 0..m {
        for &j in nan_rows {
            let got = y[t * n + j].to_f64();
            assert!(
                got.is_nan(),
                "{name} m={m} relu={relu}: y[{t}][{j}] = {got}, not NaN"
            );
            // Checked: the comparison below covers the other rows.
            y[t * n + j] = T::from_f64(want.value[t * n + j]);
        }
    }
    let geometry = cutlass_gemm::GemmProblem::new(m, n, k)
        .resolve(cutlass_gemm::OperandName::D)
        .unwrap();
    let cmp = reference::compare(&y, &geometry, &want);
    assert!(
        cmp.passed(),
        "{name} m={m} n={n} k={k} relu={relu}: {cmp:?}"
    );
    name
}

/// An FP8 checkpoint with NaN bytes (e4m3's 0x7F and 0xFF, in rows of both halves of a 16-row
/// slice, in the first, a middle and the last column) and a long k (8256: 129 chunks of 64, an odd
/// count of runs of two, several runs a warp, a last run cut short): `from_fp8` gives exactly
/// those rows the scale NaN; the decode GEMV by name at every token count it takes (its
/// one-slice, two-slice and pipelined shapes) and the library's choice past it give NaN for every
/// token of those rows, through ReLU too (as NaN weights dequantized first would), and the
/// reference's values within their bounds elsewhere. Then the FP8 quantizer on rows holding NaN
/// and -Inf, the same way.
fn fp8_nan_bytes_and_long_rows<T: WeightOnlyInput>() {
    let (ctx, stream) = device();
    let mut rng = rng();
    let (n, k) = (256, 8256);
    // Random e4m3 bytes, NaN made the largest finite value; scales in [1/512, 1/256).
    let mut values: Vec<u8> = (0..n * k)
        .map(|_| {
            let b: u8 = rng.random();
            if b & 0x7F == 0x7F {
                b - 1
            } else {
                b
            }
        })
        .collect();
    let scales: Vec<T> = (0..n)
        .map(|_| T::from_f64(rng.random_range(1.0..2.0) / 512.0))
        .collect();
    let clean = HostFp8 {
        values: values.clone(),
        scales: scales.clone(),
        n,
        k,
        int8: false,
    };
    // (row, column, byte): rows 0 and 21 are in the first half of their 16-row slice (row l / 4
    // of the GEMV's lanes), 24 and 255 in the second (row l / 4 + 8).
    let nan_at = [
        (0, 0, 0x7F),
        (21, 4100, 0xFF),
        (24, k - 1, 0x7F),
        (255, 64, 0xFF),
    ];
    let nan_rows: Vec<usize> = nan_at.iter().map(|&(j, _, _)| j).collect();
    let mut clean = clean;
    for &(j, i, byte) in &nan_at {
        values[j * k + i] = byte;
        clean.values[j * k + i] = 0;
    }
    let dq = stream.clone_htod(&values).unwrap();
    let ds = stream.clone_htod(&scales).unwrap();
    let qw = QuantizedWeight::from_fp8(&stream, &dq, &ds, n, k).unwrap();
    assert_eq!(stream.clone_dtoh(qw.packed()).unwrap(), values);
    for (j, (got, want)) in stream
        .clone_dtoh(qw.scales())
        .unwrap()
        .iter()
        .zip(&scales)
        .enumerate()
    {
        if nan_rows.contains(&j) {
            assert!(got.to_f64().is_nan(), "scale of row {j}: {}", got.to_f64());
        } else {
            assert_eq!(got.to_f64(), want.to_f64(), "scale of row {j}");
        }
    }
    let gemv_tokens: &[usize] = if quick() {
        &[1, 16, 32]
    } else {
        &[1, 2, 8, 9, 16, 17, 24, 25, 32]
    };
    for &m in gemv_tokens {
        check_nan_rows(
            &ctx,
            &stream,
            &mut rng,
            &clean,
            &qw,
            &nan_rows,
            m,
            m % 2 == 1,
            Some(WEIGHT_ONLY_GEMV),
        );
    }
    // The fused epilogue's CUTLASS kernels are bf16's.
    let relu = T::DATA_TYPE == DataType::Bf16;
    for m in [1, 16, 17, 64] {
        let name = check_nan_rows(
            &ctx, &stream, &mut rng, &clean, &qw, &nan_rows, m, relu, None,
        );
        assert_eq!(name == WEIGHT_ONLY_GEMV, m <= GEMV_TOKENS, "{name}");
    }
    // The quantizer: rows holding NaN or -Inf get the scale NaN and NaN bytes (its host
    // definition), and give NaN through the GEMV and the CUTLASS kernels.
    let (n, k) = (64, 512);
    let mut w: Vec<T> = (0..n * k)
        .map(|_| T::from_f64(rng.random_range(-1.0..1.0)))
        .collect();
    w[5 * k + 100] = T::from_f64(f64::NAN);
    w[40 * k] = T::from_f64(f64::NEG_INFINITY);
    let nan_rows = [5, 40];
    let dw = stream.clone_htod(&w).unwrap();
    let qw = QuantizedWeight::quantize_fp8(&stream, &dw, n, k).unwrap();
    let host = quantize_fp8_host(&w, n, k);
    assert_eq!(stream.clone_dtoh(qw.packed()).unwrap(), host.values);
    let scales = stream.clone_dtoh(qw.scales()).unwrap();
    for (j, (got, want)) in scales.iter().zip(&host.scales).enumerate() {
        let (got, want) = (got.to_f64(), want.to_f64());
        assert!(
            got == want || (got.is_nan() && want.is_nan()),
            "scale {j}: {got}, {want}"
        );
        assert_eq!(got.is_nan(), nan_rows.contains(&j), "scale {j}");
    }
    let mut clean = host;
    for j in nan_rows {
        clean.values[j * k..(j + 1) * k].fill(0);
        clean.scales[j] = T::from_f64(1.0);
    }
    for m in [1, 17] {
        check_nan_rows(
            &ctx, &stream, &mut rng, &clean, &qw, &nan_rows, m, false, None,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bf16_fp8_nan_bytes_and_long_rows() {
    fp8_nan_bytes_and_long_rows::<bf16>();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_fp8_nan_bytes_and_long_rows() {
    fp8_nan_bytes_and_long_rows::<f16>();
}

/// The fused epilogue on every weight-only kernel that has it (bias per output feature or per
/// token, activations, per-token and per-channel scales, C), element by element against the f64
/// reference of the same epilogue over the dequantized weight; the library's choice with an
/// epilogue; and the refusals (a pinned kernel without the fusion, vectors missing or not
/// taken).
#[test]
#[ignore = "needs a CUDA GPU"]
fn fused_epilogues_on_weight_only_kernels() {
    use cutlass_gemm::reference::{HostEpilogue, Strided};
    use cutlass_gemm::{Activation, BiasAxis, Epilogue, EpilogueOperands, KernelRule, OperandName};
    let (ctx, stream) = device();
    let mut rng = rng();
    let fused: Vec<&'static str> = built_weight_only_kernels()
        .iter()
        .filter(|k| k.spec.fusion.is_fused())
        .map(|k| k.name)
        .collect();
    assert!(
        !fused.is_empty(),
        "no weight-only kernel with the fused epilogue in this build (feature weight-only)"
    );
    let epilogues = [
        Epilogue::bias().with_activation(Activation::GeluTanh),
        Epilogue::NONE
            .with_bias(BiasAxis::PerRow)
            .with_activation(Activation::Relu),
        Epilogue::rowwise().with_activation(Activation::Silu),
        Epilogue::bias(),
    ];
    let (n, k, g) = (272, 512, 128);
    for format in [
        WeightFormat::Symmetric,
        WeightFormat::ZeroPoint,
        WeightFormat::Fp8,
        WeightFormat::Int8,
    ] {
        let (w, qw): (Box<dyn HostDequantized<bf16>>, QuantizedWeight<bf16>) = if format
            .is_per_channel()
        {
            let v: Vec<bf16> = (0..n * k)
                .map(|_| bf16::from_f64(rng.random_range(-1.0..1.0)))
                .collect();
            let dv = stream.clone_htod(&v).unwrap();
            // The GPU quantizers are their host definitions bit for bit (fp8_weights,
            // int8_weights).
            if format == WeightFormat::Fp8 {
                let qw = QuantizedWeight::quantize_fp8(&stream, &dv, n, k).unwrap();
                (Box::new(quantize_fp8_host(&v, n, k)), qw)
            } else {
                let qw = QuantizedWeight::quantize_int8(&stream, &dv, n, k).unwrap();
                (Box::new(quantize_int8_host(&v, n, k)), qw)
            }
        } else {
            let w =
                HostWeight::<bf16>::random(&mut rng, n, k, g, format == WeightFormat::ZeroPoint);
            let qw = w.upload(&stream);
            (Box::new(w), qw)
        };
        let dequantized = w.dequantized();
        let of_format = |s: &cutlass_gemm::KernelSpec| s.a.ty == format.catalog().0;
        let kernels: Vec<&str> = built_weight_only_kernels()
            .iter()
            .filter(|k| k.spec.fusion.is_fused() && of_format(&k.spec))
            .map(|k| k.name)
            .collect();
        assert!(
            !kernels.is_empty(),
            "no fused {format} kernel in this build"
        );
        let named = kernels.iter().chain([&WEIGHT_ONLY_GEMV]).map(|k| Some(*k));
        for name in named.chain([None]) {
            for (i, e) in epilogues.iter().enumerate() {
                let m = [1, 17, 200][i % 3];
                // The GEMV takes up to GEMV_MAX_TOKENS.
                let m = if name == Some(WEIGHT_ONLY_GEMV) {
                    m.min(GEMV_MAX_TOKENS)
                } else {
                    m
                };
                let beta = if i == 1 { 0.5 } else { 0.0 };
                let p = WeightOnlyProblem::for_weight(m, &qw).with_scalars(1.5, beta);
                let plan = match name {
                    Some(name) => WeightOnlyGemm::<bf16>::with_kernel(&ctx, &p, name),
                    None => WeightOnlyGemm::<bf16>::new(&ctx, &p),
                }
                .unwrap();
                // Their kernels and the GEMV read a bias of the activations' type: an f32 one is
                // refused by the kernel rule.
                if e.bias.is_some() {
                    match plan.clone().with_epilogue(e.with_f32_bias()) {
                        Err(Error::KernelMismatch {
                            reason: cutlass_gemm::KernelRule::BiasType { kernel, required },
                            ..
                        }) => assert_eq!((kernel, required), (DataType::Bf16, DataType::F32)),
                        other => panic!("{:?}", other.map(|g| g.kernel_name())),
                    }
                }
                let plan = plan.with_epilogue(*e).unwrap();
                // The library's choice: the GEMV up to its tokens, a fused kernel beyond.
                let gemv = name == Some(WEIGHT_ONLY_GEMV) || (name.is_none() && m <= GEMV_TOKENS);
                assert_eq!(plan.is_gemv(), gemv, "{}", e.describe());
                assert!(
                    gemv || plan.kernel_name().contains("_evt_"),
                    "{}: {}",
                    e.describe(),
                    plan.kernel_name()
                );
                let x: Vec<bf16> = integers(&mut rng, m * k, 2);
                let c: Vec<bf16> = integers(&mut rng, m * n, 3);
                let bias_len = match e.bias {
                    Some(BiasAxis::PerRow) => m,
                    _ => n,
                };
                let bias: Vec<bf16> = integers(&mut rng, bias_len, 4);
                let rows: Vec<f32> = (0..m).map(|i| 0.5 + (i % 4) as f32 * 0.25).collect();
                let cols: Vec<f32> = (0..n).map(|j| 1.0 + (j % 3) as f32 * 0.5).collect();
                let (dx, dc, db) = (
                    stream.clone_htod(&x).unwrap(),
                    stream.clone_htod(&c).unwrap(),
                    stream.clone_htod(&bias).unwrap(),
                );
                let (drs, dcs) = (
                    stream.clone_htod(&rows).unwrap(),
                    stream.clone_htod(&cols).unwrap(),
                );
                let operands = EpilogueOperands {
                    bias: e.bias.map(|_| &db as &dyn cudarc::driver::DevicePtr<bf16>),
                    bias_f32: None,
                    row_scales: e
                        .row_scales
                        .then_some(&drs as &dyn cudarc::driver::DevicePtr<f32>),
                    col_scales: e
                        .col_scales
                        .then_some(&dcs as &dyn cudarc::driver::DevicePtr<f32>),
                };
                let mut dy = stream.clone_htod(&vec![bf16::POISON; m * n]).unwrap();
                let cin = (beta != 0.0).then_some(&dc as &dyn cudarc::driver::DevicePtr<bf16>);
                plan.run_fused(
                    &stream,
                    &dx,
                    &qw,
                    cin,
                    &mut dy,
                    &operands,
                    Workspace::Managed,
                )
                .unwrap();
                let y = stream.clone_dtoh(&dy).unwrap();
                let gp = cutlass_gemm::GemmProblem::new(m, n, k).with_scalars(1.5, beta);
                let resolve = |op| gp.resolve(op).unwrap();
                let sa = Strided::new(&x, resolve(OperandName::A), OperandName::A).unwrap();
                let sb =
                    Strided::new(&dequantized, resolve(OperandName::B), OperandName::B).unwrap();
                let sc = Strided::new(&c, resolve(OperandName::C), OperandName::C).unwrap();
                let bias64: Vec<f64> = bias.iter().map(|v| v.to_f64()).collect();
                let host = HostEpilogue {
                    activation: e.activation,
                    bias: e.bias.map(|axis| (axis, &bias64[..])),
                    row_scales: e.row_scales.then_some(&rows[..]),
                    col_scales: e.col_scales.then_some(&cols[..]),
                };
                let mut want = reference::fused(
                    &gp,
                    &sa,
                    &sb,
                    (beta != 0.0).then_some(&sc as &dyn reference::HostMatrix),
                    &host,
                )
                .unwrap();
                if gemv {
                    // The GEMV's bound before the epilogue, through its scales and activation.
                    for (idx, extra) in w.gemv_error(&p, &x).into_iter().enumerate() {
                        let (i, j) = (idx / n, idx % n);
                        let scale = if e.row_scales { rows[i] } else { 1.0 }
                            * if e.col_scales { cols[j] } else { 1.0 };
                        want.extra_error[idx] +=
                            e.activation.lipschitz() * f64::from(scale).abs() * extra;
                    }
                }
                let cmp = reference::compare(&y, &resolve(OperandName::D), &want);
                assert!(
                    cmp.passed(),
                    "{} {} m={m}: {cmp:?}",
                    plan.kernel_name(),
                    e.describe()
                );
            }
        }
        println!(
            "{} fused weight-only kernels ({format}) and the library's choice as the reference",
            kernels.len()
        );
        // Refusals.
        let p = WeightOnlyProblem::for_weight(4, &qw);
        let plain = built_weight_only_kernels()
            .iter()
            .find(|k| {
                k.spec.arch == Arch::Sm90a
                    && of_format(&k.spec)
                    && k.spec.b.ty == DataType::Bf16
                    && !k.spec.fusion.is_fused()
            })
            .unwrap()
            .name;
        match WeightOnlyGemm::<bf16>::with_kernel(&ctx, &p, plain)
            .unwrap()
            .with_epilogue(Epilogue::bias())
            .unwrap_err()
        {
            Error::KernelMismatch {
                reason: KernelRule::NoFusedEpilogue,
                ..
            } => {}
            other => panic!("{other:?}"),
        }
        let plan = WeightOnlyGemm::<bf16>::new(&ctx, &p)
            .unwrap()
            .with_epilogue(Epilogue::bias())
            .unwrap();
        let dx = stream.clone_htod(&vec![bf16::ZERO; 4 * k]).unwrap();
        let mut dy = stream.clone_htod(&vec![bf16::ZERO; 4 * n]).unwrap();
        match plan
            .run(&stream, &dx, &qw, None, &mut dy, Workspace::Managed)
            .unwrap_err()
        {
            Error::InvalidProblem {
                reason: ProblemRule::EpilogueOperandMissing { operand },
            } => assert_eq!(operand, OperandName::Bias),
            other => panic!("{other:?}"),
        }
        let scales = stream.clone_htod(&vec![1.0f32; 4]).unwrap();
        let extra = EpilogueOperands {
            bias: Some(&dx as &dyn cudarc::driver::DevicePtr<bf16>),
            bias_f32: None,
            row_scales: Some(&scales as &dyn cudarc::driver::DevicePtr<f32>),
            col_scales: None,
        };
        match plan
            .run_fused(&stream, &dx, &qw, None, &mut dy, &extra, Workspace::Managed)
            .unwrap_err()
        {
            Error::InvalidProblem {
                reason: ProblemRule::EpilogueOperandNotTaken { operand },
            } => assert_eq!(operand, OperandName::RowScales),
            other => panic!("{other:?}"),
        }
    }
}

/// The decode GEMV on every token count it takes, both activation types, both weight formats,
/// group sizes 64, 128 and k, rows that are not a multiple of 64, alpha, beta and C; against the
/// reference, and bit for bit the same on a second launch (its sums are in a fixed order).
fn gemv_on<T: WeightOnlyInput>() {
    let (ctx, stream) = device();
    let mut rng = rng();
    let tokens: &[usize] = if quick() {
        &[1, 9, 32]
    } else {
        &[1, 2, 3, 7, 8, 9, 15, 16, 17, 24, 31, 32]
    };
    // n = 272: 17 slices of 16 rows; 4096 x 4096 in 32 groups: every warp of a block has groups.
    let problems = [
        (272, 512, 64),
        (256, 1024, 128),
        (128, 384, 384),
        (4096, 4096, 128),
    ];
    for zp in [false, true] {
        for &(n, k, g) in &problems {
            let w = HostWeight::<T>::random(&mut rng, n, k, g, zp);
            let qw = w.upload(&stream);
            for &m in tokens {
                if n * k > 1 << 20 && ![1, 16, 32].contains(&m) {
                    continue;
                }
                let beta = if m % 2 == 1 { 0.5 } else { 0.0 };
                let name = check(
                    &ctx,
                    &stream,
                    &mut rng,
                    &w,
                    &qw,
                    m,
                    beta,
                    Some(WEIGHT_ONLY_GEMV),
                );
                assert_eq!(name, WEIGHT_ONLY_GEMV);
            }
            // The library's choice is the GEMV up to its tokens.
            for m in [1, GEMV_TOKENS, GEMV_TOKENS + 1] {
                let p = WeightOnlyProblem::for_weight(m, &qw);
                let gemv = m <= GEMV_TOKENS;
                assert_eq!(WeightOnlyGemm::<T>::new(&ctx, &p).unwrap().is_gemv(), gemv);
            }
            // Twice the same launch: the same bits.
            let m = 13;
            let p = WeightOnlyProblem::for_weight(m, &qw);
            let plan = WeightOnlyGemm::<T>::with_kernel(&ctx, &p, WEIGHT_ONLY_GEMV).unwrap();
            let x: Vec<T> = (0..m * k)
                .map(|_| T::from_f64(rng.random_range(-1.0..1.0)))
                .collect();
            let dx = stream.clone_htod(&x).unwrap();
            let mut runs = Vec::new();
            for _ in 0..2 {
                let mut dy = stream.clone_htod(&vec![T::POISON; m * n]).unwrap();
                plan.run(&stream, &dx, &qw, None, &mut dy, Workspace::Managed)
                    .unwrap();
                runs.push(stream.clone_dtoh(&dy).unwrap());
            }
            let bits = |v: &[T]| v.iter().map(|e| e.to_f64().to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&runs[0]), bits(&runs[1]), "the GEMV run twice");
        }
        println!(
            "GEMV {} zp {zp}: {} problems as the reference",
            T::DATA_TYPE,
            problems.len()
        );
    }
    // Refusals: more tokens than it takes, split-K.
    let w = HostWeight::<T>::random(&mut rng, 128, 256, 64, false);
    let qw = w.upload(&stream);
    let p = WeightOnlyProblem::for_weight(GEMV_MAX_TOKENS + 1, &qw);
    match WeightOnlyGemm::<T>::with_kernel(&ctx, &p, WEIGHT_ONLY_GEMV).unwrap_err() {
        Error::KernelMismatch {
            reason: cutlass_gemm::KernelRule::GemvTokens { m, max },
            ..
        } => assert_eq!((m, max), (GEMV_MAX_TOKENS + 1, GEMV_MAX_TOKENS)),
        other => panic!("{other:?}"),
    }
    let p = WeightOnlyProblem::for_weight(4, &qw);
    let plan = WeightOnlyGemm::<T>::with_kernel(&ctx, &p, WEIGHT_ONLY_GEMV).unwrap();
    assert_eq!(plan.workspace_size(), 0);
    plan.prepare().unwrap();
    match plan.with_splits(4).unwrap_err() {
        Error::KernelMismatch {
            reason: cutlass_gemm::KernelRule::SplitKNeedsStreamK { splits: 4 },
            ..
        } => {}
        other => panic!("{other:?}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bf16_decode_gemv_matches_the_reference() {
    gemv_on::<bf16>();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_decode_gemv_matches_the_reference() {
    gemv_on::<f16>();
}

/// A 4-bit weight in the plain order holds the values it was made from, bit for bit (the host's
/// own bytes), and back in the packed order the bytes the constructor packed. On a plain weight
/// the SM100 weight-only kernels of the build (feature `sm100`) run their host path on this GPU up
/// to the launch (CUTLASS's arguments with the scales' layout, can_implement, the TMA
/// descriptors); the launch is refused before any FFI call.
#[test]
#[ignore = "needs a CUDA GPU"]
fn plain_order_round_trips_and_sm100_kernels_run_their_host_path() {
    use cutlass_gemm::{DeviceInfo, WeightOrder};
    let (ctx, stream) = device();
    let mut rng = rng();
    let (n, k, group) = (256, 512, 128);
    let mut plain_weights = Vec::new();
    for zp in [false, true] {
        let host = HostWeight::<bf16>::random(&mut rng, n, k, group, zp);
        let w = host.upload(&stream);
        assert_eq!(w.order(), WeightOrder::Packed);
        let packed = stream.clone_dtoh(w.packed()).unwrap();
        let mut plain = w;
        plain.set_order(&stream, WeightOrder::Plain).unwrap();
        assert_eq!(plain.order(), WeightOrder::Plain);
        assert!(
            stream.clone_dtoh(plain.packed()).unwrap() == host.values,
            "plain order: not the values the weight was made from (zero points: {zp})"
        );
        let mut back = plain;
        back.set_order(&stream, WeightOrder::Packed).unwrap();
        assert!(
            stream.clone_dtoh(back.packed()).unwrap() == packed,
            "packed again: not the constructor's bytes (zero points: {zp})"
        );
        back.set_order(&stream, WeightOrder::Plain).unwrap();
        plain_weights.push(back);
    }
    // FP8 weights have the plain order only.
    let w16: Vec<bf16> = integers(&mut rng, n * k, 3);
    let mut fp8 =
        QuantizedWeight::quantize_fp8(&stream, &stream.clone_htod(&w16).unwrap(), n, k).unwrap();
    assert_eq!(fp8.order(), WeightOrder::Plain);
    assert!(matches!(
        fp8.set_order(&stream, WeightOrder::Packed).unwrap_err(),
        Error::InvalidProblem {
            reason: ProblemRule::Weight {
                rule: WeightRule::Order { .. }
            }
        }
    ));
    // Refused, the weight is unchanged.
    assert_eq!(fp8.order(), WeightOrder::Plain);
    let info = DeviceInfo::query(&ctx).unwrap();
    let kernels: Vec<_> = built_weight_only_kernels()
        .iter()
        .filter(|k| !k.spec.arch.runs_on(info.compute_capability))
        .collect();
    assert!(
        !kernels.is_empty(),
        "this build has no weight-only kernel for another architecture (feature sm100)"
    );
    let m = 64;
    let x = stream
        .clone_htod(&integers::<bf16>(&mut rng, m * k, 3))
        .unwrap();
    let mut y = stream.alloc_zeros::<bf16>(m * n).unwrap();
    for kernel in kernels {
        let zp = kernel.spec.mixed_input.unwrap().mode.has_zeros();
        let w = &plain_weights[usize::from(zp)];
        let p = WeightOnlyProblem::for_weight(m, w);
        assert_eq!(p.order, WeightOrder::Plain);
        let g = WeightOnlyGemm::<bf16>::plan_any_arch(info, &p, kernel.name)
            .unwrap_or_else(|e| panic!("{}: {e}", kernel.name));
        g.prepare()
            .unwrap_or_else(|e| panic!("{}: host path: {e}", kernel.name));
        match g.run(&stream, &x, w, None, &mut y, Workspace::Managed) {
            Err(Error::ArchMismatch { kernel: name, .. }) => assert_eq!(name, kernel.name),
            other => panic!("{}: {other:?}", kernel.name),
        }
        // The packed weight is refused by the plan's order.
        let packed = WeightOnlyProblem::for_weight(m, w).with_order(WeightOrder::Packed);
        assert!(WeightOnlyGemm::<bf16>::plan_any_arch(info, &packed, kernel.name).is_err());
        println!("{}: host path ran, launch refused", kernel.name);
    }
}
