//! Element types, layouts and architectures: the vocabulary of the catalog.

use std::fmt;

/// An element type a kernel reads or writes, named as CUTLASS's `cutlass_library` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum DataType {
    /// IEEE half precision (`cutlass::half_t`).
    F16,
    /// bfloat16 (`cutlass::bfloat16_t`).
    Bf16,
    /// IEEE single precision (`float`).
    F32,
    /// TF32: f32 storage, 10 mantissa bits used (`cutlass::tfloat32_t`).
    Tf32,
    /// Signed 8-bit integer.
    I8,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 32-bit integer (integer accumulator and output).
    I32,
    /// FP8 E4M3 (`cutlass::float_e4m3_t`).
    E4M3,
    /// FP8 E5M2 (`cutlass::float_e5m2_t`).
    E5M2,
    /// FP6 E2M3 (`cutlass::float_e2m3_t`).
    E2M3,
    /// FP6 E3M2 (`cutlass::float_e3m2_t`).
    E3M2,
    /// FP4 E2M1 (`cutlass::float_e2m1_t`).
    E2M1,
    /// Unsigned E8M0 scale factor (`cutlass::float_ue8m0_t`).
    UE8M0,
    /// Unsigned E4M3 scale factor (`cutlass::float_ue4m3_t`).
    UE4M3,
    /// Signed 4-bit integer (`cutlass::int4b_t`): quantized weights of the weight-only kernels.
    S4,
    /// Unsigned 4-bit integer (`cutlass::uint4b_t`): quantized weights with zero points.
    U4,
}

impl DataType {
    /// Every data type, in catalog order.
    pub const ALL: &'static [DataType] = &[
        DataType::F16,
        DataType::Bf16,
        DataType::F32,
        DataType::Tf32,
        DataType::I8,
        DataType::U8,
        DataType::I32,
        DataType::E4M3,
        DataType::E5M2,
        DataType::E2M3,
        DataType::E3M2,
        DataType::E2M1,
        DataType::UE8M0,
        DataType::UE4M3,
        DataType::S4,
        DataType::U4,
    ];

    /// The short name used in procedural kernel names (`DataTypeNames` in `cutlass_library`).
    pub const fn short_name(self) -> &'static str {
        match self {
            DataType::F16 => "f16",
            DataType::Bf16 => "bf16",
            DataType::F32 => "f32",
            DataType::Tf32 => "tf32",
            DataType::I8 => "s8",
            DataType::U8 => "u8",
            DataType::I32 => "s32",
            DataType::E4M3 => "e4m3",
            DataType::E5M2 => "e5m2",
            DataType::E2M3 => "e2m3",
            DataType::E3M2 => "e3m2",
            DataType::E2M1 => "e2m1",
            DataType::UE8M0 => "ue8m0",
            DataType::UE4M3 => "ue4m3",
            DataType::S4 => "s4",
            DataType::U4 => "u4",
        }
    }

    /// The C++ type in CUTLASS (`DataTypeTag` in `cutlass_library`).
    pub const fn cpp_type(self) -> &'static str {
        match self {
            DataType::F16 => "cutlass::half_t",
            DataType::Bf16 => "cutlass::bfloat16_t",
            DataType::F32 => "float",
            DataType::Tf32 => "cutlass::tfloat32_t",
            DataType::I8 => "int8_t",
            DataType::U8 => "uint8_t",
            DataType::I32 => "int32_t",
            DataType::E4M3 => "cutlass::float_e4m3_t",
            DataType::E5M2 => "cutlass::float_e5m2_t",
            DataType::E2M3 => "cutlass::float_e2m3_t",
            DataType::E3M2 => "cutlass::float_e3m2_t",
            DataType::E2M1 => "cutlass::float_e2m1_t",
            DataType::UE8M0 => "cutlass::float_ue8m0_t",
            DataType::UE4M3 => "cutlass::float_ue4m3_t",
            DataType::S4 => "cutlass::int4b_t",
            DataType::U4 => "cutlass::uint4b_t",
        }
    }

    /// Whether the type is an integer (s8, u8, s32, s4, u4).
    pub const fn is_integer(self) -> bool {
        matches!(
            self,
            DataType::I8 | DataType::U8 | DataType::I32 | DataType::S4 | DataType::U4
        )
    }

    /// Size of one element in bits.
    pub const fn bits(self) -> u32 {
        match self {
            DataType::F16 | DataType::Bf16 => 16,
            DataType::F32 | DataType::Tf32 | DataType::I32 => 32,
            DataType::I8
            | DataType::U8
            | DataType::E4M3
            | DataType::E5M2
            | DataType::UE8M0
            | DataType::UE4M3 => 8,
            DataType::E2M3 | DataType::E3M2 => 6,
            DataType::E2M1 | DataType::S4 | DataType::U4 => 4,
        }
    }

    /// Alignment, in elements, that a TMA operand of this type needs: 16 bytes. (Packed FP6 and
    /// FP4 operands of the unpacking TMA modes need more; CUTLASS's tables give it per type row.)
    pub const fn tma_alignment(self) -> u32 {
        if 128 % self.bits() == 0 {
            128 / self.bits()
        } else {
            128
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short_name())
    }
}

