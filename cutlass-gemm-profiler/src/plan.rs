//! `cutlass-profiler plan`: what this build would run for each shape and type on a named device,
//! without a GPU. One line per shape and type: the kernel's full name, the tile-scheduler hints,
//! whether the kernel computes Dᵀ = Bᵀ·Aᵀ, the operands served through padded copies, or the
//! typed error the library would return.
//!
//! Layout, as `profile` measures: A row-major `[m, k]`, B column-major (a row-major `[n, k]`
//! weight), D row-major. `--epilogue` plans with a fused epilogue (`swiglu`: the gated GEMM with
//! n/2 outputs), as `profile --epilogue` measures.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Result;
use clap::ValueEnum;
use cutlass_gemm::numeric::{Tf32, E4M3};
use cutlass_gemm::{
    Activation, BlockwiseGemm, DeviceInfo, Element, Error, GatedGemm, Gemm, GemmProblem,
    OperandName, ProblemRule, ScheduleHints,
};
use half::{bf16, f16};

use crate::args::PlanArgs;
use crate::fused::EpilogueArg;
use crate::kind::Kind;
use crate::shapes::Shape;

/// The devices `plan` knows: the facts kernel selection reads (compute capability, SM count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum NamedDevice {
    /// NVIDIA H100 SXM: compute capability 9.0, 132 SMs.
    H100,
    /// NVIDIA H200: compute capability 9.0, 132 SMs.
    H200,
    /// NVIDIA B200: compute capability 10.0, 148 SMs.
    B200,
    /// NVIDIA GeForce RTX 5090: compute capability 12.0, 170 SMs.
    Rtx5090,
}

impl NamedDevice {
    pub fn info(self) -> DeviceInfo {
        let (compute_capability, sm_count) = match self {
            NamedDevice::H100 | NamedDevice::H200 => ((9, 0), 132),
            NamedDevice::B200 => ((10, 0), 148),
            NamedDevice::Rtx5090 => ((12, 0), 170),
        };
        DeviceInfo {
            ordinal: 0,
            compute_capability,
            sm_count,
        }
    }
}

/// What the library would do with one shape and type.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub kernel: String,
    pub schedule: cutlass_gemm::ScheduleHints,
    pub swapped: bool,
    pub staged: Vec<OperandName>,
    pub workspace: usize,
    /// The epilogue runs as a separate pass over D after the plain kernel
    /// ([`Gemm::epilogue_is_separate`]).
    pub separate_epilogue: bool,
}

fn from_gemm<TA: Element, TB: Element, TD: Element>(g: &Gemm<TA, TB, TD>) -> Choice {
    Choice {
        kernel: g.kernel_name().to_string(),
        schedule: g.schedule(),
        swapped: g.is_swapped(),
        staged: g.staged_operands(),
        workspace: g.workspace_size(),
        separate_epilogue: g.epilogue_is_separate(),
    }
}

/// The gated GEMM's plan over the shape's n (gate and up together): n/2 outputs.
fn gated<T: Element, O: Element>(device: DeviceInfo, s: &Shape) -> cutlass_gemm::Result<Choice> {
    if s.n % 2 != 0 {
        return Err(Error::InvalidProblem {
            reason: ProblemRule::GatedOutputs { n: s.n },
        });
    }
    let p = GemmProblem::new(s.m, s.n / 2, s.k);
    let g = GatedGemm::<T, O>::plan(device, &p, Activation::Silu, None)?;
    Ok(Choice {
        kernel: g.kernel_name().to_string(),
        schedule: ScheduleHints::default(),
        swapped: false,
        staged: Vec::new(),
        workspace: g.workspace_size(),
        separate_epilogue: false,
    })
}

