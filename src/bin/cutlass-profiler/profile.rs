//! `cutlass-profiler profile`: this crate's GEMMs against cuBLAS / cuBLASLt, side by side in one
//! process, on a suite of shapes.
//!
//! For each shape and type: the plan (heuristic, pinned, autotuned, or every candidate), inputs
//! rotated over enough buffers to exceed twice the L2 cache, warm-up, then rounds that alternate
//! the two libraries (CUDA events around a batch of launches; the median round counts). Each
//! result is checked against the other library's output on the same inputs. Prints a table
//! (TFLOP/s, % of the roofline, ratio to cuBLAS), and writes CSV and SVG when asked.
//!
//! Plans launch as the library launches them: with programmatic dependent launch where the kernel
//! has it, so back-to-back launches overlap each one's prologue with the previous one's tail.
//! `--pdl off` measures without it, `--pdl both` each plan both ways (the CSV's `pdl` column: `on`,
//! `off`, or `-` for kernels without it; a geometric mean for each).
//!
//! Layout: A row-major `[m, k]`, B column-major (a row-major `[n, k]` weight), D row-major: TN,
//! what a linear layer computes. cuBLAS gets the same memory as Dᵀ = Bᵀ·Aᵀ (`transa = T`).
//! Types: `bf16`, `f16` (cuBLAS `cublasGemmEx`, f32 accumulation), `e4m3` (e4m3 x e4m3 -> bf16,
//! against cuBLASLt's FP8 matmul, f32 accumulation without fast accumulation), `fp8bw` (FP8
//! 1x128 x 128x128 blockwise -> bf16, against cuBLASLt's blockwise FP8 matmul,
//! `VEC128_32F` x `BLK128x128_32F`; scales are all 1 so that the outputs are comparable with
//! cuBLASLt's tensor-wise FP8 result, which serves as the check).

use std::ffi::c_void;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, Gemm as _, GemmConfig};
use cudarc::cublaslt::{result as lt, sys as ltsys};
use cudarc::driver::{sys, CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use cutlass::numeric::{Tf32, E4M3};
use cutlass::tune::TuneCache;
use cutlass::{BlockwiseGemm, DeviceInfo, Element, Gemm, GemmProblem, Workspace};
use half::{bf16, f16};

const USAGE: &str = "usage: cutlass-profiler profile [--shapes FILE | --shape MxNxK[,MxNxK...]] \
[--types bf16,f16,e4m3,fp8bw] [--kernels heuristic|all|NAME|PATTERN,...] [--autotune CACHE.tsv] \
[--csv FILE] [--svg PREFIX] [--rounds N] [--swizzle 1|2|4|8] [--raster 1|2] [--splits N] \
[--sweep-schedules] [--pdl on|off|both]";

/// One shape of the suite.
#[derive(Clone, Debug)]
struct Shape {
    name: String,
    m: usize,
    n: usize,
    k: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Bf16,
    F16,
    E4m3,
    Fp8Blockwise,
    Tf32,
    I8,
}

impl Kind {
    fn parse(s: &str) -> Result<Kind> {
        Ok(match s {
            "bf16" => Kind::Bf16,
            "f16" => Kind::F16,
            "e4m3" | "fp8" => Kind::E4m3,
            "fp8bw" | "fp8-blockwise" => Kind::Fp8Blockwise,
            "tf32" => Kind::Tf32,
            "i8" | "s8" | "int8" => Kind::I8,
            _ => bail!("unknown type {s} (bf16, f16, e4m3, fp8bw, tf32, i8)"),
        })
    }
    fn label(self) -> &'static str {
        match self {
            Kind::Bf16 => "bf16",
            Kind::F16 => "f16",
            Kind::E4m3 => "e4m3",
            Kind::Fp8Blockwise => "fp8bw",
            Kind::Tf32 => "tf32",
            Kind::I8 => "i8",
        }
    }
    fn input_bytes(self) -> usize {
        match self {
            Kind::Bf16 | Kind::F16 => 2,
            Kind::Tf32 => 4,
            Kind::E4m3 | Kind::Fp8Blockwise | Kind::I8 => 1,
        }
    }
    fn output_bytes(self) -> usize {
        match self {
            Kind::Tf32 | Kind::I8 => 4,
            _ => 2,
        }
    }
    /// Peak multiplier over the bf16 tensor-core rate.
    fn speed(self) -> f64 {
        match self {
            Kind::Bf16 | Kind::F16 => 1.0,
            Kind::Tf32 => 0.5,
            Kind::E4m3 | Kind::Fp8Blockwise | Kind::I8 => 2.0,
        }
    }
    fn reference(self) -> &'static str {
        match self {
            Kind::Bf16 | Kind::F16 | Kind::Tf32 | Kind::I8 => "cuBLAS",
            Kind::E4m3 => "cuBLASLt",
            Kind::Fp8Blockwise => "cuBLASLt-blockwise",
        }
    }
    /// The A/B type in cutlass_profiler's spelling.
    fn cutlass_profiler_type(self) -> &'static str {
        match self {
            Kind::Bf16 => "bf16",
            Kind::F16 => "f16",
            Kind::Tf32 => "tf32",
            Kind::I8 => "s8",
            Kind::E4m3 | Kind::Fp8Blockwise => "e4m3",
        }
    }
    /// The C/D type in cutlass_profiler's spelling.
    fn cutlass_profiler_output(self) -> &'static str {
        match self {
            Kind::F16 => "f16",
            Kind::Tf32 => "f32",
            Kind::I8 => "s32",
            Kind::Bf16 | Kind::E4m3 | Kind::Fp8Blockwise => "bf16",
        }
    }
}

#[derive(Clone, Debug)]
enum KernelMode {
    Heuristic,
    All,
    Pinned(String),
    /// The candidates whose names match (comma-separated names or globs).
    Matching(cutlass_kernels::catalog::NameFilter),
    Autotune(PathBuf),
}

struct Options {
    shapes: Vec<Shape>,
    kinds: Vec<Kind>,
    mode: KernelMode,
    csv: Option<PathBuf>,
    svg: Option<PathBuf>,
    rounds: usize,
    schedule: cutlass::ScheduleHints,
    /// Every plan with each raster order and swizzle (CUTLASS's defaults and 1, 2, 4, 8 along M
    /// and along N) instead of its own tile-scheduler hints.
    sweep_schedules: bool,
    /// Programmatic dependent launch: the plans' default (on), off, or each plan both ways.
    pdl: Pdl,
}

/// `--pdl`: how plans launch ([`Gemm::with_programmatic_dependent_launch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pdl {
    On,
    Off,
    Both,
}

fn default_shapes_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/bench/shapes.tsv")
}

