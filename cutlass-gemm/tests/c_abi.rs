//! The C ABI from C: `examples/c/gemm.c` is compiled with the system C compiler against this
//! build's header and static library (`cutlass_gemm::sys::{INCLUDE_DIR, LIB_DIR, CUDA_*}`) and run. It
//! lists the registry (checked against `cutlass_gemm::built_kernels()`), checks a typed refusal without a
//! GPU, and on a Hopper GPU runs a bf16 GEMM and compares it exactly with a host product.

use std::path::PathBuf;
use std::process::Command;

/// Compiles `examples/c/gemm.c` and runs it; `None` when the build used no CUDA toolchain.
fn compile_and_run() -> Option<String> {
    if cutlass_gemm::sys::CUDA_LIB_DIR.is_empty() {
        println!("this build used no CUDA toolchain (CUTLASS_RS_KERNELS=none): nothing to link");
        return None;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let exe = std::env::temp_dir().join(format!("cutlass_rs_gemm_c_{}", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .arg(root.join("../cutlass-gemm-sys/examples/c/gemm.c"))
        .arg(format!("-I{}", cutlass_gemm::sys::INCLUDE_DIR))
        .arg(format!("-I{}", cutlass_gemm::sys::CUDA_INCLUDE_DIR))
        .arg(PathBuf::from(cutlass_gemm::sys::LIB_DIR).join("libcutlass_rs_kernels.a"))
        .arg(format!("-L{}", cutlass_gemm::sys::CUDA_LIB_DIR))
        .args([
            "-lcudart_static",
            "-lstdc++",
            "-ldl",
            "-lrt",
            "-lpthread",
            "-o",
        ])
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("{cc} is needed for this test: {e}"));
    assert!(
        out.status.success(),
        "{cc} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().expect("run the C program");
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    println!("{stdout}");
    let _ = std::fs::remove_file(&exe);
    assert!(run.status.success(), "the C program failed:\n{stdout}");
    Some(stdout)
}

/// Without a GPU: it links, sees the same registry as the Rust side, and gets a typed refusal.
#[test]
fn c_program_links_the_static_library_and_uses_the_registry() {
    let Some(stdout) = compile_and_run() else {
        return;
    };
    assert!(
        stdout.contains(&format!(
            "kernels: {}\n",
            cutlass_gemm::built_kernels().len()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("null operands: status 101 (CUTLASS_RS_ERROR_NULL_ARGUMENT = 101)"),
        "{stdout}"
    );
}

/// On a Hopper GPU: the GEMM launched from C equals the host product.
#[test]
#[ignore = "needs a CUDA GPU"]
fn c_program_runs_a_gemm_on_the_gpu() {
    assert!(cutlass_gemm::cuda_available(), "no CUDA GPU");
    let stdout = compile_and_run().expect("a build with kernels");
    assert!(stdout.contains("bf16 GEMM from C: 0 of"), "{stdout}");
}
