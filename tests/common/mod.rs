//! Helpers shared by the GPU tests.
#![allow(dead_code)]

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Device 0 and its default stream; fails (never skips) when no GPU is there, so a GPU test asked
/// to run on a machine without one cannot pass.
pub fn device() -> (Arc<CudaContext>, Arc<CudaStream>) {
    assert!(
        cutlass::cuda_available(),
        "this test needs a CUDA GPU (none found)"
    );
    let ctx = CudaContext::new(0).expect("CUDA context");
    let stream = ctx.default_stream();
    (ctx, stream)
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
