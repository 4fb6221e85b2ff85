//! Block-scaled (MX, NVFP4) SM100/SM120 kernels through the safe API on a non-Blackwell GPU:
//! operands quantized on this GPU, every check and CUTLASS's host path (can_implement, workspace,
//! kernel parameters with TMA descriptors for the real buffers) run, and the launch refused with
//! the architecture error. `#[ignore = "needs a CUDA GPU"]`; fails when asked to run without one,
//! or when the build has no block-scaled kernel (build with `CUTLASS_RS_ARCHS=90a,100a,120a` and
//! `CUTLASS_RS_KERNELS=default,<block-scaled names>`).

use crate::common::*;

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use cutlass_gemm::numeric::{E2M1, E2M3, E3M2, E4M3, E5M2};
use cutlass_gemm::quantize::{self, MxElement};
use cutlass_gemm::{
    built_kernels, Activation, BiasAxis, BlockScaledGemm, DataType, DeviceInfo, Epilogue,
    EpilogueOperands, Error, GemmProblem, LayoutRule, NarrowOperand, OperandName, ProblemRule,
    Scalar, ScaleFamily, ScaleRule, Workspace,
};
use half::{bf16, f16};

/// The host path's result: the workspace size, or, for sub-byte operands before SM100, the
/// driver's refusal of TMA's unpacking data types (everything before that descriptor ran).
fn expect_host_path(
    name: &str,
    spec: &cutlass_gemm::KernelSpec,
    info: &DeviceInfo,
    r: cutlass_gemm::Result<usize>,
) -> usize {
    let sub_byte = (spec.a.ty.bits() < 8 || spec.b.ty.bits() < 8) && info.compute_capability.0 < 10;
    match r {
        Ok(ws) if !sub_byte => ws,
        Err(Error::Cutlass { status, .. })
            if sub_byte && status == cutlass_gemm::sys::CUTLASS_RS_ERROR_TMA_DESCRIPTOR =>
        {
            println!("{name}: host path ran up to the sub-byte TMA descriptors, which this device's driver refuses (expected before SM100)");
            0
        }
        other => panic!("{name}: host path gave {other:?} (sub-byte before SM100: {sub_byte})"),
    }
}

const M: usize = 512;
const N: usize = 384;
const K: usize = 1024;

