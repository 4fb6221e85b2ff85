//! FP8 GEMMs with blockwise scales (SM90): the recipe of Triton's 2D-block FP8 GEMM tutorial
//! and DeepSeek-V3, on CUTLASS's `KernelTmaWarpSpecializedCooperativeFP8Blockwise` kernels.
//!
//! `D = alpha * Σ_kb (sa[m, kb] · A[m, kb-block]) · (sb[nb, kb] · B[kb-block, nb-block]) + beta * C`:
//! A (m x k, row-major, e4m3 or e5m2) carries one f32 scale per row and 128 elements of K (1x128
//! groups, activations); B (k x n, column-major, i.e. a row-major weight `W[n, k]`) one per
//! 128 x 128 block. The kernel applies the scales to its f32 accumulator once per 128-deep k-block.
//!
//! Scales are read in the layout of CUTLASS's `Sm90BlockwiseScaleConfig` (M- and N-major: the
//! scales of one k-block are contiguous), [`ScaleMajor::MN`]; [`crate::quantize`] writes them so
//! with `ScaleMajor::MN`, and [`crate::formats::scale_layout::scales_to_major`] converts the recipe's
//! row-major (`ScaleMajor::K`) scales on the host.

use std::sync::Arc;

use cudarc::driver::{sys, CudaContext, CudaStream, DevicePtr, DevicePtrMut};
use cutlass_gemm_catalog::Layout;

use crate::error::{Error, LayoutRule, OperandName, ProblemRule, Result, ScaleRule};
use crate::ffi::{DeviceInfo, ScheduleHints};
use crate::formats::element::{Element, Fp8};
use crate::formats::numeric::E4M3;
use crate::formats::scale_layout::ScaleMajor;
use crate::plans::epilogue::{Epilogue, EpilogueOperands};
use crate::plans::gemm::{Gemm, Scaling, Workspace};
use crate::plans::problem::GemmProblem;
use crate::quantize::{Fp8Block, Fp8BlockwiseTensor};

/// A planned FP8 blockwise GEMM: A `TA` (1x128 scales), B `TB` (128x128 scales), C and D `TD`.
#[derive(Debug)]
pub struct BlockwiseGemm<TA: Fp8, TB: Fp8, TD: Element> {
    inner: Gemm<TA, TB, TD>,
}

impl<TA: Fp8, TB: Fp8, TD: Element> BlockwiseGemm<TA, TB, TD> {
    /// Plans on `ctx`'s device, choosing among the blockwise kernels of this build and, up to
    /// [`crate::BLOCKWISE_GEMV_TOKENS`] tokens, the decode GEMV ([`BlockwiseGemm::is_gemv`]).
    pub fn new(ctx: &CudaContext, problem: &GemmProblem) -> Result<Self> {
        Self::plan(DeviceInfo::query(ctx)?, problem, None)
    }

    /// Plans with the kernel of this name ([`crate::BLOCKWISE_GEMV`] names the decode GEMV, which
    /// takes up to 32 tokens; where it does not serve the problem, [`KernelRule::BlockwiseGemv`]
    /// says which of its rules the problem breaks).
    ///
    /// [`KernelRule::BlockwiseGemv`]: crate::KernelRule::BlockwiseGemv
    pub fn with_kernel(ctx: &CudaContext, problem: &GemmProblem, name: &str) -> Result<Self> {
        Self::plan(DeviceInfo::query(ctx)?, problem, Some(name))
    }

