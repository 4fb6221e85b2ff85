//! Grouped block-scaled GEMMs of SM100 and SM120: MXFP8 and NVFP4 experts in one launch.
//!
//! [`GroupedBlockScaledGemm`] is [`crate::GroupedGemm`] over narrow operands with block scale
//! factors, on CUTLASS's pointer-array block-scaled kernels
//! (`KernelPtrArrayTmaWarpSpecialized{1,2}Sm{Mxf8f6f4,Nvf4}Sm100`, and SM120's pointer-array
//! kernels with `nv_float4_t` operands; CUTLASS 4.2 builds no SM120 grouped MX kernel). The layouts are [`GroupedLayout`]'s;
//! A and the weights are packed bytes of the format's elements ([`GroupedBlockFormat`]), rows
//! K-major (A row-major, each weight an `n x k` row-major matrix).
//!
//! # Scale factors
//!
//! Each group's scale factors are those of a tensor of its own, in CUTLASS's
//! `Sm1xxBlockScaledConfig` layout (what this crate's quantizers write for one `m x k` tensor,
//! [`crate::formats::scale_layout::ScaleFactorLayout`]): rows padded to 128, scale columns
//! (`ceil(k / vec)`) to 4; blocks of 128 rows x 4 columns, 512 bytes each, the K blocks of a row
//! block one after the other. A group of `m` rows takes `ceil(m / 128)` row blocks of
//! `128 * cols` bytes ([`GroupedScaleLayout`]). Where each group's factors start:
//!
//! - A, contiguous layout: row block `offsets[g] / 128 + g`, so that a group starting anywhere
//!   gets whole row blocks of its own (quantize each group's rows into
//!   [`GroupedScaleLayout::group_a`]);
//! - A, masked layout: row block `g * ceil(capacity / 128)`;
//! - each weight: row block `g * ceil(n / 128)`.
//!
//! [`GroupedScaleLayout::lens`] says how many bytes each buffer must hold. NVFP4's
//! per-tensor scales go into the per-group alphas ([`GroupedBlockScaledInputs::with_alphas`]).
//!
//! No Blackwell GPU has run these kernels here: they are compiled and their MMA instructions
//! checked in PTX (`cutlass-profiler census`), and [`GroupedBlockScaledGemm::prepare`] runs
//! their host path (CUTLASS's checks and kernel parameters) on a Hopper GPU.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use cutlass_gemm_catalog::{DataType, KernelSpec};
use cutlass_gemm_sys::cutlass_rs_grouped_args;

use crate::error::{
    overlaps, require_device, require_len, Error, Extent, KernelRule, OperandName, ProblemRule,
    Quantity, Result, Scalar, ScaleFamily,
};
use crate::ffi::{DeviceInfo, GroupedKernel};
use crate::formats::element::Element;
use crate::formats::numeric::E4M3;
use crate::plans::gemm::{workspace_ptr, Workspace, POINTER_ALIGNMENT};
use crate::plans::grouped::{
    grouped_args, upload_group_rows, GroupedLayout, GroupedProblem, Mode, Pointers,
};
use crate::quantize::{self, QuantInput};
use crate::selection::{
    built_grouped_kernels, named_in_registry, named_in_registry_any_arch, registry_pool,
};

/// The operands' format of a [`GroupedBlockScaledGemm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GroupedBlockFormat {
    /// MXFP8: e4m3 elements (one byte each), one ue8m0 scale factor per 32 elements of K.
    Mxfp8,
    /// NVFP4: e2m1 elements (two per byte), one ue4m3 scale factor per 16 elements of K (and a
    /// per-tensor scale, which goes into the alphas).
    Nvfp4,
}

impl GroupedBlockFormat {
    /// The element type of A and the weights.
    pub fn element(self) -> DataType {
        match self {
            GroupedBlockFormat::Mxfp8 => DataType::E4M3,
            GroupedBlockFormat::Nvfp4 => DataType::E2M1,
        }
    }

    /// The scale-factor family: its type and elements of K per scale factor.
    pub fn family(self) -> ScaleFamily {
        match self {
            GroupedBlockFormat::Mxfp8 => ScaleFamily::Mx,
            GroupedBlockFormat::Nvfp4 => ScaleFamily::Nvfp4,
        }
    }

