//! The rules an [`Error`](super::Error) names: what is misaligned, why a problem is malformed,
//! which layout, scale or kernel rule an operand breaks.

use std::fmt;

use cutlass_gemm_catalog::{Arch, DataType, Layout};

use super::OperandName;
use crate::ffi::ScheduleHints;
use crate::formats::scale_layout::{ScaleFactorLayout, ScaleMajor};
use crate::quantize::{Fp8Block, Major};

/// An extent of the problem: `m`, `n` or `k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Extent {
    /// Rows of A, C and D.
    M,
    /// Columns of B, C and D.
    N,
    /// The reduction extent: columns of A, rows of B.
    K,
    /// The group count of a grouped GEMM.
    Groups,
}

impl fmt::Display for Extent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Extent::M => "m",
            Extent::N => "n",
            Extent::K => "k",
            Extent::Groups => "groups",
        })
    }
}

/// What [`Error::Misaligned`](super::Error::Misaligned) found misaligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Quantity {
    /// A device address (value and alignment in bytes).
    Pointer,
    /// The device address of an output's scale factors (value and alignment in bytes).
    ScaleFactorPointer,
    /// A leading dimension, in elements.
    LeadingDimension,
    /// A batch stride, in elements.
    BatchStride,
    /// The contiguous extent of the operand, in elements (`k` for a row-major A, ...).
    Extent(Extent),
    /// The `k` of a quantization of sub-byte elements, which must pack whole bytes per row.
    PackedK {
        /// The quantization.
        op: QuantizeOp,
        /// Bits per element.
        bits: u32,
    },
}

impl Quantity {
    /// Whether the value is an address (bytes, shown in hex) rather than a count of elements.
    pub fn is_address(self) -> bool {
        matches!(self, Quantity::Pointer | Quantity::ScaleFactorPointer)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Quantity::Pointer => f.write_str("pointer"),
            Quantity::ScaleFactorPointer => f.write_str("scale-factor pointer"),
            Quantity::LeadingDimension => f.write_str("leading dimension"),
            Quantity::BatchStride => f.write_str("batch stride"),
            Quantity::Extent(e) => write!(f, "contiguous extent {e}"),
            Quantity::PackedK { op, .. } => write!(f, "{op}: k"),
        }
    }
}

/// The quantizer, dequantizer or host upload of [`crate::quantize`] that a rule is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QuantizeOp {
    /// [`crate::quantize::quantize_mx`] and its relatives.
    QuantizeMx,
    /// [`crate::quantize::quantize_nvfp4`] and its relatives.
    QuantizeNvfp4,
    /// [`crate::quantize::quantize_fp8_blockwise`] and its relatives.
    QuantizeFp8Blockwise,
    /// Dequantizing an [`crate::quantize::MxTensor`].
    DequantizeMx,
    /// Dequantizing an [`crate::quantize::Nvfp4Tensor`].
    DequantizeNvfp4,
    /// [`crate::quantize::MxTensor::from_host`].
    UploadMx,
    /// [`crate::quantize::Nvfp4Tensor::from_host`].
    UploadNvfp4,
    /// [`crate::quantize::PackedTensor::from_host`].
    UploadPacked,
}

impl fmt::Display for QuantizeOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuantizeOp::QuantizeMx => "MX quantization",
            QuantizeOp::QuantizeNvfp4 => "NVFP4 quantization",
            QuantizeOp::QuantizeFp8Blockwise => "FP8 blockwise quantization",
            QuantizeOp::DequantizeMx => "MX dequantization",
            QuantizeOp::DequantizeNvfp4 => "NVFP4 dequantization",
            QuantizeOp::UploadMx => "MX operand",
            QuantizeOp::UploadNvfp4 => "NVFP4 operand",
            QuantizeOp::UploadPacked => "packed operand",
        })
    }
}

/// The block-scale family of a narrow-precision plan or operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ScaleFamily {
    /// MX: one ue8m0 scale per 32 elements of K.
    Mx,
    /// NVFP4: one ue4m3 scale per 16 elements of K (and a per-tensor scale).
    Nvfp4,
    /// No block scales.
    Plain,
}

impl ScaleFamily {
    /// The scale type and elements per scale (`None` without block scales).
    pub fn scale_type(self) -> Option<(DataType, u32)> {
        match self {
            ScaleFamily::Mx => Some((DataType::UE8M0, 32)),
            ScaleFamily::Nvfp4 => Some((DataType::UE4M3, 16)),
            ScaleFamily::Plain => None,
        }
    }
}

impl fmt::Display for ScaleFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ScaleFamily::Mx => "MX (ue8m0 per 32) scales",
            ScaleFamily::Nvfp4 => "NVFP4 (ue4m3 per 16) scales",
            ScaleFamily::Plain => "no block scales",
        })
    }
}

/// An `f32` a rule names (alpha, beta, a norm constant, an amax). Compared bit for bit, so that
/// a rule holding a NaN equals itself.
#[derive(Clone, Copy, Debug)]
pub struct Scalar(pub f32);

impl PartialEq for Scalar {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Scalar {}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A set of (A, B) layout pairs, written with BLAS's letters, A's first: `T` row-major, `N`
/// column-major (`TN`: A row-major, B column-major).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LayoutPairs(u8);

impl LayoutPairs {
    fn bit(a: Layout, b: Layout) -> u8 {
        let t = |l: Layout| u8::from(l == Layout::RowMajor);
        1 << (2 * t(a) + t(b))
    }

    /// Adds the pair (A's layout, B's layout).
    pub fn insert(&mut self, a: Layout, b: Layout) {
        self.0 |= Self::bit(a, b);
    }

    /// Whether the set holds the pair (A's layout, B's layout).
    pub fn contains(self, a: Layout, b: Layout) -> bool {
        self.0 & Self::bit(a, b) != 0
    }

    /// The pairs, in the order of their names (`NN`, `NT`, `TN`, `TT`).
    pub fn iter(self) -> impl Iterator<Item = (Layout, Layout)> {
        use Layout::{ColumnMajor as N, RowMajor as T};
        [(N, N), (N, T), (T, N), (T, T)]
            .into_iter()
            .filter(move |&(a, b)| self.contains(a, b))
    }
}

impl FromIterator<(Layout, Layout)> for LayoutPairs {
    fn from_iter<I: IntoIterator<Item = (Layout, Layout)>>(pairs: I) -> Self {
        let mut set = LayoutPairs::default();
        for (a, b) in pairs {
            set.insert(a, b);
        }
        set
    }
}

impl fmt::Display for LayoutPairs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let letter = |l: Layout| if l == Layout::RowMajor { 'T' } else { 'N' };
        for (i, (a, b)) in self.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{}{}", letter(a), letter(b))?;
        }
        Ok(())
    }
}

