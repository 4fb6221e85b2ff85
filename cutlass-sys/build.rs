//! Build script of `cutlass-sys`: generates, compiles and links the selected CUTLASS kernels.
//!
//! Steps (see `main`): read the configuration from the environment, select catalog entries, find
//! the CUDA and CUTLASS toolchain, render one `.cu` per kernel, compile them with nvcc through a
//! content-addressed object cache, archive them with the kernel registry into a static library,
//! and run bindgen over the one C header.
//!
//! Environment (each is watched with `rerun-if-env-changed`):
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `CUTLASS_RS_ARCHS` | architectures to build, comma-separated: `90a`, `100a`, `120a` (the default set is SM90's; pick SM100/SM120 entries with `CUTLASS_RS_KERNELS`) | `90a` |
//! | `CUTLASS_RS_KERNELS` | kernel-name filter, comma-separated globs (like `CUTLASS_LIBRARY_KERNELS`); `none` builds no kernel | the default set |
//! | `CUTLASS_RS_NVCC_JOBS` | parallel nvcc jobs (one needs 3.5–5 GB of memory) | `2` |
//! | `CUTLASS_RS_CACHE_DIR` | object cache | `$XDG_CACHE_HOME/cutlass-rs` or `~/.cache/cutlass-rs` |
//! | `CUTLASS_RS_NVCC_FLAGS` | extra nvcc flags, space-separated (part of the cache key) | none |
//! | `CUDA_HOME`, `CUDA_PATH` | a CUDA 13 toolkit (with `bin/nvcc`) | `third_party/toolchain/nvidia/cu13` |
//! | `CUTLASS_DIR` | CUTLASS 4.x: a git checkout or the wheel's `source` folder (with `include/cutlass`) | `third_party/toolchain/cutlass_library/source` |

use std::collections::BTreeSet;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use cutlass_kernels::catalog::{self, NameFilter};
use cutlass_kernels::codegen;
use cutlass_kernels::{Arch, KernelSpec};
use sha2::{Digest, Sha256};

const ENV_VARS: &[&str] = &[
    "CUTLASS_RS_ARCHS",
    "CUTLASS_RS_KERNELS",
    "CUTLASS_RS_NVCC_JOBS",
    "CUTLASS_RS_CACHE_DIR",
    "CUTLASS_RS_NVCC_FLAGS",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUTLASS_DIR",
    "XDG_CACHE_HOME",
    "HOME",
];

const HOW_TO_GET_TOOLCHAIN: &str = "run `scripts/bootstrap.sh` from the repository root (it installs \
     the CUDA 13.0 compiler and CUTLASS 4.2.0 headers from PyPI into third_party/), or set CUDA_HOME \
     to a CUDA 13 toolkit and CUTLASS_DIR to a CUTLASS 4.x checkout, or set CUTLASS_RS_KERNELS=none \
     to build without kernels (host-only parts)";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let config = Config::from_env();
    let specs = select_kernels(&config);
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let gen_dir = out.join("generated");
    fs::create_dir_all(&gen_dir).expect("create OUT_DIR/generated");

    // The toolchain compiles the selected GEMM kernels and the quantization kernels; only
    // `CUTLASS_RS_KERNELS=none` builds without it.
    let toolchain = if config.no_kernels {
        None
    } else {
        Some(Toolchain::locate(&config))
    };
    let cutlass_version = toolchain.as_ref().map_or(0, |t| t.cutlass_version);

    generate_sources(&gen_dir, &specs, cutlass_version, toolchain.is_some());
    let objects = match &toolchain {
        Some(t) => compile_kernels(&config, t, &gen_dir, &specs),
        None => Vec::new(),
    };
    build_library(&gen_dir, &objects, toolchain.as_ref());
    export_paths(&gen_dir, &out, toolchain.as_ref());
    generate_bindings(&gen_dir, &out);
    write_build_report(&out, &specs, toolchain.as_ref());
}

/// What the environment asks for.
struct Config {
    archs: Vec<Arch>,
    filter: NameFilter,
    no_kernels: bool,
    jobs: usize,
    cache_dir: PathBuf,
    extra_nvcc_flags: Vec<String>,
    cuda_home: Option<PathBuf>,
    cutlass_dir: Option<PathBuf>,
    workspace_root: PathBuf,
}

