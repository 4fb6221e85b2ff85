//! bf16 GEMM throughput of this crate and of cuBLAS, side by side in one process.
//!
//! `cargo run --release --example 02_bench [-- SIZE...]` (default sizes 4096 and 8192, square).
//! Layout: A row-major, B column-major (both K-contiguous), D row-major; cuBLAS gets the same
//! memory as Dᵀ = Bᵀ·Aᵀ in its column-major convention (`transa = T`, `transb = N`).
//! Timing: CUDA events around batches of launches after warm-up, inputs rotated over enough
//! buffers to exceed the L2 cache, the two libraries alternated round by round, median of rounds.

use std::sync::Arc;

use anyhow::{Context, Result};
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, Gemm as _, GemmConfig};
use cudarc::driver::{sys, CudaContext, CudaSlice, CudaStream};
use cutlass_gemm::{Gemm, GemmProblem, Workspace};
use half::bf16;

const ROUNDS: usize = 15;
const L2_BYTES: usize = 64 << 20;

fn fill(stream: &Arc<CudaStream>, len: usize, seed: u64) -> Result<CudaSlice<bf16>> {
    let mut s = seed;
    let host: Vec<bf16> = (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            bf16::from_f64(((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0)
        })
        .collect();
    Ok(stream.clone_htod(&host)?)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() -> Result<()> {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse())
        .collect::<Result<_, _>>()?;
    let sizes = if sizes.is_empty() {
        vec![4096, 8192]
    } else {
        sizes
    };
    anyhow::ensure!(
        cutlass_gemm::cuda_available(),
        "no CUDA GPU found: the benchmark needs one"
    );
    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let blas = CudaBlas::new(stream.clone()).context("cuBLAS (libcublas.so must be loadable)")?;
    println!(
        "device: {} (cc {:?})",
        ctx.name()?,
        ctx.compute_capability()?
    );
    println!(
        "{:>6} {:>6} {:>6}  {:>12} {:>12} {:>7}  kernel",
        "m", "n", "k", "cutlass TF/s", "cuBLAS TF/s", "ratio"
    );
    for &s in &sizes {
        let (m, n, k) = (s, s, s);
        let p = GemmProblem::new(m, n, k);
        let gemm = Gemm::<bf16, bf16, bf16>::new(&ctx, &p)?;
        let bytes = (m * k + k * n) * 2;
        let sets = (2 * L2_BYTES).div_ceil(bytes).clamp(1, 8);
        let a: Vec<_> = (0..sets)
            .map(|i| fill(&stream, m * k, 1 + i as u64))
            .collect::<Result<_>>()?;
        let b: Vec<_> = (0..sets)
            .map(|i| fill(&stream, k * n, 101 + i as u64))
            .collect::<Result<_>>()?;
        let mut d_ours = stream.alloc_zeros::<bf16>(m * n)?;
        let mut d_blas = stream.alloc_zeros::<bf16>(m * n)?;
        let cfg = GemmConfig {
            transa: cublasOperation_t::CUBLAS_OP_T,
            transb: cublasOperation_t::CUBLAS_OP_N,
            m: n as i32,
            n: m as i32,
            k: k as i32,
            alpha: bf16::ONE,
            lda: k as i32,
            ldb: k as i32,
            beta: bf16::ZERO,
            ldc: n as i32,
        };
        let flops = p.flops();
        let iters = ((2e13 / flops) as usize).clamp(3, 50);
        let time = |f: &mut dyn FnMut(usize) -> Result<()>| -> Result<f64> {
            let start = ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
            let end = ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
            start.record(&stream)?;
            for i in 0..iters {
                f(i % sets)?;
            }
            end.record(&stream)?;
            end.synchronize()?;
            Ok(start.elapsed_ms(&end)? as f64 / 1e3 / iters as f64)
        };
        let mut ours = |i: usize| -> Result<()> {
            gemm.run(&stream, &a[i], &b[i], None, &mut d_ours, Workspace::Managed)?;
            Ok(())
        };
        let mut theirs = |i: usize| -> Result<()> {
            unsafe { blas.gemm(cfg, &b[i], &a[i], &mut d_blas) }?;
            Ok(())
        };
        // Warm-up, then alternate.
        time(&mut ours)?;
        time(&mut theirs)?;
        let (mut t_ours, mut t_blas) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            t_ours.push(time(&mut ours)?);
            t_blas.push(time(&mut theirs)?);
        }
        let (to, tb) = (median(t_ours), median(t_blas));
        // Same inputs (the last set) in both outputs: compare them.
        let last = (iters - 1) % sets;
        gemm.run(
            &stream,
            &a[last],
            &b[last],
            None,
            &mut d_ours,
            Workspace::Managed,
        )?;
        unsafe { blas.gemm(cfg, &b[last], &a[last], &mut d_blas) }?;
        let x = stream.clone_dtoh(&d_ours)?;
        let y = stream.clone_dtoh(&d_blas)?;
        let max_rel = x
            .iter()
            .zip(&y)
            .map(|(p, q)| (p.to_f64() - q.to_f64()).abs() / q.to_f64().abs().max(1.0))
            .fold(0.0, f64::max);
        println!(
            "{m:>6} {n:>6} {k:>6}  {:>12.1} {:>12.1} {:>7.3}  {}  (max rel diff vs cuBLAS {max_rel:.2e})",
            flops / to / 1e12,
            flops / tb / 1e12,
            tb / to,
            gemm.kernel_name()
        );
    }
    Ok(())
}
