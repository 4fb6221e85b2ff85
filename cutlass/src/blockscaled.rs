//! Block-scaled GEMMs (SM100, SM120): MX (`mx_float8_t`, `mx_float6_t`, `mx_float4_t`: ue8m0 per
//! 32 elements of K) and NVFP4 (`nv_float4_t`: ue4m3 per 16, plus a per-tensor scale) operands
//! whose scale factors lie in the `Sm1xxBlockScaledConfig` layout, as [`crate::quantize`] writes
//! them.
//!
//! Operands are typed: an [`MxTensor<E>`] carries its element format in its type and its scale
//! layout (rows, K, 32 per scale) in its value, an [`Nvfp4Tensor`] its ue4m3 scales per 16 and its
//! amax; a plan takes only kernels whose formats, scale type and vector size match, and every
//! shape, alignment and buffer rule is checked with a typed error before any call into a kernel.
//!
//! `D = alpha * A·B + beta * C` with A `[m, k]` and B given as `W[n, k]` (both K-major, "TN") and a
//! row-major D. For NVFP4 the per-tensor scales of A and B multiply alpha. A D that is itself NVFP4
//! (e2m1 with ue4m3 per 16 along N, the `LinCombBlockScaleFactor` epilogue) comes from plans made
//! with [`BlockScaledGemm::plan_nvfp4_to_nvfp4`] and lands in an [`Nvfp4Tensor`].
//!
//! No Blackwell GPU has run these kernels here. On other GPUs a plan made with
//! [`BlockScaledGemm::plan_any_arch`] drives the kernel's host path up to the launch
//! ([`BlockScaledGemm::prepare_mx`]); a launch returns [`Error::ArchMismatch`].

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, DevicePtr, DevicePtrMut};
use cutlass_kernels::{DataType, KernelSpec, Layout};

use crate::blockscale::ScaleFactorLayout;
use crate::element::Element;
use crate::error::{require_len, Error, OperandName, Result};
use crate::gemm::Workspace;
use crate::kernel::{built_kernels, select, ArchPolicy, DeviceInfo, Kernel, RawArgs};
use crate::numeric::E2M1;
use crate::problem::GemmProblem;
use crate::quantize::{MxElement, MxTensor, Nvfp4Tensor};

/// The scale-factor family of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    /// ue8m0 per 32.
    Mx,
    /// ue4m3 per 16.
    Nv,
}

impl Family {
    fn sf(self) -> (DataType, u32) {
        match self {
            Family::Mx => (DataType::UE8M0, 32),
            Family::Nv => (DataType::UE4M3, 16),
        }
    }
}

/// A planned block-scaled GEMM: A elements `EA`, B elements `EB`, C and D `TD`; or, for plans
/// with an NVFP4 output ([`BlockScaledGemm::plan_nvfp4_to_nvfp4`]), C `TD` and D an
/// [`Nvfp4Tensor`] written with its scale factors by the `LinCombBlockScaleFactor` epilogue.
pub struct BlockScaledGemm<EA: MxElement, EB: MxElement, TD: Element> {
    problem: GemmProblem,
    device: DeviceInfo,
    kernel: Kernel,
    family: Family,
    nvfp4_out: bool,
    workspace_size: usize,
    _types: PhantomData<(EA, EB, TD)>,
}

impl<EA: MxElement, EB: MxElement, TD: Element> std::fmt::Debug for BlockScaledGemm<EA, EB, TD> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockScaledGemm")
            .field("kernel", &self.kernel.name)
            .field("problem", &self.problem)
            .finish()
    }
}

fn data_type<E: MxElement>() -> DataType {
    match E::DTYPE {
        cutlass_sys::CUTLASS_RS_DTYPE_E4M3 => DataType::E4M3,
        cutlass_sys::CUTLASS_RS_DTYPE_E5M2 => DataType::E5M2,
        cutlass_sys::CUTLASS_RS_DTYPE_E2M3 => DataType::E2M3,
        cutlass_sys::CUTLASS_RS_DTYPE_E3M2 => DataType::E3M2,
        _ => DataType::E2M1,
    }
}

