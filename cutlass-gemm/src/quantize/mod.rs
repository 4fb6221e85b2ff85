//! Quantization into CUTLASS-ready operands: on the GPU (this module's functions and tensors) and
//! on the host ([`host`]: MX, NVFP4 and FP8 blockwise quantizers, the references the GPU ones are
//! bit-exact with).
//!
//! | function | output | scales |
//! |---|---|---|
//! | [`quantize_fp8_blockwise`] | e4m3, row-major | f32, `ceil(rows/br) x ceil(cols/128)`, br = 1 or 128, [`ScaleMajor::K`] (row-major) or [`ScaleMajor::MN`] (what [`crate::BlockwiseGemm`] reads) |
//! | [`quantize_mx`] | e4m3 / e5m2 / e2m3 / e3m2 / e2m1, packed | ue8m0 per 32, `Sm1xxBlockScaledConfig` layout |
//! | [`quantize_nvfp4`] | e2m1, packed | ue4m3 per 16, `Sm1xxBlockScaledConfig` layout, plus the tensor amax |
//!
//! Inputs are row-major `[rows, k]` device buffers of f32, f16 or bf16 (K contiguous: A as M x K,
//! B as N x K). Each call checks its arguments (a typed [`Error`] names the rule) before launching
//! on `stream`. The outputs are owned device buffers that later GEMM entry points take as they are.
//!
//! NaN: FP8 blockwise and NVFP4 ignore NaN when taking the block maximum (a NaN element becomes the
//! e4m3 NaN, or +6 for e2m1, as CUDA's conversions do); MX follows the OCP rule: a NaN or infinity
//! in a block makes its scale NaN (`0xFF`) and its elements 0.

pub mod host;

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr};

use crate::error::{
    require_device, Error, LayoutRule, OperandName, ProblemRule, Quantity, QuantizeOp, Result,
    Scalar, ScaleFamily, ScaleRule,
};
use crate::ffi::check_status;
use crate::formats::element::Element;
use crate::formats::numeric::{E2M1, E2M3, E3M2, E4M3, E5M2, UE4M3, UE8M0};
use crate::formats::scale_layout::{ScaleFactorLayout, ScaleMajor};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
    impl Sealed for crate::formats::numeric::E4M3 {}
    impl Sealed for crate::formats::numeric::E5M2 {}
    impl Sealed for crate::formats::numeric::E2M3 {}
    impl Sealed for crate::formats::numeric::E3M2 {}
    impl Sealed for crate::formats::numeric::E2M1 {}
}

/// An input type of the quantizers.
pub trait QuantInput: Element + sealed::Sealed {
    /// The C ABI type code.
    const DTYPE: i32;
}
impl QuantInput for f32 {
    const DTYPE: i32 = cutlass_gemm_sys::CUTLASS_RS_DTYPE_F32;
}
impl QuantInput for half::f16 {
    const DTYPE: i32 = cutlass_gemm_sys::CUTLASS_RS_DTYPE_F16;
}
impl QuantInput for half::bf16 {
    const DTYPE: i32 = cutlass_gemm_sys::CUTLASS_RS_DTYPE_BF16;
}

/// An element type of MX formats (and of the packed narrow-precision operands of
/// [`crate::BlockScaledGemm`]).
pub trait MxElement: sealed::Sealed + Copy + std::fmt::Debug {
    /// The C ABI type code.
    const DTYPE: i32;
    /// The catalog's data type.
    const DATA_TYPE: cutlass_gemm_catalog::DataType;
    /// Bits per element.
    const BITS: usize;
    /// Elements of K per row must be a multiple of this (whole bytes per row).
    const K_MULTIPLE: usize;
    /// The element's code (its bits).
    fn code(self) -> u8;
}
macro_rules! mx_element {
    ($t:ty, $code:ident, $dt:ident, $bits:expr, $mult:expr) => {
        impl MxElement for $t {
            const DTYPE: i32 = cutlass_gemm_sys::$code;
            const DATA_TYPE: cutlass_gemm_catalog::DataType = cutlass_gemm_catalog::DataType::$dt;
            const BITS: usize = $bits;
            const K_MULTIPLE: usize = $mult;
            fn code(self) -> u8 {
                self.to_bits()
            }
        }
    };
}
mx_element!(E4M3, CUTLASS_RS_DTYPE_E4M3, E4M3, 8, 1);
mx_element!(E5M2, CUTLASS_RS_DTYPE_E5M2, E5M2, 8, 1);
mx_element!(E2M3, CUTLASS_RS_DTYPE_E2M3, E2M3, 6, 4);
mx_element!(E3M2, CUTLASS_RS_DTYPE_E3M2, E3M2, 6, 4);
mx_element!(E2M1, CUTLASS_RS_DTYPE_E2M1, E2M1, 4, 2);

