//! `cutlass-profiler census`: compiles catalog entries to PTX (nvcc `--ptx`), finds the MMA
//! instructions in the PTX and checks them against the kind, CTA group and scale-vector size the
//! tables of CUTLASS's Blackwell documentation imply.
//!
//! Results append to the census file (TSV: a `#` line naming nvcc and CUTLASS, then
//! `name status seconds ptx_mma kind_ok`); entries already there are skipped, so a census resumes
//! where it stopped.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use cutlass_gemm_catalog::catalog;
use cutlass_gemm_catalog::codegen;
use cutlass_gemm_catalog::{Arch, DataType, KernelSpec};
use indicatif::{ProgressBar, ProgressStyle};

use crate::args::CensusArgs;

const HEADER: [&str; 5] = ["name", "status", "seconds", "ptx_mma", "kind_ok"];

struct Toolchain {
    nvcc: PathBuf,
    include: Vec<PathBuf>,
    versions: String,
}

/// The nvcc and CUTLASS headers `cutlass-gemm-sys` was built with (its discovery).
fn toolchain() -> Result<Toolchain, String> {
    if cutlass_gemm::sys::NVCC.is_empty() {
        return Err(
            "this build used no CUDA toolchain (CUTLASS_RS_KERNELS=none?): the census \
                    compiles with the nvcc cutlass-gemm-sys found"
                .into(),
        );
    }
    let nvcc = PathBuf::from(cutlass_gemm::sys::NVCC);
    let cutlass_include = PathBuf::from(cutlass_gemm::sys::CUTLASS_INCLUDE_DIR);
    let cutlass = cutlass_include
        .parent()
        .unwrap_or(&cutlass_include)
        .to_path_buf();
    let out = Command::new(&nvcc)
        .arg("--version")
        .output()
        .map_err(|e| e.to_string())?;
    let nv = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or("")
        .to_string();
    let vh = std::fs::read_to_string(cutlass.join("include/cutlass/version.h"))
        .map_err(|e| e.to_string())?;
    let num = |k: &str| {
        vh.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("#define {k} ")))
            .unwrap_or("?")
            .trim()
            .to_string()
    };
    Ok(Toolchain {
        nvcc,
        include: vec![cutlass.join("include"), cutlass.join("tools/util/include")],
        versions: format!(
            "# nvcc {nv}; CUTLASS {}.{}.{}",
            num("CUTLASS_MAJOR"),
            num("CUTLASS_MINOR"),
            num("CUTLASS_PATCH")
        ),
    })
}

/// The coverage set (`--coverage`): each type row in each of its layouts at one valid tile, each
/// tile row in one allowed layout, a representative SM90 set per type, and the entries with a
/// block-scaled output.
fn coverage() -> Vec<KernelSpec> {
    let all = catalog::sm1xx();
    let mut picked: Vec<KernelSpec> = Vec::new();
    let mut seen = HashSet::new();
    for s in &all {
        let o = s.origin.unwrap();
        // One per (type row, layout), preferring the first (smallest) tile of the first table.
        if seen.insert(("type", o.type_table, o.type_row, s.layout_name(), s.arch)) {
            picked.push(*s);
        }
    }
    for s in &all {
        let o = s.origin.unwrap();
        let key = (
            "tile",
            o.tile_table,
            s.tile[0] as u8,
            format!("{}x{}x{}", s.tile[0], s.tile[1], s.tile[2]),
            s.arch,
        );
        // A tile row is its table, tile, density and policy (1SM and 2SM rows can share a
        // tile shape).
        let sparse = s.op_class.is_sparse();
        let policy = s.kernel_schedule.policy();
        if picked.iter().any(|p| {
            p.origin.unwrap().tile_table == o.tile_table
                && p.tile == s.tile
                && p.op_class.is_sparse() == sparse
                && p.kernel_schedule.policy() == policy
        }) {
            continue;
        }
        if seen.insert((policy, key.1, sparse as u8, key.3, s.arch)) {
            picked.push(*s);
        }
    }
    let mut out: Vec<KernelSpec> = catalog::sm90()
        .into_iter()
        .filter(catalog::is_default)
        .collect();
    // A representative SM90 set per type: every (A, B, scaling) pair with each of its
    // schedules and each of its layouts, and each output type of a type family once.
    let mut seen90 = HashSet::new();
    for s in catalog::sm90() {
        let pair = format!("{}/{}", s.operand_label(false), s.operand_label(true));
        let family = match s.a.ty {
            DataType::E4M3 | DataType::E5M2 => {
                format!("fp8 blockwise={}", s.blockwise.is_some())
            }
            t => t.short_name().to_string(),
        };
        let keys = [
            format!("{pair} {}", s.kernel_schedule.policy()),
            format!("{pair} {}", s.layout_name()),
            format!("{family} -> {}", s.d.ty.short_name()),
        ];
        let new = keys.iter().filter(|k| !seen90.contains(*k)).count() > 0;
        for k in keys {
            seen90.insert(k);
        }
        if new && !out.contains(&s) {
            out.push(s);
        }
    }
    out.extend(picked);
    // The entries with a block-scaled output (the Blackwell narrow-precision walkthrough among them).
    out.extend(catalog::sm100_block_scaled_outputs());
    out
}

