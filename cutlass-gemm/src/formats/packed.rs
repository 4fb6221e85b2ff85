//! Packed sub-byte storage, as CUTLASS keeps FP4 and FP6 tensors in global memory.
//!
//! Elements are packed densely in a little-endian bit stream: element `i` occupies bits
//! `[i*B, (i+1)*B)` counting from bit 0 of byte 0 (B = 4 or 6). So two e2m1 share a byte (element
//! 0 in the low nibble), and four 6-bit values fill three bytes. This is the bit order of CuTe's
//! `subbyte_iterator`, which CUTLASS's global-memory tensors of these types use, and what the TMA
//! unpacking modes read; `tests/format_crosscheck.rs` checks it against CuTe. (CUTLASS's
//! `cutlass::Array` of a 6-bit type is a register format, five values per 32-bit word; it is not
//! the memory format.)
//!
//! Alignment for the kernels (Tables 2–3 and the Colfax article): in the unpacking TMA modes used by
//! `kind::f8f6f4` and `kind::mxf8f6f4`, a packed FP4/FP6 operand needs a 32-byte aligned base
//! address and a contiguous extent (and leading dimension) that is a multiple of 128 elements;
//! CUTLASS itself asserts 64-byte (FP4) and 96-byte (FP6) granules. [`tma_requirements`] states them.

use std::marker::PhantomData;

use crate::formats::numeric::{E2M1, E2M3, E3M2};

/// A type stored in fewer than 8 bits.
pub trait SubByte: Copy + sealed::Sealed {
    /// Bits per element.
    const BITS: u32;
    /// From the low `BITS` bits of a byte.
    fn from_code(code: u8) -> Self;
    /// The code, in the low `BITS` bits.
    fn code(self) -> u8;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::formats::numeric::E2M1 {}
    impl Sealed for crate::formats::numeric::E2M3 {}
    impl Sealed for crate::formats::numeric::E3M2 {}
}

macro_rules! sub_byte {
    ($t:ty, $bits:expr) => {
        impl SubByte for $t {
            const BITS: u32 = $bits;
            fn from_code(code: u8) -> Self {
                <$t>::from_bits(code)
            }
            fn code(self) -> u8 {
                self.to_bits()
            }
        }
    };
}
sub_byte!(E2M1, 4);
sub_byte!(E2M3, 6);
sub_byte!(E3M2, 6);

/// Bytes that `len` packed elements of `T` occupy.
pub const fn packed_bytes<T: SubByte>(len: usize) -> usize {
    (len * T::BITS as usize).div_ceil(8)
}

fn read_code(bytes: &[u8], bits: u32, i: usize) -> u8 {
    let bit = i * bits as usize;
    let (byte, shift) = (bit / 8, bit % 8);
    let lo = bytes[byte] as u16;
    let hi = if shift + bits as usize > 8 {
        bytes[byte + 1] as u16
    } else {
        0
    };
    (((lo | hi << 8) >> shift) & ((1 << bits) - 1)) as u8
}

pub(crate) fn write_code(bytes: &mut [u8], bits: u32, i: usize, code: u8) {
    let bit = i * bits as usize;
    let (byte, shift) = (bit / 8, bit % 8);
    let mask = ((1u16 << bits) - 1) << shift;
    let value = ((code as u16) << shift) & mask;
    bytes[byte] = (bytes[byte] & !(mask as u8)) | value as u8;
    if shift + bits as usize > 8 {
        let (m, v) = ((mask >> 8) as u8, (value >> 8) as u8);
        bytes[byte + 1] = (bytes[byte + 1] & !m) | v;
    }
}

/// An owned, packed array of sub-byte values.
#[derive(Clone, PartialEq, Eq)]
pub struct PackedVec<T: SubByte> {
    bytes: Vec<u8>,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: SubByte> std::fmt::Debug for PackedVec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedVec")
            .field("len", &self.len)
            .field("bits", &T::BITS)
            .finish()
    }
}

impl<T: SubByte> PackedVec<T> {
    /// `len` elements with all bits zero (the value +0).
    pub fn zeros(len: usize) -> Self {
        PackedVec {
            bytes: vec![0; packed_bytes::<T>(len)],
            len,
            _t: PhantomData,
        }
    }

    /// Packs values.
    pub fn from_values(values: &[T]) -> Self {
        let mut p = Self::zeros(values.len());
        for (i, v) in values.iter().enumerate() {
            p.set(i, *v);
        }
        p
    }