fn read_shapes(path: &std::path::Path) -> Result<Vec<Shape>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if line.starts_with('#') || f.len() < 4 || f[0] == "name" {
            continue;
        }
        out.push(Shape {
            name: f[0].to_string(),
            m: f[1].parse().with_context(|| format!("m in {line:?}"))?,
            n: f[2].parse().with_context(|| format!("n in {line:?}"))?,
            k: f[3].parse().with_context(|| format!("k in {line:?}"))?,
        });
    }
    if out.is_empty() {
        bail!("{}: no shapes (name, m, n, k columns)", path.display());
    }
    Ok(out)
}

fn parse_shape(s: &str) -> Result<Shape> {
    let v: Vec<usize> = s
        .split('x')
        .map(|x| x.parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| anyhow!("shape {s}: expected MxNxK"))?;
    match v[..] {
        [m, n, k] => Ok(Shape {
            name: s.to_string(),
            m,
            n,
            k,
        }),
        _ => bail!("shape {s}: expected MxNxK"),
    }
}

fn parse(args: &[String]) -> Result<Options> {
    let mut o = Options {
        shapes: Vec::new(),
        kinds: vec![Kind::Bf16],
        mode: KernelMode::Heuristic,
        csv: None,
        svg: None,
        rounds: 7,
        schedule: cutlass::ScheduleHints::default(),
        sweep_schedules: false,
        pdl: Pdl::On,
    };
    let mut shapes_file = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .ok_or_else(|| anyhow!("{a} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--shapes" => shapes_file = Some(PathBuf::from(val()?)),
            "--shape" => {
                for s in val()?.split(',') {
                    o.shapes.push(parse_shape(s)?);
                }
            }
            "--types" => o.kinds = val()?.split(',').map(Kind::parse).collect::<Result<_>>()?,
            "--kernels" => {
                o.mode = match val()?.as_str() {
                    "heuristic" => KernelMode::Heuristic,
                    "all" => KernelMode::All,
                    list if list.contains([',', '*', '?']) => {
                        KernelMode::Matching(cutlass_kernels::catalog::NameFilter::parse(list))
                    }
                    name => KernelMode::Pinned(name.to_string()),
                }
            }
            "--autotune" => o.mode = KernelMode::Autotune(PathBuf::from(val()?)),
            "--csv" => o.csv = Some(PathBuf::from(val()?)),
            "--svg" => o.svg = Some(PathBuf::from(val()?)),
            "--rounds" => o.rounds = val()?.parse::<usize>()?.clamp(1, 100),
            "--swizzle" => o.schedule.swizzle = val()?.parse()?,
            "--raster" => o.schedule.raster = val()?.parse()?,
            "--splits" => o.schedule.splits = val()?.parse()?,
            "--sweep-schedules" => o.sweep_schedules = true,
            "--pdl" => {
                o.pdl = match val()?.as_str() {
                    "on" => Pdl::On,
                    "off" => Pdl::Off,
                    "both" => Pdl::Both,
                    v => bail!("--pdl {v}: on, off or both\n{USAGE}"),
                }
            }
            _ => bail!("unknown argument {a}\n{USAGE}"),
        }
    }
    if o.shapes.is_empty() {
        o.shapes = read_shapes(&shapes_file.unwrap_or_else(default_shapes_file))?;
    } else if shapes_file.is_some() {
        bail!("give --shapes or --shape, not both");
    }
    Ok(o)
}

/// What the device can do: the roofline.
struct Device {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    info: DeviceInfo,
    name: String,
    /// Dense bf16 tensor-core TFLOP/s.
    peak_bf16: f64,
    /// Measured device-to-device copy bandwidth, GB/s (read + write).
    copy_gbs: f64,
    l2_bytes: usize,
}

impl Device {
    fn open() -> Result<Device> {
        let ctx = CudaContext::new(0)?;
        let stream = ctx.default_stream();
        let info = DeviceInfo::query(&ctx)?;
        let name = ctx.name()?;
        let attr = |a| ctx.attribute(a);
        let l2_bytes = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as usize;
        // NVIDIA's dense bf16 figures for the Hopper parts (at their tensor-core boost clock);
        // other devices: 4096 FLOP per clock per SM at the reported clock.
        let peak_bf16 = if name.contains("H100") && name.contains("PCIe") {
            756.0
        } else if name.contains("H100") || name.contains("H200") || name.contains("H800") {
            989.4
        } else {
            let khz = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? as f64;
            4096.0 * info.sm_count as f64 * khz * 1e3 / 1e12
        };
        let mut d = Device {
            ctx,
            stream,
            info,
            name,
            peak_bf16,
            copy_gbs: 0.0,
            l2_bytes,
        };
        d.copy_gbs = d.measure_copy()?;
        Ok(d)
    }

    /// cuMemcpyDtoD of 1 GiB, best of 5; bytes read plus written over time.
    fn measure_copy(&self) -> Result<f64> {
        let len = 1usize << 30;
        let src = self.stream.alloc_zeros::<u8>(len)?;
        let mut dst = self.stream.alloc_zeros::<u8>(len)?;
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let s = self.event()?;
            let e = self.event()?;
            s.record(&self.stream)?;
            self.stream.memcpy_dtod(&src, &mut dst)?;
            e.record(&self.stream)?;
            e.synchronize()?;
            best = best.min(s.elapsed_ms(&e)? as f64 / 1e3);
        }
        Ok(2.0 * len as f64 / best / 1e9)
    }

    fn event(&self) -> Result<cudarc::driver::CudaEvent> {
        Ok(self
            .ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?)
    }

    /// Seconds per launch of `f` over `iters` launches (CUDA events).
    fn time(
        &self,
        iters: usize,
        sets: usize,
        f: &mut dyn FnMut(usize) -> Result<()>,
    ) -> Result<f64> {
        let s = self.event()?;
        let e = self.event()?;
        s.record(&self.stream)?;
        for i in 0..iters {
            f(i % sets)?;
        }
        e.record(&self.stream)?;
        e.synchronize()?;
        Ok(s.elapsed_ms(&e)? as f64 / 1e3 / iters as f64)
    }
}

