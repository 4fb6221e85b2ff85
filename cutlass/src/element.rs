//! Element types, mapped onto the catalog's [`DataType`]s through a sealed trait.

use cudarc::driver::DeviceRepr;
use cutlass_kernels::DataType;
use half::{bf16, f16};

mod sealed {
    pub trait Sealed {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
    impl Sealed for f32 {}
    impl Sealed for crate::numeric::E4M3 {}
    impl Sealed for crate::numeric::E5M2 {}
}

/// A Rust type that stands for one of the catalog's element types. Sealed: the set follows the
/// kernels this crate can build.
pub trait Element:
    sealed::Sealed
    + DeviceRepr
    + crate::reference::HostValue
    + Copy
    + Send
    + Sync
    + std::fmt::Debug
    + 'static
{
    /// The catalog type.
    const DATA_TYPE: DataType;
    /// Unit roundoff of the type (half the distance from 1.0 to the next value): the relative error
    /// of rounding one value to it.
    const UNIT_ROUNDOFF: f64;
    /// A NaN bit pattern, used to poison outputs in tests.
    const POISON: Self;
    /// Exact widening to `f64`.
    fn to_f64(self) -> f64;
    /// Rounds to nearest (ties to even).
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

fp8_element!(crate::numeric::E4M3, DataType::E4M3, 1.0 / 16.0, 0x7f);
fp8_element!(crate::numeric::E5M2, DataType::E5M2, 1.0 / 8.0, 0x7f);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poison_is_nan_and_roundoff_matches_the_format() {
        use crate::numeric::{E4M3, E5M2};
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
