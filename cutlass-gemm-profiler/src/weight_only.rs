//! `cutlass-profiler profile --weight-only`: this crate's weight-only GEMM (4-bit, FP8 and int8 weights,
//! bf16 activations) on Llama-3-8B's and Llama-3-70B's linear layers (or, with `--shapes`, a shape
//! file's), against cuBLAS's bf16 GEMM on the bf16 weight and against this crate's own bf16 GEMM,
//! in one process, kernel against kernel.
//!
//! The weight is a random bf16 matrix, quantized on the GPU in groups of 128 (`w4a16`: symmetric,
//! s4 values and scales; `w4a16-zp`: u4 values, scales and zero points) and to FP8 with a scale per
//! output channel (`fp8w`: e4m3 values; `w8a16`: s8 values), as `--weights` selects. Inputs rotate over enough
//! copies to exceed twice the L2 cache, so the weight is read from memory as in a model. `diff` is
//! the relative difference between our result and cuBLAS's on the unquantized weight: the
//! quantization's error, not a check (the GPU tests check the kernels against the f64 reference on
//! the dequantized weight). `roofline` is the bytes our kernel must move (packed weight, scales,
//! zeros, X, Y) over its time, against the device's measured copy bandwidth.

use std::process::ExitCode;

use anyhow::{Context, Result};
use cudarc::cublas::{CudaBlas, Gemm as _};
use cudarc::driver::CudaSlice;
use cutlass_gemm::plans::weight_only::GEMV_MAX_TOKENS;
use cutlass_gemm::{
    built_weight_only_kernels, DataType, Gemm, GemmProblem, QuantizedWeight, TileScheduler,
    WeightFormat, WeightOnlyGemm, WeightOnlyProblem, WeightOrder, Workspace, WEIGHT_ONLY_GEMV,
};
use half::bf16;

use crate::args::{KernelMode, ProfileArgs, WeightArg};
use crate::device::Device;
use crate::shapes::Shape;
use crate::timing::{fill, median, rel_diff, rotation, time, to_f64};

/// The linear layers: (model, layer, n, k).
pub const LAYERS: [(&str, &str, usize, usize); 8] = [
    ("llama3-8b", "qkv", 6144, 4096),
    ("llama3-8b", "o", 4096, 4096),
    ("llama3-8b", "gate_up", 28672, 4096),
    ("llama3-8b", "down", 4096, 14336),
    ("llama3-70b", "qkv", 10240, 8192),
    ("llama3-70b", "o", 8192, 8192),
    ("llama3-70b", "gate_up", 57344, 8192),
    ("llama3-70b", "down", 8192, 28672),
];

/// Tokens per step.
pub const TOKENS: [usize; 6] = [1, 16, 32, 64, 2048, 8192];

/// The group size of the quantization.
pub const GROUP: usize = 128;

struct Row {
    model: String,
    layer: String,
    tokens: usize,
    format: WeightFormat,
    kernel: &'static str,
    splits: u16,
    /// The library's choice (`--kernels` may time others too).
    chosen: bool,
    ours: f64,
    cublas: f64,
    own_bf16: f64,
    roofline: f64,
    diff: f64,
}

