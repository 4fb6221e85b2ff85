//! What the CPU fuzz tests (`fuzz.rs`, `fuzz_plans.rs`) share: described devices, extents at the
//! edges, strides, layouts, scalars, the 128-bit reach of an operand and the seed.

#![allow(dead_code)]

use cutlass_gemm::{DeviceInfo, GemmProblem, Layout, MatrixLayout, ResolvedMatrix};
use proptest::prelude::*;
use proptest::sample::select;

pub const fn described(compute_capability: (i32, i32), sm_count: i32) -> DeviceInfo {
    DeviceInfo {
        ordinal: 0,
        compute_capability,
        sm_count,
    }
}

/// H100 / H200, B200, RTX 5090, and a device of an architecture no kernel targets yet.
pub const DEVICES: [DeviceInfo; 4] = [
    described((9, 0), 132),
    described((10, 0), 148),
    described((12, 0), 170),
    described((13, 0), 200),
];

/// An extent: one of [`EDGES`], an ordinary one (weighted `ordinary` against 2 for the edges),
/// or anything.
pub fn extent_weighted(ordinary: u32) -> impl Strategy<Value = usize> {
    prop_oneof![2 => select(&EDGES[..]), ordinary => 1..3000usize, 1 => any::<usize>()]
}

pub const EDGES: [usize; 30] = [
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

/// A leading dimension or batch stride: absent (packed), near small extents, or anywhere.
pub fn stride() -> impl Strategy<Value = Option<usize>> {
    prop_oneof![
        14 => Just(None),
        1 => (1..5000usize).prop_map(Some),
        1 => select(&EDGES[..]).prop_map(Some),
        1 => select(&[1usize << 20, 1 << 35, 1 << 38, 1 << 45, 1 << 62][..]).prop_map(Some),
    ]
}

pub fn matrix_layout() -> impl Strategy<Value = MatrixLayout> {
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

pub fn scalar() -> impl Strategy<Value = f32> {
    prop_oneof![
        12 => select(&[1.0f32, 0.0, 0.5, -2.0][..]),
        1 => select(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY][..]),
    ]
}

/// The elements an operand reaches, computed in 128-bit arithmetic from the plan's geometry.
pub fn reach(g: &ResolvedMatrix) -> u128 {
    let span = (g.strided() as u128 - 1) * g.ld as u128 + g.contiguous() as u128;
    (g.batch as u128 - 1) * g.batch_stride as u128 + span
}

pub fn seed() -> u64 {
    let seed = std::env::var("CUTLASS_RS_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("seed {seed} (CUTLASS_RS_TEST_SEED={seed} replays)");
    seed
}

/// A problem from its drawn parts: C usually takes D's layout (the rule), sometimes not.
pub fn assemble(
    (m, n, k): (usize, usize, usize),
    batch: usize,
    (a, b, c, d): (MatrixLayout, MatrixLayout, MatrixLayout, MatrixLayout),
    (alpha, beta): (f32, f32),
    c_like_d: bool,
) -> GemmProblem {
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
}