/// Which extent of an operand is contiguous in memory.
///
/// For A (`m x k`): [`Major::K`] is row-major `[m, k]`, [`Major::MN`] column-major (M contiguous).
/// For B (`k x n`, held as `[n, k]`): [`Major::K`] is column-major (K contiguous), [`Major::MN`]
/// row-major `[k, n]` (N contiguous). Scale factors are always along K, in the
/// `Sm1xxBlockScaledConfig` layout, whatever the data's major.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Major {
    /// K contiguous (what the GPU quantizers write).
    K,
    /// M (for A) or N (for B) contiguous.
    MN,
}

impl Major {
    /// The major an operand of a [`crate::GemmProblem`] has: A row-major and B column-major are
    /// K-major.
    pub fn of(operand: crate::OperandName, layout: cutlass_gemm_catalog::Layout) -> Major {
        use cutlass_gemm_catalog::Layout::*;
        match (operand, layout) {
            (crate::OperandName::B, ColumnMajor) => Major::K,
            (crate::OperandName::B, RowMajor) => Major::MN,
            (_, RowMajor) => Major::K,
            (_, ColumnMajor) => Major::MN,
        }
    }
}

/// Packs the codes of a logical row-major `[rows, k]` matrix in `major` order (CUTLASS's
/// global-memory bit order: element `i` at bit `i * BITS`).
fn pack_host<E: MxElement>(elements: &[E], rows: usize, k: usize, major: Major) -> Vec<u8> {
    let mut bytes = vec![0u8; (rows * k * E::BITS).div_ceil(8)];
    for r in 0..rows {
        for j in 0..k {
            let i = match major {
                Major::K => r * k + j,
                Major::MN => j * rows + r,
            };
            crate::formats::packed::write_code(
                &mut bytes,
                E::BITS as u32,
                i,
                elements[r * k + j].code(),
            );
        }
    }
    bytes
}

/// A host block-scaled quantization's packed elements (in `major` order) and swizzled scales on
/// the device (padding entries of the swizzled layout hold `pad`), after checking its shape and
/// scale count.
#[allow(clippy::type_complexity)]
fn upload_block_scaled<
    E: MxElement + crate::quantize::host::ScaledElement,
    S: Copy + DeviceRepr,
>(
    stream: &Arc<CudaStream>,
    q: &crate::quantize::host::BlockScaled<E, S>,
    family: ScaleFamily,
    major: Major,
    pad: S,
) -> Result<(CudaSlice<u8>, CudaSlice<S>, ScaleFactorLayout)> {
    let (op, vec) = match family {
        ScaleFamily::Nvfp4 => (QuantizeOp::UploadNvfp4, 16),
        // MX: the only other family with a host quantizer.
        _ => (QuantizeOp::UploadMx, 32),
    };
    host_shape(op, q.rows, q.k, q.elements.len())?;
    let layout = ScaleFactorLayout::new(q.rows, q.k, 1, vec);
    if q.vec != vec || q.scales.len() != q.rows * layout.sf_cols() {
        return Err(Error::ScaleMismatch {
            operand: OperandName::Scales,
            rule: ScaleRule::HostScales {
                family,
                rows: q.rows,
                k: q.k,
                per_row: layout.sf_cols(),
                found: q.scales.len(),
                found_vec: q.vec,
            },
        });
    }
    Ok((
        stream.clone_htod(&pack_host(&q.elements, q.rows, q.k, major))?,
        stream.clone_htod(&layout.swizzle(&q.scales, pad))?,
        layout,
    ))
}

/// The GPU quantizers and dequantizers read and write K-major data.
fn require_k_major(op: QuantizeOp, operand: OperandName, major: Major) -> Result<()> {
    if major != Major::K {
        return Err(Error::UnsupportedLayout {
            operand,
            rule: LayoutRule::QuantizerKMajor(op),
        });
    }
    Ok(())
}

