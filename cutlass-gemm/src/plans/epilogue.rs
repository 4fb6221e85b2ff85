//! Fused epilogues: bias, activation, and per-row and per-column scales inside the GEMM.
//!
//! A model's linear layer is `act(x·Wᵀ + bias)`, and an FP8 checkpoint scales per token (rows of
//! A) and per output channel (columns of B). The kernels with the fused epilogue (the default
//! build's main SM90 tiles; the `sm100` and `sm120` families' block-scaled kernels) compute all of
//! it in their epilogue, in f32, before D is rounded:
//!
//! ```text
//! D = act(alpha · row_scale[i] · col_scale[j] · (A·B)[i][j] + beta · C[i][j] + bias)
//! ```
//!
//! with `bias` one value per column of D (`bias[j]`, a Linear layer's) or per row (`bias[i]`), of
//! D's type or f32 ([`Epilogue::with_f32_bias`]: the fused kernels where the catalog's f32-bias
//! kernels are built, and in any build the 16-bit decode GEMV, or the separate pass after the plain
//! kernel, which rounds D before it adds the bias).
//! [`Epilogue`] says which of these a plan has ([`crate::Gemm::with_epilogue`]); the vectors come
//! with each launch ([`EpilogueOperands`], [`crate::Gemm::run_fused`]), checked like A and B.
//! Every part is optional, and one kernel serves every combination (the catalog's
//! [`cutlass_gemm_catalog::Fusion::ScaleBiasActivation`]). A plan with an epilogue chooses among
//! these kernels; a plain plan among their twins with CUTLASS's own epilogue, and runs on a fused
//! kernel only when the caller names it. [`crate::BlockwiseGemm`], [`crate::BlockScaledGemm`],
//! [`crate::GatedGemm`] and [`crate::WeightOnlyGemm`] take the same [`Epilogue`].

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop};

use crate::error::{
    require_device, require_len, AuxRule, Error, KernelRule, OperandName, ProblemRule, Quantity,
    Result,
};
use crate::formats::element::Element;
use crate::plans::gemm::POINTER_ALIGNMENT;

/// An activation applied to the epilogue's f32 value before D is rounded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Activation {
    /// None.
    #[default]
    Identity,
    /// `max(x, 0)`; NaN stays NaN (as with PyTorch's `relu`).
    Relu,
    /// GELU's tanh approximation, `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))` (PyTorch's
    /// `approximate="tanh"`), with the GPU's hardware tanh (`tanh.approx.f32`, within 2^-10.9).
    GeluTanh,
    /// GELU, `0.5·x·(1 + erf(x/√2))` (PyTorch's default).
    GeluErf,
    /// SiLU (swish), `x·sigmoid(x)`.
    Silu,
}

impl Activation {
    /// Every activation.
    pub const ALL: [Activation; 5] = [
        Activation::Identity,
        Activation::Relu,
        Activation::GeluTanh,
        Activation::GeluErf,
        Activation::Silu,
    ];

    /// The C ABI's code (`CUTLASS_RS_ACTIVATION_*`).
    pub fn code(self) -> i32 {
        match self {
            Activation::Identity => cutlass_gemm_sys::CUTLASS_RS_ACTIVATION_IDENTITY,
            Activation::Relu => cutlass_gemm_sys::CUTLASS_RS_ACTIVATION_RELU,
            Activation::GeluTanh => cutlass_gemm_sys::CUTLASS_RS_ACTIVATION_GELU_TANH,
            Activation::GeluErf => cutlass_gemm_sys::CUTLASS_RS_ACTIVATION_GELU_ERF,
            Activation::Silu => cutlass_gemm_sys::CUTLASS_RS_ACTIVATION_SILU,
        }
    }

