//! The kernel catalog: every kernel this project knows how to instantiate, as data.
//!
//! The build script generates code for the entries a user selects; the safe crate uses the same
//! entries to validate problems and dispatch. Nothing parses a kernel name back into a spec: names
//! are computed from specs ([`KernelSpec::name`]) and looked up.

use crate::spec::{
    BlockScale, EpilogueSchedule, KernelSchedule, KernelSpec, OpClass, Operand, Origin,
    TileScheduler,
};
use crate::tables::{type_row, TypeFamily, TypeRow};
use crate::tile_tables::TILE_TABLES;
use crate::types::{Arch, DataType, Layout};

/// A tile configuration of the SM90 catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sm90Tile {
    /// CTA tile (m, n, k).
    pub tile: [u32; 3],
    /// Cluster shape (m, n, k).
    pub cluster: [u32; 3],
    /// Mainloop schedule; the epilogue schedule follows from it.
    pub schedule: KernelSchedule,
}

/// The SM90 tiles of the catalog for 16-bit inputs.
///
/// 128x256x64 with a 2x1x1 cluster and the cooperative schedule is the large-problem workhorse
/// (on an H200 it matched cuBLAS at 8192^3 bf16, see `shared/GPU.md`); the others serve smaller
/// problems and are there for the kernel-selection issue.
pub const SM90_TILES_16BIT: &[Sm90Tile] = &[
    Sm90Tile {
        tile: [128, 256, 64],
        cluster: [2, 1, 1],
        schedule: KernelSchedule::TmaWarpSpecializedCooperative,
    },
    Sm90Tile {
        tile: [128, 128, 64],
        cluster: [1, 2, 1],
        schedule: KernelSchedule::TmaWarpSpecializedCooperative,
    },
    Sm90Tile {
        tile: [64, 128, 64],
        cluster: [1, 1, 1],
        schedule: KernelSchedule::TmaWarpSpecializedPingpong,
    },
];

/// The four A/B layouts, in the seed's order: TN, NT, NN, TT.
pub const AB_LAYOUTS: [(Layout, Layout); 4] = [
    (Layout::RowMajor, Layout::ColumnMajor),
    (Layout::ColumnMajor, Layout::RowMajor),
    (Layout::ColumnMajor, Layout::ColumnMajor),
    (Layout::RowMajor, Layout::RowMajor),
];

/// Input types of the SM90 16-bit rows.
pub const SM90_16BIT_INPUTS: [DataType; 2] = [DataType::F16, DataType::Bf16];

/// The layout of C and D in every catalog kernel. Column-major outputs are served by the safe crate
/// through the transpose identity `D^T = B^T A^T`, so one output layout covers both.
pub const OUTPUT_LAYOUT: Layout = Layout::RowMajor;

fn sm90_spec(input: DataType, output: DataType, ab: (Layout, Layout), t: &Sm90Tile) -> KernelSpec {
    let epilogue_schedule = match t.schedule {
        KernelSchedule::TmaWarpSpecializedCooperative => {
            EpilogueSchedule::TmaWarpSpecializedCooperative
        }
        _ => EpilogueSchedule::TmaWarpSpecialized,
    };
    KernelSpec {
        arch: Arch::Sm90a,
        op_class: OpClass::TensorOp,
        block_scale: None,
        origin: None,
        a: Operand::tma(input, ab.0),
        b: Operand::tma(input, ab.1),
        c: Operand::tma(output, OUTPUT_LAYOUT),
        d: Operand::tma(output, OUTPUT_LAYOUT),
        accumulator: DataType::F32,
        compute: DataType::F32,
        tile: t.tile,
        cluster: t.cluster,
        stages: 0,
        kernel_schedule: t.schedule,
        epilogue_schedule,
        tile_scheduler: TileScheduler::Persistent,
    }
}

/// The C and D type of the SM100/SM120 entries of a type row (the documented default set):
/// legacy types keep their own type (f32 for tf32, s32 for the integer rows); narrow-precision and
/// block-scaled rows write f16.
pub fn default_output(row: &TypeRow, a: DataType) -> DataType {
    match row.a {
        TypeFamily::Tf32 => DataType::F32,
        TypeFamily::F16 | TypeFamily::Bf16 => a,
        TypeFamily::I8 | TypeFamily::U8 => DataType::I32,
        _ => DataType::F16,
    }
}