/// Uniform values in [-1, 1), from a repeating 16 Mi-element pattern (a fast fill of large
/// buffers; periodicity does not matter for timing or for the cross-check).
fn fill<T: Element + cudarc::driver::DeviceRepr>(
    stream: &Arc<CudaStream>,
    len: usize,
    seed: u64,
) -> Result<CudaSlice<T>> {
    let period = len.min(1 << 24);
    let pattern: Vec<T> = cutlass::tune::random_values(period, seed);
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

/// cuBLASLt FP8 (e4m3 x e4m3 -> bf16) matmul for `D[m,n] = A[m,k] · W[n,k]ᵀ`, optionally with
/// blockwise scales (`VEC128_32F` for A, `BLK128x128_32F` for W).
struct LtFp8 {
    handle: ltsys::cublasLtHandle_t,
    desc: ltsys::cublasLtMatmulDesc_t,
    layouts: [ltsys::cublasLtMatrixLayout_t; 3],
    algo: ltsys::cublasLtMatmulAlgo_t,
    workspace: CudaSlice<u8>,
    ws_bytes: usize,
    _scales: Option<(CudaSlice<f32>, CudaSlice<f32>)>,
}

impl LtFp8 {
    fn new(dev: &Device, m: usize, n: usize, k: usize, blockwise: bool) -> Result<LtFp8> {
        use ltsys::cublasLtMatmulDescAttributes_t as A;
        use ltsys::cudaDataType_t as T;
        let lt_err = |e: cudarc::cublaslt::result::CublasError| anyhow!("cuBLASLt: {e:?}");
        let handle = lt::create_handle().map_err(lt_err)?;
        let desc = lt::create_matmul_desc(
            ltsys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            T::CUDA_R_32F,
        )
        .map_err(lt_err)?;
        let set = |attr: A, v: *const c_void, size: usize| -> Result<()> {
            // SAFETY: v points at `size` bytes of the attribute's type.
            unsafe { lt::set_matmul_desc_attribute(desc, attr, v, size) }.map_err(lt_err)
        };
        let t = cublasOperation_t::CUBLAS_OP_T;
        set(A::CUBLASLT_MATMUL_DESC_TRANSA, &t as *const _ as _, 4)?;
        let scales = if blockwise {
            let sa =
                ltsys::cublasLtMatmulMatrixScale_t::CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
            let sb = ltsys::cublasLtMatmulMatrixScale_t::CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
            set(
                A::CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                &sa as *const _ as _,
                4,
            )?;
            set(
                A::CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                &sb as *const _ as _,
                4,
            )?;
            // All ones, generously sized for either scale order.
            let kb = k.div_ceil(128) + 1;
            let ones_a = vec![1.0f32; (n.div_ceil(128) + 1) * kb];
            let ones_b = vec![1.0f32; (m + 128) * kb];
            let da = dev.stream.clone_htod(&ones_a)?;
            let db = dev.stream.clone_htod(&ones_b)?;
            let pa = da.device_ptr(&dev.stream).0;
            let pb = db.device_ptr(&dev.stream).0;
            set(
                A::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                &pa as *const _ as _,
                8,
            )?;
            set(
                A::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                &pb as *const _ as _,
                8,
            )?;
            Some((da, db))
        } else {
            None
        };
        // Column-major view: A_cb = W as k x n (transposed to n x k), B_cb = A as k x m, D_cb n x m.
        let la = lt::create_matrix_layout(T::CUDA_R_8F_E4M3, k as u64, n as u64, k as i64)
            .map_err(lt_err)?;
        let lb = lt::create_matrix_layout(T::CUDA_R_8F_E4M3, k as u64, m as u64, k as i64)
            .map_err(lt_err)?;
        let ld = lt::create_matrix_layout(T::CUDA_R_16BF, n as u64, m as u64, n as i64)
            .map_err(lt_err)?;
        let ws_bytes = 64usize << 20;
        let pref = lt::create_matmul_pref().map_err(lt_err)?;
        // SAFETY: a u64 attribute.
        unsafe {
            lt::set_matmul_pref_attribute(
                pref,
                ltsys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &(ws_bytes as u64) as *const u64 as _,
                8,
            )
        }
        .map_err(lt_err)?;
        // SAFETY: valid handle, descriptors and preference.
        let heur = unsafe { lt::get_matmul_algo_heuristic(handle, desc, la, lb, ld, ld, pref) }
            .map_err(|e| anyhow!("cuBLASLt has no algorithm for this FP8 matmul: {e:?}"))?;
        // SAFETY: created above.
        unsafe { lt::destroy_matmul_pref(pref) }.map_err(lt_err)?;
        Ok(LtFp8 {
            handle,
            desc,
            layouts: [la, lb, ld],
            algo: heur.algo,
            workspace: dev.stream.alloc_zeros::<u8>(ws_bytes)?,
            ws_bytes,
            _scales: scales,
        })
    }

    fn run(
        &mut self,
        stream: &Arc<CudaStream>,
        a: &CudaSlice<E4M3>,
        w: &CudaSlice<E4M3>,
        d: &mut CudaSlice<bf16>,
    ) -> Result<()> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (pa, _g1) = a.device_ptr(stream);
        let (pw, _g2) = w.device_ptr(stream);
        let (pd, _g3) = d.device_ptr_mut(stream);
        let (pws, _g4) = self.workspace.device_ptr_mut(stream);
        let [la, lb, ld] = self.layouts;
        // SAFETY: the buffers match the layouts created for this shape; workspace as declared.
        unsafe {
            lt::matmul(
                self.handle,
                self.desc,
                &alpha as *const f32 as _,
                &beta as *const f32 as _,
                pw as *const c_void,
                la,
                pa as *const c_void,
                lb,
                pd as *const c_void,
                ld,
                pd as *mut c_void,
                ld,
                &self.algo,
                pws as *mut c_void,
                self.ws_bytes,
                stream.cu_stream() as _,
            )
        }
        .map_err(|e| anyhow!("cuBLASLt matmul: {e:?}"))
    }
}

impl Drop for LtFp8 {
    fn drop(&mut self) {
        // SAFETY: created in new, destroyed once.
        unsafe {
            for l in self.layouts {
                let _ = lt::destroy_matrix_layout(l);
            }
            let _ = lt::destroy_matmul_desc(self.desc);
            let _ = lt::destroy_handle(self.handle);
        }
    }
}

/// One measured row.
#[derive(Clone, Debug)]
struct Row {
    shape: Shape,
    kind: Kind,
    kernel: String,
    /// The tile-scheduler hints of the measured plan.
    schedule: cutlass::ScheduleHints,
    /// The heuristic's choice when it differs from the measured kernel (`--kernels all`).
    heuristic: Option<String>,
    /// Programmatic dependent launch: `None` where the kernel has none, else whether the measured
    /// plan used it.
    pdl: Option<bool>,
    ours_s: f64,
    theirs_s: Option<f64>,
    max_rel_diff: f64,
    ok: bool,
}

impl Row {
    fn flops(&self) -> f64 {
        2.0 * self.shape.m as f64 * self.shape.n as f64 * self.shape.k as f64
    }
    fn bytes(&self) -> f64 {
        let s = &self.shape;
        ((s.m * s.k + s.n * s.k) * self.kind.input_bytes() + s.m * s.n * self.kind.output_bytes())
            as f64
    }
    fn tflops(&self, secs: f64) -> f64 {
        self.flops() / secs / 1e12
    }
    /// The roofline for this problem (TFLOP/s) and whether memory binds.
    fn roof(&self, dev: &Device) -> (f64, bool) {
        let compute = dev.peak_bf16 * self.kind.speed();
        let memory = self.flops() / self.bytes() * dev.copy_gbs * 1e9 / 1e12;
        (compute.min(memory), memory < compute)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Compares two outputs: max |x - y| / max |y|.
fn rel_diff(x: &[f64], y: &[f64]) -> f64 {
    let scale = y.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-30);
    x.iter()
        .zip(y)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max)
        / scale
}

