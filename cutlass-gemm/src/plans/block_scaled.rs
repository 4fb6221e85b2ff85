//! Narrow-precision GEMMs of SM100 and SM120: block-scaled MX (`mx_float8_t`, `mx_float6_t`,
//! `mx_float4_t`: ue8m0 per 32 elements of K) and NVFP4 (`nv_float4_t`: ue4m3 per 16, plus a
//! per-tensor scale) operands whose scale factors lie in the `Sm1xxBlockScaledConfig` layout, and
//! FP8/FP6/FP4 operands without block scales (the f8f6f4 rows of Table 2).
//!
//! Operands are typed ([`NarrowOperand`]): an [`MxTensor<E>`] carries its element format in its
//! type and its scale layout (rows, K, 32 per scale) in its value, an [`Nvfp4Tensor`] its ue4m3
//! scales per 16 and its amax, a [`PackedTensor<E>`] only packed elements; each knows which extent
//! is contiguous ([`Major`]). A plan takes only kernels whose formats, scale type, vector size and
//! layouts match, and every shape, alignment, layout and buffer rule is checked with a typed error
//! before any call into a kernel.
//!
//! | plan | A, B | D |
//! |---|---|---|
//! | [`BlockScaledGemm::plan_mx`] | [`MxTensor`] | `TD` |
//! | [`BlockScaledGemm::plan_nvfp4`] | [`Nvfp4Tensor`] (per-tensor scales fold into alpha) | `TD` |
//! | [`BlockScaledGemm::plan_plain`] | [`PackedTensor`] (no block scales) | `TD` |
//! | [`BlockScaledGemm::plan_mx_to_nvfp4`] | [`MxTensor`] | [`Nvfp4Tensor`] (`LinCombBlockScaleFactor`) |
//! | [`BlockScaledGemm::plan_nvfp4_to_nvfp4`] | [`Nvfp4Tensor`] | [`Nvfp4Tensor`] |
//!
//! `D = alpha * A·B + beta * C` with A `m x k` and B `k x n` in the layouts of the
//! [`GemmProblem`] (A row-major = K-major, B column-major = K-major, "TN", is what the GPU
//! quantizers write; the other layouts the catalog has for the types take MN-major tensors, built
//! on the host with `from_host`), and a row-major D. Run with [`BlockScaledGemm::run`] (or
//! [`BlockScaledGemm::run_to_nvfp4`]); the `prepare` variants do everything but the launch.
//! Plans with a plain D take a fused epilogue ([`BlockScaledGemm::with_epilogue`],
//! [`BlockScaledGemm::run_fused`]: bias, activation, row and column scales, as
//! [`crate::Gemm::with_epilogue`]).
//!
//! No Blackwell GPU has run these kernels here. On other GPUs a plan made with
//! [`BlockScaledGemm::plan_any_arch`] drives the kernel's host path up to the launch
//! ([`BlockScaledGemm::prepare`]); a launch returns [`Error::ArchMismatch`].

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop};
use cutlass_gemm_catalog::{DataType, KernelSpec, Layout};

use crate::error::{
    require_device, require_len, require_ordinal, Error, Extent, KernelRule, LayoutRule,
    OperandName, ProblemRule, Quantity, Result, Scalar, ScaleRule,
};
use crate::ffi::{DeviceInfo, Kernel, RawArgs};
use crate::formats::element::Element;
use crate::formats::numeric::E2M1;
use crate::formats::scale_layout::ScaleFactorLayout;
use crate::plans::epilogue::{
    check_operands, fusion_rule, vector_args, Epilogue, EpilogueOperands,
};
use crate::plans::gemm::Workspace;
use crate::plans::problem::GemmProblem;
use crate::quantize::{Major, MxElement, MxTensor, Nvfp4Tensor, PackedTensor};
use crate::selection::{built_kernels, select, ArchPolicy};

pub(crate) mod operand {
    use super::*;

    /// The scale-factor family of a plan or an operand.
    pub use crate::error::ScaleFamily;

    /// One operand as raw device addresses and extents: what the rules check.
    #[derive(Clone, Copy, Debug)]
    pub struct Parts {
        pub family: ScaleFamily,
        pub rows: usize,
        pub k: usize,
        pub major: Major,
        /// Packed elements: address and length in bytes.
        pub data: (u64, usize),
        /// Scale factors: address, length in bytes (one byte each) and layout.
        pub scales: Option<(u64, usize, ScaleFactorLayout)>,
    }

    pub trait Sealed {
        fn parts<'a>(&'a self, stream: &'a Arc<CudaStream>) -> (Parts, Vec<SyncOnDrop<'a>>);
        /// The device ordinals of the data and of the scales (scale factors, and an NVFP4
        /// tensor's amax: the first of them on another device than the data, else the data's),
        /// read without touching the buffers.
        fn ordinals(&self) -> [usize; 2];
        /// The per-tensor scale that multiplies alpha (NVFP4), read from the device.
        fn tensor_scale(&self, _stream: &Arc<CudaStream>) -> Result<f32> {
            Ok(1.0)
        }
    }
}
use operand::{Parts, ScaleFamily};

/// The device of a buffer: that of the context its stream was made in.
fn ordinal<T>(buffer: &impl DeviceSlice<T>) -> usize {
    buffer.stream().context().ordinal()
}

/// An operand of a [`BlockScaledGemm`]: [`MxTensor`], [`Nvfp4Tensor`] or [`PackedTensor`].
pub trait NarrowOperand: operand::Sealed {
    /// The element format.
    type Elem: MxElement;
}

impl<E: MxElement> operand::Sealed for MxTensor<E> {
    fn parts<'a>(&'a self, stream: &'a Arc<CudaStream>) -> (Parts, Vec<SyncOnDrop<'a>>) {
        let (pd, gd) = self.data.device_ptr(stream);
        let (ps, gs) = self.scales.device_ptr(stream);
        let parts = Parts {
            family: ScaleFamily::Mx,
            rows: self.layout.rows,
            k: self.layout.k,
            major: self.major,
            data: (pd, self.data.len()),
            scales: Some((ps, self.scales.len(), self.layout)),
        };
        (parts, vec![gd, gs])
    }
    fn ordinals(&self) -> [usize; 2] {
        [ordinal(&self.data), ordinal(&self.scales)]
    }
}
impl<E: MxElement> NarrowOperand for MxTensor<E> {
    type Elem = E;
}

impl operand::Sealed for Nvfp4Tensor {
    fn parts<'a>(&'a self, stream: &'a Arc<CudaStream>) -> (Parts, Vec<SyncOnDrop<'a>>) {
        let (pd, gd) = self.data.device_ptr(stream);
        let (ps, gs) = self.scales.device_ptr(stream);
        let parts = Parts {
            family: ScaleFamily::Nvfp4,
            rows: self.layout.rows,
            k: self.layout.k,
            major: self.major,
            data: (pd, self.data.len()),
            scales: Some((ps, self.scales.len(), self.layout)),
        };
        (parts, vec![gd, gs])
    }
    fn ordinals(&self) -> [usize; 2] {
        let data = ordinal(&self.data);
        let scales = [ordinal(&self.scales), ordinal(&self.amax)]
            .into_iter()
            .find(|&o| o != data)
            .unwrap_or(data);
        [data, scales]
    }
    fn tensor_scale(&self, stream: &Arc<CudaStream>) -> Result<f32> {
        self.global_scale(stream)
    }
}
impl NarrowOperand for Nvfp4Tensor {
    type Elem = E2M1;
}

impl<E: MxElement> operand::Sealed for PackedTensor<E> {
    fn parts<'a>(&'a self, stream: &'a Arc<CudaStream>) -> (Parts, Vec<SyncOnDrop<'a>>) {
        let (pd, gd) = self.data.device_ptr(stream);
        let parts = Parts {
            family: ScaleFamily::Plain,
            rows: self.rows,
            k: self.k,
            major: self.major,
            data: (pd, self.data.len()),
            scales: None,
        };
        (parts, vec![gd])
    }
    fn ordinals(&self) -> [usize; 2] {
        [ordinal(&self.data); 2]
    }
}
impl<E: MxElement> NarrowOperand for PackedTensor<E> {
    type Elem = E;
}