    /// The exact function, in f64 (the host reference's).
    pub fn apply(self, x: f64) -> f64 {
        match self {
            Activation::Identity => x,
            // Not f64::max, which would turn NaN into 0.
            Activation::Relu => {
                if x < 0.0 {
                    0.0
                } else {
                    x
                }
            }
            Activation::GeluTanh => {
                let c = (2.0 / std::f64::consts::PI).sqrt();
                0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
            }
            Activation::GeluErf => 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2)),
            Activation::Silu => x / (1.0 + (-x).exp()),
        }
    }

    /// A bound on `|act(x) - act(y)| / |x - y|` (ReLU 1, GELU 1.129, SiLU 1.0998): how much an
    /// error of the value before the activation can grow.
    pub fn lipschitz(self) -> f64 {
        match self {
            Activation::Identity | Activation::Relu => 1.0,
            Activation::GeluTanh | Activation::GeluErf => 1.13,
            Activation::Silu => 1.1,
        }
    }

    /// A bound on the GPU's own error of the activation at `x`, relative to `|x|`: the hardware
    /// tanh of [`Activation::GeluTanh`] is within 2^-10.9 absolute, which the factor `0.5·x`
    /// scales; GELU uses f32 `erff`, and SiLU the approximate `__expf` and `__fdividef` (every
    /// kernel computes the activations by the same formulas: a few ulps of f32).
    pub fn device_error(self) -> f64 {
        match self {
            Activation::Identity | Activation::Relu => 0.0,
            Activation::GeluTanh => 0.5 * 2f64.powf(-10.9),
            Activation::GeluErf | Activation::Silu => 8.0 * f32::EPSILON as f64,
        }
    }

    /// The name `candle` and PyTorch give it.
    pub fn name(self) -> &'static str {
        match self {
            Activation::Identity => "identity",
            Activation::Relu => "relu",
            Activation::GeluTanh => "gelu-tanh",
            Activation::GeluErf => "gelu-erf",
            Activation::Silu => "silu",
        }
    }
}

impl std::fmt::Display for Activation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which extent of D a bias runs along.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BiasAxis {
    /// One value per column of D, `n` values: a Linear layer's bias (`y = x·Wᵀ + b`).
    PerColumn,
    /// One value per row of D, `m` values (`y = W·x + b` with the weights as A).
    PerRow,
}

/// The element type of a bias vector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BiasElement {
    /// D's element type (a bf16 bias for a bf16 D): what a model's checkpoint holds beside bf16
    /// or f16 weights. Given as [`EpilogueOperands::bias`].
    #[default]
    Output,
    /// f32, whatever D's type, read as f32: in a kernel or the decode GEMV added to the f32 value
    /// before D is rounded (a separate pass, [`crate::Gemm::epilogue_is_separate`], adds it to D
    /// as the plain kernel rounded it). Given as [`EpilogueOperands::bias_f32`].
    F32,
}

/// What a plan's epilogue computes beyond `alpha·A·B + beta·C`: see the [module](self) docs.
/// The default is nothing (a plain GEMM).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Epilogue {
    /// A bias, and the extent it runs along.
    pub bias: Option<BiasAxis>,
    /// The bias's element type (D's unless [`Epilogue::with_f32_bias`]).
    pub bias_element: BiasElement,
    /// The activation.
    pub activation: Activation,
    /// f32 scales per row of D (`m` values: per token, FP8's rowwise recipe).
    pub row_scales: bool,
    /// f32 scales per column of D (`n` values: per output channel).
    pub col_scales: bool,
    /// Also write the pre-activation value `alpha·A·B + beta·C + bias` to an auxiliary output of
    /// D's type and geometry ([`Epilogue::with_aux_output`]).
    pub aux_output: bool,
}

impl Epilogue {
    /// No fusion.
    pub const NONE: Epilogue = Epilogue {
        bias: None,
        bias_element: BiasElement::Output,
        activation: Activation::Identity,
        row_scales: false,
        col_scales: false,
        aux_output: false,
    };

    /// A bias per column of D (a Linear layer's).
    pub fn bias() -> Epilogue {
        Epilogue {
            bias: Some(BiasAxis::PerColumn),
            ..Epilogue::NONE
        }
    }

    /// This epilogue with a bias along `axis`.
    pub fn with_bias(self, axis: BiasAxis) -> Epilogue {
        Epilogue {
            bias: Some(axis),
            ..self
        }
    }