/// Times `ours` against `theirs`, alternating rounds, after warm-up; median seconds per launch.
fn race(
    dev: &Device,
    flops: f64,
    sets: usize,
    rounds: usize,
    ours: &mut dyn FnMut(usize) -> Result<()>,
    theirs: Option<&mut dyn FnMut(usize) -> Result<()>>,
) -> Result<(f64, Option<f64>)> {
    // About 10 ms per round at 600 TFLOP/s.
    let iters = ((6e12 / flops) as usize).clamp(3, 200);
    dev.time(iters, sets, ours)?;
    let mut theirs = theirs;
    if let Some(t) = theirs.as_deref_mut() {
        dev.time(iters, sets, t)?;
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        a.push(dev.time(iters, sets, ours)?);
        if let Some(t) = theirs.as_deref_mut() {
            b.push(dev.time(iters, sets, t)?);
        }
    }
    Ok((median(a), (!b.is_empty()).then(|| median(b))))
}

fn to_f64<T: Element>(v: &[T]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

/// Plans to measure, and the name of the heuristic's choice.
type Plans<TA, TB, TD> = (Vec<Gemm<TA, TB, TD>>, String);

/// The plans to measure for one problem, by name, and the heuristic's choice.
fn plans<TA: Element, TB: Element, TD: Element>(
    dev: &Device,
    p: &GemmProblem,
    o: &Options,
) -> Result<Plans<TA, TB, TD>> {
    let (plans, h) = scheduled_plans::<TA, TB, TD>(dev, p, o)?;
    let plans = match o.pdl {
        Pdl::On => plans,
        Pdl::Off => plans
            .into_iter()
            .map(|g| g.with_programmatic_dependent_launch(false))
            .collect(),
        // Each plan as the library launches it, then without programmatic dependent launch
        // where that makes a difference, measured back to back against the same reference.
        Pdl::Both => plans
            .into_iter()
            .flat_map(|g| {
                let off = g
                    .programmatic_dependent_launch()
                    .then(|| g.clone().with_programmatic_dependent_launch(false));
                std::iter::once(g).chain(off)
            })
            .collect(),
    };
    Ok((plans, h))
}

/// The plans to measure with their tile-scheduler hints (`--swizzle`, `--raster`, `--splits`,
/// `--sweep-schedules`).
fn scheduled_plans<TA: Element, TB: Element, TD: Element>(
    dev: &Device,
    p: &GemmProblem,
    o: &Options,
) -> Result<Plans<TA, TB, TD>> {
    let (plans, h) = plans_for::<TA, TB, TD>(dev, p, &o.mode)?;
    if o.sweep_schedules {
        let mut out = Vec::new();
        for g in plans {
            let mut hints = vec![g.schedule(), cutlass::ScheduleHints::default()];
            for raster in [1, 2] {
                for swizzle in [1, 2, 4, 8] {
                    hints.push(cutlass::ScheduleHints {
                        swizzle,
                        raster,
                        splits: 0,
                    });
                }
            }
            // A plan's own hints can be one of the explicit ones (along M, swizzle 1): each
            // schedule once.
            let mut seen = Vec::new();
            hints.retain(|h| {
                let key = (h.swizzle.max(1), h.raster, h.splits);
                let new = !seen.contains(&key);
                seen.push(key);
                new
            });
            for hint in hints {
                out.push(g.clone().with_schedule(hint)?);
            }
        }
        return Ok((out, h));
    }
    if o.schedule == cutlass::ScheduleHints::default() {
        return Ok((plans, h));
    }
    let plans = plans
        .into_iter()
        .map(|g| g.with_schedule(o.schedule))
        .collect::<cutlass::Result<_>>()?;
    Ok((plans, h))
}

fn plans_for<TA: Element, TB: Element, TD: Element>(
    dev: &Device,
    p: &GemmProblem,
    mode: &KernelMode,
) -> Result<Plans<TA, TB, TD>> {
    let heuristic = Gemm::<TA, TB, TD>::plan(dev.info, p, None)?;
    let h = heuristic.kernel_name().to_string();
    let plans = match mode {
        KernelMode::Heuristic => vec![heuristic],
        KernelMode::Pinned(name) => vec![Gemm::plan(dev.info, p, Some(name))?],
        KernelMode::Autotune(path) => {
            let mut cache = TuneCache::open(path)?;
            vec![Gemm::autotune(&dev.stream, p, &mut cache)?]
        }
        KernelMode::All | KernelMode::Matching(_) => Gemm::<TA, TB, TD>::candidates(dev.info, p)
            .into_iter()
            .filter(|n| match mode {
                KernelMode::Matching(filter) => filter.matches(n),
                _ => true,
            })
            .map(|n| Gemm::plan(dev.info, p, Some(n)))
            .collect::<cutlass::Result<_>>()?,
    };
    Ok((plans, h))
}

/// A plan's programmatic dependent launch, as [`Row::pdl`] records it.
fn pdl_of<TA: Element, TB: Element, TD: Element>(g: &Gemm<TA, TB, TD>) -> Option<bool> {
    g.kernel_spec()
        .supports_programmatic_dependent_launch()
        .then(|| g.programmatic_dependent_launch())
}

fn rotation(dev: &Device, bytes: usize) -> usize {
    (2 * dev.l2_bytes).div_ceil(bytes.max(1)).clamp(1, 8)
}

/// bf16 or f16 against cuBLAS.
fn profile_16bit<T>(
    dev: &Device,
    blas: &CudaBlas,
    s: &Shape,
    kind: Kind,
    o: &Options,
) -> Result<Vec<Row>>
where
    T: Element + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits,
    CudaBlas: cudarc::cublas::Gemm<T>,
{
    let stream = &dev.stream;
    let sets = rotation(dev, (s.m * s.k + s.n * s.k) * 2);
    let a: Vec<CudaSlice<T>> = (0..sets)
        .map(|i| fill(stream, s.m * s.k, 1 + i as u64))
        .collect::<Result<_>>()?;
    let b: Vec<CudaSlice<T>> = (0..sets)
        .map(|i| fill(stream, s.n * s.k, 101 + i as u64))
        .collect::<Result<_>>()?;
    let mut d_blas = stream.alloc_zeros::<T>(s.m * s.n)?;
    let cfg = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_T,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: s.n as i32,
        n: s.m as i32,
        k: s.k as i32,
        alpha: T::from_f64(1.0),
        lda: s.k as i32,
        ldb: s.k as i32,
        beta: T::from_f64(0.0),
        ldc: s.n as i32,
    };
    // cuBLAS's time is measured against each kernel; its output once.
    unsafe { blas.gemm(cfg, &b[0], &a[0], &mut d_blas) }?;
    let reference = to_f64(&stream.clone_dtoh(&d_blas)?);
    let mut theirs = |i: usize| -> Result<()> {
        unsafe { blas.gemm(cfg, &b[i], &a[i], &mut d_blas) }?;
        Ok(())
    };
    // Two f32-accumulated results rounded to 16 bits: a few units of the output's rounding apart
    // at most.
    let tolerance = 4.0 * T::UNIT_ROUNDOFF.max(1.0 / 2048.0) * 2.0;
    race_plans::<T, T>(
        dev,
        s,
        kind,
        o,
        (&a, &b),
        &mut theirs,
        &reference,
        tolerance,
    )
}

