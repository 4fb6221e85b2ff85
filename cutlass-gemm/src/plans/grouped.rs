//! Grouped GEMMs: many problems that share N and K, one launch (mixture-of-experts layers).
//!
//! A mixture-of-experts layer multiplies each token by the weights of the few experts it is
//! routed to: per expert `g`, `D_g = alpha * alpha_g * A_g · W_gᵀ + beta * C_g`, with the same
//! `n x k` weight shape for every expert and a different number of tokens `m_g` for each, often a
//! handful. [`GroupedGemm`] runs all of them in one launch of CUTLASS's SM90 pointer-array
//! kernels (`KernelPtrArrayTmaWarpSpecialized{Cooperative,Pingpong}`), in one of two layouts
//! ([`GroupedLayout`]):
//!
//! - **contiguous**: the tokens sorted by expert, A `rows x k` and D `rows x n` row-major; group
//!   `g` owns rows `offsets[g]..offsets[g + 1]` (`groups + 1` i32 offsets on the device);
//! - **masked**: a fixed capacity per expert, A `groups x capacity x k` and D `groups x capacity x
//!   n`; group `g` holds its first `counts[g]` rows (`groups` i32 counts on the device). Nothing is
//!   read on the host, so a decode step can be captured in a CUDA graph and replayed with new
//!   counts.
//!
//! B holds one weight per group, `groups x n x k` (each a row-major `n x k` matrix, i.e. B
//! column-major, as a Linear layer stores it). Optional per-group alphas (one f32 per group on the
//! device: FP8 weights' tensor-wise scales) multiply `alpha`.
//!
//! The per-group arguments are built on the device by a small kernel launched before the GEMM in
//! the same stream. Offsets and counts read there are clamped to the plan's rows or capacity: a
//! group never reaches past A, C or D (offsets that decrease give groups that overlap, and so an
//! unspecified D in their rows, never an access out of bounds). [`GroupedGemm::check_group_rows`]
//! checks a host list with typed errors, [`GroupedGemm::upload_group_rows`] checks and copies it.
//!
//! [`GroupedBlockwiseGemm`] is the same over e4m3 with blockwise f32 scales (1x128 of A, 128x128
//! of each weight, K-major), CUTLASS's FP8 blockwise pointer-array kernels.
//!
//! On SM100, [`GroupedGemm`] also takes CUTLASS's `KernelPtrArrayTmaWarpSpecialized{1,2}SmSm100`
//! kernels (bf16, f16, e4m3; compiled and host path run on Hopper with
//! [`GroupedGemm::plan_any_arch`] and [`GroupedGemm::prepare`], not run on a Blackwell GPU);
//! MXFP8 and NVFP4 experts are [`crate::GroupedBlockScaledGemm`]'s.
//!
//! [`GroupedListGemm`] runs a list of problems of any extents (each its own m, n, k, A, B and D)
//! on the same kernels, the list checked on the host and copied with the launch.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use cutlass_gemm_catalog::{DataType, KernelSpec, Layout};
use cutlass_gemm_sys::{cutlass_rs_grouped_args, cutlass_rs_grouped_problem};

use crate::error::{
    overlaps, require_device, require_len, require_ordinal, Error, Extent, GroupRowsRule,
    KernelRule, OperandName, ProblemRule, Quantity, Result, Scalar, ScaleRule,
};
use crate::ffi::{DeviceInfo, GroupedKernel};
use crate::formats::element::Element;
use crate::formats::numeric::E4M3;
use crate::formats::scale_layout::ScaleMajor;
use crate::plans::gemm::{workspace_ptr, Workspace, POINTER_ALIGNMENT};
use crate::plans::problem::MAX_EXTENT;
use crate::quantize::{Fp8Block, Fp8BlockwiseTensor};
use crate::selection::{
    built_grouped_kernels, named_in_registry, named_in_registry_any_arch, registry_pool,
};

/// Where each group's rows are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupedLayout {
    /// The rows of all groups stacked (tokens sorted by expert): A is `rows x k`, C and D `rows x
    /// n`; `groups + 1` offsets on the device say where each group starts and ends.
    Contiguous {
        /// Rows of A, C and D.
        rows: usize,
    },
    /// A fixed capacity of rows per group: A is `groups x capacity x k`, C and D `groups x
    /// capacity x n`; `groups` counts on the device say how many rows of each are used.
    Masked {
        /// Rows per group.
        capacity: usize,
    },
}

/// A grouped GEMM's geometry: what a plan is made for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GroupedProblem {
    /// Groups (experts).
    pub groups: usize,
    /// Columns of every group's B, C and D (rows of each weight).
    pub n: usize,
    /// The reduction extent (columns of A and of each weight).
    pub k: usize,
    /// Where the groups' rows are.
    pub layout: GroupedLayout,
    /// Multiplies every group's product (and the per-group alphas, when given).
    pub alpha: f32,
    /// Multiplies C.
    pub beta: f32,
    /// Rows a group is expected to hold, for the kernel choice (0: the contiguous layout's rows
    /// divided by the groups, the masked layout's capacity).
    pub expected_rows: usize,
}

impl GroupedProblem {
    /// The contiguous layout: `rows` rows in all, `groups` weights of `n x k`.
    pub fn contiguous(groups: usize, rows: usize, n: usize, k: usize) -> GroupedProblem {
        GroupedProblem {
            groups,
            n,
            k,
            layout: GroupedLayout::Contiguous { rows },
            alpha: 1.0,
            beta: 0.0,
            expected_rows: 0,
        }
    }

    /// The masked layout: `capacity` rows per group, `groups` weights of `n x k`.
    pub fn masked(groups: usize, capacity: usize, n: usize, k: usize) -> GroupedProblem {
        GroupedProblem {
            layout: GroupedLayout::Masked { capacity },
            ..GroupedProblem::contiguous(groups, 0, n, k)
        }
    }

    /// With alpha and beta.
    pub fn with_scalars(mut self, alpha: f32, beta: f32) -> GroupedProblem {
        self.alpha = alpha;
        self.beta = beta;
        self
    }

    /// With the rows a group is expected to hold (the kernel choice's hint; a decode step's
    /// tokens times experts per token divided by the experts, for example).
    pub fn with_expected_rows(mut self, rows: usize) -> GroupedProblem {
        self.expected_rows = rows;
        self
    }