    /// Takes packed bytes; `bytes` must hold exactly [`packed_bytes`]`(len)` bytes.
    pub fn from_bytes(bytes: Vec<u8>, len: usize) -> Result<Self, crate::Error> {
        if bytes.len() != packed_bytes::<T>(len) {
            return Err(crate::Error::InvalidProblem {
                reason: crate::error::ProblemRule::PackedBytes {
                    len,
                    bits: T::BITS,
                    required: packed_bytes::<T>(len),
                    found: bytes.len(),
                },
            });
        }
        Ok(PackedVec {
            bytes,
            len,
            _t: PhantomData,
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Element `i`. Panics when out of range.
    pub fn get(&self, i: usize) -> T {
        self.as_slice().get(i)
    }

    /// Sets element `i`. Panics when out of range.
    pub fn set(&mut self, i: usize, v: T) {
        assert!(
            i < self.len,
            "index {i} out of range for {} elements",
            self.len
        );
        write_code(&mut self.bytes, T::BITS, i, v.code());
    }

    /// The packed bytes, as a kernel reads them.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// A borrowed view.
    pub fn as_slice(&self) -> PackedSlice<'_, T> {
        PackedSlice {
            bytes: &self.bytes,
            len: self.len,
            _t: PhantomData,
        }
    }

    /// All elements, unpacked.
    pub fn to_vec(&self) -> Vec<T> {
        self.as_slice().to_vec()
    }
}

/// A borrowed, packed array of sub-byte values.
#[derive(Clone, Copy)]
pub struct PackedSlice<'a, T: SubByte> {
    bytes: &'a [u8],
    len: usize,
    _t: PhantomData<T>,
}

impl<'a, T: SubByte> PackedSlice<'a, T> {
    /// A view of `len` elements over packed bytes; `bytes` must hold at least
    /// [`packed_bytes`]`(len)` bytes.
    pub fn new(bytes: &'a [u8], len: usize) -> Result<Self, crate::Error> {
        if bytes.len() < packed_bytes::<T>(len) {
            return Err(crate::Error::BufferTooSmall {
                operand: crate::OperandName::A,
                len: bytes.len(),
                required: packed_bytes::<T>(len),
            });
        }
        Ok(PackedSlice {
            bytes,
            len,
            _t: PhantomData,
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Element `i`. Panics when out of range.
    pub fn get(&self, i: usize) -> T {
        assert!(
            i < self.len,
            "index {i} out of range for {} elements",
            self.len
        );
        T::from_code(read_code(self.bytes, T::BITS, i))
    }

    /// All elements, unpacked.
    pub fn to_vec(&self) -> Vec<T> {
        (0..self.len).map(|i| self.get(i)).collect()
    }

    /// The packed bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        &self.bytes[..packed_bytes::<T>(self.len)]
    }
}

/// What the unpacking TMA modes (`CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B`, `16U6_ALIGN16B`) demand of
/// a packed operand in global memory: (base-address alignment in bytes, contiguous-extent and
/// leading-dimension multiple in elements).
pub const fn tma_requirements(bits: u32) -> (usize, usize) {
    match bits {
        4 | 6 => (32, 128),
        _ => (16, (128 / bits) as usize),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_fp4_per_byte_low_nibble_first() {
        let v: Vec<E2M1> = (0..5).map(|c| E2M1::from_bits(c as u8 + 1)).collect();
        let p = PackedVec::from_values(&v);
        assert_eq!(p.as_bytes(), &[0x21, 0x43, 0x05]);
        assert_eq!(p.to_vec(), v);
    }

    #[test]
    fn four_fp6_per_three_bytes() {
        // Codes 1, 2, 3, 4: bits 000001 000010 000011 000100, little-endian stream.
        let v: Vec<E2M3> = (1..=4).map(E2M3::from_bits).collect();
        let p = PackedVec::from_values(&v);
        let stream: u32 = 1 | 2 << 6 | 3 << 12 | 4 << 18;
        assert_eq!(p.as_bytes(), &stream.to_le_bytes()[..3]);
        assert_eq!(p.to_vec(), v);
    }

    #[test]
    fn set_does_not_disturb_neighbours() {
        let mut p = PackedVec::<E3M2>::from_values(&[E3M2::from_bits(0x3f); 9]);
        p.set(4, E3M2::from_bits(0));
        for i in 0..9 {
            assert_eq!(p.get(i).to_bits(), if i == 4 { 0 } else { 0x3f });
        }
        assert!(PackedVec::<E3M2>::from_bytes(vec![0; 6], 9).is_err());
        assert!(PackedVec::<E3M2>::from_bytes(vec![0; 7], 9).is_ok());
    }
}
