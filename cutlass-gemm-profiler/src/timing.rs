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

/// Kernels (and reference libraries) warmed up in this process: each gets its full warm-up
/// once, on its first shape; later shapes start with two launches (the clocks are up already).
#[derive(Default)]
pub struct Warmed(std::sync::Mutex<std::collections::HashSet<String>>);

impl Warmed {
    /// Whether `name` was warmed up before (and marks it warmed).
    pub fn seen(&self, name: &str) -> bool {
        !self.0.lock().unwrap().insert(name.to_string())
    }
}

/// Times `ours` against `theirs`, alternating rounds, after warm-up; median seconds per launch.
/// `warmed` says, for each side, whether it was warmed up on an earlier shape.
#[allow(clippy::too_many_arguments)]
pub fn race(
    dev: &Device,
    flops: f64,
    sets: usize,
    rounds: usize,
    ours: &mut dyn FnMut(usize) -> Result<()>,
    theirs: Option<&mut dyn FnMut(usize) -> Result<()>>,
    warmed: (bool, bool),
) -> Result<(f64, Option<f64>)> {
    // About 10 ms per round at 600 TFLOP/s.
    let iters = ((6e12 / flops) as usize).clamp(3, 200);
    let warm_up = |warmed: bool| if warmed { 2.min(iters) } else { iters };
    time(dev, warm_up(warmed.0), sets, ours)?;
    let mut theirs = theirs;
    if let Some(t) = theirs.as_deref_mut() {
        time(dev, warm_up(warmed.1), sets, t)?;
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

/// Elements of the host pattern [`fill`] copies from.
const PERIOD: usize = 1 << 24;
/// The pattern is this much longer than [`PERIOD`]: seeds start at different offsets.
const SHIFTS: usize = 1 << 12;

/// A random pattern of `PERIOD + SHIFTS` values in [-1, 1) per element type, made once per
/// process (generating it is what made large fills slow).
fn pattern<T: Element>() -> Arc<Vec<T>> {
    use std::any::{Any, TypeId};
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    type Patterns = Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>;
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    let mut map = PATTERNS.get_or_init(Default::default).lock().unwrap();
    let entry = map.entry(TypeId::of::<T>()).or_insert_with(|| {
        Arc::new(Arc::new(cutlass_gemm::selection::tune::random_values::<T>(
            PERIOD + SHIFTS,
            1,
        )))
    });
    entry.downcast_ref::<Arc<Vec<T>>>().unwrap().clone()
}

/// Uniform values in [-1, 1), from a repeating 16 Mi-element pattern that each seed enters at
/// another offset (a fast fill of large buffers; periodicity does not matter for timing or for
/// the cross-check).
pub fn fill<T: Element + cudarc::driver::DeviceRepr>(
    stream: &Arc<CudaStream>,
    len: usize,
    seed: u64,
) -> Result<CudaSlice<T>> {
    let pattern = pattern::<T>();
    let start = (seed as usize).wrapping_mul(2654435761) % SHIFTS;
    let pattern = &pattern[start..start + PERIOD];
    // SAFETY: every element is written below.
    let mut out = unsafe { stream.alloc::<T>(len) }?;
    let mut off = 0;
    while off < len {
        let n = (len - off).min(PERIOD);
        stream.memcpy_htod(&pattern[..n], &mut out.slice_mut(off..off + n))?;
        off += n;
    }
    Ok(out)
}

/// Rows of an `m x n` row-major output that the libraries' results are compared on: the first
/// and the last 64 (all of them when m <= 128), as f64. Copying all of a large output to the host
/// took longer than timing it.
pub fn sample_rows<T: Element + cudarc::driver::DeviceRepr>(
    stream: &Arc<CudaStream>,
    d: &CudaSlice<T>,
    m: usize,
    n: usize,
) -> Result<Vec<f64>> {
    const ROWS: usize = 64;
    let ranges = if m <= 2 * ROWS {
        [0..m * n, 0..0]
    } else {
        [0..ROWS * n, (m - ROWS) * n..m * n]
    };
    let mut out = Vec::new();
    for r in ranges.into_iter().filter(|r| !r.is_empty()) {
        out.extend(to_f64(&stream.clone_dtoh(&d.slice(r))?));
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