impl<EA: MxElement, EB: MxElement, TD: Element> BlockScaledGemm<EA, EB, TD> {
    /// Plans an MX GEMM (ue8m0 scales per 32) on `ctx`'s device.
    pub fn new_mx(ctx: &CudaContext, problem: &GemmProblem) -> Result<Self> {
        Self::plan(
            DeviceInfo::query(ctx)?,
            problem,
            None,
            Family::Mx,
            false,
            false,
        )
    }

    /// Plans an MX GEMM for a described device, optionally with the kernel of this name.
    pub fn plan_mx(
        device: DeviceInfo,
        problem: &GemmProblem,
        kernel: Option<&str>,
    ) -> Result<Self> {
        Self::plan(device, problem, kernel, Family::Mx, false, false)
    }

    /// Plans with the named kernel even when `device` cannot run it: every check and
    /// [`BlockScaledGemm::prepare_mx`] / [`BlockScaledGemm::prepare_nvfp4`] work, a launch returns
    /// [`Error::ArchMismatch`]. For exercising SM100/SM120 host paths on another GPU.
    pub fn plan_any_arch(device: DeviceInfo, problem: &GemmProblem, kernel: &str) -> Result<Self> {
        let spec = built_kernels()
            .iter()
            .find(|k| k.name == kernel)
            .map(|k| k.spec);
        let family = spec
            .and_then(|s| s.block_scale)
            .map(|bs| if bs.vec == 16 { Family::Nv } else { Family::Mx })
            .unwrap_or(Family::Mx);
        let nvfp4_out = spec.is_some_and(|s| s.output_scale.is_some());
        Self::plan(device, problem, Some(kernel), family, nvfp4_out, true)
    }

