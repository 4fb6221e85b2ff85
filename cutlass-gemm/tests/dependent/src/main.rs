//! A crate that depends on `cutlass-gemm` as a user's would (built by `tests/packaged.rs` against
//! the packaged crates): prints what the build found, checks the host reference and, with a
//! Hopper GPU, runs one bf16 GEMM against it.

use cutlass_gemm::cudarc::driver::CudaContext;
use cutlass_gemm::half::bf16;
use cutlass_gemm::{built_kernels, reference, Gemm, GemmProblem, OperandName, Workspace};

fn values(len: usize, seed: u64) -> Vec<bf16> {
    (0..len)
        .map(|i| bf16::from_f32(((i as u64 * 7 + seed) % 13) as f32 - 6.0))
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for line in cutlass_gemm::sys::BUILD_REPORT.lines().take(6) {
        println!("build: {line}");
    }
    println!("kernels: {}", built_kernels().len());
    if built_kernels().is_empty() {
        return Err("the build holds no kernels".into());
    }
    let (m, n, k) = (256, 192, 128);
    let p = GemmProblem::new(m, n, k);
    let (a, b) = (values(m * k, 1), values(k * n, 2));
    let r = reference::gemm(&p, &a, &b, None::<&[bf16]>)?;
    let direct: f64 = (0..k)
        .map(|l| a[3 * k + l].to_f64() * b[5 * k + l].to_f64())
        .sum();
    if r.value[3 * n + 5] != direct {
        return Err("the host reference disagrees with a dot product".into());
    }
    if cutlass_gemm::cuda_available() {
        let ctx = CudaContext::new(0)?;
        let stream = ctx.default_stream();
        let gemm = Gemm::<bf16, bf16, bf16>::new(&ctx, &p)?;
        let (da, db) = (stream.clone_htod(&a)?, stream.clone_htod(&b)?);
        let mut dd = stream.alloc_zeros::<bf16>(m * n)?;
        gemm.run(&stream, &da, &db, None, &mut dd, Workspace::Managed)?;
        let d = stream.clone_dtoh(&dd)?;
        let cmp = reference::compare(&d, &gemm.operand(OperandName::D), &r);
        if !cmp.passed() {
            return Err(format!("GPU result: {cmp:?}").into());
        }
        println!("gpu: {} matches the reference", gemm.kernel_name());
    } else {
        println!("gpu: none");
    }
    println!("ok");
    Ok(())
}
