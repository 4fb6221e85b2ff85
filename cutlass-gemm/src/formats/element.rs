//! Element types, mapped onto the catalog's [`DataType`]s through a sealed trait.

use cudarc::driver::DeviceRepr;
use cutlass_gemm_catalog::DataType;
use half::{bf16, f16};

mod sealed {
    pub trait Sealed {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
    impl Sealed for f32 {}
    impl Sealed for crate::formats::numeric::E4M3 {}
    impl Sealed for crate::formats::numeric::E5M2 {}
    impl Sealed for crate::formats::numeric::Tf32 {}
    impl Sealed for i8 {}
    impl Sealed for u8 {}
    impl Sealed for i32 {}
}

/// A Rust type that stands for one of the catalog's element types. Sealed: the set follows the
/// kernels this crate can build.
pub trait Element:
    sealed::Sealed + DeviceRepr + super::HostValue + Copy + Send + Sync + std::fmt::Debug + 'static
{
    /// The catalog type.
    const DATA_TYPE: DataType;
    /// Unit roundoff of the type (half the distance from 1.0 to the next value): the relative error
    /// of rounding one value to it.
    const UNIT_ROUNDOFF: f64;
    /// A value no correct result holds where tests poison outputs: a NaN for the floating-point
    /// types, the most negative value for the integer ones.
    const POISON: Self;
    /// Exact widening to `f64`.
    fn to_f64(self) -> f64;
    /// Rounds to nearest (ties to even); the integer types saturate to their range.
    fn from_f64(v: f64) -> Self;
    /// The raw bits, for bitwise comparisons.
    fn to_bits_u64(self) -> u64;
}

/// The 16-bit formats of `half`: conversions through `half`'s correctly rounded routines.
macro_rules! half_element {
    ($t:ty, $data_type:expr, $unit_roundoff:expr) => {
        impl Element for $t {
            const DATA_TYPE: DataType = $data_type;
            const UNIT_ROUNDOFF: f64 = $unit_roundoff;
            const POISON: Self = <$t>::from_bits(0x7fff);
            fn to_f64(self) -> f64 {
                <$t>::to_f64(self)
            }
            fn from_f64(v: f64) -> Self {
                <$t>::from_f64(v)
            }
            fn to_bits_u64(self) -> u64 {
                self.to_bits() as u64
            }
        }
    };
}

half_element!(f16, DataType::F16, 1.0 / 2048.0);
half_element!(bf16, DataType::Bf16, 1.0 / 256.0);

impl Element for f32 {
    const DATA_TYPE: DataType = DataType::F32;
    const UNIT_ROUNDOFF: f64 = 1.0 / 16_777_216.0;
    const POISON: Self = f32::from_bits(0x7fff_ffff);
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_bits_u64(self) -> u64 {
        self.to_bits() as u64
    }
}

/// TF32 operands (SM90 tf32 GEMMs, f32 output): f32 storage of which the tensor cores read the top
/// 19 bits. `from_f64` rounds to 10 mantissa bits as CUTLASS's `tfloat32_t(float)` does (through
/// f32; ties away from zero).
impl Element for crate::formats::numeric::Tf32 {
    const DATA_TYPE: DataType = DataType::Tf32;
    const UNIT_ROUNDOFF: f64 = 1.0 / 2048.0;
    const POISON: Self = crate::formats::numeric::Tf32::NAN;
    fn to_f64(self) -> f64 {
        self.to_f32() as f64
    }
    fn from_f64(v: f64) -> Self {
        crate::formats::numeric::Tf32::from_f32(v as f32)
    }
    fn to_bits_u64(self) -> u64 {
        self.to_bits() as u64
    }
}

/// The integer types of SM90 integer GEMMs: `i8`/`u8` operands, `i32` (and `i8`) outputs, an
/// `i32` accumulator. Their unit roundoff is that of the f32 epilogue (`alpha * acc + beta * c` is
/// computed in f32, then rounded to the nearest integer and saturated).
macro_rules! int_element {
    ($t:ty, $bits:ty, $data_type:expr) => {
        impl Element for $t {
            const DATA_TYPE: DataType = $data_type;
            const UNIT_ROUNDOFF: f64 = 1.0 / 16_777_216.0;
            const POISON: Self = <$t>::MIN;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                // `as` saturates; round half to even first.
                v.round_ties_even() as $t
            }
            fn to_bits_u64(self) -> u64 {
                self as $bits as u64
            }
        }
    };
}

int_element!(i8, u8, DataType::I8);
int_element!(u8, u8, DataType::U8);
int_element!(i32, u32, DataType::I32);

