//! `cutlass-profiler profile`: this crate's GEMMs against cuBLAS / cuBLASLt, side by side in one
//! process, on a suite of shapes.
//!
//! For each shape and type: the plans (see [`crate::plans`]), inputs rotated over enough buffers
//! to exceed twice the L2 cache, warm-up, then rounds that alternate the two libraries (see
//! [`crate::timing`]). Each result is checked against the other library's output on the same
//! inputs. Prints a table (TFLOP/s, % of the roofline, ratio to the reference), and writes CSV
//! and SVG when asked ([`crate::report`], [`crate::charts`]).
//!
//! Plans launch as the library launches them: with programmatic dependent launch where the kernel
//! has it, so back-to-back launches overlap each one's prologue with the previous one's tail.
//! `--pdl off` measures without it, `--pdl both` each plan both ways (the CSV's `pdl` column: `on`,
//! `off`, or `-` for kernels without it; a geometric mean for each).
//!
//! Layout: A row-major `[m, k]`, B column-major (a row-major `[n, k]` weight), D row-major: TN,
//! what a linear layer computes. Types: `bf16`, `f16` (cuBLAS, f32 accumulation), `e4m3`
//! (e4m3 x e4m3 -> bf16, against cuBLASLt's FP8 matmul, f32 accumulation without fast
//! accumulation), `fp8bw` (FP8 1x128 x 128x128 blockwise -> bf16, against cuBLASLt's blockwise FP8
//! matmul; scales are all 1 so that the outputs are comparable with cuBLASLt's tensor-wise FP8
//! result, which serves as the check), `tf32` and `i8` (`cublasGemmEx`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cudarc::cublas::{CudaBlas, Gemm as _};
use cudarc::driver::{CudaSlice, DevicePtr};
use cutlass_gemm::numeric::{Tf32, E4M3};
use cutlass_gemm::{BlockwiseGemm, Element, GemmProblem, ScheduleHints, Workspace};
use half::{bf16, f16};
use indicatif::{ProgressBar, ProgressStyle};

use crate::args::{KernelMode, Pdl, ProfileArgs};
use crate::charts;
use crate::cublas::{self, LtEpilogue, LtMatmul, LtScales};
use crate::device::Device;
use crate::kind::Kind;
use crate::plans::{pdl_of, plans};
use crate::report::{self, Row};
use crate::shapes::Shape;
use crate::timing::{fill_sets, race, rel_diff, rotation, sample_rows, Warmed};

/// The resolved `profile` options.
pub struct Options {
    pub shapes: Vec<Shape>,
    pub kinds: Vec<Kind>,
    pub mode: KernelMode,
    pub csv: Option<PathBuf>,
    pub svg: Option<PathBuf>,
    pub rounds: usize,
    /// `--swizzle`, `--raster`, `--splits`; zeros keep each plan's own.
    pub schedule: ScheduleHints,
    /// Every plan with each raster order and swizzle (CUTLASS's defaults and 1, 2, 4, 8 along M
    /// and along N) instead of its own tile-scheduler hints.
    pub sweep_schedules: bool,
    /// `--split-sweep`: each plan with each of these split-K factors it takes.
    pub split_sweep: Vec<u16>,
    /// Programmatic dependent launch: the plans' default (on), off, or each plan both ways.
    pub pdl: Pdl,
    /// Kernels and reference libraries already warmed up (one full warm-up each per run).
    pub warmed: Warmed,
}

impl Options {
    fn new(args: &ProfileArgs) -> Result<Options> {
        let shapes = args.problems.read_shapes()?;
        let mut schedule = ScheduleHints::default();
        schedule.swizzle = args.swizzle.unwrap_or(schedule.swizzle);
        schedule.raster = args.raster.unwrap_or(schedule.raster);
        schedule.splits = args.splits.unwrap_or(schedule.splits);
        Ok(Options {
            shapes,
            kinds: args.problems.types.clone(),
            mode: match &args.autotune {
                Some(cache) => KernelMode::Autotune(cache.clone()),
                None => args.kernels.clone(),
            },
            csv: args.csv.clone(),
            svg: args.svg.clone(),
            rounds: args.rounds.clamp(1, 100),
            schedule,
            sweep_schedules: args.sweep_schedules,
            split_sweep: args.split_sweep.clone(),
            pdl: args.pdl,
            warmed: Warmed::default(),
        })
    }
}

