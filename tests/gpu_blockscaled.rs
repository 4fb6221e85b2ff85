//! Block-scaled (MX, NVFP4) SM100/SM120 kernels through the safe API on a non-Blackwell GPU:
//! operands quantized on this GPU, every check and CUTLASS's host path (can_implement, workspace,
//! kernel parameters with TMA descriptors for the real buffers) run, and the launch refused with
//! the architecture error. `#[ignore = "needs a CUDA GPU"]`; fails when asked to run without one,
//! or when the build has no block-scaled kernel (build with `CUTLASS_RS_ARCHS=90a,100a,120a` and
//! `CUTLASS_RS_KERNELS=default,<block-scaled names>`).

mod common;
use common::*;

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use cutlass::numeric::{E2M1, E2M3, E3M2, E4M3, E5M2};
use cutlass::quantize::{self, MxElement};
use cutlass::{
    built_kernels, BlockScaledGemm, DataType, DeviceInfo, Error, GemmProblem, OperandName,
};
use half::{bf16, f16};

/// The host path's result: the workspace size, or, for sub-byte operands before SM100, the
/// driver's refusal of TMA's unpacking data types (everything before that descriptor ran).
fn expect_host_path(
    name: &str,
    spec: &cutlass::KernelSpec,
    info: &DeviceInfo,
    r: cutlass::Result<usize>,
) -> usize {
    let sub_byte = (spec.a.ty.bits() < 8 || spec.b.ty.bits() < 8) && info.compute_capability.0 < 10;
    match r {
        Ok(ws) if !sub_byte => ws,
        Err(Error::Cutlass { status, .. })
            if sub_byte && status == cutlass::sys::CUTLASS_RS_ERROR_TMA_DESCRIPTOR =>
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
        g.prepare_mx(stream, &a, &b, None, &mut d),
    );
    match g
        .run_mx(stream, &a, &b, None, &mut d, cutlass::Workspace::Managed)
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
    assert!(matches!(
        g.prepare_mx(stream, &a, &short, None, &mut d).unwrap_err(),
        Error::InvalidProblem { .. }
    ));
    // D too small.
    let mut small = stream.alloc_zeros::<f16>(M * N - 1).unwrap();
    assert!(matches!(
        g.prepare_mx(stream, &a, &b, None, &mut small).unwrap_err(),
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
    let (ctx, stream) = device();
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
                g.prepare_nvfp4(&stream, &a, &b, None, &mut d),
            );
            assert!(matches!(
                g.run_nvfp4(&stream, &a, &b, None, &mut d, cutlass::Workspace::Managed)
                    .unwrap_err(),
                Error::ArchMismatch { .. }
            ));
            // MX operands on an NVFP4 plan: the scale family is checked.
            let ma = quantize::quantize_mx::<E2M1, bf16>(&stream, &xa, M, K).unwrap();
            let mb = quantize::quantize_mx::<E2M1, bf16>(&stream, &xb, N, K).unwrap();
            assert!(matches!(
                g.prepare_mx(&stream, &ma, &mb, None, &mut d).unwrap_err(),
                Error::ScaleMismatch { .. }
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

/// NVFP4 in, NVFP4 out (`LinCombBlockScaleFactor`): the output tensor's shape and scale layout are
/// checked, the host path runs (up to the FP4 TMA descriptors before SM100), the launch is refused.
#[test]
#[ignore = "needs a CUDA GPU"]
fn nvfp4_output_kernels_run_their_host_path_and_refuse_the_launch() {
    let (ctx, stream) = device();
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
            g.prepare_nvfp4_to_nvfp4(&stream, &a, &b, None, &mut d, 2.0),
        );
        assert!(matches!(
            g.run_nvfp4_to_nvfp4(
                &stream,
                &a,
                &b,
                None,
                &mut d,
                2.0,
                cutlass::Workspace::Managed
            )
            .unwrap_err(),
            Error::ArchMismatch { .. }
        ));
        // An output of another shape, a bad norm constant, and the plain entry point are refused.
        let mut wrong = quantize::Nvfp4Tensor::alloc(&stream, M, N - 128).unwrap();
        assert!(matches!(
            g.prepare_nvfp4_to_nvfp4(&stream, &a, &b, None, &mut wrong, 2.0)
                .unwrap_err(),
            Error::ScaleMismatch {
                operand: OperandName::D,
                ..
            }
        ));
        assert!(matches!(
            g.prepare_nvfp4_to_nvfp4(&stream, &a, &b, None, &mut d, 0.0)
                .unwrap_err(),
            Error::InvalidProblem { .. }
        ));
        let mut plain = stream.alloc_zeros::<f16>(M * N).unwrap();
        assert!(matches!(
            g.prepare_nvfp4(&stream, &a, &b, None, &mut plain)
                .unwrap_err(),
            Error::ScaleMismatch {
                operand: OperandName::D,
                ..
            }
        ));
        println!(
            "{}: NVFP4-output host path checked (workspace {ws} bytes), launch refused",
            k.name
        );
    }
}