fn layout_words(l: Layout) -> &'static str {
    match l {
        Layout::RowMajor => "row-major",
        Layout::ColumnMajor => "column-major",
    }
}

fn major_words(m: Major) -> &'static str {
    match m {
        Major::K => "K-major",
        Major::MN => "MN-major",
    }
}

/// Why a problem is malformed ([`Error::InvalidProblem`](super::Error::InvalidProblem)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProblemRule {
    /// An extent is 0.
    ZeroExtent(Extent),
    /// The batch count is 0.
    ZeroBatch,
    /// An extent exceeds `i32::MAX`, the largest CUTLASS's `int` problem shape takes.
    ExtentTooLarge {
        /// The extent.
        extent: Extent,
        /// Its value.
        value: usize,
    },
    /// The batch count exceeds `i32::MAX`.
    BatchTooLarge {
        /// The batch count.
        value: usize,
    },
    /// Alpha or beta is infinite or NaN.
    NonFiniteScalars {
        /// Alpha.
        alpha: Scalar,
        /// Beta.
        beta: Scalar,
    },
    /// C's layout (row- or column-major) differs from D's.
    CLayoutDiffersFromD,
    /// Beta is nonzero but the launch has no C.
    BetaWithoutC {
        /// Beta.
        beta: Scalar,
    },
    /// An in-place launch (C = D) whose C and D differ in leading dimension or batch stride.
    InPlaceGeometry,
    /// Scales were given to a plan without blockwise scales.
    ScalesNotTaken,
    /// A blockwise plan was launched without its scales.
    ScalesRequired,
    /// [`crate::plans::epilogue::apply_unfused`] takes bf16 and f16 outputs.
    UnfusedEpilogueType(DataType),
    /// The plan's fused epilogue names this vector, and the launch did not give it.
    EpilogueOperandMissing {
        /// The vector.
        operand: OperandName,
    },
    /// The launch gave a vector the plan's fused epilogue does not name
    /// ([`crate::Gemm::with_epilogue`]).
    EpilogueOperandNotTaken {
        /// The vector.
        operand: OperandName,
    },
    /// The launch gave a bias in both fields of [`crate::EpilogueOperands`] (`bias` and
    /// `bias_f32`).
    BiasGivenTwice,
    /// The launch gave a bias of another element type than the plan's epilogue reads
    /// ([`crate::BiasElement`]: [`crate::EpilogueOperands::bias`] holds D's type,
    /// [`crate::EpilogueOperands::bias_f32`] f32).
    BiasElement {
        /// The plan's bias type.
        plan: DataType,
        /// The given bias's.
        given: DataType,
    },
    /// A plan whose epilogue writes the pre-activation value as an auxiliary output
    /// ([`crate::Epilogue::with_aux_output`]) breaks a rule of that output.
    AuxOutput {
        /// The rule.
        rule: AuxRule,
    },
    /// A gated GEMM's outputs come in blocks of 8 ([`crate::GatedGemm`]: the gate and up
    /// projections are interleaved in blocks of 8 rows of the weight).
    GatedOutputs {
        /// The outputs (columns of D) asked for.
        n: usize,
    },
    /// A gated GEMM's bias runs along its outputs (one value per column of the interleaved
    /// weight), not along its rows.
    GatedRowBias,
    /// Tile-scheduler hints out of range: swizzle 0, 1, 2, 4 or 8, raster 0, 1 or 2.
    ScheduleOutOfRange(ScheduleHints),
    /// A leading dimension or batch stride of this operand reaches 2^40 bytes (TMA's limit).
    StrideTooLarge {
        /// The operand.
        operand: OperandName,
    },
    /// An extent within CUTLASS's limit that the kernel's padding to its alignment (staged
    /// operands) takes past it.
    PaddedExtentTooLarge {
        /// Which extent.
        extent: Extent,
        /// The problem's value.
        value: usize,
        /// The padded value the kernel would get.
        padded: usize,
    },
    /// The elements this operand's extents, leading dimension and batch stride reach do not fit in
    /// a `usize` (no buffer can hold them).
    OperandReachOverflows {
        /// The operand.
        operand: OperandName,
    },
    /// A quantized tensor of another shape than the plan's (`rows x k`: `m x k` for A, `n x k`
    /// for B).
    TensorShape {
        /// The operand.
        operand: OperandName,
        /// The tensor's rows and k.
        found: (usize, usize),
        /// The plan's.
        required: (usize, usize),
    },
    /// A host matrix of another shape than the problem's (rows x columns: `m x k` for A, `k x n`
    /// for B).
    MatrixShape {
        /// The operand.
        operand: OperandName,
        /// The matrix's rows and columns.
        found: (usize, usize),
        /// The problem's.
        required: (usize, usize),
    },
    /// A host scale-factor layout for another shape than its operand's (`rows x k`).
    ScaleLayoutShape {
        /// The operand.
        operand: OperandName,
        /// The layout's rows and k.
        layout: (usize, usize),
        /// The operand's.
        operand_shape: (usize, usize),
    },
    /// A narrow-precision problem with a batch, leading dimensions or batch strides: its operands
    /// are packed single-batch tensors.
    NarrowNotPacked,
    /// `BlockwiseGemm::run_tensors` on a plan that is not packed and single-batch.
    TensorsNotPacked,
    /// An NVFP4 output's norm constant is not finite and positive.
    NormConstant {
        /// The norm constant.
        value: Scalar,
    },
    /// An NVFP4 quantization's given amax is negative or NaN.
    NegativeAmax {
        /// The amax.
        value: Scalar,
    },
    /// A host matrix for an upload whose length is not `rows * k` (or whose rows or k is 0).
    HostShape {
        /// The upload.
        op: QuantizeOp,
        /// The elements given.
        len: usize,
        /// Rows.
        rows: usize,
        /// K.
        k: usize,
    },
    /// A quantization of zero rows or zero k.
    ZeroRowsOrK {
        /// The quantization.
        op: QuantizeOp,
        /// Rows.
        rows: usize,
        /// K.
        k: usize,
    },
    /// A quantization whose `rows * k` elements overflow.
    ElementCountOverflow {
        /// The quantization.
        op: QuantizeOp,
        /// Rows.
        rows: usize,
        /// K.
        k: usize,
    },
    /// A host list of rows per group (the offsets of a contiguous grouped GEMM, the counts of a
    /// masked one) holds another number of entries than the plan's groups need (groups + 1
    /// offsets, groups counts).
    GroupRowsLength {
        /// Entries given.
        found: usize,
        /// Entries needed.
        required: usize,
    },
    /// An entry of a host list of rows per group breaks its rule.
    GroupRows {
        /// The entry's index.
        index: usize,
        /// Its value.
        value: i64,
        /// The rule.
        rule: GroupRowsRule,
    },
    /// A weight-only GEMM's weight or its scales break a rule of the weight-only kernels.
    Weight {
        /// The rule.
        rule: WeightRule,
    },
    /// Packed FP4/FP6 bytes of another length than `len` values take.
    PackedBytes {
        /// The values.
        len: usize,
        /// Bits per value.
        bits: u32,
        /// The bytes they take.
        required: usize,
        /// The bytes given.
        found: usize,
    },
}

