//! Weight-only quantized GEMMs: 4-bit, FP8 and int8 weights, bf16 or f16 activations.
//!
//! A decoding language model reads every weight once per generated token while doing little
//! arithmetic on it, so at a few tokens per step its linear layers are bound by memory bandwidth.
//! Weights stored in 4 bits, with one scale (and optionally one zero point) per group of k, move a
//! quarter of bf16's bytes; FP8 (e4m3) and int8 (s8) weights with a scale per output channel
//! ([`WeightFormat::Fp8`], [`QuantizedWeight::quantize_fp8`]; [`WeightFormat::Int8`],
//! [`QuantizedWeight::quantize_int8`]) half. [`WeightOnlyGemm`] computes a linear layer's
//!
//! `Y = alpha · X · dequant(W)ᵀ + beta · C`
//!
//! with X `m x k` and Y, C `m x n` row-major in bf16 or f16, and W the layer's `n x k` weight held
//! by a [`QuantizedWeight`]: 4-bit values `q`, scales `s` and, for asymmetric quantization (GPTQ,
//! AWQ), additive zeros `z`, one per group of `group_size` columns and row. The kernels (CUTLASS's
//! SM90 mixed-input main loops, built with the `weight-only` cargo feature) dequantize in registers
//! as `round(q · s + z)` in the activations' type (one fused multiply-add), then multiply in the
//! tensor cores with f32 accumulation.
//!
//! A [`QuantizedWeight`] is made once, at load time, on the GPU:
//! - [`QuantizedWeight::quantize`] quantizes a bf16/f16 weight group-wise, symmetric (s4 values,
//!   scales only) or asymmetric (u4 values, scales and zero points);
//! - [`QuantizedWeight::from_gptq`] and [`QuantizedWeight::from_awq`] take a checkpoint's
//!   `qweight`, `qzeros` and `scales` as GPTQ and AWQ write them;
//! - each packs the values in the order the kernels' threads read them (one 128-bit shared memory
//!   load per thread and k-block, nibbles placed for a fast conversion), and turns zero points into
//!   the kernels' additive zeros `z = -s · zp`, rounded once to the activations' type.
//!
//! At a few tokens ([`GEMV_TOKENS`]) a plan takes the decode GEMV ([`WEIGHT_ONLY_GEMV`]) rather
//! than a CUTLASS kernel: a hand-written kernel that streams the same packed weight into shared
//! memory (`cp.async`) and multiplies it with `mma.sync` (the packed 16 x 16 block is exactly a
//! warp's A operand), and computes every fused epilogue, in one launch without a workspace. It
//! feeds the stored 4-bit values to the MMA as they are and applies each group's scale (and zero)
//! to the f32 sums, so it computes with the exact dequantized values `q · s + z` where the CUTLASS
//! kernels round each of them to the activations' type first. FP8 and int8 weights take a kernel of
//! their own in the same entry point: it loads the row-major bytes straight into registers, turns
//! them into 16-bit values with a few logic operations and one multiplication (e4m3) or
//! subtraction (s8) a pair (exactly),
//! multiplies them with `mma.sync`, and applies each row's scale to the f32 sum. It reads e4m3's
//! NaN byte (0x7F, 0xFF) as ±480; a row holding one gets the scale NaN when the weight is made
//! (`from_fp8`, `quantize_fp8`), so it gives NaN there as in the CUTLASS kernels.
//!
//! [`crate::reference::weight_only`] dequantizes exactly as the CUTLASS kernels do;
//! [`crate::reference::weight_only_gemv_error`] (4-bit weights) and
//! [`crate::reference::fp8_weight_gemv_error`] (FP8 weights) and
//! [`crate::reference::int8_weight_gemv_error`] (int8 weights) bound how far the GEMV may be from
//! it.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use cutlass_gemm_catalog::{DataType, KernelSpec, MixedInputMode, TileScheduler};
use cutlass_gemm_sys::cutlass_rs_weight_only_args;

use crate::error::{
    overlaps, require_device, require_len, BuildHint, Error, Extent, KernelRule, OperandName,
    ProblemRule, Quantity, Result, Scalar, WeightRule,
};
use crate::ffi::{
    check_status, hand_written_runs_on, weight_gemv, DeviceInfo, WeightOnlyKernel, WEIGHT_ONLY_GEMV,
};
use crate::plans::epilogue::{BiasAxis, Epilogue, EpilogueOperands};
use crate::plans::gemm::{workspace_ptr, Workspace, POINTER_ALIGNMENT};
use crate::plans::problem::MAX_EXTENT;
use crate::quantize::QuantInput;
use crate::selection::{
    built_weight_only_kernels, named_in_registry, named_in_registry_any_arch, registry_pool,
};

/// Rows of the weight (n) are a multiple of this: the packed order's block.
pub const WEIGHT_ROWS_MULTIPLE: usize = cutlass_gemm_sys::CUTLASS_RS_WEIGHT_PACK_ROWS as usize;
/// Columns of the weight (k) and group sizes are multiples of this: the kernels' tile k.
pub const WEIGHT_K_MULTIPLE: usize = 64;

/// The order a weight's values are stored in: which kernels read it. The constructors store 4-bit
/// weights [`WeightOrder::Packed`], FP8 and int8 ones [`WeightOrder::Plain`];
/// [`QuantizedWeight::set_order`] puts a 4-bit weight in the other order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WeightOrder {
    /// 4-bit values in the packed order the SM90 weight-only kernels and the decode GEMV read
    /// (`cutlass_rs_weight_pack`: one 128-bit shared-memory load per thread and k-block).
    Packed,
    /// CUTLASS's plain order, `n x k` row-major (K-major), as quantized: two 4-bit values a byte,
    /// the even column in the low nibble; one byte a value for FP8 and int8 weights. What the SM100
    /// weight-only kernels read (their transform warps convert the values in shared memory).
    Plain,
}

impl WeightOrder {
    /// The order a kernel reads (for 4-bit weights its `_shfl` suffix says packed).
    pub fn of_kernel(spec: &KernelSpec) -> WeightOrder {
        if spec.mixed_input.is_some_and(|m| m.shuffled) {
            WeightOrder::Packed
        } else {
            WeightOrder::Plain
        }
    }

    /// The order the constructors store a weight of this format in.
    pub fn of_format(format: WeightFormat) -> WeightOrder {
        if format.is_per_channel() {
            WeightOrder::Plain
        } else {
            WeightOrder::Packed
        }
    }
}

impl std::fmt::Display for WeightOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WeightOrder::Packed => "the packed order (SM90 kernels, decode GEMV)",
            WeightOrder::Plain => "the plain order (K-major as quantized; SM100 kernels)",
        })
    }
}

/// The activation types of the weight-only kernels: bf16 and f16.
pub trait WeightOnlyInput: QuantInput + cudarc::driver::ValidAsZeroBits {}
impl WeightOnlyInput for half::bf16 {}
impl WeightOnlyInput for half::f16 {}

/// How a weight is quantized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// Signed 4-bit values in [-8, 7] times a scale per group: `w = q · s`.
    Symmetric,
    /// Unsigned 4-bit values in [0, 15], a scale and a zero point per group:
    /// `w = (q - zp) · s`, computed as `q · s + z` with `z = -s · zp` (GPTQ, AWQ).
    ZeroPoint,
    /// FP8 e4m3 values, one byte each, times a scale per output channel (one group as long as
    /// k): `w = q · s`.
    Fp8,
    /// Signed 8-bit values (s8; [`QuantizedWeight::quantize_int8`] writes [-127, 127]) times a
    /// scale per output channel (one group as long as k): `w = q · s` (symmetric per-channel int8,
    /// "W8A16").
    Int8,
}

impl WeightFormat {
    /// The catalog's weight type and dequantization.
    pub fn catalog(self) -> (DataType, MixedInputMode) {
        match self {
            WeightFormat::Symmetric => (DataType::S4, MixedInputMode::ScaleOnly),
            WeightFormat::ZeroPoint => (DataType::U4, MixedInputMode::ScaleWithZeroPoint),
            WeightFormat::Fp8 => cutlass_gemm_catalog::catalog::WEIGHT_ONLY_FP8_FORMAT,
            WeightFormat::Int8 => cutlass_gemm_catalog::catalog::WEIGHT_ONLY_INT8_FORMAT,
        }
    }

    fn has_zeros(self) -> bool {
        self == WeightFormat::ZeroPoint
    }

    /// Whether the format has one byte a value, stored row-major, and one scale per output
    /// channel (`group_size == k`): [`WeightFormat::Fp8`] and [`WeightFormat::Int8`].
    pub fn is_per_channel(self) -> bool {
        matches!(self, WeightFormat::Fp8 | WeightFormat::Int8)
    }

