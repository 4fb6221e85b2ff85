//! `cutlass-profiler profile --grouped`: this crate's grouped GEMM on mixture-of-experts layers,
//! against the per-expert loop of cuBLAS (bf16, f16) or cuBLASLt (e4m3) GEMMs and against cuBLAS's
//! grouped GEMM (`cublasGemmGroupedBatchedEx`, 16-bit types), in one process, kernel against
//! kernel. FP8 blockwise (`--types fp8bw`) is [`crate::grouped_blockwise`].
//!
//! The layers: Mixtral-8x7B (8 experts, top-2, hidden 4096, expert FFN 14336), DeepSeek-V3 (256
//! experts, top-8, hidden 7168, expert FFN 2048) and Qwen3-30B-A3B (128 experts, top-8, hidden
//! 2048, expert FFN 768); per layer the gate-and-up projection (N = 2 x FFN, K = hidden) and the
//! down projection (N = hidden, K = FFN). Each token goes to top-k experts, drawn without
//! repetition from a uniform or a skewed (Zipf, exponent 1.2) distribution with a fixed seed; the
//! rows are sorted by expert (the contiguous layout). Every expert's weight is its own buffer
//! region (`experts x n x k`), so the weights are read from memory as in a model.
//!
//! Per case: our plan ([`GroupedGemm`], the library's choice), the loop (one GEMM per expert with
//! rows, as a framework without a grouped kernel launches them) and cuBLAS's grouped GEMM (its
//! problem sizes on the host). Each result is checked against the loop's on the same inputs.
//! Timings: the median of `--rounds` rounds of CUDA events around a batch of launches, the
//! libraries alternating.

use std::collections::HashMap;
use std::ffi::c_void;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use cudarc::cublas::sys as blas_sys;
use cudarc::cublas::{CudaBlas, Gemm as _};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr};
use cutlass_gemm::numeric::E4M3;
use cutlass_gemm::{DataType, Element, GroupedGemm, GroupedInputs, GroupedProblem, Workspace};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::args::{KernelMode, ProfileArgs};
use crate::cublas::{LtEpilogue, LtMatmul, LtScales};
use crate::device::Device;
use crate::kind::Kind;
use crate::shapes::Shape;
use crate::timing::{median, rel_diff, time, to_f64};

/// One mixture-of-experts model's expert layer.
#[derive(Clone, Copy, Debug)]
pub struct MoeModel {
    pub name: &'static str,
    pub experts: usize,
    pub top_k: usize,
    pub hidden: usize,
    pub ffn: usize,
}

pub const MODELS: [MoeModel; 3] = [
    MoeModel {
        name: "mixtral-8x7b",
        experts: 8,
        top_k: 2,
        hidden: 4096,
        ffn: 14336,
    },
    MoeModel {
        name: "deepseek-v3",
        experts: 256,
        top_k: 8,
        hidden: 7168,
        ffn: 2048,
    },
    MoeModel {
        name: "qwen3-30b-a3b",
        experts: 128,
        top_k: 8,
        hidden: 2048,
        ffn: 768,
    },
];

/// Tokens per step: decode (1 to 64) and prefill (2048, 8192); `--tokens` picks others.
pub const TOKENS: [usize; 6] = [1, 8, 64, 512, 2048, 8192];

/// The tokens per step a run measures: `--tokens`, else [`TOKENS`].
pub(crate) fn tokens(args: &ProfileArgs) -> Vec<usize> {
    if args.tokens.is_empty() {
        TOKENS.to_vec()
    } else {
        args.tokens.clone()
    }
}

/// How tokens pick their experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    Uniform,
    /// Zipf with exponent 1.2 over the experts.
    Skewed,
    /// Every expert the same rows (DeepGEMM's benchmark), the remainder to the first experts.
    Even,
}

impl Routing {
    fn name(self) -> &'static str {
        match self {
            Routing::Uniform => "uniform",
            Routing::Skewed => "skewed",
            Routing::Even => "even",
        }
    }
}

