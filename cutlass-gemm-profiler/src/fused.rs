//! `cutlass-profiler profile --epilogue E`: this crate's GEMM with a fused epilogue against
//! cuBLASLt's matmul with the matching epilogue (`BIAS`, `RELU_BIAS`, `GELU_BIAS`; FP8 per-row and
//! per-column scales through `OUTER_VEC_32F`), against this crate's plain GEMM on the same problem
//! (what the fusion costs), and against that GEMM followed by a separate bias-and-activation pass
//! (`cutlass_gemm::plans::epilogue::apply_unfused`: what the fusion saves; bf16 and f16); where
//! the fused plan runs on the 16-bit decode GEMV, also against the fused CUTLASS kernel behind it,
//! and where it runs the epilogue as a separate pass, against the epilogue in a fused kernel.
//! Kernel against kernel: no programmatic dependent launch on either side.
//!
//! cuBLASLt has no SiLU epilogue: `bias-silu` is compared with its `BIAS` epilogue (its GEMM
//! without the activation, which favors it). Nor a gated one: `swiglu` is compared with its GEMM
//! over the concatenated gate and up weights followed by a separate SiLU-and-product pass (this
//! crate's, `cutlass_gemm::plans::gated::apply_unfused_gated`), which is what a framework runs.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use cudarc::cublaslt::sys::cudaDataType_t;
use cudarc::driver::{CudaSlice, DevicePtr};
use cutlass_gemm::numeric::E4M3;
use cutlass_gemm::plans::epilogue::apply_unfused;
use cutlass_gemm::{Activation, Element, Epilogue, EpilogueOperands, Gemm, GemmProblem, Workspace};
use half::{bf16, f16};

use crate::args::ProfileArgs;
use crate::cublas::{LtEpilogue, LtMatmul, LtScales};
use crate::device::Device;
use crate::kind::Kind;
use crate::shapes::Shape;
use crate::timing::{fill_sets, race, rel_diff, rotation, sample_rows, Warmed};

/// `--epilogue`: the fused epilogue `profile` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EpilogueArg {
    /// A plain GEMM (the default `profile`).
    None,
    /// A bias per output column (a Linear layer's).
    Bias,
    /// Bias, then ReLU.
    BiasRelu,
    /// Bias, then GELU (tanh approximation, as cuBLASLt's GELU_BIAS).
    BiasGelu,
    /// Bias, then GELU (tanh), also writing the pre-activation value (cuBLASLt's GELU_AUX_BIAS,
    /// for training): both outputs checked.
    BiasGeluAux,
    /// Bias, then SiLU (cuBLASLt has none: timed with its BIAS epilogue, checked with SiLU applied
    /// to its output on the host).
    BiasSilu,
    /// FP8 (`e4m3`) with f32 scales per row and per column (the "rowwise" recipe).
    Rowwise,
    /// FP8 rowwise scales, then a bias.
    RowwiseBias,
    /// SwiGLU over the shape's n (an MLP's gate and up projections together): this crate's gated
    /// GEMM (n/2 outputs, the weight interleaved) against cuBLASLt's GEMM over the concatenated
    /// weight followed by a separate SiLU-and-product pass (cuBLASLt has no gated epilogue).
    Swiglu,
}

impl EpilogueArg {
    /// This crate's epilogue for the option (for `swiglu`, the gated GEMM's activation).
    pub(crate) fn ours(self) -> Epilogue {
        match self {
            EpilogueArg::None => Epilogue::NONE,
            EpilogueArg::Bias => Epilogue::bias(),
            EpilogueArg::BiasRelu => Epilogue::bias().with_activation(Activation::Relu),
            EpilogueArg::BiasGelu => Epilogue::bias().with_activation(Activation::GeluTanh),
            EpilogueArg::BiasGeluAux => Epilogue::bias()
                .with_activation(Activation::GeluTanh)
                .with_aux_output(),
            EpilogueArg::BiasSilu => Epilogue::bias().with_activation(Activation::Silu),
            EpilogueArg::Swiglu => Epilogue::NONE.with_activation(Activation::Silu),
            EpilogueArg::Rowwise => Epilogue::rowwise(),
            EpilogueArg::RowwiseBias => {
                Epilogue::rowwise().with_bias(cutlass_gemm::BiasAxis::PerColumn)
            }
        }
    }

