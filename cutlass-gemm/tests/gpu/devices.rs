//! Several GPUs in one process: plans for device 1, the same shape planned on two devices and run
//! alternately from one thread and from two, the per-device caches (function attributes, launch
//! states, candle's plans in `candle.rs`), and buffers or streams of another device refused before
//! any launch.
//!
//! Every test here needs two GPUs and is `#[ignore = "needs two CUDA GPUs"]`; asked to run with
//! fewer it fails and says so (skip them, and candle's two-device test, with `--skip devices` on a one-GPU machine).
//!
//! Inputs are small integers ({-1, 0, 1}): the f32 accumulation is exact, so every launch's D must
//! equal the f64 reference rounded once to bf16, bit for bit. D is poisoned before every launch.

use crate::common::*;

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use cutlass_gemm::formats::scale_layout::ScaleMajor;
use cutlass_gemm::numeric::E4M3;
use cutlass_gemm::quantize::{quantize_fp8_blockwise, Fp8Block};
use cutlass_gemm::{
    ffi, BlockwiseGemm, Epilogue, EpilogueOperands, Error, Gemm, GemmProblem, OperandName,
    Workspace,
};
use half::bf16;
use rand::Rng;

/// Devices 0 and 1 with a stream each; fails (never skips) with fewer than two GPUs.
pub fn two_devices() -> [(Arc<CudaContext>, Arc<CudaStream>); 2] {
    assert!(
        cutlass_gemm::cuda_available(),
        "this test needs two CUDA GPUs (none found)"
    );
    let count = CudaContext::device_count().expect("device count");
    assert!(
        count >= 2,
        "this test needs two CUDA GPUs, found {count} (skip the multi-GPU tests with --skip devices)"
    );
    [0, 1].map(|i| {
        let ctx = CudaContext::new(i).expect("CUDA context");
        let stream = ctx.new_stream().expect("stream");
        (ctx, stream)
    })
}

fn problem() -> GemmProblem {
    GemmProblem::new(256, 512, 1024)
}