    /// The decode GEMV's code for the format (`CUTLASS_RS_WEIGHT_GEMV_*`).
    fn gemv_code(self) -> i32 {
        match self {
            WeightFormat::Symmetric => cutlass_gemm_sys::CUTLASS_RS_WEIGHT_GEMV_S4,
            WeightFormat::ZeroPoint => cutlass_gemm_sys::CUTLASS_RS_WEIGHT_GEMV_U4_ZEROS,
            WeightFormat::Fp8 => cutlass_gemm_sys::CUTLASS_RS_WEIGHT_GEMV_E4M3,
            WeightFormat::Int8 => cutlass_gemm_sys::CUTLASS_RS_WEIGHT_GEMV_S8,
        }
    }

    /// Bytes the values of an `n x k` weight take (two 4-bit values a byte, one e4m3 or s8).
    pub fn value_bytes(self, n: usize, k: usize) -> usize {
        if self.is_per_channel() {
            n * k
        } else {
            n * k / 2
        }
    }
}

impl std::fmt::Display for WeightFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WeightFormat::Symmetric => "4-bit with scales only",
            WeightFormat::ZeroPoint => "4-bit with scales and zero points",
            WeightFormat::Fp8 => "FP8 (e4m3) with a scale per output channel",
            WeightFormat::Int8 => "int8 (s8) with a scale per output channel",
        })
    }
}

/// The C signature of the per-channel quantizers (`cutlass_rs_weight_quantize_fp8`, `_int8`).
type QuantizeRowsFn = unsafe extern "C" fn(
    *const std::ffi::c_void,
    i64,
    i32,
    i64,
    i64,
    *mut std::ffi::c_void,
    *mut std::ffi::c_void,
    *mut std::ffi::c_void,
) -> i32;

/// Checks an FP8 or int8 weight's group: one per output channel, `group_size == k`.
fn check_per_channel_group(k: usize, group_size: usize) -> Result<()> {
    if group_size == k {
        return Ok(());
    }
    Err(Error::InvalidProblem {
        reason: ProblemRule::Weight {
            rule: WeightRule::PerChannel { group_size, k },
        },
    })
}

/// Checks the extents of a quantized weight: n a multiple of [`WEIGHT_ROWS_MULTIPLE`], k of
/// [`WEIGHT_K_MULTIPLE`], the group size a multiple of [`WEIGHT_K_MULTIPLE`] that divides k, all
/// within `i32::MAX`, and n · k too (the packed order's index is 32-bit).
pub fn check_weight_extents(n: usize, k: usize, group_size: usize) -> Result<()> {
    for (extent, v) in [(Extent::N, n), (Extent::K, k)] {
        let reason = if v == 0 {
            ProblemRule::ZeroExtent(extent)
        } else if v > MAX_EXTENT {
            ProblemRule::ExtentTooLarge { extent, value: v }
        } else {
            continue;
        };
        return Err(Error::InvalidProblem { reason });
    }
    let rule = if n % WEIGHT_ROWS_MULTIPLE != 0 {
        Some(WeightRule::Rows {
            n,
            multiple: WEIGHT_ROWS_MULTIPLE,
        })
    } else if k % WEIGHT_K_MULTIPLE != 0 {
        Some(WeightRule::Columns {
            k,
            multiple: WEIGHT_K_MULTIPLE,
        })
    } else if group_size == 0 || group_size % WEIGHT_K_MULTIPLE != 0 || k % group_size != 0 {
        Some(WeightRule::GroupSize { group_size, k })
    } else if n.saturating_mul(k) > MAX_EXTENT {
        Some(WeightRule::Values {
            values: n.saturating_mul(k),
            max: MAX_EXTENT,
        })
    } else {
        None
    };
    match rule {
        Some(rule) => Err(Error::InvalidProblem {
            reason: ProblemRule::Weight { rule },
        }),
        None => Ok(()),
    }
}

/// A layer's weight quantized to 4 bits (packed for the weight-only kernels) or to FP8 or int8 (as
/// stored), on one device.
#[derive(Debug)]
pub struct QuantizedWeight<T: WeightOnlyInput> {
    packed: CudaSlice<u8>,
    scales: CudaSlice<T>,
    zeros: Option<CudaSlice<T>>,
    n: usize,
    k: usize,
    group_size: usize,
    format: WeightFormat,
    order: WeightOrder,
}

impl<T: WeightOnlyInput> QuantizedWeight<T> {
    /// Quantizes a bf16/f16 weight (`n x k` row-major, `w.len() >= n * k`) group-wise on `stream`:
    /// per group of `group_size` columns of a row, symmetric (`s = max|w| / 7`, `q =
    /// clamp(round(w / s), -8, 7)`) or with zero points (`s = (max - min) / 15`, `zp =
    /// clamp(round(-min / s), 0, 15)`, `q = clamp(round(w / s) + zp, 0, 15)`; the group's range
    /// includes 0). Scales are rounded to `T` before the values are computed from them; a group
    /// of zeros gets the scale 1. A group holding NaN or ±Inf, which 4 bits cannot hold, gets the
    /// scale NaN, the zero point 0 and the values -8 (0 with zero points), so that its row of the
    /// GEMM's output is NaN. [`WeightFormat::Fp8`] and [`WeightFormat::Int8`] take
    /// `group_size == k` ([`QuantizedWeight::quantize_fp8`], [`QuantizedWeight::quantize_int8`]).
    pub fn quantize(
        stream: &Arc<CudaStream>,
        w: &dyn DevicePtr<T>,
        n: usize,
        k: usize,
        group_size: usize,
        format: WeightFormat,
    ) -> Result<Self> {
        check_weight_extents(n, k, group_size)?;
        if format.is_per_channel() {
            check_per_channel_group(k, group_size)?;
            return Self::quantize_per_channel(stream, w, n, k, format);
        }
        let device = stream.context().ordinal();
        require_device(OperandName::B, w, device)?;
        require_len(OperandName::B, w.len(), n * k)?;
        crate::error::require_stream(stream, device)?;
        let groups = k / group_size;
        let mut plain = stream.alloc_zeros::<u8>(n * k / 2)?;
        let mut scales = stream.alloc_zeros::<T>(groups * n)?;
        let mut zp = stream.alloc_zeros::<u8>(if format.has_zeros() { groups * n } else { 1 })?;
        {
            let (pw, _gw) = w.device_ptr(stream);
            let (pq, _gq) = plain.device_ptr_mut(stream);
            let (ps, _gs) = scales.device_ptr_mut(stream);
            let (pz, _gz) = zp.device_ptr_mut(stream);
            // SAFETY: w holds n * k values (checked); q, the scales and the zero points were
            // allocated above for these extents on the stream's device, bound to this thread.
            check_status("cutlass_rs_weight_quantize", unsafe {
                cutlass_gemm_sys::cutlass_rs_weight_quantize(
                    pw as *const _,
                    k as i64,
                    T::DTYPE,
                    n as i64,
                    k as i64,
                    group_size as i64,
                    i32::from(format.has_zeros()),
                    pq as *mut _,
                    ps as *mut _,
                    pz as *mut _,
                    stream.cu_stream() as *mut _,
                )
            })?;
        }
        let zero_points = format.has_zeros().then_some(&zp);
        Self::assemble(
            stream,
            SourceValues::Plain(&plain),
            scales,
            zero_points.map(ZeroPoints::Plain),
            n,
            k,
            group_size,
            format,
        )
    }

    /// Quantizes a bf16/f16 weight (`n x k` row-major, `w.len() >= n * k`) to FP8 e4m3 with one
    /// scale per output channel (row), on `stream`: `s = max|w| / 448` rounded to `T` (a row of
    /// zeros gets 1, as does a scale that would round to 0 or overflow), `q =
    /// e4m3(w / s)`, rounded to nearest even and saturated to ±448 (`__NV_SATFINITE`). A row
    /// holding NaN or ±Inf gets the scale NaN and the values 0x7F (e4m3's NaN), so that its row of
    /// the GEMM's output is NaN. Values are stored as they are, row-major
    /// ([`WeightFormat::Fp8`]).
    pub fn quantize_fp8(
        stream: &Arc<CudaStream>,
        w: &dyn DevicePtr<T>,
        n: usize,
        k: usize,
    ) -> Result<Self> {
        Self::quantize_per_channel(stream, w, n, k, WeightFormat::Fp8)
    }