impl fmt::Display for ProblemRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::plans::problem::MAX_EXTENT;
        match self {
            ProblemRule::ZeroExtent(e) => write!(f, "{e} is 0; every extent must be at least 1"),
            ProblemRule::ZeroBatch => write!(f, "batch is 0; every extent must be at least 1"),
            ProblemRule::ExtentTooLarge { extent, value } => write!(
                f,
                "{extent} = {value} exceeds {MAX_EXTENT}, the largest extent CUTLASS takes"
            ),
            ProblemRule::PaddedExtentTooLarge {
                extent,
                value,
                padded,
            } => write!(
                f,
                "{extent} = {value} is padded to {padded} for the kernel's alignment, past \
                 {MAX_EXTENT}, the largest extent CUTLASS takes"
            ),
            ProblemRule::BatchTooLarge { value } => write!(
                f,
                "batch = {value} exceeds {MAX_EXTENT}, the largest extent CUTLASS takes"
            ),
            ProblemRule::NonFiniteScalars { alpha, beta } => {
                write!(f, "alpha ({alpha}) and beta ({beta}) must be finite")
            }
            ProblemRule::CLayoutDiffersFromD => {
                write!(f, "C must have the layout (row- or column-major) of D")
            }
            ProblemRule::BetaWithoutC { beta } => write!(f, "beta is {beta} but no C was given"),
            ProblemRule::InPlaceGeometry => write!(
                f,
                "in-place GEMM needs C and D to have the same leading dimension and batch stride"
            ),
            ProblemRule::ScalesNotTaken => write!(f, "this plan takes no scales"),
            ProblemRule::ScalesRequired => write!(
                f,
                "this plan takes blockwise scales: launch it through BlockwiseGemm"
            ),
            ProblemRule::UnfusedEpilogueType(ty) => write!(
                f,
                "the unfused bias-and-activation pass takes bf16 or f16, not {ty}"
            ),
            ProblemRule::EpilogueOperandMissing { operand } => write!(
                f,
                "the plan's fused epilogue reads the {operand}: pass it to run_fused"
            ),
            ProblemRule::EpilogueOperandNotTaken { operand } => write!(
                f,
                "the {operand} was given but the plan's epilogue has none (plan it with with_epilogue)"
            ),
            ProblemRule::BiasGivenTwice => write!(
                f,
                "two biases were given: pass one, in EpilogueOperands::bias (D's type) or bias_f32 (f32)"
            ),
            ProblemRule::BiasElement { plan, given } => write!(
                f,
                "the plan's epilogue reads a {plan} bias and the launch gave a {given} one (EpilogueOperands::bias holds D's type, bias_f32 an f32 bias for a plan with Epilogue::with_f32_bias)"
            ),
            ProblemRule::AuxOutput { rule } => write!(f, "the auxiliary output: {rule}"),
            ProblemRule::GatedOutputs { n } => write!(
                f,
                "a gated GEMM's outputs come in blocks of 8 (its weight interleaves the gate and up \
                 projections in blocks of 8 rows); n = {n} is not a multiple of 8"
            ),
            ProblemRule::GatedRowBias => write!(
                f,
                "a gated GEMM's bias is per column of its interleaved weight (2n values), not per row"
            ),
            ProblemRule::ScheduleOutOfRange(schedule) => write!(
                f,
                "tile schedule {schedule:?}: swizzle is 0, 1, 2, 4 or 8 and raster 0 (heuristic), \
                 1 (along M) or 2 (along N)"
            ),
            ProblemRule::StrideTooLarge { operand } => write!(
                f,
                "operand {operand}: strides must stay below 2^40 bytes (TMA)"
            ),
            ProblemRule::OperandReachOverflows { operand } => write!(
                f,
                "operand {operand}: the elements its extents, leading dimension and batch stride \
                 reach overflow the address space"
            ),
            ProblemRule::TensorShape {
                operand,
                found,
                required,
            } => write!(
                f,
                "operand {operand} is a {} x {} tensor (rows x k), the plan needs {} x {}",
                found.0, found.1, required.0, required.1
            ),
            ProblemRule::MatrixShape {
                operand,
                found,
                required,
            } => write!(
                f,
                "operand {operand} is {} x {}, the problem needs {} x {}",
                found.0, found.1, required.0, required.1
            ),
            ProblemRule::ScaleLayoutShape {
                operand,
                layout,
                operand_shape,
            } => write!(
                f,
                "scale layout is for {} x {} but operand {operand} is {} x {} (rows x K)",
                layout.0, layout.1, operand_shape.0, operand_shape.1
            ),
            ProblemRule::NarrowNotPacked => write!(
                f,
                "narrow-precision GEMMs take packed single-batch operands (quantized tensors): \
                 no batch, leading dimensions or batch strides"
            ),
            ProblemRule::TensorsNotPacked => write!(
                f,
                "run_tensors takes packed single-batch plans (the tensors are packed)"
            ),
            ProblemRule::NormConstant { value } => {
                write!(f, "norm_constant {value} must be finite and positive")
            }
            ProblemRule::NegativeAmax { value } => {
                write!(f, "NVFP4 quantization: amax {value} must be >= 0")
            }
            ProblemRule::HostShape { op, len, rows, k } => {
                write!(f, "{op}: {len} elements are not a {rows} x {k} matrix")
            }
            ProblemRule::ZeroRowsOrK { op, rows, k } => {
                write!(f, "{op}: rows ({rows}) and k ({k}) must be at least 1")
            }
            ProblemRule::ElementCountOverflow { op, rows, k } => {
                write!(f, "{op}: {rows} x {k} elements overflow")
            }
            ProblemRule::GroupRowsLength { found, required } => write!(
                f,
                "{found} group offsets or counts given, the plan's groups need {required}"
            ),
            ProblemRule::GroupRows { index, value, rule } => {
                write!(f, "group rows entry {index} ({value}) {rule}")
            }
            ProblemRule::Weight { rule } => write!(f, "quantized weight: {rule}"),
            ProblemRule::PackedBytes {
                len,
                bits,
                required,
                found,
            } => write!(
                f,
                "{len} packed {bits}-bit values take {required} bytes, not {found}"
            ),
        }
    }
}