/// The accumulator of a type row.
fn accumulator(row: &TypeRow) -> DataType {
    match row.a {
        TypeFamily::I8 | TypeFamily::U8 => DataType::I32,
        _ => DataType::F32,
    }
}

/// The epilogue-compute type of a type row.
fn compute(row: &TypeRow) -> DataType {
    match row.a {
        TypeFamily::I8 | TypeFamily::U8 => DataType::F32,
        _ => DataType::F32,
    }
}

/// Every dense SM100 and SM120 entry the seed allows: for each tile table, each of its dense tile
/// rows, each dense type row it serves, each concrete type pair, each layout both allow and each
/// dispatch policy. Cluster 1x1x1 for 1SM MMAs and SM120, 2x1x1 for 2SM MMAs. Sparse rows are in
/// the tables (`tables::TILE_TABLES`) but not yet in the catalog.
pub fn sm1xx() -> Vec<KernelSpec> {
    let mut out = Vec::new();
    for table in TILE_TABLES {
        for tile_row in table.rows.iter().filter(|r| !r.sparse) {
            for &(tt, tr) in table.type_rows {
                let row = type_row(tt, tr).expect("tile tables name existing type rows");
                if row.sparse {
                    continue;
                }
                for (ta, tb) in row.type_pairs() {
                    for &(la, lb) in row.layouts() {
                        if !tile_row.allows(la, lb) {
                            continue;
                        }
                        for policy in tile_row.policies {
                            let Some(schedule) = KernelSchedule::from_policy(policy) else {
                                panic!("table {}: unknown policy {policy}", table.table)
                            };
                            let out_ty = default_output(row, ta);
                            let bits = ta.bits().max(tb.bits()).max(8);
                            let k =
                                tile_row
                                    .k
                                    .resolve(if row.table == 1 { ta.bits() } else { bits });
                            let (epilogue, cluster) = match (table.arch, schedule.sms()) {
                                (Arch::Sm120a, _) => (EpilogueSchedule::Auto, [1, 1, 1]),
                                (_, 2) => (EpilogueSchedule::TmaWarpSpecialized2Sm, [2, 1, 1]),
                                _ => (EpilogueSchedule::TmaWarpSpecialized1Sm, [1, 1, 1]),
                            };
                            let block_scale =
                                row.a.block_scale().map(|(sf, vec)| BlockScale { sf, vec });
                            out.push(KernelSpec {
                                arch: table.arch,
                                op_class: if block_scale.is_some() {
                                    OpClass::BlockScaledTensorOp
                                } else {
                                    OpClass::TensorOp
                                },
                                block_scale,
                                origin: Some(Origin {
                                    type_table: tt,
                                    type_row: tr,
                                    tile_table: table.table,
                                }),
                                a: Operand {
                                    ty: ta,
                                    layout: la,
                                    align: row.align_a.for_layout(la),
                                },
                                b: Operand {
                                    ty: tb,
                                    layout: lb,
                                    align: row.align_b,
                                },
                                c: Operand::tma(out_ty, OUTPUT_LAYOUT),
                                d: Operand::tma(out_ty, OUTPUT_LAYOUT),
                                accumulator: accumulator(row),
                                compute: compute(row),
                                tile: [tile_row.m, tile_row.n, k],
                                cluster,
                                stages: 0,
                                kernel_schedule: schedule,
                                epilogue_schedule: epilogue,
                                tile_scheduler: TileScheduler::Persistent,
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// Every entry of the catalog, in a stable order: SM90, then SM100 and SM120 from the seed's tables.
pub fn all() -> Vec<KernelSpec> {
    let mut out = sm90();
    out.extend(sm1xx());
    out
}

/// The SM90 entries.
pub fn sm90() -> Vec<KernelSpec> {
    let mut out = Vec::new();
    for input in SM90_16BIT_INPUTS {
        for output in [input, DataType::F32] {
            for ab in AB_LAYOUTS {
                for t in SM90_TILES_16BIT {
                    out.push(sm90_spec(input, output, ab, t));
                }
            }
        }
    }
    out
}

/// The kernels built when the user selects none: the 128x256x64 cooperative kernel for f16 and bf16
/// in all four layouts with an output of the input type, plus f32 output in the TN layout.
/// Small enough that a cold build stays within a few minutes on two cores.
pub fn is_default(spec: &KernelSpec) -> bool {
    spec.arch == Arch::Sm90a
        && spec.tile == SM90_TILES_16BIT[0].tile
        && spec.cluster == SM90_TILES_16BIT[0].cluster
        && (spec.d.ty == spec.a.ty
            || (spec.d.ty == DataType::F32
                && (spec.a.layout, spec.b.layout) == (Layout::RowMajor, Layout::ColumnMajor)))
}

/// A kernel-name filter, like CUTLASS's `CUTLASS_LIBRARY_KERNELS`: comma-separated patterns; a name
/// is selected when any pattern matches it. A pattern with `*` or `?` is a glob over the whole name;
/// a pattern without them matches any name that contains it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameFilter {
    patterns: Vec<String>,
}

impl NameFilter {
    /// Parses a comma-separated list of patterns. Empty patterns are dropped.
    pub fn parse(s: &str) -> NameFilter {
        NameFilter {
            patterns: s
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect(),
        }
    }

    /// Whether the filter has no patterns.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether `name` is selected.
    pub fn matches(&self, name: &str) -> bool {
        self.patterns.iter().any(|p| {
            if p.contains('*') || p.contains('?') {
                glob_match(p.as_bytes(), name.as_bytes())
            } else {
                name.contains(p.as_str())
            }
        })
    }
}

/// Glob matching with `*` (any run, possibly empty) and `?` (one character) over the whole text.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some(p);
            mark = t;
            p += 1;
        } else if let Some(s) = star {
            p = s + 1;
            mark += 1;
            t = mark;
        } else {
            return false;
        }
    }
    while p < pattern.len() && pattern[p] == b'*' {
        p += 1;
    }
    p == pattern.len()
}

/// Selects catalog entries: those for one of `archs` that `filter` matches, or, with an empty
/// filter, the default set for those architectures.
pub fn select(archs: &[Arch], filter: &NameFilter) -> Vec<KernelSpec> {
    all()
        .into_iter()
        .filter(|s| archs.contains(&s.arch))
        .filter(|s| {
            if filter.is_empty() {
                is_default(s)
            } else {
                filter.matches(&s.name())
            }
        })
        .collect()
}

/// Looks a kernel up by its exact name.
pub fn find(name: &str) -> Option<KernelSpec> {
    all().into_iter().find(|s| s.name() == name)
}

/// The MMA instruction an entry's PTX must contain: `wgmma.mma_async` (SM90),
/// `tcgen05.mma.cta_group::{1,2}.kind::{kind}` (SM100) or `mma.sync...kind::{kind}` (SM120), with
/// the kind from the type row (Tables 1–3) and, for the mxf4/nvf4 rows, the dispatch policy.
pub fn expected_mma(spec: &KernelSpec) -> String {
    let kind = match spec.kernel_schedule {
        KernelSchedule::Sm100Mxf8f6f4OneSm
        | KernelSchedule::Sm100Mxf8f6f4TwoSm
        | KernelSchedule::Sm120Mxf8f6f4Cooperative
        | KernelSchedule::Sm120Mxf8f6f4Pingpong => "mxf8f6f4".to_string(),
        KernelSchedule::Sm100Mxf4OneSm | KernelSchedule::Sm100Mxf4TwoSm => "mxf4".to_string(),
        KernelSchedule::Sm100Nvf4OneSm | KernelSchedule::Sm100Nvf4TwoSm => "mxf4nvf4".to_string(),
        _ => match spec.origin.and_then(|o| type_row(o.type_table, o.type_row)) {
            Some(row) => row.kind.ptx().to_string(),
            None => String::new(),
        },
    };
    match spec.arch {
        Arch::Sm90a => "wgmma.mma_async".to_string(),
        Arch::Sm100a => format!(
            "tcgen05.mma.cta_group::{}.kind::{kind}",
            spec.kernel_schedule.sms()
        ),
        _ => format!("mma.sync.aligned.kind::{kind}"),
    }
}
