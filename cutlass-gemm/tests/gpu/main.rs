//! The GPU tests, one binary: `cargo test -p cutlass-gemm --release --test gpu -- --include-ignored`
//! on a Hopper machine, with the kernels of the `gpu-tests` preset built
//! (`CUTLASS_RS_KERNELS=gpu-tests`; README, "Tests"). Every test is `#[ignore]`d with the reason
//! "needs a CUDA GPU", so a machine without one lists them as ignored, never as passed; asked to run
//! without a GPU, or in a build without the preset's kernels, a test fails and says why.

#![allow(dead_code)]

mod common;

mod aux;
mod blockscaled;
#[cfg(feature = "candle")]
mod candle;
mod devices;
mod epilogue;
mod faults;
mod fp8;
mod fuzz;
mod gated;
mod gemm;
mod grouped;
mod numerics;
mod quantize;
mod threads;
mod weight_only;