/// Times every plan of the problem (the heuristic's, or all, or the pinned or autotuned one)
/// against the reference library (`theirs`, on input set `i`) over the rotated inputs `a`, `b`,
/// and checks each plan's output against `reference` (the reference library's output for set
/// 0): max |difference| / max |reference| within `tolerance`. One row per plan.
#[allow(clippy::too_many_arguments)]
fn race_plans<T, TD>(
    dev: &Device,
    s: &Shape,
    kind: Kind,
    o: &Options,
    (a, b): (&[CudaSlice<T>], &[CudaSlice<T>]),
    theirs: &mut dyn FnMut(usize) -> Result<()>,
    reference: &[f64],
    tolerance: f64,
) -> Result<Vec<Row>>
where
    T: Element + cudarc::driver::DeviceRepr,
    TD: Element + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits,
{
    let stream = &dev.stream;
    let p = GemmProblem::new(s.m, s.n, s.k);
    let (plans, heuristic) = plans::<T, T, TD>(dev, &p, o)?;
    let ws_len = plans.iter().map(|g| g.workspace_size()).max().unwrap_or(0);
    let mut ws = stream.alloc_zeros::<u8>(ws_len.max(1))?;
    let mut d_ours = stream.alloc_zeros::<TD>(s.m * s.n)?;
    let mut rows = Vec::new();
    for g in &plans {
        let mut run = |i: usize, d: &mut CudaSlice<TD>| -> Result<()> {
            g.run(stream, &a[i], &b[i], None, d, Workspace::Buffer(&mut ws))?;
            Ok(())
        };
        run(0, &mut d_ours)?;
        let diff = rel_diff(&to_f64(&stream.clone_dtoh(&d_ours)?), reference);
        let mut ours = |i: usize| run(i, &mut d_ours);
        let (t_ours, t_ref) = race(dev, p.flops(), a.len(), o.rounds, &mut ours, Some(theirs))?;
        rows.push(Row {
            shape: s.clone(),
            kind,
            kernel: g.kernel_name().to_string(),
            schedule: g.schedule(),
            heuristic: Some(heuristic.clone()),
            pdl: pdl_of(g),
            ours_s: t_ours,
            theirs_s: t_ref,
            ok: diff <= tolerance,
            max_rel_diff: diff,
        });
    }
    Ok(rows)
}

/// tf32 (f32 output) against `cublasGemmEx` with `CUBLAS_COMPUTE_32F_FAST_TF32`, or s8 (s32
/// output) against `cublasGemmEx` with `CUBLAS_COMPUTE_32I`. The inputs are exact tf32 values
/// (resp. integers in [-64, 64)), so both libraries multiply the same numbers.
fn profile_gemm_ex<T, TD>(
    dev: &Device,
    blas: &CudaBlas,
    s: &Shape,
    kind: Kind,
    o: &Options,
) -> Result<Vec<Row>>
where
    T: Element + cudarc::driver::DeviceRepr,
    TD: Element + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits,
{
    use cudarc::cublas::{result as blas_result, sys as blas_sys};
    let stream = &dev.stream;
    let sets = rotation(dev, (s.m * s.k + s.n * s.k) * kind.input_bytes());
    let a: Vec<CudaSlice<T>> = (0..sets)
        .map(|i| fill(stream, s.m * s.k, 1 + i as u64))
        .collect::<Result<_>>()?;
    let b: Vec<CudaSlice<T>> = (0..sets)
        .map(|i| fill(stream, s.n * s.k, 101 + i as u64))
        .collect::<Result<_>>()?;
    let mut d_blas = stream.alloc_zeros::<TD>(s.m * s.n)?;
    let (ab_type, d_type, compute) = match kind {
        Kind::Tf32 => (
            blas_sys::cudaDataType::CUDA_R_32F,
            blas_sys::cudaDataType::CUDA_R_32F,
            blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        ),
        Kind::I8 => (
            blas_sys::cudaDataType::CUDA_R_8I,
            blas_sys::cudaDataType::CUDA_R_32I,
            blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32I,
        ),
        _ => bail!("profile_gemm_ex serves tf32 and i8"),
    };
    // alpha = 1, beta = 0 in the compute type (f32 for tf32, s32 for i8).
    let (one_f, zero_f, one_i, zero_i) = (1.0f32, 0.0f32, 1i32, 0i32);
    let (alpha, beta): (*const c_void, *const c_void) = if kind == Kind::I8 {
        (&one_i as *const i32 as _, &zero_i as *const i32 as _)
    } else {
        (&one_f as *const f32 as _, &zero_f as *const f32 as _)
    };
    // Column-major cuBLAS view of the row-major problem: D^T[n, m] = W[n, k] · A^T.
    let cublas = |a: &CudaSlice<T>, b: &CudaSlice<T>, d: &mut CudaSlice<TD>| -> Result<()> {
        let (pa, _ga) = a.device_ptr(stream);
        let (pb, _gb) = b.device_ptr(stream);
        let (pd, _gd) = d.device_ptr_mut(stream);
        // SAFETY: the buffers hold m x k, n x k and m x n elements of the types named; alpha and
        // beta point at values of the compute type; the handle's stream is `stream`.
        unsafe {
            blas_result::gemm_ex(
                *blas.handle(),
                cublasOperation_t::CUBLAS_OP_T,
                cublasOperation_t::CUBLAS_OP_N,
                s.n as i32,
                s.m as i32,
                s.k as i32,
                alpha,
                pb as *const c_void,
                ab_type,
                s.k as i32,
                pa as *const c_void,
                ab_type,
                s.k as i32,
                beta,
                pd as *mut c_void,
                d_type,
                s.n as i32,
                compute,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
            )
        }
        .map_err(|e| anyhow!("cublasGemmEx: {e:?}"))
    };
    cublas(&a[0], &b[0], &mut d_blas)?;
    let reference = to_f64(&stream.clone_dtoh(&d_blas)?);
    let mut theirs = |i: usize| cublas(&a[i], &b[i], &mut d_blas);
    // i8: exact s32 sums (below 2^24, where the f32 epilogue is exact). tf32: the same exact
    // products, f32 sums in different orders.
    let tolerance = if kind == Kind::I8 { 0.0 } else { 1e-4 };
    race_plans::<T, TD>(
        dev,
        s,
        kind,
        o,
        (&a, &b),
        &mut theirs,
        &reference,
        tolerance,
    )
}

