//! Faults: a managed workspace that cannot be allocated is a typed error, nothing is launched, and
//! the plan runs correctly once memory is free again; a workspace full of NaN bytes never reaches
//! D.

use crate::common::*;

use cudarc::driver::result;
use cutlass_gemm::{Error, Gemm, GemmProblem, OperandName, Workspace};
use half::bf16;
use rand::Rng;

/// Allocates device memory until the driver refuses even small blocks; the blocks are freed when
/// the value is dropped.
struct Hog(Vec<cudarc::driver::sys::CUdeviceptr>);

impl Hog {
    fn fill() -> Hog {
        let mut blocks = Vec::new();
        let mut size: usize = 1 << 30;
        while size >= 64 << 10 {
            // SAFETY: plain device allocations, freed in drop; nothing reads them.
            match unsafe { result::malloc_sync(size) } {
                Ok(p) => blocks.push(p),
                Err(_) => size /= 2,
            }
        }
        Hog(blocks)
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        for &p in &self.0 {
            // SAFETY: allocated by malloc_sync above, freed once.
            unsafe { result::free_sync(p) }.unwrap();
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn workspace_out_of_memory_is_a_typed_error_and_the_plan_stays_usable() {
    let (ctx, stream) = device();
    let mut rng = rng();
    // k off the 8-element alignment: A and B are staged through padded copies in the workspace,
    // large enough (64 MiB) that no slack of the stream-ordered pool can hold it.
    let p = GemmProblem::new(64, 8192, 4095);
    let gemm = Gemm::<bf16, bf16, bf16>::new(&ctx, &p).unwrap();
    let bytes = gemm.workspace_size();
    assert!(
        bytes > 32 << 20,
        "a plan that needs a workspace: {bytes} bytes"
    );
    let mut ops = ExactOperands::new(&stream, &mut rng, &p, 16);
    ctx.synchronize().unwrap();
    let hog = Hog::fill();
    let (free, total) = result::mem_get_info().unwrap();
    println!(
        "{} blocks hold the device's memory: {free} of {total} bytes free",
        hog.0.len()
    );
    let poison = vec![bf16::from_bits(0x7fc1); p.m * p.n];
    stream.memcpy_htod(&poison, &mut ops.d).unwrap();
    let err = gemm
        .run(
            &stream,
            &ops.a,
            &ops.b,
            None,
            &mut ops.d,
            Workspace::Managed,
        )
        .unwrap_err();
    match &err {
        Error::OutOfMemory { operand, bytes: b } => {
            assert_eq!(*operand, OperandName::Workspace);
            assert_eq!(*b, bytes);
        }
        e => panic!("expected OutOfMemory, got {e:?}"),
    }
    println!("with the memory held: {err}");
    // Nothing was launched: D still holds the poison.
    let d = stream.clone_dtoh(&ops.d).unwrap();
    assert!(d.iter().all(|v| v.to_bits() == 0x7fc1), "D was written");
    drop(hog);
    // The same plan, memory free again: exact.
    let d_expected = ops.expected.clone();
    gemm.run(
        &stream,
        &ops.a,
        &ops.b,
        None,
        &mut ops.d,
        Workspace::Managed,
    )
    .unwrap();
    let d = stream.clone_dtoh(&ops.d).unwrap();
    let wrong = d
        .iter()
        .zip(&d_expected)
        .filter(|(x, y)| x.to_bits() != **y)
        .count();
    assert_eq!(wrong, 0, "after the memory was freed");
    println!(
        "after freeing it: {} ({bytes} bytes of workspace), D exact",
        gemm.kernel_name()
    );
}

/// Every byte of a caller's workspace set to 0xFF (NaN in every float type) before the launch, on
/// plans whose D goes through a padded copy in the workspace, with beta = 0 (so C is not given):
/// plain and with fused bias epilogues, bf16 and FP8 blockwise. D must match the reference: nothing
/// the plan leaves unwritten in its workspace (C's slot when C is not read, padding) reaches D.
#[test]
#[ignore = "needs a CUDA GPU"]
fn workspace_garbage_never_reaches_d() {
    use cutlass_gemm::numeric::E4M3;
    use cutlass_gemm::reference::{self, HostEpilogue, Strided};
    use cutlass_gemm::{BiasAxis, BlockwiseGemm, Element, Epilogue, EpilogueOperands};
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let epilogues = [
        Epilogue::NONE,
        Epilogue::bias().with_bias(BiasAxis::PerRow),
        Epilogue::bias().with_activation(cutlass_gemm::Activation::Relu),
    ];
    let mut runs = 0;
    for e in epilogues {
        for blockwise in [false, true] {
            let p = if blockwise {
                GemmProblem::new(257, 392, 300)
            } else {
                GemmProblem::new(64, 130, 64)
            };
            let bias_len = match e.bias {
                Some(BiasAxis::PerRow) => p.m,
                Some(BiasAxis::PerColumn) => p.n,
                None => 0,
            };
            let bias: Vec<bf16> = ternary(&mut rng, bias_len.max(1));
            let dbias = stream.clone_htod(&bias).unwrap();
            let ops_e = EpilogueOperands {
                bias: e
                    .bias
                    .map(|_| &dbias as &dyn cudarc::driver::DevicePtr<bf16>),
                ..Default::default()
            };
            let mut dd = stream
                .clone_htod(&vec![bf16::from_bits(0x7fc1); p.m * p.n])
                .unwrap();
            // The geometry of A, B and D, the host inputs, the kernel.
            let (ga, gb, gd, host_a, host_b, name) = if blockwise {
                let bw = BlockwiseGemm::<E4M3, E4M3, bf16>::new(&ctx, &p)
                    .unwrap()
                    .with_epilogue(e)
                    .unwrap();
                let g = bw.plan_inner();
                assert!(g.staged_operands().contains(&OperandName::D), "{p:?}");
                let (ga, gb) = (g.operand(OperandName::A), g.operand(OperandName::B));
                let mut ws = stream
                    .clone_htod(&vec![0xffu8; g.workspace_size().max(16)])
                    .unwrap();
                let a: Vec<E4M3> = (0..ga.required_len())
                    .map(|_| E4M3::from_f64(rng.random_range(-1i32..=1) as f64))
                    .collect();
                let b: Vec<E4M3> = (0..gb.required_len())
                    .map(|_| E4M3::from_f64(rng.random_range(-1i32..=1) as f64))
                    .collect();
                let (la, lb) = bw.scale_lens();
                let (sa, sb) = (
                    stream.clone_htod(&vec![1.0f32; la]).unwrap(),
                    stream.clone_htod(&vec![1.0f32; lb]).unwrap(),
                );
                let (da, db) = (
                    stream.clone_htod(&a).unwrap(),
                    stream.clone_htod(&b).unwrap(),
                );
                bw.run_fused(
                    &stream,
                    &da,
                    &sa,
                    &db,
                    &sb,
                    None,
                    &mut dd,
                    &ops_e,
                    Workspace::Buffer(&mut ws),
                )
                .unwrap();
                (
                    ga,
                    gb,
                    g.operand(OperandName::D),
                    a.iter().map(|x| x.to_f64()).collect::<Vec<f64>>(),
                    b.iter().map(|x| x.to_f64()).collect::<Vec<f64>>(),
                    g.kernel_name(),
                )
            } else {
                // A kernel that needs 8-element rows of D (n = 130 is then staged), fused or not
                // as the epilogue asks.
                let name = cutlass_gemm::built_kernels()
                    .iter()
                    .filter(|k| k.spec.a.ty == cutlass_gemm::DataType::Bf16)
                    .filter(|k| k.spec.d.ty == cutlass_gemm::DataType::Bf16)
                    .filter(|k| {
                        k.spec.d.align == 8 && k.spec.d.layout == cutlass_gemm::Layout::RowMajor
                    })
                    .filter(|k| k.spec.fusion.is_fused() != e.is_none())
                    .map(|k| k.name)
                    .find(|n| Gemm::<bf16, bf16, bf16>::with_kernel(&ctx, &p, n).is_ok())
                    .expect("a bf16 kernel for 8-element rows");
                let g = Gemm::<bf16, bf16, bf16>::with_kernel(&ctx, &p, name)
                    .unwrap()
                    .with_epilogue(e)
                    .unwrap();
                assert!(g.staged_operands().contains(&OperandName::D), "{p:?}");
                let (ga, gb) = (g.operand(OperandName::A), g.operand(OperandName::B));
                let mut ws = stream
                    .clone_htod(&vec![0xffu8; g.workspace_size().max(16)])
                    .unwrap();
                let a: Vec<bf16> = ternary(&mut rng, ga.required_len());
                let b: Vec<bf16> = ternary(&mut rng, gb.required_len());
                let (da, db) = (
                    stream.clone_htod(&a).unwrap(),
                    stream.clone_htod(&b).unwrap(),
                );
                g.run_fused(
                    &stream,
                    &da,
                    &db,
                    None,
                    &mut dd,
                    &ops_e,
                    Workspace::Buffer(&mut ws),
                )
                .unwrap();
                (
                    ga,
                    gb,
                    g.operand(OperandName::D),
                    a.iter().map(|x| x.to_f64()).collect::<Vec<f64>>(),
                    b.iter().map(|x| x.to_f64()).collect::<Vec<f64>>(),
                    g.kernel_name(),
                )
            };
            let d = stream.clone_dtoh(&dd).unwrap();
            let bias64: Vec<f64> = bias.iter().map(|x| x.to_f64()).collect();
            let host = HostEpilogue {
                activation: e.activation,
                bias: e.bias.map(|axis| (axis, &bias64[..bias_len])),
                row_scales: None,
                col_scales: None,
            };
            let sa = Strided::new(&host_a, ga, OperandName::A).unwrap();
            let sb = Strided::new(&host_b, gb, OperandName::B).unwrap();
            let r = reference::fused(&p, &sa, &sb, None, &host).unwrap();
            let cmp = reference::compare(&d, &gd, &r);
            assert!(cmp.passed(), "{name} {}: {cmp:?}", e.describe());
            println!(
                "{name} ({}), workspace all 0xff: D as the reference",
                e.describe()
            );
            runs += 1;
        }
    }
    assert_eq!(runs, 6);
}

/// D staged (n = 130 breaks D's 8-element rows) with a fresh managed workspace, through an FP8
/// kernel that stores D from registers (NoSmem) and one that stores it by TMA: D must be exact
/// both ways. Each launch prints a `--- launch:` line first, so that a sanitizer's report
/// (initcheck: the copy back reads the padded D the kernel wrote) can be attributed to its store.
#[test]
#[ignore = "needs a CUDA GPU"]
fn staged_d_after_register_and_tma_stores() {
    use cutlass_gemm::numeric::E4M3;
    use cutlass_gemm::{reference, DataType, Element, EpilogueSchedule};
    let (ctx, stream) = gemm_device();
    let mut rng = rng();
    let p = GemmProblem::new(64, 130, 64);
    let a: Vec<E4M3> = (0..p.m * p.k)
        .map(|_| E4M3::from_f64(rng.random_range(-1i32..=1) as f64))
        .collect();
    let b: Vec<E4M3> = (0..p.k * p.n)
        .map(|_| E4M3::from_f64(rng.random_range(-1i32..=1) as f64))
        .collect();
    let r = reference::gemm::<E4M3, E4M3, bf16>(&p, &a, &b, None).unwrap();
    let expected: Vec<u16> = r
        .value
        .iter()
        .map(|&v| bf16::from_f64(v).to_bits())
        .collect();
    let (da, db) = (
        stream.clone_htod(&a).unwrap(),
        stream.clone_htod(&b).unwrap(),
    );
    for register_store in [true, false] {
        let name = cutlass_gemm::built_kernels()
            .iter()
            .filter(|k| k.spec.a.ty == DataType::E4M3 && k.spec.b.ty == DataType::E4M3)
            .filter(|k| k.spec.d.ty == DataType::Bf16 && !k.spec.fusion.is_fused())
            .filter(|k| {
                (k.spec.epilogue_schedule == EpilogueSchedule::NoSmemWarpSpecialized)
                    == register_store
            })
            .map(|k| k.name)
            .find(|n| {
                Gemm::<E4M3, E4M3, bf16>::with_kernel(&ctx, &p, n)
                    .is_ok_and(|g| g.staged_operands().contains(&OperandName::D))
            })
            .expect("an e4m3 -> bf16 kernel that stages D at n = 130, for each store");
        let g = Gemm::<E4M3, E4M3, bf16>::with_kernel(&ctx, &p, name).unwrap();
        let mut dd = stream
            .clone_htod(&vec![bf16::from_bits(0x7fc1); p.m * p.n])
            .unwrap();
        println!("--- launch: {name}");
        g.run(&stream, &da, &db, None, &mut dd, Workspace::Managed)
            .unwrap();
        let d = stream.clone_dtoh(&dd).unwrap();
        let wrong = d
            .iter()
            .zip(&expected)
            .filter(|(x, y)| x.to_bits() != **y)
            .count();
        assert_eq!(wrong, 0, "{name}: {wrong} of {} elements differ", d.len());
        println!("{name}: D staged and copied back, exact");
    }
}
