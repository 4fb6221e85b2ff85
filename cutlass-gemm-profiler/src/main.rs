//! `cutlass-profiler`: the kernel catalog, a PTX census and timings against cuBLAS / cuBLASLt
//! from the command line.
//!
//! Subcommands (`cutlass-profiler SUBCOMMAND --help` for the options):
//!
//! - `list`: the kernel catalog as a table, TSV or JSON (like cutlass_profiler's enumerate mode);
//!   `--filter` takes comma-separated name patterns (`*`/`?` globs over the whole name, plain text
//!   as a substring), as `CUTLASS_RS_KERNELS` does.
//! - `census`: compiles catalog entries to PTX with the nvcc cutlass-gemm-sys found, and checks the
//!   MMA instructions in the PTX against the kind, CTA group and scale-vector size CUTLASS's
//!   tables imply; results append to `cutlass-gemm-catalog/census.tsv`, so a census resumes where
//!   it stopped.
//! - `profile`: times this crate's GEMMs against cuBLAS / cuBLASLt in one process on
//!   `bench/shapes.tsv` (or the given shapes), checks each result against the other library's,
//!   prints TFLOP/s, % of the roofline and the ratio, and writes CSV and SVG charts when asked.
//! - `plan`: without a GPU, the kernel and schedule this build would pick for each shape and type
//!   on a named device (`--device h100|h200|b200|rtx5090`), or the library's typed error.
//!   `--grouped` times the grouped GEMM on mixture-of-experts layers instead ([`grouped`]);
//!   `--weight-only` the weight-only GEMM on Llama-3 linear layers ([`weight_only`]).
//! - `overhead`: the host time per call of a planned bf16 GEMM against a bare launch of the same
//!   kernel.
//! - `chart`: the charts of `profile --svg`, drawn again from a profile CSV.
//!
//! Modules: [`args`] (the command line), [`list`], [`census`], [`plan`], [`profile`] (the per-type drivers)
//! with [`plans`], [`timing`], [`cublas`], [`device`], [`report`] and [`charts`], [`overhead`],
//! and [`shapes`] and [`kind`] shared by them.

use std::process::ExitCode;

use clap::Parser;

mod args;
mod census;
mod charts;
mod cublas;
mod device;
mod fused;
mod grouped;
mod grouped_blockwise;
mod kind;
mod list;
mod overhead;
mod plan;
mod plans;
mod profile;
mod report;
mod shapes;
mod timing;
mod weight_only;

use args::{Cli, Command};

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::List(a) => list::main(&a),
        Command::Census(a) => census::main(&a),
        Command::Profile(a) => profile::main(&a),
        Command::Plan(a) => plan::main(&a),
        Command::Overhead(a) => overhead::main(&a),
        Command::Chart(a) => charts::main(&a),
    }
}