fn host_shape(op: QuantizeOp, rows: usize, k: usize, len: usize) -> Result<()> {
    if rows == 0 || k == 0 || rows.checked_mul(k) != Some(len) {
        return Err(Error::InvalidProblem {
            reason: ProblemRule::HostShape { op, len, rows, k },
        });
    }
    Ok(())
}

/// FP8 blockwise granularity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fp8Block {
    /// One scale per 1 x 128 group (activations).
    Group1x128,
    /// One scale per 128 x 128 block (weights).
    Block128x128,
}

impl Fp8Block {
    /// Rows per scale.
    pub fn rows(self) -> usize {
        match self {
            Fp8Block::Group1x128 => 1,
            Fp8Block::Block128x128 => 128,
        }
    }
}

/// An FP8 (e4m3) tensor with blockwise f32 scales.
#[derive(Debug)]
pub struct Fp8BlockwiseTensor {
    /// Elements, row-major `[rows, cols]`.
    pub data: CudaSlice<E4M3>,
    /// Scales, `ceil(rows / block.rows()) x ceil(cols / 128)` in `scale_major` order.
    pub scales: CudaSlice<f32>,
    /// The order of `scales`.
    pub scale_major: ScaleMajor,
    /// Rows.
    pub rows: usize,
    /// Columns (K).
    pub cols: usize,
    /// Granularity.
    pub block: Fp8Block,
}

/// An MX tensor: packed elements and ue8m0 scales in the `Sm1xxBlockScaledConfig` layout.
#[derive(Debug)]
pub struct MxTensor<E: MxElement> {
    /// Packed elements, row-major `[rows, k]` (CUTLASS's global-memory bit order).
    pub data: CudaSlice<u8>,
    /// Scale factors, swizzled.
    pub scales: CudaSlice<UE8M0>,
    /// The scale-factor layout (32 elements per scale).
    pub layout: ScaleFactorLayout,
    /// Which extent of `data` is contiguous (the GPU quantizers write [`Major::K`]).
    pub major: Major,
    _e: PhantomData<E>,
}

/// Packed FP8/FP6/FP4 elements without block scales: an operand of the f8f6f4 GEMMs of Table 2
/// ([`crate::BlockScaledGemm::plan_plain`]); per-tensor scales go into alpha.
#[derive(Debug)]
pub struct PackedTensor<E: MxElement> {
    /// Packed elements in `major` order.
    pub data: CudaSlice<u8>,
    /// Rows (M for A, N for B).
    pub rows: usize,
    /// K.
    pub k: usize,
    /// Which extent of `data` is contiguous.
    pub major: Major,
    _e: PhantomData<E>,
}

impl<E: MxElement> PackedTensor<E> {
    /// Uploads a logical row-major `[rows, k]` matrix of elements, stored in `major` order.
    pub fn from_host(
        stream: &Arc<CudaStream>,
        elements: &[E],
        rows: usize,
        k: usize,
        major: Major,
    ) -> Result<Self> {
        host_shape(QuantizeOp::UploadPacked, rows, k, elements.len())?;
        Ok(PackedTensor {
            data: stream.clone_htod(&pack_host(elements, rows, k, major))?,
            rows,
            k,
            major,
            _e: PhantomData,
        })
    }
}

/// An NVFP4 tensor: packed e2m1, ue4m3 scales per 16 (swizzled), and the tensor's amax, from which
/// the per-tensor scale `amax / 2688` follows.
#[derive(Debug)]
pub struct Nvfp4Tensor {
    /// Packed e2m1, row-major `[rows, k]`.
    pub data: CudaSlice<u8>,
    /// Scale factors, swizzled.
    pub scales: CudaSlice<UE4M3>,
    /// The tensor's amax as f32 bits (one element).
    pub amax: CudaSlice<u32>,
    /// The scale-factor layout (16 elements per scale).
    pub layout: ScaleFactorLayout,
    /// Which extent of `data` is contiguous (the GPU quantizers write [`Major::K`]).
    pub major: Major,
}

fn check_shape(op: QuantizeOp, rows: usize, k: usize, len: usize) -> Result<()> {
    if rows == 0 || k == 0 {
        return Err(Error::InvalidProblem {
            reason: ProblemRule::ZeroRowsOrK { op, rows, k },
        });
    }
    let n = rows
        .checked_mul(k)
        .filter(|&n| n <= i64::MAX as usize)
        .ok_or(Error::InvalidProblem {
            reason: ProblemRule::ElementCountOverflow { op, rows, k },
        })?;
    if len < n {
        return Err(Error::BufferTooSmall {
            operand: OperandName::A,
            len,
            required: n,
        });
    }
    Ok(())
}