/// e4m3 x e4m3 -> bf16 (tensor-wise) against cuBLASLt, or FP8 blockwise against cuBLASLt's
/// blockwise matmul.
fn profile_fp8(dev: &Device, s: &Shape, kind: Kind, o: &Options) -> Result<Vec<Row>> {
    let stream = &dev.stream;
    let p = GemmProblem::new(s.m, s.n, s.k);
    let sets = rotation(dev, s.m * s.k + s.n * s.k);
    let a: Vec<CudaSlice<E4M3>> = (0..sets)
        .map(|i| fill(stream, s.m * s.k, 1 + i as u64))
        .collect::<Result<_>>()?;
    let w: Vec<CudaSlice<E4M3>> = (0..sets)
        .map(|i| fill(stream, s.n * s.k, 101 + i as u64))
        .collect::<Result<_>>()?;
    let mut d_ours = stream.alloc_zeros::<bf16>(s.m * s.n)?;
    let mut d_lt = stream.alloc_zeros::<bf16>(s.m * s.n)?;
    // The check: cuBLASLt's tensor-wise FP8 result (the blockwise scales are all 1).
    let mut lt_check = LtFp8::new(dev, s.m, s.n, s.k, false)?;
    lt_check.run(stream, &a[0], &w[0], &mut d_lt)?;
    let reference = to_f64(&stream.clone_dtoh(&d_lt)?);
    let mut lt = if kind == Kind::Fp8Blockwise {
        LtFp8::new(dev, s.m, s.n, s.k, true).ok()
    } else {
        Some(lt_check)
    };
    let mut rows = Vec::new();
    let mut measure = |name: &str,
                       schedule: cutlass::ScheduleHints,
                       pdl: Option<bool>,
                       heuristic: &str,
                       run: &mut dyn FnMut(usize, &mut CudaSlice<bf16>) -> Result<()>|
     -> Result<()> {
        run(0, &mut d_ours)?;
        let diff = rel_diff(&to_f64(&stream.clone_dtoh(&d_ours)?), &reference);
        let mut ours = |i: usize| run(i, &mut d_ours);
        let has_lt = lt.is_some();
        let mut theirs = |i: usize| -> Result<()> {
            match lt.as_mut() {
                Some(lt) => lt.run(stream, &a[i], &w[i], &mut d_lt),
                None => Ok(()),
            }
        };
        let (t_ours, t_lt) = race(
            dev,
            p.flops(),
            sets,
            o.rounds,
            &mut ours,
            if has_lt { Some(&mut theirs) } else { None },
        )?;
        rows.push(Row {
            shape: s.clone(),
            kind,
            kernel: name.to_string(),
            schedule,
            heuristic: Some(heuristic.to_string()),
            pdl,
            ours_s: t_ours,
            theirs_s: t_lt,
            // Exact products, f32 sums in different orders, one bf16 rounding each.
            ok: diff <= 2.0 / 256.0,
            max_rel_diff: diff,
        });
        Ok(())
    };
    if kind == Kind::E4m3 {
        let (plans, h) = plans::<E4M3, E4M3, bf16>(dev, &p, o)?;
        let ws_len = plans.iter().map(|g| g.workspace_size()).max().unwrap_or(0);
        let mut ws = stream.alloc_zeros::<u8>(ws_len.max(1))?;
        for g in &plans {
            measure(g.kernel_name(), g.schedule(), pdl_of(g), &h, &mut |i, d| {
                Ok(g.run(stream, &a[i], &w[i], None, d, Workspace::Buffer(&mut ws))?)
            })?;
        }
    } else {
        let g = match &o.mode {
            KernelMode::Pinned(name) => {
                BlockwiseGemm::<E4M3, E4M3, bf16>::plan(dev.info, &p, Some(name))?
            }
            _ => BlockwiseGemm::<E4M3, E4M3, bf16>::plan(dev.info, &p, None)?,
        };
        let (la, lb) = g.scale_lens();
        let sa = stream.clone_htod(&vec![1.0f32; la])?;
        let sb = stream.clone_htod(&vec![1.0f32; lb])?;
        let mut ws = stream.alloc_zeros::<u8>(g.workspace_size().max(1))?;
        let name = g.kernel_name();
        measure(
            name,
            cutlass::ScheduleHints::default(),
            None,
            name,
            &mut |i, d| {
                Ok(g.run(
                    stream,
                    &a[i],
                    &sa,
                    &w[i],
                    &sb,
                    None,
                    d,
                    Workspace::Buffer(&mut ws),
                )?)
            },
        )?;
    }
    Ok(rows)
}

fn short(kernel: &str) -> String {
    // The tile, cluster, layout and schedule part of a procedural name.
    kernel
        .split_once("_f32_")
        .map(|(_, rest)| rest.to_string())
        .unwrap_or_else(|| kernel.to_string())
}

fn print_header() {
    println!(
        "{:<24} {:<6} {:>6} {:>6} {:>6} {:>9} {:>9} {:>6} {:>6} {:>4} {:>9}  kernel",
        "shape", "type", "m", "n", "k", "TFLOP/s", "ref", "ratio", "roof%", "bnd", "maxdiff"
    );
}

fn print_row(dev: &Device, r: &Row) {
    let (roof, mem) = r.roof(dev);
    let ours = r.tflops(r.ours_s);
    let theirs = r.theirs_s.map(|t| r.tflops(t));
    let mark = if r.ok { "" } else { "  MISMATCH" };
    let mut sched = match r.schedule {
        cutlass::ScheduleHints {
            swizzle: 0 | 1,
            raster: 0,
            ..
        } => String::new(),
        h => format!(
            " [swizzle {} along {}]",
            h.swizzle.max(1),
            ["-", "M", "N"][h.raster.min(2) as usize]
        ),
    };
    if r.schedule.splits > 1 {
        sched += &format!(" [split-K {}]", r.schedule.splits);
    }
    if r.pdl == Some(false) {
        sched += " [no PDL]";
    }
    let h = match &r.heuristic {
        Some(h) if *h != r.kernel => format!(" (heuristic: {})", short(h)),
        _ => String::new(),
    };
    println!(
        "{:<24} {:<6} {:>6} {:>6} {:>6} {:>9.1} {:>9} {:>6} {:>6.1} {:>4} {:>9.2e}  {}{h}{mark}",
        r.shape.name,
        r.kind.label(),
        r.shape.m,
        r.shape.n,
        r.shape.k,
        ours,
        theirs.map_or("-".into(), |t| format!("{t:.1}")),
        theirs.map_or("-".into(), |t| format!("{:.3}", ours / t)),
        100.0 * ours / roof,
        if mem { "mem" } else { "comp" },
        r.max_rel_diff,
        short(&r.kernel) + &sched,
    );
}