impl Config {
    fn from_env() -> Config {
        for v in ENV_VARS {
            println!("cargo:rerun-if-env-changed={v}");
        }
        let var = |k: &str| env::var(k).ok().filter(|s| !s.trim().is_empty());
        let archs = match var("CUTLASS_RS_ARCHS") {
            None => vec![Arch::Sm90a],
            Some(s) => s
                .split(',')
                .filter(|t| !t.trim().is_empty())
                .map(|t| {
                    Arch::parse(t).unwrap_or_else(|| {
                        fail(&format!(
                            "CUTLASS_RS_ARCHS: unknown architecture `{t}`; use 90a, 100a or 120a"
                        ))
                    })
                })
                .collect(),
        };
        let kernels = var("CUTLASS_RS_KERNELS").unwrap_or_default();
        let no_kernels = kernels.trim() == "none";
        let jobs = match var("CUTLASS_RS_NVCC_JOBS") {
            None => 2,
            Some(s) => s
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|&j| j > 0)
                .unwrap_or_else(|| {
                    fail(&format!(
                        "CUTLASS_RS_NVCC_JOBS: `{s}` is not a positive integer"
                    ))
                }),
        };
        let cache_dir = var("CUTLASS_RS_CACHE_DIR")
            .map(PathBuf::from)
            .or_else(|| var("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("cutlass-rs")))
            .or_else(|| var("HOME").map(|d| PathBuf::from(d).join(".cache").join("cutlass-rs")))
            .unwrap_or_else(|| PathBuf::from(env::var("OUT_DIR").unwrap()).join("object-cache"));
        let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
        Config {
            archs,
            filter: NameFilter::parse(if no_kernels { "" } else { &kernels }),
            no_kernels,
            jobs,
            cache_dir,
            extra_nvcc_flags: var("CUTLASS_RS_NVCC_FLAGS")
                .map(|s| s.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default(),
            cuda_home: var("CUDA_HOME")
                .or_else(|| var("CUDA_PATH"))
                .map(PathBuf::from),
            cutlass_dir: var("CUTLASS_DIR").map(PathBuf::from),
            workspace_root: manifest.parent().unwrap_or(&manifest).to_path_buf(),
        }
    }
}

/// Step 1: the catalog entries to build.
fn select_kernels(config: &Config) -> Vec<KernelSpec> {
    if config.no_kernels {
        return Vec::new();
    }
    let specs = catalog::select(&config.archs, &config.filter);
    for s in &specs {
        if let Err(e) = s.validate() {
            fail(&format!("selected kernel cannot be built: {e}"));
        }
    }
    if specs.is_empty() && !config.filter.is_empty() {
        println!(
            "cargo:warning=CUTLASS_RS_KERNELS matches no kernel of the catalog for {:?}; building without kernels",
            config.archs.iter().map(|a| a.tag()).collect::<Vec<_>>()
        );
    }
    specs
}

/// The CUDA compiler and the CUTLASS headers.
struct Toolchain {
    nvcc: PathBuf,
    cuda_lib: PathBuf,
    cutlass_include: Vec<PathBuf>,
    nvcc_version: String,
    cutlass_version: u32,
    cutlass_version_h: String,
}

impl Toolchain {
    fn locate(config: &Config) -> Toolchain {
        let third_party = config.workspace_root.join("third_party").join("toolchain");
        let cuda = config
            .cuda_home
            .clone()
            .unwrap_or_else(|| third_party.join("nvidia").join("cu13"));
        let nvcc = cuda.join("bin").join("nvcc");
        if !nvcc.is_file() {
            fail(&format!(
                "nvcc not found at {}; {HOW_TO_GET_TOOLCHAIN}",
                nvcc.display()
            ));
        }
        let cuda_lib = ["lib", "lib64", "targets/x86_64-linux/lib"]
            .iter()
            .map(|d| cuda.join(d))
            .find(|d| d.join("libcudart_static.a").is_file())
            .unwrap_or_else(|| {
                fail(&format!(
                    "libcudart_static.a not found under {}; {HOW_TO_GET_TOOLCHAIN}",
                    cuda.display()
                ))
            });
        let cutlass = config
            .cutlass_dir
            .clone()
            .unwrap_or_else(|| third_party.join("cutlass_library").join("source"));
        let version_h = cutlass.join("include").join("cutlass").join("version.h");
        let cutlass_version_h = fs::read_to_string(&version_h).unwrap_or_else(|_| {
            fail(&format!(
                "CUTLASS headers not found ({} is missing); {HOW_TO_GET_TOOLCHAIN}",
                version_h.display()
            ))
        });
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
                "CUTLASS {cutlass_version} at {} is too old: CUTLASS 4.x is needed",
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
                "cargo:warning=nvcc at {} is not CUDA 13 ({}); the kernels may not load with a CUDA 13.0 driver",
                nvcc.display(),
                nvcc_version.lines().last().unwrap_or("")
            );
        }
        println!("cargo:rerun-if-changed={}", nvcc.display());
        println!("cargo:rerun-if-changed={}", version_h.display());
        Toolchain {
            nvcc,
            cuda_lib,
            cutlass_include: vec![
                cutlass.join("include"),
                cutlass.join("tools").join("util").join("include"),
            ],
            nvcc_version,
            cutlass_version,
            cutlass_version_h,
        }
    }
}

