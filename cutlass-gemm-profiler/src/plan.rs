//! `cutlass-profiler plan`: what this build would run for each shape and type on a named device,
//! without a GPU. One line per shape and type: the kernel's full name, the tile-scheduler hints,
//! whether the kernel computes Dᵀ = Bᵀ·Aᵀ, the operands served through padded copies, or the
//! typed error the library would return.
//!
//! Layout, as `profile` measures: A row-major `[m, k]`, B column-major (a row-major `[n, k]`
//! weight), D row-major.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Result;
use clap::ValueEnum;
use cutlass_gemm::numeric::{Tf32, E4M3};
use cutlass_gemm::{BlockwiseGemm, DeviceInfo, Element, Gemm, GemmProblem, OperandName};
use half::{bf16, f16};

use crate::args::PlanArgs;
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
}

fn from_gemm<TA: Element, TB: Element, TD: Element>(g: &Gemm<TA, TB, TD>) -> Choice {
    Choice {
        kernel: g.kernel_name().to_string(),
        schedule: g.schedule(),
        swapped: g.is_swapped(),
        staged: g.staged_operands(),
        workspace: g.workspace_size(),
    }
}

/// The plan for one shape and type on `device`: the library's automatic choice, or its error.
pub fn choose(device: DeviceInfo, s: &Shape, kind: Kind) -> cutlass_gemm::Result<Choice> {
    let p = GemmProblem::new(s.m, s.n, s.k);
    Ok(match kind {
        Kind::Bf16 => from_gemm(&Gemm::<bf16, bf16, bf16>::plan(device, &p, None)?),
        Kind::F16 => from_gemm(&Gemm::<f16, f16, f16>::plan(device, &p, None)?),
        Kind::E4m3 => from_gemm(&Gemm::<E4M3, E4M3, bf16>::plan(device, &p, None)?),
        Kind::Fp8Blockwise => {
            from_gemm(BlockwiseGemm::<E4M3, E4M3, bf16>::plan(device, &p, None)?.plan_inner())
        }
        Kind::Tf32 => from_gemm(&Gemm::<Tf32, Tf32, f32>::plan(device, &p, None)?),
        Kind::I8 => from_gemm(&Gemm::<i8, i8, i32>::plan(device, &p, None)?),
    })
}

/// The TSV header of `plan`'s output.
pub const HEADER: &str =
    "name\ttype\tm\tn\tk\tkernel\tswizzle\traster\tsplits\tswapped\tstaged\tworkspace_bytes\terror";

/// One TSV line.
pub fn line(s: &Shape, kind: Kind, choice: &cutlass_gemm::Result<Choice>) -> String {
    let mut out = format!("{}\t{}\t{}\t{}\t{}", s.name, kind.label(), s.m, s.n, s.k);
    match choice {
        Ok(c) => {
            let staged: Vec<String> = c.staged.iter().map(|o| o.to_string()).collect();
            let _ = write!(
                out,
                "\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t",
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
                c.workspace
            );
        }
        Err(e) => {
            let _ = write!(
                out,
                "\t-\t-\t-\t-\t-\t-\t-\t{}",
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
            let choice = choose(device, s, kind);
            errors += usize::from(choice.is_err());
            println!("{}", line(s, kind, &choice));
        }
    }
    eprintln!(
        "{} shapes x {} types on {:?} (cc {}.{}, {} SMs): {errors} refused",
        shapes.len(),
        args.problems.types.len(),
        args.device,
        device.compute_capability.0,
        device.compute_capability.1,
        device.sm_count
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
                    let c = choose(device.info(), s, kind)
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
        let choice = choose(NamedDevice::Rtx5090.info(), &s, Kind::Bf16);
        let e = choice.as_ref().unwrap_err().to_string();
        let l = line(&s, Kind::Bf16, &choice);
        assert!(l.ends_with(&e), "{l}");
        assert_eq!(l.split('\t').count(), HEADER.split('\t').count());
    }
}