    /// Elements of K per scale factor.
    pub fn vec(self) -> usize {
        self.family().scale_type().map_or(1, |(_, v)| v as usize)
    }

    /// Bytes of `elements` packed elements.
    pub fn bytes(self, elements: usize) -> usize {
        elements * self.element().bits() as usize / 8
    }

    /// The format of a kernel, if it is a grouped block-scaled one of these formats.
    fn of(spec: &KernelSpec) -> Option<GroupedBlockFormat> {
        let bs = spec.block_scale?;
        [GroupedBlockFormat::Mxfp8, GroupedBlockFormat::Nvfp4]
            .into_iter()
            .find(|f| {
                f.family().scale_type() == Some((bs.sf, bs.vec))
                    && spec.a.ty == f.element()
                    && spec.b.ty == f.element()
            })
    }
}

/// Where each group's scale factors lie in the buffers of a grouped block-scaled GEMM (see the
/// [module](self)): offsets and lengths in bytes (one byte per scale factor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupedScaleLayout {
    layout: GroupedLayout,
    groups: usize,
    n: usize,
    /// Scale-factor columns per row: `ceil(k / vec)` padded to 4.
    pub cols: usize,
}

impl GroupedScaleLayout {
    /// The layout for a problem and a format.
    pub fn new(problem: &GroupedProblem, format: GroupedBlockFormat) -> GroupedScaleLayout {
        GroupedScaleLayout {
            layout: problem.layout,
            groups: problem.groups,
            n: problem.n,
            cols: problem.k.div_ceil(format.vec()).div_ceil(4) * 4,
        }
    }

    /// Bytes of one block of 128 rows.
    pub fn row_block(&self) -> usize {
        128 * self.cols
    }

    /// Bytes of the scale factors of one group of `rows` rows (or of a weight of `rows` = n).
    pub fn group_len(&self, rows: usize) -> usize {
        rows.div_ceil(128) * self.row_block()
    }

    /// Bytes the buffers must hold, `(A's, the weights')`: A's `ceil(rows / 128) + groups - 1`
    /// row blocks (contiguous) or `groups * ceil(capacity / 128)` (masked), the weights'
    /// `groups * ceil(n / 128)`.
    pub fn lens(&self) -> (usize, usize) {
        let blocks_a = match self.layout {
            GroupedLayout::Contiguous { rows } => {
                (rows.div_ceil(128) + self.groups).saturating_sub(1)
            }
            GroupedLayout::Masked { capacity } => self.groups * capacity.div_ceil(128),
        };
        (
            blocks_a * self.row_block(),
            self.groups * self.group_len(self.n),
        )
    }

    /// The byte offset of group `group`'s scale factors of A: for the contiguous layout the
    /// group's first row is `first_row` (its offset), for the masked layout it is ignored. The
    /// group's factors are those of an `m_g x k` tensor of its own from there
    /// ([`GroupedScaleLayout::group_len`] bytes).
    pub fn group_a(&self, group: usize, first_row: usize) -> usize {
        let block = match self.layout {
            GroupedLayout::Contiguous { .. } => first_row / 128 + group,
            GroupedLayout::Masked { capacity } => group * capacity.div_ceil(128),
        };
        block * self.row_block()
    }

    /// The byte offset of expert `group`'s scale factors of its weight (those of an `n x k`
    /// tensor of its own).
    pub fn group_b(&self, group: usize) -> usize {
        group * self.group_len(self.n)
    }
}

/// The inputs of one launch of a [`GroupedBlockScaledGemm`]: packed A and weights, their scale
/// factors, the rows per group and, optionally, per-group alphas and C.
pub struct GroupedBlockScaledInputs<'a, TD> {
    a: &'a dyn DevicePtr<u8>,
    scales_a: &'a dyn DevicePtr<u8>,
    b: &'a dyn DevicePtr<u8>,
    scales_b: &'a dyn DevicePtr<u8>,
    group_rows: &'a dyn DevicePtr<i32>,
    alphas: Option<&'a dyn DevicePtr<f32>>,
    c: Option<&'a dyn DevicePtr<TD>>,
}

