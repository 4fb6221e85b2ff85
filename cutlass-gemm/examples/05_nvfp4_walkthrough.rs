//! The seed's Blackwell narrow-precision walkthrough (`shared/seeds/cutlass-blackwell-sm100-gemms.txt`,
//! "Blackwell narrow-precision GEMM"): `mx_float4_t` x `mx_float4_t`, NT, 256x256x128 MMA tile with
//! `KernelTmaWarpSpecialized2SmMxf8f6f4Sm100`, cluster 4x4x1, C f16, D e2m1 with ue4m3 scale
//! factors per 16 (`LinCombBlockScaleFactor`, `SFDVectorSize = 16`).
//!
//! 1. Finds the entry in the catalog (it is data: `catalog::sm100_block_scaled_outputs`).
//! 2. Quantizes A (column-major m x k) and B (row-major k x n) to MXFP4 on the host: e2m1
//!    elements packed as CUTLASS stores them, ue8m0 scales per 32 along K, swizzled into the
//!    `Sm1xxBlockScaledConfig` layout.
//! 3. Computes the f64 reference and the block-scaled output the epilogue would write
//!    (`Reference::to_block_scaled`).
//! 4. Where the GPU allows: with the kernel in the build (`CUTLASS_RS_ARCHS=90a,100a` and the
//!    name below in `CUTLASS_RS_KERNELS`) it uploads the operands as MN-major `MxTensor`s and
//!    drives the kernel through the safe API (`BlockScaledGemm::plan_mx_to_nvfp4`, `run_to_nvfp4`);
//!    on an SM100 GPU it launches and compares D and its scale factors with the host's; elsewhere
//!    the launch returns the architecture error (and on a Hopper GPU the driver refuses the FP4
//!    TMA descriptors before that, which the example reports).
//!
//! `cargo run --release --example 05_nvfp4_walkthrough`

use anyhow::{Context, Result};
use cudarc::driver::CudaContext;
use cutlass_gemm::formats::packed::PackedVec;
use cutlass_gemm::formats::scale_layout::ScaleFactorLayout;
use cutlass_gemm::numeric::{E2M1, UE4M3, UE8M0};
use cutlass_gemm::quantize::host;
use cutlass_gemm::quantize::{Major, MxTensor, Nvfp4Tensor};
use cutlass_gemm::reference::{self, PackedStrided, Scaled, Strided};
use cutlass_gemm::{
    built_kernels, BlockScaledGemm, DeviceInfo, Error, GemmProblem, MatrixLayout, OperandName,
    Workspace,
};
use cutlass_gemm_catalog::catalog;
use half::f16;

fn values(len: usize, seed: &mut u64) -> Vec<f32> {
    (0..len)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (((*seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0) as f32
        })
        .collect()
}