/// The FP8 formats (SM90 FP8 GEMMs). `from_f64` rounds through f32 (exact for every f32 input;
/// an f64 within half an f32 ulp of an FP8 tie may round differently from a single rounding).
macro_rules! fp8_element {
    ($t:ty, $data_type:expr, $unit_roundoff:expr, $nan:expr) => {
        impl Element for $t {
            const DATA_TYPE: DataType = $data_type;
            const UNIT_ROUNDOFF: f64 = $unit_roundoff;
            const POISON: Self = <$t>::from_bits($nan);
            fn to_f64(self) -> f64 {
                <$t>::to_f64(self)
            }
            fn from_f64(v: f64) -> Self {
                <$t>::from_f32(v as f32)
            }
            fn to_bits_u64(self) -> u64 {
                self.to_bits() as u64
            }
        }
        impl Fp8 for $t {}
    };
}

/// The FP8 element types (e4m3, e5m2): the operands of SM90 FP8 GEMMs, tensor-wise
/// ([`crate::GemmProblem::with_tensor_scales`]) or blockwise ([`crate::BlockwiseGemm`]) scaled.
pub trait Fp8: Element {}

fp8_element!(
    crate::formats::numeric::E4M3,
    DataType::E4M3,
    1.0 / 16.0,
    0x7f
);
fp8_element!(
    crate::formats::numeric::E5M2,
    DataType::E5M2,
    1.0 / 8.0,
    0x7f
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_conversions_round_to_even_and_saturate() {
        assert_eq!(<i8 as Element>::from_f64(2.5), 2);
        assert_eq!(<i8 as Element>::from_f64(-3.5), -4);
        assert_eq!(<i8 as Element>::from_f64(127.6), 127);
        assert_eq!(<i8 as Element>::from_f64(-1e9), -128);
        assert_eq!(<u8 as Element>::from_f64(-0.7), 0);
        assert_eq!(<i32 as Element>::from_f64(1e12), i32::MAX);
        assert_eq!(<i8 as Element>::to_bits_u64(-1), 0xff);
        assert_eq!(<i32 as Element>::to_bits_u64(-1), 0xffff_ffff);
        use crate::formats::numeric::Tf32;
        assert!(Tf32::POISON.to_f32().is_nan());
        // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: CUTLASS's tfloat32_t rounds it away.
        assert_eq!(
            Tf32::from_f64(1.0 + 2f64.powi(-11)).to_f64(),
            1.0 + 2f64.powi(-10)
        );
        assert_eq!(Tf32::UNIT_ROUNDOFF, 2f64.powi(-11));
    }

    #[test]
    fn poison_is_nan_and_roundoff_matches_the_format() {
        use crate::formats::numeric::{E4M3, E5M2};
        assert!(f16::POISON.is_nan() && bf16::POISON.is_nan() && f32::POISON.is_nan());
        assert!(E4M3::POISON.is_nan() && E5M2::POISON.is_nan());
        for (u, one_plus_2u, one_plus_u) in [
            (
                E4M3::UNIT_ROUNDOFF,
                E4M3::from_f64(1.0 + 2.0 * E4M3::UNIT_ROUNDOFF).to_f64(),
                E4M3::from_f64(1.0 + E4M3::UNIT_ROUNDOFF).to_f64(),
            ),
            (
                E5M2::UNIT_ROUNDOFF,
                E5M2::from_f64(1.0 + 2.0 * E5M2::UNIT_ROUNDOFF).to_f64(),
                E5M2::from_f64(1.0 + E5M2::UNIT_ROUNDOFF).to_f64(),
            ),
        ] {
            assert_eq!(one_plus_2u, 1.0 + 2.0 * u);
            assert_eq!(one_plus_u, 1.0);
        }
        // 1 + u rounds to 1 (tie to even), 1 + 2u is the next representable value.
        for (u, one_plus_2u, one_plus_u) in [
            (
                f16::UNIT_ROUNDOFF,
                f16::from_f64(1.0 + 2.0 * f16::UNIT_ROUNDOFF).to_f64(),
                f16::from_f64(1.0 + f16::UNIT_ROUNDOFF).to_f64(),
            ),
            (
                bf16::UNIT_ROUNDOFF,
                bf16::from_f64(1.0 + 2.0 * bf16::UNIT_ROUNDOFF).to_f64(),
                bf16::from_f64(1.0 + bf16::UNIT_ROUNDOFF).to_f64(),
            ),
        ] {
            assert_eq!(one_plus_2u, 1.0 + 2.0 * u);
            assert_eq!(one_plus_u, 1.0);
        }
    }
}