    /// cuBLASLt's epilogue; `aux` is where `GELU_AUX_BIAS` writes.
    fn theirs(self, aux: u64) -> LtEpilogue {
        match self {
            EpilogueArg::BiasGeluAux => LtEpilogue::GeluAuxBias { aux },
            EpilogueArg::None | EpilogueArg::Rowwise | EpilogueArg::Swiglu => LtEpilogue::None,
            EpilogueArg::Bias | EpilogueArg::BiasSilu | EpilogueArg::RowwiseBias => {
                LtEpilogue::Bias
            }
            EpilogueArg::BiasRelu => LtEpilogue::ReluBias,
            EpilogueArg::BiasGelu => LtEpilogue::GeluBias,
        }
    }
}

/// One measured problem.
struct FusedRow {
    shape: Shape,
    kind: Kind,
    kernel: String,
    fused_s: f64,
    /// Fused time / plain GEMM time, from one race.
    plain_ratio: f64,
    /// (Plain GEMM + the separate bias-and-activation pass) time / fused time, from one race
    /// (bf16, f16).
    unfused_ratio: Option<f64>,
    /// Where the fused plan runs on the 16-bit decode GEMV: the time of the fused CUTLASS kernel
    /// behind it (what the plan ran before the GEMV computed epilogues) / the GEMV's; where it
    /// runs the epilogue as a separate pass: the time of the plan with the epilogue in the kernel
    /// / its own; from one race.
    tile_ratio: Option<f64>,
    theirs_s: f64,
    max_rel_diff: f64,
    ok: bool,
}

pub fn run(args: &ProfileArgs, epilogue: EpilogueArg) -> Result<ExitCode> {
    let shapes = args.problems.read_shapes()?;
    let dev = Device::open()?;
    println!(
        "device: {}; epilogue {} (ours: {}); kernel against kernel, no programmatic dependent launch",
        dev.name(),
        epilogue.to_possible_value().map_or("?".into(), |v| v.get_name().to_string()),
        epilogue.ours().describe()
    );
    println!(
        "{:<24} {:<5} {:>9} {:>9} {:>7} {:>7} {:>8}  kernel",
        "shape", "type", "fused us", "Lt us", "vs Lt", "f/plain", "unf/f"
    );
    let warmed = Warmed::default();
    let mut rows = Vec::new();
    let mut failed = 0;
    for s in &shapes {
        for &kind in &args.problems.types {
            let rowwise = matches!(epilogue, EpilogueArg::Rowwise | EpilogueArg::RowwiseBias);
            let gated = epilogue == EpilogueArg::Swiglu;
            let result = match kind {
                Kind::Bf16 if gated => measure_gated::<bf16, bf16>(&dev, s, kind, args, &warmed),
                Kind::F16 if gated => measure_gated::<f16, f16>(&dev, s, kind, args, &warmed),
                Kind::E4m3 if gated => measure_gated::<E4M3, bf16>(&dev, s, kind, args, &warmed),
                _ if gated => Err(anyhow::anyhow!(
                    "--epilogue swiglu takes bf16, f16 and e4m3"
                )),
                Kind::Bf16 if !rowwise => {
                    measure::<bf16, bf16>(&dev, s, kind, epilogue, args, &warmed)
                }
                Kind::F16 if !rowwise => {
                    measure::<f16, f16>(&dev, s, kind, epilogue, args, &warmed)
                }
                Kind::E4m3 => measure::<E4M3, bf16>(&dev, s, kind, epilogue, args, &warmed),
                _ => Err(anyhow::anyhow!(
                    "--epilogue takes bf16, f16 and e4m3 (rowwise: e4m3 only)"
                )),
            };
            match result {
                Ok(r) => {
                    println!(
                        "{:<24} {:<5} {:>9.2} {:>9.2} {:>7.3} {:>7.3} {:>8}  {}{}{}",
                        r.shape.name,
                        kind.label(),
                        r.fused_s * 1e6,
                        r.theirs_s * 1e6,
                        r.theirs_s / r.fused_s,
                        r.plain_ratio,
                        r.unfused_ratio.map_or("-".into(), |u| format!("{u:.3}")),
                        r.kernel,
                        r.tile_ratio.map_or(String::new(), |t| format!(
                            " (the epilogue in a fused kernel takes {t:.3}x)"
                        )),
                        if r.ok { "" } else { "  CHECK FAILED" }
                    );
                    failed += usize::from(!r.ok);
                    rows.push(r);
                }
                Err(e) => {
                    println!("{:<24} {:<5} error: {e:#}", s.name, kind.label());
                    failed += 1;
                }
            }
            if let Some(path) = &args.csv {
                write_csv(path, &rows, epilogue)?;
            }
        }
    }
    for &kind in &args.problems.types {
        let r: Vec<&FusedRow> = rows.iter().filter(|r| r.kind == kind).collect();
        if r.is_empty() {
            continue;
        }
        let ratios: Vec<f64> = r.iter().map(|r| r.theirs_s / r.fused_s).collect();
        let low = ratios.iter().cloned().fold(f64::INFINITY, f64::min);
        let below = ratios.iter().filter(|&&x| x < 0.85).count();
        let cost: Vec<f64> = r
            .iter()
            .filter(|r| r.shape.m >= 128)
            .map(|r| r.plain_ratio)
            .collect();
        println!(
            "{}: geometric mean {:.3}x cuBLASLt's fused epilogue over {} shapes, lowest {low:.3}x, {below} below 0.85x",
            kind.label(),
            geomean(&ratios),
            ratios.len()
        );
        let gain: Vec<f64> = r.iter().filter_map(|r| r.unfused_ratio).collect();
        if !gain.is_empty() {
            println!(
                "{}: the plain GEMM plus a separate bias-and-activation pass takes {:.3}x the fused GEMM's time (geometric mean)",
                kind.label(),
                geomean(&gain)
            );
        }
        if !cost.is_empty() {
            let worst = cost.iter().cloned().fold(0.0, f64::max);
            println!(
                "{}: fused / plain time where m >= 128: geometric mean {:.3}, largest {worst:.3} ({} shapes)",
                kind.label(),
                geomean(&cost),
                cost.len()
            );
        }
    }
    if let Some(path) = &args.csv {
        write_csv(path, &rows, epilogue)?;
        println!("wrote {}", path.display());
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        println!("{failed} result(s) failed their check or did not run");
        ExitCode::from(1)
    })
}

