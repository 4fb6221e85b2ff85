//! Bandwidth of the GPU quantizers next to the device-to-device copy bandwidth, in one run.
//!
//! `cargo run --release --example 03_quantize_bench`
//! For bf16 inputs of 8192 x 8192 and 16 x 8192: bytes read plus written (input, packed output,
//! scales; the two-pass NVFP4 reads its input twice) over the median time of 20 timed launches
//! after warm-up, CUDA events. The copy
//! reference is `cuMemcpyDtoDAsync` of the same 8192 x 8192 bf16 buffer (read + write).

use std::sync::Arc;

use anyhow::Result;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use cutlass_gemm::formats::scale_layout::ScaleMajor;
use cutlass_gemm::numeric::{E2M1, E2M3, E4M3};
use cutlass_gemm::quantize::{self, Fp8Block, Fp8BlockwiseTensor, MxTensor, Nvfp4Tensor};
use half::bf16;

#[path = "common/timing.rs"]
mod timing;

const RUNS: usize = 20;

/// A quantizer under test: its name, the bytes it reads and writes, and a launch.
type Case<'a> = (&'static str, f64, Box<dyn FnMut() -> Result<()> + 'a>);

/// Median seconds of `f` (see `common/timing.rs`).
fn time(stream: &Arc<CudaStream>, f: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
    Ok(timing::median_ms(stream, RUNS, f)? / 1e3)
}

fn main() -> Result<()> {
    anyhow::ensure!(
        cutlass_gemm::cuda_available(),
        "no CUDA GPU found: the benchmark needs one"
    );
    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    println!("device: {}", ctx.name()?);
    let big = 8192 * 8192;
    let src: CudaSlice<bf16> = stream.alloc_zeros(big)?;
    let mut dst: CudaSlice<bf16> = stream.alloc_zeros(big)?;
    let t_copy = time(&stream, &mut || Ok(stream.memcpy_dtod(&src, &mut dst)?))?;
    let copy_bw = 2.0 * (big * 2) as f64 / t_copy;
    println!(
        "device-to-device copy, 8192 x 8192 bf16: {:.0} GB/s (read + write)",
        copy_bw / 1e9
    );
    println!(
        "{:>12} {:>19} {:>10} {:>10} {:>9}",
        "shape", "quantizer", "time (us)", "GB/s", "% copy"
    );
    for (rows, k) in [(8192usize, 8192usize), (16, 8192)] {
        let host: Vec<bf16> = (0..rows * k)
            .map(|i| bf16::from_f32(((i * 7919) % 1000) as f32 / 250.0 - 2.0))
            .collect();
        let x = stream.clone_htod(&host)?;
        let n = (rows * k) as f64;
        let sf_bytes =
            |vec: usize| (rows.div_ceil(128) * 128 * k.div_ceil(vec).div_ceil(4) * 4) as f64;
        let (s, xr) = (&stream, &x);
        let cases: Vec<Case> = vec![
            (
                "fp8 1x128 K-major",
                n * 2.0 + n + (rows * k.div_ceil(128) * 4) as f64,
                {
                    let mut o =
                        Fp8BlockwiseTensor::alloc(s, rows, k, Fp8Block::Group1x128, ScaleMajor::K)?;
                    Box::new(move || Ok(quantize::quantize_fp8_blockwise_into(s, xr, &mut o)?))
                },
            ),
            (
                "fp8 1x128",
                n * 2.0 + n + (rows * k.div_ceil(128) * 4) as f64,
                {
                    let mut o = Fp8BlockwiseTensor::alloc(
                        s,
                        rows,
                        k,
                        Fp8Block::Group1x128,
                        ScaleMajor::MN,
                    )?;
                    Box::new(move || Ok(quantize::quantize_fp8_blockwise_into(s, xr, &mut o)?))
                },
            ),
            (
                "fp8 128x128",
                n * 2.0 + n + (rows.div_ceil(128) * k.div_ceil(128) * 4) as f64,
                {
                    let mut o = Fp8BlockwiseTensor::alloc(
                        s,
                        rows,
                        k,
                        Fp8Block::Block128x128,
                        ScaleMajor::MN,
                    )?;
                    Box::new(move || Ok(quantize::quantize_fp8_blockwise_into(s, xr, &mut o)?))
                },
            ),
            ("mxfp8 e4m3", n * 2.0 + n + sf_bytes(32), {
                let mut o = MxTensor::<E4M3>::alloc(s, rows, k)?;
                Box::new(move || Ok(quantize::quantize_mx_into(s, xr, &mut o)?))
            }),
            ("mxfp6 e2m3", n * 2.0 + n * 0.75 + sf_bytes(32), {
                let mut o = MxTensor::<E2M3>::alloc(s, rows, k)?;
                Box::new(move || Ok(quantize::quantize_mx_into(s, xr, &mut o)?))
            }),
            ("mxfp4", n * 2.0 + n * 0.5 + sf_bytes(32), {
                let mut o = MxTensor::<E2M1>::alloc(s, rows, k)?;
                Box::new(move || Ok(quantize::quantize_mx_into(s, xr, &mut o)?))
            }),
            // Reads the input twice (the tensor's amax, then the quantization): both reads are
            // bytes moved.
            (
                "nvfp4 (2 passes)",
                2.0 * n * 2.0 + n * 0.5 + sf_bytes(16),
                {
                    let mut o = Nvfp4Tensor::alloc(s, rows, k)?;
                    Box::new(move || Ok(quantize::quantize_nvfp4_into(s, xr, &mut o)?))
                },
            ),
            ("nvfp4 (amax given)", n * 2.0 + n * 0.5 + sf_bytes(16), {
                let mut o = Nvfp4Tensor::alloc(s, rows, k)?;
                Box::new(move || Ok(quantize::quantize_nvfp4_with_amax_into(s, xr, 2.0, &mut o)?))
            }),
        ];
        for (name, bytes, mut f) in cases {
            let t = time(&stream, &mut *f)?;
            println!(
                "{:>12} {:>19} {:>10.1} {:>10.0} {:>8.1}%",
                format!("{rows}x{k}"),
                name,
                t * 1e6,
                bytes / t / 1e9,
                100.0 * bytes / t / copy_bw
            );
        }
    }
    println!(
        "(bytes = bytes read + written: input, packed output, scales; outputs preallocated; MX/NVFP4 \
         times include zeroing the scale layout's padding where there is any (none at 8192 x 8192); \"nvfp4 (2 passes)\" reads the input twice, amax then \
         quantize, and both reads are counted)"
    );
    Ok(())
}