/// Output buffers (elements, scale factors) against what the shape needs; each names its buffer.
fn check_outputs(
    data: usize,
    data_needed: usize,
    scales: usize,
    scales_needed: usize,
) -> Result<()> {
    if data < data_needed {
        return Err(Error::BufferTooSmall {
            operand: OperandName::D,
            len: data,
            required: data_needed,
        });
    }
    if scales < scales_needed {
        return Err(Error::BufferTooSmall {
            operand: OperandName::Scales,
            len: scales,
            required: scales_needed,
        });
    }
    Ok(())
}

impl Fp8BlockwiseTensor {
    /// Uninitialized output buffers for a `[rows, cols]` matrix (fill with
    /// [`quantize_fp8_blockwise_into`]).
    pub fn alloc(
        stream: &Arc<CudaStream>,
        rows: usize,
        cols: usize,
        block: Fp8Block,
        scale_major: ScaleMajor,
    ) -> Result<Self> {
        check_shape(
            QuantizeOp::QuantizeFp8Blockwise,
            rows,
            cols,
            rows.saturating_mul(cols),
        )?;
        let n_scales = rows.div_ceil(block.rows()) * cols.div_ceil(128);
        // SAFETY: quantization writes every element and every scale before they are read.
        let data = unsafe { stream.alloc::<E4M3>(rows * cols) }?;
        let scales = unsafe { stream.alloc::<f32>(n_scales) }?;
        Ok(Fp8BlockwiseTensor {
            data,
            scales,
            scale_major,
            rows,
            cols,
            block,
        })
    }
}

/// Quantizes a row-major `[rows, cols]` matrix to e4m3 with blockwise f32 scales in `scale_major`
/// order ([`ScaleMajor::MN`] for [`crate::BlockwiseGemm`]).
pub fn quantize_fp8_blockwise<T: QuantInput>(
    stream: &Arc<CudaStream>,
    x: &dyn DevicePtr<T>,
    rows: usize,
    cols: usize,
    block: Fp8Block,
    scale_major: ScaleMajor,
) -> Result<Fp8BlockwiseTensor> {
    check_shape(QuantizeOp::QuantizeFp8Blockwise, rows, cols, x.len())?;
    let mut out = Fp8BlockwiseTensor::alloc(stream, rows, cols, block, scale_major)?;
    quantize_fp8_blockwise_into(stream, x, &mut out)?;
    Ok(out)
}

/// [`quantize_fp8_blockwise`] into existing buffers (shape and granularity from `out`).
pub fn quantize_fp8_blockwise_into<T: QuantInput>(
    stream: &Arc<CudaStream>,
    x: &dyn DevicePtr<T>,
    out: &mut Fp8BlockwiseTensor,
) -> Result<()> {
    let (rows, cols, block) = (out.rows, out.cols, out.block);
    check_shape(QuantizeOp::QuantizeFp8Blockwise, rows, cols, x.len())?;
    let n_scales = rows.div_ceil(block.rows()) * cols.div_ceil(128);
    check_outputs(out.data.len(), rows * cols, out.scales.len(), n_scales)?;
    let device = stream.context().ordinal();
    require_device(OperandName::A, x, device)?;
    require_device(OperandName::D, &out.data, device)?;
    require_device(OperandName::Scales, &out.scales, device)?;
    crate::error::require_stream(stream, device)?;
    let (px, _gx) = x.device_ptr(stream);
    let (pd, _gd) = out.data.device_ptr_mut(stream);
    let (ps, _gs) = out.scales.device_ptr_mut(stream);
    // SAFETY: sizes checked above; buffers live until the guards drop after the launch.
    let st = unsafe {
        cutlass_gemm_sys::cutlass_rs_quantize_fp8_blockwise(
            px as *const _,
            T::DTYPE,
            rows as i64,
            cols as i64,
            block.rows() as i64,
            (out.scale_major == ScaleMajor::MN) as i32,
            pd as *mut _,
            ps as *mut f32,
            stream.cu_stream() as *mut _,
        )
    };
    check_status("cutlass_rs_quantize_fp8_blockwise", st)
}