/// cutlass_profiler's CSV columns where they overlap, then ours.
fn write_csv(path: &std::path::Path, dev: &Device, rows: &[Row]) -> Result<()> {
    let mut f = std::fs::File::create(path).with_context(|| format!("{}", path.display()))?;
    writeln!(
        f,
        "Problem,Provider,OperationKind,Operation,Disposition,Status,gemm_kind,m,n,k,A,B,C,D,alpha,beta,batch_count,Bytes,Flops,Runtime,GB/s,GFLOPs,shape,roofline_pct,ratio_vs_reference,max_rel_diff,device,raster_order,swizzle_size,split_k_slices,pdl"
    )?;
    for (i, r) in rows.iter().enumerate() {
        let t = r.kind.cutlass_profiler_type();
        let out = r.kind.cutlass_profiler_output();
        let mut emit = |provider: &str,
                        op: &str,
                        secs: f64,
                        ratio: String,
                        pdl: &str|
         -> Result<()> {
            let (roof, _) = r.roof(dev);
            writeln!(
                f,
                "{},{provider},gemm,{op},{},success,universal,{},{},{},{t}:row,{t}:column,{out}:row,{out}:row,1,0,1,{:.0},{:.0},{:.6},{:.1},{:.1},{},{:.1},{ratio},{:.3e},{},{},{},{},{}",
                i + 1,
                if r.ok { "passed" } else { "incorrect" },
                r.shape.m,
                r.shape.n,
                r.shape.k,
                r.bytes(),
                r.flops(),
                secs * 1e3,
                r.bytes() / secs / 1e9,
                r.flops() / secs / 1e9,
                r.shape.name,
                100.0 * r.tflops(secs) / roof,
                r.max_rel_diff,
                dev.name.replace(',', " "),
                ["heuristic", "along_m", "along_n"][r.schedule.raster.min(2) as usize],
                r.schedule.swizzle.max(1),
                r.schedule.splits.max(1),
                pdl,
            )?;
            Ok(())
        };
        let ratio = r
            .theirs_s
            .map_or(String::new(), |t| format!("{:.4}", t / r.ours_s));
        let pdl = match r.pdl {
            Some(true) => "on",
            Some(false) => "off",
            None => "-",
        };
        emit("cutlass-rs", &r.kernel, r.ours_s, ratio, pdl)?;
        if let Some(t) = r.theirs_s {
            emit(
                r.kind.reference(),
                r.kind.reference(),
                t,
                String::new(),
                "-",
            )?;
        }
    }
    Ok(())
}

/// A grouped bar chart per type: this crate vs the reference library, TFLOP/s per shape.
fn write_svg(prefix: &std::path::Path, dev: &Device, rows: &[Row], kind: Kind) -> Result<PathBuf> {
    let best: Vec<&Row> = best_rows(rows, kind, Pdl::On);
    let path = PathBuf::from(format!("{}-{}.svg", prefix.display(), kind.label()));
    let (w, h, left, bottom, top) = (60.0 + 46.0 * best.len() as f64, 420.0, 60.0, 150.0, 40.0);
    let max = best
        .iter()
        .flat_map(|r| [Some(r.tflops(r.ours_s)), r.theirs_s.map(|t| r.tflops(t))])
        .flatten()
        .fold(1.0f64, f64::max)
        * 1.1;
    let y = |v: f64| top + (h - top - bottom) * (1.0 - v / max);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{left}\" y=\"20\" font-size=\"14\">{} GEMM, TFLOP/s: cutlass-rs (blue) vs {} (grey) on {}</text>\n",
        kind.label(),
        kind.reference(),
        dev.name
    );
    for i in 0..=4 {
        let v = max * i as f64 / 4.0;
        s += &format!(
            "<line x1=\"{left}\" x2=\"{w:.0}\" y1=\"{0:.1}\" y2=\"{0:.1}\" stroke=\"#ddd\"/><text x=\"{1}\" y=\"{0:.1}\" text-anchor=\"end\">{v:.0}</text>\n",
            y(v),
            left - 4.0
        );
    }
    for (i, r) in best.iter().enumerate() {
        let x = left + 10.0 + 46.0 * i as f64;
        let ours = r.tflops(r.ours_s);
        s += &format!(
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"16\" height=\"{:.1}\" fill=\"#1f77b4\"><title>{}: {ours:.1}</title></rect>\n",
            y(ours),
            y(0.0) - y(ours),
            r.kernel
        );
        if let Some(t) = r.theirs_s.map(|t| r.tflops(t)) {
            s += &format!(
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"16\" height=\"{:.1}\" fill=\"#999\"><title>{}: {t:.1}</title></rect>\n",
                x + 17.0,
                y(t),
                y(0.0) - y(t),
                kind.reference()
            );
        }
        s += &format!(
            "<text transform=\"translate({:.1},{:.1}) rotate(60)\">{}</text>\n",
            x + 8.0,
            y(0.0) + 6.0,
            r.shape.name
        );
    }
    s += "</svg>\n";
    std::fs::write(&path, s).with_context(|| format!("{}", path.display()))?;
    Ok(path)
}

/// Per shape, the fastest measured kernel of this crate (all rows in heuristic mode), among the
/// plans launched with programmatic dependent launch where the kernel has it (`Pdl::On`, the
/// library's default) or without it (`Pdl::Off`).
fn best_rows(rows: &[Row], kind: Kind, pdl: Pdl) -> Vec<&Row> {
    let mut out: Vec<&Row> = Vec::new();
    let launch = |r: &Row| match pdl {
        Pdl::Off => r.pdl != Some(true),
        _ => r.pdl != Some(false),
    };
    for r in rows.iter().filter(|r| r.kind == kind && launch(r)) {
        match out.iter_mut().find(|b| b.shape.name == r.shape.name) {
            Some(b) if r.ours_s < b.ours_s => *b = r,
            Some(_) => {}
            None => out.push(r),
        }
    }
    out
}

fn summarize(dev: &Device, rows: &[Row], kinds: &[Kind], mode: &KernelMode, pdl: Pdl) {
    let launches: &[Pdl] = match pdl {
        Pdl::Both => &[Pdl::On, Pdl::Off],
        _ => &[pdl],
    };
    for &kind in kinds {
        for &launch in launches {
            summarize_kind(rows, kind, mode, launch, pdl == Pdl::Both);
        }
    }
    let _ = dev;
}