    /// Quantizes a bf16/f16 weight (`n x k` row-major, `w.len() >= n * k`) to int8 with one scale
    /// per output channel (row), symmetric, on `stream`: `s = max|w| / 127` rounded to `T` (a row
    /// of zeros gets 1, as does a scale that would round to 0 or overflow), `q = clamp(round(w /
    /// s), -127, 127)`, rounded to nearest even. A row holding NaN or ±Inf gets the scale NaN
    /// (and the values 0), so that its row of the GEMM's output is NaN. Values are stored as they
    /// are, row-major ([`WeightFormat::Int8`]).
    pub fn quantize_int8(
        stream: &Arc<CudaStream>,
        w: &dyn DevicePtr<T>,
        n: usize,
        k: usize,
    ) -> Result<Self> {
        Self::quantize_per_channel(stream, w, n, k, WeightFormat::Int8)
    }

    fn quantize_per_channel(
        stream: &Arc<CudaStream>,
        w: &dyn DevicePtr<T>,
        n: usize,
        k: usize,
        format: WeightFormat,
    ) -> Result<Self> {
        check_weight_extents(n, k, k)?;
        let device = stream.context().ordinal();
        require_device(OperandName::B, w, device)?;
        require_len(OperandName::B, w.len(), n * k)?;
        crate::error::require_stream(stream, device)?;
        let mut values = stream.alloc_zeros::<u8>(n * k)?;
        let mut scales = stream.alloc_zeros::<T>(n)?;
        {
            let (pw, _gw) = w.device_ptr(stream);
            let (pq, _gq) = values.device_ptr_mut(stream);
            let (ps, _gs) = scales.device_ptr_mut(stream);
            let (name, quantize): (_, QuantizeRowsFn) = if format == WeightFormat::Fp8 {
                (
                    "cutlass_rs_weight_quantize_fp8",
                    cutlass_gemm_sys::cutlass_rs_weight_quantize_fp8,
                )
            } else {
                (
                    "cutlass_rs_weight_quantize_int8",
                    cutlass_gemm_sys::cutlass_rs_weight_quantize_int8,
                )
            };
            // SAFETY: w holds n * k values (checked); the values (n * k bytes) and scales (n) were
            // allocated above on the stream's device, bound to this thread.
            check_status(name, unsafe {
                quantize(
                    pw as *const _,
                    k as i64,
                    T::DTYPE,
                    n as i64,
                    k as i64,
                    pq as *mut _,
                    ps as *mut _,
                    stream.cu_stream() as *mut _,
                )
            })?;
        }
        Ok(QuantizedWeight {
            packed: values,
            scales,
            zeros: None,
            n,
            k,
            group_size: k,
            format,
            order: WeightOrder::Plain,
        })
    }

    /// Takes an FP8 checkpoint's tensors: e4m3 values (`n x k` row-major, one byte each, as
    /// stored) and one scale per output channel (`n` values of `T`: convert a checkpoint's f32
    /// scales first; a per-tensor scale is `n` equal ones). Copies both on `stream`; a row holding
    /// e4m3's NaN byte (0x7F, 0xFF) gets the scale NaN in the copy, so that every kernel gives NaN
    /// for that row of the output (the decode GEMV reads the bytes as finite values; the weight
    /// cannot change after this check).
    pub fn from_fp8(
        stream: &Arc<CudaStream>,
        values: &(impl DevicePtr<u8> + ?Sized),
        scales: &CudaSlice<T>,
        n: usize,
        k: usize,
    ) -> Result<Self> {
        let copy = copy_values(stream, values, n, k)?;
        let mut scales = copy_scales(stream, scales, n)?;
        {
            let (pq, _gq) = copy.device_ptr(stream);
            let (ps, _gs) = scales.device_ptr_mut(stream);
            // SAFETY: both were allocated above for n x k bytes and n scales on the stream's
            // device.
            check_status("cutlass_rs_weight_fp8_nan_rows", unsafe {
                cutlass_gemm_sys::cutlass_rs_weight_fp8_nan_rows(
                    pq as *const _,
                    n as i64,
                    k as i64,
                    T::DTYPE,
                    ps as *mut _,
                    stream.cu_stream() as *mut _,
                )
            })?;
        }
        Ok(QuantizedWeight {
            packed: copy,
            scales,
            zeros: None,
            n,
            k,
            group_size: k,
            format: WeightFormat::Fp8,
            order: WeightOrder::Plain,
        })
    }

    /// Takes an int8 checkpoint's tensors: s8 values (`n x k` row-major, as stored) and one scale
    /// per output channel (`n` values of `T`: convert a checkpoint's f32 scales first; a
    /// per-tensor scale is `n` equal ones), for symmetric per-channel int8 weights
    /// ([`WeightFormat::Int8`]; every s8 value, -128 included, is read as it is). Copies both on
    /// `stream`.
    pub fn from_int8(
        stream: &Arc<CudaStream>,
        values: &(impl DevicePtr<i8> + ?Sized),
        scales: &CudaSlice<T>,
        n: usize,
        k: usize,
    ) -> Result<Self> {
        let copy = copy_values(stream, values, n, k)?;
        let scales = copy_scales(stream, scales, n)?;
        Ok(QuantizedWeight {
            packed: copy,
            scales,
            zeros: None,
            n,
            k,
            group_size: k,
            format: WeightFormat::Int8,
            order: WeightOrder::Plain,
        })
    }

    /// Takes unsigned 4-bit values in CUTLASS's plain order (`n x k`, two per byte, the even
    /// column in the low nibble: `n * k / 2` bytes), scales (`(k / group_size) x n` row-major) and
    /// zero points (`(k / group_size) x n` bytes, each in [0, 15]); `zero_points: None` reads the
    /// values as signed ([`WeightFormat::Symmetric`]: the nibbles are two's complement).
    pub fn from_plain(
        stream: &Arc<CudaStream>,
        values: &CudaSlice<u8>,
        scales: &CudaSlice<T>,
        zero_points: Option<&CudaSlice<u8>>,
        n: usize,
        k: usize,
        group_size: usize,
    ) -> Result<Self> {
        check_weight_extents(n, k, group_size)?;
        let groups = k / group_size;
        require_len(OperandName::B, values.len(), n * k / 2)?;
        if let Some(z) = zero_points {
            require_len(OperandName::Zeros, z.len(), groups * n)?;
        }
        let format = match zero_points {
            Some(_) => WeightFormat::ZeroPoint,
            None => WeightFormat::Symmetric,
        };
        Self::assemble(
            stream,
            SourceValues::Plain(values),
            copy_scales(stream, scales, groups * n)?,
            zero_points.map(ZeroPoints::Plain),
            n,
            k,
            group_size,
            format,
        )
    }

    /// Takes a GPTQ checkpoint's tensors: `qweight` (`k / 8 x n` i32, eight values of a column per
    /// word), `qzeros` (`groups x n / 8` i32), `scales` (`groups x n`, of `T`: cast a checkpoint's
    /// f16 scales first for bf16 activations) and, when the checkpoint has it, `g_idx` (the group
    /// of each column; act-order checkpoints, where it is not `column / group_size`, are refused).
    /// `zero_offset` is added to each stored zero point, modulo 16: 1 for checkpoints in GPTQ's
    /// original ("v1") format, which stores `zp - 1` in four bits (0 wrapping to 15), 0 for "v2".
    #[allow(clippy::too_many_arguments)]
    pub fn from_gptq(
        stream: &Arc<CudaStream>,
        qweight: &CudaSlice<i32>,
        qzeros: &CudaSlice<i32>,
        scales: &CudaSlice<T>,
        g_idx: Option<&[i32]>,
        n: usize,
        k: usize,
        group_size: usize,
        zero_offset: i32,
    ) -> Result<Self> {
        check_weight_extents(n, k, group_size)?;
        if let Some(g) = g_idx {
            check_group_index(g, k, group_size)?;
        }
        let groups = k / group_size;
        require_len(OperandName::B, qweight.len(), k / 8 * n)?;
        require_len(OperandName::Zeros, qzeros.len(), groups * n / 8)?;
        Self::assemble(
            stream,
            SourceValues::Gptq(qweight),
            copy_scales(stream, scales, groups * n)?,
            Some(ZeroPoints::Gptq(qzeros, zero_offset)),
            n,
            k,
            group_size,
            WeightFormat::ZeroPoint,
        )
    }