/// Rows per expert for `tokens` tokens routed to `top_k` distinct experts each.
pub fn route(model: &MoeModel, tokens: usize, routing: Routing, seed: u64) -> Vec<usize> {
    if routing == Routing::Even {
        let rows = tokens * model.top_k;
        return (0..model.experts)
            .map(|e| rows / model.experts + usize::from(e < rows % model.experts))
            .collect();
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let weights: Vec<f64> = (0..model.experts)
        .map(|e| match routing {
            Routing::Skewed => 1.0 / ((e + 1) as f64).powf(1.2),
            _ => 1.0,
        })
        .collect();
    let total: f64 = weights.iter().sum();
    let mut rows = vec![0usize; model.experts];
    for _ in 0..tokens {
        let mut picked = Vec::with_capacity(model.top_k);
        while picked.len() < model.top_k {
            let mut x = rng.random::<f64>() * total;
            let mut e = 0;
            while e + 1 < model.experts && x >= weights[e] {
                x -= weights[e];
                e += 1;
            }
            if !picked.contains(&e) {
                picked.push(e);
            }
        }
        for e in picked {
            rows[e] += 1;
        }
    }
    rows
}

/// One measured case.
pub(crate) struct Row {
    pub model: &'static str,
    pub gemm: &'static str,
    pub tokens: usize,
    pub routing: Routing,
    pub kind: Kind,
    pub kernel: String,
    /// Whether the kernel is the library's choice (`--kernels` may time others too).
    pub chosen: bool,
    pub ours: f64,
    /// The per-expert loop of cuBLAS / cuBLASLt GEMMs (none where cuBLASLt has no algorithm for
    /// some expert's rows).
    pub looped: Option<f64>,
    pub grouped_cublas: Option<f64>,
    /// The per-expert loop of this crate's own GEMMs (FP8 blockwise).
    pub own_loop: Option<f64>,
    pub flops: f64,
    pub diff: f64,
}

pub fn run(args: &ProfileArgs) -> Result<ExitCode> {
    let dev = Device::open()?;
    let blas =
        CudaBlas::new(dev.stream.clone()).context("cuBLAS (libcublas.so must be loadable)")?;
    let rounds = args.rounds.clamp(1, 100);
    println!(
        "device: {} (cc {}.{}, {} SMs); grouped GEMM, kernel against kernel, median of {rounds} rounds",
        dev.name(),
        dev.info.compute_capability.0,
        dev.info.compute_capability.1,
        dev.info.sm_count,
    );
    println!(
        "{:<14} {:<5} {:>6} {:<8} {:<5} {:>9} {:>9} {:>7} {:>9} {:>7} {:>8}  kernel (* the library's choice)",
        "model",
        "gemm",
        "tokens",
        "routing",
        "type",
        "ours",
        "loop",
        "x loop",
        "cublas-g",
        "x cbg",
        "diff"
    );
    let steps = tokens(args);
    let mut rows: Vec<Row> = Vec::new();
    for model in MODELS {
        for (gemm, n, k) in [
            ("up", 2 * model.ffn, model.hidden),
            ("down", model.hidden, model.ffn),
        ] {
            for &kind in &args.problems.types {
                let measured = match kind {
                    Kind::Bf16 => case_16bit::<bf16>(
                        &dev,
                        &blas,
                        &model,
                        gemm,
                        n,
                        k,
                        kind,
                        rounds,
                        &args.kernels,
                        &steps,
                    )?,
                    Kind::F16 => case_16bit::<f16>(
                        &dev,
                        &blas,
                        &model,
                        gemm,
                        n,
                        k,
                        kind,
                        rounds,
                        &args.kernels,
                        &steps,
                    )?,
                    Kind::E4m3 => {
                        case_e4m3(&dev, &model, gemm, (n, k), rounds, &args.kernels, &steps)?
                    }
                    Kind::Fp8Blockwise => crate::grouped_blockwise::model_cases(
                        &dev,
                        &model,
                        gemm,
                        (n, k),
                        rounds,
                        &args.kernels,
                        &steps,
                    )?,
                    other => {
                        eprintln!("--grouped: {other:?} has no grouped kernel; skipped");
                        Vec::new()
                    }
                };
                rows.extend(measured);
            }
        }
    }
    if args.problems.types.contains(&Kind::Fp8Blockwise) {
        rows.extend(crate::grouped_blockwise::deepgemm_cases(
            &dev,
            rounds,
            &args.kernels,
        )?);
    }
    summary(&rows);
    if let Some(path) = &args.csv {
        write_csv(path, &rows)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_row(r: &Row) {
    let tf = |s: f64| r.flops / s / 1e12;
    let tflops = |x: Option<f64>| x.map_or("-".into(), |s| format!("{:.1}", tf(s)));
    let ratio = |x: Option<f64>| x.map_or("-".into(), |s| format!("{:.3}", s / r.ours));
    // The second baseline: cuBLAS's grouped GEMM, or for FP8 blockwise our own loop.
    let second = r.grouped_cublas.or(r.own_loop);
    println!(
        "{:<14} {:<5} {:>6} {:<8} {:<5} {:>9.1} {:>9} {:>7} {:>9} {:>7} {:>8.1e}  {}",
        r.model,
        r.gemm,
        r.tokens,
        r.routing.name(),
        r.kind.label(),
        tf(r.ours),
        tflops(r.looped),
        ratio(r.looped),
        tflops(second),
        ratio(second),
        r.diff,
        if r.chosen {
            format!("* {}", r.kernel)
        } else {
            format!("  {}", r.kernel)
        }
    );
}

/// Geometric means of the speedups, per type, at decode (<= 64 tokens), mid (512) and prefill
/// (>= 2048 tokens).
fn summary(rows: &[Row]) {
    let geo = |v: &[f64]| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp();
    println!();
    println!("geometric means of speedups (time of the baseline / ours; the library's choice of kernel):");
    let mut kinds: Vec<Kind> = Vec::new();
    for r in rows {
        if !kinds.contains(&r.kind) {
            kinds.push(r.kind);
        }
    }
    for kind in kinds {
        for (label, lo, hi) in [
            ("decode (1-64 tokens)", 1, 64),
            ("65-2047 tokens", 65, 2047),
            ("prefill (2048+ tokens)", 2048, usize::MAX),
        ] {
            let sel: Vec<&Row> = rows
                .iter()
                .filter(|r| r.chosen && r.kind == kind && r.tokens >= lo && r.tokens <= hi)
                .collect();
            if sel.is_empty() {
                continue;
            }
            let ratios = |f: &dyn Fn(&Row) -> Option<f64>| -> Vec<f64> {
                sel.iter()
                    .filter_map(|r| f(r).map(|s| s / r.ours))
                    .collect()
            };
            let part = |name: &str, v: &[f64]| {
                if v.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; x {name} {:.3} (min {:.3}, {} cases)",
                        geo(v),
                        v.iter().copied().fold(f64::INFINITY, f64::min),
                        v.len()
                    )
                }
            };
            println!(
                "  {:<5} {label:<28}{}{}{}",
                kind.label(),
                part("loop", &ratios(&|r| r.looped)),
                part("cuBLAS grouped", &ratios(&|r| r.grouped_cublas)),
                part("own loop", &ratios(&|r| r.own_loop)),
            );
        }
    }
}

fn write_csv(path: &std::path::Path, rows: &[Row]) -> Result<()> {
    let mut w = csv::Writer::from_path(path).with_context(|| format!("{}", path.display()))?;
    w.write_record([
        "model",
        "gemm",
        "tokens",
        "routing",
        "type",
        "kernel",
        "chosen",
        "ours_us",
        "loop_us",
        "cublas_grouped_us",
        "own_loop_us",
        "gflop",
        "rel_diff",
    ])?;
    for r in rows {
        w.write_record([
            r.model.to_string(),
            r.gemm.to_string(),
            r.tokens.to_string(),
            r.routing.name().to_string(),
            r.kind.label().to_string(),
            r.kernel.clone(),
            r.chosen.to_string(),
            format!("{:.3}", r.ours * 1e6),
            r.looped
                .map_or(String::new(), |s| format!("{:.3}", s * 1e6)),
            r.grouped_cublas
                .map_or(String::new(), |s| format!("{:.3}", s * 1e6)),
            r.own_loop
                .map_or(String::new(), |s| format!("{:.3}", s * 1e6)),
            format!("{:.4}", r.flops / 1e9),
            format!("{:.3e}", r.diff),
        ])?;
    }
    w.flush()?;
    Ok(())
}

/// The kernels `--kernels` asks for among the grouped kernels of this build for A's type, with
/// blockwise scales or without, that the device (`info`) runs: `None` stands for the library's
/// choice.
pub(crate) fn candidates(
    info: &cutlass_gemm::DeviceInfo,
    mode: &KernelMode,
    a: DataType,
    blockwise: bool,
) -> Vec<Option<&'static str>> {
    let cc = info.compute_capability;
    let serving = cutlass_gemm::built_grouped_kernels()
        .iter()
        .filter(move |k| {
            k.spec.a.ty == a
                && k.spec.blockwise.is_some() == blockwise
                && k.spec.block_scale.is_none()
                && k.spec.arch.runs_on(cc)
        });
    match mode {
        KernelMode::Heuristic | KernelMode::Autotune(_) => vec![None],
        KernelMode::All => serving.map(|k| Some(k.name)).collect(),
        KernelMode::Pinned(name) => serving
            .filter(|k| k.name == name)
            .map(|k| Some(k.name))
            .collect(),
        KernelMode::Matching(filter) => serving
            .filter(|k| filter.matches(k.name))
            .map(|k| Some(k.name))
            .collect(),
    }
}