fn check_k(op: QuantizeOp, k: usize, bits: usize, multiple: usize) -> Result<()> {
    if k % multiple != 0 {
        return Err(Error::Misaligned {
            operand: OperandName::A,
            what: Quantity::PackedK {
                op,
                bits: bits as u32,
            },
            value: k as u64,
            required: multiple as u64,
        });
    }
    Ok(())
}

/// Launches block-scaled quantization into `data` (packed) and `sf` (swizzled).
#[allow(clippy::too_many_arguments)]
fn launch_block_scaled<T: QuantInput, S: cudarc::driver::DeviceRepr>(
    stream: &Arc<CudaStream>,
    x: &dyn DevicePtr<T>,
    layout: &ScaleFactorLayout,
    elem: (i32, usize, usize),
    nv: bool,
    data: &mut CudaSlice<u8>,
    sf: &mut CudaSlice<S>,
    amax: Option<&mut CudaSlice<u32>>,
    amax_given: bool,
) -> Result<()> {
    let what = if nv {
        QuantizeOp::QuantizeNvfp4
    } else {
        QuantizeOp::QuantizeMx
    };
    let (rows, k) = (layout.rows, layout.k);
    check_shape(what, rows, k, x.len())?;
    let (code, bits, multiple) = elem;
    check_k(what, k, bits, multiple)?;
    let data_bytes = (rows * k * bits).div_ceil(8);
    check_outputs(data.len(), data_bytes, sf.len(), layout.size())?;
    let device = stream.context().ordinal();
    require_device(OperandName::A, x, device)?;
    require_device(OperandName::D, data, device)?;
    require_device(OperandName::Scales, sf, device)?;
    if let Some(a) = &amax {
        require_device(OperandName::Scales, *a, device)?;
    }
    crate::error::require_stream(stream, device)?;
    let (px, _gx) = x.device_ptr(stream);
    let (pd, _gd) = data.device_ptr_mut(stream);
    let (ps, _gs) = sf.device_ptr_mut(stream);
    let (pa, _ga) = match amax {
        Some(a) => {
            let (p, g) = a.device_ptr_mut(stream);
            (p, Some(g))
        }
        None => (0, None),
    };
    // SAFETY: sizes checked above; buffers live until the guards drop after the launch.
    let st = unsafe {
        cutlass_gemm_sys::cutlass_rs_quantize_block_scaled(
            px as *const _,
            T::DTYPE,
            rows as i64,
            k as i64,
            code,
            nv as i32,
            pd as *mut _,
            ps as *mut _,
            layout.size() as i64,
            pa as *mut u32,
            amax_given as i32,
            stream.cu_stream() as *mut _,
        )
    };
    check_status("cutlass_rs_quantize_block_scaled", st)
}

impl<E: MxElement> MxTensor<E> {
    /// Uninitialized output buffers for a `[rows, k]` matrix (fill with [`quantize_mx_into`]).
    pub fn alloc(stream: &Arc<CudaStream>, rows: usize, k: usize) -> Result<Self> {
        check_shape(QuantizeOp::QuantizeMx, rows, k, rows.saturating_mul(k))?;
        check_k(QuantizeOp::QuantizeMx, k, E::BITS, E::K_MULTIPLE)?;
        let layout = ScaleFactorLayout::new(rows, k, 1, 32);
        // SAFETY: quantization writes every byte (every scale factor, and zeros in the layout's
        // padding where it has any).
        let data = unsafe { stream.alloc::<u8>((rows * k * E::BITS).div_ceil(8)) }?;
        let scales = unsafe { stream.alloc::<UE8M0>(layout.size()) }?;
        Ok(MxTensor {
            data,
            scales,
            layout,
            major: Major::K,
            _e: PhantomData,
        })
    }

    /// Uploads a host MX quantization ([`crate::quantize::host::quantize_mx`], 32 per scale),
    /// storing the elements in `major` order and the scales swizzled.
    pub fn from_host(
        stream: &Arc<CudaStream>,
        q: &crate::quantize::host::BlockScaled<E, UE8M0>,
        major: Major,
    ) -> Result<Self>
    where
        E: crate::quantize::host::ScaledElement,
    {
        let (data, scales, layout) =
            upload_block_scaled(stream, q, ScaleFamily::Mx, major, UE8M0::from_bits(0))?;
        Ok(MxTensor {
            data,
            scales,
            layout,
            major,
            _e: PhantomData,
        })
    }
}