    /// This epilogue with its bias in f32 ([`BiasElement::F32`]; a bias per column unless one was
    /// set), as cuBLASLt's `CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE` of `CUDA_R_32F`. A fused kernel
    /// with an f32 bias (not in the default set) or the 16-bit decode GEMV adds it before D is
    /// rounded; without such a kernel, a bf16/f16 plan with a bias per column and a row-major D
    /// of one batch runs the separate pass ([`crate::Gemm::with_epilogue`];
    /// [`crate::Gemm::with_epilogue_in_kernel`] refuses that), and other plans get
    /// [`crate::Error::NoKernel`] naming a kernel to add.
    pub fn with_f32_bias(self) -> Epilogue {
        Epilogue {
            bias: Some(self.bias.unwrap_or(BiasAxis::PerColumn)),
            bias_element: BiasElement::F32,
            ..self
        }
    }

    /// The bias's element type for a D of type `td`, if the epilogue has a bias.
    pub fn bias_type(
        &self,
        td: cutlass_gemm_catalog::DataType,
    ) -> Option<cutlass_gemm_catalog::DataType> {
        self.bias.map(|_| match self.bias_element {
            BiasElement::Output => td,
            BiasElement::F32 => cutlass_gemm_catalog::DataType::F32,
        })
    }

    /// Bytes of one bias element for a D of `d_size` bytes an element.
    pub(crate) fn bias_size(&self, d_size: usize) -> usize {
        match self.bias_element {
            BiasElement::Output => d_size,
            BiasElement::F32 => 4,
        }
    }

    /// This epilogue with an activation.
    pub fn with_activation(self, activation: Activation) -> Epilogue {
        Epilogue { activation, ..self }
    }

    /// This epilogue also writing its pre-activation value `Z = alpha·A·B + beta·C + bias` (f32,
    /// rounded to D's type) to an auxiliary output with D's layout, leading dimension and batch
    /// stride, as cuBLASLt's `GELU_AUX_BIAS` does for the activation's backward pass; D is
    /// `act(Z)`. For plain bf16 and f16 [`crate::Gemm`] plans with a bias per column (or none)
    /// and any activation, no scales; launched with [`crate::Gemm::run_with_aux`]. The kernels
    /// are the catalog's [`cutlass_gemm_catalog::Fusion::BiasActivationAux`] entries (SM90; bf16
    /// in the default build, f16 through `CUTLASS_RS_KERNELS`).
    pub fn with_aux_output(self) -> Epilogue {
        Epilogue {
            aux_output: true,
            ..self
        }
    }

    /// FP8's rowwise recipe: f32 scales per row of D (A's, per token) and per column (B's, per
    /// output channel).
    pub fn rowwise() -> Epilogue {
        Epilogue {
            row_scales: true,
            col_scales: true,
            ..Epilogue::NONE
        }
    }

    /// Whether this is a plain GEMM's epilogue.
    pub fn is_none(&self) -> bool {
        // (The bias's element type means nothing without a bias.)
        Epilogue {
            bias_element: BiasElement::Output,
            ..*self
        } == Epilogue::NONE
    }

    /// A short description, e.g. `bias(col)+gelu-tanh`, `bias(col,f32)` or `row-scales+col-scales`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.row_scales {
            parts.push("row-scales".to_string());
        }
        if self.col_scales {
            parts.push("col-scales".to_string());
        }
        let f32 = if self.bias_element == BiasElement::F32 {
            ",f32"
        } else {
            ""
        };
        match self.bias {
            Some(BiasAxis::PerColumn) => parts.push(format!("bias(col{f32})")),
            Some(BiasAxis::PerRow) => parts.push(format!("bias(row{f32})")),
            None => {}
        }
        if self.activation != Activation::Identity {
            parts.push(self.activation.name().into());
        }
        if self.aux_output {
            parts.push("aux".into());
        }
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join("+")
        }
    }
}

