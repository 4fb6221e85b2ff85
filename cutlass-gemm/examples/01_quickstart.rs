//! Quick start: one bf16 GEMM through the safe API, checked against the host reference.
//!
//! With a Hopper GPU: runs `D = A·B` (1000 x 1000 x 1000, bf16 in, bf16 out) and compares every
//! element with the f64 host reference. Without a GPU: says so, lists the kernels this build
//! contains, and runs the host reference on a small problem.
//!
//! `cargo run --release --example 01_quickstart`

use anyhow::{Context, Result};
use cudarc::driver::CudaContext;
use cutlass_gemm::reference;
use cutlass_gemm::{built_kernels, Gemm, GemmProblem, OperandName, Workspace};
use half::bf16;

fn random(len: usize, seed: &mut u64) -> Vec<bf16> {
    (0..len)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            bf16::from_f64(((*seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0)
        })
        .collect()
}

fn main() -> Result<()> {
    let kernels = built_kernels();
    println!("This build contains {} CUTLASS kernel(s):", kernels.len());
    for k in kernels {
        println!(
            "  {}  [{} {} {}x{}x{}]",
            k.name,
            k.spec.arch,
            k.spec.layout_name(),
            k.spec.tile[0],
            k.spec.tile[1],
            k.spec.tile[2]
        );
    }
    let mut seed = 2026;

    if !cutlass_gemm::cuda_available() {
        println!("\nNo CUDA GPU found: skipping the GPU GEMM.");
        let p = GemmProblem::new(64, 48, 32);
        let a = random(64 * 32, &mut seed);
        let b = random(32 * 48, &mut seed);
        let r = reference::gemm::<bf16, bf16, bf16>(&p, &a, &b, None)?;
        // Spot-check one element against a direct dot product.
        let (i, j) = (5, 7);
        let direct: f64 = (0..32)
            .map(|p| a[i * 32 + p].to_f64() * b[j * 32 + p].to_f64())
            .sum();
        println!(
            "Host reference, 64 x 48 x 32 bf16 (TN): D[5,7] = {:.6} (direct dot product {:.6}), sum of D = {:.6}",
            r.value[i * 48 + j],
            direct,
            r.value.iter().sum::<f64>()
        );
        anyhow::ensure!(
            (r.value[i * 48 + j] - direct).abs() < 1e-12,
            "host reference disagrees"
        );
        return Ok(());
    }

    let ctx = CudaContext::new(0).context("creating a CUDA context on device 0")?;
    let stream = ctx.default_stream();
    let (cc_major, cc_minor) = ctx.compute_capability()?;
    println!(
        "\nDevice 0: {} (compute capability {cc_major}.{cc_minor})",
        ctx.name()?
    );

    let (m, n, k) = (1000, 1000, 1000);
    let p = GemmProblem::new(m, n, k); // A row-major, B column-major, D row-major
    let gemm = Gemm::<bf16, bf16, bf16>::new(&ctx, &p)?;
    println!("Kernel: {}", gemm.kernel_name());

    let a = random(m * k, &mut seed);
    let b = random(k * n, &mut seed);
    let da = stream.clone_htod(&a)?;
    let db = stream.clone_htod(&b)?;
    let mut dd = stream.alloc_zeros::<bf16>(m * n)?;
    gemm.run(&stream, &da, &db, None, &mut dd, Workspace::Managed)?;
    let d = stream.clone_dtoh(&dd)?;

    let r = reference::gemm(&p, &a, &b, None::<&[bf16]>)?;
    let cmp = reference::compare(&d, &gemm.operand(OperandName::D), &r);
    println!(
        "Checked {} elements against the f64 host reference: {} outside tolerance, max |error| {:.3e}, worst error/bound {:.3}",
        cmp.checked, cmp.failures, cmp.max_abs_error, cmp.max_error_ratio
    );
    anyhow::ensure!(
        cmp.passed(),
        "GPU result disagrees with the host reference: {cmp:?}"
    );
    println!("OK");
    Ok(())
}