/// Quantizes a row-major `[rows, k]` matrix to an MX format (OCP v1.0, ue8m0 per 32 along K).
pub fn quantize_mx<E: MxElement, T: QuantInput>(
    stream: &Arc<CudaStream>,
    x: &dyn DevicePtr<T>,
    rows: usize,
    k: usize,
) -> Result<MxTensor<E>> {
    check_shape(QuantizeOp::QuantizeMx, rows, k, x.len())?;
    let mut out = MxTensor::<E>::alloc(stream, rows, k)?;
    quantize_mx_into(stream, x, &mut out)?;
    Ok(out)
}

/// [`quantize_mx`] into existing buffers (shape from `out`).
pub fn quantize_mx_into<E: MxElement, T: QuantInput>(
    stream: &Arc<CudaStream>,
    x: &dyn DevicePtr<T>,
    out: &mut MxTensor<E>,
) -> Result<()> {
    require_k_major(QuantizeOp::QuantizeMx, OperandName::D, out.major)?;
    let layout = out.layout;
    launch_block_scaled(
        stream,
        x,
        &layout,
        (E::DTYPE, E::BITS, E::K_MULTIPLE),
        false,
        &mut out.data,
        &mut out.scales,
        None,
        false,
    )
}

impl Nvfp4Tensor {
    /// Uninitialized output buffers for a `[rows, k]` matrix (fill with [`quantize_nvfp4_into`]).
    pub fn alloc(stream: &Arc<CudaStream>, rows: usize, k: usize) -> Result<Self> {
        check_shape(QuantizeOp::QuantizeNvfp4, rows, k, rows.saturating_mul(k))?;
        check_k(QuantizeOp::QuantizeNvfp4, k, 4, 2)?;
        let layout = ScaleFactorLayout::new(rows, k, 1, 16);
        // SAFETY: quantization writes every byte (every scale factor, and zeros in the layout's
        // padding where it has any; amax is zeroed here).
        let data = unsafe { stream.alloc::<u8>((rows * k).div_ceil(2)) }?;
        let scales = unsafe { stream.alloc::<UE4M3>(layout.size()) }?;
        let amax = stream.alloc_zeros::<u32>(1)?;
        Ok(Nvfp4Tensor {
            data,
            scales,
            amax,
            layout,
            major: Major::K,
        })
    }

    /// Uploads a host NVFP4 quantization ([`crate::quantize::host::quantize_nvfp4`]), storing the
    /// elements in `major` order and the scales swizzled. The amax stored is
    /// `global_scale * 2688`, from which [`Nvfp4Tensor::global_scale`] recovers the host's
    /// per-tensor scale (to within one rounding).
    pub fn from_host(
        stream: &Arc<CudaStream>,
        q: &crate::quantize::host::BlockScaled<E2M1, UE4M3>,
        major: Major,
    ) -> Result<Self> {
        let (data, scales, layout) =
            upload_block_scaled(stream, q, ScaleFamily::Nvfp4, major, UE4M3::from_bits(0))?;
        Ok(Nvfp4Tensor {
            data,
            scales,
            amax: stream.clone_htod(&[(q.global_scale * 2688.0).to_bits()])?,
            layout,
            major,
        })
    }
}

/// Quantizes a row-major `[rows, k]` matrix to NVFP4 (e2m1, ue4m3 per 16, per-tensor scale).
pub fn quantize_nvfp4<T: QuantInput>(
    stream: &Arc<CudaStream>,
    x: &dyn DevicePtr<T>,
    rows: usize,
    k: usize,
) -> Result<Nvfp4Tensor> {
    check_shape(QuantizeOp::QuantizeNvfp4, rows, k, x.len())?;
    let mut out = Nvfp4Tensor::alloc(stream, rows, k)?;
    quantize_nvfp4_into(stream, x, &mut out)?;
    Ok(out)
}

/// [`quantize_nvfp4`] into existing buffers (shape from `out`).
pub fn quantize_nvfp4_into<T: QuantInput>(
    stream: &Arc<CudaStream>,
    x: &dyn DevicePtr<T>,
    out: &mut Nvfp4Tensor,
) -> Result<()> {
    require_k_major(QuantizeOp::QuantizeNvfp4, OperandName::D, out.major)?;
    let layout = out.layout;
    let e2m1 = (E2M1::DTYPE, 4, 2);
    launch_block_scaled(
        stream,
        x,
        &layout,
        e2m1,
        true,
        &mut out.data,
        &mut out.scales,
        Some(&mut out.amax),
        false,
    )
}