/// The checks of a plan, over the catalog spec and raw addresses only (no kernel, no device): the
/// same code serves launches and CPU tests of every rule.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rules {
    pub(crate) problem: GemmProblem,
    pub(crate) spec: KernelSpec,
    pub(crate) family: ScaleFamily,
    pub(crate) nvfp4_out: bool,
}

/// Problem-level rules, before any kernel is looked at.
pub(crate) fn check_problem(problem: &GemmProblem) -> Result<()> {
    problem.check()?;
    for (op, l) in [(OperandName::C, problem.c), (OperandName::D, problem.d)] {
        if l.layout != Layout::RowMajor {
            return Err(Error::UnsupportedLayout {
                operand: op,
                rule: LayoutRule::NarrowRowMajorOutput,
            });
        }
    }
    let padded = [problem.a, problem.b, problem.c, problem.d]
        .iter()
        .any(|l| l.ld.is_some() || l.batch_stride.is_some());
    if problem.batch != 1 || padded {
        return Err(Error::InvalidProblem {
            reason: ProblemRule::NarrowNotPacked,
        });
    }
    Ok(())
}

/// Which rule a kernel breaks for a plan of these types, family and layouts.
pub(crate) fn serves(
    s: &KernelSpec,
    family: ScaleFamily,
    nvfp4_out: bool,
    (ta, tb, tc): (DataType, DataType, DataType),
    (la, lb): (Layout, Layout),
) -> std::result::Result<(), KernelRule> {
    if s.op_class.is_sparse() {
        return Err(KernelRule::Sparse);
    }
    if s.blockwise.is_some() {
        return Err(KernelRule::Blockwise);
    }
    match (s.block_scale, family.scale_type()) {
        (None, None) => {}
        (Some(bs), Some((sf, vec))) if (bs.sf, bs.vec) == (sf, vec) => {}
        (Some(bs), _) => {
            return Err(KernelRule::BlockScales {
                kernel: (bs.sf, bs.vec),
                required: family,
            })
        }
        (None, _) => return Err(KernelRule::NoBlockScales),
    }
    let out = s
        .output_scale
        .map(|o| (o.sf, o.vec) == (DataType::UE4M3, 16) && s.d.ty == DataType::E2M1);
    if out.is_some() != nvfp4_out || out == Some(false) {
        return Err(if nvfp4_out {
            KernelRule::NotNvfp4Output
        } else {
            KernelRule::Nvfp4Output
        });
    }
    let td = if nvfp4_out { DataType::E2M1 } else { tc };
    // C: its type only (the plan's C is row-major, like D).
    for (operand, o, required) in [
        (OperandName::A, s.a, (ta, la)),
        (OperandName::B, s.b, (tb, lb)),
        (OperandName::C, s.c, (tc, s.c.layout)),
        (OperandName::D, s.d, (td, Layout::RowMajor)),
    ] {
        if (o.ty, o.layout) != required {
            return Err(KernelRule::Operand {
                operand,
                kernel: (o.ty, o.layout),
                required,
            });
        }
    }
    Ok(())
}

fn layout_pair(a: Layout, b: Layout) -> String {
    let c = |l: Layout| if l == Layout::RowMajor { 'T' } else { 'N' };
    format!("{}{}", c(a), c(b))
}

impl Rules {
    /// The major the plan reads an operand in.
    fn major(&self, op: OperandName) -> Major {
        let l = if op == OperandName::A {
            self.problem.a.layout
        } else {
            self.problem.b.layout
        };
        Major::of(op, l)
    }

    /// Alignment in elements (Tables 1-3) of each operand's contiguous extent, which is also
    /// the leading dimension of the packed operands.
    pub(crate) fn check_alignment(&self) -> Result<()> {
        let p = &self.problem;
        let extent = |op, rows| {
            if self.major(op) == Major::K {
                (Extent::K, p.k)
            } else if op == OperandName::A {
                (Extent::M, rows)
            } else {
                (Extent::N, rows)
            }
        };
        let (wa, va) = extent(OperandName::A, p.m);
        let (wb, vb) = extent(OperandName::B, p.n);
        for (op, what, value, align) in [
            (OperandName::A, wa, va, self.spec.a.align),
            (OperandName::B, wb, vb, self.spec.b.align),
            (OperandName::D, Extent::N, p.n, self.spec.d.align),
        ] {
            if value % align as usize != 0 {
                return Err(Error::Misaligned {
                    operand: op,
                    what: Quantity::Extent(what),
                    value: value as u64,
                    required: align as u64,
                });
            }
        }
        Ok(())
    }

    pub(crate) fn raw(&self, a: u64, sfa: u64, b: u64, sfb: u64, c: u64, d: u64) -> RawArgs {
        let p = &self.problem;
        let lda = if self.major(OperandName::A) == Major::K {
            p.k
        } else {
            p.m
        };
        let ldb = if self.major(OperandName::B) == Major::K {
            p.k
        } else {
            p.n
        };
        RawArgs {
            m: p.m,
            n: p.n,
            k: p.k,
            batch: 1,
            a,
            lda,
            batch_stride_a: p.m * p.k,
            b,
            ldb,
            batch_stride_b: p.n * p.k,
            c,
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

    /// One input operand against the plan: scale family, shape, major, scale layout, lengths and
    /// base alignment.
    fn check_operand(&self, op: OperandName, t: &Parts) -> Result<()> {
        let p = &self.problem;
        let (rows, scales_op, ty) = if op == OperandName::A {
            (p.m, OperandName::ScalesA, self.spec.a.ty)
        } else {
            (p.n, OperandName::ScalesB, self.spec.b.ty)
        };
        if t.family != self.family {
            return Err(Error::ScaleMismatch {
                operand: scales_op,
                rule: ScaleRule::Family {
                    required: self.family,
                    found: t.family,
                },
            });
        }
        if (t.rows, t.k) != (rows, p.k) {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::TensorShape {
                    operand: op,
                    found: (t.rows, t.k),
                    required: (rows, p.k),
                },
            });
        }
        let want = self.major(op);
        if t.major != want {
            return Err(Error::UnsupportedLayout {
                operand: op,
                rule: LayoutRule::TensorMajor {
                    required: want,
                    found: t.major,
                },
            });
        }
        require_len(op, t.data.1, (rows * p.k * ty.bits() as usize).div_ceil(8))?;
        // Sub-byte operands are read by TMA's unpacking modes, which need a 32-byte aligned base
        // (seed, Table 2 notes); others need 16 bytes, as does every TMA base.
        let base = if ty.bits() < 8 { 32 } else { 16 };
        crate::error::require_aligned(op, Quantity::Pointer, t.data.0, base)?;
        if let Some((ptr, len, layout)) = t.scales {
            let vec = self.family.scale_type().map_or(0, |(_, v)| v as usize);
            let required = ScaleFactorLayout::new(rows, p.k, 1, vec);
            if layout != required {
                return Err(Error::ScaleMismatch {
                    operand: scales_op,
                    rule: ScaleRule::Layout {
                        required,
                        found: layout,
                    },
                });
            }
            require_len(scales_op, len, layout.size())?;
            crate::error::require_aligned(scales_op, Quantity::Pointer, ptr, 16)?;
        }
        Ok(())
    }

    /// The checked arguments of a launch with a plain D (`d`: address, length in elements).
    pub(crate) fn args(
        &self,
        a: &Parts,
        b: &Parts,
        c: Option<(u64, usize)>,
        d: (u64, usize),
    ) -> Result<RawArgs> {
        if self.nvfp4_out {
            return Err(Error::ScaleMismatch {
                operand: OperandName::D,
                rule: ScaleRule::OutputIsNvfp4,
            });
        }
        let p = &self.problem;
        require_len(OperandName::D, d.1, p.m * p.n)?;
        crate::error::require_aligned(OperandName::D, Quantity::Pointer, d.0, 16)?;
        self.inputs(a, b, c, d.0)
    }

