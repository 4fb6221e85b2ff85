//! Opt-in autotuning: time every kernel of this build that serves a problem, once per (device,
//! types, layouts, shape), and keep the fastest in a cache file, so later plans are a lookup.
//!
//! ```no_run
//! use cutlass_gemm::selection::tune::TuneCache;
//! use cutlass_gemm::{Gemm, GemmProblem};
//! use half::bf16;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = cudarc::driver::CudaContext::new(0)?;
//! let stream = ctx.default_stream();
//! let mut cache = TuneCache::open("gemm-tuning.tsv")?;
//! let p = GemmProblem::new(16, 6144, 4096);
//! let gemm = Gemm::<bf16, bf16, bf16>::autotune(&stream, &p, &mut cache)?; // times candidates once
//! let again = Gemm::<bf16, bf16, bf16>::autotune(&stream, &p, &mut cache)?; // a lookup
//! assert_eq!(gemm.kernel_name(), again.kernel_name());
//! # Ok(())
//! # }
//! ```
//!
//! The cache is a TSV file of `key<TAB>kernel<TAB>microseconds` lines; the key names the device
//! (name, compute capability, SM count), the element types, the layouts, the shape, the batch and
//! whether beta is zero. A cached kernel that is no longer in the build, or no longer serves the
//! problem, is tuned again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cudarc::driver::{sys, CudaSlice, CudaStream};

use crate::error::{Error, OperandName, Result};
use crate::ffi::DeviceInfo;
use crate::formats::element::Element;
use crate::plans::gemm::{Gemm, Workspace};
use crate::plans::problem::GemmProblem;
use crate::selection::built_kernels;

/// Tuning results: in memory, and in a file when opened from one.
#[derive(Debug, Default)]
pub struct TuneCache {
    path: Option<PathBuf>,
    entries: BTreeMap<String, (String, f64)>,
}

impl TuneCache {
    /// A cache that lives only as long as this value.
    pub fn in_memory() -> TuneCache {
        TuneCache::default()
    }