/// The rule a weight-only GEMM's quantized weight breaks ([`ProblemRule::Weight`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WeightRule {
    /// The weight's rows (the layer's outputs, n) are a multiple of the packed order's block
    /// (16 rows).
    Rows {
        /// n.
        n: usize,
        /// The multiple.
        multiple: usize,
    },
    /// The weight's columns (the layer's inputs, k) are a multiple of the kernels' tile k (64).
    Columns {
        /// k.
        k: usize,
        /// The multiple.
        multiple: usize,
    },
    /// The group size is a multiple of the kernels' tile k (64) that divides k.
    GroupSize {
        /// The group size.
        group_size: usize,
        /// k.
        k: usize,
    },
    /// The weight's n · k values exceed what the packed order's 32-bit index reaches.
    Values {
        /// n · k.
        values: usize,
        /// The most it takes.
        max: usize,
    },
    /// GPTQ's act-order: `g_idx` maps column `column` to group `group`, not `column / group_size`
    /// (the kernels read one scale per run of `group_size` columns; reorder the checkpoint's
    /// columns, and the activations' with them, first).
    ActOrder {
        /// The column.
        column: usize,
        /// Its group in `g_idx`.
        group: i64,
    },
    /// The weight was quantized for other extents than the plan's.
    Extents {
        /// The weight's (n, k, group size).
        weight: (usize, usize, usize),
        /// The plan's.
        plan: (usize, usize, usize),
    },
    /// The weight's format is not the plan's.
    Format {
        /// The weight's.
        weight: crate::plans::weight_only::WeightFormat,
        /// The plan's.
        plan: crate::plans::weight_only::WeightFormat,
    },
    /// An FP8 or int8 weight has one scale per output channel: its group of k is all of k.
    PerChannel {
        /// The group size asked for.
        group_size: usize,
        /// k.
        k: usize,
    },
    /// The weight's values are not in the order required: the plan's (made for a weight in
    /// another order: [`crate::QuantizedWeight::set_order`] converts a 4-bit one), or one an FP8
    /// or int8 weight cannot have (plain only).
    Order {
        /// The weight's (or the plan's).
        weight: crate::plans::weight_only::WeightOrder,
        /// The one required.
        required: crate::plans::weight_only::WeightOrder,
    },
}

impl fmt::Display for WeightRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WeightRule::Rows { n, multiple } => write!(
                f,
                "n = {n} rows (outputs) is not a multiple of {multiple}, the packed order's block"
            ),
            WeightRule::Columns { k, multiple } => write!(
                f,
                "k = {k} columns (inputs) is not a multiple of {multiple}, the kernels' tile k"
            ),
            WeightRule::GroupSize { group_size, k } => write!(
                f,
                "group size {group_size} is not a multiple of 64 that divides k = {k}"
            ),
            WeightRule::Values { values, max } => write!(
                f,
                "the weight's n x k = {values} values exceed {max}, the packed order's 32-bit index"
            ),
            WeightRule::ActOrder { column, group } => write!(
                f,
                "g_idx puts column {column} in group {group}: act-order checkpoints are not supported (reorder the columns first)"
            ),
            WeightRule::Extents { weight, plan } => write!(
                f,
                "the weight is n x k = {} x {} in groups of {}, the plan's {} x {} in groups of {}",
                weight.0, weight.1, weight.2, plan.0, plan.1, plan.2
            ),
            WeightRule::Format { weight, plan } => {
                write!(f, "the weight is {weight}, the plan's kernel reads {plan}")
            }
            WeightRule::PerChannel { group_size, k } => write!(
                f,
                "an FP8 or int8 weight has one scale per output channel: group size {group_size} is not k = {k}"
            ),
            WeightRule::Order { weight, required } => write!(
                f,
                "the weight's values are in {weight}, {required} is required (QuantizedWeight::set_order converts a 4-bit weight; FP8 and int8 weights are plain only)"
            ),
        }
    }
}

/// The rule an entry of a grouped GEMM's rows per group breaks ([`ProblemRule::GroupRows`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GroupRowsRule {
    /// Offsets and counts are at least 0.
    Negative,
    /// Offsets never decrease (group g owns rows `offsets[g]..offsets[g + 1]`).
    Decreasing {
        /// The offset before it.
        previous: i64,
    },
    /// An offset past the rows of A and D (contiguous layout), or a count past the capacity
    /// (masked layout).
    PastEnd {
        /// The rows, or the capacity.
        limit: usize,
    },
}

impl fmt::Display for GroupRowsRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupRowsRule::Negative => write!(f, "is negative"),
            GroupRowsRule::Decreasing { previous } => {
                write!(
                    f,
                    "is below the offset before it ({previous}): offsets never decrease"
                )
            }
            GroupRowsRule::PastEnd { limit } => {
                write!(f, "is past the plan's rows or capacity ({limit})")
            }
        }
    }
}