fn input(stream: &Arc<CudaStream>, rows: usize, seed: u32) -> CudaSlice<bf16> {
    let v: Vec<bf16> = (0..rows * K)
        .map(|i| {
            let x = (i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8;
            bf16::from_f32((x % 2001) as f32 / 1000.0 - 1.0)
        })
        .collect();
    stream.clone_htod(&v).unwrap()
}

fn mx_host_path<EA: MxElement, EB: MxElement>(
    name: &str,
    info: DeviceInfo,
    stream: &Arc<CudaStream>,
) {
    let (xa, xb) = (input(stream, M, 1), input(stream, N, 2));
    let a = quantize::quantize_mx::<EA, bf16>(stream, &xa, M, K).unwrap();
    let b = quantize::quantize_mx::<EB, bf16>(stream, &xb, N, K).unwrap();
    let p = GemmProblem::new(M, N, K);
    // A plan that would run refuses a kernel this device cannot run.
    assert!(matches!(
        BlockScaledGemm::<EA, EB, f16>::plan_mx(info, &p, Some(name)).unwrap_err(),
        Error::ArchMismatch { .. }
    ));
    let g = BlockScaledGemm::<EA, EB, f16>::plan_any_arch(info, &p, name).unwrap();
    let mut d = stream.alloc_zeros::<f16>(M * N).unwrap();
    let ws = expect_host_path(
        name,
        g.kernel_spec(),
        &info,
        g.prepare(stream, &a, &b, None, &mut d),
    );
    match g
        .run(
            stream,
            &a,
            &b,
            None,
            &mut d,
            cutlass_gemm::Workspace::Managed,
        )
        .unwrap_err()
    {
        Error::ArchMismatch { arch, device, .. } => {
            assert_eq!(
                (arch, device),
                (g.kernel_spec().arch, info.compute_capability)
            )
        }
        e => panic!("{name}: unexpected {e:?}"),
    }
    // A tensor of another shape is refused before the kernel.
    let short = quantize::quantize_mx::<EB, bf16>(stream, &xb, N - 128, K).unwrap();
    match g.prepare(stream, &a, &short, None, &mut d).unwrap_err() {
        Error::InvalidProblem { reason } => assert_eq!(
            reason,
            ProblemRule::TensorShape {
                operand: OperandName::B,
                found: (N - 128, K),
                required: (N, K),
            }
        ),
        e => panic!("{name}: unexpected {e:?}"),
    }
    // D too small.
    let mut small = stream.alloc_zeros::<f16>(M * N - 1).unwrap();
    assert!(matches!(
        g.prepare(stream, &a, &b, None, &mut small).unwrap_err(),
        Error::BufferTooSmall {
            operand: OperandName::D,
            ..
        }
    ));
    println!(
        "{name}: MX host path ok (workspace {ws} bytes), launch refused on {:?}",
        info.compute_capability
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn block_scaled_kernels_run_their_host_path_and_refuse_the_launch() {
    let (ctx, stream) = gemm_device();
    let info = DeviceInfo::query(&ctx).unwrap();
    let kernels: Vec<_> = built_kernels()
        .iter()
        .filter(|k| k.spec.block_scale.is_some() && !k.spec.arch.runs_on(info.compute_capability))
        .filter(|k| k.spec.layout_name() == "TN" && k.spec.d.ty == DataType::F16)
        .collect();
    assert!(
        !kernels.is_empty(),
        "this build has no block-scaled kernel for another architecture"
    );
    for k in &kernels {
        let bs = k.spec.block_scale.unwrap();
        if bs.vec == 16 {
            // NVFP4.
            let (xa, xb) = (input(&stream, M, 3), input(&stream, N, 4));
            let a = quantize::quantize_nvfp4(&stream, &xa, M, K).unwrap();
            let b = quantize::quantize_nvfp4(&stream, &xb, N, K).unwrap();
            let p = GemmProblem::new(M, N, K);
            let g = BlockScaledGemm::<E2M1, E2M1, f16>::plan_any_arch(info, &p, k.name).unwrap();
            let mut d = stream.alloc_zeros::<f16>(M * N).unwrap();
            let ws = expect_host_path(
                k.name,
                g.kernel_spec(),
                &info,
                g.prepare(&stream, &a, &b, None, &mut d),
            );
            assert!(matches!(
                g.run(
                    &stream,
                    &a,
                    &b,
                    None,
                    &mut d,
                    cutlass_gemm::Workspace::Managed
                )
                .unwrap_err(),
                Error::ArchMismatch { .. }
            ));
            // MX operands on an NVFP4 plan: the scale family is checked.
            let ma = quantize::quantize_mx::<E2M1, bf16>(&stream, &xa, M, K).unwrap();
            let mb = quantize::quantize_mx::<E2M1, bf16>(&stream, &xb, N, K).unwrap();
            assert!(matches!(
                g.prepare(&stream, &ma, &mb, None, &mut d).unwrap_err(),
                Error::ScaleMismatch {
                    operand: OperandName::ScalesA,
                    rule: ScaleRule::Family {
                        required: ScaleFamily::Nvfp4,
                        found: ScaleFamily::Mx,
                    },
                }
            ));
            println!(
                "{}: NVFP4 host path ok (workspace {ws} bytes), launch refused",
                k.name
            );
            continue;
        }
        use DataType as T;
        match (k.spec.a.ty, k.spec.b.ty) {
            (T::E2M1, T::E2M1) => mx_host_path::<E2M1, E2M1>(k.name, info, &stream),
            (T::E4M3, T::E4M3) => mx_host_path::<E4M3, E4M3>(k.name, info, &stream),
            (T::E5M2, T::E5M2) => mx_host_path::<E5M2, E5M2>(k.name, info, &stream),
            (T::E2M3, T::E2M3) => mx_host_path::<E2M3, E2M3>(k.name, info, &stream),
            (T::E3M2, T::E3M2) => mx_host_path::<E3M2, E3M2>(k.name, info, &stream),
            (T::E4M3, T::E2M1) => mx_host_path::<E4M3, E2M1>(k.name, info, &stream),
            (T::E2M1, T::E4M3) => mx_host_path::<E2M1, E4M3>(k.name, info, &stream),
            other => panic!("{}: add {other:?} to this test", k.name),
        }
    }
    println!(
        "{} block-scaled kernels driven up to the launch",
        kernels.len()
    );
}

type PlanFn<EA, EB> = fn(
    DeviceInfo,
    &GemmProblem,
    Option<&str>,
) -> cutlass_gemm::Result<BlockScaledGemm<EA, EB, f16>>;

/// One fused block-scaled kernel: its plan keeps it for an epilogue, the vectors are checked and
/// reach the kernel's host path, the launch is refused; a plan for a described device of the
/// kernel's architecture chooses a fused kernel for an epilogue and a plain one without.
fn fused_host_path<EA, EB, A, B>(
    name: &str,
    info: DeviceInfo,
    stream: &Arc<CudaStream>,
    (a, b): (&A, &B),
    plan: PlanFn<EA, EB>,
) where
    EA: MxElement,
    EB: MxElement,
    A: NarrowOperand<Elem = EA>,
    B: NarrowOperand<Elem = EB>,
{
    let p = GemmProblem::new(M, N, K);
    let e = Epilogue::rowwise()
        .with_bias(BiasAxis::PerColumn)
        .with_activation(Activation::GeluTanh);
    let g = BlockScaledGemm::<EA, EB, f16>::plan_any_arch(info, &p, name)
        .unwrap()
        .with_epilogue(e)
        .unwrap();
    assert_eq!((g.kernel_name(), g.epilogue()), (name, e));
    let bias = stream.alloc_zeros::<f16>(N).unwrap();
    let rows = stream.alloc_zeros::<f32>(M).unwrap();
    let cols = stream.alloc_zeros::<f32>(N).unwrap();
    let mut d = stream.alloc_zeros::<f16>(M * N).unwrap();
    let vectors = EpilogueOperands {
        bias: Some(&bias),
        bias_f32: None,
        row_scales: Some(&rows),
        col_scales: Some(&cols),
    };
    let ws = expect_host_path(
        name,
        g.kernel_spec(),
        &info,
        g.prepare_fused(stream, a, b, None, &mut d, &vectors),
    );
    assert!(matches!(
        g.run_fused(stream, a, b, None, &mut d, &vectors, Workspace::Managed)
            .unwrap_err(),
        Error::ArchMismatch { .. }
    ));
    // The vectors the epilogue names, checked before the kernel.
    assert!(matches!(
        g.prepare(stream, a, b, None, &mut d).unwrap_err(),
        Error::InvalidProblem {
            reason: ProblemRule::EpilogueOperandMissing {
                operand: OperandName::Bias
            }
        }
    ));
    let short = stream.alloc_zeros::<f16>(N - 8).unwrap();
    let short_bias = EpilogueOperands {
        bias: Some(&short),
        ..vectors
    };
    assert!(matches!(
        g.prepare_fused(stream, a, b, None, &mut d, &short_bias)
            .unwrap_err(),
        Error::BufferTooSmall {
            operand: OperandName::Bias,
            ..
        }
    ));
    // The same kernel named for a plain plan takes no vector.
    let plain = BlockScaledGemm::<EA, EB, f16>::plan_any_arch(info, &p, name).unwrap();
    assert!(matches!(
        plain
            .prepare_fused(stream, a, b, None, &mut d, &vectors)
            .unwrap_err(),
        Error::InvalidProblem {
            reason: ProblemRule::EpilogueOperandNotTaken {
                operand: OperandName::Bias
            }
        }
    ));
    // Chosen, not named, for a device of the kernel's architecture.
    let arch = g.kernel_spec().arch;
    let cc = if arch == cutlass_gemm::Arch::Sm120a {
        (12, 0)
    } else {
        (10, 0)
    };
    let described = DeviceInfo {
        compute_capability: cc,
        ..info
    };
    let chosen = plan(described, &p, None).unwrap();
    assert!(
        !chosen.kernel_spec().fusion.is_fused(),
        "{}",
        chosen.kernel_name()
    );
    let fused = chosen.with_epilogue(e).unwrap();
    assert!(
        fused.kernel_spec().fusion.is_fused(),
        "{}",
        fused.kernel_name()
    );
    println!(
        "{name}: fused epilogue {} through the host path (workspace {ws} bytes); chosen for {cc:?}: {}",
        e.describe(),
        fused.kernel_name()
    );
}

/// The fused epilogue (bias, activation, row and column scales) on the SM100/SM120 block-scaled
/// kernels of the build (`sm100`, `sm120` families): planned, checked and driven up to the launch.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fused_block_scaled_kernels_take_their_vectors_up_to_the_launch() {
    let (ctx, stream) = gemm_device();
    let info = DeviceInfo::query(&ctx).unwrap();
    let kernels: Vec<_> = built_kernels()
        .iter()
        .filter(|k| {
            k.spec.block_scale.is_some()
                && k.spec.fusion.is_fused()
                && !k.spec.arch.runs_on(info.compute_capability)
        })
        .filter(|k| k.spec.layout_name() == "TN" && k.spec.d.ty == DataType::F16)
        .collect();
    assert!(
        !kernels.is_empty(),
        "this build has no fused block-scaled kernel for another architecture (features sm100, sm120)"
    );
    let (xa, xb) = (input(&stream, M, 5), input(&stream, N, 6));
    for k in &kernels {
        use DataType as T;
        let vec = k.spec.block_scale.unwrap().vec;
        match (vec, k.spec.a.ty, k.spec.b.ty) {
            (16, T::E2M1, T::E2M1) => {
                let a = quantize::quantize_nvfp4(&stream, &xa, M, K).unwrap();
                let b = quantize::quantize_nvfp4(&stream, &xb, N, K).unwrap();
                fused_host_path(k.name, info, &stream, (&a, &b), BlockScaledGemm::plan_nvfp4);
            }
            (32, T::E2M1, T::E2M1) => {
                let a = quantize::quantize_mx::<E2M1, bf16>(&stream, &xa, M, K).unwrap();
                let b = quantize::quantize_mx::<E2M1, bf16>(&stream, &xb, N, K).unwrap();
                fused_host_path(k.name, info, &stream, (&a, &b), BlockScaledGemm::plan_mx);
            }
            (32, T::E4M3, T::E4M3) => {
                let a = quantize::quantize_mx::<E4M3, bf16>(&stream, &xa, M, K).unwrap();
                let b = quantize::quantize_mx::<E4M3, bf16>(&stream, &xb, N, K).unwrap();
                fused_host_path(k.name, info, &stream, (&a, &b), BlockScaledGemm::plan_mx);
            }
            other => panic!("{}: add {other:?} to this test", k.name),
        }
    }
    println!(
        "{} fused block-scaled kernels driven up to the launch",
        kernels.len()
    );
}

/// NVFP4 in, NVFP4 out (`LinCombBlockScaleFactor`): the output tensor's shape and scale layout are
/// checked, the host path runs (up to the FP4 TMA descriptors before SM100), the launch is refused.
#[test]
#[ignore = "needs a CUDA GPU"]
fn nvfp4_output_kernels_run_their_host_path_and_refuse_the_launch() {
    let (ctx, stream) = gemm_device();
    let info = DeviceInfo::query(&ctx).unwrap();
    let kernels: Vec<_> = built_kernels()
        .iter()
        .filter(|k| k.spec.output_scale.is_some() && k.spec.layout_name() == "TN")
        .collect();
    assert!(!kernels.is_empty(), "this build has no NVFP4-output kernel");
    let (xa, xb) = (input(&stream, M, 5), input(&stream, N, 6));
    let a = quantize::quantize_nvfp4(&stream, &xa, M, K).unwrap();
    let b = quantize::quantize_nvfp4(&stream, &xb, N, K).unwrap();
    let p = GemmProblem::new(M, N, K);
    for k in kernels {
        let g = BlockScaledGemm::<E2M1, E2M1, f16>::plan_any_arch(info, &p, k.name).unwrap();
        let mut d = quantize::Nvfp4Tensor::alloc(&stream, M, N).unwrap();
        let ws = expect_host_path(
            k.name,
            g.kernel_spec(),
            &info,
            g.prepare_to_nvfp4(&stream, &a, &b, None, &mut d, 2.0),
        );
        assert!(matches!(
            g.run_to_nvfp4(
                &stream,
                &a,
                &b,
                None,
                &mut d,
                2.0,
                cutlass_gemm::Workspace::Managed
            )
            .unwrap_err(),
            Error::ArchMismatch { .. }
        ));
        // An output of another shape, a bad norm constant, and the plain entry point are refused.
        let mut wrong = quantize::Nvfp4Tensor::alloc(&stream, M, N - 128).unwrap();
        assert!(matches!(
            g.prepare_to_nvfp4(&stream, &a, &b, None, &mut wrong, 2.0)
                .unwrap_err(),
            Error::ScaleMismatch {
                operand: OperandName::D,
                rule: ScaleRule::OutputLayout { .. },
            }
        ));
        match g
            .prepare_to_nvfp4(&stream, &a, &b, None, &mut d, 0.0)
            .unwrap_err()
        {
            Error::InvalidProblem { reason } => {
                assert_eq!(reason, ProblemRule::NormConstant { value: Scalar(0.0) })
            }
            e => panic!("{}: unexpected {e:?}", k.name),
        }
        let mut plain = stream.alloc_zeros::<f16>(M * N).unwrap();
        assert!(matches!(
            g.prepare(&stream, &a, &b, None, &mut plain).unwrap_err(),
            Error::ScaleMismatch {
                operand: OperandName::D,
                rule: ScaleRule::OutputIsNvfp4,
            }
        ));
        println!(
            "{}: NVFP4-output host path checked (workspace {ws} bytes), launch refused",
            k.name
        );
    }
}

fn host_values(len: usize, seed: u32) -> Vec<f32> {
    (0..len)
        .map(|i| {
            let x = (i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8;
            (x % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// `from_host` (host quantization, K-major) uploads exactly what the GPU quantizers write: an
/// independent check of the host packing and swizzling against the device kernels.
#[test]
#[ignore = "needs a CUDA GPU"]
fn host_uploads_equal_gpu_quantization() {
    use cutlass_gemm::quantize::host;
    use cutlass_gemm::quantize::{Major, MxTensor, Nvfp4Tensor};
    let (_ctx, stream) = gemm_device();
    let (rows, k) = (300, 512);
    let x = host_values(rows * k, 7);
    let xd = stream
        .clone_htod(&x.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>())
        .unwrap();
    // The host quantizers take f32: feed them the bf16 values the GPU sees.
    let xh: Vec<f32> = x.iter().map(|&v| bf16::from_f32(v).to_f32()).collect();
    let gpu = quantize::quantize_mx::<E2M1, bf16>(&stream, &xd, rows, k).unwrap();
    let host =
        MxTensor::<E2M1>::from_host(&stream, &host::quantize_mx(&xh, rows, k), Major::K).unwrap();
    assert_eq!(
        stream.clone_dtoh(&gpu.data).unwrap(),
        stream.clone_dtoh(&host.data).unwrap()
    );
    let (gs, hs) = (
        stream.clone_dtoh(&gpu.scales).unwrap(),
        stream.clone_dtoh(&host.scales).unwrap(),
    );
    // Padding entries of the swizzled layout are not part of the tensor: compare the real ones.
    let l = gpu.layout;
    assert_eq!(l.unswizzle(&gs), l.unswizzle(&hs));
    let gpu = quantize::quantize_nvfp4(&stream, &xd, rows, k).unwrap();
    let hq = host::quantize_nvfp4(&xh, rows, k);
    let host = Nvfp4Tensor::from_host(&stream, &hq, Major::K).unwrap();
    assert_eq!(
        stream.clone_dtoh(&gpu.data).unwrap(),
        stream.clone_dtoh(&host.data).unwrap()
    );
    let l = gpu.layout;
    assert_eq!(
        l.unswizzle(&stream.clone_dtoh(&gpu.scales).unwrap()),
        l.unswizzle(&stream.clone_dtoh(&host.scales).unwrap())
    );
    let (g1, g2) = (
        gpu.global_scale(&stream).unwrap(),
        host.global_scale(&stream).unwrap(),
    );
    assert!((g1 - g2).abs() <= g1 * 2.0 * f32::EPSILON, "{g1} vs {g2}");
    // MN-major tensors are for GEMMs; the K-major dequantizer refuses them.
    let mn =
        MxTensor::<E2M1>::from_host(&stream, &host::quantize_mx(&xh, rows, k), Major::MN).unwrap();
    assert!(matches!(
        mn.dequantize(&stream).unwrap_err(),
        Error::UnsupportedLayout {
            operand: OperandName::A,
            rule: LayoutRule::QuantizerKMajor(cutlass_gemm::QuantizeOp::DequantizeMx),
        }
    ));
    println!("{rows} x {k}: MXFP4 and NVFP4 uploads equal the GPU quantizers' bytes");
}

/// The seed's walkthrough (MXFP4 x MXFP4, NT, D NVFP4) through the safe API: MN-major operands
/// uploaded from the host, the host path run, the launch refused off SM100.
#[test]
#[ignore = "needs a CUDA GPU"]
fn walkthrough_kernel_through_the_safe_api() {
    use cutlass_gemm::quantize::host;
    use cutlass_gemm::quantize::{Major, MxTensor, Nvfp4Tensor};
    let (ctx, stream) = gemm_device();
    let info = DeviceInfo::query(&ctx).unwrap();
    let Some(k) = built_kernels()
        .iter()
        .find(|k| k.spec.output_scale.is_some() && k.spec.layout_name() == "NT")
    else {
        panic!("this build has no NT NVFP4-output kernel (the walkthrough's)");
    };
    let (m, n, kk) = (512, 384, 1024);
    let p = GemmProblem::new(m, n, kk)
        .with_a(cutlass_gemm::MatrixLayout::col_major())
        .with_b(cutlass_gemm::MatrixLayout::row_major());
    let qa = host::quantize_mx::<E2M1>(&host_values(m * kk, 1), m, kk);
    let qb = host::quantize_mx::<E2M1>(&host_values(n * kk, 2), n, kk);
    let a = MxTensor::from_host(&stream, &qa, Major::MN).unwrap();
    let b = MxTensor::from_host(&stream, &qb, Major::MN).unwrap();
    let g = BlockScaledGemm::<E2M1, E2M1, f16>::plan_any_arch(info, &p, k.name).unwrap();
    let mut d = Nvfp4Tensor::alloc(&stream, m, n).unwrap();
    let ws = expect_host_path(
        k.name,
        g.kernel_spec(),
        &info,
        g.prepare_to_nvfp4(&stream, &a, &b, None, &mut d, 1.0),
    );
    assert!(matches!(
        g.run_to_nvfp4(
            &stream,
            &a,
            &b,
            None,
            &mut d,
            1.0,
            cutlass_gemm::Workspace::Managed
        )
        .unwrap_err(),
        Error::ArchMismatch { .. }
    ));
    // K-major operands on an NT plan, and a plain D, are refused before the kernel.
    let ak = MxTensor::from_host(&stream, &qa, Major::K).unwrap();
    assert!(matches!(
        g.prepare_to_nvfp4(&stream, &ak, &b, None, &mut d, 1.0)
            .unwrap_err(),
        Error::UnsupportedLayout {
            operand: OperandName::A,
            rule: LayoutRule::TensorMajor {
                required: Major::MN,
                found: Major::K,
            },
        }
    ));
    let mut plain = stream.alloc_zeros::<f16>(m * n).unwrap();
    assert!(matches!(
        g.prepare(&stream, &a, &b, None, &mut plain).unwrap_err(),
        Error::ScaleMismatch {
            operand: OperandName::D,
            rule: ScaleRule::OutputIsNvfp4,
        }
    ));
    println!(
        "{}: MX NT -> NVFP4 host path checked (workspace {ws} bytes), launch refused",
        k.name
    );
}

/// FP4 x FP8 without block scales (Table 2's f8f6f4 kind) through the safe API.
#[test]
#[ignore = "needs a CUDA GPU"]
fn plain_narrow_kernels_through_the_safe_api() {
    use cutlass_gemm::quantize::{Major, PackedTensor};
    let (ctx, stream) = gemm_device();
    let info = DeviceInfo::query(&ctx).unwrap();
    let kernels: Vec<_> = built_kernels()
        .iter()
        .filter(|k| {
            k.spec.block_scale.is_none()
                && !k.spec.op_class.is_sparse()
                && (k.spec.a.ty.bits() < 8 || k.spec.b.ty.bits() < 8)
        })
        .collect();
    assert!(!kernels.is_empty(), "this build has no FP6/FP4 kernel");
    for k in kernels {
        use DataType as T;
        assert_eq!(
            (k.spec.a.ty, k.spec.b.ty, k.spec.d.ty, k.spec.layout_name()),
            (T::E2M1, T::E4M3, T::F16, "TN".to_string()),
            "add this kernel's types to the test"
        );
        let (m, n, kk) = (512, 384, 1024);
        let p = GemmProblem::new(m, n, kk);
        let ea: Vec<E2M1> = host_values(m * kk, 3)
            .iter()
            .map(|&v| E2M1::from_f32(v * 6.0))
            .collect();
        let eb: Vec<E4M3> = host_values(n * kk, 4)
            .iter()
            .map(|&v| E4M3::from_f32(v))
            .collect();
        let a = PackedTensor::from_host(&stream, &ea, m, kk, Major::K).unwrap();
        let b = PackedTensor::from_host(&stream, &eb, n, kk, Major::K).unwrap();
        assert!(matches!(
            BlockScaledGemm::<E2M1, E4M3, f16>::plan_plain(info, &p, Some(k.name)).unwrap_err(),
            Error::ArchMismatch { .. }
        ));
        let g = BlockScaledGemm::<E2M1, E4M3, f16>::plan_any_arch(info, &p, k.name).unwrap();
        assert!(g.scale_layouts().is_none());
        let mut d = stream.alloc_zeros::<f16>(m * n).unwrap();
        let ws = expect_host_path(
            k.name,
            g.kernel_spec(),
            &info,
            g.prepare(&stream, &a, &b, None, &mut d),
        );
        assert!(matches!(
            g.run(
                &stream,
                &a,
                &b,
                None,
                &mut d,
                cutlass_gemm::Workspace::Managed
            )
            .unwrap_err(),
            Error::ArchMismatch { .. }
        ));
        // An MX tensor on a plain plan: refused by its scale family.
        let xa = input(&stream, m, 9);
        let ma = quantize::quantize_mx::<E2M1, bf16>(&stream, &xa, m, K).unwrap();
        assert!(matches!(
            g.prepare(&stream, &ma, &b, None, &mut d).unwrap_err(),
            Error::ScaleMismatch {
                operand: OperandName::ScalesA,
                rule: ScaleRule::Family {
                    required: ScaleFamily::Plain,
                    found: ScaleFamily::Mx,
                },
            }
        ));
        println!(
            "{}: plain FP4 x FP8 host path ok (workspace {ws} bytes), launch refused",
            k.name
        );
    }
}