    /// A, B and C, then the raw arguments with D at `d`.
    fn inputs(&self, a: &Parts, b: &Parts, c: Option<(u64, usize)>, d: u64) -> Result<RawArgs> {
        let p = &self.problem;
        self.check_operand(OperandName::A, a)?;
        self.check_operand(OperandName::B, b)?;
        match c {
            Some((pc, len)) => {
                require_len(OperandName::C, len, p.m * p.n)?;
                crate::error::require_aligned(OperandName::C, Quantity::Pointer, pc, 16)?;
            }
            None if p.beta != 0.0 => {
                return Err(Error::InvalidProblem {
                    reason: ProblemRule::BetaWithoutC {
                        beta: Scalar(p.beta),
                    },
                })
            }
            None => {}
        }
        let sf = |t: &Parts| t.scales.map_or(0, |s| s.0);
        Ok(self.raw(a.data.0, sf(a), b.data.0, sf(b), c.map_or(d, |c| c.0), d))
    }

    /// The fused epilogue's vectors (`[bias, row scales, column scales]`: address, length in
    /// elements) checked against the plan's [`Epilogue`] for a D at `d` (address, elements), and
    /// put into `args`. D is row-major and computed as laid out, so rows are the plan's `m`.
    pub(crate) fn epilogue_args(
        &self,
        epilogue: &Epilogue,
        args: &mut RawArgs,
        vectors: [Option<(u64, usize)>; 3],
        d: (u64, usize),
    ) -> Result<()> {
        let p = &self.problem;
        let td = (self.spec.d.ty.bits() as usize).div_ceil(8);
        let d_bytes = (d.1 * td) as u64;
        check_operands(epilogue, (p.m, p.n), td, vectors, (d.0, d_bytes))?;
        vector_args(epilogue, args, vectors.map(|v| v.map_or(0, |(p, _)| p)));
        Ok(())
    }

    /// The checked arguments of a launch whose D is an NVFP4 tensor (`norm`: the device address
    /// of the norm constant).
    pub(crate) fn nvfp4_out_args(
        &self,
        a: &Parts,
        b: &Parts,
        c: Option<(u64, usize)>,
        d: &Parts,
        norm: u64,
    ) -> Result<RawArgs> {
        if !self.nvfp4_out {
            return Err(Error::ScaleMismatch {
                operand: OperandName::D,
                rule: ScaleRule::OutputIsPlain,
            });
        }
        let p = &self.problem;
        let want = ScaleFactorLayout::new(p.m, p.n, 1, 16);
        let Some((psd, sd_len, layout)) = d.scales.filter(|_| d.family == ScaleFamily::Nvfp4)
        else {
            return Err(Error::ScaleMismatch {
                operand: OperandName::D,
                rule: ScaleRule::OutputNotNvfp4 { found: d.family },
            });
        };
        if layout != want || (d.rows, d.k) != (p.m, p.n) {
            return Err(Error::ScaleMismatch {
                operand: OperandName::D,
                rule: ScaleRule::OutputLayout {
                    required: want,
                    found: layout,
                },
            });
        }
        if d.major != Major::K {
            return Err(Error::UnsupportedLayout {
                operand: OperandName::D,
                rule: LayoutRule::Nvfp4OutputRowMajor,
            });
        }
        require_len(OperandName::D, d.data.1, (p.m * p.n).div_ceil(2))?;
        require_len(OperandName::D, sd_len, want.size())?;
        crate::error::require_aligned(OperandName::D, Quantity::Pointer, d.data.0, 32)?;
        crate::error::require_aligned(OperandName::D, Quantity::ScaleFactorPointer, psd, 16)?;
        let mut args = self.inputs(a, b, c, d.data.0)?;
        args.sfd = psd;
        args.norm_constant = norm;
        Ok(args)
    }
}

/// A planned narrow-precision GEMM: A elements `EA`, B elements `EB`, C and D `TD`; or, for plans
/// with an NVFP4 output ([`BlockScaledGemm::plan_mx_to_nvfp4`],
/// [`BlockScaledGemm::plan_nvfp4_to_nvfp4`]), C `TD` and D an [`Nvfp4Tensor`] written with its
/// scale factors by the `LinCombBlockScaleFactor` epilogue.
pub struct BlockScaledGemm<EA: MxElement, EB: MxElement, TD: Element> {
    rules: Rules,
    device: DeviceInfo,
    kernel: Kernel,
    workspace_size: usize,
    /// The fused epilogue ([`BlockScaledGemm::with_epilogue`]).
    epilogue: Epilogue,
    /// The kernel was named by the caller, as [`BlockScaledGemm::plan_any_arch`] plans always
    /// are (a new epilogue keeps it or is refused).
    pinned: bool,
    _types: PhantomData<(EA, EB, TD)>,
}

impl<EA: MxElement, EB: MxElement, TD: Element> std::fmt::Debug for BlockScaledGemm<EA, EB, TD> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockScaledGemm")
            .field("kernel", &self.kernel.name)
            .field("problem", &self.rules.problem)
            .field("epilogue", &self.epilogue)
            .finish()
    }
}

impl<EA: MxElement, EB: MxElement, TD: Element> BlockScaledGemm<EA, EB, TD> {
    /// Plans an MX GEMM (ue8m0 scales per 32) on `ctx`'s device.
    pub fn new_mx(ctx: &CudaContext, problem: &GemmProblem) -> Result<Self> {
        Self::plan_mx(DeviceInfo::query(ctx)?, problem, None)
    }

    /// Plans an MX GEMM for a described device, optionally with the kernel of this name.
    pub fn plan_mx(
        device: DeviceInfo,
        problem: &GemmProblem,
        kernel: Option<&str>,
    ) -> Result<Self> {
        Self::plan(
            device,
            problem,
            kernel,
            ScaleFamily::Mx,
            false,
            false,
            Epilogue::NONE,
        )
    }

    /// Plans a GEMM of packed FP8/FP6/FP4 operands without block scales ([`PackedTensor`]; Table
    /// 2's f8f6f4 kernels) on `ctx`'s device.
    pub fn new_plain(ctx: &CudaContext, problem: &GemmProblem) -> Result<Self> {
        Self::plan_plain(DeviceInfo::query(ctx)?, problem, None)
    }

    /// [`BlockScaledGemm::new_plain`] for a described device, optionally with the named kernel.
    pub fn plan_plain(
        device: DeviceInfo,
        problem: &GemmProblem,
        kernel: Option<&str>,
    ) -> Result<Self> {
        Self::plan(
            device,
            problem,
            kernel,
            ScaleFamily::Plain,
            false,
            false,
            Epilogue::NONE,
        )
    }

    /// Plans an MX GEMM whose D is NVFP4 (e2m1 with ue4m3 per 16 along N, C of type `TD`): the
    /// Blackwell narrow-precision walkthrough kernel is one. Run with [`BlockScaledGemm::run_to_nvfp4`].
    pub fn plan_mx_to_nvfp4(
        device: DeviceInfo,
        problem: &GemmProblem,
        kernel: Option<&str>,
    ) -> Result<Self> {
        Self::plan(
            device,
            problem,
            kernel,
            ScaleFamily::Mx,
            true,
            false,
            Epilogue::NONE,
        )
    }