/// Offsets of the contiguous layout from rows per expert.
pub(crate) fn offsets(rows: &[usize]) -> Vec<i32> {
    let mut o = vec![0i32];
    for r in rows {
        o.push(o.last().unwrap() + *r as i32);
    }
    o
}

/// Times two launch sequences alternating, the median of `rounds` rounds each.
pub(crate) fn duel(
    dev: &Device,
    flops: f64,
    rounds: usize,
    ours: &mut dyn FnMut() -> Result<()>,
    theirs: &mut dyn FnMut() -> Result<()>,
) -> Result<(f64, f64)> {
    let iters = ((2e12 / flops) as usize).clamp(3, 100);
    let mut o = |_: usize| ours();
    let mut t = |_: usize| theirs();
    time(dev, iters, 1, &mut o)?;
    time(dev, iters, 1, &mut t)?;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        a.push(time(dev, iters, 1, &mut o)?);
        b.push(time(dev, iters, 1, &mut t)?);
    }
    Ok((median(a), median(b)))
}

pub(crate) fn fill<T: Element + DeviceRepr>(
    stream: &Arc<CudaStream>,
    len: usize,
    seed: u64,
) -> Result<CudaSlice<T>> {
    crate::timing::fill(stream, len.max(1), seed)
}

/// One case's measurements of our candidates against the loop (and cuBLAS's grouped GEMM, timed
/// once per case), each checked against the loop's output.
pub(crate) struct Measured {
    pub rows: Vec<Row>,
}

