//! Safe Rust GEMMs over CUTLASS kernels: `D = alpha * A·B + beta * C` on NVIDIA GPUs.
//!
//! The kernels are CUTLASS 4.2 collective-builder instantiations that `cutlass-sys`'s build script
//! generates from the catalog (`cutlass-kernels`) and compiles with nvcc. This crate plans a GEMM
//! for a device and problem ([`Gemm::new`]), checks every rule the kernel has before calling it
//! (typed [`Error`]s that name the operand and the rule), and launches it on a `cudarc` stream.
//!
//! | architecture | inputs A x B | accumulator | C / D | layouts of A, B | D layout | status |
//! |---|---|---|---|---|---|---|
//! | SM90a (H100, H200) | f16 x f16, bf16 x bf16 ([`Gemm`]) | f32 | input type or f32 | TN, NT, NN, TT | row- or column-major | runs (tested on an H200) |
//! | SM90a | e4m3/e5m2 x e4m3/e5m2, mixed too ([`Gemm`]; per-tensor scales in alpha: [`GemmProblem::with_tensor_scales`]) | f32 | bf16, f16, f32 | TN (Hopper reads 8-bit operands K-major) | row- or column-major | runs (tested on an H200; the overlapped-promotion e4m3 kernels, [`KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap`] and its pingpong sibling, on an H100) |
//! | SM90a | FP8 with 1x128 x 128x128 f32 blockwise scales ([`BlockwiseGemm`]) | f32 | bf16, f16, f32 | TN | row-major | runs (tested on an H200; the overlapped e4m3 kernel on an H100) |
//! | SM90a | tf32 x tf32 ([`Gemm`] over [`numeric::Tf32`]) | f32 | f32 | TN, NT, NN | row- or column-major | runs (tested on an H100) |
//! | SM90a | s8 x s8 ([`Gemm`] over `i8`) | s32 (f32 epilogue: exact below 2^24) | s32, s8 (rounded, saturated) | TN | row- or column-major | runs (tested on an H100) |
//! | SM100a, SM120a | every row of Tables 1–3 (legacy, FP8/FP6/FP4, mx/nv block-scaled; sparse rows compile only) | f32 (s32) | see the catalog | per Tables 4–20 | row-major | compiled to PTX with the MMA instructions checked (`kernels/census.tsv`); MX, NVFP4 and plain FP8/FP6/FP4 operands through [`BlockScaledGemm`] (any layout the catalog has; NVFP4 outputs), whose host path (checks, `can_implement`, TMA descriptors) runs on a Hopper GPU up to the launch; no Blackwell GPU here, so none has run |
//!
//! Host-side formats for every type of the seed's Tables 1–3, usable without a GPU:
//!
//! | module | what |
//! |---|---|
//! | [`numeric`] | e4m3, e5m2, e2m3, e3m2, e2m1, ue8m0, ue4m3, tf32; conversions bit-exact with CUDA's (`cuda_fp8.h`, `cuda_fp6.h`, `cuda_fp4.h`) and CUTLASS's (ue4m3, tf32); `From` to and from the `float8` crate's types |
//! | [`packed`] | packed FP4/FP6 storage in CUTLASS's global-memory bit order |
//! | [`blockscale`] | MX (OCP v1.0) and NVFP4 quantizers, the `Sm1xxBlockScaledConfig` scale-factor layout, FP8 blockwise (1x128, 128x128) scaling |
//! | [`quantize`] | GPU quantizers (FP8 1x128/128x128, MX, NVFP4) writing packed data and swizzled scales, bit-exact with [`blockscale`] |
//! | [`reference`](mod@reference) | the f64 host reference GEMM over any of those operands, output conversion and block-scaled output (`LinCombBlockScaleFactor`) |
//!
//! With the `candle` feature, `cutlass_gemm::candle` runs these GEMMs on candle's CUDA tensors: `matmul`
//! and `broadcast_matmul` (bf16, f16; candle's shape and stride conventions), a `CustomOp2`, FP8
//! matmul, and `Linear` layers with FP8 blockwise (Hopper) or NVFP4 (Blackwell) weights.
//!
//! Which of those kernels a build contains is chosen at build time (`CUTLASS_RS_ARCHS`,
//! `CUTLASS_RS_KERNELS`); [`built_kernels`] lists them. The default build has 128x256x64
//! cooperative kernels for f16 and bf16 in all four layouts (output of the input type) and with f32
//! output in TN, e4m3 x e4m3 -> bf16 tensor-wise and blockwise kernels, and for f16 and bf16 TN
//! six kernels for small and mid-size problems (64x128 and 64x64 pingpong, stream-K, and stream-K
//! kernels with a column-major output that serve a small M through the operand swap). The tf32
//! and s8 kernels are built on request (`CUTLASS_RS_KERNELS='default,*_tf32_*,*_s8_s8_*'`).
//!
//! Kernel selection: [`Gemm::new`] estimates every candidate of the build ([`heuristic`]);
//! [`Gemm::with_kernel`] pins one by name; [`Gemm::autotune`] times the candidates once and keeps
//! the winner in a [`tune::TuneCache`] file; [`Gemm::with_schedule`] sets CUTLASS's raster swizzle
//! and order and a split-K factor ([`ScheduleHints`]). Measurements against cuBLAS are in
//! `docs/performance.md` (`cutlass-profiler profile`).
//!
//! Launches: SM90 kernels with a data-parallel scheduler and no blockwise scales launch with
//! programmatic dependent launch ([`Gemm::with_programmatic_dependent_launch`], on by default): a
//! GEMM may start while the kernel before it in the stream finishes, waits for that kernel's
//! results before touching global memory, and lets the next kernel start once its last tile's main
//! loop is done.
//!
//! Rules checked before a launch: the A/B layouts the catalog's kernels for these types read on this
//! architecture ([`Error::UnsupportedLayout`]); scale tensors' granularity, order, vector size and
//! length ([`Error::ScaleMismatch`], [`Error::BufferTooSmall`]); device architecture against the
//! kernel's; 16-byte alignment of
//! pointers; leading dimensions, batch strides and contiguous extents multiples of 16 bytes;
//! leading dimension at least the contiguous extent; batch stride at least one matrix; buffer
//! lengths against the extent the shape, leading dimension and batch stride reach; the output not
//! overlapping the inputs; extents that fit CUTLASS's `int` problem shape.
//!
//! ```no_run
//! use cutlass_gemm::{Gemm, GemmProblem, Workspace};
//! use cudarc::driver::CudaContext;
//! use half::bf16;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = CudaContext::new(0)?;
//! let stream = ctx.default_stream();
//! let (m, n, k) = (4096, 4096, 4096);
//! let a = stream.alloc_zeros::<bf16>(m * k)?; // row-major m x k
//! let b = stream.alloc_zeros::<bf16>(k * n)?; // column-major k x n (a row-major n x k weight)
//! let mut d = stream.alloc_zeros::<bf16>(m * n)?; // row-major m x n
//! let gemm = Gemm::<bf16, bf16, bf16>::new(&ctx, &GemmProblem::new(m, n, k))?;
//! gemm.run(&stream, &a, &b, None, &mut d, Workspace::Managed)?;
//! stream.synchronize()?;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod error;
pub mod ffi;
pub mod formats;
pub mod plans;
pub mod quantize;
pub mod reference;
pub mod selection;