/// The plan for one shape and type on `device` with `epilogue`: the library's automatic choice,
/// or its error.
pub fn choose(
    device: DeviceInfo,
    s: &Shape,
    kind: Kind,
    epilogue: EpilogueArg,
) -> cutlass_gemm::Result<Choice> {
    let p = GemmProblem::new(s.m, s.n, s.k);
    if epilogue == EpilogueArg::Swiglu {
        return match kind {
            Kind::Bf16 => gated::<bf16, bf16>(device, s),
            Kind::F16 => gated::<f16, f16>(device, s),
            Kind::E4m3 => gated::<E4M3, bf16>(device, s),
            // No gated kernel takes blockwise scales: the library's typed error (it has none
            // with an e4m3 output either).
            Kind::Fp8Blockwise => gated::<E4M3, E4M3>(device, s),
            Kind::Tf32 => gated::<Tf32, Tf32>(device, s),
            Kind::I8 => gated::<i8, i8>(device, s),
        };
    }
    let e = epilogue.ours();
    Ok(match kind {
        Kind::Bf16 => {
            from_gemm(&Gemm::<bf16, bf16, bf16>::plan(device, &p, None)?.with_epilogue(e)?)
        }
        Kind::F16 => from_gemm(&Gemm::<f16, f16, f16>::plan(device, &p, None)?.with_epilogue(e)?),
        Kind::E4m3 => {
            from_gemm(&Gemm::<E4M3, E4M3, bf16>::plan(device, &p, None)?.with_epilogue(e)?)
        }
        Kind::Fp8Blockwise => from_gemm(
            BlockwiseGemm::<E4M3, E4M3, bf16>::plan(device, &p, None)?
                .with_epilogue(e)?
                .plan_inner(),
        ),
        Kind::Tf32 => {
            from_gemm(&Gemm::<Tf32, Tf32, f32>::plan(device, &p, None)?.with_epilogue(e)?)
        }
        Kind::I8 => from_gemm(&Gemm::<i8, i8, i32>::plan(device, &p, None)?.with_epilogue(e)?),
    })
}

/// The TSV header of `plan`'s output.
pub const HEADER: &str =
    "name\ttype\tm\tn\tk\tkernel\tswizzle\traster\tsplits\tswapped\tstaged\tworkspace_bytes\tseparate_epilogue\terror";

/// One TSV line.
pub fn line(s: &Shape, kind: Kind, choice: &cutlass_gemm::Result<Choice>) -> String {
    let mut out = format!("{}\t{}\t{}\t{}\t{}", s.name, kind.label(), s.m, s.n, s.k);
    match choice {
        Ok(c) => {
            let staged: Vec<String> = c.staged.iter().map(|o| o.to_string()).collect();
            let _ = write!(
                out,
                "\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t",
                c.kernel,
                c.schedule.swizzle,
                c.schedule.raster,
                c.schedule.splits,
                if c.swapped { "yes" } else { "no" },
                if staged.is_empty() {
                    "-".to_string()
                } else {
                    staged.join(",")
                },
                c.workspace,
                if c.separate_epilogue { "yes" } else { "no" }
            );
        }
        Err(e) => {
            let _ = write!(
                out,
                "\t-\t-\t-\t-\t-\t-\t-\t-\t{}",
                e.to_string().replace('\t', " ")
            );
        }
    }
    out
}