#[allow(clippy::too_many_arguments)]
fn case_16bit<T: Element + DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    dev: &Device,
    blas: &CudaBlas,
    model: &MoeModel,
    gemm: &'static str,
    n: usize,
    k: usize,
    kind: Kind,
    rounds: usize,
    mode: &KernelMode,
    steps: &[usize],
) -> Result<Vec<Row>>
where
    CudaBlas: cudarc::cublas::Gemm<T>,
{
    let stream = &dev.stream;
    let weights: CudaSlice<T> = fill(stream, model.experts * n * k, 7)?;
    let data_type = if kind == Kind::F16 {
        blas_sys::cudaDataType::CUDA_R_16F
    } else {
        blas_sys::cudaDataType::CUDA_R_16BF
    };
    let mut out = Measured { rows: Vec::new() };
    for routing in [Routing::Uniform, Routing::Skewed] {
        for &tokens in steps {
            let per_expert = route(model, tokens, routing, 17 + tokens as u64);
            let rows: usize = per_expert.iter().sum();
            let a: CudaSlice<T> = fill(stream, rows * k, 11)?;
            let mut d_ours = stream.alloc_zeros::<T>(rows * n)?;
            let mut d_loop = stream.alloc_zeros::<T>(rows * n)?;
            let d_cbg = stream.alloc_zeros::<T>(rows * n)?;
            let problem = GroupedProblem::contiguous(model.experts, rows, n, k);
            let chosen = GroupedGemm::<T, T>::plan(dev.info, &problem, None)?.kernel_name();
            let offs = offsets(&per_expert);
            let flops = 2.0 * rows as f64 * n as f64 * k as f64;
            let looped = |d_loop: &mut CudaSlice<T>| -> Result<()> {
                for (e, &m) in per_expert.iter().enumerate() {
                    if m == 0 {
                        continue;
                    }
                    let start = offs[e] as usize;
                    let s = Shape {
                        name: String::new(),
                        m,
                        n,
                        k,
                    };
                    let cfg = crate::cublas::tn_config(&s, T::from_f64(1.0), T::from_f64(0.0));
                    let w = weights.slice(e * n * k..(e + 1) * n * k);
                    let x = a.slice(start * k..(start + m) * k);
                    let mut y = d_loop.slice_mut(start * n..(start + m) * n);
                    // SAFETY: the views hold the m x k, n x k and m x n extents of the config.
                    unsafe { blas.gemm(cfg, &w, &x, &mut y) }?;
                }
                Ok(())
            };
            // cuBLAS's grouped GEMM: one group of one problem per expert with rows, pointer
            // arrays on the device, sizes on the host.
            let live: Vec<usize> = (0..model.experts).filter(|&e| per_expert[e] > 0).collect();
            let size = std::mem::size_of::<T>();
            let at = |base: u64, e: usize, row_elems: usize| base + (e * row_elems * size) as u64;
            let (bw, ba, bc) = (
                weights.device_ptr(stream).0,
                a.device_ptr(stream).0,
                d_cbg.device_ptr(stream).0,
            );
            let ptr_a: Vec<u64> = live.iter().map(|&e| at(bw, e, n * k)).collect();
            let ptr_b: Vec<u64> = live.iter().map(|&e| at(ba, offs[e] as usize, k)).collect();
            let ptr_c: Vec<u64> = live.iter().map(|&e| at(bc, offs[e] as usize, n)).collect();
            let (dpa, dpb, dpc) = (
                stream.clone_htod(&ptr_a)?,
                stream.clone_htod(&ptr_b)?,
                stream.clone_htod(&ptr_c)?,
            );
            let g = live.len();
            let ta = vec![blas_sys::cublasOperation_t::CUBLAS_OP_T; g];
            let tb = vec![blas_sys::cublasOperation_t::CUBLAS_OP_N; g];
            let ms = vec![n as i32; g];
            let ns: Vec<i32> = live.iter().map(|&e| per_expert[e] as i32).collect();
            let ks = vec![k as i32; g];
            let lds = vec![k as i32; g];
            let ldc = vec![n as i32; g];
            let (alpha, beta) = (vec![1.0f32; g], vec![0.0f32; g]);
            let sizes = vec![1i32; g];
            let mut cublas_grouped = || -> Result<()> {
                let (pa, _ga) = dpa.device_ptr(stream);
                let (pb, _gb) = dpb.device_ptr(stream);
                let (pc, _gc) = dpc.device_ptr(stream);
                // SAFETY: the device pointer arrays hold g pointers into the weights, A and D at
                // the extents the host arrays describe; the handle's stream is `stream`.
                let status = unsafe {
                    blas_sys::cublasGemmGroupedBatchedEx(
                        *blas.handle(),
                        ta.as_ptr(),
                        tb.as_ptr(),
                        ms.as_ptr(),
                        ns.as_ptr(),
                        ks.as_ptr(),
                        alpha.as_ptr() as *const c_void,
                        pa as *const *const c_void,
                        data_type,
                        lds.as_ptr(),
                        pb as *const *const c_void,
                        data_type,
                        lds.as_ptr(),
                        beta.as_ptr() as *const c_void,
                        pc as *const *mut c_void,
                        data_type,
                        ldc.as_ptr(),
                        g as i32,
                        sizes.as_ptr(),
                        blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    )
                };
                if status != blas_sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
                    return Err(anyhow!("cublasGemmGroupedBatchedEx: {status:?}"));
                }
                Ok(())
            };
            let cbg_ok = cublas_grouped().is_ok();
            let mut t_cbg = None;
            for candidate in candidates(&dev.info, mode, T::DATA_TYPE, false) {
                let plan = GroupedGemm::<T, T>::plan(dev.info, &problem, candidate)?;
                let group_rows = plan.upload_group_rows(stream, &offs)?;
                let mut ws = stream.alloc_zeros::<u8>(plan.workspace_size().max(1))?;
                let mut ours = || -> Result<()> {
                    plan.run(
                        stream,
                        &GroupedInputs::new(&a, &weights, &group_rows),
                        &mut d_ours,
                        Workspace::Buffer(&mut ws),
                    )?;
                    Ok(())
                };
                let (t_ours, t_loop) =
                    duel(dev, flops, rounds, &mut ours, &mut || looped(&mut d_loop))?;
                if cbg_ok && t_cbg.is_none() {
                    t_cbg = Some(duel(dev, flops, rounds, &mut ours, &mut cublas_grouped)?.1);
                }
                stream.synchronize()?;
                let (o, l) = to_pair(stream, &d_ours, &d_loop)?;
                let diff = rel_diff(&o, &l);
                if cbg_ok && rel_diff(&to_f64(&stream.clone_dtoh(&d_cbg)?), &l) > 1e-2 {
                    return Err(anyhow!("cuBLAS grouped GEMM disagrees with the loop"));
                }
                out.push(Row {
                    model: model.name,
                    gemm,
                    tokens,
                    routing,
                    kind,
                    kernel: plan.kernel_name().to_string(),
                    chosen: plan.kernel_name() == chosen,
                    ours: t_ours,
                    looped: Some(t_loop),
                    grouped_cublas: t_cbg,
                    own_loop: None,
                    flops,
                    diff,
                })?;
            }
        }
    }
    Ok(out.rows)
}