/// The device vectors of a fused epilogue for one launch: exactly those its [`Epilogue`] names.
/// Lengths: the bias `n` (per column) or `m` (per row), the row scales `m`, the column scales `n`;
/// each 16-byte aligned. The bias is given in one of two fields, by its element type
/// ([`Epilogue::bias_element`]).
pub struct EpilogueOperands<'a, TD> {
    /// The bias, of D's element type ([`BiasElement::Output`]).
    pub bias: Option<&'a dyn DevicePtr<TD>>,
    /// The bias in f32 ([`BiasElement::F32`], [`Epilogue::with_f32_bias`]).
    pub bias_f32: Option<&'a dyn DevicePtr<f32>>,
    /// The scales per row of D.
    pub row_scales: Option<&'a dyn DevicePtr<f32>>,
    /// The scales per column of D.
    pub col_scales: Option<&'a dyn DevicePtr<f32>>,
}

impl<TD> Default for EpilogueOperands<'_, TD> {
    fn default() -> Self {
        EpilogueOperands {
            bias: None,
            bias_f32: None,
            row_scales: None,
            col_scales: None,
        }
    }
}

impl<'a, TD> EpilogueOperands<'a, TD> {
    /// Only a bias.
    pub fn bias(bias: &'a dyn DevicePtr<TD>) -> Self {
        EpilogueOperands {
            bias: Some(bias),
            ..Default::default()
        }
    }

    /// Only a bias in f32 (for a plan with [`Epilogue::with_f32_bias`]).
    pub fn bias_f32(bias: &'a dyn DevicePtr<f32>) -> Self {
        EpilogueOperands {
            bias_f32: Some(bias),
            ..Default::default()
        }
    }

    /// The bias's element type, where a bias is given, for a D of type `td` (either field: with
    /// an f32 D both are f32).
    fn bias_given(
        &self,
        td: cutlass_gemm_catalog::DataType,
    ) -> [Option<cutlass_gemm_catalog::DataType>; 2] {
        [
            self.bias.map(|_| td),
            self.bias_f32.map(|_| cutlass_gemm_catalog::DataType::F32),
        ]
    }

    /// The rules checked before the vectors' addresses are taken, for a plan with epilogue `e` and
    /// a D of type `td` on the device of `ordinal`: at most one bias
    /// ([`ProblemRule::BiasGivenTwice`]), of the plan's element type
    /// ([`ProblemRule::BiasElement`]), and each vector on the plan's device.
    pub(crate) fn check(
        &self,
        e: &Epilogue,
        td: cutlass_gemm_catalog::DataType,
        ordinal: usize,
    ) -> Result<()> {
        if self.bias.is_some() && self.bias_f32.is_some() {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::BiasGivenTwice,
            });
        }
        if let Some(plan) = e.bias_type(td) {
            if let Some(given) = self
                .bias_given(td)
                .into_iter()
                .flatten()
                .find(|&g| g != plan)
            {
                return Err(Error::InvalidProblem {
                    reason: ProblemRule::BiasElement { plan, given },
                });
            }
        }
        if let Some(v) = self.bias {
            require_device(OperandName::Bias, v, ordinal)?;
        }
        if let Some(v) = self.bias_f32 {
            require_device(OperandName::Bias, v, ordinal)?;
        }
        if let Some(v) = self.row_scales {
            require_device(OperandName::RowScales, v, ordinal)?;
        }
        if let Some(v) = self.col_scales {
            require_device(OperandName::ColScales, v, ordinal)?;
        }
        Ok(())
    }

    /// `[bias, row scales, column scales]`: each given vector's device address and length in
    /// elements (the bias of either field: [`EpilogueOperands::check`] holds that at most one is
    /// given), and the guards that order the stream's work on them; keep the guards until the
    /// launch is queued.
    pub(crate) fn addresses<'s>(
        &'s self,
        stream: &'s CudaStream,
    ) -> ([Option<(u64, usize)>; 3], Vec<SyncOnDrop<'s>>) {
        let bias = match (self.bias, self.bias_f32) {
            (Some(v), _) => Some((v.device_ptr(stream), v.len())),
            (None, Some(v)) => Some((v.device_ptr(stream), v.len())),
            (None, None) => None,
        };
        let rows = self.row_scales.map(|v| (v.device_ptr(stream), v.len()));
        let cols = self.col_scales.map(|v| (v.device_ptr(stream), v.len()));
        let mut guards = Vec::with_capacity(3);
        let mut split = |v: Option<((u64, SyncOnDrop<'s>), usize)>| {
            v.map(|((p, guard), len)| {
                guards.push(guard);
                (p, len)
            })
        };
        let addresses = [split(bias), split(rows), split(cols)];
        (addresses, guards)
    }
}