    /// Takes an AWQ checkpoint's tensors (its GEMM layout): `qweight` (`k x n / 8` i32, eight
    /// values of a row per word in AWQ's order 0 2 4 6 1 3 5 7), `qzeros` (`groups x n / 8` i32, the
    /// same order) and `scales` (`groups x n`, of `T`).
    pub fn from_awq(
        stream: &Arc<CudaStream>,
        qweight: &CudaSlice<i32>,
        qzeros: &CudaSlice<i32>,
        scales: &CudaSlice<T>,
        n: usize,
        k: usize,
        group_size: usize,
    ) -> Result<Self> {
        check_weight_extents(n, k, group_size)?;
        let groups = k / group_size;
        require_len(OperandName::B, qweight.len(), k * n / 8)?;
        require_len(OperandName::Zeros, qzeros.len(), groups * n / 8)?;
        Self::assemble(
            stream,
            SourceValues::Awq(qweight),
            copy_scales(stream, scales, groups * n)?,
            Some(ZeroPoints::Awq(qzeros)),
            n,
            k,
            group_size,
            WeightFormat::ZeroPoint,
        )
    }

    /// Packs the values and computes the zeros.
    #[allow(clippy::too_many_arguments)]
    fn assemble(
        stream: &Arc<CudaStream>,
        values: SourceValues<'_>,
        scales: CudaSlice<T>,
        zero_points: Option<ZeroPoints<'_>>,
        n: usize,
        k: usize,
        group_size: usize,
        format: WeightFormat,
    ) -> Result<Self> {
        let device = stream.context().ordinal();
        let (format_code, source): (i32, &dyn DevicePtr<u8>) = match values {
            SourceValues::Plain(v) => (cutlass_gemm_sys::CUTLASS_RS_WEIGHT_FORMAT_PLAIN, v),
            SourceValues::Gptq(v) => (
                cutlass_gemm_sys::CUTLASS_RS_WEIGHT_FORMAT_GPTQ,
                &ByteView(v),
            ),
            SourceValues::Awq(v) => (cutlass_gemm_sys::CUTLASS_RS_WEIGHT_FORMAT_AWQ, &ByteView(v)),
        };
        require_device(OperandName::B, source, device)?;
        require_device(OperandName::Scales, &scales, device)?;
        crate::error::require_stream(stream, device)?;
        let mut packed = stream.alloc_zeros::<u8>(n * k / 2)?;
        {
            let (ps, _gs) = source.device_ptr(stream);
            let (pp, _gp) = packed.device_ptr_mut(stream);
            // SAFETY: the source holds the n x k values of its format (lengths checked by the
            // constructors), packed n * k / 2 bytes; both on the stream's device.
            check_status("cutlass_rs_weight_pack", unsafe {
                cutlass_gemm_sys::cutlass_rs_weight_pack(
                    format_code,
                    ps as *const _,
                    pp as *mut _,
                    n as i64,
                    k as i64,
                    0,
                    stream.cu_stream() as *mut _,
                )
            })?;
        }
        let groups = k / group_size;
        let zeros = match zero_points {
            None => None,
            Some(zp) => {
                let (code, offset, words): (i32, i32, &dyn DevicePtr<u8>) = match zp {
                    ZeroPoints::Plain(z) => {
                        (cutlass_gemm_sys::CUTLASS_RS_WEIGHT_FORMAT_PLAIN, 0, z)
                    }
                    ZeroPoints::Gptq(z, offset) => (
                        cutlass_gemm_sys::CUTLASS_RS_WEIGHT_FORMAT_GPTQ,
                        offset,
                        &ByteView(z),
                    ),
                    ZeroPoints::Awq(z) => (
                        cutlass_gemm_sys::CUTLASS_RS_WEIGHT_FORMAT_AWQ,
                        0,
                        &ByteView(z),
                    ),
                };
                require_device(OperandName::Zeros, words, device)?;
                let mut zeros = stream.alloc_zeros::<T>(groups * n)?;
                {
                    let (pz, _gz) = words.device_ptr(stream);
                    let (ps, _gs) = scales.device_ptr(stream);
                    let (po, _go) = zeros.device_ptr_mut(stream);
                    // SAFETY: the zero points hold groups x n values of their format, the scales
                    // and zeros groups * n of T (checked or allocated so); same device.
                    check_status("cutlass_rs_weight_zeros", unsafe {
                        cutlass_gemm_sys::cutlass_rs_weight_zeros(
                            code,
                            pz as *const _,
                            ps as *const _,
                            po as *mut _,
                            T::DTYPE,
                            groups as i64,
                            n as i64,
                            offset,
                            stream.cu_stream() as *mut _,
                        )
                    })?;
                }
                Some(zeros)
            }
        };
        Ok(QuantizedWeight {
            packed,
            scales,
            zeros,
            n,
            k,
            group_size,
            format,
            order: WeightOrder::Packed,
        })
    }

    /// Rows (the layer's outputs).
    pub fn n(&self) -> usize {
        self.n
    }

    /// Columns (the layer's inputs).
    pub fn k(&self) -> usize {
        self.k
    }

    /// Columns per scale.
    pub fn group_size(&self) -> usize {
        self.group_size
    }

    /// How the weight is quantized.
    pub fn format(&self) -> WeightFormat {
        self.format
    }

    /// The order the values are stored in.
    pub fn order(&self) -> WeightOrder {
        self.order
    }

    /// Puts the weight's values in `order` (nothing to do when they are), on `stream`, bit for bit:
    /// a 4-bit weight goes from the packed order of the SM90 kernels and the decode GEMV to the
    /// plain one of the SM100 kernels and back. FP8 and int8 weights have the plain order only
    /// ([`WeightRule::Order`]). On an error the weight is unchanged.
    pub fn set_order(&mut self, stream: &Arc<CudaStream>, order: WeightOrder) -> Result<()> {
        if order == self.order {
            return Ok(());
        }
        if self.format.is_per_channel() {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::Weight {
                    rule: WeightRule::Order {
                        weight: self.order,
                        required: order,
                    },
                },
            });
        }
        let device = stream.context().ordinal();
        require_device(OperandName::B, &self.packed, device)?;
        crate::error::require_stream(stream, device)?;
        let mut values = stream.alloc_zeros::<u8>(self.n * self.k / 2)?;
        {
            let (src, _gs) = self.packed.device_ptr(stream);
            let (dst, _gd) = values.device_ptr_mut(stream);
            let (n, k, s) = (self.n as i64, self.k as i64, stream.cu_stream() as *mut _);
            // SAFETY: both buffers hold the n x k 4-bit values (n * k / 2 bytes: allocated so) on
            // the stream's device; the extents passed the weight's rules when it was made.
            let (function, status) = unsafe {
                match order {
                    WeightOrder::Plain => (
                        "cutlass_rs_weight_unpack",
                        cutlass_gemm_sys::cutlass_rs_weight_unpack(
                            src as *const _,
                            dst as *mut _,
                            n,
                            k,
                            s,
                        ),
                    ),
                    WeightOrder::Packed => (
                        "cutlass_rs_weight_pack",
                        cutlass_gemm_sys::cutlass_rs_weight_pack(
                            cutlass_gemm_sys::CUTLASS_RS_WEIGHT_FORMAT_PLAIN,
                            src as *const _,
                            dst as *mut _,
                            n,
                            k,
                            0,
                            s,
                        ),
                    ),
                }
            };
            check_status(function, status)?;
        }
        self.packed = values;
        self.order = order;
        Ok(())
    }

    /// The values as the kernels read them, in the weight's [`QuantizedWeight::order`]: 4-bit ones
    /// `n * k / 2` bytes (packed, or plain), FP8 and int8 ones as stored (`n * k` bytes,
    /// row-major).
    pub fn packed(&self) -> &CudaSlice<u8> {
        &self.packed
    }

    /// The scales, `(k / group_size) x n` row-major.
    pub fn scales(&self) -> &CudaSlice<T> {
        &self.scales
    }

    /// The additive zeros `z = -s · zp` (zero-point weights), `(k / group_size) x n` row-major.
    pub fn zeros(&self) -> Option<&CudaSlice<T>> {
        self.zeros.as_ref()
    }

    /// Bytes the weight occupies on the device (values, scales, zeros).
    pub fn device_bytes(&self) -> usize {
        let s = std::mem::size_of::<T>();
        self.packed.len() + self.scales.len() * s + self.zeros.as_ref().map_or(0, |z| z.len() * s)
    }
}

enum SourceValues<'a> {
    Plain(&'a CudaSlice<u8>),
    Gptq(&'a CudaSlice<i32>),
    Awq(&'a CudaSlice<i32>),
}

enum ZeroPoints<'a> {
    Plain(&'a CudaSlice<u8>),
    Gptq(&'a CudaSlice<i32>, i32),
    Awq(&'a CudaSlice<i32>),
}

/// An i32 slice read as its bytes (the packing kernels read checkpoints' words as raw bits).
struct ByteView<'a>(&'a CudaSlice<i32>);

impl DevicePtr<u8> for ByteView<'_> {
    fn device_ptr<'a>(
        &'a self,
        stream: &'a CudaStream,
    ) -> (
        cudarc::driver::sys::CUdeviceptr,
        cudarc::driver::SyncOnDrop<'a>,
    ) {
        self.0.device_ptr(stream)
    }
}

impl cudarc::driver::DeviceSlice<u8> for ByteView<'_> {
    fn len(&self) -> usize {
        self.0.len() * 4
    }
    fn stream(&self) -> &Arc<CudaStream> {
        self.0.stream()
    }
}