    /// Rows of A, C and D per group slot: the contiguous layout's rows (all groups share them)
    /// or the masked layout's capacity.
    pub fn rows(&self) -> usize {
        match self.layout {
            GroupedLayout::Contiguous { rows } => rows,
            GroupedLayout::Masked { capacity } => capacity,
        }
    }

    /// Matrices of rows: 1 for the contiguous layout, `groups` for the masked one.
    pub(crate) fn slots(&self) -> usize {
        match self.layout {
            GroupedLayout::Contiguous { .. } => 1,
            GroupedLayout::Masked { .. } => self.groups,
        }
    }

    /// Elements A must hold.
    pub fn a_len(&self) -> usize {
        self.slots() * self.rows() * self.k
    }

    /// Elements B (the weights) must hold.
    pub fn b_len(&self) -> usize {
        self.groups * self.n * self.k
    }

    /// Elements C and D must hold.
    pub fn d_len(&self) -> usize {
        self.slots() * self.rows() * self.n
    }

    /// Entries of the rows per group on the device: `groups + 1` offsets or `groups` counts.
    pub fn group_rows_len(&self) -> usize {
        match self.layout {
            GroupedLayout::Contiguous { .. } => self.groups + 1,
            GroupedLayout::Masked { .. } => self.groups,
        }
    }

    /// The rows a group is expected to hold.
    pub fn rows_per_group(&self) -> usize {
        match (self.expected_rows, self.layout) {
            (0, GroupedLayout::Contiguous { rows }) => rows.div_ceil(self.groups.max(1)),
            (0, GroupedLayout::Masked { capacity }) => capacity,
            (r, _) => r,
        }
    }

    /// Checks a host list of rows per group against the problem: `groups + 1` offsets that never
    /// decrease, from 0 up to the rows (contiguous), or `groups` counts from 0 up to the capacity
    /// (masked). Each failure is a typed error naming the entry.
    pub fn check_group_rows(&self, group_rows: &[i32]) -> Result<()> {
        let required = self.group_rows_len();
        if group_rows.len() != required {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::GroupRowsLength {
                    found: group_rows.len(),
                    required,
                },
            });
        }
        let limit = self.rows();
        let contiguous = matches!(self.layout, GroupedLayout::Contiguous { .. });
        let mut previous = 0i64;
        for (index, &v) in group_rows.iter().enumerate() {
            let value = i64::from(v);
            let rule = if value < 0 {
                Some(GroupRowsRule::Negative)
            } else if value as usize > limit {
                Some(GroupRowsRule::PastEnd { limit })
            } else if contiguous && index > 0 && value < previous {
                Some(GroupRowsRule::Decreasing { previous })
            } else {
                None
            };
            if let Some(rule) = rule {
                return Err(Error::InvalidProblem {
                    reason: ProblemRule::GroupRows { index, value, rule },
                });
            }
            previous = value;
        }
        Ok(())
    }

    /// Checks the rules that need no kernel: extents at least 1 (groups, rows, n, k) and at most
    /// `i32::MAX`, finite scalars, and element counts that fit a `usize`.
    pub fn check(&self) -> Result<()> {
        for (extent, v) in [
            (Extent::Groups, self.groups),
            (Extent::M, self.rows()),
            (Extent::N, self.n),
            (Extent::K, self.k),
        ] {
            require_extent(extent, v, 1)?;
        }
        if !self.alpha.is_finite() || !self.beta.is_finite() {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::NonFiniteScalars {
                    alpha: Scalar(self.alpha),
                    beta: Scalar(self.beta),
                },
            });
        }
        let slots = self.slots();
        for (operand, a, b) in [
            (OperandName::A, self.rows(), self.k),
            (OperandName::B, self.n, self.k),
            (OperandName::D, self.rows(), self.n),
        ] {
            let per = a.checked_mul(b);
            let count = if operand == OperandName::B {
                self.groups
            } else {
                slots
            };
            if per.and_then(|p| p.checked_mul(count)).is_none() {
                return Err(Error::InvalidProblem {
                    reason: ProblemRule::OperandReachOverflows { operand },
                });
            }
        }
        Ok(())
    }
}

/// The inputs of one launch of a [`GroupedGemm`]: A, the weights, the rows per group and,
/// optionally, per-group alphas and C.
pub struct GroupedInputs<'a, T, TD> {
    a: &'a dyn DevicePtr<T>,
    b: &'a dyn DevicePtr<T>,
    group_rows: &'a dyn DevicePtr<i32>,
    alphas: Option<&'a dyn DevicePtr<f32>>,
    c: Option<&'a dyn DevicePtr<TD>>,
}

impl<'a, T, TD> GroupedInputs<'a, T, TD> {
    /// A, the weights (`groups x n x k`) and the rows per group (offsets or counts, by the plan's
    /// layout).
    pub fn new(
        a: &'a dyn DevicePtr<T>,
        weights: &'a dyn DevicePtr<T>,
        group_rows: &'a dyn DevicePtr<i32>,
    ) -> Self {
        GroupedInputs {
            a,
            b: weights,
            group_rows,
            alphas: None,
            c: None,
        }
    }

    /// With one alpha per group (f32, at least `groups` of them), multiplying the plan's alpha.
    pub fn with_alphas(mut self, alphas: &'a dyn DevicePtr<f32>) -> Self {
        self.alphas = Some(alphas);
        self
    }

    /// With C (read when the plan's beta is not 0), of D's geometry.
    pub fn with_c(mut self, c: &'a dyn DevicePtr<TD>) -> Self {
        self.c = Some(c);
        self
    }
}

/// A planned grouped GEMM: A and the weights of type `T` (bf16, f16 or e4m3), C and D of `TD`.
#[derive(Debug, Clone)]
pub struct GroupedGemm<T: Element, TD: Element> {
    problem: GroupedProblem,
    device: DeviceInfo,
    kernel: GroupedKernel,
    workspace_size: usize,
    /// Whether the kernel takes blockwise scales (a [`GroupedBlockwiseGemm`]'s plan).
    blockwise: bool,
    _types: std::marker::PhantomData<(T, TD)>,
}

impl<T: Element, TD: Element> GroupedGemm<T, TD> {
    /// Plans on `ctx`'s device, choosing among the grouped kernels of this build.
    pub fn new(ctx: &CudaContext, problem: &GroupedProblem) -> Result<Self> {
        Self::plan(DeviceInfo::query(ctx)?, problem, None)
    }