impl<'a, TD> GroupedBlockScaledInputs<'a, TD> {
    /// A and its scale factors, the weights (`groups x n x k`) and theirs, and the rows per group
    /// (offsets or counts, by the plan's layout).
    pub fn new(
        a: &'a dyn DevicePtr<u8>,
        scales_a: &'a dyn DevicePtr<u8>,
        weights: &'a dyn DevicePtr<u8>,
        scales_weights: &'a dyn DevicePtr<u8>,
        group_rows: &'a dyn DevicePtr<i32>,
    ) -> Self {
        GroupedBlockScaledInputs {
            a,
            scales_a,
            b: weights,
            scales_b: scales_weights,
            group_rows,
            alphas: None,
            c: None,
        }
    }

    /// With one alpha per group (f32; NVFP4: the product of A's and the weight's per-tensor
    /// scales), multiplying the plan's alpha.
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

/// A planned grouped block-scaled GEMM (SM100, SM120): per group `D_g = alpha * alpha_g *
/// (SFA · A_g) · (SFB · W_g)ᵀ + beta * C_g`, A and the weights MXFP8 or NVFP4, C and D of `TD`.
/// See the [module](self) for the scale-factor layout.
#[derive(Debug, Clone)]
pub struct GroupedBlockScaledGemm<TD: Element> {
    problem: GroupedProblem,
    device: DeviceInfo,
    kernel: GroupedKernel,
    format: GroupedBlockFormat,
    workspace_size: usize,
    _types: std::marker::PhantomData<TD>,
}

impl<TD: Element> GroupedBlockScaledGemm<TD> {
    /// Plans on `ctx`'s device, choosing among the grouped block-scaled kernels of this build.
    pub fn new(
        ctx: &CudaContext,
        problem: &GroupedProblem,
        format: GroupedBlockFormat,
    ) -> Result<Self> {
        Self::plan(DeviceInfo::query(ctx)?, problem, format, None)
    }

    /// Plans with the grouped block-scaled kernel of this name (its format is the kernel's).
    pub fn with_kernel(ctx: &CudaContext, problem: &GroupedProblem, name: &str) -> Result<Self> {
        let format = format_of_named(name)?;
        Self::plan(DeviceInfo::query(ctx)?, problem, format, Some(name))
    }

    /// Plans for a described device without touching it. Rules, each a typed error: the
    /// problem's ([`GroupedProblem::check`]); k a multiple of the kernel's alignment of A and of
    /// the scale vector, n of D's alignment; a grouped block-scaled kernel of this build for the
    /// format and `TD` that the device can run ([`Error::NoKernel`] otherwise,
    /// [`KernelRule::Grouped`] / [`KernelRule::NoBlockScales`] / [`KernelRule::BlockScales`] for
    /// a named kernel of another kind).
    ///
    /// The choice, not yet measured on a Blackwell GPU: up to 128 expected rows per group the
    /// tile of the smallest area (1SM 128x128 on SM100; SM120's pingpong kernel), beyond it the
    /// largest (2SM 256x128; SM120's cooperative kernel).
    pub fn plan(
        device: DeviceInfo,
        problem: &GroupedProblem,
        format: GroupedBlockFormat,
        kernel: Option<&str>,
    ) -> Result<Self> {
        Self::plan_with(device, problem, format, kernel, false)
    }

    /// Plans with the named kernel even when `device` cannot run it (an SM100 or SM120 kernel on
    /// a Hopper GPU): every check and [`GroupedBlockScaledGemm::prepare`] work,
    /// [`GroupedBlockScaledGemm::run`] returns [`Error::ArchMismatch`].
    pub fn plan_any_arch(
        device: DeviceInfo,
        problem: &GroupedProblem,
        kernel: &str,
    ) -> Result<Self> {
        let format = format_of_named(kernel)?;
        Self::plan_with(device, problem, format, Some(kernel), true)
    }

