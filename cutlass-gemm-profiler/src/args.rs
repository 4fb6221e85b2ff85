//! The command line: subcommands and their options (clap).

use std::convert::Infallible;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use cutlass_gemm_catalog::catalog::NameFilter;

use crate::fused::EpilogueArg;
use crate::kind::Kind;
use crate::plan::NamedDevice;
use crate::shapes::{parse_shape, Shape};

/// The kernel catalog, PTX census and timings against cuBLAS / cuBLASLt.
#[derive(Debug, Parser)]
#[command(name = "cutlass-profiler", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Lists the kernel catalog: every entry with its types, layout, tile, schedule and expected MMA.
    List(ListArgs),
    /// Compiles catalog entries to PTX with nvcc and checks the MMA instructions they contain.
    ///
    /// Results append to the census file; entries already there are skipped, so a census resumes
    /// where it stopped.
    Census(CensusArgs),
    /// Times this crate's GEMMs against cuBLAS / cuBLASLt in one process on a suite of shapes.
    ///
    /// Checks each result against the other library's, prints TFLOP/s, % of the roofline and the
    /// ratio to the reference, and writes CSV and SVG charts when asked.
    Profile(ProfileArgs),
    /// Prints, without a GPU, the kernel and schedule this build would pick on a named device for
    /// each shape and type, or the library's typed error.
    ///
    /// One TSV line per shape and type: the kernel's full name, the tile-scheduler hints (swizzle,
    /// raster, splits), whether the kernel computes Dᵀ = Bᵀ·Aᵀ, the operands served through
    /// padded copies, the workspace size, or the error. Exit status 2 when any is refused.
    Plan(PlanArgs),
    /// Host time per call of a planned bf16 GEMM against a bare launch of the same kernel.
    Overhead(OverheadArgs),
    /// Draws the charts of `profile --svg` from the CSV a profile run wrote (no GPU needed).
    Chart(ChartArgs),
}

#[derive(Debug, Args)]
pub struct ChartArgs {
    /// A CSV written by `profile --csv`.
    #[arg(long, value_name = "FILE")]
    pub csv: PathBuf,
    /// Writes PREFIX-TYPE.svg (TFLOP/s per shape) and PREFIX-TYPE-ratio.svg (sorted ratios).
    #[arg(long, value_name = "PREFIX")]
    pub svg: PathBuf,
}

/// Comma-separated name patterns, as `CUTLASS_RS_KERNELS` takes them: `*`/`?` globs over the
/// whole name, plain text as a substring.
fn parse_filter(s: &str) -> Result<NameFilter, Infallible> {
    Ok(NameFilter::parse(s))
}

#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct ListArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = ListFormat::Table)]
    pub format: ListFormat,
    /// Only entries whose names match: comma-separated patterns, `*`/`?` globs over the whole
    /// name, plain text as a substring.
    #[arg(
        long,
        value_name = "PATTERNS",
        value_parser = parse_filter,
        default_value = "",
        hide_default_value = true
    )]
    pub filter: NameFilter,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    /// Tab-separated, with a header line.
    Tsv,
    /// An array of objects, one entry a line.
    Json,
    /// Aligned columns, the name last, and a count.
    Table,
}