fn geomean(v: &[f64]) -> f64 {
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp()
}

fn lt_type<T: Element>() -> cudaDataType_t {
    match T::DATA_TYPE {
        cutlass_gemm::DataType::F16 => cudaDataType_t::CUDA_R_16F,
        cutlass_gemm::DataType::E4M3 => cudaDataType_t::CUDA_R_8F_E4M3,
        _ => cudaDataType_t::CUDA_R_16BF,
    }
}

fn measure<T, TD>(
    dev: &Device,
    s: &Shape,
    kind: Kind,
    epilogue: EpilogueArg,
    args: &ProfileArgs,
    warmed: &Warmed,
) -> Result<FusedRow>
where
    T: Element + cudarc::driver::DeviceRepr,
    TD: Element + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits,
{
    let stream = &dev.stream;
    let p = GemmProblem::new(s.m, s.n, s.k);
    let e = epilogue.ours();
    let plain =
        Gemm::<T, T, TD>::plan(dev.info, &p, None)?.with_programmatic_dependent_launch(false);
    let fused = plain.clone().with_epilogue(e)?;
    let sets = rotation(dev, (s.m * s.k + s.n * s.k) * kind.input_bytes());
    let a: Vec<CudaSlice<T>> = fill_sets(stream, sets, s.m * s.k, 1)?;
    let w: Vec<CudaSlice<T>> = fill_sets(stream, sets, s.n * s.k, 101)?;
    let bias: CudaSlice<TD> = fill_sets(stream, 1, s.n, 7)?.remove(0);
    // Scales near 1 (powers of two keep both libraries' products exact).
    let rows_s: Vec<f32> = (0..s.m).map(|i| [0.5, 1.0, 2.0][i % 3]).collect();
    let cols_s: Vec<f32> = (0..s.n).map(|j| [1.0, 2.0, 0.5][j % 3]).collect();
    let (rows_d, cols_d) = (stream.clone_htod(&rows_s)?, stream.clone_htod(&cols_s)?);
    let ptr = |x: &dyn DevicePtr<f32>| x.device_ptr(stream).0;
    let scales = if e.row_scales {
        LtScales::Outer {
            rows: ptr(&rows_d),
            cols: ptr(&cols_d),
        }
    } else {
        LtScales::None
    };
    let bias_ptr = bias.device_ptr(stream).0;
    // The auxiliary outputs (`bias-gelu-aux`): ours and cuBLASLt's.
    let aux_len = if e.aux_output { s.m * s.n } else { 1 };
    let mut aux_ours = stream.alloc_zeros::<TD>(aux_len)?;
    let aux_lt = stream.alloc_zeros::<TD>(aux_len)?;
    let theirs_epilogue = epilogue.theirs(aux_lt.device_ptr(stream).0);
    let mut lt = LtMatmul::new(
        dev,
        (s.m, s.n, s.k),
        lt_type::<T>(),
        theirs_epilogue,
        bias_ptr,
        scales,
    )
    .with_context(|| format!("cuBLASLt with {theirs_epilogue:?}"))?;
    let mut d_ours = stream.alloc_zeros::<TD>(s.m * s.n)?;
    let d_lt = stream.alloc_zeros::<TD>(s.m * s.n)?;
    let ws_len = fused.workspace_size().max(plain.workspace_size()).max(1);
    let mut ws = stream.alloc_zeros::<u8>(ws_len)?;
    let ops = EpilogueOperands {
        bias: e.bias.map(|_| &bias as &dyn DevicePtr<TD>),
        bias_f32: None,
        row_scales: e.row_scales.then_some(&rows_d as &dyn DevicePtr<f32>),
        col_scales: e.col_scales.then_some(&cols_d as &dyn DevicePtr<f32>),
    };
    let dp = |x: &CudaSlice<T>| x.device_ptr(stream).0;
    lt.run(stream, dp(&a[0]), dp(&w[0]), d_lt.device_ptr(stream).0)?;
    // The plan with the auxiliary output writes it too (to the same buffer every launch).
    let run_ours = |i: usize,
                    d: &mut CudaSlice<TD>,
                    aux: &mut CudaSlice<TD>,
                    ws: &mut CudaSlice<u8>|
     -> Result<()> {
        if e.aux_output {
            fused.run_with_aux(
                stream,
                &a[i],
                &w[i],
                None,
                d,
                aux,
                &ops,
                Workspace::Buffer(ws),
            )?;
        } else {
            fused.run_fused(stream, &a[i], &w[i], None, d, &ops, Workspace::Buffer(ws))?;
        }
        Ok(())
    };
    run_ours(0, &mut d_ours, &mut aux_ours, &mut ws)?;
    let mut reference = sample_rows(stream, &d_lt, s.m, s.n)?;
    if epilogue == EpilogueArg::BiasSilu {
        // cuBLASLt has no SiLU: its bias epilogue's output through SiLU on the host.
        for v in &mut reference {
            *v = Activation::Silu.apply(*v);
        }
    }
    let mut diff = rel_diff(&sample_rows(stream, &d_ours, s.m, s.n)?, &reference);
    if e.aux_output {
        let theirs_aux = sample_rows(stream, &aux_lt, s.m, s.n)?;
        diff = diff.max(rel_diff(
            &sample_rows(stream, &aux_ours, s.m, s.n)?,
            &theirs_aux,
        ));
    }
    let d_lt_ptr = d_lt.device_ptr(stream).0;
    let mut theirs = |i: usize| lt.run(stream, dp(&a[i]), dp(&w[i]), d_lt_ptr);
    // The fused GEMM against cuBLASLt, then against the plain GEMM and against the unfused pair,
    // each race alternating its two sides (a ratio from one race, not across them: the clock
    // drifts as the GPU warms).
    let mut ws_other = stream.alloc_zeros::<u8>(ws_len)?;
    let mut d_other = stream.alloc_zeros::<TD>(s.m * s.n)?;
    let flops = p.flops();
    let fused_key = format!("fused {}", fused.kernel_name());
    let (fused_s, theirs_s) = race(
        dev,
        flops,
        sets,
        args.rounds,
        &mut |i| run_ours(i, &mut d_ours, &mut aux_ours, &mut ws),
        Some(&mut theirs),
        (
            warmed.seen(&fused_key),
            warmed.seen(&format!("lt {epilogue:?} {}", kind.label())),
        ),
    )?;
    let mut plain_run = |i: usize| -> Result<()> {
        plain.run(
            stream,
            &a[i],
            &w[i],
            None,
            &mut d_other,
            Workspace::Buffer(&mut ws_other),
        )?;
        Ok(())
    };
    let (fused_again, plain_s) = race(
        dev,
        flops,
        sets,
        args.rounds,
        &mut |i| run_ours(i, &mut d_ours, &mut aux_ours, &mut ws),
        Some(&mut plain_run),
        (true, warmed.seen(plain.kernel_name())),
    )?;
    let plain_ratio = plain_s.map(|p| fused_again / p).unwrap_or(f64::NAN);
    // The plain GEMM, then the separate pass (16-bit outputs; not for the FP8 scales).
    let unfused_ratio = if kind != Kind::E4m3 && !e.aux_output {
        let bias_arg = e.bias.map(|_| &bias as &dyn DevicePtr<TD>);
        let mut unfused = |i: usize| -> Result<()> {
            plain.run(
                stream,
                &a[i],
                &w[i],
                None,
                &mut d_other,
                Workspace::Buffer(&mut ws_other),
            )?;
            apply_unfused(
                stream,
                &mut d_other,
                (s.m, s.n, s.n),
                bias_arg,
                e.activation,
            )?;
            Ok(())
        };
        let (f, u) = race(
            dev,
            flops,
            sets,
            args.rounds,
            &mut |i| run_ours(i, &mut d_ours, &mut aux_ours, &mut ws),
            Some(&mut unfused),
            (
                true,
                warmed.seen(&format!("unfused {}", plain.kernel_name())),
            ),
        )?;
        u.map(|u| u / f)
    } else {
        None
    };
    // A fused plan on the decode GEMV against the fused CUTLASS kernel behind it; a plan with a
    // separate epilogue pass against the plan with the epilogue in the kernel.
    let tile_ratio = if fused.is_gemv() || fused.epilogue_is_separate() {
        let tile = if fused.is_gemv() {
            Gemm::<T, T, TD>::plan(dev.info, &p, Some(&fused.kernel_spec().name()))?
                .with_programmatic_dependent_launch(false)
                .with_epilogue(e)?
        } else {
            plain.clone().with_epilogue_in_kernel(e)?
        };
        let mut ws_tile = stream.alloc_zeros::<u8>(tile.workspace_size().max(1))?;
        let mut tile_run = |i: usize| -> Result<()> {
            tile.run_fused(
                stream,
                &a[i],
                &w[i],
                None,
                &mut d_other,
                &ops,
                Workspace::Buffer(&mut ws_tile),
            )?;
            Ok(())
        };
        let (g, t) = race(
            dev,
            flops,
            sets,
            args.rounds,
            &mut |i| run_ours(i, &mut d_ours, &mut aux_ours, &mut ws),
            Some(&mut tile_run),
            (true, warmed.seen(&format!("fused {}", tile.kernel_name()))),
        )?;
        t.map(|t| t / g)
    } else {
        None
    };
    let Some(theirs_s) = theirs_s else {
        bail!("cuBLASLt was not timed");
    };
    // Both f32 epilogues rounded once to 16 bits; GELU's tanh may differ in its last bits.
    let tolerance = if kind == Kind::E4m3 {
        2.0 / 256.0
    } else {
        4.0 / 256.0
    };
    Ok(FusedRow {
        shape: s.clone(),
        kind,
        kernel: if fused.epilogue_is_separate() {
            format!("{} + separate epilogue pass", fused.kernel_name())
        } else {
            fused.kernel_name().to_string()
        },
        fused_s,
        plain_ratio,
        unfused_ratio,
        tile_ratio,
        theirs_s,
        max_rel_diff: diff,
        ok: diff <= tolerance,
    })
}