    fn plan_with(
        device: DeviceInfo,
        problem: &GroupedProblem,
        format: GroupedBlockFormat,
        kernel: Option<&str>,
        any_arch: bool,
    ) -> Result<Self> {
        problem.check()?;
        let kernel = select(
            &device,
            problem.rows_per_group(),
            format,
            TD::DATA_TYPE,
            kernel,
            any_arch,
        )?;
        let k_align = (kernel.spec.a.align as usize).max(format.vec());
        for (operand, extent, value, align) in [
            (OperandName::A, Extent::K, problem.k, k_align),
            (
                OperandName::D,
                Extent::N,
                problem.n,
                kernel.spec.d.align as usize,
            ),
        ] {
            crate::error::require_aligned(
                operand,
                Quantity::Extent(extent),
                value as u64,
                align as u64,
            )?;
        }
        let mut plan = GroupedBlockScaledGemm {
            problem: *problem,
            device,
            kernel,
            format,
            workspace_size: 0,
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

    /// The operands' format.
    pub fn format(&self) -> GroupedBlockFormat {
        self.format
    }

    /// Bytes of workspace a launch needs.
    pub fn workspace_size(&self) -> usize {
        self.workspace_size
    }

    /// Bytes A and the weights must hold: `(A's, the weights')`.
    pub fn data_lens(&self) -> (usize, usize) {
        let p = &self.problem;
        (self.format.bytes(p.a_len()), self.format.bytes(p.b_len()))
    }

    /// Where the scale factors of each group lie ([`GroupedScaleLayout`]).
    pub fn scale_layout(&self) -> GroupedScaleLayout {
        GroupedScaleLayout::new(&self.problem, self.format)
    }

    /// Bytes the scale factors must hold, `(A's, the weights')` ([`GroupedScaleLayout::lens`]).
    pub fn scale_lens(&self) -> (usize, usize) {
        self.scale_layout().lens()
    }

    /// [`GroupedProblem::check_group_rows`].
    pub fn check_group_rows(&self, group_rows: &[i32]) -> Result<()> {
        self.problem.check_group_rows(group_rows)
    }

    /// Checks a host list of rows per group and copies it to the device on `stream`.
    pub fn upload_group_rows(
        &self,
        stream: &Arc<CudaStream>,
        group_rows: &[i32],
    ) -> Result<CudaSlice<i32>> {
        upload_group_rows(&self.problem, &self.device, stream, group_rows)
    }

    /// Checks the buffers and launches on `stream` (the per-group argument builder, then the
    /// kernel). Rules checked first, each a typed error naming the operand: the kernel's
    /// architecture runs on the device; every buffer and the stream on the plan's device;
    /// lengths in bytes ([`GroupedBlockScaledGemm::data_lens`],
    /// [`GroupedBlockScaledGemm::scale_lens`]), the rows per group, the alphas `groups`, C and D
    /// as the layout reaches; 16-byte aligned A, weights, C, D and workspace, 4-byte aligned rows
    /// per group and alphas; D overlapping no input but C; C given when beta is not 0.
    pub fn run(
        &self,
        stream: &Arc<CudaStream>,
        inputs: &GroupedBlockScaledInputs<'_, TD>,
        d: &mut dyn DevicePtrMut<TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        self.launch(stream, inputs, d, workspace, Mode::Run)
    }

    /// Everything [`GroupedBlockScaledGemm::run`] does except the launches: the same checks, then
    /// the kernel's host path (CUTLASS's `can_implement` and kernel parameters over the
    /// workspace). Works for a kernel of any architecture on any GPU
    /// ([`GroupedBlockScaledGemm::plan_any_arch`]).
    pub fn prepare(
        &self,
        stream: &Arc<CudaStream>,
        inputs: &GroupedBlockScaledInputs<'_, TD>,
        d: &mut dyn DevicePtrMut<TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        self.launch(stream, inputs, d, workspace, Mode::Prepare)
    }

    fn launch(
        &self,
        stream: &Arc<CudaStream>,
        inputs: &GroupedBlockScaledInputs<'_, TD>,
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
        let (a_len, b_len) = self.data_lens();
        let (sa_len, sb_len) = self.scale_lens();
        let bytes = [
            (OperandName::A, inputs.a, a_len),
            (OperandName::ScalesA, inputs.scales_a, sa_len),
            (OperandName::B, inputs.b, b_len),
            (OperandName::ScalesB, inputs.scales_b, sb_len),
        ];
        for (operand, x, len) in bytes {
            require_device(operand, x, device)?;
            require_len(operand, x.len(), len)?;
        }
        require_device(OperandName::GroupRows, inputs.group_rows, device)?;
        require_len(
            OperandName::GroupRows,
            inputs.group_rows.len(),
            p.group_rows_len(),
        )?;
        if let Some(x) = inputs.alphas {
            require_device(OperandName::GroupAlphas, x, device)?;
            require_len(OperandName::GroupAlphas, x.len(), p.groups)?;
        }
        if let Some(c) = inputs.c {
            require_device(OperandName::C, c, device)?;
            require_len(OperandName::C, c.len(), p.d_len())?;
        }
        require_device(OperandName::D, d, device)?;
        require_len(OperandName::D, d.len(), p.d_len())?;
        if inputs.c.is_none() && p.beta != 0.0 {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::BetaWithoutC {
                    beta: Scalar(p.beta),
                },
            });
        }
        let ptrs: Vec<_> = bytes.iter().map(|(_, x, _)| x.device_ptr(stream)).collect();
        let [pa, psa, pb, psb] = [0, 1, 2, 3].map(|i| ptrs[i].0);
        let (pr, _gr) = inputs.group_rows.device_ptr(stream);
        let alphas = inputs.alphas.map(|x| x.device_ptr(stream));
        let c = inputs.c.map(|c| c.device_ptr(stream));
        let (pd, _gd) = d.device_ptr_mut(stream);
        let pc = c.as_ref().map(|(p, _)| *p);
        let pal = alphas.as_ref().map(|(p, _)| *p);
        for (operand, ptr, align) in [
            (OperandName::A, Some(pa), POINTER_ALIGNMENT),
            (OperandName::B, Some(pb), POINTER_ALIGNMENT),
            (OperandName::ScalesA, Some(psa), POINTER_ALIGNMENT),
            (OperandName::ScalesB, Some(psb), POINTER_ALIGNMENT),
            (OperandName::C, pc, POINTER_ALIGNMENT),
            (OperandName::D, Some(pd), POINTER_ALIGNMENT),
            (OperandName::GroupRows, Some(pr), 4),
            (OperandName::GroupAlphas, pal, 4),
        ] {
            if let Some(ptr) = ptr {
                crate::error::require_aligned(operand, Quantity::Pointer, ptr, align)?;
            }
        }
        // D may be C (accumulating in place) but no other input.
        let d_bytes = (p.d_len() * std::mem::size_of::<TD>()) as u64;
        let d_range = (pd, d_bytes);
        let inputs_ranges = [
            (OperandName::A, Some((pa, a_len as u64))),
            (OperandName::ScalesA, Some((psa, sa_len as u64))),
            (OperandName::B, Some((pb, b_len as u64))),
            (OperandName::ScalesB, Some((psb, sb_len as u64))),
            (
                OperandName::GroupRows,
                Some((pr, 4 * p.group_rows_len() as u64)),
            ),
            (
                OperandName::GroupAlphas,
                pal.map(|x| (x, 4 * p.groups as u64)),
            ),
            (
                OperandName::C,
                pc.filter(|&c| c != pd).map(|c| (c, d_bytes)),
            ),
        ];
        for (input, range) in inputs_ranges {
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
            scale_a: psa,
            scale_b: psb,
            problems: 0,
        });
        mode.launch(&self.kernel, &args, pw, self.workspace_size, stream)
    }