    fn plan(
        device: DeviceInfo,
        problem: &GemmProblem,
        kernel: Option<&str>,
        family: Family,
        nvfp4_out: bool,
        any_arch: bool,
    ) -> Result<Self> {
        problem.check()?;
        for (op, layout, want) in [
            (OperandName::A, problem.a.layout, Layout::RowMajor),
            (OperandName::B, problem.b.layout, Layout::ColumnMajor),
            (OperandName::D, problem.d.layout, Layout::RowMajor),
        ] {
            if layout != want {
                return Err(Error::UnsupportedLayout {
                    operand: op,
                    rule: "block-scaled GEMMs take K-major A [m, k] and B [n, k] (TN), as the \
                           quantizers write them, and write a row-major D"
                        .into(),
                });
            }
        }
        if problem.batch != 1 || problem.a.ld.is_some() || problem.b.ld.is_some() {
            return Err(Error::InvalidProblem {
                reason: "block-scaled GEMMs take packed single-batch operands (quantized tensors)"
                    .into(),
            });
        }
        let (sf, vec) = family.sf();
        let (ta, tb) = (data_type::<EA>(), data_type::<EB>());
        let serves = |s: &KernelSpec| -> std::result::Result<(), String> {
            let Some(bs) = s.block_scale else {
                return Err("not a block-scaled kernel".into());
            };
            if (bs.sf, bs.vec) != (sf, vec) {
                return Err(format!(
                    "it reads {} scales per {}, the operands have {sf} per {vec}",
                    bs.sf, bs.vec
                ));
            }
            let out = s
                .output_scale
                .map(|o| (o.sf, o.vec) == (DataType::UE4M3, 16) && s.d.ty == DataType::E2M1);
            let d_type = if nvfp4_out {
                DataType::E2M1
            } else {
                TD::DATA_TYPE
            };
            if out.is_some() != nvfp4_out || out == Some(false) {
                return Err(if nvfp4_out {
                    "it does not write an NVFP4 output (D e2m1 with ue4m3 per 16)".into()
                } else {
                    "it writes a block-scaled output (plan it with plan_nvfp4_to_nvfp4)".into()
                });
            }
            if (s.a.ty, s.b.ty, s.d.ty) != (ta, tb, d_type)
                || s.c.ty != TD::DATA_TYPE
                || (s.a.layout, s.b.layout) != (Layout::RowMajor, Layout::ColumnMajor)
            {
                return Err(format!(
                    "it is {} x {} -> {} {}, the plan needs {ta} x {tb} -> {} TN",
                    s.a.ty,
                    s.b.ty,
                    s.d.ty,
                    s.layout_name(),
                    TD::DATA_TYPE
                ));
            }
            Ok(())
        };
        let request = format!(
            "block-scaled {ta} x {tb} ({sf} per {vec}) -> {}{} TN",
            if nvfp4_out { "NVFP4 D, C " } else { "" },
            TD::DATA_TYPE
        );
        let kernel = select(
            &device,
            kernel,
            if any_arch {
                ArchPolicy::AnyArch
            } else {
                ArchPolicy::Runnable
            },
            &serves,
            &request,
            &|kernels: &[Kernel]| kernels[0],
        )?;
        // Alignment in elements (Tables 1-3): K for A and B (their contiguous extent, and the
        // leading dimension of packed operands), N for D and C.
        let spec = kernel.spec;
        for (op, value, align, what) in [
            (
                OperandName::A,
                problem.k,
                spec.a.align,
                "contiguous extent k =",
            ),
            (
                OperandName::B,
                problem.k,
                spec.b.align,
                "contiguous extent k =",
            ),
            (
                OperandName::D,
                problem.n,
                spec.d.align,
                "contiguous extent n =",
            ),
        ] {
            if value % align as usize != 0 {
                return Err(Error::Misaligned {
                    operand: op,
                    what: what.into(),
                    value: value as u64,
                    required: align as u64,
                });
            }
        }
        let mut plan = BlockScaledGemm {
            problem: *problem,
            device,
            kernel,
            family,
            nvfp4_out,
            workspace_size: 0,
            _types: PhantomData,
        };
        let args = plan.raw(&[256; 6], None);
        plan.workspace_size = kernel.workspace_bytes(&device, &args)?;
        Ok(plan)
    }