impl Measured {
    /// Prints and keeps a row; fails when ours disagrees with the loop.
    pub fn push(&mut self, row: Row) -> Result<()> {
        print_row(&row);
        if row.diff > 1e-2 {
            return Err(anyhow!(
                "{} {} {} tokens: {} differs from the loop by {:.2e}",
                row.model,
                row.gemm,
                row.tokens,
                row.kernel,
                row.diff
            ));
        }
        self.rows.push(row);
        Ok(())
    }
}

pub(crate) fn to_pair<T: Element + DeviceRepr>(
    stream: &Arc<CudaStream>,
    x: &CudaSlice<T>,
    y: &CudaSlice<T>,
) -> Result<(Vec<f64>, Vec<f64>)> {
    Ok((
        to_f64(&stream.clone_dtoh(x)?),
        to_f64(&stream.clone_dtoh(y)?),
    ))
}

fn case_e4m3(
    dev: &Device,
    model: &MoeModel,
    gemm: &'static str,
    (n, k): (usize, usize),
    rounds: usize,
    mode: &KernelMode,
    steps: &[usize],
) -> Result<Vec<Row>> {
    let stream = &dev.stream;
    let weights: CudaSlice<E4M3> = fill(stream, model.experts * n * k, 7)?;
    let e4m3 = cudarc::cublaslt::sys::cudaDataType_t::CUDA_R_8F_E4M3;
    let mut lts: HashMap<usize, LtMatmul> = HashMap::new();
    let mut out = Measured { rows: Vec::new() };
    for routing in [Routing::Uniform, Routing::Skewed] {
        for &tokens in steps {
            let per_expert = route(model, tokens, routing, 17 + tokens as u64);
            let rows: usize = per_expert.iter().sum();
            let a: CudaSlice<E4M3> = fill(stream, rows * k, 11)?;
            let mut d_ours = stream.alloc_zeros::<bf16>(rows * n)?;
            let d_loop = stream.alloc_zeros::<bf16>(rows * n)?;
            let problem = GroupedProblem::contiguous(model.experts, rows, n, k);
            let chosen = GroupedGemm::<E4M3, bf16>::plan(dev.info, &problem, None)?.kernel_name();
            let offs = offsets(&per_expert);
            let flops = 2.0 * rows as f64 * n as f64 * k as f64;
            for &m in per_expert.iter().filter(|&&m| m > 0) {
                if let std::collections::hash_map::Entry::Vacant(v) = lts.entry(m) {
                    v.insert(LtMatmul::new(
                        dev,
                        (m, n, k),
                        e4m3,
                        LtEpilogue::None,
                        0,
                        LtScales::None,
                    )?);
                }
            }
            let (pa, pw, pd) = (
                a.device_ptr(stream).0,
                weights.device_ptr(stream).0,
                d_loop.device_ptr(stream).0,
            );
            let mut looped = || -> Result<()> {
                for (e, &m) in per_expert.iter().enumerate() {
                    if m == 0 {
                        continue;
                    }
                    let start = offs[e] as u64;
                    let lt = lts.get_mut(&m).expect("made above");
                    lt.run(
                        stream,
                        pa + start * k as u64,
                        pw + (e * n * k) as u64,
                        pd + start * n as u64 * 2,
                    )?;
                }
                Ok(())
            };
            for candidate in candidates(&dev.info, mode, DataType::E4M3, false) {
                let plan = GroupedGemm::<E4M3, bf16>::plan(dev.info, &problem, candidate)?;
                let group_rows = plan.upload_group_rows(stream, &offs)?;
                let mut ws = stream.alloc_zeros::<u8>(plan.workspace_size().max(1))?;
                let mut ours = || -> Result<()> {
                    plan.run(
                        stream,
                        &GroupedInputs::new(&a, &weights, &group_rows),
                        &mut d_ours,
                        Workspace::Buffer(&mut ws),
                    )?;
                    Ok(())
                };
                let (t_ours, t_loop) = duel(dev, flops, rounds, &mut ours, &mut looped)?;
                stream.synchronize()?;
                let (o, l) = to_pair(stream, &d_ours, &d_loop)?;
                let diff = rel_diff(&o, &l);
                out.push(Row {
                    model: model.name,
                    gemm,
                    tokens,
                    routing,
                    kind: Kind::E4m3,
                    kernel: plan.kernel_name().to_string(),
                    chosen: plan.kernel_name() == chosen,
                    ours: t_ours,
                    looped: Some(t_loop),
                    grouped_cublas: None,
                    own_loop: None,
                    flops,
                    diff,
                })?;
            }
        }
    }
    Ok(out.rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_gives_every_token_top_k_distinct_experts() {
        for model in MODELS {
            for routing in [Routing::Uniform, Routing::Skewed] {
                let rows = route(&model, 100, routing, 1);
                assert_eq!(rows.len(), model.experts);
                assert_eq!(rows.iter().sum::<usize>(), 100 * model.top_k);
                assert!(rows.iter().all(|&r| r <= 100));
            }
        }
        // Skewed routing favours the first experts.
        let m = MODELS[1];
        let skew = route(&m, 1000, Routing::Skewed, 3);
        let uniform = route(&m, 1000, Routing::Uniform, 3);
        assert!(skew[0] > 2 * uniform[0]);
        assert_eq!(offsets(&[2, 0, 3]), [0, 2, 2, 5]);
    }

    #[test]
    fn the_csv_has_a_value_for_every_column() {
        let row = |cublas: Option<f64>| Row {
            model: "m",
            gemm: "up",
            tokens: 8,
            routing: Routing::Skewed,
            kind: Kind::Bf16,
            kernel: "k".into(),
            chosen: true,
            ours: 1e-5,
            looped: Some(2e-5),
            grouped_cublas: cublas,
            own_loop: None,
            flops: 1e9,
            diff: 0.0,
        };
        let path = std::env::temp_dir().join(format!("grouped-{}.csv", std::process::id()));
        write_csv(&path, &[row(Some(1e-5)), row(None)]).unwrap();
        let mut r = csv::Reader::from_path(&path).unwrap();
        let header = r.headers().unwrap().len();
        let records: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        assert_eq!(records.len(), 2);
        assert!(records.iter().all(|x| x.len() == header));
        assert_eq!(&records[0][6], "true");
        std::fs::remove_file(path).unwrap();
    }
}
