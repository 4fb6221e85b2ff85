//! Threads and streams on one GPU: one plan shared by eight threads, the per-thread launch-state
//! cache under interleaved shapes and buffers, and plans and buffers dropped while their work is in
//! flight.
//!
//! Inputs are in {-1, 0, 1} (`common::ExactOperands`): every D must equal the f64 reference rounded
//! once, bit for bit, and D is poisoned before every launch.

use crate::common::*;

use std::sync::Arc;

use cudarc::driver::CudaStream;
use cutlass_gemm::{ffi, Gemm, GemmProblem, Workspace};
use half::bf16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[test]
#[ignore = "needs a CUDA GPU"]
fn one_plan_shared_by_eight_threads() {
    let (ctx, _) = device();
    let p = GemmProblem::new(256, 512, 1024);
    let gemm = Arc::new(Gemm::<bf16, bf16, bf16>::new(&ctx, &p).unwrap());
    const THREADS: usize = 8;
    const LAUNCHES: usize = 250;
    let seeds: Vec<u64> = {
        let mut r = rng();
        (0..THREADS).map(|_| r.random()).collect()
    };
    std::thread::scope(|scope| {
        for (t, &seed) in seeds.iter().enumerate() {
            let (ctx, gemm) = (&ctx, &gemm);
            scope.spawn(move || {
                // Each thread: its own stream and buffers (its own inputs), the shared plan.
                let stream = ctx.new_stream().unwrap();
                let mut rng = StdRng::seed_from_u64(seed);
                let mut ops = ExactOperands::new(&stream, &mut rng, &p, gemm.workspace_size());
                let before = ffi::launch_state_builds();
                for i in 0..LAUNCHES {
                    ops.run_and_check(gemm, &stream, &format!("thread {t}, launch {i}"));
                }
                // The launch state is the thread's own: built once, reused by every later launch.
                assert_eq!(ffi::launch_state_builds() - before, 1, "thread {t}");
            });
        }
    });
    println!(
        "{THREADS} threads x {LAUNCHES} launches of one plan ({}), every D exact",
        gemm.kernel_name()
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn launch_cache_with_interleaved_shapes_and_buffers() {
    let (ctx, stream) = device();
    let mut rng = rng();
    // Three shapes pinned to one kernel, so that they share its per-thread launch state, and two
    // sets of buffers for each: a state reused for other arguments would write the wrong D.
    let shapes = [
        GemmProblem::new(128, 256, 512),
        GemmProblem::new(384, 128, 1024),
        GemmProblem::new(64, 640, 256),
    ];
    let first = Gemm::<bf16, bf16, bf16>::new(&ctx, &shapes[0]).unwrap();
    let plans: Vec<Gemm<bf16, bf16, bf16>> = shapes
        .iter()
        .map(|p| Gemm::with_kernel(&ctx, p, first.kernel_name()).unwrap())
        .collect();
    let mut ops: Vec<[ExactOperands; 2]> = shapes
        .iter()
        .zip(&plans)
        .map(|(p, g)| [0, 1].map(|_| ExactOperands::new(&stream, &mut rng, p, g.workspace_size())))
        .collect();
    let before = ffi::launch_state_builds();
    let mut previous = None;
    let mut switches = 0;
    for i in 0..600 {
        let (s, b) = (rng.random_range(0..3), rng.random_range(0..2));
        if previous != Some((s, b)) {
            switches += 1;
        }
        previous = Some((s, b));
        let what = format!("launch {i}, shape {:?}, buffers {b}", shapes[s]);
        ops[s][b].run_and_check(&plans[s], &stream, &what);
    }
    // One state per thread, kernel and device: every change of shape or buffers rebuilds it, and
    // a repeat of the same arguments reuses it.
    let builds = ffi::launch_state_builds() - before;
    assert_eq!(
        builds, switches,
        "600 launches, {switches} changes of arguments"
    );
    println!("600 interleaved launches of 3 shapes x 2 buffer sets, every D exact, {builds} launch-state builds");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn plans_and_buffers_dropped_while_work_is_in_flight() {
    let (ctx, _) = device();
    let stream: Arc<CudaStream> = ctx.new_stream().unwrap();
    let mut rng = rng();
    let p = GemmProblem::new(2048, 2048, 4096);
    let a = ternary(&mut rng, p.m * p.k);
    let b = ternary(&mut rng, p.k * p.n);
    let mut d = stream.alloc_zeros::<bf16>(p.m * p.n).unwrap();
    for round in 0..4 {
        // The plan, the inputs and a managed workspace all go out of scope right after the launch
        // is queued; the stream still holds the work (cudarc frees device memory stream-ordered).
        {
            let gemm = Gemm::<bf16, bf16, bf16>::new(&ctx, &p).unwrap();
            let da = stream.clone_htod(&a).unwrap();
            let db = stream.clone_htod(&b).unwrap();
            stream
                .memcpy_htod(&vec![bf16::from_bits(0x7fc1); p.m * p.n], &mut d)
                .unwrap();
            gemm.run(&stream, &da, &db, None, &mut d, Workspace::Managed)
                .unwrap();
        }
        let got = stream.clone_dtoh(&d).unwrap();
        // Rows spread over D, against exact dot products rounded once.
        for i in [0, 1, p.m / 2, p.m - 1] {
            for j in 0..p.n {
                let dot: f32 = (0..p.k)
                    .map(|q| a[i * p.k + q].to_f32() * b[j * p.k + q].to_f32())
                    .sum();
                assert_eq!(
                    got[i * p.n + j].to_bits(),
                    bf16::from_f32(dot).to_bits(),
                    "round {round}: D[{i}][{j}]"
                );
            }
        }
        assert!(
            got.iter().all(|v| v.to_bits() != 0x7fc1),
            "round {round}: D was not written everywhere"
        );
    }
}