    /// The chosen kernel's name.
    pub fn kernel_name(&self) -> &'static str {
        self.kernel.name
    }

    /// The chosen kernel's spec.
    pub fn kernel_spec(&self) -> &KernelSpec {
        &self.kernel.spec
    }

    /// Bytes of workspace the kernel needs.
    pub fn workspace_size(&self) -> usize {
        self.workspace_size
    }

    /// The scale-factor layouts the kernel reads for A and B.
    pub fn scale_layouts(&self) -> (ScaleFactorLayout, ScaleFactorLayout) {
        let vec = self.family.sf().1 as usize;
        let p = &self.problem;
        (
            ScaleFactorLayout::new(p.m, p.k, 1, vec),
            ScaleFactorLayout::new(p.n, p.k, 1, vec),
        )
    }

    fn raw(&self, ptrs: &[u64; 6], c: Option<u64>) -> RawArgs {
        let p = &self.problem;
        let [a, sfa, b, sfb, d, _] = *ptrs;
        RawArgs {
            m: p.m,
            n: p.n,
            k: p.k,
            batch: 1,
            a,
            lda: p.k,
            batch_stride_a: p.m * p.k,
            b,
            ldb: p.k,
            batch_stride_b: p.n * p.k,
            c: c.unwrap_or(d),
            ldc: p.n,
            batch_stride_c: p.m * p.n,
            d,
            ldd: p.n,
            batch_stride_d: p.m * p.n,
            sfa,
            sfb,
            alpha: p.alpha,
            beta: p.beta,
            ..Default::default()
        }
    }

    /// Checks one operand tensor against the plan: shape and scale layout.
    fn check_operand(
        &self,
        op: OperandName,
        rows: usize,
        layout: &ScaleFactorLayout,
    ) -> Result<()> {
        let p = &self.problem;
        let (want_rows, scales) = match op {
            OperandName::A => (p.m, OperandName::ScalesA),
            _ => (p.n, OperandName::ScalesB),
        };
        if (rows, layout.k) != (want_rows, p.k) {
            return Err(Error::InvalidProblem {
                reason: format!(
                    "operand {op} is {rows} x {}, the plan needs {want_rows} x {}",
                    layout.k, p.k
                ),
            });
        }
        let vec = self.family.sf().1 as usize;
        if layout.vec != vec || layout.batch != 1 || layout.rows != rows {
            return Err(Error::ScaleMismatch {
                operand: scales,
                rule: format!(
                    "the kernel reads one scale per {vec} elements of K in the \
                     Sm1xxBlockScaledConfig layout of a {rows} x {} operand, the tensor's layout is {layout:?}",
                    p.k
                ),
            });
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn checked_pointers(
        &self,
        stream: &Arc<CudaStream>,
        a: (&dyn DevicePtr<u8>, u64, &ScaleFactorLayout),
        b: (&dyn DevicePtr<u8>, u64, &ScaleFactorLayout),
        sf_lens: (usize, usize),
        c: Option<&dyn DevicePtr<TD>>,
        d: (u64, usize, usize),
    ) -> Result<RawArgs> {
        let p = self.problem;
        self.check_operand(OperandName::A, a.2.rows, a.2)?;
        self.check_operand(OperandName::B, b.2.rows, b.2)?;
        let bits = |t: DataType| t.bits() as usize;
        for (op, len, need) in [
            (
                OperandName::A,
                a.0.len(),
                (p.m * p.k * bits(self.kernel.spec.a.ty)).div_ceil(8),
            ),
            (
                OperandName::B,
                b.0.len(),
                (p.n * p.k * bits(self.kernel.spec.b.ty)).div_ceil(8),
            ),
            (OperandName::ScalesA, sf_lens.0, a.2.size()),
            (OperandName::ScalesB, sf_lens.1, b.2.size()),
            (OperandName::D, d.1, d.2),
        ] {
            require_len(op, len, need)?;
        }
        if let Some(c) = c {
            require_len(OperandName::C, c.len(), p.m * p.n)?;
        } else if p.beta != 0.0 {
            return Err(Error::InvalidProblem {
                reason: format!("beta is {} but no C was given", p.beta),
            });
        }
        let (pa, _ga) = a.0.device_ptr(stream);
        let (pb, _gb) = b.0.device_ptr(stream);
        let pc = c.map(|c| c.device_ptr(stream).0);
        let pd = d.0;
        // Sub-byte operands are read by TMA's unpacking modes, which need a 32-byte aligned base
        // (seed, Table 2 notes); others need 16 bytes, as does every TMA base.
        let base = |t: DataType| if t.bits() < 8 { 32 } else { 16 };
        for (op, ptr, align) in [
            (OperandName::A, pa, base(self.kernel.spec.a.ty)),
            (OperandName::B, pb, base(self.kernel.spec.b.ty)),
            (OperandName::ScalesA, a.1, 16),
            (OperandName::ScalesB, b.1, 16),
            (OperandName::D, pd, 16),
            (OperandName::C, pc.unwrap_or(pd), 16),
        ] {
            if ptr % align != 0 {
                return Err(Error::Misaligned {
                    operand: op,
                    what: "pointer".into(),
                    value: ptr,
                    required: align,
                });
            }
        }
        Ok(self.raw(&[pa, a.1, pb, b.1, pd, 0], pc))
    }

    fn refuse_nvfp4_out(&self) -> Result<()> {
        if self.nvfp4_out {
            return Err(Error::ScaleMismatch {
                operand: OperandName::D,
                rule: "this plan's kernel writes an NVFP4 D with its scale factors: use \
                       run_nvfp4_to_nvfp4"
                    .into(),
            });
        }
        Ok(())
    }

    /// The kernel's host path for checked arguments (no launch).
    fn prepare(&self, stream: &Arc<CudaStream>, args: &RawArgs) -> Result<usize> {
        stream.context().bind_to_thread()?;
        // SAFETY: the buffers were checked against the extents the arguments describe.
        unsafe { self.kernel.prepare_raw(&self.device, args) }
    }

    fn launch(
        &self,
        stream: &Arc<CudaStream>,
        args: RawArgs,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        if !self
            .kernel
            .spec
            .arch
            .runs_on(self.device.compute_capability)
        {
            return Err(Error::ArchMismatch {
                kernel: self.kernel.name.into(),
                arch: self.kernel.spec.arch,
                device: self.device.compute_capability,
            });
        }
        stream.context().bind_to_thread()?;
        let mut managed = None;
        let (pw, _gw) =
            crate::gemm::workspace_ptr(stream, workspace, self.workspace_size, &mut managed)?;
        // SAFETY: every buffer was checked against the extents the plan reaches, alignment and
        // formats above; the guards keep them alive until the launch is queued.
        unsafe {
            self.kernel.run_raw(
                &self.device,
                &args,
                pw,
                self.workspace_size,
                stream.cu_stream(),
            )
        }
    }
}

impl<EA: MxElement, EB: MxElement, TD: Element> BlockScaledGemm<EA, EB, TD> {
    /// Checks the tensors and buffers and launches an MX GEMM.
    pub fn run_mx(
        &self,
        stream: &Arc<CudaStream>,
        a: &MxTensor<EA>,
        b: &MxTensor<EB>,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        let args = self.mx_args(stream, a, b, c, d)?;
        self.launch(stream, args, workspace)
    }

    /// Everything [`BlockScaledGemm::run_mx`] does except the launch: the checks, CUTLASS's
    /// `can_implement`, and the kernel parameters with TMA descriptors for these buffers. Works on
    /// any GPU for any architecture's kernel. Returns the workspace size.
    pub fn prepare_mx(
        &self,
        stream: &Arc<CudaStream>,
        a: &MxTensor<EA>,
        b: &MxTensor<EB>,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
    ) -> Result<usize> {
        let args = self.mx_args(stream, a, b, c, d)?;
        self.prepare(stream, &args)
    }

    fn mx_args(
        &self,
        stream: &Arc<CudaStream>,
        a: &MxTensor<EA>,
        b: &MxTensor<EB>,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
    ) -> Result<RawArgs> {
        let (psa, _g1) = a.scales.device_ptr(stream);
        let (psb, _g2) = b.scales.device_ptr(stream);
        self.refuse_nvfp4_out()?;
        let len = d.len();
        let (pd, _gd) = d.device_ptr_mut(stream);
        let need = self.problem.m * self.problem.n;
        self.operand_args(
            stream,
            Family::Mx,
            (&a.data, psa, &a.layout, a.scales.len()),
            (&b.data, psb, &b.layout, b.scales.len()),
            c,
            (pd, len, need),
        )
    }

    /// Checks the family of the operands against the plan's, then the operands and buffers.
    #[allow(clippy::type_complexity)]
    fn operand_args(
        &self,
        stream: &Arc<CudaStream>,
        family: Family,
        a: (&dyn DevicePtr<u8>, u64, &ScaleFactorLayout, usize),
        b: (&dyn DevicePtr<u8>, u64, &ScaleFactorLayout, usize),
        c: Option<&dyn DevicePtr<TD>>,
        d: (u64, usize, usize),
    ) -> Result<RawArgs> {
        if self.family != family {
            return Err(Error::ScaleMismatch {
                operand: OperandName::ScalesA,
                rule: match self.family {
                    Family::Nv => {
                        "this plan's kernel reads NVFP4 (ue4m3 per 16) scales: use run_nvfp4".into()
                    }
                    Family::Mx => {
                        "this plan's kernel reads MX (ue8m0 per 32) scales: use run_mx".into()
                    }
                },
            });
        }
        self.checked_pointers(stream, (a.0, a.1, a.2), (b.0, b.1, b.2), (a.3, b.3), c, d)
    }
}

impl<TD: Element> BlockScaledGemm<E2M1, E2M1, TD> {
    /// Plans an NVFP4 GEMM (ue4m3 scales per 16) on `ctx`'s device.
    pub fn new_nvfp4(ctx: &CudaContext, problem: &GemmProblem) -> Result<Self> {
        Self::plan(
            DeviceInfo::query(ctx)?,
            problem,
            None,
            Family::Nv,
            false,
            false,
        )
    }

    /// Plans an NVFP4 GEMM for a described device, optionally with the kernel of this name.
    pub fn plan_nvfp4(
        device: DeviceInfo,
        problem: &GemmProblem,
        kernel: Option<&str>,
    ) -> Result<Self> {
        Self::plan(device, problem, kernel, Family::Nv, false, false)
    }

    /// Checks and launches an NVFP4 GEMM; alpha is multiplied by both tensors' per-tensor scales
    /// (read back from the device: this synchronizes the stream).
    pub fn run_nvfp4(
        &self,
        stream: &Arc<CudaStream>,
        a: &Nvfp4Tensor,
        b: &Nvfp4Tensor,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        let mut args = self.nv_args(stream, a, b, c, d)?;
        args.alpha *= a.global_scale(stream)? * b.global_scale(stream)?;
        self.launch(stream, args, workspace)
    }

    /// [`BlockScaledGemm::prepare_mx`] for NVFP4 operands.
    pub fn prepare_nvfp4(
        &self,
        stream: &Arc<CudaStream>,
        a: &Nvfp4Tensor,
        b: &Nvfp4Tensor,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
    ) -> Result<usize> {
        let args = self.nv_args(stream, a, b, c, d)?;
        self.prepare(stream, &args)
    }

    fn nv_args(
        &self,
        stream: &Arc<CudaStream>,
        a: &Nvfp4Tensor,
        b: &Nvfp4Tensor,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
    ) -> Result<RawArgs> {
        let (psa, _g1) = a.scales.device_ptr(stream);
        let (psb, _g2) = b.scales.device_ptr(stream);
        self.refuse_nvfp4_out()?;
        let len = d.len();
        let (pd, _gd) = d.device_ptr_mut(stream);
        let need = self.problem.m * self.problem.n;
        self.operand_args(
            stream,
            Family::Nv,
            (&a.data, psa, &a.layout, a.scales.len()),
            (&b.data, psb, &b.layout, b.scales.len()),
            c,
            (pd, len, need),
        )
    }
}

impl<TC: Element> BlockScaledGemm<E2M1, E2M1, TC> {
    /// Plans an NVFP4 x NVFP4 GEMM whose D is NVFP4 too (e2m1 with ue4m3 per 16 along N, written by
    /// the `LinCombBlockScaleFactor` epilogue; C of type `TC`), for a described device.
    pub fn plan_nvfp4_to_nvfp4(
        device: DeviceInfo,
        problem: &GemmProblem,
        kernel: Option<&str>,
    ) -> Result<Self> {
        Self::plan(device, problem, kernel, Family::Nv, true, false)
    }

    /// Checks and launches: `d` (an `m x n` [`Nvfp4Tensor`]) gets D's elements and scale factors;
    /// the epilogue computes each scale factor as `amax(block) * norm_constant / 6` and stores
    /// `value * norm_constant / sf`, so D's per-tensor scale is `1 / norm_constant` (recorded in
    /// `d.amax` as `2688 / norm_constant`). Alpha is multiplied by the inputs' per-tensor scales
    /// (read back from the device: this synchronizes the stream).
    #[allow(clippy::too_many_arguments)]
    pub fn run_nvfp4_to_nvfp4(
        &self,
        stream: &Arc<CudaStream>,
        a: &Nvfp4Tensor,
        b: &Nvfp4Tensor,
        c: Option<&dyn DevicePtr<TC>>,
        d: &mut Nvfp4Tensor,
        norm_constant: f32,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        let norm = self.norm_buffer(stream, norm_constant)?;
        let mut args = self.nv_out_args(stream, a, b, c, d, &norm)?;
        args.alpha *= a.global_scale(stream)? * b.global_scale(stream)?;
        self.launch(stream, args, workspace)?;
        stream.memcpy_htod(&[(448.0f32 * 6.0 / norm_constant).to_bits()], &mut d.amax)?;
        Ok(())
    }

    /// [`BlockScaledGemm::run_nvfp4_to_nvfp4`] up to the launch (the kernel's host path).
    pub fn prepare_nvfp4_to_nvfp4(
        &self,
        stream: &Arc<CudaStream>,
        a: &Nvfp4Tensor,
        b: &Nvfp4Tensor,
        c: Option<&dyn DevicePtr<TC>>,
        d: &mut Nvfp4Tensor,
        norm_constant: f32,
    ) -> Result<usize> {
        let norm = self.norm_buffer(stream, norm_constant)?;
        let args = self.nv_out_args(stream, a, b, c, d, &norm)?;
        self.prepare(stream, &args)
    }

    fn norm_buffer(
        &self,
        stream: &Arc<CudaStream>,
        norm_constant: f32,
    ) -> Result<cudarc::driver::CudaSlice<f32>> {
        if !(norm_constant.is_finite() && norm_constant > 0.0) {
            return Err(Error::InvalidProblem {
                reason: format!("norm_constant {norm_constant} must be finite and positive"),
            });
        }
        Ok(stream.clone_htod(&[norm_constant])?)
    }

    fn nv_out_args(
        &self,
        stream: &Arc<CudaStream>,
        a: &Nvfp4Tensor,
        b: &Nvfp4Tensor,
        c: Option<&dyn DevicePtr<TC>>,
        d: &mut Nvfp4Tensor,
        norm: &cudarc::driver::CudaSlice<f32>,
    ) -> Result<RawArgs> {
        if !self.nvfp4_out {
            return Err(Error::ScaleMismatch {
                operand: OperandName::D,
                rule: "this plan's kernel writes a plain D: use run_nvfp4".into(),
            });
        }
        let p = self.problem;
        let want = ScaleFactorLayout::new(p.m, p.n, 1, 16);
        if d.layout != want {
            return Err(Error::ScaleMismatch {
                operand: OperandName::D,
                rule: format!(
                    "D's scale factors are one ue4m3 per 16 elements of N in the \
                     Sm1xxBlockScaledConfig layout of an {} x {} matrix ({want:?}); the tensor's \
                     layout is {:?}",
                    p.m, p.n, d.layout
                ),
            });
        }
        require_len(OperandName::D, d.scales.len(), want.size())?;
        let (psa, _g1) = a.scales.device_ptr(stream);
        let (psb, _g2) = b.scales.device_ptr(stream);
        let len = d.data.len();
        let (pd, _gd) = d.data.device_ptr_mut(stream);
        let (psd, _gs) = d.scales.device_ptr_mut(stream);
        let (pn, _gn) = norm.device_ptr(stream);
        if psd % 16 != 0 {
            return Err(Error::Misaligned {
                operand: OperandName::D,
                what: "scale-factor pointer".into(),
                value: psd,
                required: 16,
            });
        }
        let mut args = self.operand_args(
            stream,
            Family::Nv,
            (&a.data, psa, &a.layout, a.scales.len()),
            (&b.data, psb, &b.layout, b.scales.len()),
            c,
            (pd, len, (p.m * p.n).div_ceil(2)),
        )?;
        args.sfd = psd;
        args.norm_constant = pn;
        Ok(args)
    }
}