    /// Plans with the named kernel even when `device` cannot run it: every check and
    /// [`BlockScaledGemm::prepare`] / [`BlockScaledGemm::prepare_fused`] /
    /// [`BlockScaledGemm::prepare_to_nvfp4`] work, a launch returns [`Error::ArchMismatch`];
    /// [`BlockScaledGemm::with_epilogue`] keeps the named kernel or refuses it. For exercising SM100/SM120 host paths on another GPU. The
    /// kind of plan (MX, NVFP4, plain; NVFP4 output or not) follows from the kernel.
    pub fn plan_any_arch(device: DeviceInfo, problem: &GemmProblem, kernel: &str) -> Result<Self> {
        let spec = built_kernels()
            .iter()
            .find(|k| k.name == kernel)
            .map(|k| k.spec);
        let family = match spec.and_then(|s| s.block_scale) {
            None if spec.is_some() => ScaleFamily::Plain,
            Some(bs) if bs.vec == 16 => ScaleFamily::Nvfp4,
            _ => ScaleFamily::Mx,
        };
        let nvfp4_out = spec.is_some_and(|s| s.output_scale.is_some());
        Self::plan(
            device,
            problem,
            Some(kernel),
            family,
            nvfp4_out,
            true,
            Epilogue::NONE,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn plan(
        device: DeviceInfo,
        problem: &GemmProblem,
        kernel: Option<&str>,
        family: ScaleFamily,
        nvfp4_out: bool,
        any_arch: bool,
        epilogue: Epilogue,
    ) -> Result<Self> {
        check_problem(problem)?;
        let types = (EA::DATA_TYPE, EB::DATA_TYPE, TD::DATA_TYPE);
        let layouts = (problem.a.layout, problem.b.layout);
        let request = format!(
            "{} x {} ({}) -> {}{} {}{}",
            types.0,
            types.1,
            family,
            if nvfp4_out { "NVFP4 D, C " } else { "" },
            types.2,
            layout_pair(layouts.0, layouts.1),
            if epilogue.is_none() {
                String::new()
            } else {
                format!(", fused epilogue {}", epilogue.describe())
            }
        );
        let named = kernel.is_some();
        let kernel = select(
            &device,
            kernel,
            if any_arch {
                ArchPolicy::AnyArch
            } else {
                ArchPolicy::Runnable
            },
            &|s: &KernelSpec| {
                serves(s, family, nvfp4_out, types, layouts)?;
                fusion_rule(s, &epilogue, named, TD::DATA_TYPE)
            },
            &request,
            &|kernels: &[Kernel]| kernels[0],
        )?;
        let rules = Rules {
            problem: *problem,
            spec: kernel.spec,
            family,
            nvfp4_out,
        };
        rules.check_alignment()?;
        let args = rules.raw(256, 256, 256, 256, 256, 256);
        let workspace_size = kernel.workspace_bytes(&device, &args)?;
        Ok(BlockScaledGemm {
            rules,
            device,
            kernel,
            workspace_size,
            epilogue,
            pinned: named,
            _types: PhantomData,
        })
    }

    /// The plan with a fused epilogue: bias, activation, row and column scales computed in the
    /// kernel's epilogue in f32 after the block-scaled accumulator and alpha (`D = act(alpha ·
    /// row_scale[i] · col_scale[j] · (A·B)[i][j] + beta · C[i][j] + bias)`,
    /// [`crate::plans::epilogue`]); launch it with [`BlockScaledGemm::run_fused`]. The kernels with
    /// it are the catalog's `_evt_scale_bias{type}_act` twins (the `sm100` and `sm120` families
    /// build them for their plain-output kernels); a bias is of D's type. The kernel is kept where
    /// it has the epilogue; otherwise the problem is planned again among those that have it, and a
    /// kernel named by the caller is refused ([`KernelRule::NoFusedEpilogue`]), as are plans with
    /// an NVFP4 D, whose epilogue computes its scale factors.
    pub fn with_epilogue(self, epilogue: Epilogue) -> Result<Self> {
        crate::plans::epilogue::refuse_aux_output(&epilogue)?;
        let kept = fusion_rule(&self.kernel.spec, &epilogue, true, TD::DATA_TYPE);
        match kept {
            Ok(()) => Ok(BlockScaledGemm { epilogue, ..self }),
            Err(reason) if self.pinned || self.rules.nvfp4_out => Err(Error::KernelMismatch {
                name: self.kernel.name.into(),
                reason,
            }),
            Err(_) => Self::plan(
                self.device,
                &self.rules.problem,
                None,
                self.rules.family,
                false,
                false,
                epilogue,
            ),
        }
    }

    /// The plan's fused epilogue ([`Epilogue::NONE`] unless [`BlockScaledGemm::with_epilogue`]
    /// set one).
    pub fn epilogue(&self) -> Epilogue {
        self.epilogue
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

    /// The scale-factor layouts the kernel reads for A and B (`None` for plain plans).
    pub fn scale_layouts(&self) -> Option<(ScaleFactorLayout, ScaleFactorLayout)> {
        let (_, vec) = self.rules.family.scale_type()?;
        let p = &self.rules.problem;
        Some((
            ScaleFactorLayout::new(p.m, p.k, 1, vec as usize),
            ScaleFactorLayout::new(p.n, p.k, 1, vec as usize),
        ))
    }

    /// Checks the tensors and buffers and launches. Alpha is multiplied by the operands'
    /// per-tensor scales (NVFP4 operands: read back from the device, which synchronizes the
    /// stream). A plan whose fused epilogue names vectors (a bias, scales) takes them with
    /// [`BlockScaledGemm::run_fused`]; here it returns [`ProblemRule::EpilogueOperandMissing`].
    pub fn run<A, B>(
        &self,
        stream: &Arc<CudaStream>,
        a: &A,
        b: &B,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
        workspace: Workspace<'_>,
    ) -> Result<()>
    where
        A: NarrowOperand<Elem = EA>,
        B: NarrowOperand<Elem = EB>,
    {
        self.run_fused(stream, a, b, c, d, &EpilogueOperands::default(), workspace)
    }

    /// [`BlockScaledGemm::run`] with the vectors of the plan's fused epilogue
    /// ([`BlockScaledGemm::with_epilogue`]): exactly those it names, each checked (device,
    /// length, 16-byte alignment, not overlapping D) before the launch.
    #[allow(clippy::too_many_arguments)]
    pub fn run_fused<A, B>(
        &self,
        stream: &Arc<CudaStream>,
        a: &A,
        b: &B,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
        epilogue: &EpilogueOperands<'_, TD>,
        workspace: Workspace<'_>,
    ) -> Result<()>
    where
        A: NarrowOperand<Elem = EA>,
        B: NarrowOperand<Elem = EB>,
    {
        self.with_plain_args(stream, a, b, c, d, epilogue, |mut args| {
            args.alpha *= a.tensor_scale(stream)? * b.tensor_scale(stream)?;
            self.launch(stream, args, workspace)
        })
    }

    /// Everything [`BlockScaledGemm::run`] does except the launch: the checks, CUTLASS's
    /// `can_implement`, and the kernel parameters with TMA descriptors for these buffers. Works on
    /// any GPU for any architecture's kernel. Returns the workspace size.
    pub fn prepare<A, B>(
        &self,
        stream: &Arc<CudaStream>,
        a: &A,
        b: &B,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
    ) -> Result<usize>
    where
        A: NarrowOperand<Elem = EA>,
        B: NarrowOperand<Elem = EB>,
    {
        self.prepare_fused(stream, a, b, c, d, &EpilogueOperands::default())
    }

    /// [`BlockScaledGemm::run_fused`] up to the launch (the kernel's host path, with the
    /// epilogue's vectors in its arguments). Returns the workspace size.
    pub fn prepare_fused<A, B>(
        &self,
        stream: &Arc<CudaStream>,
        a: &A,
        b: &B,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
        epilogue: &EpilogueOperands<'_, TD>,
    ) -> Result<usize>
    where
        A: NarrowOperand<Elem = EA>,
        B: NarrowOperand<Elem = EB>,
    {
        self.with_plain_args(stream, a, b, c, d, epilogue, |args| {
            self.prepare_args(stream, &args)
        })
    }

    /// Checks the operands of a plan with a plain D and runs `then` on the kernel's arguments
    /// while the buffers' stream guards are held (they record the buffers' use when dropped, after
    /// `then` has queued the launch).
    #[allow(clippy::too_many_arguments)]
    fn with_plain_args<A: NarrowOperand, B: NarrowOperand, R>(
        &self,
        stream: &Arc<CudaStream>,
        a: &A,
        b: &B,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
        epilogue: &EpilogueOperands<'_, TD>,
        then: impl FnOnce(RawArgs) -> Result<R>,
    ) -> Result<R> {
        self.check_stream(stream)?;
        self.check_devices(a, b, c)?;
        require_device(OperandName::D, d, self.device.ordinal)?;
        epilogue.check(&self.epilogue, TD::DATA_TYPE, self.device.ordinal)?;
        let (pa, _ga) = a.parts(stream);
        let (pb, _gb) = b.parts(stream);
        let (pc, _gc) = c.map(|c| c.device_ptr(stream)).unzip();
        let len = d.len();
        let (pd, _gd) = d.device_ptr_mut(stream);
        let (vectors, _gv) = epilogue.addresses(stream);
        let mut args = self
            .rules
            .args(&pa, &pb, pc.zip(c.map(|c| c.len())), (pd, len))?;
        self.rules
            .epilogue_args(&self.epilogue, &mut args, vectors, (pd, len))?;
        then(args)
    }

    /// Checks and launches a plan with an NVFP4 D: `d` (an `m x n` [`Nvfp4Tensor`]) gets D's
    /// elements and scale factors; the epilogue computes each scale factor as
    /// `amax(block) * norm_constant / 6` and stores `value * norm_constant / sf`, so D's
    /// per-tensor scale is `1 / norm_constant` (recorded in `d.amax` as `2688 / norm_constant`).
    /// Alpha is multiplied by the inputs' per-tensor scales (NVFP4 inputs: read back from the
    /// device, which synchronizes the stream).
    #[allow(clippy::too_many_arguments)]
    pub fn run_to_nvfp4<A, B>(
        &self,
        stream: &Arc<CudaStream>,
        a: &A,
        b: &B,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut Nvfp4Tensor,
        norm_constant: f32,
        workspace: Workspace<'_>,
    ) -> Result<()>
    where
        A: NarrowOperand<Elem = EA>,
        B: NarrowOperand<Elem = EB>,
    {
        self.check_stream(stream)?; // before norm_buffer allocates on the stream
        let norm = norm_buffer(stream, norm_constant)?;
        self.with_nvfp4_out_args(stream, a, b, c, d, &norm, |mut args| {
            args.alpha *= a.tensor_scale(stream)? * b.tensor_scale(stream)?;
            self.launch(stream, args, workspace)
        })?;
        stream.memcpy_htod(&[(448.0f32 * 6.0 / norm_constant).to_bits()], &mut d.amax)?;
        Ok(())
    }

    /// [`BlockScaledGemm::run_to_nvfp4`] up to the launch (the kernel's host path).
    pub fn prepare_to_nvfp4<A, B>(
        &self,
        stream: &Arc<CudaStream>,
        a: &A,
        b: &B,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut Nvfp4Tensor,
        norm_constant: f32,
    ) -> Result<usize>
    where
        A: NarrowOperand<Elem = EA>,
        B: NarrowOperand<Elem = EB>,
    {
        self.check_stream(stream)?; // before norm_buffer allocates on the stream
        let norm = norm_buffer(stream, norm_constant)?;
        self.with_nvfp4_out_args(stream, a, b, c, d, &norm, |args| {
            self.prepare_args(stream, &args)
        })
    }

    /// [`BlockScaledGemm::with_plain_args`] for a plan with an NVFP4 D.
    #[allow(clippy::too_many_arguments)]
    fn with_nvfp4_out_args<A: NarrowOperand, B: NarrowOperand, R>(
        &self,
        stream: &Arc<CudaStream>,
        a: &A,
        b: &B,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut Nvfp4Tensor,
        norm: &cudarc::driver::CudaSlice<f32>,
        then: impl FnOnce(RawArgs) -> Result<R>,
    ) -> Result<R> {
        self.check_stream(stream)?;
        self.check_devices(a, b, c)?;
        let d_ordinals = operand::Sealed::ordinals(&*d);
        for (what, found) in [OperandName::D, OperandName::Scales]
            .into_iter()
            .zip(d_ordinals)
        {
            self.require_ordinal(what, found)?;
        }
        let (pa, _ga) = a.parts(stream);
        let (pb, _gb) = b.parts(stream);
        let (pc, _gc) = c.map(|c| c.device_ptr(stream)).unzip();
        let (pn, _gn) = norm.device_ptr(stream);
        let (pd, _gd) = operand::Sealed::parts(&*d, stream);
        let args = self
            .rules
            .nvfp4_out_args(&pa, &pb, pc.zip(c.map(|c| c.len())), &pd, pn)?;
        then(args)
    }

    /// The device rule for the stream: it belongs to the plan's device, whose context is then
    /// bound to the calling thread.
    fn check_stream(&self, stream: &Arc<CudaStream>) -> Result<()> {
        crate::error::require_stream(stream, self.device.ordinal)
    }

    /// The device rule for the operands: A, B (data and scale factors) and C on the plan's device,
    /// checked before any buffer is touched.
    fn check_devices(
        &self,
        a: &impl operand::Sealed,
        b: &impl operand::Sealed,
        c: Option<&dyn DevicePtr<TD>>,
    ) -> Result<()> {
        let ([a_data, a_scales], [b_data, b_scales]) = (a.ordinals(), b.ordinals());
        let operands = [
            (OperandName::A, a_data),
            (OperandName::ScalesA, a_scales),
            (OperandName::B, b_data),
            (OperandName::ScalesB, b_scales),
        ];
        for (what, found) in operands {
            self.require_ordinal(what, found)?;
        }
        if let Some(c) = c {
            require_device(OperandName::C, c, self.device.ordinal)?;
        }
        Ok(())
    }

    fn require_ordinal(&self, what: OperandName, found: usize) -> Result<()> {
        require_ordinal(what, found, self.device.ordinal)
    }

    /// The kernel's host path for checked arguments (no launch).
    fn prepare_args(&self, stream: &Arc<CudaStream>, args: &RawArgs) -> Result<usize> {
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
        crate::error::require_arch(
            self.kernel.name,
            self.kernel.spec.arch,
            self.device.compute_capability,
        )?;
        stream.context().bind_to_thread()?;
        let mut managed = None;
        let (pw, _gw) = crate::plans::gemm::workspace_ptr(
            stream,
            workspace,
            self.workspace_size,
            &mut managed,
            false,
        )?;
        // SAFETY: every buffer was checked against the extents the plan reaches, alignment and
        // formats above; the operands are borrowed by the caller for the duration of this call
        // and stream-ordered after it.
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

impl<TD: Element> BlockScaledGemm<E2M1, E2M1, TD> {
    /// Plans an NVFP4 GEMM (ue4m3 scales per 16) on `ctx`'s device.
    pub fn new_nvfp4(ctx: &CudaContext, problem: &GemmProblem) -> Result<Self> {
        Self::plan_nvfp4(DeviceInfo::query(ctx)?, problem, None)
    }

    /// Plans an NVFP4 GEMM for a described device, optionally with the kernel of this name.
    pub fn plan_nvfp4(
        device: DeviceInfo,
        problem: &GemmProblem,
        kernel: Option<&str>,
    ) -> Result<Self> {
        Self::plan(
            device,
            problem,
            kernel,
            ScaleFamily::Nvfp4,
            false,
            false,
            Epilogue::NONE,
        )
    }

    /// Plans an NVFP4 x NVFP4 GEMM whose D is NVFP4 too (e2m1 with ue4m3 per 16 along N, written
    /// by the `LinCombBlockScaleFactor` epilogue; C of type `TD`), for a described device. Run
    /// with [`BlockScaledGemm::run_to_nvfp4`].
    pub fn plan_nvfp4_to_nvfp4(
        device: DeviceInfo,
        problem: &GemmProblem,
        kernel: Option<&str>,
    ) -> Result<Self> {
        Self::plan(
            device,
            problem,
            kernel,
            ScaleFamily::Nvfp4,
            true,
            false,
            Epilogue::NONE,
        )
    }
}

fn norm_buffer(
    stream: &Arc<CudaStream>,
    norm_constant: f32,
) -> Result<cudarc::driver::CudaSlice<f32>> {
    if !(norm_constant.is_finite() && norm_constant > 0.0) {
        return Err(Error::InvalidProblem {
            reason: ProblemRule::NormConstant {
                value: Scalar(norm_constant),
            },
        });
    }
    Ok(stream.clone_htod(&[norm_constant])?)
}

/// Every rule of [`Rules`] with an input that breaks it, on catalog specs (no GPU, no built
/// kernel needed).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::plans::problem::MatrixLayout;
    use cutlass_gemm_catalog::{catalog, Arch};

    fn find(pred: impl Fn(&KernelSpec) -> bool) -> KernelSpec {
        catalog::all()
            .into_iter()
            .find(|s| pred(s))
            .expect("the catalog has such a kernel")
    }

    /// MX e2m1 x e2m1 -> f16, TN, SM100.
    fn mx_tn() -> KernelSpec {
        find(|s| {
            s.arch == Arch::Sm100a
                && s.block_scale.is_some_and(|b| b.vec == 32)
                && s.output_scale.is_none()
                && !s.op_class.is_sparse()
                && (s.a.ty, s.b.ty, s.d.ty) == (DataType::E2M1, DataType::E2M1, DataType::F16)
                && s.layout_name() == "TN"
        })
    }

    fn problem(m: usize, n: usize, k: usize) -> GemmProblem {
        GemmProblem::new(m, n, k)
    }

    fn rules(spec: KernelSpec, p: GemmProblem, family: ScaleFamily) -> Rules {
        Rules {
            problem: p,
            spec,
            family,
            nvfp4_out: spec.output_scale.is_some(),
        }
    }

    /// A well-formed operand of `rows x k` for the spec's type `ty` at aligned addresses.
    fn operand(family: ScaleFamily, rows: usize, k: usize, ty: DataType, major: Major) -> Parts {
        let vec = family.scale_type().map_or(0, |(_, v)| v as usize);
        let layout = ScaleFactorLayout::new(rows, k, 1, vec);
        Parts {
            family,
            rows,
            k,
            major,
            data: (1 << 20, (rows * k * ty.bits() as usize).div_ceil(8)),
            scales: family
                .scale_type()
                .map(|_| (1 << 30, layout.size(), layout)),
        }
    }

    fn ok_args(r: &Rules) -> (Parts, Parts) {
        let p = &r.problem;
        (
            operand(
                r.family,
                p.m,
                p.k,
                r.spec.a.ty,
                Major::of(OperandName::A, p.a.layout),
            ),
            operand(
                r.family,
                p.n,
                p.k,
                r.spec.b.ty,
                Major::of(OperandName::B, p.b.layout),
            ),
        )
    }

    const D: (u64, usize) = (1 << 40, 512 * 384);

    #[test]
    fn well_formed_arguments_pass() {
        let r = rules(mx_tn(), problem(512, 384, 1024), ScaleFamily::Mx);
        r.check_alignment().unwrap();
        let (a, b) = ok_args(&r);
        let args = r.args(&a, &b, None, D).unwrap();
        assert_eq!((args.lda, args.ldb, args.ldd), (1024, 1024, 384));
        assert_eq!((args.sfa, args.sfb, args.c), (1 << 30, 1 << 30, D.0));
    }

    #[test]
    fn problem_rules() {
        let (row, col) = (MatrixLayout::row_major(), MatrixLayout::col_major());
        // A column-major D (and with it C): the narrow rule names C first.
        for p in [
            problem(8, 8, 64).with_d(col),
            problem(8, 8, 64).with_d(col).with_c(col),
        ] {
            assert!(matches!(
                check_problem(&p).unwrap_err(),
                Error::UnsupportedLayout {
                    operand: OperandName::C,
                    rule: LayoutRule::NarrowRowMajorOutput,
                }
            ));
        }
        // C in another layout than D: GemmProblem::check's rule comes first.
        assert!(matches!(
            check_problem(&problem(8, 8, 64).with_d(col).with_c(row)).unwrap_err(),
            Error::InvalidProblem {
                reason: ProblemRule::CLayoutDiffersFromD,
            }
        ));
        for p in [
            problem(8, 8, 64).with_batch(2),
            problem(8, 8, 64).with_a(MatrixLayout::row_major().with_ld(128)),
            problem(8, 8, 64).with_b(MatrixLayout::col_major().with_batch_stride(4096)),
        ] {
            assert!(matches!(
                check_problem(&p).unwrap_err(),
                Error::InvalidProblem {
                    reason: ProblemRule::NarrowNotPacked,
                }
            ));
        }
        check_problem(&problem(8, 8, 64)).unwrap();
    }

    #[test]
    fn kernel_selection_rules() {
        use DataType as T;
        let (rm, cm) = (Layout::RowMajor, Layout::ColumnMajor);
        let s = mx_tn();
        let types = (T::E2M1, T::E2M1, T::F16);
        serves(&s, ScaleFamily::Mx, false, types, (rm, cm)).unwrap();
        // Scale family, plain vs block-scaled, output kind, types, layouts.
        let mx_scales = (T::UE8M0, 32);
        assert_eq!(
            serves(&s, ScaleFamily::Nvfp4, false, types, (rm, cm)),
            Err(KernelRule::BlockScales {
                kernel: mx_scales,
                required: ScaleFamily::Nvfp4,
            })
        );
        assert_eq!(
            serves(&s, ScaleFamily::Plain, false, types, (rm, cm)),
            Err(KernelRule::BlockScales {
                kernel: mx_scales,
                required: ScaleFamily::Plain,
            })
        );
        assert_eq!(
            serves(&s, ScaleFamily::Mx, true, types, (rm, cm)),
            Err(KernelRule::NotNvfp4Output)
        );
        assert_eq!(
            serves(
                &s,
                ScaleFamily::Mx,
                false,
                (T::E2M1, T::E2M1, T::Bf16),
                (rm, cm)
            ),
            Err(KernelRule::Operand {
                operand: OperandName::C,
                kernel: (s.c.ty, s.c.layout),
                required: (T::Bf16, s.c.layout),
            })
        );
        assert_eq!(
            serves(
                &s,
                ScaleFamily::Mx,
                false,
                (T::E4M3, T::E2M1, T::F16),
                (rm, cm)
            ),
            Err(KernelRule::Operand {
                operand: OperandName::A,
                kernel: (T::E2M1, rm),
                required: (T::E4M3, rm),
            })
        );
        assert_eq!(
            serves(&s, ScaleFamily::Mx, false, types, (cm, rm)),
            Err(KernelRule::Operand {
                operand: OperandName::A,
                kernel: (T::E2M1, rm),
                required: (T::E2M1, cm),
            })
        );
        // A plain f8f6f4 kernel serves plain plans only; sparse kernels serve none.
        let plain = find(|s| {
            s.arch == Arch::Sm100a
                && s.block_scale.is_none()
                && !s.op_class.is_sparse()
                && (s.a.ty, s.b.ty) == (T::E2M1, T::E4M3)
        });
        let pt = (plain.a.ty, plain.b.ty, plain.d.ty);
        let pl = (plain.a.layout, plain.b.layout);
        serves(&plain, ScaleFamily::Plain, false, pt, pl).unwrap();
        assert_eq!(
            serves(&plain, ScaleFamily::Mx, false, pt, pl),
            Err(KernelRule::NoBlockScales)
        );
        let sparse = find(|s| s.op_class.is_sparse() && s.block_scale.is_some());
        let st = (sparse.a.ty, sparse.b.ty, sparse.d.ty);
        let sl = (sparse.a.layout, sparse.b.layout);
        assert_eq!(
            serves(&sparse, ScaleFamily::Mx, false, st, sl),
            Err(KernelRule::Sparse)
        );
        assert_eq!(
            serves(&sparse, ScaleFamily::Nvfp4, false, st, sl),
            Err(KernelRule::Sparse)
        );
        // An NVFP4-output kernel serves only NVFP4-output plans.
        let out = catalog::sm100_block_scaled_outputs()[0];
        let ot = (out.a.ty, out.b.ty, out.c.ty);
        let ol = (out.a.layout, out.b.layout);
        serves(&out, ScaleFamily::Mx, true, ot, ol).unwrap();
        assert_eq!(
            serves(&out, ScaleFamily::Mx, false, ot, ol),
            Err(KernelRule::Nvfp4Output)
        );
    }

    #[test]
    fn alignment_rules_follow_the_contiguous_extent() {
        let s = mx_tn();
        let align = s.a.align as usize;
        assert!(align > 1);
        let r = rules(s, problem(512, 384, 1024 + align / 2), ScaleFamily::Mx);
        match r.check_alignment().unwrap_err() {
            Error::Misaligned {
                operand: OperandName::A,
                what: Quantity::Extent(Extent::K),
                value,
                required,
            } => assert_eq!((value, required), ((1024 + align / 2) as u64, align as u64)),
            e => panic!("unexpected {e:?}"),
        }
        let r = rules(s, problem(512, 384 + 4, 1024), ScaleFamily::Mx);
        assert!(matches!(
            r.check_alignment().unwrap_err(),
            Error::Misaligned {
                operand: OperandName::D,
                what: Quantity::Extent(Extent::N),
                value: 388,
                ..
            }
        ));
        // NT (the walkthrough): A's contiguous extent is m, B's is n.
        let nt = catalog::sm100_block_scaled_outputs()[0];
        let p = problem(512, 384, 1024)
            .with_a(MatrixLayout::col_major())
            .with_b(MatrixLayout::row_major());
        rules(nt, p, ScaleFamily::Mx).check_alignment().unwrap();
        let mut bad = p;
        bad.m = 512 + 32;
        assert!(matches!(
            rules(nt, bad, ScaleFamily::Mx)
                .check_alignment()
                .unwrap_err(),
            Error::Misaligned {
                operand: OperandName::A,
                what: Quantity::Extent(Extent::M),
                value: 544,
                required: 128,
            }
        ));
        let mut bad = p;
        bad.n = 384 + 32;
        assert!(matches!(
            rules(nt, bad, ScaleFamily::Mx)
                .check_alignment()
                .unwrap_err(),
            Error::Misaligned {
                operand: OperandName::B,
                what: Quantity::Extent(Extent::N),
                value: 416,
                ..
            }
        ));
        // MN-major operands: the leading dimensions are m and n.
        let r = rules(nt, p, ScaleFamily::Mx);
        let (a, b) = ok_args(&r);
        let norm = 1 << 44;
        let d = operand(ScaleFamily::Nvfp4, 512, 384, DataType::E2M1, Major::K);
        let args = r.nvfp4_out_args(&a, &b, None, &d, norm).unwrap();
        assert_eq!((args.lda, args.ldb), (512, 384));
        assert_eq!((args.sfd, args.norm_constant), (d.scales.unwrap().0, norm));
    }

    #[test]
    fn operand_rules() {
        let r = rules(mx_tn(), problem(512, 384, 1024), ScaleFamily::Mx);
        let (a, b) = ok_args(&r);
        let check = |a: Parts, b: Parts| r.args(&a, &b, None, D).unwrap_err();
        // Scale family.
        let nv = operand(ScaleFamily::Nvfp4, 512, 1024, DataType::E2M1, Major::K);
        assert!(matches!(
            check(nv, b),
            Error::ScaleMismatch {
                operand: OperandName::ScalesA,
                rule: ScaleRule::Family {
                    required: ScaleFamily::Mx,
                    found: ScaleFamily::Nvfp4,
                },
            }
        ));
        let plain = operand(ScaleFamily::Plain, 384, 1024, DataType::E2M1, Major::K);
        assert!(matches!(
            check(a, plain),
            Error::ScaleMismatch {
                operand: OperandName::ScalesB,
                rule: ScaleRule::Family {
                    required: ScaleFamily::Mx,
                    found: ScaleFamily::Plain,
                },
            }
        ));
        // Shape.
        let short = operand(ScaleFamily::Mx, 256, 1024, DataType::E2M1, Major::K);
        assert!(matches!(
            check(a, short),
            Error::InvalidProblem {
                reason: ProblemRule::TensorShape {
                    operand: OperandName::B,
                    found: (256, 1024),
                    required: (384, 1024),
                },
            }
        ));
        // Major.
        let mn = Parts {
            major: Major::MN,
            ..a
        };
        assert!(matches!(
            check(mn, b),
            Error::UnsupportedLayout {
                operand: OperandName::A,
                rule: LayoutRule::TensorMajor {
                    required: Major::K,
                    found: Major::MN,
                },
            }
        ));
        // Data length and base alignment (32 bytes for sub-byte data).
        let t = Parts {
            data: (a.data.0, a.data.1 - 1),
            ..a
        };
        assert!(matches!(
            check(t, b),
            Error::BufferTooSmall {
                operand: OperandName::A,
                ..
            }
        ));
        let t = Parts {
            data: (b.data.0 + 16, b.data.1),
            ..b
        };
        assert!(matches!(
            check(a, t),
            Error::Misaligned {
                operand: OperandName::B,
                what: Quantity::Pointer,
                required: 32,
                ..
            }
        ));
        // Scale layout, length and alignment.
        let (ps, len, layout) = a.scales.unwrap();
        let per_16 = ScaleFactorLayout::new(512, 1024, 1, 16);
        let t = Parts {
            scales: Some((ps, len, per_16)),
            ..a
        };
        match check(t, b) {
            Error::ScaleMismatch {
                operand: OperandName::ScalesA,
                rule: ScaleRule::Layout { required, found },
            } => assert_eq!((required, found), (layout, per_16)),
            e => panic!("unexpected {e:?}"),
        }
        let t = Parts {
            scales: Some((ps, len - 1, layout)),
            ..a
        };
        assert!(matches!(
            check(t, b),
            Error::BufferTooSmall {
                operand: OperandName::ScalesA,
                ..
            }
        ));
        let (ps, len, layout) = b.scales.unwrap();
        let t = Parts {
            scales: Some((ps + 8, len, layout)),
            ..b
        };
        match check(a, t) {
            Error::Misaligned {
                operand: OperandName::ScalesB,
                what: Quantity::Pointer,
                value,
                required: 16,
            } => assert_eq!(value, ps + 8),
            e => panic!("unexpected {e:?}"),
        }
        // 8-bit data needs 16 bytes.
        let e4m3 = find(|s| {
            s.arch == Arch::Sm100a
                && s.block_scale.is_some_and(|b| b.vec == 32)
                && !s.op_class.is_sparse()
                && s.output_scale.is_none()
                && (s.a.ty, s.b.ty) == (DataType::E4M3, DataType::E4M3)
                && s.layout_name() == "TN"
        });
        let r8 = rules(e4m3, problem(512, 384, 1024), ScaleFamily::Mx);
        let (a8, b8) = ok_args(&r8);
        let t = Parts {
            data: (a8.data.0 + 16, a8.data.1),
            ..a8
        };
        r8.args(&t, &b8, None, D).unwrap();
        let t = Parts {
            data: (a8.data.0 + 8, a8.data.1),
            ..a8
        };
        assert!(matches!(
            r8.args(&t, &b8, None, D).unwrap_err(),
            Error::Misaligned {
                operand: OperandName::A,
                what: Quantity::Pointer,
                required: 16,
                ..
            }
        ));
    }

    #[test]
    fn output_rules() {
        let r = rules(
            mx_tn(),
            problem(512, 384, 1024).with_scalars(1.0, 0.5),
            ScaleFamily::Mx,
        );
        let (a, b) = ok_args(&r);
        let c = (1 << 41, 512 * 384);
        r.args(&a, &b, Some(c), D).unwrap();
        assert!(matches!(
            r.args(&a, &b, None, D).unwrap_err(),
            Error::InvalidProblem {
                reason: ProblemRule::BetaWithoutC { beta: Scalar(0.5) },
            }
        ));
        assert!(matches!(
            r.args(&a, &b, Some((c.0, c.1 - 1)), D).unwrap_err(),
            Error::BufferTooSmall {
                operand: OperandName::C,
                ..
            }
        ));
        assert!(matches!(
            r.args(&a, &b, Some((c.0 + 2, c.1)), D).unwrap_err(),
            Error::Misaligned {
                operand: OperandName::C,
                what: Quantity::Pointer,
                required: 16,
                ..
            }
        ));
        assert!(matches!(
            r.args(&a, &b, Some(c), (D.0, D.1 - 1)).unwrap_err(),
            Error::BufferTooSmall {
                operand: OperandName::D,
                ..
            }
        ));
        assert!(matches!(
            r.args(&a, &b, Some(c), (D.0 + 4, D.1)).unwrap_err(),
            Error::Misaligned {
                operand: OperandName::D,
                what: Quantity::Pointer,
                required: 16,
                ..
            }
        ));
        // A plain-D plan refuses an NVFP4 D and the other way round.
        let d = operand(ScaleFamily::Nvfp4, 512, 384, DataType::E2M1, Major::K);
        assert!(matches!(
            r.nvfp4_out_args(&a, &b, Some(c), &d, 0).unwrap_err(),
            Error::ScaleMismatch {
                operand: OperandName::D,
                rule: ScaleRule::OutputIsPlain,
            }
        ));
        let out = catalog::sm100_block_scaled_outputs()[1]; // NVFP4 in, NVFP4 out, TN
        let ro = rules(out, problem(512, 384, 1024), ScaleFamily::Nvfp4);
        let (a, b) = ok_args(&ro);
        ro.nvfp4_out_args(&a, &b, None, &d, 256).unwrap();
        assert!(matches!(
            ro.args(&a, &b, None, D).unwrap_err(),
            Error::ScaleMismatch {
                operand: OperandName::D,
                rule: ScaleRule::OutputIsNvfp4,
            }
        ));
        let bad = |d: Parts| ro.nvfp4_out_args(&a, &b, None, &d, 256).unwrap_err();
        // D's family, shape and scale layout, major, lengths, pointers.
        let mx_d = operand(ScaleFamily::Mx, 512, 384, DataType::E2M1, Major::K);
        assert!(matches!(
            bad(mx_d),
            Error::ScaleMismatch {
                operand: OperandName::D,
                rule: ScaleRule::OutputNotNvfp4 {
                    found: ScaleFamily::Mx
                },
            }
        ));
        let wrong = operand(ScaleFamily::Nvfp4, 512, 256, DataType::E2M1, Major::K);
        match bad(wrong) {
            Error::ScaleMismatch {
                operand: OperandName::D,
                rule: ScaleRule::OutputLayout { required, found },
            } => assert_eq!(
                (required, found),
                (
                    ScaleFactorLayout::new(512, 384, 1, 16),
                    ScaleFactorLayout::new(512, 256, 1, 16)
                )
            ),
            e => panic!("unexpected {e:?}"),
        }
        assert!(matches!(
            bad(Parts {
                major: Major::MN,
                ..d
            }),
            Error::UnsupportedLayout {
                operand: OperandName::D,
                rule: LayoutRule::Nvfp4OutputRowMajor,
            }
        ));
        assert!(matches!(
            bad(Parts {
                data: (d.data.0, d.data.1 - 1),
                ..d
            }),
            Error::BufferTooSmall {
                operand: OperandName::D,
                ..
            }
        ));
        let (ps, len, layout) = d.scales.unwrap();
        assert!(matches!(
            bad(Parts {
                scales: Some((ps, len - 1, layout)),
                ..d
            }),
            Error::BufferTooSmall {
                operand: OperandName::D,
                ..
            }
        ));
        assert!(matches!(
            bad(Parts {
                scales: Some((ps + 4, len, layout)),
                ..d
            }),
            Error::Misaligned {
                operand: OperandName::D,
                what: Quantity::ScaleFactorPointer,
                required: 16,
                ..
            }
        ));
        assert!(matches!(
            bad(Parts {
                data: (d.data.0 + 16, d.data.1),
                ..d
            }),
            Error::Misaligned {
                operand: OperandName::D,
                what: Quantity::Pointer,
                required: 32,
                ..
            }
        ));
    }

    /// An SM100 MX kernel with the fused epilogue (a bias of D's type).
    fn fused_mx() -> KernelSpec {
        find(|s| {
            s.arch == Arch::Sm100a
                && s.fusion.is_fused()
                && s.block_scale.is_some_and(|b| b.vec == 32)
                && s.output_scale.is_none()
                && !s.op_class.is_sparse()
                && s.fusion.bias_type() == Some(s.d.ty)
        })
    }

    #[test]
    fn fused_epilogue_selection_rules() {
        use crate::plans::epilogue::Activation;
        let fused = fused_mx();
        let plain = KernelSpec {
            fusion: cutlass_gemm_catalog::Fusion::LinearCombination,
            ..fused
        };
        let td = fused.d.ty;
        let e = Epilogue::bias().with_activation(Activation::GeluTanh);
        // A fused plan takes the fused kernel only.
        fusion_rule(&fused, &e, false, td).unwrap();
        fusion_rule(&fused, &Epilogue::rowwise(), false, td).unwrap();
        assert_eq!(
            fusion_rule(&plain, &e, false, td),
            Err(KernelRule::NoFusedEpilogue)
        );
        // A plain plan leaves the fused twin to fused plans, unless it is named.
        fusion_rule(&plain, &Epilogue::NONE, false, td).unwrap();
        assert_eq!(
            fusion_rule(&fused, &Epilogue::NONE, false, td),
            Err(KernelRule::FusedEpilogue)
        );
        fusion_rule(&fused, &Epilogue::NONE, true, td).unwrap();
        // The bias is of D's type; an epilogue without a bias does not care.
        let other = if td == DataType::F16 {
            DataType::Bf16
        } else {
            DataType::F16
        };
        assert_eq!(
            fusion_rule(&fused, &e, false, other),
            Err(KernelRule::BiasType {
                kernel: td,
                required: other,
            })
        );
        fusion_rule(
            &fused,
            &Epilogue::NONE.with_activation(Activation::Silu),
            false,
            other,
        )
        .unwrap();
    }

    #[test]
    fn fused_epilogue_vectors_are_checked_and_passed() {
        use crate::plans::epilogue::{Activation, BiasAxis};
        let (m, n, k) = (512, 384, 1024);
        let r = rules(fused_mx(), problem(m, n, k), ScaleFamily::Mx);
        let (a, b) = ok_args(&r);
        let args = || r.args(&a, &b, None, D).unwrap();
        let (bias, rows, cols) = (1u64 << 34, 1u64 << 35, 1u64 << 36);
        let all = Epilogue::rowwise()
            .with_bias(BiasAxis::PerColumn)
            .with_activation(Activation::Silu);
        let vectors = [Some((bias, n)), Some((rows, m)), Some((cols, n))];
        let mut x = args();
        r.epilogue_args(&all, &mut x, vectors, D).unwrap();
        assert_eq!(
            (x.row_scale, x.col_scale, x.row_bias, x.col_bias),
            (rows, cols, 0, bias)
        );
        assert_eq!(x.activation, Activation::Silu.code());
        // A bias per row is the kernel's row bias, m values.
        let per_row = Epilogue::NONE.with_bias(BiasAxis::PerRow);
        let mut x = args();
        r.epilogue_args(&per_row, &mut x, [Some((bias, m)), None, None], D)
            .unwrap();
        assert_eq!((x.row_bias, x.col_bias, x.activation), (bias, 0, 0));
        // A plain plan passes no vector.
        let mut x = args();
        r.epilogue_args(&Epilogue::NONE, &mut x, [None; 3], D)
            .unwrap();
        assert_eq!(
            (x.row_scale, x.col_scale, x.row_bias, x.col_bias),
            (0, 0, 0, 0)
        );
        let bad = |e: &Epilogue, v: [Option<(u64, usize)>; 3]| {
            r.epilogue_args(e, &mut args(), v, D).unwrap_err()
        };
        assert!(matches!(
            bad(&all, [None, Some((rows, m)), Some((cols, n))]),
            Error::InvalidProblem {
                reason: ProblemRule::EpilogueOperandMissing {
                    operand: OperandName::Bias
                }
            }
        ));
        assert!(matches!(
            bad(&Epilogue::NONE, [Some((bias, n)), None, None]),
            Error::InvalidProblem {
                reason: ProblemRule::EpilogueOperandNotTaken {
                    operand: OperandName::Bias
                }
            }
        ));
        assert!(matches!(
            bad(
                &all,
                [Some((bias, n)), Some((rows, m - 1)), Some((cols, n))]
            ),
            Error::BufferTooSmall {
                operand: OperandName::RowScales,
                ..
            }
        ));
        assert!(matches!(
            bad(
                &all,
                [Some((bias, n)), Some((rows, m)), Some((cols + 4, n))]
            ),
            Error::Misaligned {
                operand: OperandName::ColScales,
                what: Quantity::Pointer,
                ..
            }
        ));
        // A vector inside D.
        assert!(matches!(
            bad(
                &all,
                [Some((D.0 + 1024, n)), Some((rows, m)), Some((cols, n))]
            ),
            Error::Aliasing {
                output: OperandName::D,
                input: OperandName::Bias,
            }
        ));
    }
}
