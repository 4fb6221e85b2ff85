//! Narrow-precision number formats of Tables 1–3: FP8 (e4m3, e5m2), FP6 (e2m3, e3m2), FP4 (e2m1),
//! the scale-factor formats ue8m0 and ue4m3, and tf32.
//!
//! Conversions from `f32` round to nearest, ties to even, and treat overflow, infinity and NaN the
//! way CUDA's own conversion functions do (`__nv_cvt_float_to_fp8`, `__nv_cvt_float_to_fp6`,
//! `__nv_cvt_float_to_fp4`, `__nv_cvt_float_to_e8m0` in `cuda_fp8.h`, `cuda_fp6.h`, `cuda_fp4.h`)
//! and, for ue4m3 and tf32 (which CUDA's headers lack), the way CUTLASS's host conversions do.
//! `tests/format_crosscheck.rs` compares every code point and over a million inputs with those
//! functions, built from the bootstrapped CUDA headers.
//!
//! | format | bits | max finite | infinity | NaN | default `from_f32` |
//! |---|---|---|---|---|---|
//! | [`E4M3`] | 8 | 448 | none | `S.1111.111` | RNE, saturate to ±448; any NaN → `0x7F` |
//! | [`E5M2`] | 8 | 57344 | `S.11111.00` | `S.11111.xx` | RNE, saturate to ±57344; any NaN → `0x7F` |
//! | [`E2M3`] | 6 | 7.5 | none | none | RNE, saturate; NaN → +7.5 |
//! | [`E3M2`] | 6 | 28 | none | none | RNE, saturate; NaN → +28 |
//! | [`E2M1`] | 4 | 6 | none | none | RNE, saturate; NaN → +6 |
//! | [`UE8M0`] | 8 | 2^127 | none | `0xFF` | 2^⌈log2 \|x\|⌉ clamped to [2^-127, 2^127] (CUTLASS's default for scale factors) |
//! | [`UE4M3`] | 8 | 448 | none | `0x7F` | RNE of \|x\|, saturate to 448 (CUTLASS's host conversion) |
//!
//! Sub-byte values are held one per byte in these types (low bits); see [`crate::formats::packed`] for the
//! packed storage kernels read.

use std::fmt;

/// How a format encodes values that are not finite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NonFinite {
    /// IEEE style: all-ones exponent is infinity (zero mantissa) or NaN.
    Ieee,
    /// Only the all-ones code (per sign) is NaN; no infinity (e4m3, ue4m3, ue8m0).
    NanOnly,
    /// Every code is a finite number (FP6, FP4).
    None,
}

/// What a conversion does with values beyond the largest finite number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Saturation {
    /// Clamp to ± the largest finite value (`__NV_SATFINITE`). Infinity also clamps; NaN stays NaN
    /// where the format has one.
    SatFinite,
    /// Overflow to infinity, or to NaN where the format has no infinity (`__NV_NOSAT`).
    NoSat,
}

/// The bit layout of a small floating-point format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FloatFormat {
    /// Name as in CUTLASS (`e4m3`, ...).
    pub name: &'static str,
    /// Width in bits.
    pub bits: u32,
    /// Exponent bits.
    pub exp_bits: u32,
    /// Mantissa bits.
    pub man_bits: u32,
    /// Exponent bias.
    pub bias: i32,
    /// Whether there is a sign bit.
    pub signed: bool,
    /// Non-finite encodings.
    pub non_finite: NonFinite,
}

impl FloatFormat {
    const fn exp_mask(&self) -> u32 {
        (1 << self.exp_bits) - 1
    }

    const fn man_mask(&self) -> u32 {
        (1 << self.man_bits) - 1
    }

    const fn sign_bit(&self) -> u32 {
        if self.signed {
            1 << (self.bits - 1)
        } else {
            0
        }
    }

    /// Whether `code` is NaN.
    pub fn is_nan(&self, code: u32) -> bool {
        let e = (code >> self.man_bits) & self.exp_mask();
        let m = code & self.man_mask();
        match self.non_finite {
            NonFinite::Ieee => e == self.exp_mask() && m != 0,
            NonFinite::NanOnly => e == self.exp_mask() && m == self.man_mask(),
            NonFinite::None => false,
        }
    }

    /// The code of the largest finite value (positive).
    pub fn max_code(&self) -> u32 {
        let all = self.exp_mask() << self.man_bits | self.man_mask();
        match self.non_finite {
            NonFinite::Ieee => ((self.exp_mask() - 1) << self.man_bits) | self.man_mask(),
            // The all-ones code is NaN; the one below it is the largest finite value.
            NonFinite::NanOnly => all - 1,
            NonFinite::None => all,
        }
    }