#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct CensusArgs {
    /// Select the coverage set instead of the whole catalog: every type row in each of its
    /// layouts at one tile, every tile row in one allowed layout, a representative SM90 set and
    /// the entries with a block-scaled output.
    #[arg(long)]
    pub coverage: bool,
    /// Only entries whose names match: comma-separated patterns, `*`/`?` globs over the whole
    /// name, plain text as a substring.
    #[arg(
        long,
        value_name = "PATTERNS",
        value_parser = parse_filter,
        default_value = "",
        hide_default_value = true
    )]
    pub filter: NameFilter,
    /// Parallel nvcc jobs (1 to 8).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub jobs: usize,
    /// Compile at most N entries in this run.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Compile N entries drawn at random from the selection (entries already in the census
    /// included), reproducibly from `--seed`, into the file `--out` names (not the census): the
    /// check CI makes on each commit.
    #[arg(long, value_name = "N", conflicts_with = "limit", requires = "out")]
    pub sample: Option<usize>,
    /// The seed of `--sample`.
    #[arg(long, value_name = "SEED", default_value_t = 0, requires = "sample")]
    pub seed: u64,
    /// The census file (TSV), appended to [default: cutlass-gemm-catalog/census.tsv of this
    /// repository].
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Recompute the `kind_ok` column of every row of the census file from its recorded
    /// instructions, without compiling.
    #[arg(long)]
    pub recheck: bool,
}

/// The shapes and types `plan` and `profile` take.
#[derive(Debug, Args)]
pub struct Problems {
    /// Shape file: TSV with `#` comment lines and a header `name m n k source` [default:
    /// bench/shapes.tsv of this repository].
    #[arg(long, value_name = "FILE", conflicts_with = "shape")]
    pub shapes: Option<PathBuf>,
    /// Shapes instead of a shape file, comma-separated (each named as written).
    #[arg(long, value_name = "MxNxK[,MxNxK...]", value_delimiter = ',', value_parser = parse_shape)]
    pub shape: Vec<Shape>,
    /// Types, comma-separated.
    #[arg(
        long,
        value_name = "TYPES",
        value_enum,
        value_delimiter = ',',
        default_value = "bf16"
    )]
    pub types: Vec<Kind>,
}

impl Problems {
    /// The shapes: `--shape`'s, else those of `--shapes` (or the suite).
    pub fn read_shapes(&self) -> anyhow::Result<Vec<Shape>> {
        Ok(if self.shape.is_empty() {
            crate::shapes::read_shapes(
                &self
                    .shapes
                    .clone()
                    .unwrap_or_else(crate::shapes::default_shapes_file),
            )?
        } else {
            self.shape.clone()
        })
    }
}

#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct PlanArgs {
    /// The device to plan for.
    #[arg(long, value_enum, default_value_t = NamedDevice::H100)]
    pub device: NamedDevice,
    /// Plan with this fused epilogue, as `profile --epilogue` measures it: the kernel a plan with
    /// a bias, an activation or row and column scales runs (for `swiglu`, the gated GEMM over the
    /// shape's n, gate and up together: n/2 outputs).
    #[arg(long, value_enum, default_value_t = EpilogueArg::None)]
    pub epilogue: EpilogueArg,
    #[command(flatten)]
    pub problems: Problems,
}