/// A copy of the first `n * k` one-byte values of an `n x k` per-channel weight (the weight owns
/// its buffers), after the extents', device's and length's rules.
fn copy_values<B>(
    stream: &Arc<CudaStream>,
    values: &(impl DevicePtr<B> + ?Sized),
    n: usize,
    k: usize,
) -> Result<CudaSlice<u8>> {
    debug_assert_eq!(std::mem::size_of::<B>(), 1);
    check_weight_extents(n, k, k)?;
    let device = stream.context().ordinal();
    require_device(OperandName::B, values, device)?;
    require_len(OperandName::B, values.len(), n * k)?;
    crate::error::require_stream(stream, device)?;
    let mut copy = stream.alloc_zeros::<u8>(n * k)?;
    {
        let (src, _gs) = values.device_ptr(stream);
        let (dst, _gd) = copy.device_ptr_mut(stream);
        // SAFETY: values holds at least n * k one-byte elements (checked above) and copy n * k
        // bytes, both on the stream's device, whose context the allocation bound to this thread.
        unsafe { cudarc::driver::result::memcpy_dtod_async(dst, src, n * k, stream.cu_stream()) }?;
    }
    Ok(copy)
}

/// A copy of the caller's scales (the weight owns its buffers).
fn copy_scales<T: WeightOnlyInput>(
    stream: &Arc<CudaStream>,
    scales: &CudaSlice<T>,
    len: usize,
) -> Result<CudaSlice<T>> {
    require_len(OperandName::Scales, scales.len(), len)?;
    require_device(OperandName::Scales, scales, stream.context().ordinal())?;
    let mut out = stream.alloc_zeros::<T>(len)?;
    stream.memcpy_dtod(&scales.slice(..len), &mut out)?;
    Ok(out)
}

/// GPTQ's `g_idx` must put column `i` in group `i / group_size` (no act-order). A group size of 0
/// is refused ([`WeightRule::GroupSize`]), a `g_idx` of another length than k too.
pub fn check_group_index(g_idx: &[i32], k: usize, group_size: usize) -> Result<()> {
    if group_size == 0 {
        return Err(Error::InvalidProblem {
            reason: ProblemRule::Weight {
                rule: WeightRule::GroupSize { group_size, k },
            },
        });
    }
    if g_idx.len() != k {
        return Err(Error::BufferTooSmall {
            operand: OperandName::GroupIndex,
            len: g_idx.len(),
            required: k,
        });
    }
    for (column, &group) in g_idx.iter().enumerate() {
        if i64::from(group) != (column / group_size) as i64 {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::Weight {
                    rule: WeightRule::ActOrder {
                        column,
                        group: i64::from(group),
                    },
                },
            });
        }
    }
    Ok(())
}

/// A weight-only GEMM's geometry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WeightOnlyProblem {
    /// Rows of X, C and Y (tokens).
    pub m: usize,
    /// Rows of the weight (the layer's outputs): columns of Y.
    pub n: usize,
    /// Columns of X and of the weight (the layer's inputs).
    pub k: usize,
    /// Columns per scale of the weight.
    pub group_size: usize,
    /// How the weight is quantized.
    pub format: WeightFormat,
    /// The order the weight's values are stored in (which kernels read it).
    pub order: WeightOrder,
    /// Multiplies the product.
    pub alpha: f32,
    /// Multiplies C.
    pub beta: f32,
}

impl WeightOnlyProblem {
    /// `m` tokens through an `n x k` weight quantized in groups of `group_size`, in the order the
    /// constructors store its format in ([`WeightOrder::of_format`]).
    pub fn new(
        m: usize,
        n: usize,
        k: usize,
        group_size: usize,
        format: WeightFormat,
    ) -> WeightOnlyProblem {
        WeightOnlyProblem {
            m,
            n,
            k,
            group_size,
            format,
            order: WeightOrder::of_format(format),
            alpha: 1.0,
            beta: 0.0,
        }
    }

    /// The problem of `m` tokens through this weight (its extents, format and order).
    pub fn for_weight<T: WeightOnlyInput>(m: usize, w: &QuantizedWeight<T>) -> WeightOnlyProblem {
        WeightOnlyProblem::new(m, w.n, w.k, w.group_size, w.format).with_order(w.order)
    }

    /// With the weight's values in `order`.
    pub fn with_order(mut self, order: WeightOrder) -> WeightOnlyProblem {
        self.order = order;
        self
    }

    /// With alpha and beta.
    pub fn with_scalars(mut self, alpha: f32, beta: f32) -> WeightOnlyProblem {
        self.alpha = alpha;
        self.beta = beta;
        self
    }

    /// Checks the rules that need no kernel: m at least 1 and at most `i32::MAX`, the weight's
    /// extents ([`check_weight_extents`]), finite scalars, m · k and m · n within `usize`, and an
    /// FP8 or int8 weight in the plain order.
    pub fn check(&self) -> Result<()> {
        let reason = if self.m == 0 {
            Some(ProblemRule::ZeroExtent(Extent::M))
        } else if self.m > MAX_EXTENT {
            Some(ProblemRule::ExtentTooLarge {
                extent: Extent::M,
                value: self.m,
            })
        } else if !self.alpha.is_finite() || !self.beta.is_finite() {
            Some(ProblemRule::NonFiniteScalars {
                alpha: Scalar(self.alpha),
                beta: Scalar(self.beta),
            })
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(Error::InvalidProblem { reason });
        }
        check_weight_extents(self.n, self.k, self.group_size)?;
        if self.format.is_per_channel() {
            check_per_channel_group(self.k, self.group_size)?;
            if self.order != WeightOrder::Plain {
                return Err(Error::InvalidProblem {
                    reason: ProblemRule::Weight {
                        rule: WeightRule::Order {
                            weight: self.order,
                            required: WeightOrder::Plain,
                        },
                    },
                });
            }
        }
        for (operand, a, b) in [
            (OperandName::A, self.m, self.k),
            (OperandName::D, self.m, self.n),
        ] {
            if a.checked_mul(b).is_none() {
                return Err(Error::InvalidProblem {
                    reason: ProblemRule::OperandReachOverflows { operand },
                });
            }
        }
        Ok(())
    }
}

/// Tokens up to which the library's choice is the decode GEMV ([`WEIGHT_ONLY_GEMV`]) rather than
/// a CUTLASS kernel, where this build has it for the device. Fitted on an H200 to Llama-3-8B's
/// and -70B's layers at 8 to 32 tokens (`docs/performance.md` scores other families): with 4-bit
/// weights, up to 16 tokens the GEMV ran 0.97–2.2x the best CUTLASS tile on every layer (below
/// 1.0x only on the 70B model's gate-and-up and qkv layers at 12–16 tokens, by 1–3 %); from 20 it
/// lost on every layer but the smallest (0.53–0.96x), where two token groups become three or four.
/// FP8 weights take the same bound (their GEMV ran 1.25–1.9x cuBLAS's bf16 GEMM up to 16 tokens,
/// where the CUTLASS FP8 kernels ran 0.9–1.6x).
pub const GEMV_TOKENS: usize = 16;

/// The most tokens the decode GEMV takes when named.
pub const GEMV_MAX_TOKENS: usize = cutlass_gemm_sys::CUTLASS_RS_WEIGHT_GEMV_MAX_TOKENS as usize;

/// What a weight-only plan launches.
#[derive(Debug, Clone, Copy)]
enum Engine {
    /// A CUTLASS mixed-input kernel of the registry.
    Kernel(WeightOnlyKernel),
    /// The hand-written decode GEMV ([`WEIGHT_ONLY_GEMV`]).
    Gemv,
}

/// A planned weight-only GEMM: activations, C and Y of `T` (bf16 or f16), a 4-bit, FP8 or int8 weight.
#[derive(Debug, Clone)]
pub struct WeightOnlyGemm<T: WeightOnlyInput> {
    problem: WeightOnlyProblem,
    device: DeviceInfo,
    engine: Engine,
    splits: u16,
    workspace_size: usize,
    /// The fused epilogue ([`WeightOnlyGemm::with_epilogue`]), in `y`'s orientation.
    epilogue: Epilogue,
    /// Whether the caller named the kernel.
    pinned: bool,
    _types: std::marker::PhantomData<T>,
}