/// Why a launch on a stream that is capturing a CUDA graph is refused ([`Error::StreamCapture`](super::Error::StreamCapture)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CaptureRule {
    /// cudarc tracks this context's buffers with events across its streams (event tracking on,
    /// more than one stream): taking a buffer's pointer makes the stream wait on the event of its
    /// last write, recorded outside the capture, and CUDA ends the capture on such a wait
    /// (`CUDA_ERROR_STREAM_CAPTURE_ISOLATION`); the events recorded inside it could not be waited
    /// on afterwards either.
    EventTracking,
    /// The capture was invalidated by an earlier call on the stream; the launch would fail.
    Invalidated,
}

impl fmt::Display for CaptureRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaptureRule::EventTracking => write!(
                f,
                "cudarc tracks buffer events across this context's streams, and a capture cannot \
                 hold its waits on events recorded outside it; call \
                 `CudaContext::disable_event_tracking` before allocating the buffers (and order the \
                 streams yourself), or capture the raw entry point (`run_raw`)"
            ),
            CaptureRule::Invalidated => write!(
                f,
                "the capture was invalidated by an earlier call on this stream; end it and capture \
                 again"
            ),
        }
    }
}

/// The layout rule an operand breaks ([`Error::UnsupportedLayout`](super::Error::UnsupportedLayout)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayoutRule {
    /// The catalog's kernels for these types on this architecture read other A/B layouts. Types
    /// and layouts are the user's (with a column-major D a plain GEMM's kernel computes
    /// `Dᵀ = Bᵀ·Aᵀ`; this rule is not in the kernel's view).
    KernelLayouts {
        /// The operand's layout.
        layout: Layout,
        /// A's type.
        a: DataType,
        /// B's type.
        b: DataType,
        /// The device's architecture.
        arch: Arch,
        /// D's layout.
        d: Layout,
        /// The (A, B) layouts those kernels read with this D.
        allowed: LayoutPairs,
    },
    /// Narrow-precision (block-scaled) GEMMs write a row-major D and read a row-major C.
    NarrowRowMajorOutput,
    /// A narrow-precision operand tensor in another major than the problem's layout gives.
    TensorMajor {
        /// The major the plan reads.
        required: Major,
        /// The tensor's.
        found: Major,
    },
    /// The block-scaled epilogue writes a row-major (N-contiguous, [`Major::K`]) NVFP4 D.
    Nvfp4OutputRowMajor,
    /// Blockwise GEMMs write a row-major D.
    BlockwiseRowMajorD,
    /// Blockwise FP8 GEMMs read A row-major (K contiguous).
    BlockwiseRowMajorA,
    /// Blockwise FP8 GEMMs read B column-major (K contiguous).
    BlockwiseColumnMajorB,
    /// The GPU quantizers and dequantizers work on K-major tensors only.
    QuantizerKMajor(QuantizeOp),
    /// Gated GEMMs read A row-major, the interleaved weight as a column-major B (the weight
    /// `2n x k` row-major) and write a row-major D.
    GatedLayouts,
}

impl fmt::Display for LayoutRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutRule::KernelLayouts {
                layout,
                a,
                b,
                arch,
                d,
                allowed,
            } => {
                write!(
                    f,
                    "{} but the {a} x {b} kernels for {arch} with a {} D take {allowed} only \
                     (A's letter, then B's: T row-major, N column-major)",
                    layout_words(*layout),
                    layout_words(*d),
                )?;
                if *arch == Arch::Sm90a && (a.bits() == 8 || b.bits() == 8) {
                    write!(f, "; Hopper's wgmma reads 8-bit operands K-major only")?;
                }
                Ok(())
            }
            LayoutRule::NarrowRowMajorOutput => write!(
                f,
                "narrow-precision GEMMs write a row-major D (and read a row-major C)"
            ),
            LayoutRule::TensorMajor { required, found } => write!(
                f,
                "the plan reads this operand {} (the problem's layout), the tensor is {}",
                major_words(*required),
                major_words(*found)
            ),
            LayoutRule::Nvfp4OutputRowMajor => write!(
                f,
                "the block-scaled epilogue writes a row-major (N-contiguous) D"
            ),
            LayoutRule::GatedLayouts => write!(
                f,
                "gated GEMMs read a row-major A and a column-major B (the interleaved weight, 2n x k \
                 row-major) and write a row-major D"
            ),
            LayoutRule::BlockwiseRowMajorD => write!(
                f,
                "blockwise GEMMs write a row-major D: A's 1x128 and B's 128x128 scale blocks are \
                 not symmetric, so the transpose identity does not apply"
            ),
            LayoutRule::BlockwiseRowMajorA => write!(
                f,
                "blockwise FP8 GEMMs read A row-major (K contiguous): Hopper's wgmma reads 8-bit \
                 operands K-major only"
            ),
            LayoutRule::BlockwiseColumnMajorB => write!(
                f,
                "blockwise FP8 GEMMs read B column-major (K contiguous, a row-major W[n, k]): \
                 Hopper's wgmma reads 8-bit operands K-major only"
            ),
            LayoutRule::QuantizerKMajor(op) => write!(
                f,
                "{op} works on K-major ([rows, k]) tensors; this one is MN-major"
            ),
        }
    }
}