#[cfg(feature = "candle")]
pub mod candle;

/// The `cudarc` this crate's API takes streams and buffers of (so that a dependent needs no
/// second, possibly different, version).
pub use cudarc;
pub use cutlass_gemm_catalog::{
    Arch, DataType, Family, KernelSchedule, KernelSpec, Layout, TileScheduler,
};
/// The raw C ABI (status codes, argument struct, registry).
pub use cutlass_gemm_sys as sys;
pub use error::{BuildHint, Error, OperandName, Result};
pub use ffi::{DeviceInfo, Kernel, RawArgs, ScheduleHints};
pub use formats::element::{Element, Fp8};
pub use formats::numeric;
/// The `half` crate whose `bf16` and `f16` are element types here.
pub use half;
pub use plans::block_scaled::{BlockScaledGemm, NarrowOperand};
pub use plans::blockwise::BlockwiseGemm;
pub use plans::gemm::{gemm, Gemm, Workspace};
pub use plans::problem::{GemmProblem, MatrixLayout, ResolvedMatrix};
pub use selection::built_kernels;

/// Whether a CUDA driver and at least one device are present. Never panics: on a machine without
/// the driver library (`libcuda.so`) it returns `false`.
pub fn cuda_available() -> bool {
    driver_library_present() && cudarc::driver::CudaContext::device_count().is_ok_and(|n| n > 0)
}

/// Whether the driver library can be loaded. cudarc loads it on first use and panics when it is
/// missing (its own check exists only when it loads at run time, not when candle makes it link).
fn driver_library_present() -> bool {
    #[cfg(windows)]
    const NAMES: &[&str] = &["nvcuda.dll"];
    #[cfg(not(windows))]
    const NAMES: &[&str] = &["libcuda.so.1", "libcuda.so"];
    NAMES.iter().any(|name| {
        // SAFETY: loading the driver library runs no code of ours; the handle is dropped at once.
        unsafe { libloading::Library::new(name) }.is_ok()
    })
}