    /// The largest finite value.
    pub fn max_finite(&self) -> f64 {
        self.decode(self.max_code())
    }

    /// The positive NaN code (formats with NaN).
    fn nan_code(&self) -> u32 {
        (self.exp_mask() << self.man_bits) | self.man_mask()
    }

    /// Decodes a code to its exact value (NaN for NaN codes).
    pub fn decode(&self, code: u32) -> f64 {
        let neg = code & self.sign_bit() != 0;
        let e = (code >> self.man_bits) & self.exp_mask();
        let m = code & self.man_mask();
        if self.is_nan(code) {
            return f64::NAN;
        }
        let mag = if self.non_finite == NonFinite::Ieee && e == self.exp_mask() {
            f64::INFINITY
        } else if self.man_bits == 0 {
            // No subnormals and no zero (ue8m0): every code is a power of two.
            pow2(e as i32 - self.bias)
        } else if e == 0 {
            m as f64 * pow2(1 - self.bias - self.man_bits as i32)
        } else {
            (1.0 + m as f64 / (1u64 << self.man_bits) as f64) * pow2(e as i32 - self.bias)
        };
        if neg {
            -mag
        } else {
            mag
        }
    }

    /// Encodes `x` with round-to-nearest-even.
    pub fn encode_rne(&self, x: f32, sat: Saturation) -> u32 {
        if x.is_nan() {
            return match self.non_finite {
                NonFinite::None => self.max_code(),
                // CUDA (and CUTLASS) give the positive NaN code for any NaN input.
                _ => self.nan_code(),
            };
        }
        // Unsigned formats: CUTLASS's host conversion encodes |x|.
        let x = if self.signed { x } else { x.abs() };
        let sign = if x.is_sign_negative() {
            self.sign_bit()
        } else {
            0
        };
        let overflow = |sign: u32| -> u32 {
            match (sat, self.non_finite) {
                (Saturation::SatFinite, _) | (_, NonFinite::None) => self.max_code() | sign,
                (Saturation::NoSat, NonFinite::Ieee) => (self.exp_mask() << self.man_bits) | sign,
                (Saturation::NoSat, NonFinite::NanOnly) => self.nan_code() | sign,
            }
        };
        if x.is_infinite() {
            return overflow(sign);
        }
        let a = (x as f64).abs();
        if a == 0.0 {
            return sign;
        }
        let emin = 1 - self.bias;
        let e = exponent_of(a).max(emin);
        let quantum = pow2(e - self.man_bits as i32);
        let r = (a / quantum).round_ties_even();
        let value = r * quantum;
        if value > self.max_finite() {
            return overflow(sign);
        }
        if value == 0.0 {
            return sign;
        }
        let r = r as u32;
        let implicit = 1u32 << self.man_bits;
        let code = if r >= 2 * implicit {
            // Rounded up into the next binade.
            (((e + 1 + self.bias) as u32) << self.man_bits) | ((r / 2) - implicit)
        } else if r >= implicit {
            (((e + self.bias) as u32) << self.man_bits) | (r - implicit)
        } else {
            r // subnormal: exponent field 0
        };
        code | sign
    }
}