/// The scale rule a tensor breaks ([`Error::ScaleMismatch`](super::Error::ScaleMismatch)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScaleRule {
    /// An FP8 blockwise tensor of another granularity than the kernel reads for this operand.
    Fp8Block {
        /// The granularity the kernel reads.
        required: Fp8Block,
        /// The tensor's.
        found: Fp8Block,
    },
    /// FP8 blockwise scales in another order than the kernel reads ([`ScaleMajor::MN`] for
    /// [`crate::BlockwiseGemm`], [`ScaleMajor::K`] for [`crate::GroupedBlockwiseGemm`]).
    Fp8ScaleMajor {
        /// The order the kernel reads.
        required: ScaleMajor,
        /// The tensor's order.
        found: ScaleMajor,
    },
    /// The weights of all groups of a [`crate::GroupedBlockwiseGemm`] quantized as one tensor
    /// with 128x128 blocks: unless `n` is a multiple of 128, blocks straddle two experts' weights,
    /// where the kernel reads `ceil(n / 128)` block rows per expert. Quantize each expert's weight
    /// separately and pass the scales with `run`.
    GroupedWeightBlocks {
        /// The weights' rows per group.
        n: usize,
    },
    /// A narrow-precision operand of another scale family than the plan's kernel reads.
    Family {
        /// The family the kernel reads.
        required: ScaleFamily,
        /// The operand's.
        found: ScaleFamily,
    },
    /// An operand's scale factors in another `Sm1xxBlockScaledConfig` layout than the kernel
    /// reads.
    Layout {
        /// The layout the kernel reads.
        required: ScaleFactorLayout,
        /// The tensor's.
        found: ScaleFactorLayout,
    },
    /// An NVFP4 output's scale factors (or its shape) other than the kernel writes.
    OutputLayout {
        /// The layout the kernel writes (one ue4m3 per 16 elements of N of an m x n D).
        required: ScaleFactorLayout,
        /// The tensor's.
        found: ScaleFactorLayout,
    },
    /// A plain D for a plan whose kernel writes an NVFP4 D with its scale factors.
    OutputIsNvfp4,
    /// An NVFP4 D for a plan whose kernel writes a plain D.
    OutputIsPlain,
    /// An NVFP4-output plan's D is not an NVFP4 tensor.
    OutputNotNvfp4 {
        /// The tensor's family.
        found: ScaleFamily,
    },
    /// A host quantization whose scales do not cover its matrix with the family's vector size.
    HostScales {
        /// The family.
        family: ScaleFamily,
        /// The matrix's rows.
        rows: usize,
        /// The matrix's k.
        k: usize,
        /// Scales per row the family needs: `ceil(k / vector size)`.
        per_row: usize,
        /// The quantization's scale count.
        found: usize,
        /// The quantization's elements per scale.
        found_vec: usize,
    },
}

impl fmt::Display for ScaleRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScaleRule::Fp8Block { required, found } => write!(
                f,
                "the kernel reads {required:?} scales, the tensor has {found:?}"
            ),
            ScaleRule::Fp8ScaleMajor { required, found } => write!(
                f,
                "the kernel reads ScaleMajor::{required:?} scales, the tensor has \
                 ScaleMajor::{found:?}; quantize with ScaleMajor::{required:?}"
            ),
            ScaleRule::GroupedWeightBlocks { n } => write!(
                f,
                "n = {n} is not a multiple of 128, so the 128x128 scale blocks of weights \
                 quantized as one tensor straddle experts; quantize each expert separately"
            ),
            ScaleRule::Family { required, found } => write!(
                f,
                "this plan's kernel reads {required}, the operand has {found}"
            ),
            ScaleRule::Layout { required, found } => write!(
                f,
                "the kernel reads one scale per {} elements of K in the Sm1xxBlockScaledConfig \
                 layout of a {} x {} operand, the tensor's layout is {found:?}",
                required.vec, required.rows, required.k
            ),
            ScaleRule::OutputLayout { required, found } => write!(
                f,
                "D's scale factors are one ue4m3 per 16 elements of N in the \
                 Sm1xxBlockScaledConfig layout of an {} x {} matrix ({required:?}); the tensor's \
                 layout is {found:?}",
                required.rows, required.k
            ),
            ScaleRule::OutputIsNvfp4 => write!(
                f,
                "this plan's kernel writes an NVFP4 D with its scale factors: use run_to_nvfp4"
            ),
            ScaleRule::OutputIsPlain => write!(f, "this plan's kernel writes a plain D: use run"),
            ScaleRule::OutputNotNvfp4 { found } => write!(
                f,
                "D must be an NVFP4 tensor (e2m1 with ue4m3 per 16 along N), not one with {found}"
            ),
            ScaleRule::HostScales {
                family,
                rows,
                k,
                per_row,
                found,
                found_vec,
            } => write!(
                f,
                "{family} are {rows} x {per_row} for a {rows} x {k} matrix; this quantization has \
                 {found} per {found_vec}"
            ),
        }
    }
}

/// Why a kernel asked for by name does not serve a plan ([`Error::KernelMismatch`](super::Error::KernelMismatch)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KernelRule {
    /// The kernel takes MX/NVFP4 block-scaled operands: plan it with [`crate::BlockScaledGemm`].
    BlockScaled,
    /// The kernel takes a structured-sparse A.
    Sparse,
    /// The kernel takes blockwise scales: plan it with [`crate::BlockwiseGemm`] (a grouped one
    /// with [`crate::GroupedBlockwiseGemm`]).
    Blockwise,
    /// A blockwise plan named a kernel without blockwise scales.
    NotBlockwise,
    /// A kernel operand's type or layout differs from the plan's. The operand is the kernel's:
    /// with a column-major D a plain GEMM's kernel computes `Dᵀ = Bᵀ·Aᵀ`, so its A is the user's
    /// B transposed.
    Operand {
        /// The kernel's operand.
        operand: OperandName,
        /// The kernel's type and layout of it.
        kernel: (DataType, Layout),
        /// The plan's.
        required: (DataType, Layout),
    },
    /// The kernel reads block scales of another type or vector size than the plan's operands
    /// have.
    BlockScales {
        /// The kernel's scale type and elements per scale.
        kernel: (DataType, u32),
        /// The plan's family.
        required: ScaleFamily,
    },
    /// A block-scaled plan named a kernel without block scales (plain narrow kernels are planned
    /// with `BlockScaledGemm::plan_plain`).
    NoBlockScales,
    /// An NVFP4-output plan named a kernel that does not write an NVFP4 D.
    NotNvfp4Output,
    /// A plain-output plan named a kernel that writes a block-scaled D.
    Nvfp4Output,
    /// A plan with a fused epilogue named a kernel without it (CUTLASS's `LinearCombination`, or
    /// the `LinCombBlockScaleFactor` epilogue of an NVFP4 D).
    NoFusedEpilogue,
    /// The kernel has the fused epilogue, which a plain GEMM's automatic choice leaves to GEMMs
    /// with a bias, an activation or scales (a plain GEMM runs on it when named).
    FusedEpilogue,
    /// The kernel's fused epilogue reads a bias of another type than D's.
    BiasType {
        /// The kernel's bias type.
        kernel: DataType,
        /// The plan's ([`crate::Epilogue::bias_type`]: D's, or f32).
        required: DataType,
    },
    /// A plan whose epilogue writes an auxiliary output named a kernel without one, or another
    /// plan a kernel with one ([`crate::Epilogue::with_aux_output`]).
    AuxOutput {
        /// Whether the kernel writes the auxiliary output.
        kernel: bool,
    },
    /// A grouped plan named a kernel that is not grouped, or a plain plan a grouped one.
    Grouped {
        /// Whether the kernel is grouped.
        kernel: bool,
    },
    /// A weight-only plan named a kernel that is not weight-only, or another plan a weight-only
    /// one.
    WeightOnly {
        /// Whether the kernel is weight-only.
        kernel: bool,
    },
    /// A gated plan named a kernel without the gated epilogue, or another plan a gated one.
    Gated {
        /// Whether the kernel is gated.
        kernel: bool,
    },
    /// A weight-only kernel (or the decode GEMV) reads the weight's values in another order than
    /// the plan's ([`crate::WeightOrder`]).
    WeightOrder {
        /// The order the kernel reads.
        kernel: crate::plans::weight_only::WeightOrder,
        /// The plan's.
        plan: crate::plans::weight_only::WeightOrder,
    },
    /// A weight-only kernel fixes its scales' group size (SM100: `_g{group}` in its name) and the
    /// plan's is another.
    WeightGroupSize {
        /// The kernel's.
        kernel: usize,
        /// The plan's.
        plan: usize,
    },
    /// The weight-only decode GEMV named for more tokens than it takes.
    GemvTokens {
        /// The plan's tokens.
        m: usize,
        /// The most it takes.
        max: usize,
    },
    /// Split-K over a kernel whose tile scheduler is not stream-K.
    SplitKNeedsStreamK {
        /// The splits asked for.
        splits: u16,
    },
    /// Split-K with a separate reduction (asked of a kernel that is not stream-K, through
    /// [`crate::Gemm::with_schedule`]) does not serve the plan.
    SplitK {
        /// The splits asked for.
        splits: u16,
        /// The rule the plan breaks.
        rule: SplitKRule,
    },
    /// The FP8 blockwise decode GEMV named for a problem it does not take.
    BlockwiseGemv {
        /// The rule the problem breaks.
        rule: GemvRule,
    },
    /// The 16-bit decode GEMV named for a problem it does not take.
    DenseGemv {
        /// The rule the problem breaks.
        rule: GemvRule,
    },
}

