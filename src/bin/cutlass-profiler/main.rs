//! `cutlass-profiler`: the kernel catalog from the command line (like cutlass_profiler's
//! enumerate mode).
//!
//! ```text
//! cutlass-profiler list [--format tsv|json|table] [--filter PATTERNS]
//! cutlass-profiler census [--coverage] [--filter PATTERNS] [--jobs N] [--limit N] [--out FILE]
//! cutlass-profiler census --recheck [--out FILE]
//! cutlass-profiler profile [--shapes FILE | --shape MxNxK,...] [--types bf16,f16,e4m3,fp8bw]
//!                          [--kernels heuristic|all|NAME] [--autotune CACHE] [--csv FILE]
//!                          [--svg PREFIX] [--rounds N] [--pdl on|off|both]
//! cutlass-profiler overhead [--shape MxNxK]
//! ```
//! `profile` times this crate's GEMMs against cuBLAS/cuBLASLt in the same process on
//! `../shared/bench/shapes.tsv` (or the given shapes), checks each result against the other
//! library's, and prints TFLOP/s, % of the roofline and the ratio (see `profile.rs`).
//! `census` compiles entries to PTX (nvcc `--ptx`, at most 2 jobs by default), finds the MMA
//! instructions in the PTX and checks them against the kind, CTA group and scale-vector size the
//! seed's tables imply. Results append to `kernels/census.tsv`; entries already there are skipped,
//! so a census resumes where it stopped. `--coverage` selects the issue's coverage set: every type
//! row in each of its layouts at one tile, and every tile row in one allowed layout.
//! PATTERNS: comma-separated name patterns, as `CUTLASS_RS_KERNELS` takes them (`*`/`?` globs over
//! the whole name, plain text as a substring).

use std::io::Write;
use std::process::ExitCode;

mod profile;

use cutlass_kernels::catalog::{self, NameFilter};
use cutlass_kernels::KernelSpec;

const USAGE: &str = "usage: cutlass-profiler list [--format tsv|json|table] [--filter PATTERNS]\n       cutlass-profiler census [--coverage] [--filter PATTERNS] [--jobs N] [--limit N] [--out FILE]\n       cutlass-profiler profile [--shapes FILE | --shape MxNxK] [--types bf16,f16,e4m3,fp8bw] [--kernels heuristic|all|NAME] [--autotune CACHE] [--csv FILE] [--svg PREFIX] [--rounds N] [--swizzle 1|2|4|8] [--raster 1|2] [--pdl on|off|both]";
const COLUMNS: [&str; 15] = [
    "name",
    "arch",
    "sparse",
    "a",
    "b",
    "layout",
    "align_a",
    "align_b",
    "tile",
    "sm",
    "policy",
    "kind",
    "type_table",
    "type_row",
    "tile_table",
];

fn fields(s: &KernelSpec) -> [String; 15] {
    let origin = |f: fn(&cutlass_kernels::spec::Origin) -> u8| {
        s.origin.map_or("-".to_string(), |o| f(&o).to_string())
    };
    [
        s.name(),
        format!("sm{}", s.arch.tag()),
        if s.op_class.is_sparse() { "1" } else { "0" }.into(),
        s.operand_label(false),
        s.operand_label(true),
        s.layout_name(),
        s.a.align.to_string(),
        s.b.align.to_string(),
        format!("{}x{}x{}", s.tile[0], s.tile[1], s.tile[2]),
        s.kernel_schedule.sms().to_string(),
        s.kernel_schedule.policy().to_string(),
        catalog::expected_mma(s),
        origin(|o| o.type_table),
        origin(|o| o.type_row),
        origin(|o| o.tile_table),
    ]
}