    /// Plans with the grouped kernel of this name.
    pub fn with_kernel(ctx: &CudaContext, problem: &GroupedProblem, name: &str) -> Result<Self> {
        Self::plan(DeviceInfo::query(ctx)?, problem, Some(name))
    }

    /// Plans for a described device without touching it.
    ///
    /// Rules, each a typed error: the problem's ([`GroupedProblem::check`]); k a multiple of A's
    /// and B's 16-byte alignment and n of D's (each group's rows start 16-byte aligned, as TMA
    /// reads them); a grouped kernel of this build for these types ([`Error::NoKernel`] otherwise,
    /// [`KernelRule::Grouped`] when a named kernel is not grouped) that the device can run.
    pub fn plan(
        device: DeviceInfo,
        problem: &GroupedProblem,
        kernel: Option<&str>,
    ) -> Result<Self> {
        Self::plan_scaled(device, problem, kernel, false, false)
    }

    /// Plans with the named grouped kernel even when `device` cannot run it (an SM100 kernel on a
    /// Hopper GPU): every check and [`GroupedGemm::prepare`] work, [`GroupedGemm::run`] returns
    /// [`Error::ArchMismatch`]. For exercising SM100 host paths on another GPU.
    pub fn plan_any_arch(
        device: DeviceInfo,
        problem: &GroupedProblem,
        kernel: &str,
    ) -> Result<Self> {
        Self::plan_scaled(device, problem, Some(kernel), false, true)
    }

    /// [`GroupedGemm::plan`] among the kernels with blockwise scales, or those without.
    fn plan_scaled(
        device: DeviceInfo,
        problem: &GroupedProblem,
        kernel: Option<&str>,
        blockwise: bool,
        any_arch: bool,
    ) -> Result<Self> {
        problem.check()?;
        let kernel = select(
            &device,
            problem.rows_per_group(),
            (T::DATA_TYPE, TD::DATA_TYPE, blockwise),
            kernel,
            any_arch,
        )?;
        require_k_and_n_aligned(&kernel, problem.k, problem.n)?;
        let mut plan = GroupedGemm {
            problem: *problem,
            device,
            kernel,
            workspace_size: 0,
            blockwise,
            _types: std::marker::PhantomData,
        };
        plan.workspace_size = kernel.workspace_size_of(&plan.args(Pointers::default()))?;
        Ok(plan)
    }