/// `--epilogue swiglu` on one shape: the gated GEMM (`n / 2` outputs) against cuBLASLt's plain
/// GEMM over the whole `n` followed by the separate gated pass, against this crate's plain GEMM
/// (what the gated epilogue costs) and against that GEMM with the separate pass (what it saves).
fn measure_gated<T, O>(
    dev: &Device,
    s: &Shape,
    kind: Kind,
    args: &ProfileArgs,
    warmed: &Warmed,
) -> Result<FusedRow>
where
    T: Element + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits,
    O: Element + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits,
{
    use cutlass_gemm::plans::gated::{apply_unfused_gated, GATE_BLOCK};
    use cutlass_gemm::GatedGemm;
    if s.n % (2 * GATE_BLOCK) != 0 {
        bail!(
            "swiglu: n = {} (gate and up together) is not a multiple of 16",
            s.n
        );
    }
    let stream = &dev.stream;
    let half = s.n / 2;
    let p = GemmProblem::new(s.m, s.n, s.k);
    let gated = GatedGemm::<T, O>::plan(
        dev.info,
        &GemmProblem::new(s.m, half, s.k),
        Activation::Silu,
        None,
    )?;
    let plain =
        Gemm::<T, T, O>::plan(dev.info, &p, None)?.with_programmatic_dependent_launch(false);
    let sets = rotation(dev, (s.m * s.k + s.n * s.k) * kind.input_bytes());
    let a: Vec<CudaSlice<T>> = fill_sets(stream, sets, s.m * s.k, 1)?;
    // The concatenated weight (gate rows, then up rows) for cuBLASLt and the plain GEMM; the
    // interleaved one for the gated GEMM, copied from it in blocks of 8 rows (set 0, which the
    // results are compared on; the other sets only rotate memory).
    let w_cat: Vec<CudaSlice<T>> = fill_sets(stream, sets, s.n * s.k, 101)?;
    let mut w_int: Vec<CudaSlice<T>> = fill_sets(stream, sets, s.n * s.k, 201)?;
    let block = GATE_BLOCK * s.k;
    for b in 0..half / GATE_BLOCK {
        for (src, dst) in [
            (b * block, 2 * b * block),
            (half * s.k + b * block, (2 * b + 1) * block),
        ] {
            stream.memcpy_dtod(
                &w_cat[0].slice(src..src + block),
                &mut w_int[0].slice_mut(dst..dst + block),
            )?;
        }
    }
    let mut lt = LtMatmul::new(
        dev,
        (s.m, s.n, s.k),
        lt_type::<T>(),
        LtEpilogue::None,
        0,
        LtScales::None,
    )
    .context("cuBLASLt")?;
    let h_lt = stream.alloc_zeros::<O>(s.m * s.n)?;
    let mut out_lt = stream.alloc_zeros::<O>(s.m * half)?;
    let mut h_ours = stream.alloc_zeros::<O>(s.m * s.n)?;
    let mut out_unfused = stream.alloc_zeros::<O>(s.m * half)?;
    let mut d_gated = stream.alloc_zeros::<O>(s.m * half)?;
    let ws_len = gated.workspace_size().max(plain.workspace_size()).max(1);
    let (mut ws, mut ws_other) = (
        stream.alloc_zeros::<u8>(ws_len)?,
        stream.alloc_zeros::<u8>(ws_len)?,
    );
    let none = EpilogueOperands::default();
    let dp = |x: &CudaSlice<T>| x.device_ptr(stream).0;
    let h_lt_ptr = h_lt.device_ptr(stream).0;
    // Set 0 once on each side: the results are compared.
    lt.run(stream, dp(&a[0]), dp(&w_cat[0]), h_lt_ptr)?;
    apply_unfused_gated(
        stream,
        &h_lt,
        (s.m, half, s.n),
        &mut out_lt,
        half,
        Activation::Silu,
    )?;
    gated.run(
        stream,
        &a[0],
        &w_int[0],
        &mut d_gated,
        &none,
        Workspace::Buffer(&mut ws),
    )?;
    let diff = rel_diff(
        &sample_rows(stream, &d_gated, s.m, half)?,
        &sample_rows(stream, &out_lt, s.m, half)?,
    );
    let mut theirs = |i: usize| -> Result<()> {
        lt.run(stream, dp(&a[i]), dp(&w_cat[i]), h_lt_ptr)?;
        apply_unfused_gated(
            stream,
            &h_lt,
            (s.m, half, s.n),
            &mut out_lt,
            half,
            Activation::Silu,
        )?;
        Ok(())
    };
    let mut ours = |i: usize| -> Result<()> {
        gated.run(
            stream,
            &a[i],
            &w_int[i],
            &mut d_gated,
            &none,
            Workspace::Buffer(&mut ws),
        )?;
        Ok(())
    };
    let flops = p.flops();
    let key = format!("gated {}", gated.kernel_name());
    let (gated_s, theirs_s) = race(
        dev,
        flops,
        sets,
        args.rounds,
        &mut ours,
        Some(&mut theirs),
        (
            warmed.seen(&key),
            warmed.seen(&format!("lt+glu {}", kind.label())),
        ),
    )?;
    let mut plain_run = |i: usize| -> Result<()> {
        plain.run(
            stream,
            &a[i],
            &w_cat[i],
            None,
            &mut h_ours,
            Workspace::Buffer(&mut ws_other),
        )?;
        Ok(())
    };
    let (gated_again, plain_s) = race(
        dev,
        flops,
        sets,
        args.rounds,
        &mut ours,
        Some(&mut plain_run),
        (true, warmed.seen(plain.kernel_name())),
    )?;
    let mut unfused = |i: usize| -> Result<()> {
        plain.run(
            stream,
            &a[i],
            &w_cat[i],
            None,
            &mut h_ours,
            Workspace::Buffer(&mut ws_other),
        )?;
        apply_unfused_gated(
            stream,
            &h_ours,
            (s.m, half, s.n),
            &mut out_unfused,
            half,
            Activation::Silu,
        )?;
        Ok(())
    };
    let (gated_third, unfused_s) = race(
        dev,
        flops,
        sets,
        args.rounds,
        &mut ours,
        Some(&mut unfused),
        (
            true,
            warmed.seen(&format!("unfused {}", plain.kernel_name())),
        ),
    )?;
    let Some(theirs_s) = theirs_s else {
        bail!("cuBLASLt was not timed");
    };
    Ok(FusedRow {
        shape: s.clone(),
        kind,
        kernel: gated.kernel_name().to_string(),
        fused_s: gated_s,
        plain_ratio: plain_s.map(|p| gated_again / p).unwrap_or(f64::NAN),
        unfused_ratio: unfused_s.map(|u| u / gated_third),
        tile_ratio: None,
        theirs_s,
        max_rel_diff: diff,
        // Both sides round the two f32 halves' product once; SiLU's exp may differ in its last bits.
        ok: diff <= 4.0 / 256.0,
    })
}