/// `D = act(D + bias)` as a separate pass over a row-major `rows x cols` D (bf16 or f16, leading
/// dimension `ld`; the bias per column, `cols` values): the fused epilogue's unfused twin, for
/// comparisons (`cutlass-profiler profile --epilogue`) and for D written by something else. The
/// arithmetic is the fused epilogue's (f32, the same activations).
pub fn apply_unfused<TD: Element>(
    stream: &Arc<CudaStream>,
    d: &mut dyn DevicePtrMut<TD>,
    (rows, cols, ld): (usize, usize, usize),
    bias: Option<&dyn DevicePtr<TD>>,
    activation: Activation,
) -> Result<()> {
    let dtype = match TD::DATA_TYPE {
        cutlass_gemm_catalog::DataType::Bf16 => cutlass_gemm_sys::CUTLASS_RS_DTYPE_BF16,
        cutlass_gemm_catalog::DataType::F16 => cutlass_gemm_sys::CUTLASS_RS_DTYPE_F16,
        other => {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::UnfusedEpilogueType(other),
            })
        }
    };
    if ld < cols {
        return Err(Error::LeadingDimension {
            operand: OperandName::D,
            ld,
            min: cols,
            layout: cutlass_gemm_catalog::Layout::RowMajor,
            rows,
            cols,
        });
    }
    let need = row_major_reach::<TD>(OperandName::D, rows, ld, cols)?;
    require_len(OperandName::D, d.len(), need)?;
    if let Some(b) = bias {
        require_len(OperandName::Bias, b.len(), cols)?;
    }
    let device = stream.context().ordinal();
    require_device(OperandName::D, d, device)?;
    if let Some(b) = bias {
        require_device(OperandName::Bias, b, device)?;
    }
    crate::error::require_stream(stream, device)?;
    let (pd, _gd) = d.device_ptr_mut(stream);
    let bias = bias.map(|b| b.device_ptr(stream));
    // SAFETY: D holds the rows x cols elements at ld that were checked, the bias cols elements;
    // the guards keep the buffers' stream ordering until the launch is queued.
    let status = unsafe {
        cutlass_gemm_sys::cutlass_rs_bias_activation(
            pd as *mut _,
            rows as i64,
            cols as i64,
            ld as i64,
            bias.as_ref()
                .map_or(std::ptr::null(), |(p, _)| *p as *const _),
            0,
            activation.code(),
            dtype,
            stream.cu_stream() as *mut _,
        )
    };
    crate::ffi::check_status("cutlass_rs_bias_activation", status)
}

/// The elements a row-major `rows x width` matrix at leading dimension `ld` reaches, for the
/// separate passes' checks: [`ProblemRule::OperandReachOverflows`] naming `operand` where that
/// count, its bytes or the C ABI's `i64` extents overflow.
pub(crate) fn row_major_reach<T>(
    operand: OperandName,
    rows: usize,
    ld: usize,
    width: usize,
) -> Result<usize> {
    let overflow = || Error::InvalidProblem {
        reason: ProblemRule::OperandReachOverflows { operand },
    };
    if [rows, ld, width].iter().any(|&v| i64::try_from(v).is_err()) {
        return Err(overflow());
    }
    if rows == 0 {
        return Ok(0);
    }
    (rows - 1)
        .checked_mul(ld)
        .and_then(|x| x.checked_add(width))
        .filter(|x| x.checked_mul(std::mem::size_of::<T>()).is_some())
        .ok_or_else(overflow)
}