    /// The chosen kernel's name.
    pub fn kernel_name(&self) -> &'static str {
        self.kernel.name
    }

    /// The problem planned for.
    pub fn problem(&self) -> &GroupedProblem {
        &self.problem
    }

    /// Bytes of workspace a launch needs: the per-group arrays and the kernel's per-SM TMA
    /// descriptors.
    pub fn workspace_size(&self) -> usize {
        self.workspace_size
    }

    /// Checks a host list of rows per group against the plan ([`GroupedProblem::check_group_rows`]).
    pub fn check_group_rows(&self, group_rows: &[i32]) -> Result<()> {
        self.problem.check_group_rows(group_rows)
    }

    /// Checks a host list of rows per group ([`GroupedGemm::check_group_rows`]) and copies it to
    /// the device on `stream`.
    pub fn upload_group_rows(
        &self,
        stream: &Arc<CudaStream>,
        group_rows: &[i32],
    ) -> Result<CudaSlice<i32>> {
        upload_group_rows(&self.problem, &self.device, stream, group_rows)
    }

    /// Checks the buffers and launches the grouped GEMM on `stream`: the per-group argument
    /// builder, then the kernel. Rules checked first, each a typed error naming the operand: every
    /// buffer and the stream on the plan's device; lengths (A, B and D by the layout, the rows per
    /// group `groups + 1` or `groups`, the alphas `groups`, C as D); 16-byte aligned A, B, C, D
    /// and workspace, 4-byte aligned offsets and alphas; D overlapping no input but C; C given
    /// when beta is not 0.
    pub fn run(
        &self,
        stream: &Arc<CudaStream>,
        inputs: &GroupedInputs<'_, T, TD>,
        d: &mut dyn DevicePtrMut<TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        self.launch(stream, inputs, None, d, workspace, Mode::Run)
    }

    /// Everything [`GroupedGemm::run`] does except the launches: the same checks, then the
    /// kernel's host path (CUTLASS's `can_implement` and its kernel parameters over the
    /// workspace). Works for a kernel of any architecture on any GPU
    /// ([`GroupedGemm::plan_any_arch`]); the per-group arguments are built on the device at launch
    /// only.
    pub fn prepare(
        &self,
        stream: &Arc<CudaStream>,
        inputs: &GroupedInputs<'_, T, TD>,
        d: &mut dyn DevicePtrMut<TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        self.launch(stream, inputs, None, d, workspace, Mode::Prepare)
    }

    /// Scales the kernel reads, `(A's, B's)`: `ceil(k / 128)` per row of A (the contiguous
    /// layout's rows, or every group's capacity), `ceil(n / 128) * ceil(k / 128)` per group; none
    /// without blockwise scales.
    fn scale_lens(&self) -> (usize, usize) {
        match self.kernel.spec.blockwise {
            Some(bw) if self.blockwise => {
                let p = &self.problem;
                let kb = p.k.div_ceil(bw.k as usize);
                (
                    p.slots() * p.rows() * kb,
                    p.groups * p.n.div_ceil(bw.n as usize) * kb,
                )
            }
            _ => (0, 0),
        }
    }

    /// [`GroupedGemm::run`], with the scales of a blockwise plan.
    fn launch(
        &self,
        stream: &Arc<CudaStream>,
        inputs: &GroupedInputs<'_, T, TD>,
        scales: Option<[&dyn DevicePtr<f32>; 2]>,
        d: &mut dyn DevicePtrMut<TD>,
        workspace: Workspace<'_>,
        mode: Mode,
    ) -> Result<()> {
        let device = self.device.ordinal;
        crate::error::require_stream(stream, device)?;
        if mode == Mode::Run {
            crate::error::require_arch(
                self.kernel.name,
                self.kernel.spec.arch,
                self.device.compute_capability,
            )?;
        }
        let p = &self.problem;
        require_device(OperandName::A, inputs.a, device)?;
        require_device(OperandName::B, inputs.b, device)?;
        require_device(OperandName::GroupRows, inputs.group_rows, device)?;
        if let Some(x) = inputs.alphas {
            require_device(OperandName::GroupAlphas, x, device)?;
        }
        if let Some(c) = inputs.c {
            require_device(OperandName::C, c, device)?;
        }
        require_device(OperandName::D, d, device)?;
        let (sa_len, sb_len) = self.scale_lens();
        // A blockwise plan takes its scales (GroupedBlockwiseGemm::run), another takes none.
        debug_assert_eq!(scales.is_some(), self.blockwise);
        let scales = scales.map(|[sa, sb]| {
            [
                (OperandName::ScalesA, sa, sa_len),
                (OperandName::ScalesB, sb, sb_len),
            ]
        });
        for (operand, x, len) in scales.iter().flatten() {
            require_device(*operand, *x, device)?;
            require_len(*operand, x.len(), *len)?;
        }
        require_len(OperandName::A, inputs.a.len(), p.a_len())?;
        require_len(OperandName::B, inputs.b.len(), p.b_len())?;
        require_len(
            OperandName::GroupRows,
            inputs.group_rows.len(),
            p.group_rows_len(),
        )?;
        if let Some(x) = inputs.alphas {
            require_len(OperandName::GroupAlphas, x.len(), p.groups)?;
        }
        if let Some(c) = inputs.c {
            require_len(OperandName::C, c.len(), p.d_len())?;
        }
        require_len(OperandName::D, d.len(), p.d_len())?;
        if inputs.c.is_none() && p.beta != 0.0 {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::BetaWithoutC {
                    beta: Scalar(p.beta),
                },
            });
        }
        let (pa, _ga) = inputs.a.device_ptr(stream);
        let (pb, _gb) = inputs.b.device_ptr(stream);
        let (pr, _gr) = inputs.group_rows.device_ptr(stream);
        let alphas = inputs.alphas.map(|x| x.device_ptr(stream));
        let c = inputs.c.map(|c| c.device_ptr(stream));
        let (pd, _gd) = d.device_ptr_mut(stream);
        let pc = c.as_ref().map(|(p, _)| *p);
        let pal = alphas.as_ref().map(|(p, _)| *p);
        let scale_ptrs = scales.map(|s| s.map(|(_, x, _)| x.device_ptr(stream)));
        let [psa, psb] = match &scale_ptrs {
            Some([(a, _), (b, _)]) => [Some(*a), Some(*b)],
            None => [None, None],
        };
        for (operand, ptr, align) in [
            (OperandName::A, Some(pa), POINTER_ALIGNMENT),
            (OperandName::B, Some(pb), POINTER_ALIGNMENT),
            (OperandName::C, pc, POINTER_ALIGNMENT),
            (OperandName::D, Some(pd), POINTER_ALIGNMENT),
            (OperandName::GroupRows, Some(pr), 4),
            (OperandName::GroupAlphas, pal, 4),
            (OperandName::ScalesA, psa, 4),
            (OperandName::ScalesB, psb, 4),
        ] {
            if let Some(ptr) = ptr {
                crate::error::require_aligned(operand, Quantity::Pointer, ptr, align)?;
            }
        }
        // D may be C (accumulating in place) but no other input.
        let d_range = (pd, span::<TD>(p.d_len()));
        for (input, range) in [
            (OperandName::A, Some((pa, span::<T>(p.a_len())))),
            (OperandName::B, Some((pb, span::<T>(p.b_len())))),
            (
                OperandName::GroupRows,
                Some((pr, span::<i32>(p.group_rows_len()))),
            ),
            (
                OperandName::GroupAlphas,
                pal.map(|x| (x, span::<f32>(p.groups))),
            ),
            (OperandName::ScalesA, psa.map(|x| (x, span::<f32>(sa_len)))),
            (OperandName::ScalesB, psb.map(|x| (x, span::<f32>(sb_len)))),
            (
                OperandName::C,
                pc.filter(|&c| c != pd).map(|c| (c, span::<TD>(p.d_len()))),
            ),
        ] {
            if range.is_some_and(|r| overlaps(r, d_range)) {
                return Err(Error::Aliasing {
                    output: OperandName::D,
                    input,
                });
            }
        }
        let mut managed = None;
        let (pw, _gw) = workspace_ptr(stream, workspace, self.workspace_size, &mut managed, true)?;
        let args = self.args(Pointers {
            a: pa,
            b: pb,
            c: pc.unwrap_or(pd),
            d: pd,
            group_rows: pr,
            alphas: pal.unwrap_or(0),
            scale_a: psa.unwrap_or(0),
            scale_b: psb.unwrap_or(0),
            problems: 0,
        });
        mode.launch(&self.kernel, &args, pw, self.workspace_size, stream)
    }

    /// The C arguments over device pointers (0 for none).
    fn args(&self, ptrs: Pointers) -> cutlass_rs_grouped_args {
        grouped_args(&self.problem, &self.device, ptrs)
    }
}

/// A planned grouped FP8 GEMM with blockwise scales: per group `D_g = alpha * alpha_g *
/// Σ_kb (sa · A_g) · (sb · W_g)ᵀ + beta * C_g`, A and the weights e4m3, one f32 scale per row of A
/// and 128 elements of K (1x128) and per 128x128 block of each weight, applied to the f32
/// accumulator once per 128-deep k-block (the DeepSeek-V3 recipe, on CUTLASS's
/// `KernelPtrArrayTmaWarpSpecialized{Cooperative,Pingpong}FP8Blockwise`).
///
/// The layouts are [`GroupedGemm`]'s. The scales are K-major (row-major, [`ScaleMajor::K`]):
/// A's `[rows, ceil(k / 128)]` (the masked layout's `groups * capacity` rows, group after group),
/// each expert's `[ceil(n / 128), ceil(k / 128)]`, expert after expert, as a per-token quantizer
/// writes them and DeepSeek-V3's checkpoints store them (`weight_scale_inv`). A group's scales
/// then follow its rows wherever the offsets put them: no per-group padding or re-layout.
#[derive(Debug, Clone)]
pub struct GroupedBlockwiseGemm<TD: Element> {
    inner: GroupedGemm<E4M3, TD>,
}

impl<TD: Element> GroupedBlockwiseGemm<TD> {
    /// Plans on `ctx`'s device, choosing among the grouped blockwise kernels of this build.
    pub fn new(ctx: &CudaContext, problem: &GroupedProblem) -> Result<Self> {
        Self::plan(DeviceInfo::query(ctx)?, problem, None)
    }

