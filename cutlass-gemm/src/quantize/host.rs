//! Block-scaled formats: MX (OCP Microscaling v1.0) and NVFP4 quantization, the
//! `Sm1xxBlockScaledConfig` scale-factor layout, and FP8 blockwise (1x128, 128x128) scaling.
//!
//! Matrices here are row-major `[rows, k]` with K contiguous: A as `M x K`, B as `N x K` (the
//! K-major layout block-scaled kernels read). Scales apply along K.
//!
//! | format | element | scale | elements per scale |
//! |---|---|---|---|
//! | `mx_float8_t<e4m3/e5m2>` | [`E4M3`] / [`E5M2`] | [`UE8M0`] | 32 |
//! | `mx_float6_t<e2m3/e3m2>` | [`E2M3`] / [`E3M2`] | [`UE8M0`] | 32 |
//! | `mx_float4_t` | [`E2M1`] | [`UE8M0`] | 32 |
//! | `nv_float4_t` | [`E2M1`] | [`UE4M3`] (and one f32 per tensor) | 16 |

use crate::formats::numeric::{E2M1, E2M3, E3M2, E4M3, E5M2, UE4M3, UE8M0};

/// An element type of the block-scaled formats.
pub trait ScaledElement: Copy + std::fmt::Debug + sealed::Sealed {
    /// The largest finite value.
    const MAX: f64;
    /// `emax_elem` of the OCP MX spec: the exponent of the largest normal value.
    const EMAX: i32;
    /// RNE with saturation to ±MAX (NaN stays NaN where the format has it).
    fn quantize(x: f32) -> Self;
    /// The exact value.
    fn value(self) -> f64;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::E4M3 {}
    impl Sealed for super::E5M2 {}
    impl Sealed for super::E2M3 {}
    impl Sealed for super::E3M2 {}
    impl Sealed for super::E2M1 {}
}

macro_rules! scaled_element {
    ($t:ty, $emax:expr) => {
        impl ScaledElement for $t {
            const MAX: f64 = <$t>::FORMAT_MAX;
            const EMAX: i32 = $emax;
            fn quantize(x: f32) -> Self {
                <$t>::from_f32(x)
            }
            fn value(self) -> f64 {
                self.to_f64()
            }
        }
    };
}

// FORMAT_MAX: the max finite values as constants (checked against FORMAT in tests).
impl E4M3 {
    const FORMAT_MAX: f64 = 448.0;
}
impl E5M2 {
    const FORMAT_MAX: f64 = 57344.0;
}
impl E2M3 {
    const FORMAT_MAX: f64 = 7.5;
}
impl E3M2 {
    const FORMAT_MAX: f64 = 28.0;
}
impl E2M1 {
    const FORMAT_MAX: f64 = 6.0;
}
scaled_element!(E4M3, 8);
scaled_element!(E5M2, 15);
scaled_element!(E2M3, 2);
scaled_element!(E3M2, 4);
scaled_element!(E2M1, 2);

/// A block-scaled matrix: row-major `[rows, k]` elements and a plain row-major `[rows, ceil(k/vec)]`
/// scale matrix (use [`ScaleFactorLayout::swizzle`](crate::formats::scale_layout::ScaleFactorLayout::swizzle) for the kernel layout).
#[derive(Clone, Debug)]
pub struct BlockScaled<E, S> {
    /// Rows.
    pub rows: usize,
    /// K.
    pub k: usize,
    /// Elements per scale.
    pub vec: usize,
    /// Elements, row-major.
    pub elements: Vec<E>,
    /// Scales, row-major `[rows][ceil(k/vec)]`.
    pub scales: Vec<S>,
    /// One more factor for the whole tensor (NVFP4's second level; 1 for MX).
    pub global_scale: f32,
}

impl<E: ScaledElement, S: Copy + ScaleValue> BlockScaled<E, S> {
    /// The value of element (row, k): `element * scale * global_scale`.
    pub fn value(&self, row: usize, k: usize) -> f64 {
        let s = self.scales[row * self.k.div_ceil(self.vec) + k / self.vec].scale_value();
        self.elements[row * self.k + k].value() * s * self.global_scale as f64
    }