pub fn main(args: &PlanArgs) -> ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cutlass-profiler plan: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &PlanArgs) -> Result<ExitCode> {
    let shapes = args.problems.read_shapes()?;
    let device = args.device.info();
    println!("{HEADER}");
    let mut errors = 0;
    for s in &shapes {
        for &kind in &args.problems.types {
            let choice = choose(device, s, kind, args.epilogue);
            errors += usize::from(choice.is_err());
            println!("{}", line(s, kind, &choice));
        }
    }
    eprintln!(
        "{} shapes x {} types on {:?} (cc {}.{}, {} SMs), epilogue {:?}: {errors} refused",
        shapes.len(),
        args.problems.types.len(),
        args.device,
        device.compute_capability.0,
        device.compute_capability.1,
        device.sm_count,
        args.epilogue
    );
    Ok(if errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shapes::read_shapes;
    use std::path::Path;

    fn broad() -> Vec<Shape> {
        read_shapes(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/shapes-broad.tsv"))
            .unwrap()
    }

    /// Every shape of the broad set plans in every default type on an H100 and an H200 (GPT-2's
    /// n = 50257 and the other unaligned extents through padded copies).
    #[test]
    fn every_broad_shape_plans_in_the_default_types() {
        let shapes = broad();
        assert_eq!(shapes.len(), 140);
        let mut staged = 0;
        for device in [NamedDevice::H100, NamedDevice::H200] {
            for s in &shapes {
                for kind in [Kind::Bf16, Kind::F16, Kind::E4m3, Kind::Fp8Blockwise] {
                    let c = choose(device.info(), s, kind, EpilogueArg::None)
                        .unwrap_or_else(|e| panic!("{} {}: {e}", s.name, kind.label()));
                    staged += usize::from(!c.staged.is_empty());
                    let l = line(s, kind, &Ok(c));
                    assert_eq!(l.split('\t').count(), HEADER.split('\t').count(), "{l}");
                }
            }
        }
        assert!(staged > 0, "the broad set has unaligned shapes");
    }

    /// A device this build has no kernels for gets the library's typed error, in the error column.
    #[test]
    fn a_device_without_kernels_in_this_build_gets_the_typed_error() {
        let s = Shape {
            name: "x".into(),
            m: 128,
            n: 128,
            k: 128,
        };
        let choice = choose(
            NamedDevice::Rtx5090.info(),
            &s,
            Kind::Bf16,
            EpilogueArg::None,
        );
        let e = choice.as_ref().unwrap_err().to_string();
        let l = line(&s, Kind::Bf16, &choice);
        assert!(l.ends_with(&e), "{l}");
        assert_eq!(l.split('\t').count(), HEADER.split('\t').count());
    }

    /// With a fused epilogue every broad shape plans in bf16 on a kernel with it (the fused
    /// twins, or the gated kernels for `swiglu` where n/2 is a multiple of 8), and the same
    /// shape's plain plan keeps a kernel with CUTLASS's own epilogue.
    #[test]
    fn fused_epilogues_plan_on_fused_kernels() {
        let fused = |name: &str| name.contains("_evt_scale_bias");
        for s in &broad() {
            let plain = choose(NamedDevice::H200.info(), s, Kind::Bf16, EpilogueArg::None).unwrap();
            assert!(!fused(&plain.kernel), "{}: {}", s.name, plain.kernel);
            for e in [EpilogueArg::Bias, EpilogueArg::BiasGelu] {
                let c = choose(NamedDevice::H200.info(), s, Kind::Bf16, e)
                    .unwrap_or_else(|err| panic!("{} {e:?}: {err}", s.name));
                // The 16-bit decode GEMV computes the epilogue: a plan on it keeps it. GPT-2's LM
                // head (n = 50257) below 768 tokens keeps the plain kernel and a separate pass.
                let gemv = plain.kernel == cutlass_gemm::DENSE_GEMV;
                assert_eq!(c.kernel == cutlass_gemm::DENSE_GEMV, gemv, "{}", s.name);
                assert_eq!(
                    c.separate_epilogue,
                    s.n == 50257 && s.m <= s.k,
                    "{}",
                    s.name
                );
                assert!(
                    gemv || c.separate_epilogue || fused(&c.kernel),
                    "{} {e:?}: {}",
                    s.name,
                    c.kernel
                );
            }
            let g = choose(NamedDevice::H200.info(), s, Kind::Bf16, EpilogueArg::Swiglu);
            if s.n % 16 == 0 && s.k % 8 == 0 {
                let g = g.unwrap_or_else(|err| panic!("{} swiglu: {err}", s.name));
                assert!(
                    g.kernel.contains("_glu_scale_bias"),
                    "{}: {}",
                    s.name,
                    g.kernel
                );
            } else {
                assert!(g.is_err(), "{} swiglu planned with n = {}", s.name, s.n);
            }
        }
        // e4m3 to bf16: the gated e4m3 kernels.
        let s = broad()
            .into_iter()
            .find(|s| s.name == "llama2-7b-gateup-m512")
            .unwrap();
        let g = choose(
            NamedDevice::H100.info(),
            &s,
            Kind::E4m3,
            EpilogueArg::Swiglu,
        )
        .unwrap();
        assert!(
            g.kernel
                .starts_with("cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_bf16_bf16_")
                && g.kernel.contains("_glu_scale_bias"),
            "{}",
            g.kernel
        );
        assert!(choose(
            NamedDevice::H100.info(),
            &s,
            Kind::Fp8Blockwise,
            EpilogueArg::Swiglu
        )
        .is_err());
        // FP8 rowwise: the e4m3 fused twins.
        let s = &broad()[0];
        let c = choose(
            NamedDevice::H200.info(),
            s,
            Kind::E4m3,
            EpilogueArg::RowwiseBias,
        )
        .unwrap();
        assert!(fused(&c.kernel), "{}", c.kernel);
    }
}