pub fn run(args: &ProfileArgs) -> Result<ExitCode> {
    let dev = Device::open()?;
    let blas =
        CudaBlas::new(dev.stream.clone()).context("cuBLAS (libcublas.so must be loadable)")?;
    let rounds = args.rounds.clamp(1, 100);
    println!(
        "device: {} (cc {}.{}, {} SMs, copy {:.0} GB/s); weight-only GEMM (4-bit weights in groups of {GROUP}, int8 and FP8 weights per channel; bf16 activations), kernel against kernel, median of {rounds} rounds",
        dev.name(),
        dev.info.compute_capability.0,
        dev.info.compute_capability.1,
        dev.info.sm_count,
        dev.roofline.copy_gbs,
    );
    println!(
        "{:<10} {:<20} {:>6} {:<8} {:>9} {:>9} {:>8} {:>9} {:>8} {:>9} {:>8}  kernel (* the library's choice)",
        "model", "layer", "tokens", "format", "ours us", "cublas us", "x cublas", "bf16 us", "x bf16",
        "roofline", "diff"
    );
    let mut rows = Vec::new();
    let formats = formats(args);
    for Layer {
        model,
        layer,
        n,
        k,
        tokens: tokens_list,
    } in layers(args)?
    {
        let stream = &dev.stream;
        let w_bytes = n * k * 2;
        let sets = rotation(&dev, n * k / 2);
        let weights: Vec<CudaSlice<bf16>> = (0..rotation(&dev, w_bytes))
            .map(|i| fill(stream, n * k, 100 + i as u64))
            .collect::<Result<_>>()?;
        for &format in &formats {
            let group = if format.is_per_channel() { k } else { GROUP };
            let quantized: Vec<QuantizedWeight<bf16>> = (0..sets)
                .map(|i| {
                    let w = &weights[i % weights.len()];
                    Ok(QuantizedWeight::quantize(stream, w, n, k, group, format)?)
                })
                .collect::<Result<_>>()?;
            for &tokens in &tokens_list {
                for row in case(
                    &dev,
                    &blas,
                    &weights,
                    &quantized,
                    tokens,
                    rounds,
                    &args.kernels,
                )? {
                    let r = Row {
                        model: model.clone(),
                        layer: layer.clone(),
                        tokens,
                        format,
                        ..row
                    };
                    println!(
                        "{:<10} {:<20} {:>6} {:<8} {:>9.1} {:>9.1} {:>8.3} {:>9.1} {:>8.3} {:>8.0}% {:>8.1e}  {} {}{}",
                        r.model,
                        r.layer,
                        r.tokens,
                        label(r.format),
                        r.ours * 1e6,
                        r.cublas * 1e6,
                        r.cublas / r.ours,
                        r.own_bf16 * 1e6,
                        r.own_bf16 / r.ours,
                        r.roofline * 100.0,
                        r.diff,
                        if r.chosen { "*" } else { " " },
                        r.kernel,
                        if r.splits > 1 { format!(" splits {}", r.splits) } else { String::new() }
                    );
                    rows.push(r);
                }
            }
        }
    }
    summary(&rows, &formats);
    if let Some(path) = &args.csv {
        let mut w = csv::Writer::from_path(path).with_context(|| format!("{}", path.display()))?;
        w.write_record([
            "model", "layer", "tokens", "format", "kernel", "splits", "chosen", "ours_s",
            "cublas_s", "bf16_s", "roofline", "diff",
        ])?;
        for r in &rows {
            w.write_record([
                r.model.clone(),
                r.layer.clone(),
                r.tokens.to_string(),
                label(r.format).to_string(),
                r.kernel.to_string(),
                r.splits.to_string(),
                r.chosen.to_string(),
                format!("{:e}", r.ours),
                format!("{:e}", r.cublas),
                format!("{:e}", r.own_bf16),
                format!("{:.4}", r.roofline),
                format!("{:e}", r.diff),
            ])?;
        }
        w.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A weight measured at some token counts.
struct Layer {
    model: String,
    layer: String,
    n: usize,
    k: usize,
    tokens: Vec<usize>,
}

/// The layers measured, each with its token counts: Llama-3-8B's and -70B's at [`TOKENS`], or,
/// with `--shapes`, the file's shapes whose weight the kernels take (n a multiple of 16, k of the
/// group size), grouped by weight (the name's last `-` part, `m1` for example, dropped).
fn layers(args: &ProfileArgs) -> Result<Vec<Layer>> {
    if args.problems.shapes.is_none() && args.problems.shape.is_empty() {
        return Ok(LAYERS
            .iter()
            .map(|&(model, layer, n, k)| Layer {
                model: model.into(),
                layer: layer.into(),
                n,
                k,
                tokens: TOKENS.to_vec(),
            })
            .collect());
    }
    let mut out: Vec<Layer> = Vec::new();
    for s in args.problems.read_shapes()? {
        if s.n % 16 != 0 || s.k % GROUP != 0 {
            eprintln!(
                "--weight-only: {} ({}x{}x{}) skipped: the weight-only kernels take n a multiple of 16 and k of {GROUP}",
                s.name, s.m, s.n, s.k
            );
            continue;
        }
        let layer = match s.name.rsplit_once('-') {
            Some((base, _)) => base.to_string(),
            None => s.name.clone(),
        };
        match out
            .iter_mut()
            .find(|e| (e.layer.as_str(), e.n, e.k) == (layer.as_str(), s.n, s.k))
        {
            Some(e) => e.tokens.push(s.m),
            None => out.push(Layer {
                model: "file".into(),
                layer,
                n: s.n,
                k: s.k,
                tokens: vec![s.m],
            }),
        }
    }
    Ok(out)
}

/// The weight formats measured (`--weights`, default all), in the order of the output.
fn formats(args: &ProfileArgs) -> Vec<WeightFormat> {
    let all = [
        WeightArg::W4a16,
        WeightArg::W4a16Zp,
        WeightArg::W8a16,
        WeightArg::Fp8w,
    ];
    all.into_iter()
        .filter(|w| args.weights.is_empty() || args.weights.contains(w))
        .map(|w| match w {
            WeightArg::W4a16 => WeightFormat::Symmetric,
            WeightArg::W4a16Zp => WeightFormat::ZeroPoint,
            WeightArg::W8a16 => WeightFormat::Int8,
            WeightArg::Fp8w => WeightFormat::Fp8,
        })
        .collect()
}

fn label(f: WeightFormat) -> &'static str {
    match f {
        WeightFormat::Symmetric => "w4a16",
        WeightFormat::ZeroPoint => "w4a16-zp",
        WeightFormat::Int8 => "w8a16",
        WeightFormat::Fp8 => "fp8w",
    }
}

/// The plans timed for one problem: the library's choice, or the candidates `--kernels` names
/// (with `all`, every weight-only kernel of the build for the format, the stream-K ones also with
/// split-K 2 and 4, and the decode GEMV up to the tokens it takes).
fn candidates(
    dev: &Device,
    p: &WeightOnlyProblem,
    mode: &KernelMode,
) -> Result<Vec<(WeightOnlyGemm<bf16>, bool)>> {
    let chosen = WeightOnlyGemm::<bf16>::plan(dev.info, p, None)?;
    let name = chosen.kernel_name();
    let mut out = vec![(chosen, true)];
    let (weight, _) = p.format.catalog();
    // The kernels that run on this device and read the weight as the problem has it (its order,
    // its group size where the kernel fixes one).
    let serving = built_weight_only_kernels().iter().filter(|k| {
        let group = k.spec.mixed_input.map_or(0, |m| m.group as usize);
        k.spec.b.ty == DataType::Bf16
            && k.spec.a.ty == weight
            && k.spec.arch.runs_on(dev.info.compute_capability)
            && WeightOrder::of_kernel(&k.spec) == p.order
            && (group == 0 || group == p.group_size)
    });
    for k in serving {
        let take = match mode {
            KernelMode::All => true,
            KernelMode::Pinned(n) => n == k.name,
            KernelMode::Matching(f) => f.matches(k.name),
            _ => false,
        };
        if !take {
            continue;
        }
        let plan = WeightOnlyGemm::<bf16>::plan(dev.info, p, Some(k.name))?;
        let stream_k = k.spec.tile_scheduler == TileScheduler::StreamK;
        if k.name != name {
            out.push((plan.clone(), false));
        }
        if stream_k && matches!(mode, KernelMode::All) {
            for splits in [2, 4] {
                out.push((plan.clone().with_splits(splits)?, false));
            }
        }
    }
    // The decode GEMV, where it takes the tokens and the mode names it.
    let gemv = match mode {
        KernelMode::All => true,
        KernelMode::Pinned(n) => n == WEIGHT_ONLY_GEMV,
        KernelMode::Matching(f) => f.matches(WEIGHT_ONLY_GEMV),
        _ => false,
    };
    if gemv && name != WEIGHT_ONLY_GEMV && p.m <= GEMV_MAX_TOKENS {
        out.push((
            WeightOnlyGemm::<bf16>::plan(dev.info, p, Some(WEIGHT_ONLY_GEMV))?,
            false,
        ));
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn case(
    dev: &Device,
    blas: &CudaBlas,
    weights: &[CudaSlice<bf16>],
    quantized: &[QuantizedWeight<bf16>],
    m: usize,
    rounds: usize,
    mode: &KernelMode,
) -> Result<Vec<Row>> {
    let stream = &dev.stream;
    let (n, k) = (quantized[0].n(), quantized[0].k());
    let x: CudaSlice<bf16> = fill(stream, m * k, 7)?;
    let mut y_ours = stream.alloc_zeros::<bf16>(m * n)?;
    let mut y_blas = stream.alloc_zeros::<bf16>(m * n)?;
    let mut y_own = stream.alloc_zeros::<bf16>(m * n)?;
    let p = WeightOnlyProblem::for_weight(m, &quantized[0]);
    let plans = candidates(dev, &p, mode)?;
    let ws_bytes = plans
        .iter()
        .map(|(p, _)| p.workspace_size())
        .max()
        .unwrap_or(0);
    let mut ws = stream.alloc_zeros::<u8>(ws_bytes.max(1))?;
    let shape = Shape {
        name: String::new(),
        m,
        n,
        k,
    };
    let own = Gemm::<bf16, bf16, bf16>::plan(dev.info, &GemmProblem::new(m, n, k), None)?;
    let mut own_ws = stream.alloc_zeros::<u8>(own.workspace_size().max(1))?;
    let flops = 2.0 * (m * n * k) as f64;
    let iters = ((6e12 / flops) as usize).clamp(3, 200);
    let mut theirs = |i: usize| -> Result<()> {
        let cfg = crate::cublas::tn_config(&shape, bf16::from_f64(1.0), bf16::from_f64(0.0));
        // SAFETY: the buffers hold the n x k, m x k and m x n extents of the config.
        unsafe { blas.gemm(cfg, &weights[i % weights.len()], &x, &mut y_blas) }?;
        Ok(())
    };
    let mut own_bf16 = |i: usize| -> Result<()> {
        own.run(
            stream,
            &x,
            &weights[i % weights.len()],
            None,
            &mut y_own,
            Workspace::Buffer(&mut own_ws),
        )?;
        Ok(())
    };
    let mut ours = |plan: &WeightOnlyGemm<bf16>, i: usize, y: &mut CudaSlice<bf16>| -> Result<()> {
        plan.run(
            stream,
            &x,
            &quantized[i % quantized.len()],
            None,
            y,
            Workspace::Buffer(&mut ws),
        )?;
        Ok(())
    };
    // Warm-up, then rounds: cuBLAS, our bf16 GEMM, then each plan.
    time(dev, iters.min(20), 8, &mut theirs)?;
    time(dev, iters.min(20), 8, &mut own_bf16)?;
    for (plan, _) in &plans {
        time(dev, iters.min(20), 8, &mut |i| ours(plan, i, &mut y_ours))?;
    }
    let (mut b, mut c) = (Vec::new(), Vec::new());
    let mut a: Vec<Vec<f64>> = vec![Vec::new(); plans.len()];
    for _ in 0..rounds {
        b.push(time(dev, iters, 8, &mut theirs)?);
        c.push(time(dev, iters, 8, &mut own_bf16)?);
        for (t, (plan, _)) in a.iter_mut().zip(&plans) {
            t.push(time(dev, iters, 8, &mut |i| ours(plan, i, &mut y_ours))?);
        }
    }
    let (cublas_s, own_s) = (median(b), median(c));
    let q = &quantized[0];
    let bytes = (q.device_bytes() + 2 * (m * k + m * n)) as f64;
    theirs(0)?;
    let y_ref = to_f64(&stream.clone_dtoh(&y_blas)?);
    let mut rows = Vec::new();
    for (t, (plan, chosen)) in a.into_iter().zip(&plans) {
        ours(plan, 0, &mut y_ours)?;
        let diff = rel_diff(&to_f64(&stream.clone_dtoh(&y_ours)?), &y_ref);
        let ours_s = median(t);
        rows.push(Row {
            model: String::new(),
            layer: String::new(),
            tokens: m,
            format: q.format(),
            kernel: plan.kernel_name(),
            splits: plan.splits(),
            chosen: *chosen,
            ours: ours_s,
            cublas: cublas_s,
            own_bf16: own_s,
            roofline: bytes / ours_s / (dev.roofline.copy_gbs * 1e9),
            diff,
        });
    }
    Ok(rows)
}

/// Geometric means of the speedups over cuBLAS by format and token band.
fn summary(rows: &[Row], formats: &[WeightFormat]) {
    let geo = |v: &[f64]| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp();
    println!();
    println!(
        "geometric means (time of cuBLAS bf16 / ours; the library's choice), min in brackets:"
    );
    for &format in formats {
        for (band, lo, hi) in [
            ("1-16 tokens", 1, 16),
            ("17-64 tokens", 17, 64),
            ("65-2047 tokens", 65, 2047),
            (">= 2048 tokens", 2048, usize::MAX),
        ] {
            let v: Vec<f64> = rows
                .iter()
                .filter(|r| r.chosen && r.format == format && r.tokens >= lo && r.tokens <= hi)
                .map(|r| r.cublas / r.ours)
                .collect();
            if v.is_empty() {
                continue;
            }
            let roof: Vec<f64> = rows
                .iter()
                .filter(|r| r.chosen && r.format == format && r.tokens >= lo && r.tokens <= hi)
                .map(|r| r.roofline)
                .collect();
            println!(
                "  {:<8} {band:<15} x cuBLAS {:.3} (min {:.3}); roofline median {:.0}%",
                label(format),
                geo(&v),
                v.iter().copied().fold(f64::INFINITY, f64::min),
                median(roof) * 100.0
            );
        }
    }
}
