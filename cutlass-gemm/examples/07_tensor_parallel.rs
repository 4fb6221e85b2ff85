//! Tensor parallelism on two GPUs: one GEMM `Y = X · Wᵀ` split by columns of B (the weight's rows,
//! the layer's output features), each half planned and run on its own device and stream, the halves
//! gathered into one row-major `Y` on device 0, and the result checked against the same GEMM on one
//! GPU.
//!
//! - Device 0 computes `Y[:, 0..n/2]` straight into the full `Y` (leading dimension `n`).
//! - Device 1 computes `Y[:, n/2..n]` into a buffer of its own; device 0 copies it into `Y`'s right
//!   half with one strided copy that reads device 1's memory (peer access, over NVLink or PCIe).
//!   The copy waits for device 1's stream through an event, not a host synchronization.
//!
//! Inputs are integers in {-1, 0, 1}, so every f32 accumulation is exact and the parallel result
//! must equal the single-GPU one bit for bit, whichever kernels the two plans chose; a few rows are
//! also checked against exact host dot products. Prints host-synchronized wall times: one GPU, two
//! GPUs with the gather, and the two halves alone.
//!
//! `cargo run --release --example 07_tensor_parallel [m n k]` (default 2048 14336 4096: a Llama-3-8B
//! MLP up-projection at 2048 tokens). Needs two CUDA GPUs.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use cudarc::driver::{sys, CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use cutlass_gemm::{Gemm, GemmProblem, MatrixLayout, Workspace};
use half::bf16;

fn ternary(len: usize, seed: &mut u64) -> Vec<bf16> {
    (0..len)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            bf16::from_f32(((*seed >> 33) % 3) as f32 - 1.0)
        })
        .collect()
}

/// Copies `rows` lines of `width` elements from `src` (line pitch `src_ld`) into `dst` (line pitch
/// `dst_ld`, starting at element `dst_offset`) on `stream`, which belongs to `dst`'s device. `src`
/// may live on another device whose memory this one can access (peer access enabled): the copy
/// then reads it over NVLink or PCIe. The copy waits for the work queued on `src`'s stream, and
/// later work there waits for the copy.
#[allow(clippy::too_many_arguments)]
fn copy_2d(
    stream: &Arc<CudaStream>,
    src: &CudaSlice<bf16>,
    src_ld: usize,
    dst: &mut CudaSlice<bf16>,
    dst_offset: usize,
    dst_ld: usize,
    rows: usize,
    width: usize,
) -> Result<()> {
    let e = std::mem::size_of::<bf16>();
    ensure!(src.len() >= (rows - 1) * src_ld + width, "source too short");
    ensure!(
        dst.len() >= dst_offset + (rows - 1) * dst_ld + width,
        "destination too short"
    );
    let other = src.stream();
    if !Arc::ptr_eq(other, stream) {
        stream.wait(&other.record_event(None)?)?;
    }
    stream.context().bind_to_thread()?;
    {
        let (ps, _gs) = src.device_ptr(other);
        let (pd, _gd) = dst.device_ptr_mut(stream);
        let c = sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: std::ptr::null(),
            srcDevice: ps,
            srcArray: std::ptr::null_mut(),
            srcPitch: src_ld * e,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstHost: std::ptr::null_mut(),
            dstDevice: pd + (dst_offset * e) as u64,
            dstArray: std::ptr::null_mut(),
            dstPitch: dst_ld * e,
            WidthInBytes: width * e,
            Height: rows,
        };
        // SAFETY: device pointers and pitches of two ranges checked above, the source's queued
        // work waited for.
        let copy = unsafe { sys::cuMemcpy2DAsync_v2(&c, stream.cu_stream()) };
        ensure!(
            copy == sys::CUresult::CUDA_SUCCESS,
            "cuMemcpy2DAsync: {copy:?}"
        );
    }
    if !Arc::ptr_eq(other, stream) {
        other.wait(&stream.record_event(None)?)?;
    }
    Ok(())
}

