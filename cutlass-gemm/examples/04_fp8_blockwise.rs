//! FP8 GEMM with blockwise scales on Hopper: the recipe of `shared/seeds/triton-2d-block-fp8-gemm.md`
//! (DeepSeek-V3): activations `X[m, k]` quantized to e4m3 with one f32 scale per 1x128 group,
//! weights `W[n, k]` with one per 128x128 block, then `Y = X · Wᵀ` in bf16 with the scales applied
//! to the f32 accumulator once per 128-deep k-block.
//!
//! With a Hopper GPU: quantizes bf16 inputs on the GPU (scales written M-/N-major, the order the
//! kernel reads), runs the GEMM, and checks every element of Y against the f64 reference on the
//! host-dequantized operands. Without one: runs the host quantizer and reference on a small
//! problem and says the GPU part was skipped.
//!
//! `cargo run --release --example 04_fp8_blockwise [-- m n k]`

use anyhow::{ensure, Result};
use cudarc::driver::CudaContext;
use cutlass_gemm::formats::scale_layout::ScaleMajor;
use cutlass_gemm::numeric::E4M3;
use cutlass_gemm::quantize::host;
use cutlass_gemm::quantize::{self, Fp8Block};
use cutlass_gemm::{reference, BlockwiseGemm, Element, GemmProblem, Workspace};
use half::bf16;

fn values(len: usize, scale: f32, seed: &mut u64) -> Vec<f32> {
    (0..len)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (((*seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0) as f32 * scale
        })
        .collect()
}

fn main() -> Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (m, n, k) = match args[..] {
        [m, n, k] => (m, n, k),
        _ => (2048, 1536, 4096),
    };
    let mut seed = 7;
    let x = values(m * k, 4.0, &mut seed);
    let w = values(n * k, 0.02, &mut seed);
    let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
    let wb: Vec<bf16> = w.iter().map(|&v| bf16::from_f32(v)).collect();

    // Host: the recipe's quantization and the reference on the dequantized operands.
    let host = |rows: usize, cols: usize| (rows.min(256), cols.min(1024));
    let problem = GemmProblem::new(m, n, k);
    if !cutlass_gemm::cuda_available() {
        let (hm, hk) = host(m, k);
        let hn = n.min(256);
        let xs: Vec<f32> = (0..hm * hk)
            .map(|i| xb[(i / hk) * k + i % hk].to_f32())
            .collect();
        let ws: Vec<f32> = (0..hn * hk)
            .map(|i| wb[(i / hk) * k + i % hk].to_f32())
            .collect();
        let (qx, sx) = host::quantize_fp8_blockwise(&xs, hm, hk, 1, 128);
        let (qw, sw) = host::quantize_fp8_blockwise(&ws, hn, hk, 128, 128);
        let p = GemmProblem::new(hm, hn, hk);
        let a = host::dequantize_fp8_blockwise(&qx, &sx, hm, hk, 1, 128);
        let b = host::dequantize_fp8_blockwise(&qw, &sw, hn, hk, 128, 128);
        let r = reference::gemm(&p, &a, &b, None::<&[bf16]>)?;
        let exact = {
            let xa: Vec<f64> = xs.iter().map(|&v| v as f64).collect();
            let wa: Vec<f64> = ws.iter().map(|&v| v as f64).collect();
            reference::gemm(&p, &xa, &wa, None::<&[bf16]>)?
        };
        let rel = r
            .value
            .iter()
            .zip(&exact.value)
            .map(|(q, e)| (q - e).abs())
            .fold(0.0, f64::max)
            / exact.value.iter().map(|v| v.abs()).fold(0.0, f64::max);
        println!("No CUDA GPU found: skipping the GPU GEMM.");
        println!(
            "Host recipe on {hm} x {hn} x {hk}: {} A scales, {} B scales; FP8 quantization error of Y: {rel:.2e} of max |Y|",
            sx.len(),
            sw.len()
        );
        return Ok(());
    }

    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let (dx, dw) = (stream.clone_htod(&xb)?, stream.clone_htod(&wb)?);
    let qa =
        quantize::quantize_fp8_blockwise(&stream, &dx, m, k, Fp8Block::Group1x128, ScaleMajor::MN)?;
    let qb = quantize::quantize_fp8_blockwise(
        &stream,
        &dw,
        n,
        k,
        Fp8Block::Block128x128,
        ScaleMajor::MN,
    )?;
    let g = BlockwiseGemm::<E4M3, E4M3, bf16>::new(&ctx, &problem)?;
    println!("Kernel: {}", g.kernel_name());
    let mut y = stream.alloc_zeros::<bf16>(m * n)?;
    g.run_tensors(&stream, &qa, &qb, None, &mut y, Workspace::Managed)?;
    stream.synchronize()?;
    let t = std::time::Instant::now();
    let iters = 20;
    for _ in 0..iters {
        g.run_tensors(&stream, &qa, &qb, None, &mut y, Workspace::Managed)?;
    }
    stream.synchronize()?;
    let secs = t.elapsed().as_secs_f64() / iters as f64;
    let yh = stream.clone_dtoh(&y)?;

    // Reference: the host quantizer (bit-exact with the GPU's) and the f64 GEMM.
    let xf: Vec<f32> = xb.iter().map(|v| v.to_f32()).collect();
    let wf: Vec<f32> = wb.iter().map(|v| v.to_f32()).collect();
    let (qx, sx) = host::quantize_fp8_blockwise(&xf, m, k, 1, 128);
    let (qw, sw) = host::quantize_fp8_blockwise(&wf, n, k, 128, 128);
    let a = host::dequantize_fp8_blockwise(&qx, &sx, m, k, 1, 128);
    let b = host::dequantize_fp8_blockwise(&qw, &sw, n, k, 128, 128);
    let r = reference::gemm(&problem, &a, &b, None::<&[bf16]>)?;
    // Bound (tests/gpu/fp8.rs explains it): output rounding plus Hopper's ~14-bit FP8 accumulation
    // inside each 128-deep block and f32 across blocks.
    let mut worst = 0.0f64;
    for (i, (&got, (&want, &mag))) in yh.iter().zip(r.value.iter().zip(&r.magnitude)).enumerate() {
        let bound = 2.0 * bf16::UNIT_ROUNDOFF * want.abs()
            + (2f64.powi(-6) + 2.0 * k as f64 * f32::UNIT_ROUNDOFF) * mag
            + 1e-30;
        let err = (got.to_f64() - want).abs();
        ensure!(
            err <= bound,
            "Y[{}, {}] = {got}, reference {want}",
            i / n,
            i % n
        );
        worst = worst.max(err / bound);
    }
    println!(
        "{m} x {n} x {k}: {} elements checked, worst error / bound {worst:.4}; {:.1} TFLOP/s (wall clock over {iters} launches, not a benchmark)",
        m * n,
        problem.flops() / secs / 1e12
    );
    Ok(())
}