/// 2^e as f64 (exact for the exponents used here).
fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// floor(log2(a)) for finite positive a (normal f64; every f32 is normal in f64).
fn exponent_of(a: f64) -> i32 {
    ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

macro_rules! small_float {
    ($(#[$doc:meta])* $name:ident, $fmt:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
        #[repr(transparent)]
        pub struct $name(u8);

        impl $name {
            /// The format's bit layout.
            pub const FORMAT: FloatFormat = $fmt;

            /// From raw bits (the low `FORMAT.bits` bits are used).
            pub const fn from_bits(bits: u8) -> Self {
                $name(bits & (((1u32 << $fmt.bits) - 1) as u8))
            }

            /// The raw bits.
            pub const fn to_bits(self) -> u8 {
                self.0
            }

            /// The exact value as f32 (every value of these formats is an f32).
            pub fn to_f32(self) -> f32 {
                Self::FORMAT.decode(self.0 as u32) as f32
            }

            /// The exact value as f64.
            pub fn to_f64(self) -> f64 {
                Self::FORMAT.decode(self.0 as u32)
            }

            /// Whether this is NaN.
            pub fn is_nan(self) -> bool {
                Self::FORMAT.is_nan(self.0 as u32)
            }

            /// The largest finite value.
            pub fn max_finite() -> f64 {
                Self::FORMAT.max_finite()
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:#04x} = {})", stringify!($name), self.0, self.to_f64())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.to_f64(), f)
            }
        }

        // SAFETY: a plain byte; every bit pattern is a valid value.
        unsafe impl cudarc::driver::DeviceRepr for $name {}
        // SAFETY: zero bits are the value zero (or 2^-127 for ue8m0, still a valid value).
        unsafe impl cudarc::driver::ValidAsZeroBits for $name {}
    };
}

small_float!(
    /// FP8 E4M3 (`cutlass::float_e4m3_t`, `__nv_fp8_e4m3`): bias 7, no infinity, NaN `S.1111.111`.
    E4M3,
    FloatFormat { name: "e4m3", bits: 8, exp_bits: 4, man_bits: 3, bias: 7, signed: true, non_finite: NonFinite::NanOnly }
);
small_float!(
    /// FP8 E5M2 (`cutlass::float_e5m2_t`, `__nv_fp8_e5m2`): bias 15, IEEE infinities and NaNs.
    E5M2,
    FloatFormat { name: "e5m2", bits: 8, exp_bits: 5, man_bits: 2, bias: 15, signed: true, non_finite: NonFinite::Ieee }
);
small_float!(
    /// FP6 E2M3 (`cutlass::float_e2m3_t`): bias 1, all codes finite, max 7.5.
    E2M3,
    FloatFormat { name: "e2m3", bits: 6, exp_bits: 2, man_bits: 3, bias: 1, signed: true, non_finite: NonFinite::None }
);
small_float!(
    /// FP6 E3M2 (`cutlass::float_e3m2_t`): bias 3, all codes finite, max 28.
    E3M2,
    FloatFormat { name: "e3m2", bits: 6, exp_bits: 3, man_bits: 2, bias: 3, signed: true, non_finite: NonFinite::None }
);
small_float!(
    /// FP4 E2M1 (`cutlass::float_e2m1_t`): bias 1, values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and negatives.
    E2M1,
    FloatFormat { name: "e2m1", bits: 4, exp_bits: 2, man_bits: 1, bias: 1, signed: true, non_finite: NonFinite::None }
);
small_float!(
    /// Unsigned E8M0 scale factor (`cutlass::float_ue8m0_t`): 2^(e-127), no zero, `0xFF` is NaN.
    UE8M0,
    FloatFormat { name: "ue8m0", bits: 8, exp_bits: 8, man_bits: 0, bias: 127, signed: false, non_finite: NonFinite::NanOnly }
);
small_float!(
    /// Unsigned E4M3 scale factor (`cutlass::float_ue4m3_t`): bias 7, max 448, `0x7F` is NaN.
    UE4M3,
    FloatFormat { name: "ue4m3", bits: 7, exp_bits: 4, man_bits: 3, bias: 7, signed: false, non_finite: NonFinite::NanOnly }
);

impl E4M3 {
    /// RNE, saturating to ±448 (`__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)`; what
    /// CUTLASS's `float_e4m3_t(float)` does).
    pub fn from_f32(x: f32) -> Self {
        Self::from_f32_with(x, Saturation::SatFinite)
    }

    /// RNE with the given saturation mode (`__nv_cvt_float_to_fp8`).
    pub fn from_f32_with(x: f32, sat: Saturation) -> Self {
        E4M3(Self::FORMAT.encode_rne(x, sat) as u8)
    }
}

impl E5M2 {
    /// RNE, saturating to ±57344 (`__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2)`).
    pub fn from_f32(x: f32) -> Self {
        Self::from_f32_with(x, Saturation::SatFinite)
    }

    /// RNE with the given saturation mode (`__nv_cvt_float_to_fp8`).
    pub fn from_f32_with(x: f32, sat: Saturation) -> Self {
        E5M2(Self::FORMAT.encode_rne(x, sat) as u8)
    }
}

macro_rules! saturating_only {
    ($name:ident, $cuda:literal) => {
        impl $name {
            #[doc = concat!("RNE; out-of-range values saturate, NaN gives +max (`", $cuda, "`).")]
            pub fn from_f32(x: f32) -> Self {
                $name(Self::FORMAT.encode_rne(x, Saturation::SatFinite) as u8)
            }
        }
    };
}
saturating_only!(
    E2M3,
    "__nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest)"
);
saturating_only!(
    E3M2,
    "__nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest)"
);
saturating_only!(
    E2M1,
    "__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest)"
);
saturating_only!(
    UE4M3,
    "cutlass::float_ue4m3_t(x)` on the host, which encodes |x|; scale factors are never negative. (On the device CUTLASS converts with the signed e4m3 instruction, so pass non-negative values`"
);

/// Rounding of a value to a power of two, for [`UE8M0`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PowerOfTwoRounding {
    /// Toward zero: 2^⌊log2 |x|⌋ (`cudaRoundZero`).
    TowardZero,
    /// Toward +∞: 2^⌈log2 |x|⌉ (`cudaRoundPosInf`).
    Up,
}

impl UE8M0 {
    /// 2^⌈log2 |x|⌉, saturating (CUTLASS's default `float → float_ue8m0_t` conversion,
    /// `cvt.rp.satfinite.ue8m0x2.f32`).
    pub fn from_f32(x: f32) -> Self {
        Self::from_f32_with(x, PowerOfTwoRounding::Up, Saturation::SatFinite)
    }

    /// `__nv_cvt_float_to_e8m0(x, sat, rounding)`: |x| rounded to a power of two, clamped below at
    /// 2^-127; above 2^127 it saturates or becomes NaN; NaN gives `0xFF`.
    pub fn from_f32_with(x: f32, rounding: PowerOfTwoRounding, sat: Saturation) -> Self {
        if x.is_nan() {
            return UE8M0(0xff);
        }
        let a = (x as f64).abs();
        let e = if a == 0.0 {
            -127
        } else if a.is_infinite() {
            i32::MAX
        } else {
            let e = exponent_of(a);
            match rounding {
                PowerOfTwoRounding::TowardZero => e,
                PowerOfTwoRounding::Up => {
                    if a == pow2(e) {
                        e
                    } else {
                        e + 1
                    }
                }
            }
        };
        let e = e.max(-127);
        if e > 127 {
            return match sat {
                Saturation::SatFinite => UE8M0(0xfe),
                Saturation::NoSat => UE8M0(0xff),
            };
        }
        UE8M0((e + 127) as u8)
    }

    /// The scale 2^e for an exponent e in [-127, 127].
    pub fn from_exponent(e: i32) -> Self {
        UE8M0((e.clamp(-127, 127) + 127) as u8)
    }

    /// The exponent e of 2^e (NaN has none).
    pub fn exponent(self) -> Option<i32> {
        (self.0 != 0xff).then_some(self.0 as i32 - 127)
    }
}

/// TF32: f32 storage whose low 13 mantissa bits are ignored by tensor cores (`cutlass::tfloat32_t`).
#[derive(Clone, Copy, Default, PartialEq, Debug)]
#[repr(transparent)]
pub struct Tf32(f32);

impl Tf32 {
    /// A quiet NaN.
    pub const NAN: Tf32 = Tf32(f32::NAN);

    /// Round to nearest with ties away from zero to 10 mantissa bits, as CUTLASS's
    /// `tfloat32_t(float)` (`round_half_ulp_truncate`) and `cvt.rna.tf32.f32` do.
    pub fn from_f32(x: f32) -> Self {
        if !x.is_finite() {
            return Tf32(x);
        }
        let bits = x.to_bits().wrapping_add(0x1000) & 0xffff_e000;
        Tf32(f32::from_bits(bits))
    }

    /// Drop the low 13 mantissa bits: what a tensor core reads from an f32 operand.
    pub fn truncate(x: f32) -> Self {
        if x.is_nan() {
            return Tf32(x);
        }
        Tf32(f32::from_bits(x.to_bits() & 0xffff_e000))
    }

    /// The value.
    pub fn to_f32(self) -> f32 {
        self.0
    }

    /// The raw bits of the f32 container.
    pub fn to_bits(self) -> u32 {
        self.0.to_bits()
    }
}

// SAFETY: an f32.
unsafe impl cudarc::driver::DeviceRepr for Tf32 {}
// SAFETY: zero bits are 0.0.
unsafe impl cudarc::driver::ValidAsZeroBits for Tf32 {}

mod float8_interop {
    //! Bit-exact conversions with the `float8` crate's types (used by candle and cudarc).
    use super::{E4M3, E5M2};

    impl From<float8::F8E4M3> for E4M3 {
        fn from(v: float8::F8E4M3) -> Self {
            E4M3::from_bits(v.to_bits())
        }
    }
    impl From<E4M3> for float8::F8E4M3 {
        fn from(v: E4M3) -> Self {
            float8::F8E4M3::from_bits(v.to_bits())
        }
    }
    impl From<float8::F8E5M2> for E5M2 {
        fn from(v: float8::F8E5M2) -> Self {
            E5M2::from_bits(v.to_bits())
        }
    }
    impl From<E5M2> for float8::F8E5M2 {
        fn from(v: E5M2) -> Self {
            float8::F8E5M2::from_bits(v.to_bits())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        assert_eq!(E4M3::max_finite(), 448.0);
        assert_eq!(E5M2::max_finite(), 57344.0);
        assert_eq!(E2M3::max_finite(), 7.5);
        assert_eq!(E3M2::max_finite(), 28.0);
        assert_eq!(E2M1::max_finite(), 6.0);
        assert_eq!(UE4M3::max_finite(), 448.0);
        assert_eq!(UE8M0::max_finite(), 2f64.powi(127));
        let e2m1: Vec<f64> = (0..8).map(|c| E2M1::from_bits(c).to_f64()).collect();
        assert_eq!(e2m1, vec![0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]);
        assert_eq!(E4M3::from_bits(0x01).to_f64(), 2f64.powi(-9)); // smallest subnormal
        assert!(E4M3::from_bits(0x7f).is_nan() && E4M3::from_bits(0xff).is_nan());
        assert_eq!(E5M2::from_bits(0x7c).to_f64(), f64::INFINITY);
        assert_eq!(UE8M0::from_bits(0).to_f64(), 2f64.powi(-127));
        assert!(UE8M0::from_bits(0xff).is_nan());
    }

    #[test]
    fn rounding_ties_to_even_and_saturation() {
        // 1.0625 is halfway between 1.0 (mantissa 000) and 1.125 (001): ties to even → 1.0.
        assert_eq!(E4M3::from_f32(1.0625).to_f32(), 1.0);
        // 1.1875 is halfway between 1.125 (001) and 1.25 (010) → 1.25.
        assert_eq!(E4M3::from_f32(1.1875).to_f32(), 1.25);
        assert_eq!(E4M3::from_f32(1e9).to_f32(), 448.0);
        assert!(E4M3::from_f32_with(1e9, Saturation::NoSat).is_nan());
        assert_eq!(
            E5M2::from_f32_with(f32::INFINITY, Saturation::NoSat).to_f64(),
            f64::INFINITY
        );
        assert_eq!(E2M1::from_f32(5.0).to_f32(), 4.0); // tie between 4 and 6 → 4 (even)
        assert_eq!(E2M1::from_f32(-100.0).to_f32(), -6.0);
        assert_eq!(E2M1::from_f32(f32::NAN).to_f32(), 6.0);
        assert_eq!(UE8M0::from_f32(3.0).to_f64(), 4.0);
        assert_eq!(
            UE8M0::from_f32_with(3.0, PowerOfTwoRounding::TowardZero, Saturation::SatFinite)
                .to_f64(),
            2.0
        );
        assert_eq!(
            Tf32::from_f32(1.0 + 2f32.powi(-11)).to_f32(),
            1.0 + 2f32.powi(-10)
        ); // tie away
        assert_eq!(Tf32::truncate(1.0 + 2f32.powi(-11)).to_f32(), 1.0);
    }

    #[test]
    fn float8_crate_interop_is_bit_exact() {
        for c in 0..=255u8 {
            let ours = E4M3::from_bits(c);
            let theirs: float8::F8E4M3 = ours.into();
            assert_eq!(E4M3::from(theirs).to_bits(), c);
            let ours = E5M2::from_bits(c);
            let theirs: float8::F8E5M2 = ours.into();
            assert_eq!(E5M2::from(theirs).to_bits(), c);
            if !ours.is_nan() {
                assert_eq!(theirs.to_f64(), ours.to_f64());
            }
        }
    }

    #[test]
    fn every_code_round_trips() {
        fn check(f: FloatFormat) {
            for code in 0..(1u32 << f.bits) {
                let v = f.decode(code);
                if v.is_nan() {
                    continue;
                }
                let back = f.encode_rne(v as f32, Saturation::NoSat);
                assert_eq!(back, code, "{} code {code:#x} value {v}", f.name);
            }
        }
        for f in [
            E4M3::FORMAT,
            E5M2::FORMAT,
            E2M3::FORMAT,
            E3M2::FORMAT,
            E2M1::FORMAT,
            UE4M3::FORMAT,
        ] {
            check(f);
        }
    }
}