    /// Plans with the grouped blockwise kernel of this name.
    pub fn with_kernel(ctx: &CudaContext, problem: &GroupedProblem, name: &str) -> Result<Self> {
        Self::plan(DeviceInfo::query(ctx)?, problem, Some(name))
    }

    /// Plans for a described device without touching it: [`GroupedGemm::plan`]'s rules, among
    /// the kernels with blockwise scales ([`KernelRule::NotBlockwise`] for a named kernel
    /// without them).
    pub fn plan(
        device: DeviceInfo,
        problem: &GroupedProblem,
        kernel: Option<&str>,
    ) -> Result<Self> {
        Ok(GroupedBlockwiseGemm {
            inner: GroupedGemm::plan_scaled(device, problem, kernel, true, false)?,
        })
    }

    /// The chosen kernel's name.
    pub fn kernel_name(&self) -> &'static str {
        self.inner.kernel_name()
    }

    /// The problem planned for.
    pub fn problem(&self) -> &GroupedProblem {
        self.inner.problem()
    }

    /// Bytes of workspace a launch needs.
    pub fn workspace_size(&self) -> usize {
        self.inner.workspace_size()
    }

    /// Scales the kernel reads, `(A's, the weights')`: `ceil(k / 128)` per row of A,
    /// `ceil(n / 128) * ceil(k / 128)` per group.
    pub fn scale_lens(&self) -> (usize, usize) {
        self.inner.scale_lens()
    }

    /// [`GroupedGemm::check_group_rows`].
    pub fn check_group_rows(&self, group_rows: &[i32]) -> Result<()> {
        self.inner.check_group_rows(group_rows)
    }

    /// [`GroupedGemm::upload_group_rows`].
    pub fn upload_group_rows(
        &self,
        stream: &Arc<CudaStream>,
        group_rows: &[i32],
    ) -> Result<CudaSlice<i32>> {
        self.inner.upload_group_rows(stream, group_rows)
    }

    /// Checks the buffers and launches on `stream`: [`GroupedGemm::run`]'s rules, and the scales
    /// of A and of the weights on the plan's device, at least [`GroupedBlockwiseGemm::scale_lens`]
    /// long, 4-byte aligned and not overlapping D (typed errors naming `ScalesA` / `ScalesB`).
    pub fn run(
        &self,
        stream: &Arc<CudaStream>,
        inputs: &GroupedInputs<'_, E4M3, TD>,
        scales_a: &dyn DevicePtr<f32>,
        scales_b: &dyn DevicePtr<f32>,
        d: &mut dyn DevicePtrMut<TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        self.inner.launch(
            stream,
            inputs,
            Some([scales_a, scales_b]),
            d,
            workspace,
            Mode::Run,
        )
    }

    /// Runs on tensors from [`crate::quantize::quantize_fp8_blockwise`] with [`ScaleMajor::K`]
    /// scales: `a` the plan's A (`rows x k`, or `groups * capacity x k`) with 1x128 groups,
    /// `weights` all experts' weights as one `groups * n x k` tensor with 128x128 blocks (n a
    /// multiple of 128, so that no block straddles two experts:
    /// [`ScaleRule::GroupedWeightBlocks`] otherwise).
    pub fn run_tensors(
        &self,
        stream: &Arc<CudaStream>,
        a: &Fp8BlockwiseTensor,
        weights: &Fp8BlockwiseTensor,
        group_rows: &dyn DevicePtr<i32>,
        d: &mut dyn DevicePtrMut<TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        let p = *self.problem();
        for (operand, scales, t, rows, block) in [
            (
                OperandName::A,
                OperandName::ScalesA,
                a,
                p.slots() * p.rows(),
                Fp8Block::Group1x128,
            ),
            (
                OperandName::B,
                OperandName::ScalesB,
                weights,
                p.groups * p.n,
                Fp8Block::Block128x128,
            ),
        ] {
            let rule = if t.block != block {
                Some(ScaleRule::Fp8Block {
                    required: block,
                    found: t.block,
                })
            } else if t.scale_major != ScaleMajor::K {
                Some(ScaleRule::Fp8ScaleMajor {
                    required: ScaleMajor::K,
                    found: t.scale_major,
                })
            } else if operand == OperandName::B && p.groups > 1 && p.n % 128 != 0 {
                Some(ScaleRule::GroupedWeightBlocks { n: p.n })
            } else {
                None
            };
            if let Some(rule) = rule {
                return Err(Error::ScaleMismatch {
                    operand: scales,
                    rule,
                });
            }
            if (t.rows, t.cols) != (rows, p.k) {
                return Err(Error::InvalidProblem {
                    reason: ProblemRule::TensorShape {
                        operand,
                        found: (t.rows, t.cols),
                        required: (rows, p.k),
                    },
                });
            }
        }
        let inputs = GroupedInputs::new(&a.data, &weights.data, group_rows);
        self.run(stream, &inputs, &a.scales, &weights.scales, d, workspace)
    }
}

/// One problem of a [`GroupedListGemm`]: its own extents, A (`m x k` row-major, packed) and B (an
/// `n x k` row-major weight, i.e. B column-major, packed).
pub struct GroupedListProblem<'a, T> {
    /// Rows of A and D (0: the problem is skipped).
    pub m: usize,
    /// Columns of D, rows of the weight.
    pub n: usize,
    /// The reduction extent.
    pub k: usize,
    /// A, at least `m * k` elements.
    pub a: &'a dyn DevicePtr<T>,
    /// The weight, at least `n * k` elements.
    pub b: &'a dyn DevicePtr<T>,
}

/// A planned grouped GEMM over a list of problems of any extents, `D_i = alpha · A_i · B_iᵀ`, in
/// one launch (the C ABI's `CUTLASS_RS_GROUPED_LIST`): the same kernels as [`GroupedGemm`], the
/// problems described on the host. Each launch checks every problem (extents, lengths, 16-byte
/// alignment of pointers, of k and of n, devices, and no D overlapping any operand or another D)
/// and copies the list to the device with the launch; this copy from pageable host memory cannot
/// be captured in a CUDA graph (the masked layout of [`GroupedGemm`] can).
#[derive(Debug, Clone)]
pub struct GroupedListGemm<T: Element, TD: Element> {
    groups: usize,
    alpha: f32,
    device: DeviceInfo,
    kernel: GroupedKernel,
    /// The kernel's workspace (arrays and CUTLASS's), then the problem table.
    kernel_workspace: usize,
    _types: std::marker::PhantomData<(T, TD)>,
}

