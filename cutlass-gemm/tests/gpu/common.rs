//! Helpers shared by the GPU tests.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use cutlass_gemm::{reference, Gemm, GemmProblem, Workspace};
use half::bf16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Device 0 and its default stream; fails (never skips) when no GPU is there, so a GPU test asked
/// to run on a machine without one cannot pass.
pub fn device() -> (Arc<CudaContext>, Arc<CudaStream>) {
    assert!(
        cutlass_gemm::cuda_available(),
        "this test needs a CUDA GPU (none found)"
    );
    let ctx = CudaContext::new(0).expect("CUDA context");
    let stream = ctx.default_stream();
    (ctx, stream)
}

/// Device 0 after checking that this build holds every kernel of the `gpu-tests` preset: the GEMM
/// tests run kernels by name and every built kernel of a family, and a build without them would
/// leave cases unchecked. Fails with the command that builds them, unless
/// `CUTLASS_RS_GPU_TESTS_PARTIAL=1` says the run is knowingly partial (a quicker build for a
/// change that touches some families only): then it prints what is missing, and the tests that
/// name a missing kernel still fail.
pub fn gemm_device() -> (Arc<CudaContext>, Arc<CudaStream>) {
    // The plain, grouped and weight-only registries.
    let built: std::collections::HashSet<&str> = cutlass_gemm::built_kernels()
        .iter()
        .map(|k| k.name)
        .chain(cutlass_gemm::built_grouped_kernels().iter().map(|k| k.name))
        .chain(
            cutlass_gemm::built_weight_only_kernels()
                .iter()
                .map(|k| k.name),
        )
        .collect();
    let missing: Vec<String> = cutlass_gemm_catalog::catalog::all()
        .into_iter()
        .filter(|s| cutlass_gemm_catalog::Preset::GpuTests.contains(s))
        .map(|s| s.name())
        .filter(|n| !built.contains(n.as_str()))
        .collect();
    if !missing.is_empty() && std::env::var("CUTLASS_RS_GPU_TESTS_PARTIAL").as_deref() == Ok("1") {
        println!(
            "PARTIAL RUN (CUTLASS_RS_GPU_TESTS_PARTIAL=1): {} kernels of the gpu-tests preset are not in this build, the first {}",
            missing.len(),
            missing[0]
        );
        return device();
    }
    assert!(
        missing.is_empty(),
        "{} kernels of the gpu-tests preset are not in this build (the first: {}). Build the GPU \
         tests with them:\n    CUTLASS_RS_KERNELS=gpu-tests cargo test -p cutlass-gemm --release \
         --test gpu --no-run",
        missing.len(),
        missing[0]
    );
    device()
}

/// `CUTLASS_RS_GPU_TESTS_QUICK=1`: the tests that run every kernel of a family run each on one
/// problem of their sweep (and the fused ones on two epilogues), for the runs under
/// compute-sanitizer, whose tools slow every launch by orders of magnitude.
pub fn quick() -> bool {
    std::env::var("CUTLASS_RS_GPU_TESTS_QUICK").as_deref() == Ok("1")
}

/// `CUTLASS_RS_GPU_TESTS_KERNEL=text`: the weight-only tests that run every kernel run only those
/// whose names contain `text`, and leave out their launches through the library's choice: one
/// kernel per process, for compute-sanitizer's racecheck, whose host memory grows by gigabytes with
/// each weight-only kernel it checks. `None` when unset.
pub fn kernel_filter() -> Option<String> {
    std::env::var("CUTLASS_RS_GPU_TESTS_KERNEL").ok()
}

/// A random generator seeded from `CUTLASS_RS_TEST_SEED` or fresh (the seed is printed).
pub fn rng() -> StdRng {
    let seed = std::env::var("CUTLASS_RS_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    println!("seed {seed} (CUTLASS_RS_TEST_SEED={seed} replays)");
    StdRng::seed_from_u64(seed)
}

/// Values in {-1, 0, 1}: products of them accumulate exactly in f32.
pub fn ternary(rng: &mut StdRng, len: usize) -> Vec<bf16> {
    (0..len)
        .map(|_| bf16::from_f32(rng.random_range(-1i32..=1) as f32))
        .collect()
}

/// The bf16 operands of one TN problem on one device, with inputs in {-1, 0, 1}, and the expected D:
/// the f64 reference rounded once, which the kernels' exact f32 accumulation must equal bit for
/// bit.
pub struct ExactOperands {
    pub a: CudaSlice<bf16>,
    pub b: CudaSlice<bf16>,
    pub d: CudaSlice<bf16>,
    pub workspace: CudaSlice<u8>,
    pub expected: Vec<u16>,
}

impl ExactOperands {
    /// Random operands for `p` on `stream`'s device and a workspace of `ws` bytes.
    pub fn new(
        stream: &Arc<CudaStream>,
        rng: &mut StdRng,
        p: &GemmProblem,
        ws: usize,
    ) -> ExactOperands {
        let a = ternary(rng, p.m * p.k);
        let b = ternary(rng, p.k * p.n);
        let r = reference::gemm::<bf16, bf16, bf16>(p, &a, &b, None).unwrap();
        ExactOperands {
            a: stream.clone_htod(&a).unwrap(),
            b: stream.clone_htod(&b).unwrap(),
            d: stream.alloc_zeros(p.m * p.n).unwrap(),
            workspace: stream.alloc_zeros(ws.max(16)).unwrap(),
            expected: r
                .value
                .iter()
                .map(|&v| bf16::from_f64(v).to_bits())
                .collect(),
        }
    }

    /// Poisons D, launches, and checks every element of D bit for bit.
    pub fn run_and_check(
        &mut self,
        gemm: &Gemm<bf16, bf16, bf16>,
        stream: &Arc<CudaStream>,
        what: &str,
    ) {
        let poison = vec![bf16::from_bits(0x7fc1); self.expected.len()];
        stream.memcpy_htod(&poison, &mut self.d).unwrap();
        gemm.run(
            stream,
            &self.a,
            &self.b,
            None,
            &mut self.d,
            Workspace::Buffer(&mut self.workspace),
        )
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        let d = stream.clone_dtoh(&self.d).unwrap();
        let wrong = d
            .iter()
            .zip(&self.expected)
            .filter(|(x, y)| x.to_bits() != **y)
            .count();
        assert_eq!(
            wrong,
            0,
            "{what}: {wrong} of {} elements differ from the reference",
            d.len()
        );
    }
}

/// The bound of an FP8 GEMM on inexact data: D's rounding (twice), 2^-6 of the magnitude (Hopper's
/// FP8 MMA keeps fewer bits than f32 while it accumulates within a k-block) and f32 accumulation
/// over `k` terms.
pub fn loose_bound<TD: cutlass_gemm::Element>(reference: f64, magnitude: f64, k: usize) -> f64 {
    2.0 * TD::UNIT_ROUNDOFF * reference.abs()
        + (2f64.powi(-6) + 2.0 * k as f64 * <f32 as cutlass_gemm::Element>::UNIT_ROUNDOFF)
            * magnitude
        + 1e-30
}
