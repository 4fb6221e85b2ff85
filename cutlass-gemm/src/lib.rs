//! Safe Rust GEMMs over CUTLASS kernels: `D = alpha * A·B + beta * C` on NVIDIA GPUs.
//!
//! The kernels are CUTLASS 4.2 collective-builder instantiations that `cutlass-gemm-sys`'s build
//! script generates from the catalog (`cutlass-gemm-catalog`) and compiles with nvcc. This crate
//! plans a GEMM for a device and problem ([`Gemm::new`]), checks every rule of the kernel before
//! calling it (typed [`Error`]s that name the operand and the rule), and launches it on a `cudarc`
//! stream.
//!
//! | architecture | A x B | accumulator | C / D | A, B layouts | D layout | proof |
//! |---|---|---|---|---|---|---|
//! | SM90a (H100, H200) | f16 x f16, bf16 x bf16 ([`Gemm`]) | f32 | input type or f32 | TN, NT, NN, TT | row- or column-major | GPU tests |
//! | SM90a | e4m3/e5m2, mixed too ([`Gemm`]; per-tensor scales in alpha: [`GemmProblem::with_tensor_scales`]) | f32 | bf16, f16, f32 | TN (Hopper reads 8-bit operands K-major) | row- or column-major | GPU tests |
//! | SM90a | FP8 with 1x128 x 128x128 f32 blockwise scales ([`BlockwiseGemm`]) | f32 | bf16, f16, f32 | TN | row-major | GPU tests |
//! | SM90a | tf32 ([`Gemm`] over [`numeric::Tf32`]) | f32 | f32 | TN, NT, NN | row- or column-major | GPU tests |
//! | SM90a | grouped (mixture of experts, [`GroupedGemm`]): bf16, f16, e4m3 → bf16, many problems sharing N and K in one launch; e4m3 with 1x128 x 128x128 blockwise scales ([`GroupedBlockwiseGemm`]) | f32 | the input type (bf16 for e4m3) | TN | row-major | GPU tests |
//! | SM90a | s8 ([`Gemm`] over `i8`) | s32 (f32 epilogue: exact below 2^24) | s32, s8 (rounded, saturated) | TN | row- or column-major | GPU tests |
//! | SM100a, SM120a | every type row of CUTLASS's Blackwell GEMM tables: MX, NVFP4 and plain FP8/FP6/FP4 ([`BlockScaledGemm`], NVFP4 outputs too; sparse rows compile only) | f32 (s32) | see the catalog | per the tables | row-major | compiled, MMA instruction checked in PTX; host path (checks, `can_implement`, TMA descriptors) run on Hopper up to the launch; not run on a Blackwell GPU |
//! | SM100a, SM120a | grouped: SM100 bf16, f16, e4m3 ([`GroupedGemm`]); SM100 MXFP8 and NVFP4, SM120 NVFP4 ([`GroupedBlockScaledGemm`]) | f32 | the input type (bf16 for 8- and 4-bit inputs) | TN | row-major | compiled, MMA instruction checked in PTX; host path run on Hopper up to the launch (NVFP4: up to the sub-byte TMA descriptors); not run on a Blackwell GPU |
//!
//! Modules, by concern:
//!
//! | module | what |
//! |---|---|
//! | [`plans`] | [`GemmProblem`] (geometry of A, B, C, D) and the plans [`Gemm`], [`BlockwiseGemm`], [`BlockScaledGemm`], [`GroupedGemm`], [`GroupedBlockwiseGemm`] |
//! | [`selection`] | the kernels of this build ([`built_kernels`]), the time estimate that picks one ([`selection::heuristic`]), autotuning ([`selection::tune`]) |
//! | [`formats`] | host number formats: [`numeric`] (e4m3, e5m2, e2m3, e3m2, e2m1, ue8m0, ue4m3, tf32; conversions bit-exact with CUDA's and CUTLASS's), [`formats::packed`] (FP4/FP6 storage), [`formats::scale_layout`] (the `Sm1xxBlockScaledConfig` layout, blockwise scale orders), [`Element`] |
//! | [`quantize`] | GPU quantizers (FP8 1x128/128x128, MX, NVFP4) into CUTLASS-ready tensors; [`quantize::host`], the host quantizers they are bit-exact with |
//! | [`reference`](mod@reference) | the f64 host reference GEMM over any of those operands, and the error bound results are checked against |
//! | [`ffi`] | the one path to the C ABI: [`Kernel`], [`RawArgs`], C statuses to [`Error`] |
//! | `candle` (feature `candle`) | `matmul` and `broadcast_matmul` on candle's CUDA tensors, a `CustomOp2`, FP8 matmul, FP8-blockwise and NVFP4 `Linear` layers |
//!
//! Which kernels a build contains is chosen at build time: the cargo features `bf16`, `f16`,
//! `fp8`, `fp8-blockwise` (default), `tf32`, `i8`, `sm100`, `sm120` select kernel families
//! ([`Family`]); `CUTLASS_RS_KERNELS` overrides them with name patterns and presets. A request no
//! built kernel serves returns [`Error::NoKernel`] with the feature or filter that builds one.
//!
//! Kernel selection: [`Gemm::new`] estimates every candidate of the build; [`Gemm::with_kernel`]
//! pins one by name; [`Gemm::autotune`] times the candidates once and keeps the winner in a
//! [`selection::tune::TuneCache`] file; [`Gemm::with_schedule`] sets CUTLASS's raster swizzle and
//! order and a split-K factor ([`ScheduleHints`]). SM90 kernels with a data-parallel scheduler and
//! no blockwise scales launch with programmatic dependent launch
//! ([`Gemm::with_programmatic_dependent_launch`], on by default).
//!
//! Rules checked before a launch: the A/B layouts the kernels for these types read on this
//! architecture ([`Error::UnsupportedLayout`]); scale tensors' granularity, order, vector size and
//! length ([`Error::ScaleMismatch`], [`Error::BufferTooSmall`]); the device's architecture against
//! the kernel's; 16-byte alignment of pointers, leading dimensions, batch strides and contiguous
//! extents; leading dimension at least the contiguous extent; batch stride at least one matrix;
//! buffer lengths against the extent the shape, leading dimension and batch stride reach; the
//! output not overlapping the inputs; extents that fit CUTLASS's `int` problem shape.
//!
//! ```no_run
//! use cutlass_gemm::cudarc::driver::CudaContext;
//! use cutlass_gemm::half::bf16;
//! use cutlass_gemm::{Gemm, GemmProblem, Workspace};
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
    Arch, DataType, EpilogueSchedule, Family, KernelSchedule, KernelSpec, Layout, TileScheduler,
};
/// The raw C ABI (status codes, argument struct, registry).
pub use cutlass_gemm_sys as sys;
pub use error::{
    AuxRule, BuildHint, CaptureRule, Error, Extent, GemvRule, GroupRowsRule, KernelRule,
    LayoutPairs, LayoutRule, OperandName, ProblemRule, Quantity, QuantizeOp, Result, Scalar,
    ScaleFamily, ScaleRule, SplitKRule, WeightRule,
};
pub use ffi::{
    DeviceInfo, GroupedKernel, Kernel, RawArgs, RegistryArgs, RegistryKernel, ScheduleHints,
    WeightOnlyKernel, BLOCKWISE_GEMV, DENSE_GEMV, WEIGHT_ONLY_GEMV,
};
pub use formats::element::{Element, Fp8};
pub use formats::numeric;
/// The `half` crate whose `bf16` and `f16` are element types here.
pub use half;
pub use plans::block_scaled::{BlockScaledGemm, NarrowOperand};
pub use plans::blockwise::BlockwiseGemm;
pub use plans::epilogue::{Activation, BiasAxis, BiasElement, Epilogue, EpilogueOperands};
pub use plans::gated::{interleave_gate_up, GatedGemm};
pub use plans::gemm::{
    gemm, Gemm, Workspace, BLOCKWISE_GEMV_TOKENS, DENSE_GEMV_MAX_WEIGHT, DENSE_GEMV_TOKENS,
};
pub use plans::grouped::{
    GroupedBlockwiseGemm, GroupedGemm, GroupedInputs, GroupedLayout, GroupedListGemm,
    GroupedListProblem, GroupedProblem,
};
pub use plans::grouped_block_scaled::{
    GroupedBlockFormat, GroupedBlockScaledGemm, GroupedBlockScaledInputs,
    GroupedBlockScaledOperand, GroupedScaleLayout,
};
pub use plans::problem::{GemmProblem, MatrixLayout, ResolvedMatrix};
pub use plans::weight_only::{
    QuantizedWeight, WeightFormat, WeightOnlyGemm, WeightOnlyInput, WeightOnlyProblem, WeightOrder,
};
pub use selection::{built_grouped_kernels, built_kernels, built_weight_only_kernels};

/// Whether a CUDA driver and at least one device are present. Never panics: on a machine without
/// the driver library (`libcuda.so`) it returns `false`.
pub fn cuda_available() -> bool {
    driver_library_present() && cudarc::driver::CudaContext::device_count().is_ok_and(|n| n > 0)
}

/// Whether the driver library can be loaded. cudarc loads it on first use and panics when it is
/// missing (its own check exists only when it loads at run time, not when candle makes it link).
pub(crate) fn driver_library_present() -> bool {
    #[cfg(windows)]
    const NAMES: &[&str] = &["nvcuda.dll"];
    #[cfg(not(windows))]
    const NAMES: &[&str] = &["libcuda.so.1", "libcuda.so"];
    NAMES.iter().any(|name| {
        // SAFETY: loading the driver library runs no code of ours; the handle is dropped at once.
        unsafe { libloading::Library::new(name) }.is_ok()
    })
}

/// The README's code, compiled by `cargo test --doc` so that it stays true.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