/// The problem table's alignment in the workspace.
const TABLE_ALIGNMENT: usize = 256;

impl<T: Element, TD: Element> GroupedListGemm<T, TD> {
    /// Plans for up to `groups` problems whose rows are expected to be about `expected_rows` each
    /// (the kernel choice's hint, as [`GroupedProblem::with_expected_rows`]), on `ctx`'s device.
    pub fn new(ctx: &CudaContext, groups: usize, expected_rows: usize) -> Result<Self> {
        Self::plan(DeviceInfo::query(ctx)?, groups, expected_rows, None)
    }

    /// Plans for a described device, with the named grouped kernel or the library's choice.
    pub fn plan(
        device: DeviceInfo,
        groups: usize,
        expected_rows: usize,
        kernel: Option<&str>,
    ) -> Result<Self> {
        require_extent(Extent::Groups, groups, 1)?;
        let kernel = select(
            &device,
            expected_rows.max(1),
            (T::DATA_TYPE, TD::DATA_TYPE, false),
            kernel,
            false,
        )?;
        let mut plan = GroupedListGemm {
            groups,
            alpha: 1.0,
            device,
            kernel,
            kernel_workspace: 0,
            _types: std::marker::PhantomData,
        };
        plan.kernel_workspace = kernel.workspace_size_of(&plan.args(groups, 0))?;
        Ok(plan)
    }

    /// With alpha (every problem's product is multiplied by it).
    pub fn with_alpha(mut self, alpha: f32) -> Result<Self> {
        if !alpha.is_finite() {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::NonFiniteScalars {
                    alpha: Scalar(alpha),
                    beta: Scalar(0.0),
                },
            });
        }
        self.alpha = alpha;
        Ok(self)
    }

    /// The chosen kernel's name.
    pub fn kernel_name(&self) -> &'static str {
        self.kernel.name
    }

    /// Bytes of workspace a launch needs: the kernel's, then the problem table.
    pub fn workspace_size(&self) -> usize {
        self.kernel_workspace.next_multiple_of(TABLE_ALIGNMENT)
            + self.groups * std::mem::size_of::<cutlass_rs_grouped_problem>()
    }

    /// Checks every problem and launches them all: `outputs[i]` (`m x n` row-major, packed) gets
    /// `alpha · A_i · B_iᵀ`. At most the planned number of problems; errors name the operand of
    /// the first problem that breaks a rule (see the type's docs).
    pub fn run(
        &self,
        stream: &Arc<CudaStream>,
        problems: &[GroupedListProblem<'_, T>],
        outputs: &mut [&mut dyn DevicePtrMut<TD>],
        workspace: Workspace<'_>,
    ) -> Result<()> {
        let device = self.device.ordinal;
        crate::error::require_stream(stream, device)?;
        crate::error::require_arch(
            self.kernel.name,
            self.kernel.spec.arch,
            self.device.compute_capability,
        )?;
        if problems.len() != outputs.len() || problems.is_empty() || problems.len() > self.groups {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::GroupRowsLength {
                    found: problems.len().min(outputs.len()),
                    required: self.groups,
                },
            });
        }
        let mut table = Vec::with_capacity(problems.len());
        let mut inputs: Vec<(OperandName, (u64, u64))> = Vec::new();
        let mut outs: Vec<(u64, u64)> = Vec::new();
        let mut guards = Vec::new();
        for (p, d) in problems.iter().zip(outputs.iter_mut()) {
            for (extent, v, min) in [
                (Extent::M, p.m, 0),
                (Extent::N, p.n, 1),
                (Extent::K, p.k, 1),
            ] {
                require_extent(extent, v, min)?;
            }
            require_k_and_n_aligned(&self.kernel, p.k, p.n)?;
            require_device(OperandName::A, p.a, device)?;
            require_device(OperandName::B, p.b, device)?;
            require_device(OperandName::D, &**d, device)?;
            require_len(OperandName::A, p.a.len(), p.m * p.k)?;
            require_len(OperandName::B, p.b.len(), p.n * p.k)?;
            require_len(OperandName::D, d.len(), p.m * p.n)?;
            let (pa, ga) = p.a.device_ptr(stream);
            let (pb, gb) = p.b.device_ptr(stream);
            let (pd, gd) = d.device_ptr_mut(stream);
            guards.push((ga, gb, gd));
            for (operand, ptr) in [
                (OperandName::A, pa),
                (OperandName::B, pb),
                (OperandName::D, pd),
            ] {
                crate::error::require_aligned(operand, Quantity::Pointer, ptr, POINTER_ALIGNMENT)?;
            }
            inputs.push((OperandName::A, (pa, span::<T>(p.m * p.k))));
            inputs.push((OperandName::B, (pb, span::<T>(p.n * p.k))));
            outs.push((pd, span::<TD>(p.m * p.n)));
            table.push(cutlass_rs_grouped_problem {
                m: p.m as i64,
                n: p.n as i64,
                k: p.k as i64,
                a: pa as *const _,
                lda: p.k as i64,
                b: pb as *const _,
                ldb: p.k as i64,
                c: pd as *const _,
                ldc: p.n as i64,
                d: pd as *mut _,
                ldd: p.n as i64,
            });
        }
        // No D overlaps an operand of any problem or another D.
        for (i, &o) in outs.iter().enumerate() {
            if let Some((input, _)) = inputs.iter().find(|(_, r)| overlaps(*r, o)) {
                return Err(Error::Aliasing {
                    output: OperandName::D,
                    input: *input,
                });
            }
            if outs[i + 1..].iter().any(|&x| overlaps(x, o)) {
                return Err(Error::Aliasing {
                    output: OperandName::D,
                    input: OperandName::D,
                });
            }
        }
        let mut managed = None;
        let size = self.workspace_size();
        let (pw, _gw) = workspace_ptr(stream, workspace, size, &mut managed, true)?;
        let table_at = pw + self.kernel_workspace.next_multiple_of(TABLE_ALIGNMENT) as u64;
        // SAFETY: the table is plain data (pointers and integers, no padding); the copy stays
        // inside the workspace, which holds `size` bytes; pageable host memory is staged by the
        // driver before the call returns.
        unsafe {
            let bytes = std::slice::from_raw_parts(
                table.as_ptr() as *const u8,
                std::mem::size_of_val(table.as_slice()),
            );
            cudarc::driver::result::memcpy_htod_async(table_at, bytes, stream.cu_stream())?;
        }
        let args = self.args(table.len(), table_at);
        // SAFETY: every problem was checked against its buffers (extents, lengths, alignment,
        // device, aliasing); the guards keep the buffers' stream ordering until the launches are
        // queued.
        let r = unsafe { self.kernel.launch_abi(&args, pw, size, stream.cu_stream()) };
        drop(guards);
        r
    }

    fn args(&self, groups: usize, problems: u64) -> cutlass_rs_grouped_args {
        cutlass_rs_grouped_args {
            layout: cutlass_gemm_sys::CUTLASS_RS_GROUPED_LIST,
            groups: groups as i32,
            rows: 0,
            n: 0,
            k: 0,
            a: std::ptr::null(),
            lda: 0,
            batch_stride_a: 0,
            b: std::ptr::null(),
            ldb: 0,
            batch_stride_b: 0,
            c: std::ptr::null(),
            ldc: 0,
            batch_stride_c: 0,
            d: std::ptr::null_mut(),
            ldd: 0,
            batch_stride_d: 0,
            group_rows: std::ptr::null(),
            problems: problems as *const _,
            scale_a: std::ptr::null(),
            scale_b: std::ptr::null(),
            alphas: std::ptr::null(),
            alpha: self.alpha,
            beta: 0.0,
            device_id: self.device.ordinal as i32,
            sm_count: self.device.kernel_sm_count(),
            launch_flags: 0,
            reserved: 0,
        }
    }
}