/// Lets each device read and write the other's memory where the hardware allows it (NVLink or
/// PCIe peer to peer); without it, a copy between the devices is staged through host memory. Two
/// grants: the contexts' peer access (memory from `cuMemAlloc`) and access to the other device's
/// memory pool, which cudarc allocates from (`cuMemAllocAsync`): peer access between contexts does
/// not reach pool memory. Returns whether both directions are enabled.
fn enable_peer_access(ctx: &[Arc<CudaContext>; 2]) -> Result<bool> {
    let ok = |r: sys::CUresult, what: &str| -> Result<()> {
        ensure!(r == sys::CUresult::CUDA_SUCCESS, "{what}: {r:?}");
        Ok(())
    };
    for (this, other) in [(0usize, 1usize), (1, 0)] {
        let mut can = 0;
        // SAFETY: writes one int.
        ok(
            unsafe { sys::cuDeviceCanAccessPeer(&mut can, this as i32, other as i32) },
            "cuDeviceCanAccessPeer",
        )?;
        if can == 0 {
            return Ok(false);
        }
        ctx[this].bind_to_thread()?;
        // SAFETY: the other device's primary context, alive for as long as `ctx`.
        let r = unsafe { sys::cuCtxEnablePeerAccess(ctx[other].cu_ctx(), 0) };
        if r != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
            ok(r, "cuCtxEnablePeerAccess")?;
        }
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: writes the other device's current memory pool handle.
        ok(
            unsafe { sys::cuDeviceGetMemPool(&mut pool, other as i32) },
            "cuDeviceGetMemPool",
        )?;
        let access = sys::CUmemAccessDesc {
            location: sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: this as i32,
            },
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: one access descriptor for a live pool.
        ok(
            unsafe { sys::cuMemPoolSetAccess(pool, &access, 1) },
            "cuMemPoolSetAccess",
        )?;
    }
    Ok(true)
}