    /// The C arguments over device pointers (0 for none).
    fn args(&self, ptrs: Pointers) -> cutlass_rs_grouped_args {
        grouped_args(&self.problem, &self.device, ptrs)
    }
}

/// An operand of a grouped block-scaled GEMM quantized group by group
/// ([`GroupedBlockScaledGemm::quantize_a`], [`GroupedBlockScaledGemm::quantize_weights`]).
#[derive(Debug)]
pub struct GroupedBlockScaledOperand {
    /// Packed elements: A's rows (or the weights, expert after expert) in the plan's layout.
    pub data: CudaSlice<u8>,
    /// Scale factors, each group's at [`GroupedScaleLayout`]'s offset; the bytes no group owns
    /// are zero.
    pub scales: CudaSlice<u8>,
    /// Each group's per-tensor scale, to multiply into its alpha: NVFP4's `amax / 2688` of the
    /// group (1 for an empty one), 1 for MX.
    pub tensor_scales: Vec<f32>,
}

impl<TD: Element> GroupedBlockScaledGemm<TD> {
    /// Quantizes A for this plan from its bf16/f16/f32 values (`rows x k` row-major, the
    /// contiguous layout's rows or the masked layout's `groups * capacity`), each group as a
    /// tensor of its own with this crate's GPU quantizer: its elements at its rows, its scale
    /// factors at [`GroupedScaleLayout::group_a`]. `group_rows` are the plan's offsets or counts,
    /// on the host ([`GroupedProblem::check_group_rows`]); a group's rows past its count (masked)
    /// are left zero. One quantizer launch per non-empty group, and for NVFP4 one copy of each
    /// group's amax to the host.
    pub fn quantize_a<T: QuantInput>(
        &self,
        stream: &Arc<CudaStream>,
        x: &CudaSlice<T>,
        group_rows: &[i32],
    ) -> Result<GroupedBlockScaledOperand> {
        let p = &self.problem;
        self.check_group_rows(group_rows)?;
        require_len(OperandName::A, x.len(), p.a_len())?;
        let layout = self.scale_layout();
        let groups: Vec<(usize, usize, usize)> = (0..p.groups)
            .map(|g| match p.layout {
                GroupedLayout::Contiguous { .. } => {
                    let (start, end) = (group_rows[g] as usize, group_rows[g + 1] as usize);
                    (start, end - start, layout.group_a(g, start))
                }
                GroupedLayout::Masked { capacity } => {
                    (g * capacity, group_rows[g] as usize, layout.group_a(g, 0))
                }
            })
            .collect();
        self.quantize_groups(stream, x, &groups, layout.lens().0)
    }