/// The extent rule of a grouped problem: `value` at least `min` (1, or 0 for a list problem's
/// rows) and at most `i32::MAX`.
fn require_extent(extent: Extent, value: usize, min: usize) -> Result<()> {
    let reason = if value < min {
        ProblemRule::ZeroExtent(extent)
    } else if value > MAX_EXTENT {
        ProblemRule::ExtentTooLarge { extent, value }
    } else {
        return Ok(());
    };
    Err(Error::InvalidProblem { reason })
}

/// The kernel's alignment of k (A's, so that each row of A starts 16-byte aligned) and of n
/// (D's).
fn require_k_and_n_aligned(kernel: &GroupedKernel, k: usize, n: usize) -> Result<()> {
    for (operand, extent, value, align) in [
        (OperandName::A, Extent::K, k, kernel.spec.a.align),
        (OperandName::D, Extent::N, n, kernel.spec.d.align),
    ] {
        crate::error::require_aligned(
            operand,
            Quantity::Extent(extent),
            value as u64,
            u64::from(align),
        )?;
    }
    Ok(())
}

fn span<T>(len: usize) -> u64 {
    (len * std::mem::size_of::<T>()) as u64
}

/// The C arguments of a contiguous or masked grouped problem over device pointers (0 for none);
/// leading dimensions and strides in elements (packed ones for sub-byte types).
pub(crate) fn grouped_args(
    p: &GroupedProblem,
    device: &DeviceInfo,
    ptrs: Pointers,
) -> cutlass_rs_grouped_args {
    let Pointers {
        a,
        b,
        c,
        d,
        group_rows: rows,
        alphas,
        scale_a,
        scale_b,
        problems,
    } = ptrs;
    let (layout, stride) = match p.layout {
        GroupedLayout::Contiguous { .. } => (cutlass_gemm_sys::CUTLASS_RS_GROUPED_CONTIGUOUS, 0),
        GroupedLayout::Masked { capacity } => {
            (cutlass_gemm_sys::CUTLASS_RS_GROUPED_MASKED, capacity)
        }
    };
    cutlass_rs_grouped_args {
        layout,
        groups: p.groups as i32,
        rows: p.rows() as i64,
        n: p.n as i64,
        k: p.k as i64,
        a: a as *const _,
        lda: p.k as i64,
        batch_stride_a: (stride * p.k) as i64,
        b: b as *const _,
        ldb: p.k as i64,
        batch_stride_b: (p.n * p.k) as i64,
        c: c as *const _,
        ldc: p.n as i64,
        batch_stride_c: (stride * p.n) as i64,
        d: d as *mut _,
        ldd: p.n as i64,
        batch_stride_d: (stride * p.n) as i64,
        group_rows: rows as *const i32,
        problems: problems as *const _,
        scale_a: scale_a as *const _,
        scale_b: scale_b as *const _,
        alphas: alphas as *const f32,
        alpha: p.alpha,
        beta: p.beta,
        device_id: device.ordinal as i32,
        sm_count: device.kernel_sm_count(),
        launch_flags: 0,
        reserved: 0,
    }
}

/// Checks a host list of rows per group against a problem and copies it to the device on
/// `stream` (which must be the plan's device's).
pub(crate) fn upload_group_rows(
    problem: &GroupedProblem,
    device: &DeviceInfo,
    stream: &Arc<CudaStream>,
    group_rows: &[i32],
) -> Result<CudaSlice<i32>> {
    problem.check_group_rows(group_rows)?;
    require_ordinal(
        OperandName::Stream,
        stream.context().ordinal(),
        device.ordinal,
    )?;
    Ok(stream.clone_htod(group_rows)?)
}

/// What a checked call does at its end: launch, or stop after the kernel's host path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Run,
    Prepare,
}

impl Mode {
    /// Launches (the per-group argument builder, then the kernel) or runs the host path only.
    pub(crate) fn launch(
        self,
        kernel: &GroupedKernel,
        args: &cutlass_rs_grouped_args,
        workspace: u64,
        workspace_bytes: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        // SAFETY: the callers checked every buffer against the extents the layout reaches (the
        // device-side builder clamps offsets and counts to them), its device, alignment and
        // aliasing, and hold the guards that keep the buffers' stream ordering until the launches
        // are queued; a kernel of another architecture is never launched (`require_arch`), only
        // prepared, which encodes the pointers into descriptors without touching them.
        unsafe {
            match self {
                Mode::Run => {
                    kernel.launch_abi(args, workspace, workspace_bytes, stream.cu_stream())
                }
                Mode::Prepare => {
                    stream.context().bind_to_thread()?;
                    kernel.prepare_abi(args, workspace, workspace_bytes)
                }
            }
        }
    }
}