/// [`quantize_nvfp4_into`] with the tensor's amax already known (calibrated, or from an earlier
/// pass): one read of the input instead of two. The result equals [`quantize_nvfp4`]'s when `amax`
/// is the tensor's true amax.
pub fn quantize_nvfp4_with_amax_into<T: QuantInput>(
    stream: &Arc<CudaStream>,
    x: &dyn DevicePtr<T>,
    amax: f32,
    out: &mut Nvfp4Tensor,
) -> Result<()> {
    if amax.is_nan() || amax < 0.0 {
        return Err(Error::InvalidProblem {
            reason: ProblemRule::NegativeAmax {
                value: Scalar(amax),
            },
        });
    }
    require_k_major(QuantizeOp::QuantizeNvfp4, OperandName::D, out.major)?;
    stream.memcpy_htod(&[amax.to_bits()], &mut out.amax)?;
    let layout = out.layout;
    let e2m1 = (E2M1::DTYPE, 4, 2);
    launch_block_scaled(
        stream,
        x,
        &layout,
        e2m1,
        true,
        &mut out.data,
        &mut out.scales,
        Some(&mut out.amax),
        true,
    )
}

impl Fp8BlockwiseTensor {
    /// Dequantizes to f32 (`e4m3 * scale`, rounded once).
    pub fn dequantize(&self, stream: &Arc<CudaStream>) -> Result<CudaSlice<f32>> {
        let device = stream.context().ordinal();
        require_device(OperandName::A, &self.data, device)?;
        require_device(OperandName::Scales, &self.scales, device)?;
        crate::error::require_stream(stream, device)?;
        let mut out = unsafe { stream.alloc::<f32>(self.rows * self.cols) }?;
        {
            let (pq, _g1) = self.data.device_ptr(stream);
            let (ps, _g2) = self.scales.device_ptr(stream);
            let (po, _g3) = out.device_ptr_mut(stream);
            // SAFETY: buffers sized by construction.
            let st = unsafe {
                cutlass_gemm_sys::cutlass_rs_dequantize_fp8_blockwise(
                    pq as *const _,
                    ps as *const f32,
                    self.rows as i64,
                    self.cols as i64,
                    self.block.rows() as i64,
                    (self.scale_major == ScaleMajor::MN) as i32,
                    po as *mut f32,
                    stream.cu_stream() as *mut _,
                )
            };
            check_status("cutlass_rs_dequantize_fp8_blockwise", st)?;
        }
        Ok(out)
    }
}

fn dequantize_block_scaled(
    stream: &Arc<CudaStream>,
    data: &CudaSlice<u8>,
    elem: i32,
    sf: u64,
    nv: bool,
    amax: Option<&CudaSlice<u32>>,
    layout: &ScaleFactorLayout,
) -> Result<CudaSlice<f32>> {
    let device = stream.context().ordinal();
    require_device(OperandName::A, data, device)?;
    if let Some(a) = amax {
        require_device(OperandName::Scales, a, device)?;
    }
    crate::error::require_stream(stream, device)?;
    let mut out = unsafe { stream.alloc::<f32>(layout.rows * layout.k) }?;
    {
        let (pd, _g1) = data.device_ptr(stream);
        let (pa, _g2) = match amax {
            Some(a) => {
                let (p, g) = a.device_ptr(stream);
                (p, Some(g))
            }
            None => (0, None),
        };
        let (po, _g3) = out.device_ptr_mut(stream);
        // SAFETY: buffers sized by construction.
        let st = unsafe {
            cutlass_gemm_sys::cutlass_rs_dequantize_block_scaled(
                pd as *const _,
                elem,
                sf as *const _,
                nv as i32,
                pa as *const u32,
                layout.rows as i64,
                layout.k as i64,
                po as *mut f32,
                stream.cu_stream() as *mut _,
            )
        };
        check_status("cutlass_rs_dequantize_block_scaled", st)?;
    }
    Ok(out)
}

