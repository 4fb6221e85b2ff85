//! Helpers shared by the GPU tests.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};
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
    let built: std::collections::HashSet<&str> = cutlass_gemm::built_kernels()
        .iter()
        .map(|k| k.name)
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

/// A random generator seeded from `CUTLASS_RS_TEST_SEED` or fresh (the seed is printed).
pub fn rng() -> StdRng {
    let seed = std::env::var("CUTLASS_RS_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    println!("seed {seed} (CUTLASS_RS_TEST_SEED={seed} replays)");
    StdRng::seed_from_u64(seed)
}
