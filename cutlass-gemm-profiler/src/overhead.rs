//! `cutlass-profiler overhead`: the host time per call of a planned bf16 GEMM (safe
//! [`Gemm::run`], unsafe [`Gemm::run_raw`]) against a bare launch of the same kernel with the same
//! parameters ([`cutlass_gemm::Kernel::relaunch_raw`]: `cudaLaunchKernelEx` and nothing else),
//! with three more lines for context: an empty kernel with the same cluster shape
//! (`cutlass_rs_launch_probe`), cuBLAS's `cublasGemmEx` for the same problem, and a CUDA-graph
//! replay of the GEMM. Batches of 200 calls are timed on the host without synchronizing (fewer
//! than the launch queue holds), the median of 25 batches counts.

use std::ffi::c_void;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use cudarc::cublas::{CudaBlas, Gemm as _};
use cudarc::driver::{sys, DevicePtr};
use cutlass_gemm::{Gemm, GemmProblem, Workspace};
use half::bf16;

use crate::args::OverheadArgs;
use crate::cublas;
use crate::device::Device;
use crate::shapes::Shape;
use crate::timing::{fill, median};

pub fn main(args: &OverheadArgs) -> ExitCode {
    match run(&args.shape) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cutlass-profiler overhead: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(shape: &Shape) -> Result<()> {
    if !cutlass_gemm::cuda_available() {
        bail!("no CUDA GPU found");
    }
    let dev = Device::open()?;
    let stream = &dev.stream;
    let p = GemmProblem::new(shape.m, shape.n, shape.k);
    let g = Gemm::<bf16, bf16, bf16>::plan(dev.info, &p, None)?;
    let a = fill::<bf16>(stream, shape.m * shape.k, 1)?;
    let b = fill::<bf16>(stream, shape.n * shape.k, 2)?;
    let mut d = stream.alloc_zeros::<bf16>(shape.m * shape.n)?;
    let mut ws = stream.alloc_zeros::<u8>(g.workspace_size().max(1))?;
    const CALLS: usize = 200;
    let host_us = |f: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        let mut v = Vec::new();
        for _ in 0..25 {
            stream.synchronize()?;
            let t = std::time::Instant::now();
            for _ in 0..CALLS {
                f()?;
            }
            v.push(t.elapsed().as_secs_f64() * 1e6 / CALLS as f64);
        }
        stream.synchronize()?;
        Ok(median(v))
    };
    let [cx, cy, _] = g.kernel_spec().cluster;
    let cu = stream.cu_stream() as *mut c_void;
    let empty = host_us(&mut || {
        // SAFETY: launches an empty kernel on a live stream.
        let st = unsafe { cutlass_gemm::sys::cutlass_rs_launch_probe(cx as i32, cy as i32, cu) };
        if st != 0 {
            bail!("launch probe returned {st}");
        }
        Ok(())
    })?;
    let safe =
        host_us(&mut || Ok(g.run(stream, &a, &b, None, &mut d, Workspace::Buffer(&mut ws))?))?;
    let pa = a.device_ptr(stream).0;
    let pb = b.device_ptr(stream).0;
    let pd = d.device_ptr(stream).0;
    let pw = ws.device_ptr(stream).0;
    let ws_len = ws.len();
    let raw = host_us(&mut || {
        // SAFETY: the buffers above hold the problem's extents; the stream is live.
        Ok(unsafe { g.run_raw(pa, pb, None, pd, pw, ws_len, stream.cu_stream()) }?)
    })?;
    // The same kernel relaunched from the parameters the last run_raw built (same buffers).
    let kernel = cutlass_gemm::built_kernels()
        .iter()
        .find(|k| k.name == g.kernel_name())
        .ok_or_else(|| anyhow!("kernel {} not in the registry", g.kernel_name()))?;
    let bare = host_us(&mut || {
        // SAFETY: the buffers of the last run_raw (above) are live; the stream is live.
        Ok(unsafe { kernel.relaunch_raw(stream.cu_stream()) }?)
    })?;
    let blas = CudaBlas::new(stream.clone()).context("cuBLAS (libcublas.so must be loadable)")?;
    let cfg = cublas::tn_config(shape, bf16::ONE, bf16::ZERO);
    let mut d_blas = stream.alloc_zeros::<bf16>(shape.m * shape.n)?;
    let blas_us = host_us(&mut || {
        // SAFETY: b is [n, k] and a is [m, k] row-major, d_blas holds m x n.
        Ok(unsafe { blas.gemm(cfg, &b, &a, &mut d_blas) }?)
    })?;
    // The same launch through a CUDA graph.
    let capture = dev.ctx.new_stream()?;
    capture.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    // SAFETY: as above, on the capturing stream.
    unsafe { g.run_raw(pa, pb, None, pd, pw, ws_len, capture.cu_stream()) }?;
    let graph = capture
        .end_capture(sys::CUgraphInstantiate_flags(0))?
        .ok_or_else(|| anyhow!("the capture recorded nothing"))?;
    graph.upload()?;
    let replay = host_us(&mut || Ok(graph.launch()?))?;
    capture.synchronize()?;
    println!(
        "device: {}; problem {}x{}x{} bf16, kernel {}",
        dev.name(),
        shape.m,
        shape.n,
        shape.k,
        g.kernel_name()
    );
    println!("host time per call (median of 25 batches of {CALLS}):");
    println!("  bare launch of the kernel (cached parameters, cudaLaunchKernelEx): {bare:7.2} us");
    println!(
        "  Gemm::run     (checks, argument compare, launch):                 {safe:7.2} us  (+{:.2} us)",
        safe - bare
    );
    println!(
        "  Gemm::run_raw (pointer checks, argument compare, launch):         {raw:7.2} us  (+{:.2} us)",
        raw - bare
    );
    println!("  for context:");
    println!(
        "  empty kernel, cluster {cx}x{cy}, cudaLaunchKernelEx:                  {empty:7.2} us"
    );
    println!(
        "  cuBLAS cublasGemmEx, same problem:                                {blas_us:7.2} us"
    );
    println!("  CUDA graph replay of the GEMM:                                    {replay:7.2} us");
    Ok(())
}