/// The device pointers of one launch of a grouped plan (0 for none).
#[derive(Clone, Copy, Default)]
pub(crate) struct Pointers {
    pub(crate) a: u64,
    pub(crate) b: u64,
    pub(crate) c: u64,
    pub(crate) d: u64,
    pub(crate) group_rows: u64,
    pub(crate) alphas: u64,
    pub(crate) scale_a: u64,
    pub(crate) scale_b: u64,
    pub(crate) problems: u64,
}

/// Rows a group is expected to hold up to which a plan takes a swapped grouped kernel (half its
/// 16-wide N tile, so that a group of twice the expected rows still reads its weight once).
pub const SWAPPED_ROWS: usize = 8;

/// The grouped kernel for a plan: the one named, or the rule below among the default set's grouped
/// kernels of this build for the types that the device can run (all of this build's when it has
/// none of those).
///
/// The rule, by the rows a group is expected to hold (`rows`): up to [`SWAPPED_ROWS`], the
/// swapped kernel (column-major D, each group's `Dᵀ = W·Xᵀ`) with the narrowest N where there is
/// one (64x16x128 for 16-bit types, 128x16x128 for e4m3: the weights on the tile's M side, a
/// group's few rows on its N side); up to 64, the row-major pingpong tile with the narrowest N (64x128: decode, where each
/// expert sees a few tokens and the weights are the whole cost); up to 128, a pingpong tile at
/// least 256 wide where there is one (64x256 for 16-bit types); beyond, the cooperative tile of
/// the largest area (128x256 for 16-bit types, 128x128 for e4m3). Fitted to Mixtral-8x7B's and
/// DeepSeek-V3's expert layers, on an H100 (`cutlass-profiler profile --grouped --kernels all`)
/// and for the swapped band on an H200 (`--tokens 1,8,64`), Qwen3-30B-A3B held out
/// (`docs/performance.md`). Where the pool has no pingpong kernel (SM100), up to 128 rows the
/// cooperative tile of the smallest area.
fn select(
    device: &DeviceInfo,
    rows: usize,
    (a, d, blockwise): (DataType, DataType, bool),
    name: Option<&str>,
    any_arch: bool,
) -> Result<GroupedKernel> {
    let types = |s: &KernelSpec| s.a.ty == a && s.b.ty == a && s.d.ty == d;
    let serves =
        |s: &KernelSpec| types(s) && s.blockwise.is_some() == blockwise && s.block_scale.is_none();
    if let Some(name) = name {
        let kind = |s: &KernelSpec| s.kernel_schedule.is_grouped();
        let other = KernelRule::Grouped { kernel: false };
        let mismatch = |s: &KernelSpec| {
            if s.block_scale.is_some() {
                return Some(KernelRule::BlockScaled);
            }
            if s.blockwise.is_some() != blockwise {
                return Some(if blockwise {
                    KernelRule::NotBlockwise
                } else {
                    KernelRule::Blockwise
                });
            }
            (!types(s)).then(|| {
                let (operand, kernel, required) = if s.a.ty != a {
                    (OperandName::A, s.a.ty, a)
                } else {
                    (OperandName::D, s.d.ty, d)
                };
                KernelRule::Operand {
                    operand,
                    kernel: (kernel, s.a.layout),
                    required: (required, s.a.layout),
                }
            })
        };
        let built = built_grouped_kernels();
        return if any_arch {
            named_in_registry_any_arch(built, name, kind, other, mismatch)
        } else {
            named_in_registry(built, name, device, kind, other, mismatch)
        };
    }
    // The swapped kernels (a column-major D) serve the first band only, the row-major ones the
    // others; each pool prefers the default set's kernels on its own, so that a build with a
    // default swapped kernel and other row-major ones keeps the latter for large groups.
    let pool_of = |column_major: bool| {
        registry_pool(
            built_grouped_kernels(),
            device,
            |s| serves(s) && (s.d.layout == Layout::ColumnMajor) == column_major,
            cutlass_gemm_catalog::catalog::is_default,
        )
    };
    let (swapped, pool) = (pool_of(true), pool_of(false));
    let pingpong = |k: &&GroupedKernel| k.spec.kernel_schedule.is_pingpong();
    let area = |k: &&GroupedKernel| k.spec.tile[0] * k.spec.tile[1];
    let narrow_swapped = swapped
        .iter()
        .min_by_key(|k| (k.spec.tile[1], !k.spec.kernel_schedule.is_pingpong()));
    let chosen = if rows <= SWAPPED_ROWS && narrow_swapped.is_some() {
        narrow_swapped
    } else if rows <= 64 {
        pool.iter().filter(pingpong).min_by_key(|k| k.spec.tile[1])
    } else if rows <= 128 {
        pool.iter()
            .filter(pingpong)
            .filter(|k| k.spec.tile[1] >= 256)
            .max_by_key(|k| k.spec.tile[1])
    } else {
        None
    }
    .or_else(|| {
        // Without pingpong kernels (SM100's pointer-array kernels), the smallest tile up to 128
        // rows per group (1SM 128x128), as GroupedBlockScaledGemm; not measured on a Blackwell GPU.
        let cooperative = pool.iter().filter(|k| !pingpong(k));
        if rows <= 128 && !pool.iter().any(|k| pingpong(&k)) {
            cooperative.min_by_key(area)
        } else {
            cooperative.max_by_key(area)
        }
    })
    .or_else(|| pool.iter().max_by_key(area))
    .or(narrow_swapped)
    .copied();
    chosen.ok_or_else(|| {
        // A catalog entry that would serve: the feature or filter that builds it.
        let entry = crate::selection::catalog_entries()
            .iter()
            .copied()
            .find(|s| {
                s.kernel_schedule.is_grouped()
                    && serves(s)
                    && s.arch.runs_on(device.compute_capability)
            });
        Error::NoKernel {
            request: format!(
                "grouped GEMM {a} x {a} -> {d}{}",
                if blockwise {
                    " with blockwise scales"
                } else {
                    ""
                }
            ),
            nearest: {
                // Same input type first.
                let mut near: Vec<&GroupedKernel> = built_grouped_kernels().iter().collect();
                near.sort_by_key(|k| k.spec.a.ty != a);
                near.iter().take(3).map(|k| k.name.to_string()).collect()
            },
            build_with: match entry {
                Some(s) => crate::selection::build_hint(&s.name()),
                None => crate::error::BuildHint::NotInCatalog,
            },
        }
    })
}