impl<T: WeightOnlyInput> WeightOnlyGemm<T> {
    /// Plans on `ctx`'s device, choosing among the weight-only kernels of this build.
    pub fn new(ctx: &CudaContext, problem: &WeightOnlyProblem) -> Result<Self> {
        Self::plan(DeviceInfo::query(ctx)?, problem, None)
    }

    /// Plans with the weight-only kernel of this name.
    pub fn with_kernel(ctx: &CudaContext, problem: &WeightOnlyProblem, name: &str) -> Result<Self> {
        Self::plan(DeviceInfo::query(ctx)?, problem, Some(name))
    }

    /// Plans for a described device without touching it. Up to [`GEMV_TOKENS`] tokens the
    /// library's choice is the decode GEMV ([`WEIGHT_ONLY_GEMV`],
    /// part of the `weight-only` feature, built for every architecture of the build, no workspace), beyond a CUTLASS kernel of the `weight-only` feature (with a
    /// split-K factor where the output tiles are few: [`WeightOnlyGemm::splits`]). The GEMV can
    /// also be named, up to [`GEMV_MAX_TOKENS`] tokens. Rules, each a typed error: the problem's
    /// ([`WeightOnlyProblem::check`]); a weight-only kernel of this build for `T` and the weight's
    /// format that the device can run ([`Error::NoKernel`], naming the `weight-only` feature,
    /// otherwise; [`KernelRule::WeightOnly`] for a named kernel that is not one;
    /// [`KernelRule::GemvTokens`] for the GEMV named for more tokens than it takes).
    pub fn plan(
        device: DeviceInfo,
        problem: &WeightOnlyProblem,
        kernel: Option<&str>,
    ) -> Result<Self> {
        Self::plan_with(device, problem, kernel, Epilogue::NONE, false)
    }

    /// Plans with the named CUTLASS kernel even when `device` cannot run it: every check and
    /// [`WeightOnlyGemm::prepare`] work, a launch returns [`Error::ArchMismatch`]. For exercising
    /// the SM100 weight-only kernels' host path on another GPU.
    pub fn plan_any_arch(
        device: DeviceInfo,
        problem: &WeightOnlyProblem,
        kernel: &str,
    ) -> Result<Self> {
        Self::plan_with(device, problem, Some(kernel), Epilogue::NONE, true)
    }

    fn plan_with(
        device: DeviceInfo,
        problem: &WeightOnlyProblem,
        kernel: Option<&str>,
        epilogue: Epilogue,
        any_arch: bool,
    ) -> Result<Self> {
        problem.check()?;
        let named = kernel.is_some();
        // The GEMV belongs to the `weight-only` feature (a build without it names the feature)
        // and runs where the build compiled its hand-written kernels.
        let gemv_built =
            cutlass_gemm_sys::WEIGHT_GEMV_BUILT && hand_written_runs_on(device.compute_capability);
        let engine = match kernel {
            Some(WEIGHT_ONLY_GEMV) => {
                let gemv_order = WeightOrder::of_format(problem.format);
                if problem.order != gemv_order {
                    return Err(Error::KernelMismatch {
                        name: WEIGHT_ONLY_GEMV.into(),
                        reason: KernelRule::WeightOrder {
                            kernel: gemv_order,
                            plan: problem.order,
                        },
                    });
                }
                if problem.m > GEMV_MAX_TOKENS {
                    return Err(Error::KernelMismatch {
                        name: WEIGHT_ONLY_GEMV.into(),
                        reason: KernelRule::GemvTokens {
                            m: problem.m,
                            max: GEMV_MAX_TOKENS,
                        },
                    });
                }
                if !gemv_built {
                    return Err(gemv_not_built(&device, T::DATA_TYPE));
                }
                Engine::Gemv
            }
            None if gemv_built && gemv_serves(problem) => Engine::Gemv,
            _ => Engine::Kernel(select(
                &device,
                problem,
                T::DATA_TYPE,
                kernel,
                !epilogue.is_none(),
                any_arch,
            )?),
        };
        let mut plan = WeightOnlyGemm {
            problem: *problem,
            device,
            splits: match engine {
                Engine::Kernel(k) if !named => default_splits(&k.spec, problem, device.sm_count),
                _ => 0,
            },
            engine,
            workspace_size: 0,
            epilogue,
            pinned: named,
            _types: std::marker::PhantomData,
        };
        plan.workspace_size = plan.workspace_of()?;
        Ok(plan)
    }

    /// The plan's CUTLASS kernel (none for the decode GEMV).
    fn cutlass_kernel(&self) -> Option<WeightOnlyKernel> {
        match self.engine {
            Engine::Kernel(k) => Some(k),
            Engine::Gemv => None,
        }
    }

    /// The workspace the plan's kernel needs (none for the GEMV).
    fn workspace_of(&self) -> Result<usize> {
        self.cutlass_kernel()
            .map_or(Ok(0), |k| k.workspace_size_of(&self.args([0; 6], [0; 4])))
    }

    /// The plan with a fused epilogue: `y = act(alpha · row_scale[m] · col_scale[n] · (x ·
    /// dequant(w)ᵀ) + beta · c + bias)` computed in the kernel's epilogue (a Linear layer's bias
    /// per output feature, [`BiasAxis::PerColumn`], or per token; the activations; f32 scales per
    /// token and per output channel); launch it with [`WeightOnlyGemm::run_fused`]. A plan whose
    /// kernel has the fusion keeps it; otherwise the problem is planned again among the kernels
    /// with it (the `weight-only` feature's bf16 128x32, 128x128 and 128x256 ones) by the same
    /// rule, split-K factor included. The decode GEMV computes every epilogue. A kernel named by
    /// the caller is kept, or refused ([`KernelRule::NoFusedEpilogue`]).
    pub fn with_epilogue(self, epilogue: Epilogue) -> Result<Self> {
        crate::plans::epilogue::refuse_aux_output(&epilogue)?;
        // The fused weight-only kernels and the GEMV read a bias of the activations' type.
        if let Some(required) = epilogue
            .bias_type(T::DATA_TYPE)
            .filter(|&t| t != T::DATA_TYPE)
        {
            return Err(Error::KernelMismatch {
                name: self.kernel_name().into(),
                reason: KernelRule::BiasType {
                    kernel: T::DATA_TYPE,
                    required,
                },
            });
        }
        let fused = self
            .cutlass_kernel()
            .is_none_or(|k| k.spec.fusion.is_fused());
        if fused || epilogue.is_none() {
            return Ok(WeightOnlyGemm { epilogue, ..self });
        }
        let kernel = self.pinned.then_some(self.kernel_name());
        Self::plan_with(self.device, &self.problem, kernel, epilogue, false)
    }

    /// The plan's fused epilogue ([`Epilogue::NONE`] unless [`WeightOnlyGemm::with_epilogue`]
    /// set one).
    pub fn epilogue(&self) -> Epilogue {
        self.epilogue
    }

    /// With a split-K factor for a stream-K kernel (`splits > 1` replaces CUTLASS's stream-K
    /// decomposition; 0 or 1 restores it). A kernel of another scheduler, and the decode GEMV,
    /// refuse it ([`KernelRule::SplitKNeedsStreamK`]).
    pub fn with_splits(mut self, splits: u16) -> Result<Self> {
        let stream_k = self
            .cutlass_kernel()
            .is_some_and(|k| k.spec.tile_scheduler == TileScheduler::StreamK);
        if splits > 1 && !stream_k {
            return Err(Error::KernelMismatch {
                name: self.kernel_name().into(),
                reason: KernelRule::SplitKNeedsStreamK { splits },
            });
        }
        self.splits = splits;
        self.workspace_size = self.workspace_of()?;
        Ok(self)
    }

