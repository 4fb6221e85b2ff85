//! Tables 1–3 of CUTLASS's Blackwell GEMM documentation (`blackwell_functionality.md`) as data: which A/B types,
//! layouts and alignments each `tcgen05.mma` kind accepts, dense and sparse.

use crate::types::{DataType, Layout};

/// A type as CUTLASS's tables name it: a concrete type or a family the collective builders accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TypeFamily {
    /// `tfloat32_t`.
    Tf32,
    /// `half_t`.
    F16,
    /// `bfloat16_t`.
    Bf16,
    /// `int8_t`.
    I8,
    /// `uint8_t`.
    U8,
    /// `float4_t`: e2m1.
    Float4,
    /// `float6_t`: e2m3 or e3m2.
    Float6,
    /// `float8_t`: e4m3 or e5m2.
    Float8,
    /// `mx_float4_t`: e2m1 with a ue8m0 scale per 32 elements of K.
    MxFloat4,
    /// `mx_float6_t<F6>`: e2m3 or e3m2 with a ue8m0 scale per 32.
    MxFloat6,
    /// `mx_float8_t<F8>`: e4m3 or e5m2 with a ue8m0 scale per 32.
    MxFloat8,
    /// `nv_float4_t`: e2m1 with a ue4m3 scale per 16.
    NvFloat4,
}

impl TypeFamily {
    /// The concrete element types of the family.
    pub const fn element_types(self) -> &'static [DataType] {
        match self {
            TypeFamily::Tf32 => &[DataType::Tf32],
            TypeFamily::F16 => &[DataType::F16],
            TypeFamily::Bf16 => &[DataType::Bf16],
            TypeFamily::I8 => &[DataType::I8],
            TypeFamily::U8 => &[DataType::U8],
            TypeFamily::Float4 | TypeFamily::MxFloat4 | TypeFamily::NvFloat4 => &[DataType::E2M1],
            TypeFamily::Float6 | TypeFamily::MxFloat6 => &[DataType::E2M3, DataType::E3M2],
            TypeFamily::Float8 | TypeFamily::MxFloat8 => &[DataType::E4M3, DataType::E5M2],
        }
    }

    /// The block scaling: (scale-factor type, elements of K per scale in a dense GEMM).
    pub const fn block_scale(self) -> Option<(DataType, u32)> {
        match self {
            TypeFamily::MxFloat4 | TypeFamily::MxFloat6 | TypeFamily::MxFloat8 => {
                Some((DataType::UE8M0, 32))
            }
            TypeFamily::NvFloat4 => Some((DataType::UE4M3, 16)),
            _ => None,
        }
    }

    /// The name in CUTLASS's tables.
    pub const fn seed_name(self) -> &'static str {
        match self {
            TypeFamily::Tf32 => "tfloat32_t",
            TypeFamily::F16 => "half_t",
            TypeFamily::Bf16 => "bfloat16_t",
            TypeFamily::I8 => "int8_t",
            TypeFamily::U8 => "uint8_t",
            TypeFamily::Float4 => "float4_t",
            TypeFamily::Float6 => "float6_t",
            TypeFamily::Float8 => "float8_t",
            TypeFamily::MxFloat4 => "mx_float4_t",
            TypeFamily::MxFloat6 => "mx_float6_t",
            TypeFamily::MxFloat8 => "mx_float8_t",
            TypeFamily::NvFloat4 => "nv_float4_t",
        }
    }
}

/// The `tcgen05.mma` kind a type row targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmaKind {
    /// `kind::tf32`.
    Tf32,
    /// `kind::f16` (f16 and bf16).
    F16,
    /// `kind::i8`.
    I8,
    /// `kind::f8f6f4`.
    F8f6f4,
    /// `kind::mxf8f6f4.block_scale`.
    Mxf8f6f4,
    /// `kind::mxf4.block_scale` or `kind::mxf4nvf4.block_scale` (Table 3 rows 2 and 13).
    Mxf4OrMxf4nvf4,
    /// `kind::mxf4nvf4.block_scale`.
    Mxf4nvf4,
}

impl MmaKind {
    /// The kind as written in the PTX instruction.
    pub const fn ptx(self) -> &'static str {
        match self {
            MmaKind::Tf32 => "tf32",
            MmaKind::F16 => "f16",
            MmaKind::I8 => "i8",
            MmaKind::F8f6f4 => "f8f6f4",
            MmaKind::Mxf8f6f4 => "mxf8f6f4",
            MmaKind::Mxf4OrMxf4nvf4 => "mxf4|mxf4nvf4",
            MmaKind::Mxf4nvf4 => "mxf4nvf4",
        }
    }
}

