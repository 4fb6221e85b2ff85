//! Shared by the numbered examples (included with `#[path]`; not an example itself).

use std::sync::Arc;

use anyhow::Result;
use cudarc::driver::{sys, CudaStream};

/// Median milliseconds of `f` over `runs` timed runs after 3 warm-up runs, CUDA events recorded
/// on `stream` around each run.
pub fn median_ms(
    stream: &Arc<CudaStream>,
    runs: usize,
    f: &mut dyn FnMut() -> Result<()>,
) -> Result<f64> {
    for _ in 0..3 {
        f()?;
    }
    let ctx = stream.context();
    let mut t = Vec::with_capacity(runs);
    for _ in 0..runs {
        let a = ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        let b = ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        a.record(stream)?;
        f()?;
        b.record(stream)?;
        b.synchronize()?;
        t.push(a.elapsed_ms(&b)? as f64);
    }
    t.sort_by(f64::total_cmp);
    Ok(t[runs / 2])
}