/// MMA instructions in PTX: each distinct opcode (up to the first space or tab).
fn mma_instructions(ptx: &str) -> Vec<String> {
    let mut set = BTreeSet::new();
    for line in ptx.lines() {
        let t = line.trim_start();
        let t = t
            .strip_prefix('@')
            .map(|r| r.split_once(' ').map_or(r, |x| x.1).trim_start())
            .unwrap_or(t);
        if t.starts_with("tcgen05.mma")
            || t.starts_with("wgmma.mma_async")
            || t.starts_with("mma.sync")
        {
            if let Some(op) = t.split([' ', '\t']).next() {
                set.insert(op.trim_end_matches(';').to_string());
            }
        }
    }
    set.into_iter().collect()
}

/// Whether the instructions found match what the tables imply (kind, CTA group, scale vector).
fn kind_ok(spec: &KernelSpec, found: &[String]) -> bool {
    let want = catalog::expected_mma(spec);
    // Scale-vector size: explicit (`block16`/`scale_vec::4X` for 16 elements per scale,
    // `block32`/`scale_vec::1X`/`2X` for 32), or implied: `kind::mxf8f6f4` and `kind::mxf4`
    // take one ue8m0 per 32 elements when no qualifier is written (PTX ISA, tcgen05.mma / mma).
    let vec_ok = |op: &str| {
        let explicit =
            op.contains("block16") || op.contains("block32") || op.contains("scale_vec::");
        match spec.block_scale {
            Some(bs) if bs.vec == 16 => op.contains("block16") || op.contains("scale_vec::4X"),
            Some(_) if explicit => {
                op.contains("block32")
                    || op.contains("scale_vec::1X")
                    || op.contains("scale_vec::2X")
            }
            Some(_) => op.contains("kind::mxf8f6f4") || op.contains("kind::mxf4."),
            None => !op.contains("block_scale"),
        }
    };
    let alts: Vec<String> = if want.contains('|') {
        // "mxf4|mxf4nvf4": either kind.
        let (head, kinds) = want.rsplit_once("kind::").unwrap();
        kinds
            .split('|')
            .map(|k| format!("{head}kind::{k}"))
            .collect()
    } else {
        vec![want]
    };
    let matches = |op: &str, w: &str| {
        if w.contains('*') {
            catalog::glob_match(w.as_bytes(), op.as_bytes())
        } else {
            op.starts_with(w)
        }
    };
    found
        .iter()
        .any(|op| alts.iter().any(|w| matches(op, w)) && vec_ok(op))
}

fn compile(tc: &Toolchain, dir: &Path, spec: &KernelSpec) -> (String, f64, String, String) {
    let name = spec.name();
    let started = Instant::now();
    let source = match codegen::kernel_source(spec) {
        Ok(s) => s,
        Err(e) => return ("fail".into(), 0.0, format!("codegen: {e}"), "0".into()),
    };
    let cu = dir.join(format!("{name}.cu"));
    let ptx = dir.join(format!("{name}.ptx"));
    if let Err(e) = std::fs::write(&cu, source) {
        return ("fail".into(), 0.0, format!("write: {e}"), "0".into());
    }
    let arch = match spec.arch {
        Arch::Sm90a => "sm_90a",
        Arch::Sm100a => "sm_100a",
        _ => "sm_120a",
    };
    let mut cmd = Command::new(&tc.nvcc);
    cmd.args([
        "-std=c++17",
        "-O3",
        "-DNDEBUG",
        "--expt-relaxed-constexpr",
        "--ptx",
        &format!("-arch={arch}"),
    ]);
    for i in &tc.include {
        cmd.arg("-I").arg(i);
    }
    cmd.arg("-I")
        .arg(dir)
        .arg("-I")
        .arg(cutlass_gemm::sys::CSRC_DIR)
        .arg(&cu)
        .arg("-o")
        .arg(&ptx);
    let out = cmd.output();
    let secs = started.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&cu);
    match out {
        Ok(o) if o.status.success() => {
            let text = std::fs::read_to_string(&ptx).unwrap_or_default();
            let _ = std::fs::remove_file(&ptx);
            let found = mma_instructions(&text);
            let ok = kind_ok(spec, &found);
            let list = if found.is_empty() {
                "-".to_string()
            } else {
                found.join(",")
            };
            ("pass".into(), secs, list, if ok { "1" } else { "0" }.into())
        }
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let first = err
                .lines()
                .find(|l| l.contains("error"))
                .unwrap_or("nvcc failed")
                .replace('\t', " ");
            (
                "fail".into(),
                secs,
                first.chars().take(300).collect(),
                "0".into(),
            )
        }
        Err(e) => ("fail".into(), secs, format!("nvcc: {e}"), "0".into()),
    }
}

/// The repository's census file, `cutlass-gemm-catalog/census.tsv`.
fn default_census_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../cutlass-gemm-catalog/census.tsv")
}