    /// The chosen kernel's name: a catalog entry's, or [`WEIGHT_ONLY_GEMV`].
    pub fn kernel_name(&self) -> &'static str {
        self.cutlass_kernel().map_or(WEIGHT_ONLY_GEMV, |k| k.name)
    }

    /// Whether the plan launches the decode GEMV ([`WEIGHT_ONLY_GEMV`]) rather than a CUTLASS
    /// kernel.
    pub fn is_gemv(&self) -> bool {
        matches!(self.engine, Engine::Gemv)
    }

    /// The split-K factor ([`WeightOnlyGemm::with_splits`]; 0 for the kernel's own decomposition).
    pub fn splits(&self) -> u16 {
        self.splits
    }

    /// The problem planned for.
    pub fn problem(&self) -> &WeightOnlyProblem {
        &self.problem
    }

    /// Bytes of workspace a launch needs (stream-K's partial tiles).
    pub fn workspace_size(&self) -> usize {
        self.workspace_size
    }

    /// Runs the kernel's host path up to the launch (CUTLASS's checks and kernel parameters, TMA
    /// descriptors included; the GEMV's argument checks) over placeholder pointers: what a device
    /// that cannot run the kernel still proves.
    pub fn prepare(&self) -> Result<()> {
        // Placeholder device addresses, 256-byte aligned, never dereferenced.
        let fake = 1u64 << 40;
        // The kernel takes zeros exactly when it reads them.
        let zeros = if self.problem.format.has_zeros() {
            fake
        } else {
            0
        };
        let args = self.args([fake, fake, fake, zeros, fake, fake], [0; 4]);
        let workspace = if self.workspace_size > 0 { fake } else { 0 };
        match self.engine {
            // SAFETY: prepare encodes the addresses into TMA descriptors and never dereferences
            // them.
            Engine::Kernel(k) => unsafe { k.prepare_abi(&args, workspace, self.workspace_size) },
            // SAFETY: without a stream the GEMV only checks its arguments.
            Engine::Gemv => unsafe {
                weight_gemv(&args, T::DTYPE, self.problem.format.gemv_code(), None)
            },
        }
    }

    /// Checks the buffers and launches `y = alpha · x · dequant(w)ᵀ + beta · c` on `stream`. Rules
    /// checked first, each a typed error naming the operand: the weight's extents, format and order
    /// the plan's ([`WeightRule::Extents`], [`WeightRule::Format`], [`WeightRule::Order`]); every
    /// buffer and the stream on
    /// the plan's device; x holding `m x k`, c and y `m x n`; 16-byte aligned x, c, y and
    /// workspace; y overlapping no input but c; c given when beta is not 0. A plan with a fused
    /// epilogue that needs vectors refuses it ([`ProblemRule::EpilogueOperandMissing`]: use
    /// [`WeightOnlyGemm::run_fused`]).
    pub fn run(
        &self,
        stream: &Arc<CudaStream>,
        x: &dyn DevicePtr<T>,
        w: &QuantizedWeight<T>,
        c: Option<&dyn DevicePtr<T>>,
        y: &mut dyn DevicePtrMut<T>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        self.run_fused(stream, x, w, c, y, &EpilogueOperands::default(), workspace)
    }

    /// [`WeightOnlyGemm::run`] with the fused epilogue's vectors ([`EpilogueOperands`], in `y`'s
    /// orientation: a bias per column is per output feature, `n` values of `T`; row scales per
    /// token, `m` f32; column scales per output channel, `n` f32): exactly those the plan's
    /// [`Epilogue`] names, each long enough, 16-byte aligned, on the plan's device and clear of
    /// `y` (typed errors naming `Bias`, `RowScales` or `ColScales`).
    #[allow(clippy::too_many_arguments)]
    pub fn run_fused(
        &self,
        stream: &Arc<CudaStream>,
        x: &dyn DevicePtr<T>,
        w: &QuantizedWeight<T>,
        c: Option<&dyn DevicePtr<T>>,
        y: &mut dyn DevicePtrMut<T>,
        operands: &EpilogueOperands<'_, T>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        let p = &self.problem;
        if (w.n, w.k, w.group_size) != (p.n, p.k, p.group_size) {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::Weight {
                    rule: WeightRule::Extents {
                        weight: (w.n, w.k, w.group_size),
                        plan: (p.n, p.k, p.group_size),
                    },
                },
            });
        }
        if w.format != p.format {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::Weight {
                    rule: WeightRule::Format {
                        weight: w.format,
                        plan: p.format,
                    },
                },
            });
        }
        if w.order != p.order {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::Weight {
                    rule: WeightRule::Order {
                        weight: w.order,
                        required: p.order,
                    },
                },
            });
        }
        let device = self.device.ordinal;
        crate::error::require_stream(stream, device)?;
        if let Some(k) = self.cutlass_kernel() {
            crate::error::require_arch(k.name, k.spec.arch, self.device.compute_capability)?;
        }
        require_device(OperandName::A, x, device)?;
        require_device(OperandName::B, &w.packed, device)?;
        require_device(OperandName::Scales, &w.scales, device)?;
        if let Some(z) = &w.zeros {
            require_device(OperandName::Zeros, z, device)?;
        }
        if let Some(c) = c {
            require_device(OperandName::C, c, device)?;
        }
        require_device(OperandName::D, y, device)?;
        require_len(OperandName::A, x.len(), p.m * p.k)?;
        if let Some(c) = c {
            require_len(OperandName::C, c.len(), p.m * p.n)?;
        }
        require_len(OperandName::D, y.len(), p.m * p.n)?;
        if c.is_none() && p.beta != 0.0 {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::BetaWithoutC {
                    beta: Scalar(p.beta),
                },
            });
        }
        let (px, _gx) = x.device_ptr(stream);
        let (pw, _gw) = w.packed.device_ptr(stream);
        let (ps, _gs) = w.scales.device_ptr(stream);
        let zeros = w.zeros.as_ref().map(|z| z.device_ptr(stream));
        let c = c.map(|c| c.device_ptr(stream));
        let (py, _gy) = y.device_ptr_mut(stream);
        let pc = c.as_ref().map(|(p, _)| *p);
        let pz = zeros.as_ref().map(|(p, _)| *p);
        for (operand, ptr) in [
            (OperandName::A, Some(px)),
            (OperandName::C, pc),
            (OperandName::D, Some(py)),
        ] {
            if let Some(ptr) = ptr {
                crate::error::require_aligned(operand, Quantity::Pointer, ptr, POINTER_ALIGNMENT)?;
            }
        }
        let size = std::mem::size_of::<T>() as u64;
        let y_range = (py, (p.m * p.n) as u64 * size);
        for (input, range) in [
            (OperandName::A, Some((px, (p.m * p.k) as u64 * size))),
            (
                OperandName::C,
                pc.filter(|&c| c != py)
                    .map(|c| (c, (p.m * p.n) as u64 * size)),
            ),
        ] {
            if range.is_some_and(|r| overlaps(r, y_range)) {
                return Err(Error::Aliasing {
                    output: OperandName::D,
                    input,
                });
            }
        }
        // The epilogue's vectors: devices, then lengths, alignment and aliasing against y.
        operands.check(&self.epilogue, T::DATA_TYPE, device)?;
        let (vectors, _gv) = operands.addresses(stream);
        crate::plans::epilogue::check_operands(
            &self.epilogue,
            (p.m, p.n),
            std::mem::size_of::<T>(),
            vectors,
            y_range,
        )?;
        // The kernel computes yᵀ: y's columns (output features) are its rows.
        let [pb, prs, pcs] = vectors.map(|v| v.map_or(0, |(p, _)| p));
        let (row_bias, col_bias) = match self.epilogue.bias {
            Some(BiasAxis::PerRow) => (0, pb),
            _ => (pb, 0),
        };
        let mut managed = None;
        let (pwk, _gwk) =
            workspace_ptr(stream, workspace, self.workspace_size, &mut managed, false)?;
        let args = self.args(
            [px, pw, ps, pz.unwrap_or(0), pc.unwrap_or(py), py],
            [pcs, prs, row_bias, col_bias],
        );
        // SAFETY: x, c and y were checked against the extents, devices, alignment and aliasing;
        // the weight's buffers were allocated by QuantizedWeight for its extents, which equal the
        // plan's; the guards keep the buffers' stream ordering until the launch is queued.
        match self.engine {
            Engine::Kernel(k) => unsafe {
                k.launch_abi(&args, pwk, self.workspace_size, stream.cu_stream())
            },
            Engine::Gemv => unsafe {
                weight_gemv(
                    &args,
                    T::DTYPE,
                    p.format.gemv_code(),
                    Some(stream.cu_stream()),
                )
            },
        }
    }

    /// The C arguments over device pointers: x, the packed weight, scales, zeros (0 for none), c,
    /// y; and the fused epilogue's vectors in the kernel's orientation (0 for none): row scales
    /// (y's column scales), column scales (y's row scales), row bias, column bias.
    fn args(
        &self,
        [x, w, s, z, c, y]: [u64; 6],
        [row_scale, col_scale, row_bias, col_bias]: [u64; 4],
    ) -> cutlass_rs_weight_only_args {
        let p = &self.problem;
        cutlass_rs_weight_only_args {
            m: p.m as i64,
            n: p.n as i64,
            k: p.k as i64,
            group_size: p.group_size as i64,
            x: x as *const _,
            ldx: p.k as i64,
            w: w as *const _,
            scales: s as *const _,
            zeros: z as *const _,
            c: c as *const _,
            ldc: p.n as i64,
            d: y as *mut _,
            ldd: p.n as i64,
            alpha: p.alpha,
            beta: p.beta,
            device_id: self.device.ordinal as i32,
            sm_count: self.device.kernel_sm_count(),
            splits: i32::from(self.splits),
            row_scale: row_scale as *const f32,
            col_scale: col_scale as *const f32,
            row_bias: row_bias as *const _,
            col_bias: col_bias as *const _,
            activation: self.epilogue.activation.code(),
        }
    }
}