fn json_string(v: &str) -> String {
    let mut out = String::from("\"");
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("census") {
        return census::main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("profile") {
        return profile::main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("overhead") {
        return profile::overhead(&args[1..]);
    }
    if args.first().map(String::as_str) != Some("list") {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    let (mut format, mut filter) = ("table".to_string(), NameFilter::parse(""));
    let mut it = args[1..].iter();
    while let Some(a) = it.next() {
        match (a.as_str(), it.next()) {
            ("--format", Some(f)) if ["tsv", "json", "table"].contains(&f.as_str()) => {
                format = f.clone()
            }
            ("--filter", Some(p)) => filter = NameFilter::parse(p),
            _ => {
                eprintln!("{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let rows: Vec<[String; 15]> = catalog::all()
        .iter()
        .filter(|s| filter.is_empty() || filter.matches(&s.name()))
        .map(fields)
        .collect();
    let mut out = std::io::stdout().lock();
    let result = match format.as_str() {
        "tsv" => {
            let mut r = writeln!(out, "{}", COLUMNS.join("\t"));
            for row in &rows {
                r = r.and_then(|_| writeln!(out, "{}", row.join("\t")));
            }
            r
        }
        "json" => {
            let items: Vec<String> = rows
                .iter()
                .map(|row| {
                    let kv: Vec<String> = COLUMNS
                        .iter()
                        .zip(row)
                        .map(|(k, v)| {
                            let numeric = ["sparse", "align_a", "align_b", "sm"].contains(k)
                                || (["type_table", "type_row", "tile_table"].contains(k)
                                    && v != "-");
                            format!(
                                "{}: {}",
                                json_string(k),
                                if numeric { v.clone() } else { json_string(v) }
                            )
                        })
                        .collect();
                    format!("  {{{}}}", kv.join(", "))
                })
                .collect();
            writeln!(out, "[\n{}\n]", items.join(",\n"))
        }
        _ => {
            let widths: Vec<usize> = (1..15)
                .map(|i| {
                    rows.iter()
                        .map(|r| r[i].len())
                        .chain([COLUMNS[i].len()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let line = |r: &[String]| -> String {
                let cols: Vec<String> = (1..15)
                    .map(|i| format!("{:<w$}", r[i], w = widths[i - 1]))
                    .collect();
                format!("{}  {}", cols.join("  "), r[0])
            };
            let header: Vec<String> = COLUMNS.iter().map(|s| s.to_string()).collect();
            let mut r = writeln!(out, "{}", line(&header));
            for row in &rows {
                r = r.and_then(|_| writeln!(out, "{}", line(row)));
            }
            r.and_then(|_| writeln!(out, "{} entries", rows.len()))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cutlass-profiler: {e}");
            ExitCode::FAILURE
        }
    }
}

mod census {
    use std::collections::{BTreeSet, HashSet};
    use std::io::Write;
    use std::path::{Path, PathBuf};
    use std::process::{Command, ExitCode};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    use std::time::Instant;

    use cutlass_kernels::catalog::{self, NameFilter};
    use cutlass_kernels::codegen;
    use cutlass_kernels::{Arch, DataType, KernelSpec};

    const HEADER: &str = "name\tstatus\tseconds\tptx_mma\tkind_ok";

    struct Toolchain {
        nvcc: PathBuf,
        include: Vec<PathBuf>,
        versions: String,
    }

    fn toolchain() -> Result<Toolchain, String> {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let tc = root.join("third_party/toolchain");
        let cuda = std::env::var_os("CUDA_HOME")
            .or_else(|| std::env::var_os("CUDA_PATH"))
            .map(PathBuf::from)
            .unwrap_or_else(|| tc.join("nvidia/cu13"));
        let cutlass = std::env::var_os("CUTLASS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| tc.join("cutlass_library/source"));
        let nvcc = cuda.join("bin/nvcc");
        if !nvcc.is_file() {
            return Err(format!(
                "{} not found: run scripts/bootstrap.sh or set CUDA_HOME",
                nvcc.display()
            ));
        }
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

    /// The issue's coverage set: each type row in each of its layouts at one valid tile, each
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
        // The entries with a block-scaled output (the seed's walkthrough among them).
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
        // This crate's own mainloops' headers, beside the shared ones.
        for (header, text) in codegen::extra_headers(spec) {
            if let Err(e) = std::fs::write(dir.join(header), text) {
                return ("fail".into(), 0.0, format!("write: {e}"), "0".into());
            }
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
        cmd.arg("-I").arg(dir).arg(&cu).arg("-o").arg(&ptx);
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

    /// Recomputes `kind_ok` of every row from its recorded instructions (no compilation).
    fn recheck_file(path: &Path) -> ExitCode {
        let Ok(text) = std::fs::read_to_string(path) else {
            eprintln!("cutlass-profiler census: cannot read {}", path.display());
            return ExitCode::FAILURE;
        };
        let mut out = String::new();
        let mut changed = 0;
        for line in text.lines() {
            let cols: Vec<&str> = line.split('\t').collect();
            let spec = if cols.len() == 5 && cols[1] == "pass" {
                catalog::find(cols[0])
            } else {
                None
            };
            match spec {
                Some(spec) => {
                    let found: Vec<String> = cols[3].split(',').map(str::to_owned).collect();
                    let ok = if kind_ok(&spec, &found) { "1" } else { "0" };
                    changed += usize::from(ok != cols[4]);
                    out.push_str(&format!(
                        "{}\t{}\t{}\t{}\t{ok}\n",
                        cols[0], cols[1], cols[2], cols[3]
                    ));
                }
                None => {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        if std::fs::write(path, out).is_err() {
            return ExitCode::FAILURE;
        }
        eprintln!(
            "census: rechecked {}, {changed} kind_ok values changed",
            path.display()
        );
        ExitCode::SUCCESS
    }

    pub fn main(args: &[String]) -> ExitCode {
        let (mut filter, mut use_coverage, mut jobs, mut limit) =
            (NameFilter::parse(""), false, 2usize, usize::MAX);
        let mut recheck = false;
        let mut out_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kernels/census.tsv");
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--coverage" => use_coverage = true,
                "--filter" => {
                    filter = NameFilter::parse(it.next().map(String::as_str).unwrap_or(""))
                }
                "--jobs" => {
                    jobs = it
                        .next()
                        .and_then(|j| j.parse().ok())
                        .unwrap_or(2)
                        .clamp(1, 8)
                }
                "--limit" => limit = it.next().and_then(|j| j.parse().ok()).unwrap_or(usize::MAX),
                "--out" => out_path = it.next().map(PathBuf::from).unwrap_or(out_path),
                "--recheck" => recheck = true,
                _ => {
                    eprintln!("{}", super::USAGE);
                    return ExitCode::from(2);
                }
            }
        }
        if recheck {
            return recheck_file(&out_path);
        }
        let tc = match toolchain() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("cutlass-profiler census: {e}");
                return ExitCode::FAILURE;
            }
        };
        let candidates = if use_coverage {
            coverage()
        } else {
            catalog::all()
        };
        let done: HashSet<String> = std::fs::read_to_string(&out_path)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with("name\t"))
            .filter_map(|l| l.split('\t').next().map(str::to_owned))
            .collect();
        let selected: Vec<KernelSpec> = candidates
            .into_iter()
            .filter(|s| filter.is_empty() || filter.matches(&s.name()))
            .collect();
        let total = selected.len();
        let todo: Vec<KernelSpec> = selected
            .into_iter()
            .filter(|s| !done.contains(&s.name()))
            .take(limit)
            .collect();
        let fresh = !out_path.is_file();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out_path);
        let Ok(mut file) = file else {
            eprintln!(
                "cutlass-profiler census: cannot open {}",
                out_path.display()
            );
            return ExitCode::FAILURE;
        };
        if fresh {
            let _ = writeln!(file, "{}\n{HEADER}", tc.versions);
        }
        eprintln!(
            "census: {total} selected, {} to compile now ({} entries already in {}), {jobs} jobs",
            todo.len(),
            done.len(),
            out_path.display()
        );
        let dir = std::env::temp_dir().join(format!("cutlass-census-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join(codegen::SHIM_HEADER_NAME), codegen::SHIM_HEADER);
        let _ = std::fs::write(dir.join(codegen::ABI_HEADER_NAME), codegen::ABI_HEADER);
        let next = AtomicUsize::new(0);
        let file = Mutex::new(file);
        std::thread::scope(|scope| {
            for _ in 0..jobs.min(todo.len()) {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(spec) = todo.get(i) else { break };
                    let (status, secs, mma, ok) = compile(&tc, &dir, spec);
                    let line = format!("{}\t{status}\t{secs:.0}\t{mma}\t{ok}", spec.name());
                    eprintln!("[{}/{}] {line}", i + 1, todo.len());
                    let mut f = file.lock().unwrap();
                    let _ = writeln!(f, "{line}");
                    let _ = f.flush();
                });
            }
        });
        let _ = std::fs::remove_dir_all(&dir);
        ExitCode::SUCCESS
    }
}