impl<E: MxElement> MxTensor<E> {
    /// Dequantizes to f32 (`element * 2^e`, rounded once).
    pub fn dequantize(&self, stream: &Arc<CudaStream>) -> Result<CudaSlice<f32>> {
        require_k_major(QuantizeOp::DequantizeMx, OperandName::A, self.major)?;
        require_device(
            OperandName::Scales,
            &self.scales,
            stream.context().ordinal(),
        )?;
        let (ps, _g) = self.scales.device_ptr(stream);
        dequantize_block_scaled(stream, &self.data, E::DTYPE, ps, false, None, &self.layout)
    }
}

impl Nvfp4Tensor {
    /// The per-tensor scale `amax / 2688` (1 for an all-zero tensor), copied to the host.
    pub fn global_scale(&self, stream: &Arc<CudaStream>) -> Result<f32> {
        let amax = f32::from_bits(stream.clone_dtoh(&self.amax)?[0]);
        Ok(if amax > 0.0 && amax.is_finite() {
            amax / (448.0 * 6.0)
        } else {
            1.0
        })
    }

    /// Dequantizes to f32 (`(e2m1 * scale) * global`, rounded once).
    pub fn dequantize(&self, stream: &Arc<CudaStream>) -> Result<CudaSlice<f32>> {
        require_k_major(QuantizeOp::DequantizeNvfp4, OperandName::A, self.major)?;
        require_device(
            OperandName::Scales,
            &self.scales,
            stream.context().ordinal(),
        )?;
        let (ps, _g) = self.scales.device_ptr(stream);
        dequantize_block_scaled(
            stream,
            &self.data,
            E2M1::DTYPE,
            ps,
            true,
            Some(&self.amax),
            &self.layout,
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn output_checks_name_the_short_buffer() {
        use crate::error::{Error, OperandName};
        assert!(super::check_outputs(10, 10, 4, 4).is_ok());
        assert!(matches!(
            super::check_outputs(9, 10, 4, 4),
            Err(Error::BufferTooSmall {
                operand: OperandName::D,
                len: 9,
                required: 10
            })
        ));
        assert!(matches!(
            super::check_outputs(10, 10, 3, 4),
            Err(Error::BufferTooSmall {
                operand: OperandName::Scales,
                len: 3,
                required: 4
            })
        ));
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;
    use crate::formats::packed::PackedSlice;

    #[test]
    fn major_of_problem_layouts() {
        use cutlass_gemm_catalog::Layout::*;
        assert_eq!(Major::of(OperandName::A, RowMajor), Major::K);
        assert_eq!(Major::of(OperandName::A, ColumnMajor), Major::MN);
        assert_eq!(Major::of(OperandName::B, ColumnMajor), Major::K);
        assert_eq!(Major::of(OperandName::B, RowMajor), Major::MN);
    }

    #[test]
    fn host_packing_in_both_majors() {
        let (rows, k) = (6, 8);
        let v: Vec<E2M1> = (0..rows * k)
            .map(|i| E2M1::from_bits((i % 16) as u8))
            .collect();
        let kmaj = pack_host(&v, rows, k, Major::K);
        let mn = pack_host(&v, rows, k, Major::MN);
        let (pk, pm) = (
            PackedSlice::<E2M1>::new(&kmaj, rows * k).unwrap(),
            PackedSlice::<E2M1>::new(&mn, rows * k).unwrap(),
        );
        for r in 0..rows {
            for j in 0..k {
                assert_eq!(pk.get(r * k + j), v[r * k + j]);
                assert_eq!(pm.get(j * rows + r), v[r * k + j]);
            }
        }
        // FP6: 4 elements in 3 bytes; 8-bit: one byte each.
        let v6: Vec<E3M2> = (0..rows * k)
            .map(|i| E3M2::from_bits((i % 64) as u8))
            .collect();
        let p6 = pack_host(&v6, rows, k, Major::MN);
        assert_eq!(p6.len(), rows * k * 6 / 8);
        let s6 = PackedSlice::<E3M2>::new(&p6, rows * k).unwrap();
        assert_eq!(s6.get(5 * rows + 2), v6[2 * k + 5]);
        let v8: Vec<E4M3> = (0..rows * k).map(|i| E4M3::from_bits(i as u8)).collect();
        assert_eq!(
            pack_host(&v8, rows, k, Major::MN)[3 * rows + 1],
            v8[k + 3].to_bits()
        );
    }
}
