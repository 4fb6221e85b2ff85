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
}

impl DataType {
    /// Every data type, in catalog order.
    pub const ALL: &'static [DataType] = &[DataType::F16, DataType::Bf16, DataType::F32];

    /// The short name used in procedural kernel names (`DataTypeNames` in `cutlass_library`).
    pub const fn short_name(self) -> &'static str {
        match self {
            DataType::F16 => "f16",
            DataType::Bf16 => "bf16",
            DataType::F32 => "f32",
        }
    }

    /// The C++ type in CUTLASS (`DataTypeTag` in `cutlass_library`).
    pub const fn cpp_type(self) -> &'static str {
        match self {
            DataType::F16 => "cutlass::half_t",
            DataType::Bf16 => "cutlass::bfloat16_t",
            DataType::F32 => "float",
        }
    }

    /// Size of one element in bits.
    pub const fn bits(self) -> u32 {
        match self {
            DataType::F16 | DataType::Bf16 => 16,
            DataType::F32 => 32,
        }
    }

    /// Alignment, in elements, that a TMA operand of this type needs: 16 bytes.
    pub const fn tma_alignment(self) -> u32 {
        128 / self.bits()
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
