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
use cutlass_gemm::{
    DeviceInfo, Element, Error, Gemm, GemmProblem, Layout, MatrixLayout, OperandName,
};
use half::{bf16, f16};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

const fn described(compute_capability: (i32, i32), sm_count: i32) -> DeviceInfo {
    DeviceInfo {
        ordinal: 0,
        compute_capability,
        sm_count,
    }
}

/// H100 / H200, B200, RTX 5090, and a device of an architecture no kernel targets yet.
const DEVICES: [DeviceInfo; 4] = [
    described((9, 0), 132),
    described((10, 0), 148),
    described((12, 0), 170),
    described((13, 0), 200),
];

const EDGES: [usize; 30] = [
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    9,
    15,
    16,
    17,
    63,
    64,
    65,
    127,
    128,
    129,
    255,
    256,
    257,
    4095,
    4096,
    4097,
    65535,
    65536,
    (1 << 31) - 1,
    1 << 31,
    (1 << 31) + 1,
    1 << 40,
    usize::MAX,
];

fn extent() -> impl Strategy<Value = usize> {
    prop_oneof![2 => select(&EDGES[..]), 6 => 1..3000usize, 1 => any::<usize>()]
}

/// A leading dimension or batch stride: absent (packed), near small extents, or anywhere.
fn stride() -> impl Strategy<Value = Option<usize>> {
    prop_oneof![
        14 => Just(None),
        1 => (1..5000usize).prop_map(Some),
        1 => select(&EDGES[..]).prop_map(Some),
        1 => select(&[1usize << 20, 1 << 35, 1 << 38, 1 << 45, 1 << 62][..]).prop_map(Some),
    ]
}

fn matrix_layout() -> impl Strategy<Value = MatrixLayout> {
    (any::<bool>(), stride(), stride()).prop_map(|(row, ld, bs)| MatrixLayout {
        layout: if row {
            Layout::RowMajor
        } else {
            Layout::ColumnMajor
        },
        ld,
        batch_stride: bs,
    })
}

fn scalar() -> impl Strategy<Value = f32> {
    prop_oneof![
        12 => select(&[1.0f32, 0.0, 0.5, -2.0][..]),
        1 => select(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY][..]),
    ]
}

fn problem() -> impl Strategy<Value = GemmProblem> {
    (
        (extent(), extent(), extent()),
        prop_oneof![6 => Just(1usize), 2 => 2..5usize, 1 => select(&[65535usize, 65536, 70001, (1 << 31) - 1, 1 << 31, 0][..])],
        (matrix_layout(), matrix_layout(), matrix_layout(), matrix_layout()),
        (scalar(), scalar()),
        prop::bool::weighted(0.9),
    )
        .prop_map(|((m, n, k), batch, (a, b, c, d), (alpha, beta), c_like_d)| {
            // C usually takes D's layout (the rule), sometimes not.
            let c = if c_like_d {
                MatrixLayout {
                    layout: d.layout,
                    ..c
                }
            } else {
                c
            };
            GemmProblem {
                m,
                n,
                k,
                batch,
                a,
                b,
                c,
                d,
                alpha,
                beta,
            }
        })
}

/// The elements an operand reaches, computed in 128-bit arithmetic from the plan's geometry.
fn reach(g: &cutlass_gemm::ResolvedMatrix) -> u128 {
    let span = (g.strided() as u128 - 1) * g.ld as u128 + g.contiguous() as u128;
    (g.batch as u128 - 1) * g.batch_stride as u128 + span
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

fn seed() -> u64 {
    let seed = std::env::var("CUTLASS_RS_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("seed {seed} (CUTLASS_RS_TEST_SEED={seed} replays)");
    seed
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