fn main() -> Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().context("m n k are integers"))
        .collect::<Result<_>>()?;
    let (m, n, k) = match args[..] {
        [] => (2048, 14336, 4096),
        [m, n, k] => (m, n, k),
        _ => bail!("usage: 07_tensor_parallel [m n k]"),
    };
    ensure!(n % 2 == 0, "n must be even to split it over two GPUs");
    let count = if cutlass_gemm::cuda_available() {
        CudaContext::device_count()?
    } else {
        0
    };
    if count < 2 {
        bail!("this example needs two CUDA GPUs; found {count}");
    }
    let half = n / 2;
    let ctx = [CudaContext::new(0)?, CudaContext::new(1)?];
    let streams = [ctx[0].new_stream()?, ctx[1].new_stream()?];
    let peer = enable_peer_access(&ctx)?;
    println!(
        "{m} x {n} x {k} bf16 on two GPUs ({}; {})",
        ctx[0].name()?,
        if peer {
            "peer access enabled both ways"
        } else {
            "no peer access: peer copies go through the host"
        }
    );

    let mut seed = 2026;
    let x = ternary(m * k, &mut seed);
    let w = ternary(n * k, &mut seed); // W[n, k]: B column-major, k x n
    let s0 = &streams[0];
    let s1 = &streams[1];

    // One GPU: the whole GEMM on device 0.
    let x0 = s0.clone_htod(&x)?;
    let w_all = s0.clone_htod(&w)?;
    let mut y_one = s0.alloc_zeros::<bf16>(m * n)?;
    let one = Gemm::<bf16, bf16, bf16>::new(&ctx[0], &GemmProblem::new(m, n, k))?;
    let mut ws_one = s0.alloc_zeros::<u8>(one.workspace_size().max(16))?;

    // Two GPUs: device 0 holds W's first n/2 rows and writes Y's left half in place; device 1
    // holds the other rows, gets X by a peer copy, and writes its half into a buffer of its own.
    let w0 = s0.clone_htod(&w[..half * k])?;
    let w1 = s1.clone_htod(&w[half * k..])?;
    let mut x1 = s1.alloc_zeros::<bf16>(m * k)?;
    s1.memcpy_dtod(&x0, &mut x1)?;
    let left = GemmProblem::new(m, half, k).with_d(MatrixLayout::row_major().with_ld(n));
    let part0 = Gemm::<bf16, bf16, bf16>::new(&ctx[0], &left)?;
    let part1 = Gemm::<bf16, bf16, bf16>::new(&ctx[1], &GemmProblem::new(m, half, k))?;
    let mut ws0 = s0.alloc_zeros::<u8>(part0.workspace_size().max(16))?;
    let mut ws1 = s1.alloc_zeros::<u8>(part1.workspace_size().max(16))?;
    let mut y = s0.alloc_zeros::<bf16>(m * n)?;
    let mut y1 = s1.alloc_zeros::<bf16>(m * half)?;
    println!("  one GPU: {}", one.kernel_name());
    println!("  device 0, Y[:, ..{half}]: {}", part0.kernel_name());
    println!("  device 1, Y[:, {half}..]: {}", part1.kernel_name());

    let mut run_one = || -> Result<()> {
        one.run(
            s0,
            &x0,
            &w_all,
            None,
            &mut y_one,
            Workspace::Buffer(&mut ws_one),
        )?;
        Ok(())
    };
    // Device 0 reads device 1's half into Y's right half, after device 1's GEMM (copy_2d orders
    // the copy after it through an event): directly with peer access, else through a contiguous
    // copy between the devices (which the driver stages through host memory) and a local one.
    let mut staged = if peer {
        None
    } else {
        Some(s0.alloc_zeros::<bf16>(m * half)?)
    };
    let mut gather_half = |y1: &CudaSlice<bf16>, y: &mut CudaSlice<bf16>| -> Result<()> {
        match staged.as_mut() {
            None => copy_2d(s0, y1, half, y, half, n, m, half),
            Some(staged) => {
                s0.memcpy_dtod(y1, staged)?;
                // Device 1 may overwrite its half only once the copy has read it.
                y1.stream().wait(&s0.record_event(None)?)?;
                copy_2d(s0, staged, half, y, half, n, m, half)
            }
        }
    };
    let mut run_parallel = |gather: bool| -> Result<()> {
        part1.run(s1, &x1, &w1, None, &mut y1, Workspace::Buffer(&mut ws1))?;
        part0.run(s0, &x0, &w0, None, &mut y, Workspace::Buffer(&mut ws0))?;
        if gather {
            gather_half(&y1, &mut y)?;
        }
        Ok(())
    };

    let sync = || -> Result<()> {
        s0.synchronize()?;
        s1.synchronize()?;
        Ok(())
    };
    let time = |f: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        for _ in 0..3 {
            f()?;
        }
        sync()?;
        let mut t = Vec::new();
        for _ in 0..20 {
            let start = Instant::now();
            f()?;
            sync()?;
            t.push(start.elapsed().as_secs_f64() * 1e3);
        }
        t.sort_by(f64::total_cmp);
        Ok(t[t.len() / 2])
    };
    let t_one = time(&mut run_one)?;
    let t_halves = time(&mut || run_parallel(false))?;
    let t_two = time(&mut || run_parallel(true))?;
    let t_gather = time(&mut || gather_half(&y1, &mut y))?;

    let y_one_h = s0.clone_dtoh(&y_one)?;
    let y_h = s0.clone_dtoh(&y)?;
    let differ = y_one_h
        .iter()
        .zip(&y_h)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    ensure!(
        differ == 0,
        "{differ} of {} elements differ between one and two GPUs",
        m * n
    );
    // Exact dot products for a few rows, rounded once to bf16.
    for i in [0, m / 3, m - 1] {
        for j in 0..n {
            let dot: f32 = (0..k)
                .map(|p| x[i * k + p].to_f32() * w[j * k + p].to_f32())
                .sum();
            ensure!(
                y_h[i * n + j].to_bits() == bf16::from_f32(dot).to_bits(),
                "Y[{i}][{j}] = {} but the exact dot product is {dot}",
                y_h[i * n + j]
            );
        }
    }
    let tflops = |ms: f64| 2.0 * (m * n * k) as f64 / (ms * 1e-3) / 1e12;
    println!(
        "equal bit for bit to the one-GPU result ({} elements; rows 0, {}, {} equal exact dot products)",
        m * n,
        m / 3,
        m - 1
    );
    println!(
        "host-synchronized wall time, median of 20: one GPU {t_one:.3} ms ({:.0} TFLOP/s); two GPUs \
         {t_two:.3} ms with the gather ({:.0} TFLOP/s, {:.2}x), {t_halves:.3} ms for the halves alone \
         ({:.2}x)",
        tflops(t_one),
        tflops(t_two),
        t_one / t_two,
        t_one / t_halves
    );
    let gb = (m * half * std::mem::size_of::<bf16>()) as f64 / 1e9;
    println!(
        "the gather alone ({gb:.3} GB from device 1): {t_gather:.3} ms ({:.0} GB/s)",
        gb / (t_gather * 1e-3)
    );
    Ok(())
}