/// Step 2: the header, the shim, one `.cu` per kernel, the quantization kernels and the registry.
fn generate_sources(gen_dir: &Path, specs: &[KernelSpec], cutlass_version: u32, with_cuda: bool) {
    let ok = |r: Result<String, String>| r.unwrap_or_else(|e| fail(&format!("codegen: {e}")));
    write_if_changed(
        &gen_dir.join(codegen::HEADER_NAME),
        &ok(codegen::header(specs)),
    );
    write_if_changed(
        &gen_dir.join(codegen::SHIM_HEADER_NAME),
        codegen::SHIM_HEADER,
    );
    write_if_changed(&gen_dir.join(codegen::ABI_HEADER_NAME), codegen::ABI_HEADER);
    write_if_changed(
        &gen_dir.join("registry.cc"),
        &ok(codegen::registry(specs, cutlass_version, with_cuda)),
    );
    write_if_changed(
        &gen_dir.join(codegen::QUANTIZE_SOURCE_NAME),
        codegen::QUANTIZE_SOURCE,
    );
    write_if_changed(
        &gen_dir.join(codegen::ENCODE_HEADER_NAME),
        codegen::ENCODE_HEADER,
    );
    for s in specs {
        write_if_changed(
            &gen_dir.join(format!("{}.cu", s.name())),
            &ok(codegen::kernel_source(s)),
        );
        for (name, text) in codegen::extra_headers(s) {
            write_if_changed(&gen_dir.join(name), text);
        }
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

/// One nvcc compilation: a generated GEMM kernel or the quantization kernels.
struct Job {
    name: String,
    source: String,
    flags: Vec<String>,
}

/// Step 3: compile every kernel and the quantization kernels, reusing cached objects. Returns the
/// object paths.
fn compile_kernels(
    config: &Config,
    tc: &Toolchain,
    gen_dir: &Path,
    specs: &[KernelSpec],
) -> Vec<PathBuf> {
    let objects_dir = config.cache_dir.join("objects");
    fs::create_dir_all(&objects_dir).unwrap_or_else(|e| {
        fail(&format!(
            "cannot create the object cache {}: {e} (set CUTLASS_RS_CACHE_DIR)",
            objects_dir.display()
        ))
    });
    let mut jobs: Vec<Job> = specs
        .iter()
        .map(|s| Job {
            name: s.name(),
            // The hash covers the headers of this crate that it includes besides the shared ones.
            source: codegen::extra_headers(s).iter().fold(
                codegen::kernel_source(s).unwrap(),
                |mut text, (_, header)| {
                    text.push_str(header);
                    text
                },
            ),
            flags: nvcc_flags(config, &[s.arch]),
        })
        .collect();
    jobs.push(Job {
        name: "cutlass_rs_quantize".into(),
        // The hash covers the header it includes besides the shared ones.
        source: format!("{}{}", codegen::QUANTIZE_SOURCE, codegen::ENCODE_HEADER),
        flags: nvcc_flags(config, &config.archs),
    });
    let objects: Vec<PathBuf> = jobs
        .iter()
        .map(|j| {
            let mut h = Sha256::new();
            for part in [
                j.source.as_str(),
                codegen::SHIM_HEADER,
                codegen::ABI_HEADER,
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
    let next = AtomicUsize::new(0);
    let errors = Mutex::new(Vec::<String>::new());
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..config.jobs.min(todo.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(&j) = todo.get(i) else { break };
                let source = if jobs[j].name == "cutlass_rs_quantize" {
                    codegen::QUANTIZE_SOURCE_NAME.to_string()
                } else {
                    format!("{}.cu", jobs[j].name)
                };
                if let Err(e) = compile_one(
                    tc,
                    gen_dir,
                    &jobs[j].name,
                    &source,
                    &objects[j],
                    &jobs[j].flags,
                ) {
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
            "cargo:warning=compiled {} CUDA source(s) in {:.0} s ({} from the cache at {})",
            todo.len(),
            started.elapsed().as_secs_f64(),
            jobs.len() - todo.len(),
            objects_dir.display()
        );
    }
    objects
}

fn compile_one(
    tc: &Toolchain,
    gen_dir: &Path,
    name: &str,
    source: &str,
    object: &Path,
    flags: &[String],
) -> Result<(), String> {
    let source = gen_dir.join(source);
    let tmp = object.with_extension(format!("tmp{}", std::process::id()));
    let mut cmd = Command::new(&tc.nvcc);
    cmd.args(flags);
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
        return Err(format!(
            "{name}: nvcc failed ({}):\n{}",
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

/// Step 4b: where the C header, the static library and the CUDA runtime are, for callers in other
/// languages (`cutlass_sys::{INCLUDE_DIR, LIB_DIR, CUDA_INCLUDE_DIR, CUDA_LIB_DIR}`).
fn export_paths(gen_dir: &Path, out: &Path, tc: Option<&Toolchain>) {
    println!(
        "cargo:rustc-env=CUTLASS_RS_INCLUDE_DIR={}",
        gen_dir.display()
    );
    println!("cargo:rustc-env=CUTLASS_RS_LIB_DIR={}", out.display());
    let (inc, lib) = tc.map_or((String::new(), String::new()), |t| {
        let inc = t.cuda_lib.parent().map(|p| p.join("include"));
        (
            inc.map_or(String::new(), |p| p.display().to_string()),
            t.cuda_lib.display().to_string(),
        )
    });
    println!("cargo:rustc-env=CUTLASS_RS_CUDA_INCLUDE_DIR={inc}");
    println!("cargo:rustc-env=CUTLASS_RS_CUDA_LIB_DIR={lib}");
}

/// Step 5: Rust declarations for the one C header.
fn generate_bindings(gen_dir: &Path, out: &Path) {
    let header = gen_dir.join(codegen::HEADER_NAME);
    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .allowlist_function("cutlass_rs_.*")
        .allowlist_function("cutlass3x_.*")
        .allowlist_type("cutlass_rs_.*")
        .allowlist_var("CUTLASS_RS_.*")
        .default_macro_constant_type(bindgen::MacroTypeVariation::Signed)
        .layout_tests(true)
        .generate()
        .unwrap_or_else(|e| {
            fail(&format!(
                "bindgen failed on {}: {e}. bindgen needs libclang: `apt-get install libclang-dev` \
                 (scripts/bootstrap.sh does it) or set LIBCLANG_PATH",
                header.display()
            ))
        });
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");
}

/// Step 6: a record of what was built, for `cargo build -vv` readers and support requests.
fn write_build_report(out: &Path, specs: &[KernelSpec], tc: Option<&Toolchain>) {
    let archs: BTreeSet<&str> = specs.iter().map(|s| s.arch.tag()).collect();
    let mut r = format!(
        "kernels: {}\narchs: {}\n",
        specs.len(),
        archs.into_iter().collect::<Vec<_>>().join(",")
    );
    if let Some(tc) = tc {
        r.push_str(&format!(
            "nvcc: {}\ncutlass: {}\n",
            tc.nvcc_version.lines().last().unwrap_or(""),
            tc.cutlass_version
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
    eprintln!("\nerror: cutlass-sys: {msg}\n");
    panic!("cutlass-sys build failed: {msg}");
}
