//! Build script of `cutlass-gemm-sys`: generates, compiles and links the selected CUTLASS kernels.
//!
//! Steps (see `main`): read the configuration (cargo features and the environment), select catalog
//! entries, find the CUDA compiler and the CUTLASS headers, render one `.cu` per kernel beside the
//! hand-written sources of `csrc/`, compile them with nvcc, several kernels per nvcc
//! (`codegen::translation_units`), through a content-addressed object cache, and archive them with
//! the kernel registry into a static library. The Rust declarations of the C header are checked in
//! (`src/bindings.rs`; `tests/bindings_fresh.rs` regenerates them with bindgen and compares), so
//! building needs no libclang.
//!
//! Which kernels: the cargo features (`bf16`, `f16`, `fp8`, `fp8-blockwise`, `tf32`, `i8`,
//! `sm100`, `sm120`; the first four by default) select kernel families of the catalog
//! (`cutlass_gemm_catalog::families`); `CUTLASS_RS_KERNELS` overrides them.
//!
//! Environment (each is watched with `rerun-if-env-changed`):
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `CUTLASS_RS_KERNELS` | kernel-name filter, comma-separated globs (like `CUTLASS_LIBRARY_KERNELS`) and presets (`default`, `gpu-tests`); `none` builds no kernel and needs no toolchain; entries CUTLASS 4.2 cannot build (`KernelSpec::cutlass_limit`) are skipped with a warning | the features' families |
//! | `CUTLASS_RS_ARCHS` | architectures, comma-separated: `90a`, `100a`, `120a` | `CUDA_COMPUTE_CAP` (90 → 90a, 100 → 100a, 120 → 120a), else the GPU `nvidia-smi` reports, else 90a; plus the archs of the `sm100`/`sm120` features and of presets |
//! | `NVCC` | the CUDA compiler | discovery: `CUDA_HOME`, `CUDA_PATH`, `CUDA_ROOT`, nvcc on `PATH`, `/usr/local/cuda`, `/opt/cuda`, the pip wheels of `python3`, this repository's `third_party/` |
//! | `CUTLASS_DIR` | CUTLASS 4.x: a checkout or the wheel's `source` folder (with `include/cutlass`) | the nvidia-cutlass wheel of `python3`, then the headers shipped in this package, then `third_party/` |
//! | `CUTLASS_RS_NVCC_JOBS` | parallel nvcc jobs (one needs 3–5 GB of memory for one kernel, up to 9 GB for six) | `2`, fewer where the available memory (`MemAvailable`, or the cgroup's limit) holds fewer, with a warning |
//! | `CUTLASS_RS_KERNELS_PER_NVCC` | kernels one nvcc compiles together (they share CUTLASS's headers and templates: six compile in about a third of the time they take one by one); `1` gives each kernel its own nvcc and cached object | `6` |
//! | `CUTLASS_RS_CACHE_DIR` | object cache | `$XDG_CACHE_HOME/cutlass-rs` or `~/.cache/cutlass-rs` |
//! | `CUTLASS_RS_NVCC_FLAGS` | extra nvcc flags, space-separated (part of the cache key) | none |
//! | `DOCS_RS` | set by docs.rs: compile nothing, need no toolchain | unset |

use std::collections::BTreeSet;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use cutlass_gemm_catalog::catalog::{self, NameFilter};
use cutlass_gemm_catalog::families::{self, Family};
use cutlass_gemm_catalog::{codegen, Arch, KernelSpec};
use sha2::{Digest, Sha256};

const ENV_VARS: &[&str] = &[
    "CUTLASS_RS_ARCHS",
    "CUTLASS_RS_KERNELS",
    "CUTLASS_RS_NVCC_JOBS",
    "CUTLASS_RS_KERNELS_PER_NVCC",
    "CUTLASS_RS_CACHE_DIR",
    "CUTLASS_RS_NVCC_FLAGS",
    "CUDA_COMPUTE_CAP",
    "NVCC",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_ROOT",
    "CUTLASS_DIR",
    "DOCS_RS",
    "XDG_CACHE_HOME",
    "HOME",
];

/// The pins of `scripts/toolchain-requirements.txt`, for the error that says how to get them.
const HOW_TO_GET_TOOLCHAIN: &str = "install the CUDA 13.0 compiler and CUTLASS 4.2 headers from PyPI \
     and build again:\n    python3 -m pip install nvidia-cuda-nvcc==13.0.88 nvidia-cuda-runtime==13.0.96 \
     nvidia-cuda-cccl==13.0.85 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 nvidia-cutlass==4.2.0.0\n\
     or point the build at a toolkit: NVCC=/path/to/cuda-13/bin/nvcc (or CUDA_HOME) and \
     CUTLASS_DIR=/path/to/cutlass; CUTLASS_RS_KERNELS=none builds the host-only parts without either";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=csrc");
    let config = Config::from_env();
    let specs = select_kernels(&config);
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let gen_dir = out.join("generated");
    fs::create_dir_all(&gen_dir).expect("create OUT_DIR/generated");

    // The toolchain compiles the selected GEMM kernels and the quantization kernels; a build
    // without kernels (CUTLASS_RS_KERNELS=none, no family feature, docs.rs) needs none.
    let toolchain = if config.no_kernels {
        None
    } else {
        Some(Toolchain::locate(&config))
    };
    let cutlass_version = toolchain.as_ref().map_or(0, |t| t.cutlass_version);

    let units = codegen::translation_units(&specs, config.kernels_per_nvcc);
    generate_sources(
        &gen_dir,
        &specs,
        &units,
        cutlass_version,
        toolchain.is_some(),
    );
    let objects = match &toolchain {
        Some(t) => compile_kernels(&config, t, &gen_dir, &units),
        None => Vec::new(),
    };
    if !config.docs_rs {
        build_library(&gen_dir, &objects, toolchain.as_ref());
    }
    export_paths(&gen_dir, &out, &config, &specs, toolchain.as_ref());
    write_build_report(&out, &config, &specs, toolchain.as_ref());
}