fn summarize_kind(rows: &[Row], kind: Kind, mode: &KernelMode, launch: Pdl, label: bool) {
    let label = match (label, launch) {
        (false, _) => "",
        (true, Pdl::Off) => ", without programmatic dependent launch",
        (true, _) => ", with programmatic dependent launch where the kernel has it",
    };
    let best = best_rows(rows, kind, launch);
    let ratios: Vec<f64> = best
        .iter()
        .filter_map(|r| r.theirs_s.map(|t| t / r.ours_s))
        .collect();
    if ratios.is_empty() {
        return;
    }
    let geo = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
    let min = ratios.iter().cloned().fold(f64::INFINITY, f64::min);
    println!(
        "{}: geometric mean {geo:.3}x {} over {} shapes, lowest {min:.3}x{label}{}",
        kind.label(),
        kind.reference(),
        ratios.len(),
        if matches!(mode, KernelMode::All) {
            " (best kernel per shape)"
        } else {
            ""
        }
    );
    if matches!(mode, KernelMode::All) {
        // How far the heuristic's pick is from the best measured kernel.
        let mut worst = (1.0f64, String::new());
        for b in &best {
            let h = rows.iter().find(|r| {
                r.kind == kind
                    && r.shape.name == b.shape.name
                    && r.pdl == b.pdl
                    && Some(&r.kernel) == r.heuristic.as_ref()
            });
            if let Some(h) = h {
                let f = b.ours_s / h.ours_s;
                if f < worst.0 {
                    worst = (f, b.shape.name.clone());
                }
            }
        }
        println!(
            "{}: the heuristic's pick reaches {:.3} of the best kernel's speed at worst ({})",
            kind.label(),
            worst.0,
            if worst.1.is_empty() { "-" } else { &worst.1 }
        );
    }
}

pub fn main(args: &[String]) -> ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cutlass-profiler profile: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &[String]) -> Result<ExitCode> {
    let o = parse(args)?;
    if !cutlass::cuda_available() {
        eprintln!("cutlass-profiler profile: no CUDA GPU found; nothing to profile");
        return Ok(ExitCode::from(3));
    }
    let dev = Device::open()?;
    let blas =
        CudaBlas::new(dev.stream.clone()).context("cuBLAS (libcublas.so must be loadable)")?;
    println!(
        "device: {} (cc {}.{}, {} SMs, L2 {} MiB); roofline: {:.1} TFLOP/s bf16 dense (x2 for FP8), copy bandwidth {:.0} GB/s (measured)",
        dev.name,
        dev.info.compute_capability.0,
        dev.info.compute_capability.1,
        dev.info.sm_count,
        dev.l2_bytes >> 20,
        dev.peak_bf16,
        dev.copy_gbs
    );
    print_header();
    let total = o.shapes.len() * o.kinds.len();
    let mut rows = Vec::new();
    let mut failed = 0;
    for (i, (s, &kind)) in o
        .shapes
        .iter()
        .flat_map(|s| o.kinds.iter().map(move |k| (s, k)))
        .enumerate()
    {
        let done = i * 30 / total.max(1);
        eprint!(
            "\r[{}{}] {}/{} {} {}            ",
            "#".repeat(done),
            " ".repeat(30 - done),
            i + 1,
            total,
            s.name,
            kind.label()
        );
        let _ = std::io::stderr().flush();
        let result = match kind {
            Kind::Bf16 => profile_16bit::<bf16>(&dev, &blas, s, kind, &o),
            Kind::F16 => profile_16bit::<f16>(&dev, &blas, s, kind, &o),
            Kind::E4m3 | Kind::Fp8Blockwise => profile_fp8(&dev, s, kind, &o),
            Kind::Tf32 => profile_gemm_ex::<Tf32, f32>(&dev, &blas, s, kind, &o),
            Kind::I8 => profile_gemm_ex::<i8, i32>(&dev, &blas, s, kind, &o),
        };
        eprint!("\r{}\r", " ".repeat(80));
        match result {
            Ok(r) => {
                for row in &r {
                    print_row(&dev, row);
                    failed += usize::from(!row.ok);
                }
                rows.extend(r);
            }
            Err(e) => {
                println!("{:<24} {:<6} error: {e:#}", s.name, kind.label());
                failed += 1;
            }
        }
        // The CSV holds every row measured so far: a run stopped by a time limit keeps them.
        if let Some(path) = &o.csv {
            write_csv(path, &dev, &rows)?;
        }
    }
    summarize(&dev, &rows, &o.kinds, &o.mode, o.pdl);
    if let Some(path) = &o.csv {
        write_csv(path, &dev, &rows)?;
        println!("wrote {}", path.display());
    }
    if let Some(prefix) = &o.svg {
        for &k in &o.kinds {
            if rows.iter().any(|r| r.kind == k) {
                println!("wrote {}", write_svg(prefix, &dev, &rows, k)?.display());
            }
        }
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        println!("{failed} result(s) failed their check or did not run");
        ExitCode::from(1)
    })
}

/// `cutlass-profiler overhead [--shape MxNxK]`: the host time per call of a planned bf16 GEMM
/// (safe [`Gemm::run`], unsafe [`Gemm::run_raw`]) against a bare launch of the same kernel with the
/// same parameters ([`cutlass::Kernel::relaunch_raw`]: `cudaLaunchKernelEx` and nothing else), with
/// three more lines for context: an empty kernel with the same cluster shape
/// (`cutlass_rs_launch_probe`), cuBLAS's `cublasGemmEx` for the same problem, and a CUDA-graph
/// replay of the GEMM. Batches of 200 calls are timed on the host without synchronizing (fewer
/// than the launch queue holds), the median of 25 batches counts.
pub fn overhead(args: &[String]) -> ExitCode {
    match run_overhead(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cutlass-profiler overhead: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run_overhead(args: &[String]) -> Result<()> {
    let shape = match args {
        [] => parse_shape("128x128x128")?,
        [flag, s] if flag == "--shape" => parse_shape(s)?,
        _ => bail!("usage: cutlass-profiler overhead [--shape MxNxK]"),
    };
    if !cutlass::cuda_available() {
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
        let st = unsafe { cutlass::sys::cutlass_rs_launch_probe(cx as i32, cy as i32, cu) };
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
    let kernel = cutlass::built_kernels()
        .iter()
        .find(|k| k.name == g.kernel_name())
        .ok_or_else(|| anyhow!("kernel {} not in the registry", g.kernel_name()))?;
    let bare = host_us(&mut || {
        // SAFETY: the buffers of the last run_raw (above) are live; the stream is live.
        Ok(unsafe { kernel.relaunch_raw(stream.cu_stream()) }?)
    })?;
    let blas = CudaBlas::new(stream.clone()).context("cuBLAS (libcublas.so must be loadable)")?;
    let cfg = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_T,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: shape.n as i32,
        n: shape.m as i32,
        k: shape.k as i32,
        alpha: bf16::ONE,
        lda: shape.k as i32,
        ldb: shape.k as i32,
        beta: bf16::ZERO,
        ldc: shape.n as i32,
    };
    let mut d_blas = stream.alloc_zeros::<bf16>(shape.m * shape.n)?;
    let cublas = host_us(&mut || {
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
        dev.name,
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
    println!("  cuBLAS cublasGemmEx, same problem:                                {cublas:7.2} us");
    println!("  CUDA graph replay of the GEMM:                                    {replay:7.2} us");
    Ok(())
}
