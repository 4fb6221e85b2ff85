//! Which plans `profile` measures per problem: the heuristic's, a pinned or autotuned one, or
//! every (matching) candidate; each with its tile-scheduler hints (`--swizzle`, `--raster`,
//! `--splits`, `--sweep-schedules`) and programmatic dependent launch (`--pdl`).

use anyhow::Result;
use cutlass_gemm::selection::tune::TuneCache;
use cutlass_gemm::{Element, Gemm, GemmProblem, ScheduleHints};

use crate::args::{KernelMode, Pdl};
use crate::device::Device;
use crate::profile::Options;

/// Plans to measure, and the name of the heuristic's choice.
pub type Plans<TA, TB, TD> = (Vec<Gemm<TA, TB, TD>>, String);

/// The plans to measure for one problem, by name, and the heuristic's choice.
pub fn plans<TA: Element, TB: Element, TD: Element>(
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
            let mut hints = vec![g.schedule(), ScheduleHints::default()];
            for raster in [1, 2] {
                for swizzle in [1, 2, 4, 8] {
                    hints.push(ScheduleHints {
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
    if !o.split_sweep.is_empty() {
        let mut out = Vec::new();
        for g in plans {
            for &splits in &o.split_sweep {
                let hints = ScheduleHints {
                    splits: if splits <= 1 { 0 } else { splits },
                    ..g.schedule()
                };
                out.extend(g.clone().with_schedule(hints).ok());
            }
        }
        return Ok((out, h));
    }
    if o.schedule == ScheduleHints::default() {
        return Ok((plans, h));
    }
    let plans = plans
        .into_iter()
        .map(|g| g.with_schedule(o.schedule))
        .collect::<cutlass_gemm::Result<_>>()?;
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
        KernelMode::All | KernelMode::Matching(_) => {
            let wanted = |n: &str| match mode {
                KernelMode::Matching(filter) => filter.matches(n),
                _ => true,
            };
            let mut plans = Gemm::<TA, TB, TD>::candidates(dev.info, p)
                .into_iter()
                .filter(|n| wanted(n))
                .map(|n| Gemm::plan(dev.info, p, Some(n)))
                .collect::<cutlass_gemm::Result<Vec<_>>>()?;
            // The 16-bit decode GEMV, where it takes the problem.
            if wanted(cutlass_gemm::DENSE_GEMV) {
                plans.extend(Gemm::plan(dev.info, p, Some(cutlass_gemm::DENSE_GEMV)).ok());
            }
            plans
        }
    };
    Ok((plans, h))
}

/// A plan's programmatic dependent launch, as [`crate::report::Row::pdl`] records it.
pub fn pdl_of<TA: Element, TB: Element, TD: Element>(g: &Gemm<TA, TB, TD>) -> Option<bool> {
    g.kernel_spec()
        .supports_programmatic_dependent_launch()
        .then(|| g.programmatic_dependent_launch())
}