/// The census file's layout: tab-separated, no quoting (nvcc messages keep their quotes), rows
/// of different lengths (the `#` line has one field).
fn tsv_reader() -> csv::ReaderBuilder {
    let mut b = csv::ReaderBuilder::new();
    b.delimiter(b'\t')
        .quoting(false)
        .flexible(true)
        .has_headers(false);
    b
}

fn tsv_writer() -> csv::WriterBuilder {
    let mut b = csv::WriterBuilder::new();
    b.delimiter(b'\t')
        .quote_style(csv::QuoteStyle::Never)
        .flexible(true)
        .has_headers(false);
    b
}

/// The names already in the census file (none if it does not exist).
fn done_entries(path: &Path) -> HashSet<String> {
    let Ok(mut reader) = tsv_reader().comment(Some(b'#')).from_path(path) else {
        return HashSet::new();
    };
    reader
        .records()
        .map_while(Result::ok)
        .filter_map(|r| r.get(0).map(str::to_owned))
        .filter(|name| name != HEADER[0])
        .collect()
}

/// Recomputes `kind_ok` of every row from its recorded instructions (no compilation); other
/// lines stay as they are.
fn recheck_file(path: &Path) -> ExitCode {
    match recheck(path) {
        Ok(changed) => {
            eprintln!(
                "census: rechecked {}, {changed} kind_ok values changed",
                path.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cutlass-profiler census: {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}

fn recheck(path: &Path) -> Result<usize, csv::Error> {
    let records = tsv_reader()
        .from_path(path)?
        .into_records()
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = tsv_writer().from_writer(Vec::new());
    let mut changed = 0;
    for mut r in records {
        let spec = if r.len() == 5 && &r[1] == "pass" {
            catalog::find(&r[0])
        } else {
            None
        };
        if let Some(spec) = spec {
            let found: Vec<String> = r[3].split(',').map(str::to_owned).collect();
            let ok = if kind_ok(&spec, &found) { "1" } else { "0" };
            changed += usize::from(ok != &r[4]);
            r = r.iter().take(4).chain([ok]).collect();
        }
        out.write_record(&r)?;
    }
    let bytes = out.into_inner().map_err(|e| e.into_error())?;
    std::fs::write(path, bytes)?;
    Ok(changed)
}

pub fn main(args: &CensusArgs) -> ExitCode {
    let out_path = args.out.clone().unwrap_or_else(default_census_file);
    if args.recheck {
        return recheck_file(&out_path);
    }
    let jobs = args.jobs.clamp(1, 8);
    let tc = match toolchain() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("cutlass-profiler census: {e}");
            return ExitCode::FAILURE;
        }
    };
    let candidates = if args.coverage {
        coverage()
    } else {
        catalog::all()
    };
    let done = done_entries(&out_path);
    let mut selected: Vec<KernelSpec> = candidates
        .into_iter()
        .filter(|s| args.filter.is_empty() || args.filter.matches(&s.name()))
        .collect();
    let total = selected.len();
    let todo: Vec<KernelSpec> = match args.sample {
        Some(n) => {
            use rand::seq::SliceRandom;
            use rand::SeedableRng;
            let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
            let (picked, _) = selected.partial_shuffle(&mut rng, n);
            picked.to_vec()
        }
        None => selected
            .into_iter()
            .filter(|s| !done.contains(&s.name()))
            .take(args.limit.unwrap_or(usize::MAX))
            .collect(),
    };
    let fresh = !out_path.is_file();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out_path);
    let Ok(file) = file else {
        eprintln!(
            "cutlass-profiler census: cannot open {}",
            out_path.display()
        );
        return ExitCode::FAILURE;
    };
    let mut writer = tsv_writer().from_writer(file);
    if fresh {
        let _ = writer.write_record([&tc.versions]);
        let _ = writer.write_record(HEADER);
        let _ = writer.flush();
    }
    eprintln!(
        "census: {total} selected, {} to compile now ({} entries already in {}), {jobs} jobs",
        todo.len(),
        done.len(),
        out_path.display()
    );
    let dir = std::env::temp_dir().join(format!("cutlass-census-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let progress = ProgressBar::new(todo.len() as u64).with_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] [{bar:30}] {pos}/{len} compiled",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("#>-"),
    );
    progress.enable_steady_tick(std::time::Duration::from_millis(200));
    let next = AtomicUsize::new(0);
    let writer = Mutex::new(writer);
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(todo.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(spec) = todo.get(i) else { break };
                let (status, secs, mma, ok) = compile(&tc, &dir, spec);
                let record = [spec.name(), status, format!("{secs:.0}"), mma, ok];
                progress.suspend(|| eprintln!("[{}/{}] {}", i + 1, todo.len(), record.join("\t")));
                progress.inc(1);
                let mut w = writer.lock().unwrap();
                let _ = w.write_record(&record);
                let _ = w.flush();
            });
        }
    });
    progress.finish_and_clear();
    let _ = std::fs::remove_dir_all(&dir);
    ExitCode::SUCCESS
}