pub fn main(args: &ProfileArgs) -> ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cutlass-profiler profile: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &ProfileArgs) -> Result<ExitCode> {
    let o = Options::new(args)?;
    if !cutlass_gemm::cuda_available() {
        eprintln!("cutlass-profiler profile: no CUDA GPU found; nothing to profile");
        return Ok(ExitCode::from(3));
    }
    if args.weight_only {
        return crate::weight_only::run(args);
    }
    if args.grouped {
        return crate::grouped::run(args);
    }
    if args.epilogue != crate::fused::EpilogueArg::None {
        return crate::fused::run(args, args.epilogue);
    }
    let dev = Device::open()?;
    let blas =
        CudaBlas::new(dev.stream.clone()).context("cuBLAS (libcublas.so must be loadable)")?;
    let roofline = &dev.roofline;
    println!(
        "device: {} (cc {}.{}, {} SMs, L2 {} MiB); roofline: {:.1} TFLOP/s bf16 dense (x2 for FP8), copy bandwidth {:.0} GB/s (measured)",
        dev.name(),
        dev.info.compute_capability.0,
        dev.info.compute_capability.1,
        dev.info.sm_count,
        dev.l2_bytes >> 20,
        roofline.peak_bf16,
        roofline.copy_gbs
    );
    report::print_header();
    let total = o.shapes.len() * o.kinds.len();
    let progress = ProgressBar::new(total as u64).with_style(
        ProgressStyle::with_template("[{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("#  "),
    );
    let mut rows = Vec::new();
    let mut failed = 0;
    for (s, &kind) in o
        .shapes
        .iter()
        .flat_map(|s| o.kinds.iter().map(move |k| (s, k)))
    {
        progress.set_message(format!("{} {}", s.name, kind.label()));
        let result = match kind {
            Kind::Bf16 => profile_16bit::<bf16>(&dev, &blas, s, kind, &o),
            Kind::F16 => profile_16bit::<f16>(&dev, &blas, s, kind, &o),
            Kind::E4m3 | Kind::Fp8Blockwise => profile_fp8(&dev, s, kind, &o),
            Kind::Tf32 => profile_gemm_ex::<Tf32, f32>(&dev, &blas, s, kind, &o),
            Kind::I8 => profile_gemm_ex::<i8, i32>(&dev, &blas, s, kind, &o),
        };
        progress.suspend(|| match &result {
            Ok(r) => {
                for row in r {
                    report::print_row(roofline, row);
                    failed += usize::from(!row.ok);
                }
            }
            Err(e) => {
                println!("{:<24} {:<6} error: {e:#}", s.name, kind.label());
                failed += 1;
            }
        });
        rows.extend(result.unwrap_or_default());
        progress.inc(1);
        // The CSV holds every row measured so far: a run stopped by a time limit keeps them.
        if let Some(path) = &o.csv {
            report::write_csv(path, roofline, &rows)?;
        }
    }
    progress.finish_and_clear();
    report::summarize(&rows, &o.kinds, &o.mode, o.pdl);
    if let Some(path) = &o.csv {
        report::write_csv(path, roofline, &rows)?;
        println!("wrote {}", path.display());
    }
    if let Some(prefix) = &o.svg {
        for &k in &o.kinds {
            if rows.iter().any(|r| r.kind == k) {
                for path in charts::write_charts(prefix, &roofline.device, &rows, k)? {
                    println!("wrote {}", path.display());
                }
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
    let a: Vec<CudaSlice<T>> = fill_sets(stream, sets, s.m * s.k, 1)?;
    let b: Vec<CudaSlice<T>> = fill_sets(stream, sets, s.n * s.k, 101)?;
    let mut d_blas = stream.alloc_zeros::<T>(s.m * s.n)?;
    let cfg = cublas::tn_config(s, T::from_f64(1.0), T::from_f64(0.0));
    // cuBLAS's time is measured against each kernel; its output once.
    unsafe { blas.gemm(cfg, &b[0], &a[0], &mut d_blas) }?;
    let reference = sample_rows(stream, &d_blas, s.m, s.n)?;
    let mut theirs = |i: usize| -> Result<()> {
        unsafe { blas.gemm(cfg, &b[i], &a[i], &mut d_blas) }?;
        Ok(())
    };
    // Two f32-accumulated results rounded to 16 bits: a few units of the output's rounding apart
    // at most.
    let tolerance = 4.0 * T::UNIT_ROUNDOFF.max(1.0 / 2048.0) * 2.0;
    let check = Check {
        reference: &reference,
        tolerance,
    };
    race_plans::<T, T>(dev, s, kind, o, (&a, &b), &mut theirs, check)
}

/// The reference library's output for input set 0, and how far a plan's output may be from it:
/// max |difference| / max |reference|.
struct Check<'a> {
    reference: &'a [f64],
    tolerance: f64,
}

/// Times every plan of the problem against the reference library (`theirs`, on input set `i`)
/// over the rotated inputs `a`, `b`, and checks each plan's output. One row per plan.
fn race_plans<T, TD>(
    dev: &Device,
    s: &Shape,
    kind: Kind,
    o: &Options,
    (a, b): (&[CudaSlice<T>], &[CudaSlice<T>]),
    theirs: &mut dyn FnMut(usize) -> Result<()>,
    check: Check,
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
        let diff = rel_diff(&sample_rows(stream, &d_ours, s.m, s.n)?, check.reference);
        let mut ours = |i: usize| run(i, &mut d_ours);
        let warmed = (
            o.warmed
                .seen(&format!("{}{:?}", g.kernel_name(), pdl_of(g))),
            o.warmed.seen(kind.reference()),
        );
        let (t_ours, t_ref) = race(
            dev,
            p.flops(),
            a.len(),
            o.rounds,
            &mut ours,
            Some(theirs),
            warmed,
        )?;
        rows.push(Row {
            shape: s.clone(),
            kind,
            kernel: g.kernel_name().to_string(),
            schedule: g.schedule(),
            heuristic: Some(heuristic.clone()),
            pdl: pdl_of(g),
            ours_s: t_ours,
            theirs_s: t_ref,
            ok: diff <= check.tolerance,
            max_rel_diff: diff,
        });
    }
    Ok(rows)
}

/// tf32 (f32 output) or s8 (s32 output) against `cublasGemmEx`. The inputs are exact tf32
/// values (resp. integers in [-64, 64)), so both libraries multiply the same numbers.
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
    let stream = &dev.stream;
    let sets = rotation(dev, (s.m * s.k + s.n * s.k) * kind.input_bytes());
    let a: Vec<CudaSlice<T>> = fill_sets(stream, sets, s.m * s.k, 1)?;
    let b: Vec<CudaSlice<T>> = fill_sets(stream, sets, s.n * s.k, 101)?;
    let mut d_blas = stream.alloc_zeros::<TD>(s.m * s.n)?;
    cublas::gemm_ex(blas, stream, kind, s, &a[0], &b[0], &mut d_blas)?;
    let reference = sample_rows(stream, &d_blas, s.m, s.n)?;
    let mut theirs = |i: usize| cublas::gemm_ex(blas, stream, kind, s, &a[i], &b[i], &mut d_blas);
    // i8: exact s32 sums (below 2^24, where the f32 epilogue is exact). tf32: the same exact
    // products, f32 sums in different orders.
    let tolerance = if kind == Kind::I8 { 0.0 } else { 1e-4 };
    let check = Check {
        reference: &reference,
        tolerance,
    };
    race_plans::<T, TD>(dev, s, kind, o, (&a, &b), &mut theirs, check)
}

/// The FP8 blockwise plans to measure: the heuristic's, the named one, or every blockwise
/// e4m3 -> bf16 kernel of the build and the decode GEMV where it serves (`--kernels all` or a
/// pattern); `--splits` (and `--swizzle`,
/// `--raster`) replace each plan's hints where the kernel takes them (split-K: stream-K only).
fn blockwise_plans(
    dev: &Device,
    p: &GemmProblem,
    o: &Options,
) -> Result<Vec<BlockwiseGemm<E4M3, E4M3, bf16>>> {
    let plan = |name: Option<&str>| BlockwiseGemm::<E4M3, E4M3, bf16>::plan(dev.info, p, name);
    let plans = match &o.mode {
        KernelMode::Pinned(name) => vec![plan(Some(name))?],
        KernelMode::All | KernelMode::Matching(_) => {
            let wanted = |name: &str| match &o.mode {
                KernelMode::Matching(filter) => filter.matches(name),
                _ => true,
            };
            let mut plans = cutlass_gemm::built_kernels()
                .iter()
                .filter(|k| {
                    k.spec.blockwise.is_some()
                        && !k.spec.kernel_schedule.is_grouped()
                        && k.spec.a.ty == cutlass_gemm::DataType::E4M3
                        && k.spec.b.ty == cutlass_gemm::DataType::E4M3
                        && k.spec.d.ty == cutlass_gemm::DataType::Bf16
                        && wanted(k.name)
                })
                .map(|k| plan(Some(k.name)))
                .collect::<cutlass_gemm::Result<Vec<_>>>()?;
            // The decode GEMV, where it takes the problem.
            if wanted(cutlass_gemm::BLOCKWISE_GEMV) {
                plans.extend(plan(Some(cutlass_gemm::BLOCKWISE_GEMV)).ok());
            }
            plans
        }
        KernelMode::Heuristic | KernelMode::Autotune(_) => vec![plan(None)?],
    };
    if o.schedule == ScheduleHints::default() {
        return Ok(plans);
    }
    Ok(plans
        .into_iter()
        .filter_map(|g| {
            let streamk =
                g.plan_inner().kernel_spec().tile_scheduler == cutlass_gemm::TileScheduler::StreamK;
            (o.schedule.splits <= 1 || streamk).then(|| g.with_schedule(o.schedule))
        })
        .collect::<cutlass_gemm::Result<_>>()?)
}

/// e4m3 x e4m3 -> bf16 (tensor-wise) against cuBLASLt, or FP8 blockwise against cuBLASLt's
/// blockwise matmul.
fn profile_fp8(dev: &Device, s: &Shape, kind: Kind, o: &Options) -> Result<Vec<Row>> {
    let stream = &dev.stream;
    let p = GemmProblem::new(s.m, s.n, s.k);
    let sets = rotation(dev, s.m * s.k + s.n * s.k);
    let a: Vec<CudaSlice<E4M3>> = fill_sets(stream, sets, s.m * s.k, 1)?;
    let w: Vec<CudaSlice<E4M3>> = fill_sets(stream, sets, s.n * s.k, 101)?;
    let mut d_ours = stream.alloc_zeros::<bf16>(s.m * s.n)?;
    let d_lt = stream.alloc_zeros::<bf16>(s.m * s.n)?;
    // The check: cuBLASLt's tensor-wise FP8 result (the blockwise scales are all 1). Where
    // cuBLASLt has no algorithm (n = 50257, say), this crate's result is timed unchecked (the GPU
    // tests check such shapes against the host reference) and the row has no reference time.
    let shape = (s.m, s.n, s.k);
    let e4m3 = cudarc::cublaslt::sys::cudaDataType_t::CUDA_R_8F_E4M3;
    let lt_of = |scales| LtMatmul::new(dev, shape, e4m3, LtEpilogue::None, 0, scales).ok();
    let ptr = |x: &CudaSlice<E4M3>| x.device_ptr(stream).0;
    let d_lt_ptr = d_lt.device_ptr(stream).0;
    let mut lt_check = lt_of(LtScales::None);
    let reference = match lt_check.as_mut() {
        Some(lt) => {
            lt.run(stream, ptr(&a[0]), ptr(&w[0]), d_lt_ptr)?;
            Some(sample_rows(stream, &d_lt, s.m, s.n)?)
        }
        None => None,
    };
    let mut lt = if kind == Kind::Fp8Blockwise {
        lt_of(LtScales::Blockwise)
    } else {
        lt_check
    };
    let mut rows = Vec::new();
    let mut measure = |name: &str,
                       schedule: ScheduleHints,
                       pdl: Option<bool>,
                       heuristic: &str,
                       run: &mut dyn FnMut(usize, &mut CudaSlice<bf16>) -> Result<()>|
     -> Result<()> {
        run(0, &mut d_ours)?;
        let diff = match &reference {
            Some(r) => rel_diff(&sample_rows(stream, &d_ours, s.m, s.n)?, r),
            None => f64::NAN,
        };
        let mut ours = |i: usize| run(i, &mut d_ours);
        let has_lt = lt.is_some();
        let mut theirs = |i: usize| -> Result<()> {
            match lt.as_mut() {
                Some(lt) => lt.run(stream, ptr(&a[i]), ptr(&w[i]), d_lt_ptr),
                None => Ok(()),
            }
        };
        let warmed = (
            o.warmed.seen(&format!("{name}{pdl:?}")),
            o.warmed.seen(kind.reference()),
        );
        let (t_ours, t_lt) = race(
            dev,
            p.flops(),
            sets,
            o.rounds,
            &mut ours,
            if has_lt { Some(&mut theirs) } else { None },
            warmed,
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
            ok: reference.is_none() || diff <= 2.0 / 256.0,
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
        for g in blockwise_plans(dev, &p, o)? {
            let (la, lb) = g.scale_lens();
            let sa = stream.clone_htod(&vec![1.0f32; la])?;
            let sb = stream.clone_htod(&vec![1.0f32; lb])?;
            let mut ws = stream.alloc_zeros::<u8>(g.workspace_size().max(1))?;
            let name = g.kernel_name();
            let heuristic = BlockwiseGemm::<E4M3, E4M3, bf16>::plan(dev.info, &p, None)?;
            measure(
                name,
                g.schedule(),
                None,
                heuristic.kernel_name(),
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
    }
    Ok(rows)
}