/// What split-K with a separate reduction takes ([`KernelRule::SplitK`]): the kernel's f32-output
/// twin computes each slice of K (a batch of `splits` GEMMs), and a reduction adds the slices and
/// applies alpha, beta and D's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SplitKRule {
    /// The catalog has no f32-output twin of the kernel (`catalog::SM90_MENU_16BIT_PARTIALS` and
    /// the 128x256 cooperative tiles have one; no kernel with a fused epilogue has), or D is not
    /// bf16 or f16.
    NoPartialsKernel,
    /// One GEMM: the batch carries the slices.
    Batch {
        /// The plan's batch count.
        batch: usize,
    },
    /// No operand served through a padded copy.
    Staged {
        /// The staged operand.
        operand: OperandName,
    },
    /// Slices of equal length: k a multiple of `splits` slices of a multiple of 8 elements (16
    /// bytes).
    Slices {
        /// The plan's k.
        k: usize,
        /// The splits asked for.
        splits: u16,
    },
}

impl fmt::Display for SplitKRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SplitKRule::NoPartialsKernel => write!(
                f,
                "the catalog has no f32-output twin of this kernel to compute the slices (a stream-K kernel takes any split-K)"
            ),
            SplitKRule::Batch { batch } => {
                write!(f, "it takes one GEMM, the plan has a batch of {batch}")
            }
            SplitKRule::Staged { operand } => write!(
                f,
                "it reads the operands in place, and {operand} needs a padded copy"
            ),
            SplitKRule::Slices { k, splits } => write!(
                f,
                "k = {k} does not split into {splits} slices of a multiple of 8 elements"
            ),
        }
    }
}

/// What the decode GEMVs take: the FP8 blockwise one (`cutlass_rs_blockwise_gemv`,
/// [`KernelRule::BlockwiseGemv`]) and the 16-bit one (`cutlass_rs_dense_gemv`,
/// [`KernelRule::DenseGemv`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GemvRule {
    /// At most `max` tokens (rows of A and D).
    Tokens {
        /// The plan's tokens.
        m: usize,
        /// The most it takes.
        max: usize,
    },
    /// One GEMM: no batch.
    Batch {
        /// The plan's batch count.
        batch: usize,
    },
    /// n a multiple of 16 and k of 64.
    Extents {
        /// The plan's n.
        n: usize,
        /// The plan's k.
        k: usize,
    },
    /// A's and B's rows start at multiples of 16 bytes (leading dimensions multiples of 16 e4m3
    /// or 8 16-bit elements).
    LeadingDimension {
        /// The operand whose leading dimension breaks it.
        operand: OperandName,
        /// Its leading dimension, elements.
        ld: usize,
    },
    /// Blockwise: e4m3 A and B with a bf16 or f16 D; 16-bit: A, B and D all bf16 or all f16, A
    /// row-major, B column-major, D row-major and no tensor-wise scales.
    Types,
    /// The epilogue: the blockwise GEMV computes no fused epilogue, and neither GEMV writes an
    /// auxiliary output.
    Epilogue,
    /// C row-major (as D).
    ColumnMajorC,
    /// Not compiled for this device's architecture (this build's hand-written kernels are not).
    NotBuilt,
}

impl fmt::Display for GemvRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GemvRule::Tokens { m, max } => {
                write!(f, "it takes at most {max} tokens, the plan has {m}")
            }
            GemvRule::Batch { batch } => {
                write!(f, "it takes one GEMM, the plan has a batch of {batch}")
            }
            GemvRule::Extents { n, k } => write!(
                f,
                "it needs n a multiple of 16 and k of 64, the plan has n = {n}, k = {k}"
            ),
            GemvRule::LeadingDimension { operand, ld } => write!(
                f,
                "it needs {operand}'s rows 16-byte aligned, the plan's leading dimension is {ld}"
            ),
            GemvRule::Types => write!(
                f,
                "it takes e4m3 A and B with a bf16 or f16 D (the blockwise GEMV), or one 16-bit type with A row-major, B column-major and D row-major (the 16-bit one)"
            ),
            GemvRule::Epilogue => write!(
                f,
                "it computes no fused epilogue (the blockwise GEMV) and writes no auxiliary output (either GEMV)"
            ),
            GemvRule::ColumnMajorC => write!(f, "it reads C row-major, as D"),
            GemvRule::NotBuilt => write!(
                f,
                "this build did not compile its hand-written kernels for the device's architecture"
            ),
        }
    }
}