/// Whether a kernel's epilogue serves a plan's: a plan with a fused epilogue takes the kernels
/// with [`Fusion::ScaleBiasActivation`] (a bias, where it has one, of the plan's type:
/// [`Epilogue::bias_type`] for a D of type `td`); a plain plan
/// chooses among the kernels with CUTLASS's own epilogue (their fused twins are the same tiles,
/// slower where the epilogue dominates), and runs on a fused one only when the caller names it
/// (`named`: its vectors are then null, which is the plain GEMM). The kernels that write an
/// auxiliary output ([`Fusion::BiasActivationAux`]) serve the plans that ask for one, and only
/// those.
///
/// [`Fusion::ScaleBiasActivation`]: cutlass_gemm_catalog::Fusion::ScaleBiasActivation
/// [`Fusion::BiasActivationAux`]: cutlass_gemm_catalog::Fusion::BiasActivationAux
pub(crate) fn fusion_rule(
    kernel: &cutlass_gemm_catalog::KernelSpec,
    epilogue: &Epilogue,
    named: bool,
    td: cutlass_gemm_catalog::DataType,
) -> std::result::Result<(), KernelRule> {
    use cutlass_gemm_catalog::Fusion;
    // The auxiliary output: its kernels serve the plans that ask for it, and only those (named
    // or not: launched without Aux, they would have nowhere to write it).
    if kernel.fusion.has_aux() != epilogue.aux_output {
        return Err(KernelRule::AuxOutput {
            kernel: kernel.fusion.has_aux(),
        });
    }
    if epilogue.is_none() {
        return if !named && kernel.fusion.is_fused() {
            Err(KernelRule::FusedEpilogue)
        } else {
            Ok(())
        };
    }
    let required = epilogue.bias_type(td);
    match kernel.fusion {
        Fusion::ScaleBiasActivation { bias } | Fusion::BiasActivationAux { bias }
            if required.is_none_or(|r| r == bias) =>
        {
            Ok(())
        }
        Fusion::ScaleBiasActivation { bias } | Fusion::BiasActivationAux { bias } => {
            Err(KernelRule::BiasType {
                kernel: bias,
                required: required.unwrap_or(td),
            })
        }
        _ => Err(KernelRule::NoFusedEpilogue),
    }
}

/// The rule of the plans other than plain 16-bit [`crate::Gemm`]s: no auxiliary output
/// ([`AuxRule::Plan`]).
pub(crate) fn refuse_aux_output(e: &Epilogue) -> Result<()> {
    if e.aux_output {
        return Err(Error::InvalidProblem {
            reason: ProblemRule::AuxOutput {
                rule: AuxRule::Plan,
            },
        });
    }
    Ok(())
}

/// The epilogue's vectors in a kernel's arguments, for a kernel that computes D as the plan lays
/// it out (no operand swap): `[bias, row scales, column scales]` as device addresses (0: none).
pub(crate) fn vector_args(
    e: &Epilogue,
    args: &mut crate::ffi::RawArgs,
    [bias, rows, cols]: [u64; 3],
) {
    args.row_scale = rows;
    args.col_scale = cols;
    (args.row_bias, args.col_bias) = match e.bias {
        Some(BiasAxis::PerRow) => (bias, 0),
        _ => (0, bias),
    };
    args.activation = e.activation.code();
}

