//! Property-based fuzzing of the safe API's planning and length checks, on any machine (no GPU):
//! random problems (extents at and around every alignment and limit, up to `usize::MAX`; leading
//! dimensions and batch strides too small, exact, padded and overflowing; every layout, batch
//! count and scalar class) for several element types and described devices, current and future.
//!
//! Every case must end in a plan or a typed input error, never a panic or a CUDA or CUTLASS error
//! (nothing here reaches a kernel). For a plan, each operand's reach equals the one computed in
//! 128-bit arithmetic, and the buffer-length check accepts exactly the buffers that hold it,
//! naming the first short operand otherwise.
//!
//! 100 000 cases per run (`CUTLASS_RS_FUZZ_CASES` changes it); the seed is printed and
//! `CUTLASS_RS_TEST_SEED` replays it.

use cutlass_gemm::numeric::E4M3;
use cutlass_gemm::{DeviceInfo, Element, Error, Gemm, GemmProblem, OperandName};
use half::{bf16, f16};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

mod fuzz_support;
use fuzz_support::*;

fn extent() -> impl Strategy<Value = usize> {
    extent_weighted(6)
}

fn problem() -> impl Strategy<Value = GemmProblem> {
    (
        (extent(), extent(), extent()),
        prop_oneof![6 => Just(1usize), 2 => 2..5usize, 1 => select(&[65535usize, 65536, 70001, (1 << 31) - 1, 1 << 31, 0][..])],
        (matrix_layout(), matrix_layout(), matrix_layout(), matrix_layout()),
        (scalar(), scalar()),
        prop::bool::weighted(0.9),
    )
        .prop_map(|(extents, batch, layouts, scalars, c_like_d)| {
            assemble(extents, batch, layouts, scalars, c_like_d)
        })
}

fn check<TA: Element, TB: Element, TD: Element>(
    device: DeviceInfo,
    p: &GemmProblem,
    short: usize,
) -> Result<bool, TestCaseError> {
    match Gemm::<TA, TB, TD>::plan(device, p, None) {
        Ok(g) => {
            let ops = [
                OperandName::A,
                OperandName::B,
                OperandName::C,
                OperandName::D,
            ];
            let mut lens = [0usize; 4];
            for (i, op) in ops.into_iter().enumerate() {
                let geometry = g.operand(op);
                let want = reach(&geometry);
                prop_assert!(
                    want <= usize::MAX as u128,
                    "{op} reaches {want} elements, past usize"
                );
                prop_assert_eq!(geometry.required_len() as u128, want, "{} of {:?}", op, p);
                lens[i] = want as usize;
            }
            prop_assert!(g
                .check_lengths(lens[0], lens[1], Some(lens[2]), lens[3])
                .is_ok());
            // One buffer one element short: refused, naming it.
            let i = short % 4;
            if lens[i] > 0 {
                let mut l = lens;
                l[i] -= 1;
                match g.check_lengths(l[0], l[1], Some(l[2]), l[3]) {
                    Err(Error::BufferTooSmall {
                        operand,
                        len,
                        required,
                    }) => {
                        prop_assert_eq!(operand, ops[i]);
                        prop_assert_eq!((len, required), (l[i], lens[i]));
                    }
                    other => prop_assert!(false, "{:?} one short: {:?}", ops[i], other),
                }
            }
            Ok(true)
        }
        Err(e) => {
            prop_assert!(
                !matches!(
                    e,
                    Error::Cutlass { .. }
                        | Error::Cuda(_)
                        | Error::Io { .. }
                        | Error::DeviceMismatch { .. }
                ),
                "planning reached past the input checks: {e:?}"
            );
            prop_assert!(!e.to_string().is_empty());
            Ok(false)
        }
    }
}

#[test]
fn planning_ends_in_a_plan_or_a_typed_error() {
    let cases: u32 = std::env::var("CUTLASS_RS_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let seed = seed();
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    let types = 0..4usize;
    let counts = std::cell::Cell::new((0u64, 0u64));
    runner
        .run(
            &(
                problem(),
                prop_oneof![3 => Just(DEVICES[0]), 1 => select(&DEVICES[1..])],
                types,
                any::<usize>(),
            ),
            |(p, device, ty, short)| {
                let planned = match ty {
                    0 => check::<bf16, bf16, bf16>(device, &p, short),
                    1 => check::<f16, f16, f16>(device, &p, short),
                    2 => check::<bf16, bf16, f32>(device, &p, short),
                    _ => check::<E4M3, E4M3, bf16>(device, &p, short),
                }?;
                let (ok, err) = counts.get();
                counts.set(if planned {
                    (ok + 1, err)
                } else {
                    (ok, err + 1)
                });
                Ok(())
            },
        )
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let (plans, errors) = counts.get();
    println!("{cases} cases: {plans} plans, {errors} typed errors");
    // The generator reaches both outcomes (a fuzz that only ever errs would test little), except
    // in a build without kernels, where every plan is refused.
    assert!(errors > 0, "{plans} plans, no error");
    if !cutlass_gemm::built_kernels().is_empty() {
        assert!(plans > cases as u64 / 100, "{plans} plans, {errors} errors");
    }
}