/// An A alignment that may depend on A's layout (sparse rows: `8 (N) / 16 (T)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Alignment {
    /// Alignment in elements when the matrix is column-major (`N`).
    pub n: u32,
    /// Alignment in elements when the matrix is row-major (`T`).
    pub t: u32,
}

impl Alignment {
    /// The alignment for a layout.
    pub const fn for_layout(self, l: Layout) -> u32 {
        match l {
            Layout::RowMajor => self.t,
            Layout::ColumnMajor => self.n,
        }
    }
}

/// One row of Tables 1–3.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TypeRow {
    /// 1, 2 or 3.
    pub table: u8,
    /// The row number in its table.
    pub row: u8,
    /// Structured-sparse A.
    pub sparse: bool,
    /// A's type.
    pub a: TypeFamily,
    /// B's type.
    pub b: TypeFamily,
    /// Whether all four layouts are allowed; otherwise TN only.
    pub all_layouts: bool,
    /// A's alignment in elements.
    pub align_a: Alignment,
    /// B's alignment in elements.
    pub align_b: u32,
    /// The MMA kind.
    pub kind: MmaKind,
}

impl TypeRow {
    /// The allowed (A, B) layouts, in the tables' order (TN, NN, NT, TT).
    pub fn layouts(&self) -> &'static [(Layout, Layout)] {
        const ALL: [(Layout, Layout); 4] = [
            (Layout::RowMajor, Layout::ColumnMajor),
            (Layout::ColumnMajor, Layout::ColumnMajor),
            (Layout::ColumnMajor, Layout::RowMajor),
            (Layout::RowMajor, Layout::RowMajor),
        ];
        if self.all_layouts {
            &ALL
        } else {
            &ALL[..1]
        }
    }

    /// Every concrete (A type, B type) pair of the row.
    pub fn type_pairs(&self) -> Vec<(DataType, DataType)> {
        let mut v = Vec::new();
        for &a in self.a.element_types() {
            for &b in self.b.element_types() {
                v.push((a, b));
            }
        }
        v
    }
}

macro_rules! rows {
    ($table:literal: $( $row:literal $sp:ident $a:ident $b:ident $lay:ident ($an:literal, $at:literal) $ab:literal $kind:ident ;)*) => {
        &[ $( TypeRow {
            table: $table,
            row: $row,
            sparse: rows!(@sp $sp),
            a: TypeFamily::$a,
            b: TypeFamily::$b,
            all_layouts: rows!(@lay $lay),
            align_a: Alignment { n: $an, t: $at },
            align_b: $ab,
            kind: MmaKind::$kind,
        } ),* ]
    };
    (@sp Dense) => { false };
    (@sp Sparse) => { true };
    (@lay All) => { true };
    (@lay TN) => { false };
}

/// Table 1: legacy types.
pub const TABLE_1: &[TypeRow] = rows!(1:
    1 Dense Tf32 Tf32 All (4, 4) 4 Tf32;
    2 Dense F16 F16 All (8, 8) 8 F16;
    3 Dense Bf16 Bf16 All (8, 8) 8 F16;
    4 Dense I8 I8 All (16, 16) 16 I8;
    5 Dense U8 U8 All (16, 16) 16 I8;
    6 Sparse Tf32 Tf32 All (4, 8) 4 Tf32;
    7 Sparse F16 F16 All (8, 16) 8 F16;
    8 Sparse Bf16 Bf16 All (8, 16) 8 F16;
    9 Sparse I8 I8 All (16, 32) 16 I8;
    10 Sparse U8 U8 All (16, 32) 16 I8;
);

