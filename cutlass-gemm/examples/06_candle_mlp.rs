//! A transformer MLP block at Llama-3-8B sizes (hidden 4096, intermediate 14336) in candle:
//! `y = down(silu(gate(x)) * up(x))`, with candle's own matmul (cuBLAS), with this crate's bf16
//! GEMMs (`cutlass_gemm::candle::matmul`), with its `Linear` layers whose epilogue applies the
//! SiLU (`cutlass_gemm::candle::Linear`: one elementwise pass fewer), with its gated layer that
//! runs gate, up, SiLU and product as one GEMM (`cutlass_gemm::candle::GatedLinear`: SwiGLU in the
//! epilogue, the `tokens x 2·intermediate` intermediate never in memory), with FP8
//! blockwise-quantized weights
//! (`cutlass_gemm::candle::Fp8Linear`) and, in a build with the `weight-only` feature, with 4-bit
//! weights in groups of 128 (`cutlass_gemm::candle::WeightOnlyLinear`); outputs compared with
//! candle's and times side by side.
//!
//! `cargo run --release --features candle,weight-only --example 06_candle_mlp`
//! Times: median of 20 timed runs of the whole block after 3 warm-up runs, CUDA events on candle's
//! stream; the FP8 time includes quantizing the activations of each GEMM (the weights are
//! quantized once, before timing, as are the 4-bit ones).

use std::sync::Arc;

use anyhow::Result;
use candle_core::{DType, Device, Module, Tensor};
use cudarc::driver::CudaStream;
use cutlass_gemm::candle::{matmul, Fp8Linear, GatedLinear, Linear, WeightOnlyLinear};
use cutlass_gemm::{Activation, WeightFormat};

#[path = "common/timing.rs"]
mod timing;

const HIDDEN: usize = 4096;
const INTERMEDIATE: usize = 14336;
const RUNS: usize = 20;

/// Median milliseconds of `f` over RUNS runs after 3 warm-up runs (see `common/timing.rs`).
fn time(stream: &Arc<CudaStream>, f: &mut dyn FnMut() -> Result<Tensor>) -> Result<f64> {
    timing::median_ms(stream, RUNS, &mut || f().map(drop))
}

/// max |a - b| and rms(a - b) / rms(b), in f32.
fn error(a: &Tensor, b: &Tensor) -> Result<(f32, f32)> {
    let a = a.to_dtype(DType::F32)?;
    let b = b.to_dtype(DType::F32)?;
    let d = (&a - &b)?;
    let max = d.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
    let rms = |t: &Tensor| -> Result<f32> { Ok(t.sqr()?.mean_all()?.to_scalar::<f32>()?.sqrt()) };
    Ok((max, rms(&d)? / rms(&b)?))
}