    /// Quantizes the experts' weights (`groups x n x k`, each a row-major `n x k` matrix) for this
    /// plan, expert by expert: elements expert after expert, scale factors at
    /// [`GroupedScaleLayout::group_b`]. Done once, at load time.
    pub fn quantize_weights<T: QuantInput>(
        &self,
        stream: &Arc<CudaStream>,
        w: &CudaSlice<T>,
    ) -> Result<GroupedBlockScaledOperand> {
        let p = &self.problem;
        require_len(OperandName::B, w.len(), p.b_len())?;
        let layout = self.scale_layout();
        let groups: Vec<(usize, usize, usize)> = (0..p.groups)
            .map(|g| (g * p.n, p.n, layout.group_b(g)))
            .collect();
        self.quantize_groups(stream, w, &groups, layout.lens().1)
    }

    /// Quantizes `(first row, rows, scale-factor offset)` per group of a row-major `? x k` matrix.
    fn quantize_groups<T: QuantInput>(
        &self,
        stream: &Arc<CudaStream>,
        x: &CudaSlice<T>,
        groups: &[(usize, usize, usize)],
        scales_len: usize,
    ) -> Result<GroupedBlockScaledOperand> {
        let k = self.problem.k;
        let f = self.format;
        let mut data = stream.alloc_zeros::<u8>(f.bytes(x.len()))?;
        let mut scales = stream.alloc_zeros::<u8>(scales_len)?;
        let mut tensor_scales = Vec::with_capacity(groups.len());
        for &(first, rows, sf_offset) in groups {
            if rows == 0 {
                tensor_scales.push(1.0);
                continue;
            }
            let view = x.slice(first * k..(first + rows) * k);
            let at = f.bytes(first * k)..f.bytes((first + rows) * k);
            let sf_at = sf_offset..sf_offset + self.scale_layout().group_len(rows);
            // Each group's tensor: its elements and scale factors (one byte each) copied into
            // place; its scale factors are exactly group_len(rows) bytes (ScaleFactorLayout).
            let tensor_scale = match f {
                GroupedBlockFormat::Mxfp8 => {
                    let t = quantize::quantize_mx::<E4M3, T>(stream, &view, rows, k)?;
                    stream.memcpy_dtod(&t.data, &mut data.slice_mut(at))?;
                    // SAFETY: ue8m0 scale factors are one byte each.
                    let sf = unsafe { t.scales.transmute::<u8>(t.scales.len()) }
                        .expect("a byte view of one-byte scale factors");
                    stream.memcpy_dtod(&sf, &mut scales.slice_mut(sf_at))?;
                    1.0
                }
                GroupedBlockFormat::Nvfp4 => {
                    let t = quantize::quantize_nvfp4::<T>(stream, &view, rows, k)?;
                    stream.memcpy_dtod(&t.data, &mut data.slice_mut(at))?;
                    // SAFETY: ue4m3 scale factors are one byte each.
                    let sf = unsafe { t.scales.transmute::<u8>(t.scales.len()) }
                        .expect("a byte view of one-byte scale factors");
                    stream.memcpy_dtod(&sf, &mut scales.slice_mut(sf_at))?;
                    t.global_scale(stream)?
                }
            };
            tensor_scales.push(tensor_scale);
        }
        Ok(GroupedBlockScaledOperand {
            data,
            scales,
            tensor_scales,
        })
    }
}