/// The same shape planned on both devices with the same kernel (the second plan pins the first's,
/// so that the two share the kernel's per-device caches).
fn plans_on_both(
    devices: &[(Arc<CudaContext>, Arc<CudaStream>); 2],
) -> [Arc<Gemm<bf16, bf16, bf16>>; 2] {
    let p = problem();
    let g0 = Gemm::<bf16, bf16, bf16>::new(&devices[0].0, &p).unwrap();
    let g1 = Gemm::<bf16, bf16, bf16>::with_kernel(&devices[1].0, &p, g0.kernel_name()).unwrap();
    [Arc::new(g0), Arc::new(g1)]
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn plans_for_device_1_run_on_device_1() {
    let devices = two_devices();
    let (ctx, stream) = &devices[1];
    let mut rng = rng();
    // bf16 through the planner, with an odd shape that stages operands in the workspace.
    for p in [problem(), GemmProblem::new(257, 1001, 4095)] {
        let g = Gemm::<bf16, bf16, bf16>::new(ctx, &p).unwrap();
        let mut ops = ExactOperands::new(stream, &mut rng, &p, g.workspace_size());
        ops.run_and_check(&g, stream, &format!("device 1, {} {p:?}", g.kernel_name()));
    }
    // FP8 blockwise: the GPU quantizers and the blockwise kernel on device 1 give the same bits as
    // on device 0.
    let (m, n, k) = (384, 1024, 2048);
    let x: Vec<bf16> = (0..m * k)
        .map(|_| bf16::from_f32(rng.random_range(-2.0f32..2.0)))
        .collect();
    let w: Vec<bf16> = (0..n * k)
        .map(|_| bf16::from_f32(rng.random_range(-2.0f32..2.0)))
        .collect();
    let mut results = Vec::new();
    for (ctx, stream) in &devices {
        let dx = stream.clone_htod(&x).unwrap();
        let dw = stream.clone_htod(&w).unwrap();
        let qx = quantize_fp8_blockwise(stream, &dx, m, k, Fp8Block::Group1x128, ScaleMajor::MN)
            .unwrap();
        let qw = quantize_fp8_blockwise(stream, &dw, n, k, Fp8Block::Block128x128, ScaleMajor::MN)
            .unwrap();
        let g = BlockwiseGemm::<E4M3, E4M3, bf16>::new(ctx, &GemmProblem::new(m, n, k)).unwrap();
        let mut y = stream.alloc_zeros::<bf16>(m * n).unwrap();
        g.run_tensors(stream, &qx, &qw, None, &mut y, Workspace::Managed)
            .unwrap();
        let y = stream.clone_dtoh(&y).unwrap();
        assert!(
            y.iter().any(|v| v.to_f32() != 0.0),
            "device {}: D is all zeros",
            ctx.ordinal()
        );
        results.push(y.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }
    let differ = results[0]
        .iter()
        .zip(&results[1])
        .filter(|(a, b)| a != b)
        .count();
    assert_eq!(
        differ, 0,
        "FP8 blockwise: {differ} elements differ between device 0 and device 1"
    );
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn alternating_devices_from_one_thread() {
    let devices = two_devices();
    let plans = plans_on_both(&devices);
    let mut rng = rng();
    // Different inputs on each device, so that a launch reading the other device's state or
    // buffers would give the other device's result.
    let mut ops: Vec<ExactOperands> = devices
        .iter()
        .zip(&plans)
        .map(|((_, s), g)| ExactOperands::new(s, &mut rng, &problem(), g.workspace_size()))
        .collect();
    // The first launch of the kernel on each device sets its function attributes there (the
    // shared-memory opt-in): attributes kept for one device only would fail device 1's launch.
    let builds_before = ffi::launch_state_builds();
    const ROUNDS: usize = 1000;
    for round in 0..ROUNDS {
        for dev in 0..2 {
            let what = format!("round {round}, device {dev}, {}", plans[dev].kernel_name());
            ops[dev].run_and_check(&plans[dev], &devices[dev].1, &what);
        }
    }
    // One launch state per device, each built once: states not kept per device would be rebuilt
    // at every switch (2 x ROUNDS builds).
    let builds = ffi::launch_state_builds() - builds_before;
    assert_eq!(
        builds,
        2,
        "{} launches alternating between two devices built the launch state {builds} times",
        2 * ROUNDS
    );
    println!(
        "{} launches alternating between devices, every D exact, {builds} launch-state builds",
        2 * ROUNDS
    );
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn alternating_devices_from_two_threads() {
    let devices = two_devices();
    let plans = plans_on_both(&devices);
    const ROUNDS: usize = 500;
    std::thread::scope(|scope| {
        for t in 0..2 {
            let plans = &plans;
            let devices = &devices;
            scope.spawn(move || {
                let mut rng = rng();
                // Each thread has its own streams and buffers on both devices and shares the plans.
                let streams: Vec<Arc<CudaStream>> = devices
                    .iter()
                    .map(|(c, _)| c.new_stream().unwrap())
                    .collect();
                let mut ops: Vec<ExactOperands> = streams
                    .iter()
                    .zip(plans)
                    .map(|(s, g)| ExactOperands::new(s, &mut rng, &problem(), g.workspace_size()))
                    .collect();
                let before = ffi::launch_state_builds();
                for round in 0..ROUNDS {
                    // Thread 1 starts on the other device, so both devices are busy at once.
                    for step in 0..2 {
                        let dev = (step + t) % 2;
                        let what = format!("thread {t}, round {round}, device {dev}");
                        ops[dev].run_and_check(&plans[dev], &streams[dev], &what);
                    }
                }
                let builds = ffi::launch_state_builds() - before;
                assert_eq!(builds, 2, "thread {t}: {builds} launch-state builds");
            });
        }
    });
    println!(
        "2 threads x {} launches on two devices, every D exact",
        2 * ROUNDS
    );
}

/// Asserts a device mismatch naming `what` with the plan's and the buffer's ordinals.
fn assert_mismatch<T>(
    r: cutlass_gemm::Result<T>,
    what: OperandName,
    expected: usize,
    found: usize,
) {
    match r {
        Err(Error::DeviceMismatch {
            what: w,
            expected: e,
            found: f,
        }) => assert_eq!((w, e, f), (what, expected, found)),
        Err(e) => panic!("{what}: expected DeviceMismatch, got {e}"),
        Ok(_) => panic!("{what}: a buffer of another device was accepted"),
    }
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn buffers_and_streams_of_another_device_are_refused() {
    let devices = two_devices();
    let [(ctx0, s0), (_ctx1, s1)] = &devices;
    let p = problem();
    let g = Gemm::<bf16, bf16, bf16>::new(ctx0, &p).unwrap();
    let poison = vec![bf16::from_bits(0x7fc1); p.m * p.n];
    let on = |s: &Arc<CudaStream>, len: usize| s.alloc_zeros::<bf16>(len).unwrap();
    let (a0, b0) = (on(s0, p.m * p.k), on(s0, p.k * p.n));
    let (a1, b1, c1) = (on(s1, p.m * p.k), on(s1, p.k * p.n), on(s1, p.m * p.n));
    let mut d0: CudaSlice<bf16> = s0.clone_htod(&poison).unwrap();
    let mut d1: CudaSlice<bf16> = s1.clone_htod(&poison).unwrap();
    let still_poison = |d: &CudaSlice<bf16>, s: &Arc<CudaStream>| {
        let v = s.clone_dtoh(d).unwrap();
        assert!(v.iter().all(|x| x.to_bits() == 0x7fc1), "D was written");
    };

    assert_mismatch(
        g.run(s1, &a1, &b1, None, &mut d1, Workspace::Managed),
        OperandName::Stream,
        0,
        1,
    );
    assert_mismatch(
        g.run(s0, &a1, &b0, None, &mut d0, Workspace::Managed),
        OperandName::A,
        0,
        1,
    );
    assert_mismatch(
        g.run(s0, &a0, &b1, None, &mut d0, Workspace::Managed),
        OperandName::B,
        0,
        1,
    );
    let with_c = Gemm::<bf16, bf16, bf16>::new(ctx0, &p.with_scalars(1.0, 1.0)).unwrap();
    assert_mismatch(
        with_c.run(s0, &a0, &b0, Some(&c1), &mut d0, Workspace::Managed),
        OperandName::C,
        0,
        1,
    );
    assert_mismatch(
        g.run(s0, &a0, &b0, None, &mut d1, Workspace::Managed),
        OperandName::D,
        0,
        1,
    );
    let mut ws1 = s1.alloc_zeros::<u8>(g.workspace_size().max(16)).unwrap();
    assert_mismatch(
        g.run(s0, &a0, &b0, None, &mut d0, Workspace::Buffer(&mut ws1)),
        OperandName::Workspace,
        0,
        1,
    );
    // A fused epilogue's vectors.
    let fused = Gemm::<bf16, bf16, bf16>::new(ctx0, &p)
        .unwrap()
        .with_epilogue(Epilogue::bias())
        .unwrap();
    let bias1 = on(s1, p.n);
    assert_mismatch(
        fused.run_fused(
            s0,
            &a0,
            &b0,
            None,
            &mut d0,
            &EpilogueOperands::bias(&bias1),
            Workspace::Managed,
        ),
        OperandName::Bias,
        0,
        1,
    );
    // Blockwise scales, and the quantizer's input.
    let (m, n, k) = (128, 256, 512);
    let x0 = on(s0, m * k);
    let x1 = on(s1, m * k);
    assert_mismatch(
        quantize_fp8_blockwise(s0, &x1, m, k, Fp8Block::Group1x128, ScaleMajor::MN),
        OperandName::A,
        0,
        1,
    );
    let qx0 = quantize_fp8_blockwise(s0, &x0, m, k, Fp8Block::Group1x128, ScaleMajor::MN).unwrap();
    let w1 = on(s1, n * k);
    let qw1 =
        quantize_fp8_blockwise(s1, &w1, n, k, Fp8Block::Block128x128, ScaleMajor::MN).unwrap();
    let bw = BlockwiseGemm::<E4M3, E4M3, bf16>::new(ctx0, &GemmProblem::new(m, n, k)).unwrap();
    let mut y0: CudaSlice<bf16> = s0
        .clone_htod(&vec![bf16::from_bits(0x7fc1); m * n])
        .unwrap();
    assert_mismatch(
        bw.run_tensors(s0, &qx0, &qw1, None, &mut y0, Workspace::Managed),
        OperandName::B,
        0,
        1,
    );
    // The same plan with its raw entry point: A's scales on device 1.
    let x1q = quantize_fp8_blockwise(s1, &x1, m, k, Fp8Block::Group1x128, ScaleMajor::MN).unwrap();
    let w0 = on(s0, n * k);
    let qw0 =
        quantize_fp8_blockwise(s0, &w0, n, k, Fp8Block::Block128x128, ScaleMajor::MN).unwrap();
    let mut mixed =
        quantize_fp8_blockwise(s0, &x0, m, k, Fp8Block::Group1x128, ScaleMajor::MN).unwrap();
    mixed.scales = x1q.scales;
    assert_mismatch(
        bw.run_tensors(s0, &mixed, &qw0, None, &mut y0, Workspace::Managed),
        OperandName::ScalesA,
        0,
        1,
    );
    // FP8 rowwise: scales per row of D on device 1.
    let rowwise = Gemm::<E4M3, E4M3, bf16>::new(ctx0, &GemmProblem::new(m, n, k))
        .unwrap()
        .with_epilogue(Epilogue::rowwise())
        .unwrap();
    let rows1 = s1.alloc_zeros::<f32>(m).unwrap();
    let cols0 = s0.alloc_zeros::<f32>(n).unwrap();
    let vectors = EpilogueOperands {
        row_scales: Some(&rows1),
        col_scales: Some(&cols0),
        ..Default::default()
    };
    assert_mismatch(
        rowwise.run_fused(
            s0,
            &qx0.data,
            &qw0.data,
            None,
            &mut y0,
            &vectors,
            Workspace::Managed,
        ),
        OperandName::RowScales,
        0,
        1,
    );
    // The unfused epilogue pass and the dequantizer.
    assert_mismatch(
        cutlass_gemm::plans::epilogue::apply_unfused(
            s0,
            &mut d1,
            (p.m, p.n, p.n),
            None,
            cutlass_gemm::Activation::Relu,
        ),
        OperandName::D,
        0,
        1,
    );
    assert_mismatch(qw1.dequantize(s0), OperandName::A, 0, 1);
    still_poison(&d0, s0);
    still_poison(&d1, s1);
    still_poison(&y0, s0);

    // The raw entry point trusts its caller for buffers, but not for the thread's current device:
    // with device 1's context current, a launch of a device-0 plan is refused before anything is
    // launched, also for a plan that stages operands through copies before its kernel.
    let staged = GemmProblem::new(257, 1001, 4095);
    for (q, plan) in [
        (p, Gemm::<bf16, bf16, bf16>::new(ctx0, &p).unwrap()),
        (
            staged,
            Gemm::<bf16, bf16, bf16>::new(ctx0, &staged).unwrap(),
        ),
    ] {
        let ws = plan.workspace_size();
        let ra = on(s0, q.m * q.k);
        let rb = on(s0, q.k * q.n);
        let mut rd: CudaSlice<bf16> = s0
            .clone_htod(&vec![bf16::from_bits(0x7fc1); q.m * q.n])
            .unwrap();
        let mut wsb = s0.alloc_zeros::<u8>(ws.max(16)).unwrap();
        {
            let (pa, _ga) = cudarc::driver::DevicePtr::device_ptr(&ra, s0);
            let (pb, _gb) = cudarc::driver::DevicePtr::device_ptr(&rb, s0);
            let (pd, _gd) = cudarc::driver::DevicePtrMut::device_ptr_mut(&mut rd, s0);
            let (pw, _gw) = cudarc::driver::DevicePtrMut::device_ptr_mut(&mut wsb, s0);
            devices[1].0.bind_to_thread().unwrap();
            // SAFETY: device-0 buffers of the planned extents; the launch is refused first.
            let r = unsafe { plan.run_raw(pa, pb, None, pd, pw, ws, s0.cu_stream()) };
            assert_mismatch(r, OperandName::CurrentContext, 0, 1);
            ctx0.bind_to_thread().unwrap();
        }
        still_poison(&rd, s0);
    }

    // After all these refusals, device 0 still runs a checked GEMM (no error was left behind in
    // its context), and so does device 1.
    let mut rng = rng();
    for (ctx, stream) in &devices {
        let g = Gemm::<bf16, bf16, bf16>::new(ctx, &p).unwrap();
        let mut ops = ExactOperands::new(stream, &mut rng, &p, g.workspace_size());
        ops.run_and_check(
            &g,
            stream,
            &format!("device {} after the refusals", ctx.ordinal()),
        );
    }
}
