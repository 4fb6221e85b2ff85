//! The crates as crates.io would serve them. `scripts/package.sh --no-verify` packages the three
//! published crates (with the CUTLASS headers copied into `cutlass-gemm-sys`); a separate crate,
//! `tests/dependent`, depends on them through `[patch.crates-io]` and is built and run with a
//! toolchain that only discovery finds: no toolchain variable set, no nvcc on `PATH`, the CUDA
//! compiler in python3's `nvidia` wheels (the bootstrapped ones, on `PYTHONPATH` as a pip install
//! puts them) and CUTLASS from the headers shipped in the package. Then `DOCS_RS=1 cargo doc` of
//! the packaged `cutlass-gemm` with no toolchain at all, as docs.rs builds it.
//!
//! Needs `scripts/bootstrap.sh` (the wheels in `third_party/toolchain`) and a registry for the
//! dependencies; takes a few minutes (kernel objects come from the cache of the main build).

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A command with the toolchain variables removed and `PATH` without any folder that holds nvcc.
fn clean(program: &str) -> Command {
    let mut cmd = Command::new(program);
    for v in [
        "NVCC",
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDA_ROOT",
        "CUTLASS_DIR",
        "CUTLASS_RS_KERNELS",
        "CUTLASS_RS_ARCHS",
        "CUDA_COMPUTE_CAP",
        "PYTHONPATH",
        "RUSTFLAGS",
    ] {
        cmd.env_remove(v);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|d| !d.join("nvcc").exists())
        .collect();
    cmd.env("PATH", std::env::join_paths(dirs).unwrap());
    cmd
}

fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        out.status,
        stderr
            .lines()
            .rev()
            .take(60)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    );
    stdout
}

#[test]
fn packaged_crates_build_a_dependent_with_a_discovered_toolchain() {
    let root = workspace_root();
    let wheels = root.join("third_party/toolchain/nvidia");
    assert!(
        wheels.join("cu13/bin/nvcc").is_file(),
        "{} has no nvcc: run scripts/bootstrap.sh first",
        wheels.display()
    );
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("packaged");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();

    // 1. Package (the script copies the CUTLASS headers in and removes them again).
    let pkg_target = tmp.join("package-target");
    let packaged = Command::new("bash")
        .arg(root.join("scripts/package.sh"))
        .args(["--no-verify", "--allow-dirty", "--target-dir"])
        .arg(&pkg_target)
        .current_dir(&root)
        .output()
        .expect("run scripts/package.sh");
    assert!(
        packaged.status.success(),
        "scripts/package.sh failed:\n{}",
        String::from_utf8_lossy(&packaged.stderr)
    );

    // 2. Unpack the .crate files.
    let crates = tmp.join("crates");
    std::fs::create_dir_all(&crates).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    let mut patch = String::from("[patch.crates-io]\n");
    for name in ["cutlass-gemm-catalog", "cutlass-gemm-sys", "cutlass-gemm"] {
        let file = pkg_target
            .join("package")
            .join(format!("{name}-{version}.crate"));
        run(
            Command::new("tar")
                .arg("xzf")
                .arg(&file)
                .arg("-C")
                .arg(&crates),
            &format!("unpacking {}", file.display()),
        );
        let dir = crates.join(format!("{name}-{version}"));
        patch.push_str(&format!(
            "{name} = {{ path = {:?} }}\n",
            dir.display().to_string()
        ));
    }
    let sys_dir = crates.join(format!("cutlass-gemm-sys-{version}"));
    assert!(
        sys_dir.join("cutlass/include/cutlass/version.h").is_file()
            && sys_dir.join("cutlass/LICENSE.txt").is_file(),
        "the packaged cutlass-gemm-sys lacks the CUTLASS headers or their license"
    );
    assert!(sys_dir.join("src/bindings.rs").is_file() && sys_dir.join("csrc").is_dir());

    // 3. The dependent crate.
    let dependent = tmp.join("dependent");
    std::fs::create_dir_all(dependent.join("src")).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dependent/src/main.rs"),
        dependent.join("src/main.rs"),
    )
    .unwrap();
    std::fs::write(
        dependent.join("Cargo.toml"),
        format!(
            "[package]\nname = \"dependent\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\n\
             [dependencies]\ncutlass-gemm = \"{version}\"\n\n[workspace]\n\n{patch}"
        ),
    )
    .unwrap();

    // python3 sees the nvidia wheels (not cutlass_library), as after `pip install nvidia-cuda-nvcc
    // nvidia-cuda-runtime ...`.
    let site = tmp.join("site");
    std::fs::create_dir_all(&site).unwrap();
    std::os::unix::fs::symlink(&wheels, site.join("nvidia")).unwrap();
    let target = tmp.join("target");
    let out = run(
        clean("cargo")
            .args(["run", "--release", "--quiet", "--target-dir"])
            .arg(&target)
            .env("PYTHONPATH", &site)
            .current_dir(&dependent),
        "building and running the dependent crate",
    );
    println!("{out}");
    assert!(out.contains("CUDA from python3's nvidia wheels"), "{out}");
    assert!(
        out.contains("CUTLASS from the headers shipped in this package"),
        "{out}"
    );
    assert!(out.trim_end().ends_with("ok"), "{out}");

    // 4. docs.rs: no toolchain at all (python3 finds no wheel either).
    run(
        clean("cargo")
            .args(["doc", "--no-deps", "-p", "cutlass-gemm", "--target-dir"])
            .arg(&target)
            .env("DOCS_RS", "1")
            .current_dir(&dependent),
        "DOCS_RS=1 cargo doc",
    );
    assert!(target.join("doc/cutlass_gemm/index.html").is_file());
}