fn main() -> Result<()> {
    anyhow::ensure!(
        cutlass_gemm::cuda_available(),
        "no CUDA GPU found: the example needs one"
    );
    let dev = Device::new_cuda(0)?;
    let stream = dev.as_cuda_device()?.cuda_stream();
    println!(
        "device: {}; Llama-3-8B MLP: hidden {HIDDEN}, intermediate {INTERMEDIATE}, bf16",
        stream.context().name()?
    );
    // Weights like a trained layer's: N(0, 0.02).
    let w = |n: usize, k: usize| -> Result<Tensor> {
        Ok(Tensor::randn(0f32, 0.02, (n, k), &dev)?.to_dtype(DType::BF16)?)
    };
    let (wg, wu, wd) = (
        w(INTERMEDIATE, HIDDEN)?,
        w(INTERMEDIATE, HIDDEN)?,
        w(HIDDEN, INTERMEDIATE)?,
    );
    let (qg, qu, qd) = (
        Fp8Linear::new(&wg, None)?,
        Fp8Linear::new(&wu, None)?,
        Fp8Linear::new(&wd, None)?,
    );
    // 4-bit weights (symmetric, groups of 128) when the build has the weight-only kernels.
    let int4 = if !cutlass_gemm::sys::WEIGHT_GEMV_BUILT {
        println!("(no 4-bit column: build with the `weight-only` feature for it)");
        None
    } else {
        let q = |w: &Tensor| WeightOnlyLinear::quantize(w, None, 128, WeightFormat::Symmetric);
        Some((q(&wg)?, q(&wu)?, q(&wd)?))
    };
    let (wgt, wut, wdt) = (wg.t()?, wu.t()?, wd.t()?);
    let (lg, lu, ld) = (
        Linear::new(wg.clone(), None)?.with_activation(Activation::Silu),
        Linear::new(wu.clone(), None)?,
        Linear::new(wd.clone(), None)?,
    );
    let gated = GatedLinear::new(&wg, &wu, None, Activation::Silu)?;

    println!(
        "{:>7} {:>12} {:>12} {:>8} {:>12} {:>8} {:>12} {:>8} {:>12} {:>8} {:>12} {:>8}   {:>22} {:>22} {:>22} {:>22} {:>22}",
        "tokens",
        "candle (ms)",
        "cutlass (ms)",
        "speedup",
        "fused (ms)",
        "speedup",
        "gated (ms)",
        "speedup",
        "fp8 (ms)",
        "speedup",
        "int4 (ms)",
        "speedup",
        "cutlass vs candle",
        "fused vs candle",
        "gated vs candle",
        "fp8 vs candle",
        "int4 vs candle"
    );
    for tokens in [1usize, 16, 128, 512, 2048, 4096] {
        let x = Tensor::randn(0f32, 1.0, (tokens, HIDDEN), &dev)?.to_dtype(DType::BF16)?;
        let mut candle_mlp = || -> Result<Tensor> {
            let h = (x.matmul(&wgt)?.silu()? * x.matmul(&wut)?)?;
            Ok(h.matmul(&wdt)?)
        };
        let mut cutlass_mlp = || -> Result<Tensor> {
            let h = (matmul(&x, &wgt)?.silu()? * matmul(&x, &wut)?)?;
            Ok(matmul(&h, &wdt)?)
        };
        let mut fused_mlp = || -> Result<Tensor> {
            let h = (lg.forward(&x)? * lu.forward(&x)?)?;
            Ok(ld.forward(&h)?)
        };
        let mut gated_mlp = || -> Result<Tensor> { Ok(ld.forward(&gated.forward(&x)?)?) };
        let mut fp8_mlp = || -> Result<Tensor> {
            let h = (qg.forward(&x)?.silu()? * qu.forward(&x)?)?;
            Ok(qd.forward(&h)?)
        };
        let mut int4_mlp = || -> Result<Tensor> {
            let (g, u, d) = int4.as_ref().expect("timed only when built");
            let h = (g.forward(&x)?.silu()? * u.forward(&x)?)?;
            Ok(d.forward(&h)?)
        };
        let (y_candle, y_cutlass, y_fp8) = (candle_mlp()?, cutlass_mlp()?, fp8_mlp()?);
        let (y_fused, y_gated) = (fused_mlp()?, gated_mlp()?);
        let (max_b, rel_b) = error(&y_cutlass, &y_candle)?;
        let (max_f, rel_f) = error(&y_fused, &y_candle)?;
        let (max_g, rel_g) = error(&y_gated, &y_candle)?;
        let (max_q, rel_q) = error(&y_fp8, &y_candle)?;
        let t_candle = time(&stream, &mut candle_mlp)?;
        let t_cutlass = time(&stream, &mut cutlass_mlp)?;
        let t_fused = time(&stream, &mut fused_mlp)?;
        let t_gated = time(&stream, &mut gated_mlp)?;
        let t_fp8 = time(&stream, &mut fp8_mlp)?;
        let int4_cols = if int4.is_some() {
            let y_int4 = int4_mlp()?;
            let (max_4, rel_4) = error(&y_int4, &y_candle)?;
            let t_int4 = time(&stream, &mut int4_mlp)?;
            (
                format!("{t_int4:>12.3} {:>7.2}x", t_candle / t_int4),
                format!("   max {max_4:>8.2e} rms {rel_4:>7.1e}"),
            )
        } else {
            (format!("{:>12} {:>8}", "-", "-"), String::new())
        };
        println!(
            "{tokens:>7} {t_candle:>12.3} {t_cutlass:>12.3} {:>7.2}x {t_fused:>12.3} {:>7.2}x {t_gated:>12.3} {:>7.2}x {t_fp8:>12.3} {:>7.2}x {}   max {max_b:>8.2e} rms {rel_b:>7.1e}   max {max_f:>8.2e} rms {rel_f:>7.1e}   max {max_g:>8.2e} rms {rel_g:>7.1e}   max {max_q:>8.2e} rms {rel_q:>7.1e}{}",
            t_candle / t_cutlass,
            t_candle / t_fused,
            t_candle / t_gated,
            t_candle / t_fp8,
            int4_cols.0,
            int4_cols.1,
        );
    }
    println!(
        "(errors: max |y - y_candle| and rms(y - y_candle) / rms(y_candle) of the block's output)"
    );
    Ok(())
}