impl fmt::Display for KernelRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelRule::BlockScaled => write!(
                f,
                "the kernel takes mx/nv block-scaled operands (use BlockScaledGemm)"
            ),
            KernelRule::Sparse => write!(f, "the kernel takes a structured-sparse A"),
            KernelRule::Blockwise => {
                write!(f, "the kernel takes blockwise scales (use BlockwiseGemm)")
            }
            KernelRule::NotBlockwise => write!(f, "the kernel has no blockwise scales"),
            KernelRule::Operand {
                operand,
                kernel,
                required,
            } => write!(
                f,
                "kernel operand {operand} is {} {}, the plan needs {} {}",
                kernel.0,
                layout_words(kernel.1),
                required.0,
                layout_words(required.1)
            ),
            KernelRule::BlockScales { kernel, required } => write!(
                f,
                "the kernel reads {} scales per {}, the operands have {required}",
                kernel.0, kernel.1
            ),
            KernelRule::NoBlockScales => write!(
                f,
                "the kernel reads no block scales (plan it with plan_plain)"
            ),
            KernelRule::NotNvfp4Output => write!(
                f,
                "the kernel does not write an NVFP4 output (D e2m1 with ue4m3 per 16)"
            ),
            KernelRule::Nvfp4Output => write!(
                f,
                "the kernel writes a block-scaled output (plan it with plan_*_to_nvfp4)"
            ),
            KernelRule::NoFusedEpilogue => write!(
                f,
                "the kernel's epilogue (CUTLASS's LinearCombination, or the block-scaled output's) has no bias, activation or row and column scales"
            ),
            KernelRule::FusedEpilogue => write!(
                f,
                "the kernel has the fused epilogue, which a plain GEMM's automatic choice leaves to fused GEMMs (name it to run a plain GEMM on it)"
            ),
            KernelRule::BiasType { kernel, required } => write!(
                f,
                "the kernel's fused epilogue reads a {kernel} bias, the plan's is {required}"
            ),
            KernelRule::AuxOutput { kernel: true } => write!(
                f,
                "the kernel also writes the pre-activation value: plan it with Epilogue::with_aux_output and launch it with run_with_aux"
            ),
            KernelRule::AuxOutput { kernel: false } => write!(
                f,
                "the kernel writes no auxiliary output (those kernels' names end in _evt_bias{{type}}_act_aux)"
            ),
            KernelRule::Grouped { kernel: true } => write!(
                f,
                "the kernel is a grouped (pointer-array) kernel: plan it with GroupedGemm"
            ),
            KernelRule::Grouped { kernel: false } => write!(
                f,
                "the kernel is not a grouped kernel (grouped kernels have _gemm_grouped_ in their names)"
            ),
            KernelRule::WeightOnly { kernel: true } => write!(
                f,
                "the kernel is a weight-only (mixed-input) kernel: plan it with WeightOnlyGemm"
            ),
            KernelRule::WeightOnly { kernel: false } => write!(
                f,
                "the kernel is not a weight-only kernel (their names end in _scl_shfl or _sclzr_shfl before the tile)"
            ),
            KernelRule::Gated { kernel: true } => write!(
                f,
                "the kernel has the gated epilogue (its D has half the GEMM's columns): plan it with GatedGemm"
            ),
            KernelRule::Gated { kernel: false } => write!(
                f,
                "the kernel has no gated epilogue (gated kernels' names end in _glu_scale_bias{{type}}_act)"
            ),
            KernelRule::WeightOrder { kernel, plan } => write!(
                f,
                "the kernel reads a weight in {kernel}, the plan's weight is in {plan} (QuantizedWeight::set_order converts a 4-bit weight)"
            ),
            KernelRule::WeightGroupSize { kernel, plan } => write!(
                f,
                "the kernel's scales come in groups of {kernel} along k, the plan's in groups of {plan}"
            ),
            KernelRule::GemvTokens { m, max } => write!(
                f,
                "the decode GEMV takes at most {max} tokens, the plan has {m}: plan it with a CUTLASS weight-only kernel"
            ),
            KernelRule::SplitKNeedsStreamK { splits } => {
                write!(f, "split-K ({splits} splits) needs a stream-K kernel")
            }
            KernelRule::SplitK { splits, rule } => {
                write!(f, "split-K over {splits} slices with a reduction: {rule}")
            }
            KernelRule::BlockwiseGemv { rule } => {
                write!(f, "the FP8 blockwise decode GEMV does not serve the plan: {rule}")
            }
            KernelRule::DenseGemv { rule } => {
                write!(f, "the 16-bit decode GEMV does not serve the plan: {rule}")
            }
        }
    }
}

/// A rule of the auxiliary output ([`ProblemRule::AuxOutput`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AuxRule {
    /// The epilogue has row or column scales or a bias per row: the auxiliary output comes with a
    /// bias per column (or none) and an activation only.
    Vectors,
    /// Only plain bf16 and f16 GEMMs ([`crate::Gemm`] of one 16-bit type) write it.
    Plan,
    /// The plan would copy C or D into a padded buffer (a leading dimension, extent or address
    /// the kernels' TMA cannot take) or split K with a separate reduction: the kernel writes the
    /// auxiliary output with D's geometry, in place.
    Staged,
    /// D is column-major: the kernels write D and Aux row-major.
    ColumnMajorD,
}

impl fmt::Display for AuxRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuxRule::Vectors => write!(
                f,
                "it comes with a bias per column (or none) and an activation, without row or column scales or a bias per row"
            ),
            AuxRule::Plan => write!(
                f,
                "only plain bf16 and f16 GEMMs (Gemm with A, B and D of one 16-bit type) write it"
            ),
            AuxRule::Staged => write!(
                f,
                "the kernel writes it with D's geometry in place: C and D need 16-byte aligned addresses and leading dimensions, n a multiple of 8, and no split-K reduction"
            ),
            AuxRule::ColumnMajorD => write!(
                f,
                "the kernels write D and Aux row-major: plan a row-major D (or the transposed product)"
            ),
        }
    }
}