/// Table 2: narrow precision without block scaling.
pub const TABLE_2: &[TypeRow] = rows!(2:
    1 Dense Float4 Float4 All (128, 128) 128 F8f6f4;
    2 Dense Float4 Float6 All (128, 128) 128 F8f6f4;
    3 Dense Float6 Float4 All (128, 128) 128 F8f6f4;
    4 Dense Float4 Float8 All (128, 128) 16 F8f6f4;
    5 Dense Float8 Float4 All (16, 16) 128 F8f6f4;
    6 Dense Float6 Float6 All (128, 128) 128 F8f6f4;
    7 Dense Float6 Float8 All (128, 128) 16 F8f6f4;
    8 Dense Float8 Float6 All (16, 16) 128 F8f6f4;
    9 Dense Float8 Float8 All (16, 16) 16 F8f6f4;
    10 Sparse Float4 Float4 All (128, 256) 128 F8f6f4;
    11 Sparse Float4 Float6 All (128, 256) 128 F8f6f4;
    12 Sparse Float6 Float4 All (128, 256) 128 F8f6f4;
    13 Sparse Float4 Float8 All (128, 256) 16 F8f6f4;
    14 Sparse Float8 Float4 All (16, 32) 128 F8f6f4;
    15 Sparse Float6 Float6 All (128, 256) 128 F8f6f4;
    16 Sparse Float6 Float8 All (128, 256) 16 F8f6f4;
    17 Sparse Float8 Float6 All (16, 32) 128 F8f6f4;
    18 Sparse Float8 Float8 All (16, 32) 16 F8f6f4;
);

/// Table 3: block-scaled narrow precision.
pub const TABLE_3: &[TypeRow] = rows!(3:
    1 Dense NvFloat4 NvFloat4 TN (32, 32) 32 Mxf4nvf4;
    2 Dense MxFloat4 MxFloat4 TN (32, 32) 32 Mxf4OrMxf4nvf4;
    3 Dense MxFloat4 MxFloat4 All (128, 128) 128 Mxf8f6f4;
    4 Dense MxFloat4 MxFloat6 All (128, 128) 128 Mxf8f6f4;
    5 Dense MxFloat6 MxFloat4 All (128, 128) 128 Mxf8f6f4;
    6 Dense MxFloat4 MxFloat8 All (128, 128) 16 Mxf8f6f4;
    7 Dense MxFloat8 MxFloat4 All (16, 16) 128 Mxf8f6f4;
    8 Dense MxFloat6 MxFloat6 All (128, 128) 128 Mxf8f6f4;
    9 Dense MxFloat6 MxFloat8 All (128, 128) 16 Mxf8f6f4;
    10 Dense MxFloat8 MxFloat6 All (16, 16) 128 Mxf8f6f4;
    11 Dense MxFloat8 MxFloat8 All (16, 16) 16 Mxf8f6f4;
    12 Sparse NvFloat4 NvFloat4 TN (32, 64) 32 Mxf4nvf4;
    13 Sparse MxFloat4 MxFloat4 TN (32, 64) 32 Mxf4OrMxf4nvf4;
    14 Sparse MxFloat4 MxFloat4 All (128, 256) 128 Mxf8f6f4;
    15 Sparse MxFloat4 MxFloat6 All (128, 256) 128 Mxf8f6f4;
    16 Sparse MxFloat6 MxFloat4 All (128, 256) 128 Mxf8f6f4;
    17 Sparse MxFloat4 MxFloat8 All (128, 256) 16 Mxf8f6f4;
    18 Sparse MxFloat8 MxFloat4 All (16, 32) 128 Mxf8f6f4;
    19 Sparse MxFloat6 MxFloat6 All (128, 256) 128 Mxf8f6f4;
    20 Sparse MxFloat6 MxFloat8 All (128, 256) 16 Mxf8f6f4;
    21 Sparse MxFloat8 MxFloat6 All (16, 32) 128 Mxf8f6f4;
    22 Sparse MxFloat8 MxFloat8 All (16, 32) 16 Mxf8f6f4;
);

/// All type rows of Tables 1–3.
pub fn type_rows() -> impl Iterator<Item = &'static TypeRow> {
    TABLE_1.iter().chain(TABLE_2).chain(TABLE_3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_counts_match_the_seed() {
        assert_eq!(TABLE_1.len(), 10);
        assert_eq!(TABLE_2.len(), 18);
        assert_eq!(TABLE_3.len(), 22);
        for t in [TABLE_1, TABLE_2, TABLE_3] {
            for (i, r) in t.iter().enumerate() {
                assert_eq!(r.row as usize, i + 1);
            }
        }
    }

    #[test]
    fn rows_are_consistent() {
        for r in type_rows() {
            // Dense rows have one alignment for A whatever its layout.
            if !r.sparse {
                assert_eq!(r.align_a.n, r.align_a.t, "{r:?}");
            } else {
                // Sparse A is compressed 2x along K: twice the alignment when K is contiguous (T).
                assert_eq!(r.align_a.t, 2 * r.align_a.n, "{r:?}");
            }
            // Block-scaled rows are in Table 3 only.
            assert_eq!(r.a.block_scale().is_some(), r.table == 3, "{r:?}");
            assert!(!r.type_pairs().is_empty());
        }
    }
}