#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub problems: Problems,
    /// Kernels per shape: `heuristic` (the library's pick), `all` (every candidate of the
    /// build), one kernel NAME, or comma-separated names and `*`/`?` globs (the matching
    /// candidates). fp8bw takes a NAME or its heuristic.
    #[arg(
        long,
        value_name = "heuristic|all|NAME|PATTERN,...",
        value_parser = parse_kernels,
        default_value = "heuristic",
        overrides_with = "autotune"
    )]
    pub kernels: KernelMode,
    /// Autotune each problem instead: time the candidates once and cache the winner in CACHE
    /// (TSV), then measure the winner.
    #[arg(long, value_name = "CACHE", overrides_with = "kernels")]
    pub autotune: Option<PathBuf>,
    /// Write every measured row as CSV (cutlass_profiler's columns where they overlap, then this
    /// tool's), rewritten after each shape.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write SVG charts per type: `PREFIX-TYPE.svg` (TFLOP/s per shape, both libraries) and
    /// `PREFIX-TYPE-ratio.svg` (the ratio to the reference over the shapes).
    #[arg(long, value_name = "PREFIX")]
    pub svg: Option<PathBuf>,
    /// Timed rounds per library and kernel (1 to 100); the median round counts.
    #[arg(long, value_name = "N", default_value_t = 7)]
    pub rounds: usize,
    /// Raster swizzle of the tile scheduler, in CTAs. Any of `--swizzle`, `--raster` and
    /// `--splits` replaces each plan's own tile-scheduler hints, those not given at CUTLASS's
    /// defaults.
    #[arg(long, value_name = "1|2|4|8")]
    pub swizzle: Option<u8>,
    /// Raster order of the tile scheduler: 1 along M, 2 along N (see `--swizzle`).
    #[arg(long, value_name = "1|2")]
    pub raster: Option<u8>,
    /// Split-K factor: stream-K kernels split in the kernel, others over a batch of K slices on
    /// their f32-output twin with a reduction (see `--swizzle`).
    #[arg(long, value_name = "N")]
    pub splits: Option<u16>,
    /// Measure every plan with each of these split-K factors it takes (comma-separated; 1 is the
    /// plan without split-K): stream-K kernels split in the kernel, others over a batch of K
    /// slices on their f32-output twin with a reduction. Plans that refuse a factor skip it.
    #[arg(long, value_name = "LIST", value_delimiter = ',', conflicts_with_all = ["splits", "sweep_schedules"])]
    pub split_sweep: Vec<u16>,
    /// Measure every plan with each raster order and swizzle (its own hints, CUTLASS's defaults,
    /// and 1, 2, 4, 8 along M and along N) instead of its own tile-scheduler hints.
    #[arg(long)]
    pub sweep_schedules: bool,
    /// Programmatic dependent launch. `off` (the default) measures kernel against kernel, as
    /// cuBLAS launches; `on` as the library launches by default (PDL where the kernel has it);
    /// `both` measures each plan both ways: the headline stays kernel against kernel, the PDL
    /// gain is reported beside it.
    #[arg(long, value_enum, default_value_t = Pdl::Off)]
    pub pdl: Pdl,
    /// Measure a fused epilogue instead: this crate's GEMM with it against cuBLASLt's matmul with
    /// the matching epilogue and against this crate's plain GEMM (bf16, f16, e4m3; kernel against
    /// kernel; `--kernels` and the schedule options do not apply).
    #[arg(long, value_enum, default_value_t = EpilogueArg::None)]
    pub epilogue: EpilogueArg,
    /// Measure the grouped GEMM instead, on mixture-of-experts layers (Mixtral-8x7B, DeepSeek-V3,
    /// Qwen3-30B-A3B; 1 to 8192 tokens; uniform and skewed routing): against the per-expert loop
    /// of cuBLAS (cuBLASLt for e4m3) GEMMs and cuBLAS's grouped GEMM (bf16, f16), kernel against
    /// kernel; fp8bw (the blockwise grouped GEMM) against the loops of cuBLASLt's and this crate's
    /// blockwise GEMMs, and on DeepGEMM's published grouped shapes beside its numbers. Takes
    /// `--types` (bf16, f16, e4m3, fp8bw), `--rounds` and `--csv`.
    #[arg(long, conflicts_with = "epilogue")]
    pub grouped: bool,
    /// With `--grouped`: the tokens per step to measure, comma-separated (default 1, 8, 64, 512,
    /// 2048 and 8192).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        requires = "grouped",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
    )]
    pub tokens: Vec<usize>,
    /// Measure the weight-only GEMM instead (a build with the `weight-only` feature): 4-bit
    /// weights (w4a16 and w4a16-zp, groups of 128), int8 and FP8 weights with a scale per output
    /// channel (w8a16, fp8w), with bf16 activations on Llama-3-8B's and
    /// -70B's linear layers at 1 to 8192 tokens (or `--shapes`' whose weights the kernels take),
    /// against cuBLAS's bf16 GEMM and this crate's own. Takes `--weights`, `--kernels` (`all`:
    /// every weight-only kernel of the build, stream-K ones also with split-K 2 and 4), `--rounds`
    /// and `--csv`.
    #[arg(long, conflicts_with_all = ["epilogue", "grouped"])]
    pub weight_only: bool,
    /// With `--weight-only`: the weight formats to measure, comma-separated (default all four:
    /// w4a16, w4a16-zp, w8a16, fp8w).
    #[arg(
        long,
        value_name = "FORMATS",
        value_enum,
        value_delimiter = ',',
        requires = "weight_only"
    )]
    pub weights: Vec<WeightArg>,
}