    /// Every value, row-major.
    pub fn dequantize(&self) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.rows * self.k);
        for r in 0..self.rows {
            for c in 0..self.k {
                out.push(self.value(r, c));
            }
        }
        out
    }
}

/// A scale-factor type.
pub trait ScaleValue {
    /// The scale's value.
    fn scale_value(self) -> f64;
}
impl ScaleValue for UE8M0 {
    fn scale_value(self) -> f64 {
        self.to_f64()
    }
}
impl ScaleValue for UE4M3 {
    fn scale_value(self) -> f64 {
        self.to_f64()
    }
}
impl ScaleValue for f32 {
    fn scale_value(self) -> f64 {
        self as f64
    }
}

/// OCP MX v1.0 quantization of a row-major `[rows, k]` matrix, 32 elements of K per scale:
/// `X = 2^(floor(log2(amax)) - emax_elem)` (clamped to [2^-127, 2^127]), elements `x / X` rounded
/// to nearest even and saturated. A block whose amax is 0 gets the scale 2^-127; a block with a NaN
/// or infinity gets the NaN scale (`0xFF`), which makes the whole block NaN.
pub fn quantize_mx<E: ScaledElement>(x: &[f32], rows: usize, k: usize) -> BlockScaled<E, UE8M0> {
    quantize_mx_vec::<E>(x, rows, k, 32)
}

/// [`quantize_mx`] with another block size (64 for sparse A).
pub fn quantize_mx_vec<E: ScaledElement>(
    x: &[f32],
    rows: usize,
    k: usize,
    vec: usize,
) -> BlockScaled<E, UE8M0> {
    assert_eq!(x.len(), rows * k, "input is not rows x k");
    let cols = k.div_ceil(vec);
    let mut elements = Vec::with_capacity(rows * k);
    let mut scales = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        let row = &x[r * k..(r + 1) * k];
        for block in row.chunks(vec) {
            let amax = block.iter().fold(0.0f32, |m, v| {
                if v.is_nan() || m.is_nan() {
                    f32::NAN
                } else {
                    m.max(v.abs())
                }
            });
            let scale = if !amax.is_finite() {
                UE8M0::from_bits(0xff)
            } else if amax == 0.0 {
                UE8M0::from_exponent(-127)
            } else {
                let e = ((amax as f64).to_bits() >> 52 & 0x7ff) as i32 - 1023;
                UE8M0::from_exponent(e - E::EMAX)
            };
            let inv = match scale.exponent() {
                Some(e) => 2f64.powi(-e),
                None => f64::NAN,
            };
            for v in block {
                // Exact: dividing by a power of two only moves the exponent (in f64).
                let scaled = (*v as f64 * inv) as f32;
                elements.push(if inv.is_nan() {
                    E::quantize(0.0)
                } else {
                    E::quantize(scaled)
                });
            }
            scales.push(scale);
        }
    }
    BlockScaled {
        rows,
        k,
        vec,
        elements,
        scales,
        global_scale: 1.0,
    }
}

/// NVFP4 two-level quantization of a row-major `[rows, k]` matrix: a per-tensor f32 scale
/// `g = amax(tensor) / (448 * 6)` (1 when the tensor is all zeros), per-16 block scales
/// `s = ue4m3(amax(block) / (6 g))` (RNE, saturating), elements `e2m1(x * (1 / (s g)))` (one
/// division per block). A block whose scale rounds to 0 stores zeros. Value = `e2m1 * s * g`. In a
/// GEMM the two global scales fold into alpha.
pub fn quantize_nvfp4(x: &[f32], rows: usize, k: usize) -> BlockScaled<E2M1, UE4M3> {
    assert_eq!(x.len(), rows * k, "input is not rows x k");
    let vec = 16;
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let global = if amax > 0.0 && amax.is_finite() {
        amax / (448.0 * 6.0)
    } else {
        1.0
    };
    let mut elements = Vec::with_capacity(rows * k);
    let mut scales = Vec::with_capacity(rows * k.div_ceil(vec));
    for r in 0..rows {
        for block in x[r * k..(r + 1) * k].chunks(vec) {
            let bmax = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let s = UE4M3::from_f32(bmax / (6.0 * global));
            let denom = s.to_f32() * global;
            let inv = if denom > 0.0 { 1.0 / denom } else { 0.0 };
            for v in block {
                // A zero scale stores +0 elements.
                elements.push(if denom > 0.0 {
                    E2M1::from_f32(v * inv)
                } else {
                    E2M1::from_f32(0.0)
                });
            }
            scales.push(s);
        }
    }
    BlockScaled {
        rows,
        k,
        vec,
        elements,
        scales,
        global_scale: global,
    }
}