fn write_csv(path: &Path, rows: &[FusedRow], epilogue: EpilogueArg) -> Result<()> {
    let mut w = csv::Writer::from_path(path).with_context(|| format!("{}", path.display()))?;
    w.write_record([
        "shape",
        "m",
        "n",
        "k",
        "type",
        "epilogue",
        "kernel",
        "fused_us",
        "cublaslt_us",
        "ratio",
        "fused_over_plain",
        "unfused_over_fused",
        "in_kernel_over_this",
        "max_rel_diff",
        "ok",
    ])?;
    let name = epilogue
        .to_possible_value()
        .map_or("?".into(), |v| v.get_name().to_string());
    for r in rows {
        w.write_record([
            r.shape.name.clone(),
            r.shape.m.to_string(),
            r.shape.n.to_string(),
            r.shape.k.to_string(),
            r.kind.label().to_string(),
            name.clone(),
            r.kernel.clone(),
            format!("{:.3}", r.fused_s * 1e6),
            format!("{:.3}", r.theirs_s * 1e6),
            format!("{:.4}", r.theirs_s / r.fused_s),
            format!("{:.4}", r.plain_ratio),
            r.unfused_ratio.map_or(String::new(), |u| format!("{u:.4}")),
            r.tile_ratio.map_or(String::new(), |t| format!("{t:.4}")),
            format!("{:.2e}", r.max_rel_diff),
            r.ok.to_string(),
        ])?;
    }
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_have_the_header_fields() {
        let row = FusedRow {
            shape: Shape {
                name: "s".into(),
                m: 1,
                n: 2,
                k: 3,
            },
            kind: Kind::Bf16,
            kernel: "k".into(),
            fused_s: 1e-6,
            plain_ratio: 1.0,
            unfused_ratio: None,
            tile_ratio: None,
            theirs_s: 2e-6,
            max_rel_diff: 0.0,
            ok: true,
        };
        let path = std::env::temp_dir().join(format!("fused-{}.csv", std::process::id()));
        write_csv(&path, &[row], EpilogueArg::Bias).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let fields: Vec<usize> = text.lines().map(|l| l.split(',').count()).collect();
        assert_eq!(fields, [15, 15]);
        assert!(text.contains(",2.000,2.0000,"), "{text}");
    }
}