/// The format of a named grouped block-scaled kernel of this build (the typed errors of
/// [`select`] for the others).
fn format_of_named(name: &str) -> Result<GroupedBlockFormat> {
    let spec = built_grouped_kernels()
        .iter()
        .find(|k| k.name == name)
        .map(|k| k.spec);
    // A kernel not built, or not block-scaled: select reports it (any format will do).
    Ok(spec
        .as_ref()
        .and_then(GroupedBlockFormat::of)
        .unwrap_or(GroupedBlockFormat::Nvfp4))
}

/// The grouped block-scaled kernel for a plan: the one named, or by the rule of
/// [`GroupedBlockScaledGemm::plan`] among this build's that serve the format and D's type.
fn select(
    device: &DeviceInfo,
    rows: usize,
    format: GroupedBlockFormat,
    d: DataType,
    name: Option<&str>,
    any_arch: bool,
) -> Result<GroupedKernel> {
    let serves = |s: &KernelSpec| GroupedBlockFormat::of(s) == Some(format) && s.d.ty == d;
    if let Some(name) = name {
        let kind = |s: &KernelSpec| s.kernel_schedule.is_grouped();
        let other = KernelRule::Grouped { kernel: false };
        let mismatch = |s: &KernelSpec| match s.block_scale {
            None => Some(KernelRule::NoBlockScales),
            Some(bs) if !serves(s) && s.d.ty == d => Some(KernelRule::BlockScales {
                kernel: (bs.sf, bs.vec),
                required: format.family(),
            }),
            Some(_) if s.d.ty != d => Some(KernelRule::Operand {
                operand: OperandName::D,
                kernel: (s.d.ty, s.d.layout),
                required: (d, s.d.layout),
            }),
            Some(_) => None,
        };
        let built = built_grouped_kernels();
        return if any_arch {
            named_in_registry_any_arch(built, name, kind, other, mismatch)
        } else {
            named_in_registry(built, name, device, kind, other, mismatch)
        };
    }
    let pool = registry_pool(built_grouped_kernels(), device, serves, |_| true);
    let area = |k: &&GroupedKernel| k.spec.tile[0] * k.spec.tile[1];
    let pingpong = |k: &&GroupedKernel| k.spec.kernel_schedule.is_pingpong();
    let chosen = if rows <= 128 {
        pool.iter().min_by_key(|k| (area(k), !pingpong(k)))
    } else {
        pool.iter().max_by_key(|k| (area(k), !pingpong(k)))
    };
    chosen.copied().ok_or_else(|| {
        let entry = crate::selection::catalog_entries()
            .iter()
            .copied()
            .find(|s| {
                s.kernel_schedule.is_grouped()
                    && serves(s)
                    && s.arch.runs_on(device.compute_capability)
            });
        Error::NoKernel {
            request: format!("grouped GEMM {format:?} -> {d}"),
            nearest: built_grouped_kernels()
                .iter()
                .filter(|k| k.spec.block_scale.is_some())
                .take(3)
                .map(|k| k.name.to_string())
                .collect(),
            build_with: match entry {
                Some(s) => crate::selection::build_hint(&s.name()),
                None => crate::error::BuildHint::NotInCatalog,
            },
        }
    })
}
