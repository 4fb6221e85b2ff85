//! How `profile` measures: inputs rotated over enough buffers to exceed twice the L2 cache, CUDA
//! events around a batch of launches, warm-up, then rounds that alternate the two libraries; the
//! median round counts. Also the output comparison between the two libraries.

use std::sync::Arc;

use anyhow::Result;
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaSlice, CudaStream};
use cutlass_gemm::Element;

use crate::device::Device;

pub fn event(ctx: &Arc<CudaContext>) -> Result<CudaEvent> {
    Ok(ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?)
}

/// Seconds per launch of `f` over `iters` launches (CUDA events), cycling over `sets` input sets.
pub fn time(
    dev: &Device,
    iters: usize,
    sets: usize,
    f: &mut dyn FnMut(usize) -> Result<()>,
) -> Result<f64> {
    let s = event(&dev.ctx)?;
    let e = event(&dev.ctx)?;
    s.record(&dev.stream)?;
    for i in 0..iters {
        f(i % sets)?;
    }
    e.record(&dev.stream)?;
    e.synchronize()?;
    Ok(s.elapsed_ms(&e)? as f64 / 1e3 / iters as f64)
}

/// Times `ours` against `theirs`, alternating rounds, after warm-up; median seconds per launch.
pub fn race(
    dev: &Device,
    flops: f64,
    sets: usize,
    rounds: usize,
    ours: &mut dyn FnMut(usize) -> Result<()>,
    theirs: Option<&mut dyn FnMut(usize) -> Result<()>>,
) -> Result<(f64, Option<f64>)> {
    // About 10 ms per round at 600 TFLOP/s.
    let iters = ((6e12 / flops) as usize).clamp(3, 200);
    time(dev, iters, sets, ours)?;
    let mut theirs = theirs;
    if let Some(t) = theirs.as_deref_mut() {
        time(dev, iters, sets, t)?;
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        a.push(time(dev, iters, sets, ours)?);
        if let Some(t) = theirs.as_deref_mut() {
            b.push(time(dev, iters, sets, t)?);
        }
    }
    Ok((median(a), (!b.is_empty()).then(|| median(b))))
}

/// The upper median (the middle element after sorting).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// How many input sets of `bytes` each to rotate over: enough to exceed twice the L2 cache, at
/// most 8.
pub fn rotation(dev: &Device, bytes: usize) -> usize {
    (2 * dev.l2_bytes).div_ceil(bytes.max(1)).clamp(1, 8)
}

/// Uniform values in [-1, 1), from a repeating 16 Mi-element pattern (a fast fill of large
/// buffers; periodicity does not matter for timing or for the cross-check).
pub fn fill<T: Element + cudarc::driver::DeviceRepr>(
    stream: &Arc<CudaStream>,
    len: usize,
    seed: u64,
) -> Result<CudaSlice<T>> {
    let period = len.min(1 << 24);
    let pattern: Vec<T> = cutlass_gemm::selection::tune::random_values(period, seed);
    // SAFETY: every element is written below.
    let mut out = unsafe { stream.alloc::<T>(len) }?;
    let mut off = 0;
    while off < len {
        let n = (len - off).min(period);
        stream.memcpy_htod(&pattern[..n], &mut out.slice_mut(off..off + n))?;
        off += n;
    }
    Ok(out)
}

/// `rotation`'s sets of one operand: `sets` buffers of `len` elements, seeds `seed`, `seed + 1`, ...
pub fn fill_sets<T: Element + cudarc::driver::DeviceRepr>(
    stream: &Arc<CudaStream>,
    sets: usize,
    len: usize,
    seed: u64,
) -> Result<Vec<CudaSlice<T>>> {
    (0..sets)
        .map(|i| fill(stream, len, seed + i as u64))
        .collect()
}

/// Compares two outputs: max |x - y| / max |y|.
pub fn rel_diff(x: &[f64], y: &[f64]) -> f64 {
    let scale = y.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-30);
    x.iter()
        .zip(y)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max)
        / scale
}

pub fn to_f64<T: Element>(v: &[T]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}