/// The K extent of an MMA tile as the tables write it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileK {
    /// A fixed K, in elements.
    Fixed(u32),
    /// `4*MMA-K`: four instructions' K (the K of one `tcgen05.mma` depends on the type: 8 for tf32,
    /// 16 for f16/bf16, 32 for 8-bit types).
    MmaK4,
    /// `2/4*MMA-K` of the sparse legacy rows.
    SparseMmaK,
}

impl TileK {
    /// K in elements for a dense row of this element width (bits).
    pub fn resolve(self, bits: u32) -> u32 {
        match self {
            TileK::Fixed(k) => k,
            // One tcgen05.mma reads 32 bytes of K per operand row: 4 instructions read 128 bytes.
            TileK::MmaK4 => 4 * (256 / bits),
            TileK::SparseMmaK => 4 * (256 / bits) * 2,
        }
    }
}

/// One row of a tile table: an MMA tile shape, the layouts it allows and its dispatch policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileRow {
    /// Structured-sparse.
    pub sparse: bool,
    /// 1 or 2 SMs per MMA (SM120: 1).
    pub sm: u8,
    /// MMA tile M.
    pub m: u32,
    /// MMA tile N.
    pub n: u32,
    /// MMA tile K.
    pub k: TileK,
    /// Whether TN, TT, NT, NN are allowed, in the tables' column order.
    pub tn_tt_nt_nn: [bool; 4],
    /// Dispatch policies (the tables' "A or B" gives two).
    pub policies: &'static [&'static str],
}

impl TileRow {
    /// Whether this (A, B) layout is allowed.
    pub fn allows(&self, a: Layout, b: Layout) -> bool {
        let i = match (a, b) {
            (Layout::RowMajor, Layout::ColumnMajor) => 0,
            (Layout::RowMajor, Layout::RowMajor) => 1,
            (Layout::ColumnMajor, Layout::RowMajor) => 2,
            (Layout::ColumnMajor, Layout::ColumnMajor) => 3,
        };
        self.tn_tt_nt_nn[i]
    }
}

/// One tile table of CUTLASS's Blackwell GEMM documentation (4–13 for SM100, 16–20 for SM120).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileTable {
    /// The table number.
    pub table: u8,
    /// The architecture.
    pub arch: crate::types::Arch,
    /// The table's title.
    pub title: &'static str,
    /// The (table, row) type rows of Tables 1–3 it serves.
    pub type_rows: &'static [(u8, u8)],
    /// Its rows.
    pub rows: &'static [TileRow],
}

/// The type row with this (table, row) number.
pub fn type_row(table: u8, row: u8) -> Option<&'static TypeRow> {
    type_rows().find(|r| r.table == table && r.row == row)
}

#[cfg(test)]
mod tile_tests {
    use super::*;
    use crate::tile_tables::TILE_TABLES;

    #[test]
    fn tile_table_counts_match_the_seed() {
        let counts: Vec<(u8, usize)> = TILE_TABLES
            .iter()
            .map(|t| (t.table, t.rows.len()))
            .collect();
        assert_eq!(
            counts,
            vec![
                (4, 24),
                (5, 24),
                (6, 24),
                (7, 24),
                (8, 24),
                (9, 10),
                (10, 10),
                (11, 12),
                (12, 12),
                (13, 12),
                (16, 4),
                (17, 3),
                (18, 3),
                (19, 3),
                (20, 1)
            ]
        );
    }

    #[test]
    fn every_served_type_row_exists_and_every_dense_type_row_has_a_table() {
        for t in TILE_TABLES {
            for &(table, row) in t.type_rows {
                assert!(
                    type_row(table, row).is_some(),
                    "table {} serves missing row {table}.{row}",
                    t.table
                );
            }
        }
        for r in type_rows() {
            let served = TILE_TABLES
                .iter()
                .filter(|t| t.arch == crate::types::Arch::Sm100a)
                .any(|t| t.type_rows.contains(&(r.table, r.row)));
            assert!(
                served,
                "type row {}.{} has no SM100 tile table",
                r.table, r.row
            );
        }
    }

    #[test]
    fn mma_k_resolves_per_type() {
        assert_eq!(TileK::MmaK4.resolve(32), 32); // tf32
        assert_eq!(TileK::MmaK4.resolve(16), 64); // f16
        assert_eq!(TileK::MmaK4.resolve(8), 128); // i8
        assert_eq!(TileK::Fixed(256).resolve(4), 256);
    }
}