/// What the features and the environment ask for.
struct Config {
    archs: Vec<Arch>,
    selection: Selection,
    no_kernels: bool,
    docs_rs: bool,
    jobs: usize,
    /// `CUTLASS_RS_NVCC_JOBS` was set: run that many nvcc whatever the memory.
    jobs_from_env: bool,
    kernels_per_nvcc: usize,
    cache_dir: PathBuf,
    extra_nvcc_flags: Vec<String>,
    manifest_dir: PathBuf,
    workspace_root: PathBuf,
    /// Built from this project's repository (which `scripts/bootstrap.sh` equips), not a package.
    in_repository: bool,
}

/// Which entries to build: the families of the enabled features, or `CUTLASS_RS_KERNELS`.
enum Selection {
    Families(Vec<Family>),
    Filter(NameFilter),
}

fn var(key: &str) -> Option<String> {
    env::var(key).ok().filter(|s| !s.trim().is_empty())
}

/// A positive integer from the environment, or the default when the variable is unset.
fn positive(key: &str, default: usize) -> usize {
    match var(key) {
        None => default,
        Some(s) => s
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&j| j > 0)
            .unwrap_or_else(|| fail(&format!("{key}: `{s}` is not a positive integer"))),
    }
}

impl Config {
    fn from_env() -> Config {
        for v in ENV_VARS {
            println!("cargo:rerun-if-env-changed={v}");
        }
        let docs_rs = var("DOCS_RS").is_some();
        let kernels = var("CUTLASS_RS_KERNELS");
        let selection = match &kernels {
            Some(k) => Selection::Filter(NameFilter::parse(k)),
            None => Selection::Families(
                Family::ALL
                    .into_iter()
                    .filter(|f| {
                        let feature = f.feature().to_ascii_uppercase().replace('-', "_");
                        env::var_os(format!("CARGO_FEATURE_{feature}")).is_some()
                    })
                    .collect(),
            ),
        };
        let no_kernels = docs_rs
            || kernels.as_deref().map(str::trim) == Some("none")
            || matches!(&selection, Selection::Families(f) if f.is_empty());
        if !docs_rs && matches!(&selection, Selection::Families(f) if f.is_empty()) {
            println!(
                "cargo:warning=cutlass-gemm-sys: no kernel family feature is enabled (bf16, f16, fp8, \
                 fp8-blockwise, tf32, i8, sm100, sm120) and CUTLASS_RS_KERNELS is unset: building \
                 without kernels"
            );
        }
        let jobs = positive("CUTLASS_RS_NVCC_JOBS", 2);
        let kernels_per_nvcc = positive("CUTLASS_RS_KERNELS_PER_NVCC", 6);
        let cache_dir = var("CUTLASS_RS_CACHE_DIR")
            .map(PathBuf::from)
            .or_else(|| var("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("cutlass-rs")))
            .or_else(|| var("HOME").map(|d| PathBuf::from(d).join(".cache").join("cutlass-rs")))
            .unwrap_or_else(|| PathBuf::from(env::var("OUT_DIR").unwrap()).join("object-cache"));
        let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
        let archs = if no_kernels {
            Vec::new()
        } else {
            architectures(&selection)
        };
        Config {
            archs,
            selection,
            no_kernels,
            docs_rs,
            jobs,
            jobs_from_env: var("CUTLASS_RS_NVCC_JOBS").is_some(),
            kernels_per_nvcc,
            cache_dir,
            extra_nvcc_flags: var("CUTLASS_RS_NVCC_FLAGS")
                .map(|s| s.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default(),
            workspace_root: manifest_dir.parent().unwrap_or(&manifest_dir).to_path_buf(),
            in_repository: manifest_dir
                .parent()
                .is_some_and(|root| root.join("scripts/bootstrap.sh").is_file()),
            manifest_dir,
        }
    }
}

/// The architectures to build: `CUTLASS_RS_ARCHS` as given; otherwise the one `CUDA_COMPUTE_CAP`
/// names, or the first GPU's (nvidia-smi), or 90a, joined with the architectures of the selected
/// `sm100`/`sm120` families and of presets.
fn architectures(selection: &Selection) -> Vec<Arch> {
    let parse_list = |s: &str, from: &str| -> Vec<Arch> {
        s.split(',')
            .filter(|t| !t.trim().is_empty())
            .map(|t| {
                Arch::parse(t).unwrap_or_else(|| {
                    fail(&format!(
                        "{from}: unknown architecture `{t}`; use 90a, 100a or 120a"
                    ))
                })
            })
            .collect()
    };
    if let Some(s) = var("CUTLASS_RS_ARCHS") {
        return parse_list(&s, "CUTLASS_RS_ARCHS");
    }
    let mut archs = BTreeSet::new();
    let (found, source) = match var("CUDA_COMPUTE_CAP") {
        Some(cc) => (Some(cc), "CUDA_COMPUTE_CAP"),
        None => (nvidia_smi_compute_capability(), "nvidia-smi"),
    };
    match found {
        Some(cc) => match Arch::parse(&cc.replace('.', "")) {
            Some(a) => {
                archs.insert(a);
            }
            None => {
                println!(
                    "cargo:warning=cutlass-gemm-sys: {source} reports compute capability {cc}, for \
                     which the catalog has no kernels; building for 90a (Hopper). Set \
                     CUTLASS_RS_ARCHS to choose"
                );
                archs.insert(Arch::Sm90a);
            }
        },
        None => {
            archs.insert(Arch::Sm90a);
        }
    }
    match selection {
        Selection::Families(fams) => archs.extend(
            fams.iter()
                .filter(|f| matches!(f, Family::Sm100 | Family::Sm120))
                .map(|f| f.arch()),
        ),
        Selection::Filter(filter) => archs.extend(
            filter
                .presets()
                .iter()
                .flat_map(|p| p.archs().iter().copied()),
        ),
    }
    archs.into_iter().collect()
}

/// The compute capability of the first GPU, as `nvidia-smi` reports it (`9.0`), if it runs.
fn nvidia_smi_compute_capability() -> Option<String> {
    let out = Command::new("nvidia-smi")
        .args(["--query-gpu=compute_cap", "--format=csv,noheader"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next()?.trim().to_string();
    (out.status.success() && !first.is_empty()).then_some(first)
}

/// Step 1: the catalog entries to build.
fn select_kernels(config: &Config) -> Vec<KernelSpec> {
    if config.no_kernels {
        return Vec::new();
    }
    let mut specs = match &config.selection {
        Selection::Families(f) => families::select_families(&config.archs, f),
        Selection::Filter(filter) => catalog::select(&config.archs, filter),
    };
    // Entries CUTLASS 4.2 refuses to compile are skipped with the assertion that refuses them,
    // instead of failing in nvcc.
    let (limited, buildable): (Vec<KernelSpec>, Vec<KernelSpec>) =
        specs.into_iter().partition(|s| s.cutlass_limit().is_some());
    for s in limited.iter().take(8) {
        println!(
            "cargo:warning=cutlass-gemm-sys: skipping {}: {}",
            s.name(),
            s.cutlass_limit().expect("partitioned on it")
        );
    }
    if limited.len() > 8 {
        println!(
            "cargo:warning=cutlass-gemm-sys: skipping {} more entries that CUTLASS 4.2 cannot build \
             (`cutlass-profiler list` marks them)",
            limited.len() - 8
        );
    }
    specs = buildable;
    for s in &specs {
        if let Err(e) = s.validate() {
            fail(&format!("selected kernel cannot be built: {e}"));
        }
    }
    let archs: Vec<&str> = config.archs.iter().map(|a| a.tag()).collect();
    if specs.is_empty() {
        let what = match &config.selection {
            Selection::Families(f) => format!(
                "the features {}",
                f.iter().map(|f| f.feature()).collect::<Vec<_>>().join(", ")
            ),
            Selection::Filter(_) => "CUTLASS_RS_KERNELS".to_string(),
        };
        println!(
            "cargo:warning=cutlass-gemm-sys: {what} select no kernel for the architectures {archs:?} \
             (the SM90 families build for 90a; the features sm100 and sm120 build Blackwell kernels); \
             building without kernels"
        );
    }
    specs
}

/// A place discovery looked, and what it found there.
struct Tried {
    place: String,
    outcome: String,
}

/// The CUDA compiler and the CUTLASS headers.
struct Toolchain {
    nvcc: PathBuf,
    cuda_root: PathBuf,
    cuda_lib: PathBuf,
    cutlass_include: Vec<PathBuf>,
    nvcc_version: String,
    cutlass_version: u32,
    cutlass_version_h: String,
    found_by: String,
}

impl Toolchain {
    fn locate(config: &Config) -> Toolchain {
        let python = PythonPackages::query();
        let (nvcc, cuda_root, cuda_lib, cuda_by) = locate_cuda(config, &python);
        let (cutlass, cutlass_by) = locate_cutlass(config, &python);
        let version_h = cutlass.join("include").join("cutlass").join("version.h");
        let cutlass_version_h = fs::read_to_string(&version_h)
            .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", version_h.display())));
        let num = |key: &str| -> u32 {
            cutlass_version_h
                .lines()
                .find_map(|l| l.trim().strip_prefix(&format!("#define {key} ")))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| fail(&format!("{key} not found in {}", version_h.display())))
        };
        let cutlass_version =
            num("CUTLASS_MAJOR") * 10000 + num("CUTLASS_MINOR") * 100 + num("CUTLASS_PATCH");
        if cutlass_version < 40000 {
            fail(&format!(
                "CUTLASS {cutlass_version} at {} ({cutlass_by}) is too old: CUTLASS 4.x is needed; {HOW_TO_GET_TOOLCHAIN}",
                cutlass.display()
            ));
        }
        let output = Command::new(&nvcc)
            .arg("--version")
            .output()
            .unwrap_or_else(|e| fail(&format!("cannot run {}: {e}", nvcc.display())));
        let nvcc_version = String::from_utf8_lossy(&output.stdout).trim().to_string();
        if !nvcc_version.contains("release 13.") {
            println!(
                "cargo:warning=cutlass-gemm-sys: nvcc at {} is not CUDA 13 ({}); the kernels may not \
                 load with a CUDA 13.0 driver",
                nvcc.display(),
                nvcc_version.lines().last().unwrap_or("")
            );
        }
        println!("cargo:rerun-if-changed={}", nvcc.display());
        println!("cargo:rerun-if-changed={}", version_h.display());
        Toolchain {
            nvcc,
            cuda_root,
            cuda_lib,
            cutlass_include: vec![
                cutlass.join("include"),
                cutlass.join("tools").join("util").join("include"),
            ],
            nvcc_version,
            cutlass_version,
            cutlass_version_h,
            found_by: format!("CUDA from {cuda_by}, CUTLASS from {cutlass_by}"),
        }
    }
}

/// Where the active `python3` has the nvidia wheels (`nvidia/`) and `cutlass_library`.
#[derive(Default)]
struct PythonPackages {
    nvidia: Vec<PathBuf>,
    cutlass_library: Option<PathBuf>,
    error: Option<String>,
}

impl PythonPackages {
    /// Asks `python3` where the packages are, without importing them.
    fn query() -> PythonPackages {
        const SCRIPT: &str = "import importlib.util as u\n\
            for name in ('nvidia', 'cutlass_library'):\n\
            \x20   try:\n\
            \x20       s = u.find_spec(name)\n\
            \x20   except Exception:\n\
            \x20       s = None\n\
            \x20   for p in (list(s.submodule_search_locations or []) if s else []):\n\
            \x20       print(name + '\\t' + p)\n";
        match Command::new("python3").args(["-c", SCRIPT]).output() {
            Err(e) => PythonPackages {
                error: Some(format!("python3 did not run: {e}")),
                ..Default::default()
            },
            Ok(out) => {
                let mut p = PythonPackages::default();
                for line in String::from_utf8_lossy(&out.stdout).lines() {
                    match line.split_once('\t') {
                        Some(("nvidia", dir)) => p.nvidia.push(PathBuf::from(dir)),
                        Some(("cutlass_library", dir)) if p.cutlass_library.is_none() => {
                            p.cutlass_library = Some(PathBuf::from(dir))
                        }
                        _ => {}
                    }
                }
                if !out.status.success() {
                    p.error = Some(format!("python3 failed ({})", out.status));
                }
                p
            }
        }
    }
}

/// A CUDA toolkit root's library folder with the static runtime, if it has one.
fn cuda_lib_dir(root: &Path) -> Option<PathBuf> {
    [
        "lib",
        "lib64",
        "targets/x86_64-linux/lib",
        "targets/sbsa-linux/lib",
    ]
    .iter()
    .map(|d| root.join(d))
    .find(|d| d.join("libcudart_static.a").is_file())
}

/// The CUDA toolkit: nvcc, its root, and the folder with `libcudart_static.a`.
fn locate_cuda(config: &Config, python: &PythonPackages) -> (PathBuf, PathBuf, PathBuf, String) {
    let mut tried: Vec<Tried> = Vec::new();
    // A root is usable when it has bin/nvcc and the static runtime.
    let check = |root: &Path, place: String, tried: &mut Vec<Tried>| {
        let nvcc = root.join("bin").join("nvcc");
        if !nvcc.is_file() {
            tried.push(Tried {
                place,
                outcome: format!("no {}", nvcc.display()),
            });
            return None;
        }
        match cuda_lib_dir(root) {
            Some(lib) => Some((nvcc, root.to_path_buf(), lib, place)),
            None => {
                tried.push(Tried {
                    place,
                    outcome: format!(
                        "{} has no libcudart_static.a (install nvidia-cuda-runtime)",
                        root.display()
                    ),
                });
                None
            }
        }
    };
    // Variables the user set must work: a wrong one is an error, not a reason to look elsewhere.
    if let Some(nvcc) = var("NVCC") {
        let nvcc = PathBuf::from(nvcc);
        let root = fs::canonicalize(&nvcc)
            .ok()
            .and_then(|p| p.parent().and_then(Path::parent).map(Path::to_path_buf));
        return root
            .and_then(|r| check(&r, format!("NVCC={}", nvcc.display()), &mut tried))
            .unwrap_or_else(|| fail_discovery("CUDA compiler", &tried, "NVCC"));
    }
    for key in ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"] {
        if let Some(dir) = var(key) {
            return check(Path::new(&dir), format!("{key}={dir}"), &mut tried)
                .unwrap_or_else(|| fail_discovery("CUDA compiler", &tried, key));
        }
    }
    let mut candidates: Vec<(PathBuf, String)> = Vec::new();
    println!("cargo:rerun-if-env-changed=PATH");
    match env::var_os("PATH").and_then(|p| {
        env::split_paths(&p)
            .map(|d| d.join("nvcc"))
            .find(|n| n.is_file())
    }) {
        Some(nvcc) => {
            let real = fs::canonicalize(&nvcc).unwrap_or(nvcc.clone());
            if let Some(root) = real.parent().and_then(Path::parent) {
                candidates.push((
                    root.to_path_buf(),
                    format!("nvcc on PATH ({})", nvcc.display()),
                ));
            }
        }
        None => tried.push(Tried {
            place: "PATH".into(),
            outcome: "no nvcc on PATH".into(),
        }),
    }
    for dir in ["/usr/local/cuda", "/opt/cuda"] {
        candidates.push((PathBuf::from(dir), dir.to_string()));
    }
    if python.nvidia.is_empty() {
        tried.push(Tried {
            place: "python3's nvidia wheels".into(),
            outcome: python
                .error
                .clone()
                .unwrap_or_else(|| "python3 has no `nvidia` package (nvidia-cuda-nvcc)".into()),
        });
    }
    for dir in &python.nvidia {
        candidates.push((
            dir.join("cu13"),
            format!("python3's nvidia wheels ({})", dir.display()),
        ));
    }
    if config.in_repository {
        candidates.push((
            config
                .workspace_root
                .join("third_party/toolchain/nvidia/cu13"),
            "this repository's third_party/ (scripts/bootstrap.sh)".into(),
        ));
    }
    for (root, place) in candidates {
        if let Some(found) = check(&root, place, &mut tried) {
            return found;
        }
    }
    fail_discovery("CUDA compiler", &tried, "NVCC")
}

/// The CUTLASS source folder (with `include/cutlass/version.h`).
fn locate_cutlass(config: &Config, python: &PythonPackages) -> (PathBuf, String) {
    let mut tried: Vec<Tried> = Vec::new();
    let check = |dir: &Path, place: String, tried: &mut Vec<Tried>| {
        let version_h = dir.join("include/cutlass/version.h");
        if version_h.is_file() {
            Some((dir.to_path_buf(), place))
        } else {
            tried.push(Tried {
                place,
                outcome: format!("no {}", version_h.display()),
            });
            None
        }
    };
    if let Some(dir) = var("CUTLASS_DIR") {
        return check(Path::new(&dir), format!("CUTLASS_DIR={dir}"), &mut tried)
            .unwrap_or_else(|| fail_discovery("CUTLASS headers", &tried, "CUTLASS_DIR"));
    }
    let mut candidates: Vec<(PathBuf, String)> = Vec::new();
    match &python.cutlass_library {
        Some(dir) => candidates.push((
            dir.join("source"),
            format!("python3's nvidia-cutlass wheel ({})", dir.display()),
        )),
        None => tried.push(Tried {
            place: "python3's nvidia-cutlass wheel".into(),
            outcome: python
                .error
                .clone()
                .unwrap_or_else(|| "python3 has no `cutlass_library` package".into()),
        }),
    }
    candidates.push((
        config.manifest_dir.join("cutlass"),
        "the headers shipped in this package".into(),
    ));
    if config.in_repository {
        candidates.push((
            config
                .workspace_root
                .join("third_party/toolchain/cutlass_library/source"),
            "this repository's third_party/ (scripts/bootstrap.sh)".into(),
        ));
    }
    for (dir, place) in candidates {
        if let Some(found) = check(&dir, place, &mut tried) {
            return found;
        }
    }
    fail_discovery("CUTLASS headers", &tried, "CUTLASS_DIR")
}

fn fail_discovery(what: &str, tried: &[Tried], variable: &str) -> ! {
    let list: Vec<String> = tried
        .iter()
        .map(|t| format!("  - {}: {}", t.place, t.outcome))
        .collect();
    fail(&format!(
        "no {what} found ({variable} names one). Tried, in order:\n{}\nTo fix: {HOW_TO_GET_TOOLCHAIN}",
        list.join("\n")
    ))
}

/// The hand-written C++/CUDA sources of `csrc/` (headers the generated sources include, and the
/// quantization and staging kernels).
fn csrc(config: &Config, name: &str) -> String {
    let path = config.manifest_dir.join("csrc").join(name);
    fs::read_to_string(&path)
        .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", path.display())))
}

/// Step 2: the header, one `.cu` per kernel and one per translation unit of several kernels, the
/// registry, and the hand-written sources beside them.
fn generate_sources(
    gen_dir: &Path,
    specs: &[KernelSpec],
    units: &[codegen::TranslationUnit],
    cutlass_version: u32,
    with_cuda: bool,
) {
    let ok = |r: Result<String, String>| r.unwrap_or_else(|e| fail(&format!("codegen: {e}")));
    let csrc_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("csrc");
    let entries = fs::read_dir(&csrc_dir)
        .unwrap_or_else(|e| fail(&format!("cannot list {}: {e}", csrc_dir.display())));
    for entry in entries.flatten() {
        let path = entry.path();
        let text = fs::read_to_string(&path)
            .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", path.display())));
        write_if_changed(&gen_dir.join(entry.file_name()), &text);
    }
    write_if_changed(
        &gen_dir.join(codegen::HEADER_NAME),
        &ok(codegen::header(specs)),
    );
    write_if_changed(
        &gen_dir.join("registry.cc"),
        &ok(codegen::registry(specs, cutlass_version, with_cuda)),
    );
    for s in specs {
        write_if_changed(
            &gen_dir.join(format!("{}.cu", s.name())),
            &ok(codegen::kernel_source(s)),
        );
    }
    for u in units.iter().filter(|u| u.kernels.len() > 1) {
        write_if_changed(&gen_dir.join(u.file_name()), &u.source());
    }
}

/// nvcc flags that do not name a path (the cache key covers them), for these architectures.
fn nvcc_flags(config: &Config, archs: &[Arch]) -> Vec<String> {
    let mut f: Vec<String> = [
        "-std=c++17",
        "-O3",
        "-DNDEBUG",
        "--expt-relaxed-constexpr",
        "-Xcompiler=-fPIC",
        "-Xcompiler=-Wno-psabi",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for a in archs {
        f.push(format!("-gencode={}", a.gencode()));
    }
    f.extend(config.extra_nvcc_flags.iter().cloned());
    f
}

/// Memory one nvcc needs at most, in MB, by the number of generated kernels it compiles: an upper
/// bound of what CUDA 13.0 and CUTLASS 4.2 took here (3–5 GB for one kernel, 4.9 GB for three,
/// 6.8–8.7 GB for six).
fn nvcc_memory_mb(kernels: usize) -> u64 {
    5_000 + 800 * kernels.saturating_sub(1) as u64
}

/// How many nvcc to run at once: `CUTLASS_RS_NVCC_JOBS` when set; otherwise its default, lowered
/// (with a warning) to what the memory available now holds, so that a machine with little memory
/// builds more slowly instead of running out of it. The units stay as they are, so the cached
/// objects do not depend on the machine. Warns, whatever the count, where even one nvcc may not
/// fit.
fn parallel_jobs(config: &Config, largest_unit: usize) -> usize {
    let Some(available) = available_memory_mb() else {
        return config.jobs;
    };
    let need = nvcc_memory_mb(largest_unit);
    let fits = usize::try_from(available / need).unwrap_or(usize::MAX);
    let smaller = if largest_unit > 1 {
        format!(
            "; CUTLASS_RS_KERNELS_PER_NVCC={} needs about {} MB per nvcc",
            largest_unit.div_ceil(2),
            nvcc_memory_mb(largest_unit.div_ceil(2))
        )
    } else {
        String::new()
    };
    if fits == 0 {
        println!(
            "cargo:warning=cutlass-gemm-sys: {available} MB of memory available, and one nvcc \
             of {largest_unit} kernel(s) may need up to {need} MB: it may run out of memory{smaller}"
        );
    }
    let jobs = if config.jobs_from_env {
        config.jobs
    } else {
        fits.clamp(1, config.jobs)
    };
    if jobs < config.jobs {
        println!(
            "cargo:warning=cutlass-gemm-sys: {available} MB of memory available, one nvcc of \
             {largest_unit} kernel(s) may need up to {need} MB: running {jobs} nvcc at a time \
             instead of {} (CUTLASS_RS_NVCC_JOBS sets the count{smaller})",
            config.jobs
        );
    }
    jobs
}

/// The memory this build may still use, in MB: `MemAvailable` of `/proc/meminfo`, or less where
/// the build's cgroup (a container's limit) leaves less. `None` where neither is known (not Linux).
fn available_memory_mb() -> Option<u64> {
    let read = |path: &str| fs::read_to_string(path).ok();
    let number = |text: Option<String>| text?.trim().parse::<u64>().ok();
    let meminfo = read("/proc/meminfo").and_then(|info| {
        let line = info
            .lines()
            .find(|l| l.starts_with("MemAvailable:"))?
            .to_owned();
        line.split_whitespace().nth(1)?.parse::<u64>().ok()
    });
    let meminfo = meminfo.map(|kb| kb / 1024);
    // cgroup v2 (`max` where unlimited, which does not parse), then v1 (a huge number).
    let cgroup = match number(read("/sys/fs/cgroup/memory.max")) {
        Some(limit) => Some((limit, number(read("/sys/fs/cgroup/memory.current")))),
        None => number(read("/sys/fs/cgroup/memory/memory.limit_in_bytes")).map(|limit| {
            let used = number(read("/sys/fs/cgroup/memory/memory.usage_in_bytes"));
            (limit, used)
        }),
    };
    let cgroup = cgroup.map(|(limit, used)| limit.saturating_sub(used.unwrap_or(0)) >> 20);
    match (meminfo, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// One nvcc compilation: a translation unit of generated GEMM kernels, or a hand-written source.
struct Job {
    name: String,
    /// The file compiled, in the generated-sources folder.
    file: String,
    /// The texts the object depends on besides the shim, the ABI header and the toolchain.
    source: String,
    /// The generated kernels it compiles (none for a hand-written source).
    kernels: Vec<String>,
    flags: Vec<String>,
}

/// Step 3: compile every translation unit of kernels and the hand-written kernels, reusing cached
/// objects. Returns the object paths.
fn compile_kernels(
    config: &Config,
    tc: &Toolchain,
    gen_dir: &Path,
    units: &[codegen::TranslationUnit],
) -> Vec<PathBuf> {
    let objects_dir = config.cache_dir.join("objects");
    fs::create_dir_all(&objects_dir).unwrap_or_else(|e| {
        fail(&format!(
            "cannot create the object cache {}: {e} (set CUTLASS_RS_CACHE_DIR)",
            objects_dir.display()
        ))
    });
    let shim = csrc(config, codegen::SHIM_HEADER_NAME);
    let abi = csrc(config, codegen::ABI_HEADER_NAME);
    // The largest units first, so that the last nvcc to finish is a short one.
    let mut units: Vec<&codegen::TranslationUnit> = units.iter().collect();
    units.sort_by_key(|u| std::cmp::Reverse(u.kernels.len()));
    let mut jobs: Vec<Job> = units
        .iter()
        .map(|u| Job {
            name: u.name(),
            file: u.file_name(),
            // The hash covers the unit's list, each kernel's source and the hand-written headers
            // it includes besides the shared ones.
            source: u.kernels.iter().fold(u.source(), |mut text, s| {
                text.push_str(&codegen::kernel_source(s).unwrap());
                for header in codegen::extra_headers(s) {
                    text.push_str(&csrc(config, header));
                }
                text
            }),
            kernels: u.kernels.iter().map(KernelSpec::name).collect(),
            flags: nvcc_flags(config, &[u.kernels[0].arch]),
        })
        .collect();
    // The hand-written kernels, for every architecture of the build: the source, then the headers
    // it includes besides the shared ones (the hash covers them).
    let hand_written: [(&str, &[&str]); 7] = [
        (
            "cutlass_rs_quantize",
            &[codegen::QUANTIZE_SOURCE_NAME, codegen::ENCODE_HEADER_NAME],
        ),
        (
            "cutlass_rs_weight_pack",
            &[
                codegen::WEIGHT_PACK_SOURCE_NAME,
                codegen::WEIGHT_LAYOUT_HEADER_NAME,
                codegen::WEIGHT_ONLY_ABI_HEADER_NAME,
                codegen::WEIGHT_PREP_ABI_HEADER_NAME,
            ],
        ),
        (
            "cutlass_rs_weight_gemv",
            &[
                codegen::WEIGHT_GEMV_SOURCE_NAME,
                codegen::WEIGHT_LAYOUT_HEADER_NAME,
                codegen::WEIGHT_ONLY_ABI_HEADER_NAME,
                codegen::WEIGHT_PREP_ABI_HEADER_NAME,
                codegen::ACTIVATION_HEADER_NAME,
                codegen::GEMV_FRAGMENTS_HEADER_NAME,
            ],
        ),
        (
            "cutlass_rs_blockwise_gemv",
            &[
                codegen::BLOCKWISE_GEMV_SOURCE_NAME,
                codegen::BLOCKWISE_GEMV_ABI_HEADER_NAME,
                codegen::GEMV_FRAGMENTS_HEADER_NAME,
            ],
        ),
        (
            "cutlass_rs_dense_gemv",
            &[
                codegen::DENSE_GEMV_SOURCE_NAME,
                codegen::DENSE_GEMV_ABI_HEADER_NAME,
                codegen::ACTIVATION_HEADER_NAME,
                codegen::GEMV_FRAGMENTS_HEADER_NAME,
            ],
        ),
        ("cutlass_rs_staging", &[codegen::STAGING_SOURCE_NAME]),
        (
            "cutlass_rs_elementwise",
            &[
                codegen::ELEMENTWISE_SOURCE_NAME,
                codegen::ACTIVATION_HEADER_NAME,
            ],
        ),
    ];
    for (name, files) in hand_written {
        jobs.push(Job {
            name: name.into(),
            file: files[0].into(),
            source: files.iter().map(|f| csrc(config, f)).collect(),
            kernels: Vec::new(),
            flags: nvcc_flags(config, &config.archs),
        });
    }
    let objects: Vec<PathBuf> = jobs
        .iter()
        .map(|j| {
            let mut h = Sha256::new();
            for part in [
                j.source.as_str(),
                &shim,
                &abi,
                &tc.nvcc_version,
                &tc.cutlass_version_h,
                &j.flags.join(" "),
            ] {
                h.update((part.len() as u64).to_le_bytes());
                h.update(part.as_bytes());
            }
            let key: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
            objects_dir.join(format!("{}-{}.o", &key[..24], j.name))
        })
        .collect();

    let todo: Vec<usize> = (0..jobs.len()).filter(|&i| !objects[i].is_file()).collect();
    let largest = todo
        .iter()
        .map(|&i| jobs[i].kernels.len())
        .max()
        .unwrap_or(0);
    let parallel = parallel_jobs(config, largest);
    let next = AtomicUsize::new(0);
    let errors = Mutex::new(Vec::<String>::new());
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..parallel.min(todo.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(&j) = todo.get(i) else { break };
                let job = &jobs[j];
                if let Err(e) = compile_one(tc, gen_dir, job, &objects[j]) {
                    errors.lock().unwrap().push(e);
                }
            });
        }
    });
    let errors = errors.into_inner().unwrap();
    if !errors.is_empty() {
        fail(&format!(
            "{} of {} CUDA sources failed to compile:\n{}",
            errors.len(),
            todo.len(),
            errors.join("\n\n")
        ));
    }
    if !todo.is_empty() {
        println!(
            "cargo:warning=cutlass-gemm-sys: compiled {} CUDA source(s) in {:.0} s ({} from the cache at {}; {})",
            todo.len(),
            started.elapsed().as_secs_f64(),
            jobs.len() - todo.len(),
            objects_dir.display(),
            tc.found_by
        );
    }
    objects
}

fn compile_one(tc: &Toolchain, gen_dir: &Path, job: &Job, object: &Path) -> Result<(), String> {
    let name = &job.name;
    let source = gen_dir.join(&job.file);
    let tmp = object.with_extension(format!("tmp{}", std::process::id()));
    let mut cmd = Command::new(&tc.nvcc);
    cmd.args(&job.flags);
    for inc in &tc.cutlass_include {
        cmd.arg("-I").arg(inc);
    }
    cmd.arg("-I").arg(gen_dir);
    cmd.arg("-c").arg(&source).arg("-o").arg(&tmp);
    let output = cmd
        .output()
        .map_err(|e| format!("{name}: cannot run nvcc: {e}"))?;
    if !output.status.success() {
        let _ = fs::remove_file(&tmp);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
        // Killed by a signal (the kernel's out-of-memory killer, most often).
        let memory = if output.status.code().is_none() {
            " (killed by a signal: if memory ran out, lower CUTLASS_RS_NVCC_JOBS or \
             CUTLASS_RS_KERNELS_PER_NVCC)"
        } else {
            ""
        };
        let unit = if job.kernels.len() > 1 {
            format!(
                " (one translation unit of {} kernels: {}; CUTLASS_RS_KERNELS_PER_NVCC=1 compiles \
                 each alone)",
                job.kernels.len(),
                job.kernels.join(", ")
            )
        } else {
            String::new()
        };
        return Err(format!(
            "{name}: nvcc failed ({}){memory}{unit}:\n{}",
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    fs::rename(&tmp, object).map_err(|e| format!("{name}: cannot store the object: {e}"))
}

/// Step 4: one static library with the kernels and the registry; link the CUDA runtime statically.
fn build_library(gen_dir: &Path, objects: &[PathBuf], tc: Option<&Toolchain>) {
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .include(gen_dir)
        .file(gen_dir.join("registry.cc"))
        .warnings(false);
    for o in objects {
        build.object(o);
    }
    build.compile("cutlass_rs_kernels");
    if let Some(tc) = tc {
        println!("cargo:rustc-link-search=native={}", tc.cuda_lib.display());
        println!("cargo:rustc-link-lib=static=cudart_static");
        for lib in ["stdc++", "dl", "rt", "pthread"] {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    }
}

/// Step 5: where the C header, the static library and the toolchain are, for callers in other
/// languages and for tests (`cutlass_gemm_sys::{INCLUDE_DIR, LIB_DIR, CUDA_INCLUDE_DIR,
/// CUDA_LIB_DIR, NVCC, CUTLASS_INCLUDE_DIR}`).
fn export_paths(
    gen_dir: &Path,
    out: &Path,
    config: &Config,
    specs: &[KernelSpec],
    tc: Option<&Toolchain>,
) {
    let show = |p: &Path| p.display().to_string();
    // The architectures the hand-written kernels were compiled for (none without a toolchain).
    let built: Vec<&str> = match tc {
        Some(_) => config.archs.iter().map(|a| a.tag()).collect(),
        None => Vec::new(),
    };
    println!("cargo:rustc-env=CUTLASS_RS_BUILT_ARCHS={}", built.join(","));
    // The decode GEMV serves the `weight-only` feature (whose CUTLASS kernels are SM90's: a build
    // for Blackwell alone has the feature without them) and selections with weight-only kernels.
    let weight_only = match &config.selection {
        Selection::Families(f) => f.contains(&Family::WeightOnly),
        Selection::Filter(_) => false,
    } || specs.iter().any(|s| s.mixed_input.is_some());
    println!(
        "cargo:rustc-env=CUTLASS_RS_WEIGHT_GEMV={}",
        u8::from(tc.is_some() && weight_only)
    );
    println!("cargo:rustc-env=CUTLASS_RS_INCLUDE_DIR={}", show(gen_dir));
    println!("cargo:rustc-env=CUTLASS_RS_LIB_DIR={}", show(out));
    let (cuda_inc, cuda_lib, nvcc, cutlass_inc) = tc.map_or(Default::default(), |t| {
        (
            show(&t.cuda_root.join("include")),
            show(&t.cuda_lib),
            show(&t.nvcc),
            show(&t.cutlass_include[0]),
        )
    });
    println!("cargo:rustc-env=CUTLASS_RS_CUDA_INCLUDE_DIR={cuda_inc}");
    println!("cargo:rustc-env=CUTLASS_RS_CUDA_LIB_DIR={cuda_lib}");
    println!("cargo:rustc-env=CUTLASS_RS_NVCC={nvcc}");
    println!("cargo:rustc-env=CUTLASS_RS_CUTLASS_INCLUDE_DIR={cutlass_inc}");
}

/// Step 6: a record of what was built, for `cargo build -vv` readers and support requests
/// (`cutlass_gemm_sys::BUILD_REPORT`).
fn write_build_report(out: &Path, config: &Config, specs: &[KernelSpec], tc: Option<&Toolchain>) {
    let archs: Vec<&str> = config.archs.iter().map(|a| a.tag()).collect();
    let selection = match (&config.selection, config.docs_rs) {
        (_, true) => "none (docs.rs)".to_string(),
        (Selection::Families(f), _) => format!(
            "features {}",
            f.iter().map(|f| f.feature()).collect::<Vec<_>>().join(",")
        ),
        (Selection::Filter(_), _) => format!(
            "CUTLASS_RS_KERNELS={}",
            var("CUTLASS_RS_KERNELS").unwrap_or_default()
        ),
    };
    let mut r = format!(
        "kernels: {}\narchs: {}\nselection: {selection}\n",
        specs.len(),
        archs.join(",")
    );
    if let Some(tc) = tc {
        r.push_str(&format!(
            "nvcc: {}\ncutlass: {}\ntoolchain: {}\n",
            tc.nvcc_version.lines().last().unwrap_or(""),
            tc.cutlass_version,
            tc.found_by
        ));
    }
    for s in specs {
        r.push_str(&s.name());
        r.push('\n');
    }
    write_if_changed(&out.join("build-report.txt"), &r);
}

fn write_if_changed(path: &Path, contents: &str) {
    if fs::read_to_string(path).ok().as_deref() != Some(contents) {
        fs::write(path, contents)
            .unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", path.display())));
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("\nerror: cutlass-gemm-sys: {msg}\n");
    panic!("cutlass-gemm-sys build failed: {msg}");
}