    /// Plans for a described device without touching it (every rule that does not need the
    /// buffers is checked here).
    ///
    /// Rules, each a typed error naming the operand: A row-major and B column-major (K
    /// contiguous, as Hopper's wgmma reads 8-bit operands); D row-major (A and B have different
    /// scale granularities, so the transpose identity that serves a column-major D elsewhere does
    /// not apply). Any m, n and k run: where m is not a multiple of 4 (A's scales are loaded by
    /// TMA in rows of m floats, which must span a multiple of 16 bytes) or k or n is off the
    /// kernel's 16-element alignment, the plan pads the kernel's problem and serves the operands
    /// concerned through padded copies in its workspace ([`Gemm::staged_operands`]); the scales
    /// keep the caller's layout.
    ///
    /// Up to [`crate::BLOCKWISE_GEMV_TOKENS`] tokens of e4m3 x e4m3 with a bf16 or f16 D, one
    /// GEMM, n a multiple of 16 and k of 64, A's and B's leading dimensions multiples of 16 and no
    /// fused epilogue, the plan runs on the decode GEMV (`csrc/cutlass_rs_blockwise_gemv.cu`: the
    /// operands read in place, no workspace; `docs/performance.md` has the measurements); the
    /// CUTLASS kernel it would take otherwise must still be in the build.
    pub fn plan(device: DeviceInfo, problem: &GemmProblem, kernel: Option<&str>) -> Result<Self> {
        problem.check()?;
        for (op, layout, want, rule) in [
            (
                OperandName::D,
                problem.d.layout,
                Layout::RowMajor,
                LayoutRule::BlockwiseRowMajorD,
            ),
            (
                OperandName::A,
                problem.a.layout,
                Layout::RowMajor,
                LayoutRule::BlockwiseRowMajorA,
            ),
            (
                OperandName::B,
                problem.b.layout,
                Layout::ColumnMajor,
                LayoutRule::BlockwiseColumnMajorB,
            ),
        ] {
            if layout != want {
                return Err(Error::UnsupportedLayout { operand: op, rule });
            }
        }
        Ok(BlockwiseGemm {
            inner: Gemm::plan_with(device, problem, kernel, Scaling::Blockwise, Epilogue::NONE)?,
        })
    }

    /// The plan with a fused epilogue (bias, activation, row and column scales applied after the
    /// blockwise-scaled accumulator; [`Gemm::with_epilogue`]); launch it with
    /// [`BlockwiseGemm::run_fused`].
    pub fn with_epilogue(self, epilogue: Epilogue) -> Result<Self> {
        Ok(BlockwiseGemm {
            inner: self.inner.with_epilogue(epilogue)?,
        })
    }

    /// The chosen kernel's name ([`crate::BLOCKWISE_GEMV`] for the decode GEMV).
    pub fn kernel_name(&self) -> &'static str {
        self.inner.kernel_name()
    }

    /// Whether the FP8 blockwise decode GEMV runs the plan ([`Gemm::is_gemv`]).
    pub fn is_gemv(&self) -> bool {
        self.inner.is_gemv()
    }

    /// The plan with these tile-scheduler hints ([`Gemm::with_schedule`]: raster and swizzle;
    /// split-K for the stream-K kernel). The workspace size is recomputed.
    pub fn with_schedule(self, schedule: ScheduleHints) -> Result<Self> {
        Ok(BlockwiseGemm {
            inner: self.inner.with_schedule(schedule)?,
        })
    }

    /// The tile-scheduler hints of this plan ([`Gemm::schedule`]).
    pub fn schedule(&self) -> ScheduleHints {
        self.inner.schedule()
    }

    /// Bytes of workspace the kernel needs.
    pub fn workspace_size(&self) -> usize {
        self.inner.workspace_size()
    }

    /// The problem.
    pub fn problem(&self) -> &GemmProblem {
        self.inner.problem()
    }

    /// Scale counts the kernel reads: (A's, B's), each batch after batch in [`ScaleMajor::MN`]
    /// order: `m * ceil(k / 128)` and `ceil(n / 128) * ceil(k / 128)` per batch.
    pub fn scale_lens(&self) -> (usize, usize) {
        self.inner.scale_lens()
    }

    /// Checks scale buffer lengths (f32 values) as [`BlockwiseGemm::run`] does.
    pub fn check_scale_lengths(&self, scales_a: usize, scales_b: usize) -> Result<()> {
        self.inner.check_scale_lens(scales_a, scales_b)
    }

    /// The plain plan inside (geometry, buffer-length checks).
    pub fn plan_inner(&self) -> &Gemm<TA, TB, TD> {
        &self.inner
    }

    /// Checks the buffers and launches. `scales_a` and `scales_b` are f32 in [`ScaleMajor::MN`]
    /// order (see [`BlockwiseGemm::scale_lens`]).
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        stream: &Arc<CudaStream>,
        a: &dyn DevicePtr<TA>,
        scales_a: &dyn DevicePtr<f32>,
        b: &dyn DevicePtr<TB>,
        scales_b: &dyn DevicePtr<f32>,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        let none = EpilogueOperands::default();
        self.inner
            .run_scaled(stream, a, b, (scales_a, scales_b), c, d, &none, workspace)
    }

    /// [`BlockwiseGemm::run`] with the vectors of the plan's fused epilogue
    /// ([`BlockwiseGemm::with_epilogue`], [`Gemm::run_fused`]).
    #[allow(clippy::too_many_arguments)]
    pub fn run_fused(
        &self,
        stream: &Arc<CudaStream>,
        a: &dyn DevicePtr<TA>,
        scales_a: &dyn DevicePtr<f32>,
        b: &dyn DevicePtr<TB>,
        scales_b: &dyn DevicePtr<f32>,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
        epilogue: &EpilogueOperands<'_, TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        self.inner.run_scaled(
            stream,
            a,
            b,
            (scales_a, scales_b),
            c,
            d,
            epilogue,
            workspace,
        )
    }

    /// Launches on raw device pointers (scales in [`ScaleMajor::MN`] order).
    ///
    /// # Safety
    /// As [`Gemm::run_raw`], and `scales_a` / `scales_b` must hold [`BlockwiseGemm::scale_lens`]
    /// f32 values each.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn run_raw(
        &self,
        a: sys::CUdeviceptr,
        scales_a: sys::CUdeviceptr,
        b: sys::CUdeviceptr,
        scales_b: sys::CUdeviceptr,
        c: Option<sys::CUdeviceptr>,
        d: sys::CUdeviceptr,
        workspace: sys::CUdeviceptr,
        workspace_bytes: usize,
        stream: sys::CUstream,
    ) -> Result<()> {
        self.inner.run_raw_scaled(
            a,
            b,
            (scales_a, scales_b),
            c,
            d,
            workspace,
            workspace_bytes,
            stream,
        )
    }
}