/// Whether the library's choice for this problem is the decode GEMV ([`GEMV_TOKENS`]; it reads
/// the order the constructors store the format in).
fn gemv_serves(p: &WeightOnlyProblem) -> bool {
    p.m <= GEMV_TOKENS && p.order == WeightOrder::of_format(p.format)
}

/// The decode GEMV is not in this build (no `weight-only` feature) or not compiled for this
/// device's architecture.
fn gemv_not_built(device: &DeviceInfo, wide: DataType) -> Error {
    let arch = cutlass_gemm_catalog::Arch::ALL
        .iter()
        .copied()
        .find(|a| a.runs_on(device.compute_capability));
    Error::NoKernel {
        request: format!(
            "the weight-only decode GEMV ({wide} activations) for compute capability {}.{}",
            device.compute_capability.0, device.compute_capability.1
        ),
        nearest: Vec::new(),
        build_with: match arch {
            _ if !cutlass_gemm_sys::WEIGHT_GEMV_BUILT => {
                BuildHint::Feature(cutlass_gemm_catalog::Family::WeightOnly)
            }
            Some(arch) => BuildHint::Architecture(arch),
            None => BuildHint::NotInCatalog,
        },
    }
}

/// The split-K factor the library's choice takes: 4 for a stream-K kernel whose output tiles fill
/// at most a quarter of the SMs over a k of 2048 or more (the 4096-wide layers of 7-9B models at
/// decode: 28-32 tiles for 132 SMs), else the kernel's own stream-K decomposition. Fitted with
/// the tile choice (`docs/performance.md`): on such shapes split-K 4 ran 1.01-1.26x the stream-K
/// decomposition's speed, and lost on shapes of 36 tiles or more.
fn default_splits(spec: &KernelSpec, p: &WeightOnlyProblem, sm_count: i32) -> u16 {
    let tiles = p.n.div_ceil(spec.tile[0] as usize) * p.m.div_ceil(spec.tile[1] as usize);
    let few = tiles * 4 <= usize::try_from(sm_count).unwrap_or(0);
    if spec.tile_scheduler == TileScheduler::StreamK && few && p.k >= 2048 {
        4
    } else {
        0
    }
}

/// Tokens up to which a weight-only plan takes a stream-K kernel.
const STREAM_K_TOKENS: usize = 1024;

/// The weight-only kernel for a plan: the one named, or by the tokens m among this build's
/// kernels of the `weight-only` feature (all its weight-only kernels when it has none of those) for
/// the activation type and weight format that the device can run. Up to 1024 tokens the narrowest
/// stream-K tile whose N holds m (with scales only 128x16 up to 16 tokens; 128x32 up to 32, and
/// from 1 token with zero points, whose 128x16 tile is slower; 128x64 up to 64), else the widest
/// stream-K one (128x128); beyond, the largest persistent tile (128x256); on SM100 (whose kernels
/// read the plain order and have no stream-K tiles) the narrowest tile whose N holds m, else the
/// largest (not measured). Fitted on an H200 to
/// Llama-3-8B's and -70B's layers and three families of `bench/shapes-broad.tsv`
/// (`docs/performance.md` scores the other families).
fn select(
    device: &DeviceInfo,
    problem: &WeightOnlyProblem,
    wide: DataType,
    name: Option<&str>,
    fused: bool,
    any_arch: bool,
) -> Result<WeightOnlyKernel> {
    let (weight, mode) = problem.format.catalog();
    let types = |s: &KernelSpec| {
        s.b.ty == wide && s.a.ty == weight && s.mixed_input.map(|x| x.mode) == Some(mode)
    };
    // The order the kernel reads the weight in, and a group size it fixes (SM100).
    let order_rule = |s: &KernelSpec| {
        let kernel = WeightOrder::of_kernel(s);
        (kernel != problem.order).then_some(KernelRule::WeightOrder {
            kernel,
            plan: problem.order,
        })
    };
    let group_rule = |s: &KernelSpec| {
        let group = s.mixed_input.map_or(0, |m| m.group as usize);
        (group != 0 && group != problem.group_size).then_some(KernelRule::WeightGroupSize {
            kernel: group,
            plan: problem.group_size,
        })
    };
    // A plan with a fused epilogue takes the kernels with it, a plain one those without (a
    // fused kernel named for a plain plan runs with null vectors: the plain GEMM).
    let serves = |s: &KernelSpec| {
        types(s)
            && s.fusion.is_fused() == fused
            && order_rule(s).is_none()
            && group_rule(s).is_none()
    };
    if let Some(name) = name {
        let built = built_weight_only_kernels();
        let kind = |s: &KernelSpec| s.mixed_input.is_some();
        let other = KernelRule::WeightOnly { kernel: false };
        let mismatch = |s: &KernelSpec| {
            if fused && !s.fusion.is_fused() {
                return Some(KernelRule::NoFusedEpilogue);
            }
            if types(s) {
                if let Some(rule) = order_rule(s).or_else(|| group_rule(s)) {
                    return Some(rule);
                }
            }
            (!types(s)).then(|| {
                let (operand, kernel, required) = if s.b.ty != wide {
                    (OperandName::A, s.b.ty, wide)
                } else {
                    (OperandName::B, s.a.ty, weight)
                };
                KernelRule::Operand {
                    operand,
                    kernel: (kernel, s.a.layout),
                    required: (required, s.a.layout),
                }
            })
        };
        return if any_arch {
            named_in_registry_any_arch(built, name, kind, other, mismatch)
        } else {
            named_in_registry(built, name, device, kind, other, mismatch)
        };
    }
    // The feature's kernels when the build has them (other catalog tiles only when named).
    let pool = registry_pool(
        built_weight_only_kernels(),
        device,
        serves,
        cutlass_gemm_catalog::catalog::is_default_weight_only,
    );
    // Up to STREAM_K_TOKENS tokens: the narrowest stream-K tile whose N holds m, else the widest
    // stream-K one; beyond, the largest persistent tile.
    let stream_k = |k: &&WeightOnlyKernel| k.spec.tile_scheduler == TileScheduler::StreamK;
    let area = |k: &&WeightOnlyKernel| k.spec.tile[0] * k.spec.tile[1];
    let sm100 = pool
        .first()
        .is_some_and(|k| k.spec.arch == cutlass_gemm_catalog::Arch::Sm100a);
    let chosen = if sm100 {
        // SM100 (no stream-K tiles): the narrowest tile whose N holds m, else the largest (not
        // measured: no SM100 GPU here).
        pool.iter()
            .filter(|k| k.spec.tile[1] as usize >= problem.m)
            .min_by_key(|k| (k.spec.tile[1], k.spec.tile[0]))
            .or_else(|| pool.iter().max_by_key(area))
    } else if problem.m <= STREAM_K_TOKENS {
        pool.iter()
            .filter(stream_k)
            .filter(|k| k.spec.tile[1] as usize >= problem.m)
            .min_by_key(|k| k.spec.tile[1])
            .or_else(|| pool.iter().filter(stream_k).max_by_key(area))
    } else {
        pool.iter().filter(|k| !stream_k(k)).max_by_key(area)
    }
    .or_else(|| pool.iter().max_by_key(area))
    .copied();
    chosen.ok_or_else(|| {
        // A catalog entry that serves on this device, the feature's first.
        let entry = crate::selection::catalog_entries()
            .iter()
            .copied()
            .filter(|s| serves(s) && s.arch.runs_on(device.compute_capability))
            .min_by_key(|s| !cutlass_gemm_catalog::catalog::is_default_weight_only(s));
        Error::NoKernel {
            request: format!(
                "weight-only GEMM {wide} x {weight} ({mode:?}, groups of {}, the weight in {}){} for compute capability {}.{}",
                problem.group_size,
                problem.order,
                if fused { " with a fused epilogue" } else { "" },
                device.compute_capability.0,
                device.compute_capability.1
            ),
            nearest: built_weight_only_kernels()
                .iter()
                .take(3)
                .map(|k| k.name.to_string())
                .collect(),
            build_with: match entry {
                Some(s) => crate::selection::build_hint(&s.name()),
                None => BuildHint::NotInCatalog,
            },
        }
    })
}