/// Checks a fused epilogue's vectors (bias, row scales, column scales: pointer and length) for a
/// D of `m x n` at `d` (address, bytes) against `e`: each it names is given, long enough, 16-byte
/// aligned and clear of D; none it does not name is given. `d_size` is D's element size (the
/// bias's unless it is f32). Typed errors naming the vector.
pub(crate) fn check_operands(
    e: &Epilogue,
    (m, n): (usize, usize),
    d_size: usize,
    vectors: [Option<(u64, usize)>; 3],
    d: (u64, u64),
) -> Result<()> {
    let wanted = [
        (
            OperandName::Bias,
            e.bias.map(|axis| match axis {
                BiasAxis::PerColumn => n,
                BiasAxis::PerRow => m,
            }),
            e.bias_size(d_size),
        ),
        (OperandName::RowScales, e.row_scales.then_some(m), 4),
        (OperandName::ColScales, e.col_scales.then_some(n), 4),
    ];
    for ((operand, need, size), given) in wanted.into_iter().zip(vectors) {
        match (need, given) {
            (None, None) => {}
            (Some(_), None) => {
                return Err(Error::InvalidProblem {
                    reason: ProblemRule::EpilogueOperandMissing { operand },
                })
            }
            (None, Some(_)) => {
                return Err(Error::InvalidProblem {
                    reason: ProblemRule::EpilogueOperandNotTaken { operand },
                })
            }
            (Some(need), Some((p, len))) => {
                require_len(operand, len, need)?;
                crate::error::require_aligned(operand, Quantity::Pointer, p, POINTER_ALIGNMENT)?;
                if crate::error::overlaps((p, (need * size) as u64), d) {
                    return Err(Error::Aliasing {
                        output: OperandName::D,
                        input: operand,
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separate_pass_reach_is_checked() {
        let reach = |rows, ld, width| row_major_reach::<u16>(OperandName::D, rows, ld, width);
        assert_eq!(reach(0, 8, 8).unwrap(), 0);
        assert_eq!(reach(1, 1 << 40, 8).unwrap(), 8);
        assert_eq!(reach(3, 16, 8).unwrap(), 2 * 16 + 8);
        let refused = |r: Result<usize>| {
            matches!(
                r,
                Err(Error::InvalidProblem {
                    reason: ProblemRule::OperandReachOverflows {
                        operand: OperandName::D
                    }
                })
            )
        };
        // Elements past usize, bytes past usize, an extent past the C ABI's i64.
        assert!(refused(reach(1 << 33, 1 << 32, 8)));
        assert!(refused(reach(2, usize::MAX / 2 - 4, 8)));
        assert!(refused(reach(1, usize::MAX, 8)));
        assert!(refused(reach(1, 8, 1 << 63)));
    }

    #[test]
    fn activations_match_their_definitions() {
        // The definitions evaluated with Python's math module (erf, tanh, exp), to 1e-12.
        let cases = [
            (Activation::GeluErf, 1.0, 0.841_344_746_068_542_9),
            (Activation::GeluErf, -2.0, -0.045_500_263_896_358_4),
            (Activation::GeluTanh, 1.0, 0.841_191_990_608_276_8),
            (Activation::Silu, 1.0, 0.731_058_578_630_004_9),
            (Activation::Silu, -3.0, -0.142_277_619_532_700_35),
            (Activation::Relu, -3.0, 0.0),
        ];
        for (act, x, want) in cases {
            assert!((act.apply(x) - want).abs() < 1e-12, "{act} {x}");
        }
        // NaN stays NaN through every activation (ReLU included, as PyTorch's relu).
        for act in Activation::ALL {
            assert!(act.apply(f64::NAN).is_nan(), "{act}");
        }
        // The Lipschitz bounds hold on a fine grid.
        for act in Activation::ALL {
            let mut worst: f64 = 0.0;
            for i in -4000..4000 {
                let (x, y) = (i as f64 / 400.0, (i + 1) as f64 / 400.0);
                worst = worst.max((act.apply(y) - act.apply(x)).abs() / (y - x));
            }
            assert!(worst <= act.lipschitz(), "{act}: {worst}");
        }
        let codes: std::collections::HashSet<i32> =
            Activation::ALL.iter().map(|a| a.code()).collect();
        assert_eq!(codes.len(), 5);
    }

    #[test]
    fn describe_names_every_part() {
        assert_eq!(Epilogue::NONE.describe(), "none");
        assert_eq!(
            Epilogue::bias()
                .with_activation(Activation::GeluTanh)
                .describe(),
            "bias(col)+gelu-tanh"
        );
        assert_eq!(
            Epilogue::rowwise().with_bias(BiasAxis::PerRow).describe(),
            "row-scales+col-scales+bias(row)"
        );
    }
}