impl<TD: Element> BlockwiseGemm<E4M3, E4M3, TD> {
    /// Runs on tensors from [`crate::quantize::quantize_fp8_blockwise`]: `a` must be `m x k` with
    /// 1x128 groups, `b` the weight `W[n, k]` with 128x128 blocks, both with [`ScaleMajor::MN`]
    /// scales, and the plan packed (no padding) with one batch.
    pub fn run_tensors(
        &self,
        stream: &Arc<CudaStream>,
        a: &Fp8BlockwiseTensor,
        b: &Fp8BlockwiseTensor,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        let none = EpilogueOperands::default();
        self.run_tensors_fused(stream, a, b, c, d, &none, workspace)
    }

    /// [`BlockwiseGemm::run_tensors`] with the vectors of the plan's fused epilogue
    /// ([`BlockwiseGemm::with_epilogue`]).
    #[allow(clippy::too_many_arguments)]
    pub fn run_tensors_fused(
        &self,
        stream: &Arc<CudaStream>,
        a: &Fp8BlockwiseTensor,
        b: &Fp8BlockwiseTensor,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
        epilogue: &EpilogueOperands<'_, TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        let p = *self.problem();
        for (op, t, rows, block) in [
            (OperandName::A, a, p.m, Fp8Block::Group1x128),
            (OperandName::B, b, p.n, Fp8Block::Block128x128),
        ] {
            let scales = if op == OperandName::A {
                OperandName::ScalesA
            } else {
                OperandName::ScalesB
            };
            if t.block != block {
                return Err(Error::ScaleMismatch {
                    operand: scales,
                    rule: ScaleRule::Fp8Block {
                        required: block,
                        found: t.block,
                    },
                });
            }
            if t.scale_major != ScaleMajor::MN {
                return Err(Error::ScaleMismatch {
                    operand: scales,
                    rule: ScaleRule::Fp8ScaleMajor {
                        required: ScaleMajor::MN,
                        found: t.scale_major,
                    },
                });
            }
            if (t.rows, t.cols) != (rows, p.k) {
                return Err(Error::InvalidProblem {
                    reason: ProblemRule::TensorShape {
                        operand: op,
                        found: (t.rows, t.cols),
                        required: (rows, p.k),
                    },
                });
            }
        }
        if p.batch != 1 || p.a.ld.is_some_and(|ld| ld != p.k) || p.b.ld.is_some_and(|ld| ld != p.k)
        {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::TensorsNotPacked,
            });
        }
        self.run_fused(
            stream, &a.data, &a.scales, &b.data, &b.scales, c, d, epilogue, workspace,
        )
    }
}