    /// Reads the cache file at `path` (a missing file is an empty cache); [`TuneCache::insert`]
    /// writes it back.
    pub fn open(path: impl AsRef<Path>) -> Result<TuneCache> {
        let path = path.as_ref().to_path_buf();
        let io = |error| Error::Io {
            path: path.clone(),
            error,
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(io(e)),
        };
        let mut entries = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let f: Vec<&str> = line.split('\t').collect();
            let us = f.get(2).and_then(|v| v.parse::<f64>().ok());
            match (f.len(), us) {
                (3, Some(us)) => {
                    entries.insert(f[0].to_string(), (f[1].to_string(), us));
                }
                _ => {
                    return Err(io(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("line {}: expected key<TAB>kernel<TAB>microseconds", i + 1),
                    )))
                }
            }
        }
        Ok(TuneCache {
            path: Some(path),
            entries,
        })
    }

    /// The kernel cached for `key`, and its time in microseconds.
    pub fn get(&self, key: &str) -> Option<(&str, f64)> {
        self.entries.get(key).map(|(k, us)| (k.as_str(), *us))
    }

    /// Records a result, and rewrites the file (through a temporary file and a rename) when the
    /// cache has one.
    pub fn insert(&mut self, key: String, kernel: &str, us: f64) -> Result<()> {
        self.entries.insert(key, (kernel.to_string(), us));
        let Some(path) = &self.path else {
            return Ok(());
        };
        let mut text = String::from("# cutlass-rs tuning cache: key\tkernel\tmicroseconds\n");
        for (k, (kernel, us)) in &self.entries {
            text.push_str(&format!("{k}\t{kernel}\t{us:.3}\n"));
        }
        let tmp = path.with_extension("tmp");
        let io = |error| Error::Io {
            path: path.clone(),
            error,
        };
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The cache key of a problem on a device.
pub fn key<TA: Element, TB: Element, TD: Element>(
    device_name: &str,
    device: &DeviceInfo,
    p: &GemmProblem,
) -> String {
    let l = |m: &crate::plans::problem::MatrixLayout| {
        format!(
            "{}{}{}",
            if m.layout == cutlass_gemm_catalog::Layout::RowMajor {
                "r"
            } else {
                "c"
            },
            m.ld.map_or(String::new(), |v| format!(":ld{v}")),
            m.batch_stride.map_or(String::new(), |v| format!(":bs{v}"))
        )
    };
    format!(
        "{device_name}|sm{}{}x{}|{}x{}->{}|{}{}{}{}|{}x{}x{}x{}|beta{}",
        device.compute_capability.0,
        device.compute_capability.1,
        device.sm_count,
        TA::DATA_TYPE,
        TB::DATA_TYPE,
        TD::DATA_TYPE,
        l(&p.a),
        l(&p.b),
        l(&p.c),
        l(&p.d),
        p.m,
        p.n,
        p.k,
        p.batch,
        if p.beta == 0.0 { 0 } else { 1 }
    )
}

impl<TA: Element, TB: Element, TD: Element> Gemm<TA, TB, TD> {
    /// The kernels of this build that serve `problem` on `device` (each plans without error).
    pub fn candidates(device: DeviceInfo, problem: &GemmProblem) -> Vec<&'static str> {
        built_kernels()
            .iter()
            .filter(|k| Self::plan(device, problem, Some(k.name)).is_ok())
            .map(|k| k.name)
            .collect()
    }

    /// A plan with the fastest kernel for `problem` on `stream`'s device: from `cache` when it
    /// has the problem, else by timing every candidate ([`Gemm::candidates`]) on scratch buffers
    /// of the problem's extents (random inputs, CUDA events, best of three runs) and recording
    /// the winner. Takes as long as a few launches of each candidate the first time.
    pub fn autotune(
        stream: &Arc<CudaStream>,
        problem: &GemmProblem,
        cache: &mut TuneCache,
    ) -> Result<Self> {
        let ctx = stream.context();
        let device = DeviceInfo::query(ctx)?;
        let key = key::<TA, TB, TD>(&ctx.name()?, &device, problem);
        if let Some((name, _)) = cache.get(&key) {
            if let Ok(g) = Self::plan(device, problem, Some(name)) {
                return Ok(g);
            }
        }
        let plans: Vec<Self> = Self::candidates(device, problem)
            .into_iter()
            .map(|name| Self::plan(device, problem, Some(name)))
            .collect::<Result<_>>()?;
        if plans.is_empty() {
            // Let a plain plan say why nothing serves.
            return Self::plan(device, problem, None);
        }
        ctx.bind_to_thread()?;
        let len = |op| problem.resolve(op).map(|m| m.required_len());
        let a = random::<TA>(stream, len(OperandName::A)?, 1)?;
        let b = random::<TB>(stream, len(OperandName::B)?, 2)?;
        let c = if problem.beta != 0.0 {
            Some(random::<TD>(stream, len(OperandName::C)?, 3)?)
        } else {
            None
        };
        let mut d = random::<TD>(stream, len(OperandName::D)?, 4)?;
        let ws_len = plans.iter().map(|g| g.workspace_size()).max().unwrap_or(0);
        let mut ws = stream.alloc_zeros::<u8>(ws_len.max(1))?;
        let mut best: Option<(usize, f64)> = None;
        for (i, g) in plans.iter().enumerate() {
            let mut run = || -> Result<()> {
                let c = c.as_ref().map(|c| c as &dyn cudarc::driver::DevicePtr<TD>);
                g.run(stream, &a, &b, c, &mut d, Workspace::Buffer(&mut ws))
            };
            run()?; // warm-up (and the first-launch cost of the module)
            let start = ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
            let end = ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
            // Enough launches for about a millisecond, measured on the first one.
            start.record(stream)?;
            run()?;
            end.record(stream)?;
            end.synchronize()?;
            let once = start.elapsed_ms(&end)? as f64 * 1e3;
            let iters = ((1000.0 / once.max(1.0)) as usize).clamp(1, 50);
            let mut times = Vec::new();
            for _ in 0..3 {
                start.record(stream)?;
                for _ in 0..iters {
                    run()?;
                }
                end.record(stream)?;
                end.synchronize()?;
                times.push(start.elapsed_ms(&end)? as f64 * 1e3 / iters as f64);
            }
            let us = times.into_iter().fold(f64::INFINITY, f64::min);
            if best.is_none_or(|(_, t)| us < t) {
                best = Some((i, us));
            }
        }
        let (i, us) = best.expect("at least one candidate");
        let g = plans.into_iter().nth(i).expect("index of a plan");
        cache.insert(key, g.kernel_name(), us)?;
        Ok(g)
    }
}