/// FP8 blockwise quantization (DeepSeek-V3 / DeepGEMM recipe, Triton's 2D-block FP8 GEMM tutorial):
/// one f32 scale per `block_rows x block_cols` block of a row-major `[rows, cols]` matrix. With
/// `a = max(amax, 1e-4)`: elements `e4m3(x * (448 / a))`, scale `a / 448` (DeepGEMM's
/// `per_token_cast_to_fp8`: one division per block, a multiply per element). Activations use 1x128
/// groups, weights 128x128 blocks. Returns elements and a row-major `[ceil(rows/br), ceil(cols/bc)]`
/// scale matrix.
pub fn quantize_fp8_blockwise(
    x: &[f32],
    rows: usize,
    cols: usize,
    block_rows: usize,
    block_cols: usize,
) -> (Vec<E4M3>, Vec<f32>) {
    assert_eq!(x.len(), rows * cols, "input is not rows x cols");
    let (br, bc) = (rows.div_ceil(block_rows), cols.div_ceil(block_cols));
    let mut scales = vec![0.0f32; br * bc];
    let mut inverse = vec![0.0f32; br * bc];
    for (i, (s, inv)) in scales.iter_mut().zip(inverse.iter_mut()).enumerate() {
        let (bi, bj) = (i / bc, i % bc);
        let mut amax = 0.0f32;
        for r in bi * block_rows..((bi + 1) * block_rows).min(rows) {
            for c in bj * block_cols..((bj + 1) * block_cols).min(cols) {
                amax = amax.max(x[r * cols + c].abs());
            }
        }
        let a = amax.max(1e-4);
        *s = a / 448.0;
        *inv = 448.0 / a;
    }
    let elements = (0..rows * cols)
        .map(|i| {
            let (r, c) = (i / cols, i % cols);
            E4M3::from_f32(x[i] * inverse[(r / block_rows) * bc + c / block_cols])
        })
        .collect();
    (elements, scales)
}

/// Dequantizes [`quantize_fp8_blockwise`]'s output.
pub fn dequantize_fp8_blockwise(
    elements: &[E4M3],
    scales: &[f32],
    rows: usize,
    cols: usize,
    block_rows: usize,
    block_cols: usize,
) -> Vec<f64> {
    let bc = cols.div_ceil(block_cols);
    (0..rows * cols)
        .map(|i| {
            let (r, c) = (i / cols, i % cols);
            elements[i].to_f64() * scales[(r / block_rows) * bc + c / block_cols] as f64
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_max_constants_match_the_formats() {
        assert_eq!(E4M3::FORMAT_MAX, E4M3::max_finite());
        assert_eq!(E5M2::FORMAT_MAX, E5M2::max_finite());
        assert_eq!(E2M3::FORMAT_MAX, E2M3::max_finite());
        assert_eq!(E3M2::FORMAT_MAX, E3M2::max_finite());
        assert_eq!(E2M1::FORMAT_MAX, E2M1::max_finite());
        // emax_elem is the exponent of the largest normal.
        for (max, emax) in [(448.0f64, 8), (57344.0, 15), (7.5, 2), (28.0, 4), (6.0, 2)] {
            assert_eq!(max.log2().floor() as i32, emax);
        }
    }
}