/// A weight format of `profile --weight-only --weights`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WeightArg {
    /// 4-bit, symmetric, groups of 128 (s4 values, scales).
    W4a16,
    /// 4-bit with zero points, groups of 128 (u4 values, scales, zeros).
    #[value(name = "w4a16-zp")]
    W4a16Zp,
    /// int8, symmetric, a scale per output channel (s8 values).
    W8a16,
    /// FP8 e4m3, a scale per output channel.
    Fp8w,
}

#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct OverheadArgs {
    /// The bf16 problem to plan and launch.
    #[arg(long, value_name = "MxNxK", default_value = "128x128x128", value_parser = parse_shape)]
    pub shape: Shape,
}

/// Which plans `profile` measures per problem.
#[derive(Clone, Debug)]
pub enum KernelMode {
    /// The library's heuristic pick.
    Heuristic,
    /// Every candidate of the build.
    All,
    /// One kernel, by name.
    Pinned(String),
    /// The candidates whose names match (comma-separated names or globs).
    Matching(NameFilter),
    /// The autotuned pick, cached in this file.
    Autotune(PathBuf),
}

fn parse_kernels(s: &str) -> Result<KernelMode, Infallible> {
    Ok(match s {
        "heuristic" => KernelMode::Heuristic,
        "all" => KernelMode::All,
        list if list.contains([',', '*', '?']) => KernelMode::Matching(NameFilter::parse(list)),
        name => KernelMode::Pinned(name.to_string()),
    })
}

/// `--pdl`: how plans launch (`Gemm::with_programmatic_dependent_launch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Pdl {
    /// With programmatic dependent launch where the kernel has it (the library's default).
    On,
    /// Without programmatic dependent launch.
    Off,
    /// Each plan both ways.
    Both,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_is_consistent() {
        <Cli as clap::CommandFactory>::command().debug_assert();
    }

    #[test]
    fn profile_options() {
        let cli = Cli::try_parse_from([
            "cutlass-profiler",
            "profile",
            "--shape",
            "16x6144x4096,128x128x128",
            "--types",
            "bf16,fp8,fp8bw,int8",
            "--kernels",
            "*_e4m3_*,foo",
            "--pdl",
            "both",
            "--rounds",
            "3",
            "--rounds",
            "5",
        ])
        .unwrap();
        let Command::Profile(p) = cli.command else {
            panic!("not profile")
        };
        assert_eq!(p.problems.shape.len(), 2);
        assert_eq!(
            p.problems.types,
            [Kind::Bf16, Kind::E4m3, Kind::Fp8Blockwise, Kind::I8]
        );
        assert!(matches!(p.kernels, KernelMode::Matching(_)));
        assert_eq!((p.pdl, p.rounds), (Pdl::Both, 5));
        // --shapes and --shape exclude each other; the later of --kernels and --autotune wins.
        assert!(Cli::try_parse_from([
            "cutlass-profiler",
            "profile",
            "--shapes",
            "x.tsv",
            "--shape",
            "1x2x3"
        ])
        .is_err());
        let cli = Cli::try_parse_from([
            "cutlass-profiler",
            "profile",
            "--autotune",
            "t.tsv",
            "--kernels",
            "all",
        ])
        .unwrap();
        let Command::Profile(p) = cli.command else {
            panic!("not profile")
        };
        assert!(p.autotune.is_none() && matches!(p.kernels, KernelMode::All));
    }
}