fn main() -> Result<()> {
    // 1. The entry.
    let spec = catalog::sm100_block_scaled_outputs()[0];
    let name = spec.name();
    println!("Catalog entry: {name}");
    println!(
        "  {} {} x {} {}, tile {:?}, cluster {:?}, {}, MMA `{}`",
        spec.arch,
        spec.operand_label(false),
        spec.operand_label(true),
        spec.layout_name(),
        spec.tile,
        spec.cluster,
        spec.kernel_schedule.policy(),
        catalog::expected_mma(&spec)
    );

    // 2. Operands. NT: A column-major m x k (M contiguous), B row-major k x n (N contiguous).
    let (m, n, k) = (512, 512, 1024);
    let problem = GemmProblem::new(m, n, k)
        .with_a(MatrixLayout::col_major())
        .with_b(MatrixLayout::row_major())
        .with_scalars(1.0, 0.5);
    let mut seed = 2026;
    let a_vals = values(m * k, &mut seed); // A as [m][k]
    let bt_vals = values(n * k, &mut seed); // B transposed, [n][k]
    let c: Vec<f16> = values(m * n, &mut seed)
        .iter()
        .map(|&v| f16::from_f32(v))
        .collect();
    // MX quantization along K (rows of A, columns of B).
    let qa = host::quantize_mx::<E2M1>(&a_vals, m, k);
    let qb = host::quantize_mx::<E2M1>(&bt_vals, n, k);
    let ga = problem.resolve(OperandName::A)?;
    let gb = problem.resolve(OperandName::B)?;
    // Store in the kernel's layouts.
    let mut pa = PackedVec::<E2M1>::zeros(ga.required_len());
    for i in 0..m {
        for j in 0..k {
            pa.set(ga.offset(0, i, j), qa.elements[i * k + j]);
        }
    }
    let mut pb = PackedVec::<E2M1>::zeros(gb.required_len());
    for kk in 0..k {
        for j in 0..n {
            pb.set(gb.offset(0, kk, j), qb.elements[j * k + kk]);
        }
    }
    let (la, lb) = (
        ScaleFactorLayout::new(m, k, 1, 32),
        ScaleFactorLayout::new(n, k, 1, 32),
    );
    let sfa: Vec<UE8M0> = la.swizzle(&qa.scales, UE8M0::from_bits(0));
    let sfb: Vec<UE8M0> = lb.swizzle(&qb.scales, UE8M0::from_bits(0));

    // 3. Reference and the block-scaled output.
    let a_packed = PackedStrided::new(pa.as_slice(), ga, OperandName::A)?;
    let b_packed = PackedStrided::new(pb.as_slice(), gb, OperandName::B)?;
    let a_scaled = Scaled::new(&a_packed, OperandName::A, &sfa, la, 1.0)?;
    let b_scaled = Scaled::new(&b_packed, OperandName::B, &sfb, lb, 1.0)?;
    let gc = problem.resolve(OperandName::C)?;
    let c_host = Strided::new(&c, gc, OperandName::C)?;
    let r = reference::gemm_values(&problem, &a_scaled, &b_scaled, Some(&c_host))?;
    let norm_constant = 1.0f32;
    let (d_ref, sfd_ref) = r.to_block_scaled::<E2M1, UE4M3>(16, norm_constant, UE4M3::from_f32);
    // How far the FP4 output is from the f64 result: dequantize it.
    let sf_cols = n.div_ceil(16);
    let mut worst = 0.0f64;
    let scale = r.value.iter().fold(0.0f64, |x, v| x.max(v.abs()));
    for i in 0..m {
        for j in 0..n {
            let d = d_ref[i * n + j].to_f64() * sfd_ref[i * sf_cols + j / 16].to_f64();
            worst = worst.max((d - r.value[i * n + j]).abs());
        }
    }
    println!(
        "Host: {m} x {n} x {k}, A/B MXFP4 ({} and {} scale bytes), D e2m1 + {} ue4m3 scale factors; \
         largest |dequantized D - reference| = {:.3} of max |D| (FP4 output)",
        sfa.len(),
        sfb.len(),
        sfd_ref.len(),
        worst / scale
    );

    // 4. The GPU, where it allows.
    let Some(kernel) = built_kernels().iter().find(|k| k.name == name) else {
        println!(
            "The kernel is not in this build: build with CUTLASS_RS_ARCHS=90a,100a and \
             CUTLASS_RS_KERNELS=default,{name} to drive it on a GPU."
        );
        return Ok(());
    };
    if !cutlass_gemm::cuda_available() {
        println!("No CUDA GPU found: skipping the device part.");
        return Ok(());
    }
    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let info = DeviceInfo::query(&ctx)?;
    // The safe API: MN-major MXFP4 tensors (A column-major, B row-major: the NT layout), an
    // MX-to-NVFP4 plan, D into an NVFP4 tensor. Off SM100 the plan is made for the host path only.
    let a = MxTensor::<E2M1>::from_host(&stream, &qa, Major::MN)?;
    let b = MxTensor::<E2M1>::from_host(&stream, &qb, Major::MN)?;
    let dc = stream.clone_htod(&c)?;
    let mut d = Nvfp4Tensor::alloc(&stream, m, n)?;
    let gemm = if kernel.spec.arch.runs_on(info.compute_capability) {
        BlockScaledGemm::<E2M1, E2M1, f16>::plan_mx_to_nvfp4(info, &problem, Some(&name))?
    } else {
        BlockScaledGemm::<E2M1, E2M1, f16>::plan_any_arch(info, &problem, &name)?
    };
    match gemm.prepare_to_nvfp4(&stream, &a, &b, Some(&dc), &mut d, norm_constant) {
        Ok(ws) => {
            println!("Host path: can_implement, workspace ({ws} bytes) and TMA descriptors ok")
        }
        Err(Error::Cutlass {
            status, message, ..
        }) if status == cutlass_gemm::sys::CUTLASS_RS_ERROR_TMA_DESCRIPTOR => {
            println!(
                "Host path: up to the FP4 TMA descriptors, which this device refuses: {message}"
            )
        }
        Err(e) => return Err(e).context("host path"),
    }
    match gemm.run_to_nvfp4(
        &stream,
        &a,
        &b,
        Some(&dc),
        &mut d,
        norm_constant,
        Workspace::Managed,
    ) {
        Err(Error::ArchMismatch { arch, device, .. }) => {
            println!("Launch: refused, {arch} kernel on a compute capability {device:?} device");
        }
        Err(e) => return Err(e).context("launch"),
        Ok(()) => {
            let sfd_layout = ScaleFactorLayout::new(m, n, 1, 16);
            let sfd = sfd_layout.unswizzle(&stream.clone_dtoh(&d.scales)?);
            let dv = PackedVec::<E2M1>::from_bytes(stream.clone_dtoh(&d.data)?, m * n)?.to_vec();
            // The device uses approximate reciprocals: a value at a rounding boundary may differ by
            // one code (see Reference::to_block_scaled).
            let codes = dv
                .iter()
                .zip(&d_ref)
                .filter(|(x, y)| (x.to_bits() as i32 - y.to_bits() as i32).abs() > 1)
                .count();
            let sf_diff = sfd.iter().zip(&sfd_ref).filter(|(x, y)| x != y).count();
            println!("Launch: D differs from the host by more than one code at {codes} of {} elements; {sf_diff} scale factors differ", m * n);
            anyhow::ensure!(codes == 0, "D differs from the host reference");
        }
    }
    Ok(())
}