/// `len` uniform values in [-1, 1) rounded to `T` (integers in [-64, 64) for `i8` and `i32`,
/// [0, 128) for `u8`), from a fixed-seed xorshift generator: inputs for timing runs (autotuning,
/// the profiler), not for statistics.
pub fn random_values<T: Element>(len: usize, seed: u64) -> Vec<T> {
    let integer = T::DATA_TYPE.is_integer();
    let offset = if T::DATA_TYPE == cutlass_gemm_catalog::DataType::U8 {
        64.0
    } else {
        0.0
    };
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
            if integer {
                T::from_f64((u * 64.0).floor() + offset)
            } else {
                T::from_f64(u)
            }
        })
        .collect()
}

/// [`random_values`] on the device (at least one element).
fn random<T: Element>(stream: &Arc<CudaStream>, len: usize, seed: u64) -> Result<CudaSlice<T>> {
    Ok(stream.clone_htod(&random_values::<T>(len.max(1), seed))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_values_span_the_range_of_each_kind_of_type() {
        let f: Vec<f32> = random_values(4096, 7);
        assert!(f.iter().all(|v| (-1.0..1.0).contains(v)));
        assert!(f.iter().any(|v| v.fract() != 0.0));
        let i: Vec<i8> = random_values(4096, 7);
        assert!(i.iter().all(|v| (-64..64).contains(v)));
        assert_eq!((i.iter().min(), i.iter().max()), (Some(&-64), Some(&63)));
        let u: Vec<u8> = random_values(4096, 7);
        assert_eq!((u.iter().min(), u.iter().max()), (Some(&0), Some(&127)));
    }

    #[test]
    fn cache_round_trips_through_its_file_and_rejects_garbage() {
        let dir = std::env::temp_dir().join(format!("cutlass-rs-tune-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cache.tsv");
        let _ = std::fs::remove_file(&path);
        let mut c = TuneCache::open(&path).unwrap();
        assert!(c.is_empty());
        c.insert("k1".into(), "kernel_a", 12.5).unwrap();
        c.insert("k2".into(), "kernel_b", 3.0).unwrap();
        let again = TuneCache::open(&path).unwrap();
        assert_eq!(again.len(), 2);
        assert_eq!(again.get("k1"), Some(("kernel_a", 12.5)));
        std::fs::write(&path, "k1\tkernel_a\n").unwrap();
        assert!(matches!(
            TuneCache::open(&path).unwrap_err(),
            Error::Io { .. }
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn plans_can_be_shared_across_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Gemm<half::bf16, half::bf16, half::bf16>>();
        send_sync::<
            crate::BlockwiseGemm<
                crate::formats::numeric::E4M3,
                crate::formats::numeric::E4M3,
                half::bf16,
            >,
        >();
        send_sync::<
            crate::BlockScaledGemm<
                crate::formats::numeric::E2M1,
                crate::formats::numeric::E2M1,
                half::f16,
            >,
        >();
        send_sync::<TuneCache>();
    }

    #[test]
    fn keys_tell_problems_apart() {
        let dev = DeviceInfo {
            ordinal: 0,
            compute_capability: (9, 0),
            sm_count: 132,
        };
        let p = GemmProblem::new(16, 6144, 4096);
        let k1 = key::<half::bf16, half::bf16, half::bf16>("H200", &dev, &p);
        let k2 = key::<half::f16, half::f16, half::f16>("H200", &dev, &p);
        let k3 = key::<half::bf16, half::bf16, half::bf16>("H200", &dev, &p.with_scalars(1.0, 1.0));
        let k4 = key::<half::bf16, half::bf16, half::bf16>("H100", &dev, &p);
        assert!(k1 != k2 && k1 != k3 && k1 != k4);
        assert_eq!(
            k1,
            "H200|sm90x132|bf16xbf16->bf16|rcrr|16x6144x4096x1|beta0"
        );
    }
}