/// The layout of a matrix in memory.
///
/// The letters follow BLAS and CUTLASS: `T` is row-major, `N` is column-major. For A (m x k) row-major
/// means K is contiguous; for B (k x n) column-major means K is contiguous.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layout {
    /// Row-major (`T`): consecutive elements of a row are adjacent; `ld` is the distance between rows.
    RowMajor,
    /// Column-major (`N`): consecutive elements of a column are adjacent; `ld` is the distance between
    /// columns.
    ColumnMajor,
}

impl Layout {
    /// The letter in CUTLASS names: `t` for row-major, `n` for column-major.
    pub const fn letter(self) -> char {
        match self {
            Layout::RowMajor => 't',
            Layout::ColumnMajor => 'n',
        }
    }

    /// The CUTLASS layout tag.
    pub const fn cpp_type(self) -> &'static str {
        match self {
            Layout::RowMajor => "cutlass::layout::RowMajor",
            Layout::ColumnMajor => "cutlass::layout::ColumnMajor",
        }
    }

    /// The other layout: the layout of the transposed matrix over the same memory.
    pub const fn transposed(self) -> Layout {
        match self {
            Layout::RowMajor => Layout::ColumnMajor,
            Layout::ColumnMajor => Layout::RowMajor,
        }
    }
}

/// A GPU architecture a kernel is compiled for. Kernels use arch-specific features (`sm_90a`,
/// `sm_100a`, `sm_120a`), so they run only on devices of exactly that compute capability.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Arch {
    /// Hopper (H100, H200): compute capability 9.0, `sm_90a`.
    Sm90a,
    /// Blackwell datacenter (B200, GB200): compute capability 10.0, `sm_100a`.
    Sm100a,
    /// Blackwell GeForce/workstation (RTX 50xx, RTX PRO 6000): compute capability 12.0, `sm_120a`.
    Sm120a,
}

impl Arch {
    /// Every architecture, in catalog order.
    pub const ALL: &'static [Arch] = &[Arch::Sm90a, Arch::Sm100a, Arch::Sm120a];

    /// The number in kernel names and in `CUTLASS_RS_ARCHS` (`90a`).
    pub const fn number(self) -> u32 {
        match self {
            Arch::Sm90a => 90,
            Arch::Sm100a => 100,
            Arch::Sm120a => 120,
        }
    }

    /// The name used in `CUTLASS_RS_ARCHS` and in listings: `90a`.
    pub const fn tag(self) -> &'static str {
        match self {
            Arch::Sm90a => "90a",
            Arch::Sm100a => "100a",
            Arch::Sm120a => "120a",
        }
    }

    /// The compute capability (major, minor) of the devices that run this architecture's kernels.
    pub const fn compute_capability(self) -> (i32, i32) {
        match self {
            Arch::Sm90a => (9, 0),
            Arch::Sm100a => (10, 0),
            Arch::Sm120a => (12, 0),
        }
    }

    /// Whether a kernel of this architecture runs on a device of compute capability `cc`.
    pub const fn runs_on(self, cc: (i32, i32)) -> bool {
        let own = self.compute_capability();
        own.0 == cc.0 && own.1 == cc.1
    }

    /// nvcc's `-gencode` argument: SASS for exactly this architecture.
    pub const fn gencode(self) -> &'static str {
        match self {
            Arch::Sm90a => "arch=compute_90a,code=sm_90a",
            Arch::Sm100a => "arch=compute_100a,code=sm_100a",
            Arch::Sm120a => "arch=compute_120a,code=sm_120a",
        }
    }

    /// The CUTLASS architecture tag.
    pub const fn cpp_type(self) -> &'static str {
        match self {
            Arch::Sm90a => "cutlass::arch::Sm90",
            Arch::Sm100a => "cutlass::arch::Sm100",
            Arch::Sm120a => "cutlass::arch::Sm120",
        }
    }

    /// Parses `90a`, `sm90a`, `sm_90a`, `90`, ... into an architecture.
    pub fn parse(s: &str) -> Option<Arch> {
        let t = s.trim().to_ascii_lowercase();
        let t = t.trim_start_matches("sm").trim_start_matches('_');
        Arch::ALL
            .iter()
            .copied()
            .find(|a| t == a.tag() || t == a.number().to_string())
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm{}", self.tag())
    }
}
