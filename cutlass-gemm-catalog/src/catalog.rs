//! The kernel catalog: every kernel this project knows how to instantiate, as data.
//!
//! The build script generates code for the entries a user selects; the safe crate uses the same
//! entries to validate problems and dispatch. Nothing parses a kernel name back into a spec: names
//! are computed from specs ([`KernelSpec::name`]) and looked up.

use crate::families::Preset;
use crate::spec::{
    BlockScale, Blockwise, EpilogueSchedule, Fusion, KernelSchedule, KernelSpec, MixedInput,
    MixedInputMode, OpClass, Operand, Origin, ScaleOrder, TileScheduler,
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
    /// Mainloop schedule.
    pub schedule: KernelSchedule,
    /// Epilogue schedule.
    pub epilogue: EpilogueSchedule,
}

const fn sm90_tile(
    tile: [u32; 3],
    cluster: [u32; 3],
    schedule: KernelSchedule,
    epilogue: EpilogueSchedule,
) -> Sm90Tile {
    Sm90Tile {
        tile,
        cluster,
        schedule,
        epilogue,
    }
}

/// The SM90 tiles of the catalog for 16-bit inputs.
///
/// 128x256x64 with a 2x1x1 cluster and the cooperative schedule is the large-problem workhorse
/// (on an H200 it matched cuBLAS at 8192^3 bf16, see `shared/GPU.md`); the others serve smaller
/// problems and are there for the kernel-selection issue. All but the first are emitted by
/// CUTLASS's own generator (`tests/names_match_cutlass_library.rs` checks; the first, with an f32
/// output, is pruned there by a shared-memory heuristic yet compiles and runs).
pub const SM90_TILES_16BIT: &[Sm90Tile] = &[
    sm90_tile([128, 256, 64], [2, 1, 1], COOP, COOP_EPI),
    sm90_tile([128, 128, 64], [1, 2, 1], COOP, COOP_EPI),
    sm90_tile([64, 128, 64], [1, 2, 1], PINGPONG, PINGPONG_EPI),
    sm90_tile([128, 128, 64], [1, 2, 1], WS, NOSMEM),
];

/// The SM90 grouped (pointer-array) tiles for 16-bit inputs, all in the default set: the 128x256
/// cooperative tile for groups of more than 128 rows (prefill), the 64x256 pingpong tile for 65 to
/// 128 rows, and the 64x128 pingpong tile for groups of a few rows (mixture-of-experts decode, where
/// each expert sees a handful of tokens and the weights are the whole cost). Cluster 1x1x1: groups
/// rarely fill a cluster's multicast, and any N tile count fits it. Chosen on an H100 among these
/// and [`SM90_TILES_GROUPED_16BIT_EXTRA`] (`cutlass-profiler profile --grouped --kernels all`,
/// `docs/performance.md`): 128x128 tiles ran at 0.44-0.75 of the 128x256 one on groups of 256 rows
/// and more.
pub const SM90_TILES_GROUPED_16BIT: &[Sm90Tile] = &[
    sm90_tile([128, 256, 64], [1, 1, 1], GROUPED_COOP, GROUPED_COOP_EPI),
    sm90_tile(
        [64, 256, 64],
        [1, 1, 1],
        GROUPED_PINGPONG,
        GROUPED_PINGPONG_EPI,
    ),
    sm90_tile(
        [64, 128, 64],
        [1, 1, 1],
        GROUPED_PINGPONG,
        GROUPED_PINGPONG_EPI,
    ),
];

/// The SM90 grouped tiles for e4m3 x e4m3 (CUTLASS's f32-promoting FP8 main loop), in the default
/// set: 128x128 cooperative with a 1x2x1 cluster (up to 15 % faster than 1x1x1 on Mixtral's
/// prefill) and 64x128 pingpong for small groups (a 128x256 tile's promoted accumulators would not
/// fit the registers beside the wgmma's).
pub const SM90_TILES_GROUPED_FP8: &[Sm90Tile] = &[
    sm90_tile([128, 128, 128], [1, 2, 1], GROUPED_COOP, GROUPED_COOP_EPI),
    sm90_tile(
        [64, 128, 128],
        [1, 1, 1],
        GROUPED_PINGPONG,
        GROUPED_PINGPONG_EPI,
    ),
];

/// The SM90 grouped e4m3 tile with a column-major D (the operand swap of
/// [`SM90_TILES_GROUPED_16BIT_SWAPPED`]), in the default set, for decode: 128x16x128 cooperative,
/// chosen on an H200 against the 64x128x128 pingpong tile and the swapped 64x16x128 pingpong one
/// (`docs/performance.md`).
pub const SM90_TILES_GROUPED_FP8_SWAPPED: &[Sm90Tile] = &[sm90_tile(
    [128, 16, 128],
    [1, 1, 1],
    GROUPED_COOP,
    GROUPED_COOP_EPI,
)];

/// More swapped SM90 grouped e4m3 tiles, not in the default set: the runner-up of
/// [`SM90_TILES_GROUPED_FP8_SWAPPED`]'s measurement.
pub const SM90_TILES_GROUPED_FP8_SWAPPED_EXTRA: &[Sm90Tile] = &[sm90_tile(
    [64, 16, 128],
    [1, 1, 1],
    GROUPED_PINGPONG,
    GROUPED_PINGPONG_EPI,
)];

/// The SM90 grouped FP8 blockwise tiles (scales [`SM90_BLOCKWISE_GROUPED`]), in the default set:
/// the 128x128x128 cooperative tile of the dense blockwise kernel (cluster 1x2x1) for prefill and
/// the 64x128x128 pingpong tile for groups of a few rows, both with this crate's overlapped
/// promotion (`cutlass_rs_sm90_fp8_blockwise.hpp`).
pub const SM90_TILES_GROUPED_FP8_BLOCKWISE: &[Sm90Tile] = &[
    sm90_tile(
        [128, 128, 128],
        [1, 2, 1],
        KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8BlockwiseOverlap,
        GROUPED_COOP_EPI,
    ),
    sm90_tile(
        [64, 128, 128],
        [1, 1, 1],
        KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8BlockwiseOverlap,
        GROUPED_PINGPONG_EPI,
    ),
];

/// The same tiles with CUTLASS's own blockwise main loop (which waits for the tensor cores
/// before each k-block's scaling), not in the default set: the baseline of the overlapped ones.
pub const SM90_TILES_GROUPED_FP8_BLOCKWISE_EXTRA: &[Sm90Tile] = &[
    sm90_tile(
        [128, 128, 128],
        [1, 2, 1],
        GROUPED_COOP_BLOCKWISE,
        GROUPED_COOP_EPI,
    ),
    sm90_tile(
        [64, 128, 128],
        [1, 1, 1],
        GROUPED_PINGPONG_BLOCKWISE,
        GROUPED_PINGPONG_EPI,
    ),
];

/// More SM90 grouped tiles, not in the default set: the cluster shapes and tiles CUTLASS's grouped
/// examples use, for `cutlass-profiler profile --grouped --kernels all` to weigh against the
/// default ones.
pub const SM90_TILES_GROUPED_16BIT_EXTRA: &[Sm90Tile] = &[
    sm90_tile([128, 256, 64], [2, 1, 1], GROUPED_COOP, GROUPED_COOP_EPI),
    sm90_tile([256, 128, 64], [1, 2, 1], GROUPED_COOP, GROUPED_COOP_EPI),
    sm90_tile([128, 128, 64], [1, 2, 1], GROUPED_COOP, GROUPED_COOP_EPI),
    sm90_tile([128, 128, 64], [1, 1, 1], GROUPED_COOP, GROUPED_COOP_EPI),
];

/// SM90 grouped tiles for 16-bit inputs with a column-major D, in the default set: each group's
/// `Dᵀ = W·Xᵀ`, the operand swap of [`Sm90MenuTile::output`], so that a weight's rows fill the
/// tile's M side and the group's few rows its 16-wide N side (mixture-of-experts decode, where every
/// expert sees a handful of tokens and reading the weights is the whole cost). The pointer-array
/// builder swaps each group's operands on the device (`cutlass_rs_grouped.hpp`); the caller's
/// layouts stay as they are. Chosen on an H200 among it, the 64x128 pingpong tile and the swapped
/// 64x8x64, 64x16x64, 64x32x64 pingpong and 128x16x64 cooperative tiles
/// (`cutlass-profiler profile --grouped --tokens 1,8,64`, `docs/performance.md`).
pub const SM90_TILES_GROUPED_16BIT_SWAPPED: &[Sm90Tile] = &[sm90_tile(
    [64, 16, 128],
    [1, 1, 1],
    GROUPED_PINGPONG,
    GROUPED_PINGPONG_EPI,
)];

/// More swapped SM90 grouped tiles, not in the default set: the runner-up of
/// [`SM90_TILES_GROUPED_16BIT_SWAPPED`]'s measurement, for `--kernels all` to weigh.
pub const SM90_TILES_GROUPED_16BIT_SWAPPED_EXTRA: &[Sm90Tile] = &[sm90_tile(
    [128, 16, 64],
    [1, 1, 1],
    GROUPED_COOP,
    GROUPED_COOP_EPI,
)];

/// More SM90 grouped e4m3 tiles, not in the default set (see
/// [`SM90_TILES_GROUPED_16BIT_EXTRA`]).
pub const SM90_TILES_GROUPED_FP8_EXTRA: &[Sm90Tile] = &[
    sm90_tile([128, 128, 128], [1, 1, 1], GROUPED_COOP, GROUPED_COOP_EPI),
    sm90_tile([128, 128, 128], [2, 1, 1], GROUPED_COOP, GROUPED_COOP_EPI),
    sm90_tile(
        [64, 128, 128],
        [1, 2, 1],
        GROUPED_PINGPONG,
        GROUPED_PINGPONG_EPI,
    ),
];

/// A tile of the weight-only (mixed-input) kernels, with its tile scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WeightOnlyTile {
    /// CTA tile (m, n, k): m along the weight's rows (the layer's outputs), n along the tokens.
    pub tile: [u32; 3],
    /// Cluster shape (m, n, k).
    pub cluster: [u32; 3],
    /// Mainloop schedule (its TMA epilogue goes with it).
    pub schedule: KernelSchedule,
    /// Tile scheduler.
    pub scheduler: TileScheduler,
    /// The weight formats (dequantization modes) the `weight-only` feature builds it for.
    pub modes: &'static [MixedInputMode],
}

const ALL_MODES: &[MixedInputMode] = &[
    MixedInputMode::ScaleOnly,
    MixedInputMode::ScaleWithZeroPoint,
];

const fn weight_only_tile(
    tile: [u32; 3],
    schedule: KernelSchedule,
    scheduler: TileScheduler,
    modes: &'static [MixedInputMode],
) -> WeightOnlyTile {
    WeightOnlyTile {
        tile,
        cluster: [1, 1, 1],
        schedule,
        scheduler,
        modes,
    }
}

/// The weight-only tiles the `weight-only` feature builds, per activation type: 128x16 (scales
/// only), 128x32 and 128x64 stream-K for decode (1-64 tokens: the weight is the whole cost, and
/// stream-K spreads its k over every SM when its rows give few tiles), 128x128 stream-K for 65-1024
/// tokens and 128x256 persistent beyond. Chosen on an H200 (`cutlass-profiler profile
/// --weight-only --kernels all`, every catalog tile) over Llama-3-8B's and -70B's layers and the
/// Llama-2-7B, Mistral-7B and Qwen2.5-7B shapes of `bench/shapes-broad.tsv`: with zero points the
/// 128x16 tile ran 0.96x cuBLAS at 1-16 tokens where 128x32 ran 1.19x; at 128-1024 tokens 128x128
/// stream-K ran 0.79-0.87x where 128x256 ran 0.44-0.87x; 128x256 led from 2048 tokens. Tile k is
/// 64: 128 bytes of the 16-bit MMA type, and the smallest group of k the kernels take.
pub const SM90_TILES_WEIGHT_ONLY: &[WeightOnlyTile] = &[
    weight_only_tile(
        [128, 16, 64],
        KernelSchedule::TmaWarpSpecializedCooperative,
        TileScheduler::StreamK,
        &[MixedInputMode::ScaleOnly],
    ),
    weight_only_tile(
        [128, 32, 64],
        KernelSchedule::TmaWarpSpecializedCooperative,
        TileScheduler::StreamK,
        ALL_MODES,
    ),
    weight_only_tile(
        [128, 64, 64],
        KernelSchedule::TmaWarpSpecializedCooperative,
        TileScheduler::StreamK,
        ALL_MODES,
    ),
    weight_only_tile(
        [128, 128, 64],
        KernelSchedule::TmaWarpSpecializedCooperative,
        TileScheduler::StreamK,
        ALL_MODES,
    ),
    weight_only_tile(
        [128, 256, 64],
        KernelSchedule::TmaWarpSpecializedCooperative,
        TileScheduler::Persistent,
        ALL_MODES,
    ),
];

/// Weight-only tiles in the catalog beyond the `weight-only` feature's (every tile of it for every
/// mode): pingpong tiles for decode and small batches, and 128x128 persistent.
pub const SM90_TILES_WEIGHT_ONLY_EXTRA: &[WeightOnlyTile] = &[
    weight_only_tile(
        [64, 16, 64],
        KernelSchedule::TmaWarpSpecializedPingpong,
        TileScheduler::Persistent,
        ALL_MODES,
    ),
    weight_only_tile(
        [64, 64, 64],
        KernelSchedule::TmaWarpSpecializedPingpong,
        TileScheduler::Persistent,
        ALL_MODES,
    ),
    weight_only_tile(
        [128, 128, 64],
        KernelSchedule::TmaWarpSpecializedCooperative,
        TileScheduler::Persistent,
        ALL_MODES,
    ),
];

/// The weight formats of the weight-only kernels: signed 4-bit values with scales (symmetric
/// quantization) and unsigned ones with scales and zeros (GPTQ and AWQ checkpoints).
pub const WEIGHT_ONLY_FORMATS: [(DataType, MixedInputMode); 2] = [
    (DataType::S4, MixedInputMode::ScaleOnly),
    (DataType::U4, MixedInputMode::ScaleWithZeroPoint),
];

/// The FP8 weight format of the weight-only kernels: e4m3 values read as stored (row-major, no
/// packing), with one scale per output channel (a group of k as long as k), on the tiles of
/// [`SM90_TILES_WEIGHT_ONLY`] (the bf16 ones of [`WEIGHT_ONLY_FUSED_TILES`] also with the fused
/// epilogue).
pub const WEIGHT_ONLY_FP8_FORMAT: (DataType, MixedInputMode) =
    (DataType::E4M3, MixedInputMode::ScaleOnly);

/// The int8 weight format of the weight-only kernels: s8 values read as stored (row-major, no
/// packing), with one scale per output channel (symmetric per-channel int8, "W8A16"), on the same
/// tiles and fused twins as [`WEIGHT_ONLY_FP8_FORMAT`].
pub const WEIGHT_ONLY_INT8_FORMAT: (DataType, MixedInputMode) =
    (DataType::I8, MixedInputMode::ScaleOnly);

/// The formats with one byte a value and a scale per output channel, in the catalog's order.
pub const WEIGHT_ONLY_PER_CHANNEL_FORMATS: [(DataType, MixedInputMode); 2] =
    [WEIGHT_ONLY_FP8_FORMAT, WEIGHT_ONLY_INT8_FORMAT];

/// One weight-only entry: an s4/u4 weight (A, in the packed order) or an e4m3 or s8 one (A, row-major)
/// times bf16/f16 activations (B), C and D column-major of the activations' type.
pub fn weight_only_spec(
    (weight, mode): (DataType, MixedInputMode),
    wide: DataType,
    t: &WeightOnlyTile,
) -> KernelSpec {
    let epilogue = match t.schedule {
        KernelSchedule::TmaWarpSpecializedPingpong => EpilogueSchedule::TmaWarpSpecialized,
        _ => EpilogueSchedule::TmaWarpSpecializedCooperative,
    };
    let out = Operand::tma(wide, Layout::ColumnMajor);
    KernelSpec {
        arch: Arch::Sm90a,
        op_class: OpClass::TensorOp,
        block_scale: None,
        blockwise: None,
        output_scale: None,
        origin: None,
        a: Operand::tma(weight, Layout::RowMajor),
        b: Operand::tma(wide, Layout::ColumnMajor),
        c: out,
        d: out,
        accumulator: DataType::F32,
        compute: DataType::F32,
        tile: t.tile,
        cluster: t.cluster,
        stages: 0,
        kernel_schedule: t.schedule,
        epilogue_schedule: epilogue,
        fusion: Fusion::LinearCombination,
        tile_scheduler: t.scheduler,
        mixed_input: Some(MixedInput {
            mode,
            shuffled: weight.bits() == 4,
            group: 0,
        }),
    }
}

/// The group size of the SM100 mixed-input entries' scales: GPTQ's and AWQ's usual 128 (CUTLASS's
/// SM100 mixed-input main loop fixes it at compile time).
pub const SM100_WEIGHT_ONLY_GROUP: u32 = 128;

/// The SM100 mixed-input tiles (MMA tile, cluster, schedule): a 1SM 128x64x128 tile for decode and
/// a 2SM 256x128x128 one with a 2x1x1 cluster for prefill (CUTLASS's example 86). Tile N (the
/// tokens) is at most 128 (`sm100_mixed_input_umma_builder.inl`: "Can't support CtaN>128 tiles").
pub const SM100_TILES_WEIGHT_ONLY: &[([u32; 3], [u32; 3], KernelSchedule)] = &[
    (
        [128, 64, 128],
        [1, 1, 1],
        KernelSchedule::Sm100MixedInputOneSm,
    ),
    (
        [256, 128, 128],
        [2, 1, 1],
        KernelSchedule::Sm100MixedInputTwoSm,
    ),
];

/// The SM100 mixed-input (weight-only) entries: an s4 weight with scales and a u4 one with scales
/// and zeros ([`WEIGHT_ONLY_FORMATS`]), K-major as stored (CUTLASS's plain order, not the SM90
/// kernels' packed one), scales and zeros of the activations' type in groups of
/// [`SM100_WEIGHT_ONLY_GROUP`], times bf16/f16 activations, on [`SM100_TILES_WEIGHT_ONLY`] with
/// the TMA epilogue of the MMA's SM count and CUTLASS's linear combination. CUTLASS's
/// `KernelTmaWarpSpecialized{1,2}SmMixedInputSm100` builder (example 86); not a row of the
/// Blackwell GEMM tables, which have no mixed-width 16-bit rows, so the entries name no seed row.
pub fn sm100_weight_only() -> Vec<KernelSpec> {
    let mut out = Vec::new();
    for wide in [DataType::Bf16, DataType::F16] {
        for (weight, mode) in WEIGHT_ONLY_FORMATS {
            for &(tile, cluster, schedule) in SM100_TILES_WEIGHT_ONLY {
                let epilogue = if schedule.sms() == 2 {
                    EpilogueSchedule::TmaWarpSpecialized2Sm
                } else {
                    EpilogueSchedule::TmaWarpSpecialized1Sm
                };
                let out_operand = Operand::tma(wide, Layout::ColumnMajor);
                out.push(KernelSpec {
                    arch: Arch::Sm100a,
                    op_class: OpClass::TensorOp,
                    block_scale: None,
                    blockwise: None,
                    output_scale: None,
                    origin: None,
                    a: Operand::tma(weight, Layout::RowMajor),
                    b: Operand::tma(wide, Layout::ColumnMajor),
                    c: out_operand,
                    d: out_operand,
                    accumulator: DataType::F32,
                    compute: DataType::F32,
                    tile,
                    cluster,
                    stages: 0,
                    kernel_schedule: schedule,
                    epilogue_schedule: epilogue,
                    fusion: Fusion::LinearCombination,
                    tile_scheduler: TileScheduler::Persistent,
                    mixed_input: Some(MixedInput {
                        mode,
                        shuffled: false,
                        group: SM100_WEIGHT_ONLY_GROUP,
                    }),
                });
            }
        }
    }
    out
}

/// The weight-only entries of the `weight-only` feature ([`SM90_TILES_WEIGHT_ONLY`], each for
/// its modes, for each activation type).
pub fn is_default_weight_only(spec: &KernelSpec) -> bool {
    let Some(mixed) = spec.mixed_input else {
        return false;
    };
    SM90_TILES_WEIGHT_ONLY.iter().any(|t| {
        (t.tile, t.cluster, t.schedule, t.scheduler)
            == (
                spec.tile,
                spec.cluster,
                spec.kernel_schedule,
                spec.tile_scheduler,
            )
            && t.modes.contains(&mixed.mode)
    })
}

/// The SM90 tf32 tiles (k = 32 elements = 128 bytes).
pub const SM90_TILES_TF32: &[Sm90Tile] = &[
    sm90_tile([128, 128, 32], [1, 2, 1], COOP, COOP_EPI),
    sm90_tile([128, 128, 32], [1, 2, 1], PINGPONG, PINGPONG_EPI),
    sm90_tile([128, 128, 32], [1, 2, 1], WS, NOSMEM),
];

/// The SM90 s8/u8 tiles.
pub const SM90_TILES_INT8: &[Sm90Tile] = &[
    sm90_tile([128, 128, 128], [1, 2, 1], COOP, COOP_EPI),
    sm90_tile([64, 128, 128], [1, 2, 1], PINGPONG, PINGPONG_EPI),
    sm90_tile([128, 128, 128], [1, 2, 1], WS, NOSMEM),
];

/// The SM90 FP8 (tensor-wise scaled) tiles: the f32-promoting cooperative and warp-specialized
/// schedules and the fast-accumulation ones.
pub const SM90_TILES_FP8: &[Sm90Tile] = &[
    sm90_tile([128, 128, 128], [1, 2, 1], COOP, COOP_EPI),
    sm90_tile(
        [128, 256, 128],
        [1, 2, 1],
        KernelSchedule::TmaWarpSpecializedCooperativeFp8FastAccum,
        COOP_EPI,
    ),
    sm90_tile(
        [64, 128, 128],
        [1, 2, 1],
        KernelSchedule::TmaWarpSpecializedPingpongFp8FastAccum,
        PINGPONG_EPI,
    ),
    sm90_tile([128, 128, 128], [1, 2, 1], WS, NOSMEM),
];

/// This crate's own FP8 blockwise kernel (e4m3 x e4m3 TN, bf16 and f16 outputs): the tile of
/// [`SM90_TILES_FP8_BLOCKWISE`] with the per-k-tile scaling overlapped with the tensor cores
/// ([`KernelSchedule::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap`]; same results, bit for
/// bit).
pub const SM90_TILES_FP8_BLOCKWISE_OVERLAP: &[Sm90Tile] = &[sm90_tile(
    [128, 128, 128],
    [1, 2, 1],
    KernelSchedule::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap,
    COOP_EPI,
)];

/// The SM90 FP8 blockwise tile: the recipe's 128x128x128 with the scale blocks of
/// [`SM90_BLOCKWISE`] (CUTLASS's generator emits blockwise kernels with the cooperative schedule
/// only).
pub const SM90_TILES_FP8_BLOCKWISE: &[Sm90Tile] = &[sm90_tile(
    [128, 128, 128],
    [1, 2, 1],
    KernelSchedule::TmaWarpSpecializedCooperativeFp8Blockwise,
    COOP_EPI,
)];

/// One kernel of the SM90 performance menu: a tile, its tile scheduler, and the layout of C and D.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sm90MenuTile {
    /// Tile, cluster and schedules.
    pub tile: Sm90Tile,
    /// Tile scheduler.
    pub scheduler: TileScheduler,
    /// Layout of C and D. Column-major outputs serve small-M problems through the operand swap:
    /// a row-major `D[m, n]` is a column-major `Dᵀ[n, m] = Bᵀ·Aᵀ`, so the large N becomes the
    /// kernel's M and the small M its N, where the narrow tiles (N = 16, 32, 64) fit.
    pub output: Layout,
}

impl Sm90MenuTile {
    /// The same entry with another kernel schedule (same epilogue).
    const fn with_schedule(mut self, schedule: KernelSchedule) -> Sm90MenuTile {
        self.tile.schedule = schedule;
        self
    }
}

const COOP_OVERLAP: KernelSchedule = KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap;
const PINGPONG_OVERLAP: KernelSchedule = KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap;

const fn menu(
    tile: [u32; 3],
    cluster: [u32; 3],
    scheduler: TileScheduler,
    output: Layout,
) -> Sm90MenuTile {
    Sm90MenuTile {
        tile: sm90_tile(tile, cluster, COOP, COOP_EPI),
        scheduler,
        output,
    }
}

/// A pingpong entry of the menu (persistent scheduler, row-major D).
const fn menu_pingpong(tile: [u32; 3], cluster: [u32; 3]) -> Sm90MenuTile {
    Sm90MenuTile {
        tile: sm90_tile(tile, cluster, PINGPONG, PINGPONG_EPI),
        scheduler: TileScheduler::Persistent,
        output: Layout::RowMajor,
    }
}

/// A pingpong entry with column-major D (persistent scheduler): decode-size M through the operand
/// swap, the tokens on the kernel's narrow N side.
const fn menu_pingpong_swapped(tile: [u32; 3], cluster: [u32; 3]) -> Sm90MenuTile {
    Sm90MenuTile {
        output: Layout::ColumnMajor,
        ..menu_pingpong(tile, cluster)
    }
}

/// The SM90 menu for 16-bit TN GEMMs beyond [`SM90_TILES_16BIT`]: stream-K at 128x128 and 128x256
/// (wave quantization on mid-size problems), stream-K kernels with column-major outputs and
/// narrow N tiles for decode-size M (16-64) through the operand swap, and 64x64x64 pingpong
/// kernels (clusters 2x1x1 and 1x2x1, the tile cuBLAS chose at M = 128 on an H100) for M = 16-128. All emitted by CUTLASS's
/// generator (`tests/names_match_cutlass_library.rs`).
pub const SM90_MENU_16BIT: &[Sm90MenuTile] = &[
    menu([128, 128, 64], [1, 2, 1], STREAM_K, Layout::RowMajor),
    menu([128, 256, 64], [2, 1, 1], STREAM_K, Layout::RowMajor),
    menu([128, 16, 128], [1, 1, 1], STREAM_K, Layout::ColumnMajor),
    menu([128, 32, 128], [1, 1, 1], STREAM_K, Layout::ColumnMajor),
    menu([128, 64, 128], [1, 1, 1], STREAM_K, Layout::ColumnMajor),
    menu_pingpong([64, 64, 64], [2, 1, 1]),
    menu_pingpong([64, 64, 64], [1, 2, 1]),
    // The 64x128 pingpong tile with its CTA pair along M, which shares (multicasts) the weights'
    // panel where M has two tile rows or more: 1.10x the 1x2x1 cluster over 81 mid-size shapes
    // of the broad set in one exhaustive H200 run (docs/performance.md).
    menu_pingpong([64, 128, 64], [2, 1, 1]),
    // Tiles cuBLAS runs on an H100 (`tools/cublas_kernels.py`; docs/performance.md, 2026-11-24):
    // its 128x256 tile with a 1x2x1 cluster (M = 4096), a 176-wide tile that divides N = 2112
    // into 12 (DeepSeek-V3's dsv3-a at M = 4096: 0.88x -> 0.97x cuBLAS), and a 96-wide pingpong
    // tile that gives 128 tiles at 128 x 6144, one wave (0.90x -> 0.92x). N = 176 and 96 are
    // wgmma shapes of CUTLASS's generator's instantiation level 3. Measured and left out: a
    // 64x32x64 pingpong tile for decode-size M (twice the CTAs of 64x64, slower at every M = 16
    // shape: 0.85x against 0.88x at 16 x 4096 x 4096).
    menu([128, 256, 64], [1, 2, 1], PERSISTENT, Layout::RowMajor),
    menu([128, 176, 64], [1, 2, 1], PERSISTENT, Layout::RowMajor),
    menu_pingpong([64, 96, 64], [1, 2, 1]),
    // The 96-wide tile with the cluster cuBLAS gives it at 128 x 6144 x 4096 (its 96x64 tile,
    // 1x2 in its column-major view): the CTA pair shares the streamed B panel (0.89x -> 0.98x
    // cuBLAS there; faster than 1x2x1 at every M = 128 shape of the suite, which replaced it in
    // the default set).
    menu_pingpong([64, 96, 64], [2, 1, 1]),
    // The tile cuBLAS runs on an H200 where M·N falls just short of whole waves of the wider
    // tiles (`tools/cublas_kernels.py` on the broad set's slowest shapes; docs/performance.md): its
    // 144x128 tile with a 1x2 cluster in its column-major view, here 128x144 with 2x1x1 (576 =
    // 4 x 144 at 4096 tokens, 4608 = 32 x 144 at 512: one wave of 128 tiles). On the H200 against
    // the 176-wide tile: 4096 x 576 x 7168 0.65x -> 0.98x cuBLAS, 512 x 4608 x 3584 0.75x -> 0.93x,
    // 2048 x 2304 x 768 0.69x -> 0.84x. (Its 168x128 tile has no twin: CUTLASS's epilogue refuses
    // a 168-wide tile, a static divisibility assertion.)
    menu([128, 144, 64], [2, 1, 1], PERSISTENT, Layout::RowMajor),
    // Decode-size M through the operand swap (the tokens on the kernel's N side), the tiles
    // cuBLAS runs at M = 16 (`tools/cublas_kernels.py`): 64x8 with a 1x2x1 cluster, whose two
    // CTAs share the weights' panel (16 x 4096 x 4096: 0.88x -> 1.04x cuBLAS; 16 x 4096 x 14336
    // 0.92x -> 1.04x), and 64x16 with 2x1x1 (as fast as 64x8 at 16 x 6144 x 4096, 1.1-2x the 64x8 tile where 64x8's tiles spill into a second wave (H200,
    // docs/performance.md). At M = 128 both are 3x slower than 64x64.
    menu_pingpong_swapped([64, 8, 64], [1, 2, 1]),
    menu_pingpong_swapped([64, 16, 64], [2, 1, 1]),
];

/// The f32-output twins of the 16-bit tiles that split K over a batch (`Gemm`'s parallel split-K:
/// each of `s` slices of K writes its f32 partial product, a reduction adds them and applies alpha,
/// beta and the output type). Where few output tiles stream a long K (decode-size M and M up to a
/// few hundred against weights of a few thousand rows), the slices fill the SMs in whole waves
/// without the stream-K fixup. The tiles are [`SM90_MENU_16BIT`]'s for small M: the swapped 64x8
/// (1x2x1) and 64x16 (2x1x1) pingpong, and the 64x64 (1x2x1) pingpong.
pub const SM90_MENU_16BIT_PARTIALS: &[Sm90MenuTile] = &[
    menu_pingpong_swapped([64, 8, 64], [1, 2, 1]),
    menu_pingpong_swapped([64, 16, 64], [2, 1, 1]),
    menu_pingpong([64, 64, 64], [1, 2, 1]),
];

/// The SM90 16-bit TN kernels whose C and D need no alignment (alignment 1): TMA main loops with
/// CUTLASS's epilogue without shared memory (`NoSmemWarpSpecialized`), which stores each element
/// itself instead of through a TMA descriptor (whose strides must be multiples of 16 bytes). They
/// serve an n that is not a multiple of 8 with a row-major D (a vocabulary of 50257, say) without
/// copying B and D ([`UNALIGNED_OUTPUT_ALIGNMENT`]); a 128x256 cooperative tile for large M and a
/// 64x128 pingpong tile for the rest. CUTLASS's generator names them as their aligned twins (its
/// names carry A's and B's alignment only), which the catalog therefore does not hold.
pub const SM90_MENU_16BIT_UNALIGNED_OUTPUT: &[Sm90MenuTile] = &[
    Sm90MenuTile {
        tile: sm90_tile([128, 256, 64], [2, 1, 1], COOP, NOSMEM),
        scheduler: TileScheduler::Persistent,
        output: Layout::RowMajor,
    },
    Sm90MenuTile {
        tile: sm90_tile([64, 128, 64], [1, 2, 1], PINGPONG, NOSMEM),
        scheduler: TileScheduler::Persistent,
        output: Layout::RowMajor,
    },
];

/// The C and D alignment of [`SM90_MENU_16BIT_UNALIGNED_OUTPUT`], in elements.
pub const UNALIGNED_OUTPUT_ALIGNMENT: u32 = 1;

/// The SM90 menu for e4m3 x e4m3 TN GEMMs (bf16 and f16 outputs) beyond [`SM90_TILES_FP8`]:
/// stream-K at 128x128x128, the 128x128x128 tile with a 2x1x1 cluster, and the swapped narrow-N
/// stream-K kernels for decode-size M. All with the f32-promoting (not fast-accumulation)
/// mainloop. Measured and left out (H100, `docs/performance.md`): f32-promoting 128x256x128
/// (clusters 1x2x1, 2x1x1) and 256x128x128 cooperative kernels, which CUTLASS's generator emits
/// but which spill (248-byte stack frames) and ran at 0.10-0.53x cuBLASLt on every shape (this
/// crate's sliced 128x256 kernel of [`SM90_MENU_FP8_OVERLAP`] promotes in registers that fit).
pub const SM90_MENU_FP8: &[Sm90MenuTile] = &[
    menu([128, 128, 128], [1, 2, 1], STREAM_K, Layout::RowMajor),
    menu([128, 128, 128], [2, 1, 1], PERSISTENT, Layout::RowMajor),
    menu([128, 16, 128], [1, 1, 1], STREAM_K, Layout::ColumnMajor),
    menu([128, 32, 128], [1, 1, 1], STREAM_K, Layout::ColumnMajor),
    menu([128, 64, 128], [1, 1, 1], STREAM_K, Layout::ColumnMajor),
];

/// The SM90 menu for tf32 TN GEMMs (f32 output) beyond [`SM90_TILES_TF32`]: stream-K at
/// 128x128x32 and swapped narrow-N stream-K kernels for decode-size M. All emitted by CUTLASS's
/// generator.
pub const SM90_MENU_TF32: &[Sm90MenuTile] = &[
    menu([128, 128, 32], [1, 2, 1], STREAM_K, Layout::RowMajor),
    menu([128, 32, 32], [1, 1, 1], STREAM_K, Layout::ColumnMajor),
    menu([128, 64, 32], [1, 1, 1], STREAM_K, Layout::ColumnMajor),
];

/// The SM90 menu for s8 x s8 -> s32 TN GEMMs beyond [`SM90_TILES_INT8`]: stream-K at
/// 128x128x128 and swapped narrow-N stream-K kernels for decode-size M. All emitted by CUTLASS's
/// generator.
pub const SM90_MENU_INT8: &[Sm90MenuTile] = &[
    menu([128, 128, 128], [1, 2, 1], STREAM_K, Layout::RowMajor),
    menu([128, 16, 128], [1, 1, 1], STREAM_K, Layout::ColumnMajor),
    menu([128, 64, 128], [1, 1, 1], STREAM_K, Layout::ColumnMajor),
];

/// This crate's own FP8 kernels for e4m3 x e4m3 TN (bf16 and f16 outputs): the f32-promoting
/// cooperative kernels of the tile table and of [`SM90_MENU_FP8`] with the promotion overlapped
/// with the tensor cores ([`KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap`]; same
/// results, bit for bit), and pingpong kernels with 64x128 and 64x64 tiles for decode-size M
/// ([`KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap`]). Not in `cutlass_library`: their
/// names add `_fp8_overlap` to its cooperative and pingpong suffixes.
pub const SM90_MENU_FP8_OVERLAP: &[Sm90MenuTile] = &[
    menu([128, 128, 128], [1, 2, 1], PERSISTENT, Layout::RowMajor).with_schedule(COOP_OVERLAP),
    menu([128, 128, 128], [1, 2, 1], STREAM_K, Layout::RowMajor).with_schedule(COOP_OVERLAP),
    menu([128, 128, 128], [2, 1, 1], PERSISTENT, Layout::RowMajor).with_schedule(COOP_OVERLAP),
    menu([128, 16, 128], [1, 1, 1], STREAM_K, Layout::ColumnMajor).with_schedule(COOP_OVERLAP),
    menu([128, 32, 128], [1, 1, 1], STREAM_K, Layout::ColumnMajor).with_schedule(COOP_OVERLAP),
    menu([128, 64, 128], [1, 1, 1], STREAM_K, Layout::ColumnMajor).with_schedule(COOP_OVERLAP),
    menu_pingpong([64, 128, 128], [1, 2, 1]).with_schedule(PINGPONG_OVERLAP),
    menu_pingpong([64, 64, 128], [1, 2, 1]).with_schedule(PINGPONG_OVERLAP),
    menu_pingpong([64, 64, 128], [2, 1, 1]).with_schedule(PINGPONG_OVERLAP),
    // cuBLASLt's f32-promoting tiles on an H100 beyond 128x128 (`tools/cublas_kernels.py`): a
    // 144-wide cooperative tile (3 x 72 accumulator registers per thread; ptxas: no spills), the
    // fastest at 8192³, 4096 x 2112 x 7168 and 4096 x 57344 x 8192, and a 96-wide pingpong tile
    // for M = 128 (128 x 6144 x 4096: 0.89x -> 0.91x cuBLASLt).
    menu([128, 144, 128], [1, 2, 1], PERSISTENT, Layout::RowMajor).with_schedule(COOP_OVERLAP),
    menu_pingpong([64, 96, 128], [1, 2, 1]).with_schedule(PINGPONG_OVERLAP),
    // With the CTA pair sharing the streamed B (128 x 6144 x 4096: 0.87x -> 0.98x cuBLASLt).
    menu_pingpong([64, 96, 128], [2, 1, 1]).with_schedule(PINGPONG_OVERLAP),
    // The swapped decode tiles of the 16-bit menu (16 x 4096 x 4096: 0.79x -> 0.93x cuBLASLt;
    // 16 x 4096 x 14336: 0.88x -> 1.05x; 64x16 2x1x1 the fastest at 16 x 6144 x 4096, 0.93x).
    menu_pingpong_swapped([64, 8, 128], [1, 2, 1]).with_schedule(PINGPONG_OVERLAP),
    menu_pingpong_swapped([64, 16, 128], [2, 1, 1]).with_schedule(PINGPONG_OVERLAP),
    // Wider cooperative tiles through the sliced mainloop (cutlass_rs_sm90_fp8_sliced.hpp: the
    // f32 accumulator plus one N slice's k-tile accumulator): 128x256, the fast-accumulation
    // kernels' tile, whose f32-promoting CUTLASS kernel spills (M = 4096 on an H100: 0.95-1.01x
    // cuBLASLt where N is a multiple of 256), and 128x192 (4096 x 2112 x 7168: 0.94x, 128x144 0.92x). Measured and left out:
    // 128x160 (0.85-0.92x) and 128x256 with a 2x1x1 cluster (at or below 1x2x1 on 10 of 11
    // shapes).
    menu([128, 192, 128], [1, 2, 1], PERSISTENT, Layout::RowMajor).with_schedule(COOP_OVERLAP),
    menu([128, 256, 128], [1, 2, 1], PERSISTENT, Layout::RowMajor).with_schedule(COOP_OVERLAP),
    // 64x32 pingpong tiles for 32-64 tokens: row-major with a 1x2x1 cluster (twice the CTAs of
    // 64x64 where N is a few thousand) and swapped with 2x1x1 (the tokens on the kernel's N side).
    // Chosen with the 128x128 2x1x1 kernel above on five families of the broad set and scored on
    // the other three and three families outside it (H100, docs/performance.md). Measured and left
    // out of the default set then: 128x64x128 cooperative (1x2x1, 2x1x1), 64x64x128 and 64x96x128
    // pingpong 1x2x1 and the swapped 128x32 stream-K kernel.
    menu_pingpong([64, 32, 128], [1, 2, 1]).with_schedule(PINGPONG_OVERLAP),
    menu_pingpong_swapped([64, 32, 128], [2, 1, 1]).with_schedule(PINGPONG_OVERLAP),
];

const STREAM_K: TileScheduler = TileScheduler::StreamK;
const PERSISTENT: TileScheduler = TileScheduler::Persistent;

/// The blockwise scale blocks of the SM90 FP8 blockwise entries: 1x128 for A (activations, one
/// scale per row and 128 elements of K) and 128x128 for B (weights), as in
/// Triton's 2D-block FP8 GEMM tutorial and DeepSeek-V3.
pub const SM90_BLOCKWISE: Blockwise = Blockwise {
    m: 1,
    n: 128,
    k: 128,
    order: ScaleOrder::MnMajor,
};

/// The blockwise scale blocks of the SM90 grouped FP8 blockwise entries: those of
/// [`SM90_BLOCKWISE`], K-major (A's scales `[rows, k / 128]` and each expert's weight scales
/// `[n / 128, k / 128]`, row-major: what a per-token quantizer writes and DeepSeek-V3's checkpoints
/// store).
pub const SM90_BLOCKWISE_GROUPED: Blockwise = Blockwise {
    order: ScaleOrder::KMajor,
    ..SM90_BLOCKWISE
};

const COOP: KernelSchedule = KernelSchedule::TmaWarpSpecializedCooperative;
const PINGPONG: KernelSchedule = KernelSchedule::TmaWarpSpecializedPingpong;
const WS: KernelSchedule = KernelSchedule::TmaWarpSpecialized;
const COOP_EPI: EpilogueSchedule = EpilogueSchedule::TmaWarpSpecializedCooperative;
const PINGPONG_EPI: EpilogueSchedule = EpilogueSchedule::TmaWarpSpecialized;
const NOSMEM: EpilogueSchedule = EpilogueSchedule::NoSmemWarpSpecialized;
const GROUPED_COOP: KernelSchedule = KernelSchedule::PtrArrayTmaWarpSpecializedCooperative;
const GROUPED_PINGPONG: KernelSchedule = KernelSchedule::PtrArrayTmaWarpSpecializedPingpong;
const GROUPED_COOP_BLOCKWISE: KernelSchedule =
    KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8Blockwise;
const GROUPED_PINGPONG_BLOCKWISE: KernelSchedule =
    KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8Blockwise;
const GROUPED_COOP_EPI: EpilogueSchedule = EpilogueSchedule::PtrArrayTmaWarpSpecializedCooperative;
const GROUPED_PINGPONG_EPI: EpilogueSchedule = EpilogueSchedule::PtrArrayTmaWarpSpecializedPingpong;

/// The FP8 type pairs of the SM90 catalog, mixed ones included.
pub const SM90_FP8_PAIRS: [(DataType, DataType); 4] = [
    (DataType::E4M3, DataType::E4M3),
    (DataType::E4M3, DataType::E5M2),
    (DataType::E5M2, DataType::E4M3),
    (DataType::E5M2, DataType::E5M2),
];

/// The outputs (C = D) of the SM90 FP8 entries.
pub const SM90_FP8_OUTPUTS: [DataType; 3] = [DataType::Bf16, DataType::F16, DataType::F32];

/// The four A/B layouts, in the tables' order: TN, NT, NN, TT.
pub const AB_LAYOUTS: [(Layout, Layout); 4] = [
    (Layout::RowMajor, Layout::ColumnMajor),
    (Layout::ColumnMajor, Layout::RowMajor),
    (Layout::ColumnMajor, Layout::ColumnMajor),
    (Layout::RowMajor, Layout::RowMajor),
];

/// Input types of the SM90 16-bit rows.
pub const SM90_16BIT_INPUTS: [DataType; 2] = [DataType::F16, DataType::Bf16];

/// The layout of C and D in the catalog's kernels (the SM90 menu adds column-major outputs,
/// [`Sm90MenuTile::output`]). Column-major outputs of the user's are served by the safe crate
/// through the transpose identity `D^T = B^T A^T`, so one output layout covers both.
pub const OUTPUT_LAYOUT: Layout = Layout::RowMajor;

/// One SM90 entry. `output` is the type of C and D; `accumulator` the MMA's.
fn sm90_spec(
    (a, b): (DataType, DataType),
    output: DataType,
    accumulator: DataType,
    ab: (Layout, Layout),
    t: &Sm90Tile,
    blockwise: Option<Blockwise>,
) -> KernelSpec {
    KernelSpec {
        arch: Arch::Sm90a,
        op_class: OpClass::TensorOp,
        block_scale: None,
        blockwise,
        output_scale: None,
        origin: None,
        a: Operand::tma(a, ab.0),
        b: Operand::tma(b, ab.1),
        c: Operand::tma(output, OUTPUT_LAYOUT),
        d: Operand::tma(output, OUTPUT_LAYOUT),
        accumulator,
        compute: DataType::F32,
        tile: t.tile,
        cluster: t.cluster,
        stages: 0,
        kernel_schedule: t.schedule,
        epilogue_schedule: t.epilogue,
        fusion: Fusion::LinearCombination,
        tile_scheduler: TileScheduler::Persistent,
        mixed_input: None,
    }
}

/// One TN entry of the SM90 menu (an s32 accumulator for integer inputs, f32 otherwise).
fn sm90_menu_spec(pair: (DataType, DataType), output: DataType, m: &Sm90MenuTile) -> KernelSpec {
    let accumulator = match pair.0 {
        DataType::I8 | DataType::U8 => DataType::I32,
        _ => DataType::F32,
    };
    let mut s = sm90_spec(pair, output, accumulator, AB_LAYOUTS[0], &m.tile, None);
    s.tile_scheduler = m.scheduler;
    s.c.layout = m.output;
    s.d.layout = m.output;
    s
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

/// Every SM100 and SM120 entry CUTLASS's tables allow: for each tile table, each of its tile rows, each
/// type row it serves with the same density (dense tile rows take dense type rows, sparse tile
/// rows sparse ones), each concrete type pair, each layout both allow and each dispatch policy.
/// Cluster 1x1x1 for 1SM MMAs and SM120, 2x1x1 for 2SM MMAs. Dense entries come first, then the
/// sparse ones (compiled by the census; running them is not wired yet).
pub fn sm1xx() -> Vec<KernelSpec> {
    let mut out = sm1xx_with(false);
    out.extend(sm1xx_with(true));
    let twins = policy_twins(&out);
    out.extend(twins);
    out
}

/// The SM100 policies the tables list but assign to no tile (Table 14's epilogues without shared
/// memory, `NoSmemWarpSpecialized{1,2}Sm`) or leave to the builder (`KernelScheduleAuto` with
/// `EpilogueScheduleAuto`, and the auto block-scaled `KernelTmaWarpSpecialized{1,2}SmBlockScaledSm100`),
/// as entries of their own: for each tile table, density and SM count, the first entry with
/// CUTLASS's epilogue takes the other epilogue (dense, and sparse without block scaling: Table
/// 14), the first dense one the auto policies, and the first block-scaled one the auto
/// block-scaled policy.
fn policy_twins(entries: &[KernelSpec]) -> Vec<KernelSpec> {
    use std::collections::HashSet;
    let mut names: HashSet<String> = entries.iter().map(KernelSpec::name).collect();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for s in entries.iter().filter(|s| s.arch == Arch::Sm100a) {
        let Some(origin) = s.origin else { continue };
        let two = s.kernel_schedule.sms() == 2;
        if !seen.insert((origin.tile_table, s.op_class, two)) {
            continue;
        }
        // The 1SM or the 2SM variant of a policy, as the entry's MMA.
        fn by_sms<T>(two: bool, one: T, two_sm: T) -> T {
            if two {
                two_sm
            } else {
                one
            }
        }
        let mut twins = Vec::new();
        if s.op_class != OpClass::BlockScaledSparseTensorOp {
            twins.push(KernelSpec {
                epilogue_schedule: by_sms(
                    two,
                    EpilogueSchedule::NoSmemWarpSpecialized1Sm,
                    EpilogueSchedule::NoSmemWarpSpecialized2Sm,
                ),
                ..*s
            });
        }
        if matches!(s.op_class, OpClass::TensorOp | OpClass::BlockScaledTensorOp) {
            twins.push(KernelSpec {
                kernel_schedule: KernelSchedule::Sm100Auto,
                epilogue_schedule: EpilogueSchedule::Auto,
                ..*s
            });
        }
        if s.op_class == OpClass::BlockScaledTensorOp {
            twins.push(KernelSpec {
                kernel_schedule: by_sms(
                    two,
                    KernelSchedule::Sm100BlockScaledOneSm,
                    KernelSchedule::Sm100BlockScaledTwoSm,
                ),
                ..*s
            });
        }
        out.extend(twins.into_iter().filter(|t| names.insert(t.name())));
    }
    out
}

fn sm1xx_with(sparse: bool) -> Vec<KernelSpec> {
    let mut out = Vec::new();
    for table in TILE_TABLES {
        for tile_row in table.rows.iter().filter(|r| r.sparse == sparse) {
            for &(tt, tr) in table.type_rows {
                let row = type_row(tt, tr).expect("tile tables name existing type rows");
                if row.sparse != sparse {
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
                                op_class: match (block_scale.is_some(), sparse) {
                                    (false, false) => OpClass::TensorOp,
                                    (true, false) => OpClass::BlockScaledTensorOp,
                                    (false, true) => OpClass::SparseTensorOp,
                                    (true, true) => OpClass::BlockScaledSparseTensorOp,
                                },
                                block_scale,
                                blockwise: None,
                                output_scale: None,
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
                                fusion: Fusion::LinearCombination,
                                tile_scheduler: TileScheduler::Persistent,
                                mixed_input: None,
                            });
                        }
                    }
                }
            }
        }
    }
    let twins: Vec<KernelSpec> = out.iter().flat_map(sparse_mx_float4_twins).collect();
    out.extend(twins);
    out
}

/// The policies CUTLASS 4.2 builds for a sparse mx_float4 entry (one ue8m0 per 32 elements) that
/// the seed gives the Nvf4 sparse policy (Table 10's sparse rows, which that policy refuses for
/// 32-element scale vectors: `CutlassLimit::SparseScaleVector`): the Mxf4 sparse policy and the
/// auto sparse block-scaled one, as entries of their own.
fn sparse_mx_float4_twins(spec: &KernelSpec) -> Vec<KernelSpec> {
    let two = spec.kernel_schedule.sms() == 2;
    let nvf4 = matches!(
        spec.kernel_schedule,
        KernelSchedule::Sm100SparseNvf4OneSm | KernelSchedule::Sm100SparseNvf4TwoSm
    );
    if !nvf4 || spec.block_scale.is_none_or(|b| b.vec != 32) {
        return Vec::new();
    }
    let policies = if two {
        [
            KernelSchedule::Sm100SparseMxf4TwoSm,
            KernelSchedule::Sm100SparseBlockScaledTwoSm,
        ]
    } else {
        [
            KernelSchedule::Sm100SparseMxf4OneSm,
            KernelSchedule::Sm100SparseBlockScaledOneSm,
        ]
    };
    policies
        .into_iter()
        .map(|kernel_schedule| KernelSpec {
            kernel_schedule,
            ..*spec
        })
        .collect()
}

/// Every entry of the catalog, in a stable order: SM90, then SM100 and SM120 from CUTLASS's tables.
pub fn all() -> Vec<KernelSpec> {
    let mut out = sm90();
    let blackwell = sm1xx();
    out.extend(sm1xx_fused(&blackwell));
    out.extend(blackwell);
    out.extend(sm100_block_scaled_outputs());
    out.extend(sm1xx_grouped());
    out.extend(sm100_weight_only());
    out
}

/// The SM100 and SM120 grouped (pointer-array) entries: TN rows of Tables 1-3 on their tiles, with
/// the grouped twin of the row's policy ([`KernelSchedule::grouped_twin`]) and a row-major D of
/// the input type (bf16 for 8-bit and narrower inputs), as a mixture-of-experts layer takes them.
///
/// | arch | A x B | MMA tiles |
/// |---|---|---|
/// | SM100 | bf16, f16 (Table 1), e4m3 (Table 2) | 1SM 128x128, 2SM 256x128 |
/// | SM100 | MXFP8 (ue8m0 x e4m3 per 32), NVFP4 (ue4m3 x e2m1 per 16) | 1SM 128x128, 2SM 256x128 |
/// | SM120 | NVFP4 (cooperative and pingpong) | 128x128 |
///
/// CUTLASS 4.2 has no SM120 grouped kernel for operands without block scales, and its SM120
/// block-scaled builder refuses MX operands with the pointer-array schedules (`sm1xx_common.inl`:
/// "Incorrect SfVectorSize for MX_F4F6F8 is deduced"; census).
pub fn sm1xx_grouped() -> Vec<KernelSpec> {
    let base = sm1xx_with(false);
    type Pick = (Arch, fn(&KernelSpec) -> bool, [u32; 2], KernelSchedule);
    let picks: [Pick; 12] = [
        (
            Arch::Sm100a,
            |s| s.a.ty == DataType::Bf16,
            [128, 128],
            KernelSchedule::Sm100OneSm,
        ),
        (
            Arch::Sm100a,
            |s| s.a.ty == DataType::Bf16,
            [256, 128],
            KernelSchedule::Sm100TwoSm,
        ),
        (
            Arch::Sm100a,
            |s| s.a.ty == DataType::F16,
            [128, 128],
            KernelSchedule::Sm100OneSm,
        ),
        (
            Arch::Sm100a,
            |s| s.a.ty == DataType::F16,
            [256, 128],
            KernelSchedule::Sm100TwoSm,
        ),
        (
            Arch::Sm100a,
            |s| s.block_scale.is_none() && (s.a.ty, s.b.ty) == (DataType::E4M3, DataType::E4M3),
            [128, 128],
            KernelSchedule::Sm100OneSm,
        ),
        (
            Arch::Sm100a,
            |s| s.block_scale.is_none() && (s.a.ty, s.b.ty) == (DataType::E4M3, DataType::E4M3),
            [256, 128],
            KernelSchedule::Sm100TwoSm,
        ),
        (
            Arch::Sm100a,
            |s| mxfp8_of(s),
            [128, 128],
            KernelSchedule::Sm100Mxf8f6f4OneSm,
        ),
        (
            Arch::Sm100a,
            |s| mxfp8_of(s),
            [256, 128],
            KernelSchedule::Sm100Mxf8f6f4TwoSm,
        ),
        (
            Arch::Sm100a,
            |s| nvfp4_of(s),
            [128, 128],
            KernelSchedule::Sm100Nvf4OneSm,
        ),
        (
            Arch::Sm100a,
            |s| nvfp4_of(s),
            [256, 128],
            KernelSchedule::Sm100Nvf4TwoSm,
        ),
        (
            Arch::Sm120a,
            |s| nvfp4_of(s) && s.tile[2] == 128,
            [128, 128],
            KernelSchedule::TmaWarpSpecializedCooperative,
        ),
        (
            Arch::Sm120a,
            |s| nvfp4_of(s) && s.tile[2] == 128,
            [128, 128],
            KernelSchedule::TmaWarpSpecializedPingpong,
        ),
    ];
    picks
        .iter()
        .map(|&(arch, types, tile, schedule)| {
            let s = base
                .iter()
                .find(|s| {
                    s.arch == arch
                        && s.layout_name() == "TN"
                        && s.kernel_schedule == schedule
                        && s.epilogue_schedule != EpilogueSchedule::NoSmemWarpSpecialized1Sm
                        && [s.tile[0], s.tile[1]] == tile
                        && types(s)
                })
                .unwrap_or_else(|| panic!("the tables have a {arch} {tile:?} {schedule:?} TN row"));
            let grouped = schedule
                .grouped_twin()
                .expect("every picked policy has a grouped twin");
            let two = schedule.sms() == 2;
            let epilogue_schedule = match (arch, two) {
                (Arch::Sm120a, _) => EpilogueSchedule::Auto,
                (_, true) => EpilogueSchedule::PtrArrayTmaWarpSpecialized2Sm,
                (_, false) => EpilogueSchedule::PtrArrayTmaWarpSpecialized1Sm,
            };
            let out = match s.a.ty {
                DataType::Bf16 | DataType::F16 => s.a.ty,
                _ => DataType::Bf16,
            };
            KernelSpec {
                kernel_schedule: grouped,
                epilogue_schedule,
                c: Operand::tma(out, OUTPUT_LAYOUT),
                d: Operand::tma(out, OUTPUT_LAYOUT),
                ..*s
            }
        })
        .collect()
}

/// Whether an entry is NVFP4 (e2m1 with ue4m3 scale factors per 16 elements).
fn nvfp4_of(s: &KernelSpec) -> bool {
    s.block_scale.map(|b| (b.sf, b.vec)) == Some((DataType::UE4M3, 16))
}

/// Whether an entry is MXFP8 with e4m3 operands (ue8m0 scale factors per 32 elements).
fn mxfp8_of(s: &KernelSpec) -> bool {
    s.block_scale.map(|b| b.sf) == Some(DataType::UE8M0)
        && (s.a.ty, s.b.ty) == (DataType::E4M3, DataType::E4M3)
}

/// The fused epilogue ([`Fusion::ScaleBiasActivation`]) on the SM100 and SM120 starter kernels
/// of the `sm100` and `sm120` families whose epilogue can take it (dense, a plain D; not the
/// grouped ones).
pub fn sm1xx_fused(sm1xx: &[KernelSpec]) -> Vec<KernelSpec> {
    use crate::families::{SM100_STARTER, SM120_STARTER};
    sm1xx
        .iter()
        .filter(|s| {
            let name = s.name();
            !s.kernel_schedule.is_grouped()
                && (SM100_STARTER.contains(&name.as_str())
                    || SM120_STARTER.contains(&name.as_str()))
        })
        .filter_map(|s| {
            let fusion = fused_epilogue(s)?;
            Some(KernelSpec { fusion, ..*s })
        })
        .collect()
}

/// Entries whose D is itself block-scaled (`LinCombBlockScaleFactor`: FP4 elements plus their
/// scale factors), built on rows of the tables with a non-default output and cluster:
///
/// 1. The Blackwell narrow-precision walkthrough (Blackwell narrow-precision GEMM section): `mx_float4_t` x
///    `mx_float4_t`, NT (Table 3's `kind::mxf8f6f4` row), 256x256x128 MMA tile with
///    `KernelTmaWarpSpecialized2SmMxf8f6f4Sm100`, cluster 4x4x1, C f16, D e2m1 with ue4m3 scale
///    factors per 16 (`SFDVectorSize = 16`).
/// 2. NVFP4 in, NVFP4 out: `nv_float4_t` x `nv_float4_t`, TN, 256x256x256 with
///    `KernelTmaWarpSpecialized2SmNvf4Sm100`, cluster 2x1x1 (an LLM layer's GEMM that feeds the
///    next NVFP4 layer).
pub fn sm100_block_scaled_outputs() -> Vec<KernelSpec> {
    let nv_out = Some(BlockScale {
        sf: DataType::UE4M3,
        vec: 16,
    });
    let base = sm1xx_with(false);
    let pick = |f: &dyn Fn(&KernelSpec) -> bool| -> KernelSpec {
        *base
            .iter()
            .find(|s| f(s))
            .expect("the tables have the base row of a block-scaled-output entry")
    };
    let walkthrough = pick(&|s| {
        s.arch == Arch::Sm100a
            && s.kernel_schedule == KernelSchedule::Sm100Mxf8f6f4TwoSm
            && (s.a.ty, s.b.ty) == (DataType::E2M1, DataType::E2M1)
            && s.layout_name() == "NT"
            && s.tile == [256, 256, 128]
    });
    let nvfp4 = pick(&|s| {
        s.arch == Arch::Sm100a
            && s.kernel_schedule == KernelSchedule::Sm100Nvf4TwoSm
            && s.block_scale.map(|b| b.sf) == Some(DataType::UE4M3)
            && s.tile == [256, 256, 256]
    });
    [(walkthrough, [4, 4, 1]), (nvfp4, [2, 1, 1])]
        .into_iter()
        .map(|(s, cluster)| KernelSpec {
            cluster,
            d: Operand::tma(DataType::E2M1, OUTPUT_LAYOUT),
            output_scale: nv_out,
            ..s
        })
        .collect()
}

/// The SM90 entries, in a stable order: f16/bf16 (all four layouts), tf32 (TN, NT, NN), s8/u8
/// (TN), FP8 tensor-wise (TN, the four e4m3/e5m2 pairs), the 16-bit and e4m3 menus, FP8 blockwise
/// (TN), the tf32 and s8 menus.
///
/// 8-bit operands are TN only: Hopper's wgmma reads 8-bit operands from shared memory K-major.
pub fn sm90() -> Vec<KernelSpec> {
    let mut out = Vec::new();
    let tn = [AB_LAYOUTS[0]];
    for input in SM90_16BIT_INPUTS {
        for output in [input, DataType::F32] {
            for ab in AB_LAYOUTS {
                for t in SM90_TILES_16BIT {
                    out.push(sm90_spec(
                        (input, input),
                        output,
                        DataType::F32,
                        ab,
                        t,
                        None,
                    ));
                }
            }
        }
    }
    for ab in &AB_LAYOUTS[..3] {
        for t in SM90_TILES_TF32 {
            let pair = (DataType::Tf32, DataType::Tf32);
            out.push(sm90_spec(pair, DataType::F32, DataType::F32, *ab, t, None));
        }
    }
    // s8 writes s32 or s8; u8 writes s32 (CUTLASS's generator pairs an 8-bit output with an s8 C).
    for (input, outputs) in [
        (DataType::I8, &[DataType::I32, DataType::I8][..]),
        (DataType::U8, &[DataType::I32][..]),
    ] {
        for &output in outputs {
            for ab in tn {
                for t in SM90_TILES_INT8 {
                    let pair = (input, input);
                    out.push(sm90_spec(pair, output, DataType::I32, ab, t, None));
                }
            }
        }
    }
    for pair in SM90_FP8_PAIRS {
        for output in SM90_FP8_OUTPUTS {
            for t in SM90_TILES_FP8 {
                // An f32 D through shared memory does not fit beside a 128x256x128 FP8 mainloop
                // (CUTLASS's generator prunes it too).
                if output == DataType::F32 && t.tile[1] == 256 {
                    continue;
                }
                out.push(sm90_spec(pair, output, DataType::F32, tn[0], t, None));
            }
        }
    }
    // The performance menu (TN).
    for input in SM90_16BIT_INPUTS {
        for m in SM90_MENU_16BIT {
            out.push(sm90_menu_spec((input, input), input, m));
        }
        for m in SM90_MENU_16BIT_UNALIGNED_OUTPUT {
            let mut spec = sm90_menu_spec((input, input), input, m);
            spec.c.align = UNALIGNED_OUTPUT_ALIGNMENT;
            spec.d.align = UNALIGNED_OUTPUT_ALIGNMENT;
            out.push(spec);
        }
        for m in SM90_MENU_16BIT_PARTIALS {
            out.push(sm90_menu_spec((input, input), DataType::F32, m));
        }
    }
    for output in [DataType::Bf16, DataType::F16] {
        for m in SM90_MENU_FP8.iter().chain(SM90_MENU_FP8_OVERLAP) {
            out.push(sm90_menu_spec((DataType::E4M3, DataType::E4M3), output, m));
        }
    }
    for pair in SM90_FP8_PAIRS {
        for output in SM90_FP8_OUTPUTS {
            for t in SM90_TILES_FP8_BLOCKWISE {
                let bw = Some(SM90_BLOCKWISE);
                out.push(sm90_spec(pair, output, DataType::F32, tn[0], t, bw));
            }
        }
    }
    for output in [DataType::Bf16, DataType::F16] {
        for t in SM90_TILES_FP8_BLOCKWISE_OVERLAP {
            let pair = (DataType::E4M3, DataType::E4M3);
            let bw = Some(SM90_BLOCKWISE);
            out.push(sm90_spec(pair, output, DataType::F32, tn[0], t, bw));
        }
    }
    // The blockwise kernel's stream-K twin, for problems of few output tiles and a long K
    // (decode-size M on a weight of a few thousand rows: 28 tiles of 128 x 128 for 132 SMs).
    for output in [DataType::Bf16, DataType::F16] {
        for t in SM90_TILES_FP8_BLOCKWISE_OVERLAP {
            let pair = (DataType::E4M3, DataType::E4M3);
            let bw = Some(SM90_BLOCKWISE);
            out.push(KernelSpec {
                tile_scheduler: TileScheduler::StreamK,
                ..sm90_spec(pair, output, DataType::F32, tn[0], t, bw)
            });
        }
    }
    // The default set's kernels with the fused epilogue (after all CUTLASS-named entries, so
    // their order stays as it was).
    let fused: Vec<KernelSpec> = out
        .iter()
        .filter_map(|s| {
            let fusion = fused_epilogue(s)?;
            let twin = KernelSpec { fusion, ..*s };
            is_default(&twin).then_some(twin)
        })
        .collect();
    out.extend(fused);
    // The gated-epilogue twins of the TN tiles of SM90_TILES_GATED (16-bit, and e4m3 to bf16).
    let gated: Vec<KernelSpec> = out.iter().filter_map(gated_epilogue).collect();
    out.extend(gated);
    // The auxiliary-output twins of the 16-bit TN tiles of SM90_TILES_AUX.
    let aux: Vec<KernelSpec> = out.iter().filter_map(aux_epilogue).collect();
    out.extend(aux);
    // The f32-bias twins of four fused tiles per output type (built by name).
    let f32_bias: Vec<KernelSpec> = out.iter().filter_map(f32_bias_epilogue).collect();
    out.extend(f32_bias);
    // Grouped (pointer-array) kernels, TN with a D of the input type (bf16 for e4m3): row-major,
    // and without scales also column-major (the swapped decode tiles, whose callers still pass a
    // row-major D: the argument builder swaps the operands).
    for input in [DataType::Bf16, DataType::F16] {
        for t in SM90_TILES_GROUPED_16BIT
            .iter()
            .chain(SM90_TILES_GROUPED_16BIT_EXTRA)
        {
            out.push(sm90_spec(
                (input, input),
                input,
                DataType::F32,
                tn[0],
                t,
                None,
            ));
        }
        for t in SM90_TILES_GROUPED_16BIT_SWAPPED
            .iter()
            .chain(SM90_TILES_GROUPED_16BIT_SWAPPED_EXTRA)
        {
            let mut s = sm90_spec((input, input), input, DataType::F32, tn[0], t, None);
            s.c.layout = Layout::ColumnMajor;
            s.d.layout = Layout::ColumnMajor;
            out.push(s);
        }
    }
    for t in SM90_TILES_GROUPED_FP8
        .iter()
        .chain(SM90_TILES_GROUPED_FP8_EXTRA)
    {
        let pair = (DataType::E4M3, DataType::E4M3);
        out.push(sm90_spec(
            pair,
            DataType::Bf16,
            DataType::F32,
            tn[0],
            t,
            None,
        ));
    }
    for t in SM90_TILES_GROUPED_FP8_SWAPPED
        .iter()
        .chain(SM90_TILES_GROUPED_FP8_SWAPPED_EXTRA)
    {
        let pair = (DataType::E4M3, DataType::E4M3);
        let mut s = sm90_spec(pair, DataType::Bf16, DataType::F32, tn[0], t, None);
        s.c.layout = Layout::ColumnMajor;
        s.d.layout = Layout::ColumnMajor;
        out.push(s);
    }
    for output in [DataType::Bf16, DataType::F16] {
        for t in SM90_TILES_GROUPED_FP8_BLOCKWISE
            .iter()
            .chain(SM90_TILES_GROUPED_FP8_BLOCKWISE_EXTRA)
        {
            let pair = (DataType::E4M3, DataType::E4M3);
            let bw = Some(SM90_BLOCKWISE_GROUPED);
            out.push(sm90_spec(pair, output, DataType::F32, tn[0], t, bw));
        }
    }
    for m in SM90_MENU_TF32 {
        let pair = (DataType::Tf32, DataType::Tf32);
        out.push(sm90_menu_spec(pair, DataType::F32, m));
    }
    for m in SM90_MENU_INT8 {
        out.push(sm90_menu_spec(
            (DataType::I8, DataType::I8),
            DataType::I32,
            m,
        ));
    }
    // Weight-only (mixed-input) kernels.
    for wide in [DataType::Bf16, DataType::F16] {
        for format in WEIGHT_ONLY_FORMATS {
            for t in SM90_TILES_WEIGHT_ONLY
                .iter()
                .chain(SM90_TILES_WEIGHT_ONLY_EXTRA)
            {
                out.push(weight_only_spec(format, wide, t));
            }
        }
    }
    // Their fused-epilogue twins (bias, activation, scales): bf16 activations, the decode,
    // mid-size and prefill tiles of the `weight-only` feature.
    for format in WEIGHT_ONLY_FORMATS {
        for t in SM90_TILES_WEIGHT_ONLY
            .iter()
            .filter(|t| WEIGHT_ONLY_FUSED_TILES.contains(&t.tile) && t.modes.contains(&format.1))
        {
            let spec = weight_only_spec(format, DataType::Bf16, t);
            out.push(KernelSpec {
                fusion: Fusion::ScaleBiasActivation { bias: spec.d.ty },
                ..spec
            });
        }
    }
    // FP8, then int8 weights (last: the entries before keep their order), each with its fused
    // twins on the same tiles as the 4-bit formats'.
    for format in WEIGHT_ONLY_PER_CHANNEL_FORMATS {
        for wide in [DataType::Bf16, DataType::F16] {
            for t in SM90_TILES_WEIGHT_ONLY {
                out.push(weight_only_spec(format, wide, t));
            }
        }
        for t in SM90_TILES_WEIGHT_ONLY
            .iter()
            .filter(|t| WEIGHT_ONLY_FUSED_TILES.contains(&t.tile))
        {
            let spec = weight_only_spec(format, DataType::Bf16, t);
            out.push(KernelSpec {
                fusion: Fusion::ScaleBiasActivation { bias: spec.d.ty },
                ..spec
            });
        }
    }
    out
}

/// The tiles of [`SM90_TILES_WEIGHT_ONLY`] whose bf16 kernels also come with the fused epilogue
/// ([`Fusion::ScaleBiasActivation`], in the `weight-only` feature): 128x32 stream-K for decode,
/// 128x128 stream-K for 65-1024 tokens, 128x256 for prefill.
pub const WEIGHT_ONLY_FUSED_TILES: &[[u32; 3]] = &[[128, 32, 64], [128, 128, 64], [128, 256, 64]];

/// The kernels built when the user selects none (97): the 128x256x64 cooperative kernel for f16
/// and bf16 in all four layouts with an output of the input type, plus f32 output in the TN
/// layout; eleven small- and odd-shape TN kernels and two for outputs of any alignment per 16-bit
/// type; and the e4m3 x e4m3 -> bf16 FP8 kernels with the overlapped promotion, thirteen tensor-wise
/// and two blockwise (persistent, and stream-K for few output tiles over a long K); the thirteen grouped kernels ([`SM90_TILES_GROUPED_16BIT`] and
/// [`SM90_TILES_GROUPED_16BIT_SWAPPED`] for bf16 and f16, [`SM90_TILES_GROUPED_FP8`] and
/// [`SM90_TILES_GROUPED_FP8_SWAPPED`], [`SM90_TILES_GROUPED_FP8_BLOCKWISE`]). Chosen by coverage per compile-minute on `bench/shapes-broad.tsv`. All with
/// CUTLASS's `LinearCombination` epilogue; and twenty-three of them also with the fused epilogue
/// ([`Fusion::ScaleBiasActivation`], [`is_default_fused`]) for GEMMs with a bias, an activation
/// or row and column scales. (With the fused epilogue on every kernel, plain GEMMs whose
/// epilogue dominates, large M·N against small K, ran up to 30 % slower on an H100: a plain GEMM
/// keeps CUTLASS's.) And the eight gated-epilogue kernels ([`SM90_TILES_GATED`], three each for
/// bf16 and f16, two for e4m3 to bf16: an MLP's gate and up projections with SwiGLU or GeGLU in
/// one GEMM).
pub fn is_default(spec: &KernelSpec) -> bool {
    if spec.mixed_input.is_some() {
        return false;
    }
    if let Fusion::Gated { bias } = spec.fusion {
        // Every gated entry (bias of D's type) is in the default set.
        return bias == spec.d.ty
            && gated_types(spec)
            && SM90_TILES_GATED.iter().any(|&(tile, cluster, schedule)| {
                (tile, cluster, schedule) == (spec.tile, spec.cluster, spec.kernel_schedule)
            });
    }
    if let Fusion::BiasActivationAux { bias } = spec.fusion {
        // The bf16 entries with a bias of D's type (training in bf16).
        return bias == spec.d.ty && spec.d.ty == DataType::Bf16 && aux_epilogue_tile(spec);
    }
    let tile = is_default_16bit(spec)
        || is_default_grouped(spec)
        || is_default_fp8(spec)
        || is_default_menu(spec)
        || is_unaligned_output(spec);
    tile && match spec.fusion {
        Fusion::LinearCombination => true,
        fused => fused_epilogue(spec) == Some(fused) && is_default_fused(spec),
    }
}

/// The grouped kernels of the default set: [`SM90_TILES_GROUPED_16BIT`] for bf16 and f16 (with
/// [`SM90_TILES_GROUPED_16BIT_SWAPPED`] for those with a column-major D),
/// [`SM90_TILES_GROUPED_FP8`] for e4m3 (and [`SM90_TILES_GROUPED_FP8_SWAPPED`]), [`SM90_TILES_GROUPED_FP8_BLOCKWISE`] for e4m3 with
/// blockwise scales and a bf16 output.
fn is_default_grouped(spec: &KernelSpec) -> bool {
    let tiles = match spec.a.ty {
        DataType::Bf16 | DataType::F16 if spec.d.layout == Layout::ColumnMajor => {
            SM90_TILES_GROUPED_16BIT_SWAPPED
        }
        DataType::Bf16 | DataType::F16 => SM90_TILES_GROUPED_16BIT,
        _ if spec.blockwise.is_some() && spec.d.ty == DataType::Bf16 => {
            SM90_TILES_GROUPED_FP8_BLOCKWISE
        }
        _ if spec.blockwise.is_some() => &[],
        _ if spec.d.layout == Layout::ColumnMajor => SM90_TILES_GROUPED_FP8_SWAPPED,
        _ => SM90_TILES_GROUPED_FP8,
    };
    spec.kernel_schedule.is_grouped()
        && tiles.iter().any(|t| {
            (t.tile, t.cluster, t.schedule) == (spec.tile, spec.cluster, spec.kernel_schedule)
        })
}

/// The tiles of the default set that also come with the fused epilogue: per 16-bit type the
/// 128x256 cooperative kernels (persistent, 2x1x1, and stream-K) for large problems, 128x128
/// cooperative for M = 128-512, 128x144 cooperative (2x1x1) where wider tiles leave a wave short,
/// the 64x128 and 64x64 (1x2x1) pingpong for smaller M (bf16 also the swapped 64x8 pingpong for
/// decode); bf16 also the 64x64, 64x96 and 64x128 pingpong tiles with a 2x1x1 cluster, the
/// swapped 64x16 pingpong and 128x176 cooperative; FP8 tensor-wise the sliced 128x256, 128x128 and 64x128 cooperative and pingpong
/// kernels and the swapped 64x8; FP8 blockwise its one kernel. The 16-bit ones are the tiles the
/// plain heuristic picks for most of `bench/shapes-broad.tsv` (a fused plan chooses among these
/// only: the shapes whose plain tile has no twin pay for it).
pub fn is_default_fused(spec: &KernelSpec) -> bool {
    let stream_k = spec.tile_scheduler == TileScheduler::StreamK;
    let pingpong = matches!(
        spec.kernel_schedule,
        KernelSchedule::TmaWarpSpecializedPingpong
            | KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap
    );
    let row_major = spec.d.layout == Layout::RowMajor;
    let tn = (spec.a.layout, spec.b.layout) == AB_LAYOUTS[0];
    if spec.arch != Arch::Sm90a || !tn || spec.d.ty == DataType::F32 {
        return false;
    }
    match (spec.a.ty, spec.tile, spec.cluster) {
        (DataType::Bf16 | DataType::F16, [128, 256, 64], [2, 1, 1]) => row_major,
        (DataType::Bf16 | DataType::F16, [128, 128, 64], [1, 2, 1]) => row_major && !stream_k,
        (DataType::Bf16 | DataType::F16, [64, 128, 64], [1, 2, 1]) => row_major && pingpong,
        (DataType::Bf16 | DataType::F16, [64, 64, 64], [1, 2, 1]) => row_major && pingpong,
        (DataType::Bf16 | DataType::F16, [128, 144, 64], [2, 1, 1]) => row_major && !stream_k,
        (DataType::Bf16, [64, 8, 64], [1, 2, 1]) => !row_major && pingpong,
        // The bf16 tiles the plain heuristic takes on 24 of the 26 broad shapes whose fused plan
        // ran another tile (H100, 2026-12-07: 0.84x cuBLASLt's fused matmul there, against 0.99x
        // where the fused plan kept the plain tile).
        (DataType::Bf16, [64, 64 | 96 | 128, 64], [2, 1, 1]) => row_major && pingpong,
        (DataType::Bf16, [64, 16, 64], [2, 1, 1]) => !row_major && pingpong,
        (DataType::Bf16, [128, 176, 64], [1, 2, 1]) => row_major && !stream_k && !pingpong,
        (DataType::E4M3, [128, 256, 128] | [128, 128, 128], [1, 2, 1]) => row_major && !stream_k,
        (DataType::E4M3, [64, 128, 128], [1, 2, 1]) => row_major && pingpong,
        (DataType::E4M3, [64, 8, 128], [1, 2, 1]) => !row_major && pingpong,
        _ => false,
    }
}

/// The fused epilogue ([`Fusion::ScaleBiasActivation`], with a bias of D's type) that a kernel
/// of this kind takes, or `None` where its epilogue cannot (no TMA epilogue over one CTA's tile,
/// integer or block-scaled outputs).
pub fn fused_epilogue(spec: &KernelSpec) -> Option<Fusion> {
    let fused = Fusion::ScaleBiasActivation { bias: spec.d.ty };
    KernelSpec {
        fusion: fused,
        ..*spec
    }
    .validate()
    .ok()
    .map(|()| fused)
}

/// The tiles that come with the gated epilogue ([`Fusion::Gated`]), all in the default set. For
/// bf16 and f16: 128x256 cooperative (2x1x1) for MLPs of many tokens, 128x128 cooperative (1x2x1)
/// where 128x256 tiles leave a wave short, 64x128 pingpong (1x2x1) for few tokens. For e4m3 to
/// bf16 (tensor-wise or rowwise scales), on this crate's overlapped-promotion main loops: 128x128
/// cooperative (2x1x1, what a plain e4m3 GEMM takes for an MLP's gate and up projections from
/// 256 to 2048 tokens) and 64x128 pingpong (1x2x1) for few tokens. Persistent scheduler,
/// `NoSmemWarpSpecialized` epilogue.
pub const SM90_TILES_GATED: &[([u32; 3], [u32; 3], KernelSchedule)] = &[
    (
        [128, 256, 64],
        [2, 1, 1],
        KernelSchedule::TmaWarpSpecializedCooperative,
    ),
    (
        [128, 128, 64],
        [1, 2, 1],
        KernelSchedule::TmaWarpSpecializedCooperative,
    ),
    (
        [64, 128, 64],
        [1, 2, 1],
        KernelSchedule::TmaWarpSpecializedPingpong,
    ),
    (
        [128, 128, 128],
        [2, 1, 1],
        KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap,
    ),
    (
        [64, 128, 128],
        [1, 2, 1],
        KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap,
    ),
];

/// Whether a kernel's types take the gated twin: bf16 or f16 throughout, or e4m3 inputs with a
/// bf16 output (the FP8 pair the default set builds); D's rows aligned as A's (16 bytes).
fn gated_types(spec: &KernelSpec) -> bool {
    let types = match (spec.a.ty, spec.b.ty, spec.d.ty) {
        (DataType::E4M3, DataType::E4M3, DataType::Bf16) => true,
        (a, b, d) => SM90_16BIT_INPUTS.contains(&a) && b == a && d == a,
    };
    types && spec.d.align * spec.d.ty.bits() == spec.a.align * spec.a.ty.bits()
}

/// The gated twin of a CUTLASS-epilogue kernel whose tile is one of [`SM90_TILES_GATED`]: the
/// same main loop with [`Fusion::Gated`] (a bias of D's type) and the epilogue without shared
/// memory; `None` for other kernels and where the gated rules do not hold.
pub fn gated_epilogue(spec: &KernelSpec) -> Option<KernelSpec> {
    let listed = SM90_TILES_GATED.iter().any(|&(tile, cluster, schedule)| {
        (tile, cluster, schedule) == (spec.tile, spec.cluster, spec.kernel_schedule)
    });
    if !listed || spec.fusion != Fusion::LinearCombination || !gated_types(spec) {
        return None;
    }
    let twin = KernelSpec {
        fusion: Fusion::Gated { bias: spec.d.ty },
        epilogue_schedule: EpilogueSchedule::NoSmemWarpSpecialized,
        ..*spec
    };
    twin.validate().ok().map(|()| twin)
}

/// The tiles that come with the auxiliary-output epilogue ([`Fusion::BiasActivationAux`]: a
/// Linear layer's bias and activation that also writes the pre-activation value, for a backward
/// pass), for bf16 and f16 TN with a row-major D of the input type: 128x256 cooperative (2x1x1)
/// for many tokens, 128x128 cooperative (1x2x1) where 128x256 tiles leave a wave short, 64x128
/// pingpong (1x2x1) for few tokens; persistent scheduler. The bf16 ones are in the default set.
/// (The 16-bit tiles of [`SM90_TILES_GATED`], its first three.)
pub const SM90_TILES_AUX: &[([u32; 3], [u32; 3], KernelSchedule)] = SM90_TILES_GATED.split_at(3).0;

/// Whether a kernel's tile, cluster and schedule are one of [`SM90_TILES_AUX`].
fn aux_epilogue_tile(spec: &KernelSpec) -> bool {
    SM90_TILES_AUX.iter().any(|&(tile, cluster, schedule)| {
        (tile, cluster, schedule) == (spec.tile, spec.cluster, spec.kernel_schedule)
    })
}

/// The auxiliary-output twin of a CUTLASS-epilogue kernel whose tile is one of
/// [`SM90_TILES_AUX`]: bf16 or f16 TN, persistent, C and D row-major of the input type with
/// 16-byte rows; [`Fusion::BiasActivationAux`] with a bias of D's type. `None` for other kernels.
pub fn aux_epilogue(spec: &KernelSpec) -> Option<KernelSpec> {
    let types = SM90_16BIT_INPUTS.contains(&spec.a.ty)
        && spec.b.ty == spec.a.ty
        && spec.c.ty == spec.a.ty
        && spec.d.ty == spec.a.ty
        && spec.d.align * spec.d.ty.bits() == 128;
    let tn = (spec.a.layout, spec.b.layout) == AB_LAYOUTS[0];
    if !aux_epilogue_tile(spec)
        || spec.fusion != Fusion::LinearCombination
        || spec.tile_scheduler != TileScheduler::Persistent
        || !types
        || !tn
        || spec.d.layout != Layout::RowMajor
    {
        return None;
    }
    let twin = KernelSpec {
        fusion: Fusion::BiasActivationAux { bias: spec.d.ty },
        ..*spec
    };
    twin.validate().ok().map(|()| twin)
}

/// The f32-bias twin ([`Fusion::ScaleBiasActivation`] with `bias: F32`: a bias added in f32
/// without being rounded to D's type first) of a default fused kernel on the large and the small
/// problems' tiles: per 16-bit type 128x256 cooperative (2x1x1) and 64x128 pingpong (1x2x1); for
/// e4m3 to bf16 (tensor-wise or rowwise scales) 128x128 cooperative and 64x128 pingpong (1x2x1);
/// persistent, row-major D. Not in the default set (a bias of D's type is what checkpoints hold;
/// the decode GEMV and the separate epilogue pass take an f32 bias without them): a plan with
/// [`crate::families`]' `gpu-tests` preset or these names in `CUTLASS_RS_KERNELS` computes an f32
/// bias in the kernel. `None` for other kernels.
pub fn f32_bias_epilogue(spec: &KernelSpec) -> Option<KernelSpec> {
    let Fusion::ScaleBiasActivation { bias } = spec.fusion else {
        return None;
    };
    if bias != spec.d.ty
        || !is_default(spec)
        || spec.d.layout != Layout::RowMajor
        || spec.tile_scheduler != TileScheduler::Persistent
        || spec.blockwise.is_some()
    {
        return None;
    }
    let pingpong = matches!(
        spec.kernel_schedule,
        KernelSchedule::TmaWarpSpecializedPingpong
            | KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap
    );
    let tile = match (spec.a.ty, spec.tile, spec.cluster) {
        (DataType::Bf16 | DataType::F16, [128, 256, 64], [2, 1, 1]) => !pingpong,
        (DataType::Bf16 | DataType::F16, [64, 128, 64], [1, 2, 1]) => pingpong,
        (DataType::E4M3, [128, 128, 128], [1, 2, 1]) => !pingpong,
        (DataType::E4M3, [64, 128, 128], [1, 2, 1]) => pingpong,
        _ => false,
    };
    let twin = KernelSpec {
        fusion: Fusion::ScaleBiasActivation {
            bias: DataType::F32,
        },
        ..*spec
    };
    (tile && twin.validate().is_ok()).then_some(twin)
}

/// Whether `spec` is the f32-bias twin of a default fused kernel ([`f32_bias_epilogue`]).
pub fn is_f32_bias_twin(spec: &KernelSpec) -> bool {
    spec.fusion
        == (Fusion::ScaleBiasActivation {
            bias: DataType::F32,
        })
        && f32_bias_epilogue(&KernelSpec {
            fusion: Fusion::ScaleBiasActivation { bias: spec.d.ty },
            ..*spec
        }) == Some(*spec)
}

/// The kernels of [`SM90_MENU_16BIT_UNALIGNED_OUTPUT`] (all in the default set: GPT-2's and
/// other vocabularies of an odd size are common).
fn is_unaligned_output(spec: &KernelSpec) -> bool {
    spec.arch == Arch::Sm90a
        && SM90_16BIT_INPUTS.contains(&spec.a.ty)
        && spec.d.ty == spec.a.ty
        && spec.d.align == UNALIGNED_OUTPUT_ALIGNMENT
}

/// The small-problem kernels of the default set: for f16 and bf16 TN (output of the input type),
/// the 64x128x64 pingpong kernels (clusters 1x2x1 and 2x1x1), the 64x96x64 pingpong kernel with a 2x1x1 cluster, the 64x64x64
/// pingpong kernels (clusters 2x1x1 and 1x2x1), stream-K at 128x256x64, the swapped stream-K
/// kernels with 16- and 64-wide N tiles and the swapped 64x8x64 (cluster 1x2x1) and 64x16x64
/// (2x1x1) pingpong kernels, which the H200 and H100 measurements of `docs/performance.md` found
/// fastest for decode (M = 8-32: 64x16 where 64x8's tiles spill into a second wave) and M = 128
/// problems, the 128x128x64 cooperative kernel (M = 128 with a large N), and
/// the 128x176x64 cooperative kernel (N = 2112 and other multiples of 176 at large M).
fn is_default_menu(spec: &KernelSpec) -> bool {
    let tn_16bit = spec.arch == Arch::Sm90a
        && SM90_16BIT_INPUTS.contains(&spec.a.ty)
        && spec.d.ty == spec.a.ty
        && (spec.a.layout, spec.b.layout) == AB_LAYOUTS[0];
    let stream_k = spec.tile_scheduler == TileScheduler::StreamK;
    tn_16bit
        && match (spec.tile, spec.d.layout) {
            ([64, 128, 64], Layout::RowMajor) | ([64, 64, 64], Layout::RowMajor) => {
                spec.kernel_schedule == PINGPONG && spec.epilogue_schedule == PINGPONG_EPI
            }
            ([64, 96, 64], Layout::RowMajor) => {
                spec.kernel_schedule == PINGPONG && spec.cluster == [2, 1, 1]
            }
            ([128, 256, 64], Layout::RowMajor) => stream_k,
            ([128, 176, 64], Layout::RowMajor) => spec.kernel_schedule == COOP,
            ([128, 144, 64], Layout::RowMajor) => {
                spec.kernel_schedule == COOP && spec.cluster == [2, 1, 1]
            }
            ([128, 128, 64], Layout::RowMajor) => {
                spec.kernel_schedule == COOP && spec.tile_scheduler == TileScheduler::Persistent
            }
            ([128, 16, 128], Layout::ColumnMajor) | ([128, 64, 128], Layout::ColumnMajor) => {
                stream_k
            }
            ([64, 8, 64], Layout::ColumnMajor) => spec.kernel_schedule == PINGPONG,
            ([64, 16, 64], Layout::ColumnMajor) => {
                spec.kernel_schedule == PINGPONG && spec.cluster == [2, 1, 1]
            }
            _ => false,
        }
}

/// The FP8 kernels of the default set: e4m3 x e4m3 to bf16, all with this crate's
/// overlapped-promotion main loops (same results as CUTLASS's f32-promoting kernels, bit for bit,
/// faster; CUTLASS's own kernels are in the catalog and the `gpu-tests` preset, for comparison and
/// pinning): blockwise (1x128 x 128x128 scales) at 128x128x128, persistent and stream-K (few
/// output tiles over a long K: decode-size M on weights of a few thousand rows); tensor-wise (scales folded into
/// alpha) at 128x128x128 (clusters 1x2x1 and 2x1x1), 128x144x128 and the sliced 128x192x128 and
/// 128x256x128 (cooperative, cluster 1x2x1: large problems), 64x128x128 and 64x32x128 (1x2x1),
/// 64x96x128 and 64x64x128 (2x1x1) pingpong (M = 32-512), and for decode-size M the swapped
/// 64x8x128 (1x2x1), 64x16x128 and 64x32x128 (2x1x1) pingpong and 128x16x128 stream-K kernels. The additions to the suite's menu were measured on
/// `bench/shapes-broad.tsv` (H100, `bench/training/broad-bf16-e4m3-h100.csv`): the best kernel
/// per shape went from 0.951x to 0.972x cuBLASLt and the shapes below 0.85x from 21 to 9.
fn is_default_fp8(spec: &KernelSpec) -> bool {
    let e4m3_bf16 = spec.arch == Arch::Sm90a
        && (spec.a.ty, spec.b.ty, spec.d.ty) == (DataType::E4M3, DataType::E4M3, DataType::Bf16);
    let persistent = spec.tile_scheduler == TileScheduler::Persistent;
    let pingpong = spec.kernel_schedule == KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap;
    let cooperative =
        spec.kernel_schedule == KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap;
    e4m3_bf16
        && match (spec.tile, spec.cluster, spec.d.layout) {
            ([128, 128, 128], [1, 2, 1], Layout::RowMajor) => {
                (persistent && cooperative)
                    || spec.kernel_schedule
                        == KernelSchedule::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap
            }
            ([128, 128, 128], [2, 1, 1], Layout::RowMajor) => persistent && cooperative,
            ([128, 144, 128] | [128, 192, 128] | [128, 256, 128], [1, 2, 1], Layout::RowMajor) => {
                persistent && cooperative
            }
            ([128, 16, 128], [1, 1, 1], Layout::ColumnMajor) => {
                cooperative && spec.tile_scheduler == TileScheduler::StreamK
            }
            ([64, 128, 128], [1, 2, 1], Layout::RowMajor)
            | ([64, 96, 128], [2, 1, 1], Layout::RowMajor)
            | ([64, 64, 128], [2, 1, 1], Layout::RowMajor)
            | ([64, 32, 128], [1, 2, 1], Layout::RowMajor)
            | ([64, 8, 128], [1, 2, 1], Layout::ColumnMajor)
            | ([64, 32, 128], [2, 1, 1], Layout::ColumnMajor)
            | ([64, 16, 128], [2, 1, 1], Layout::ColumnMajor) => persistent && pingpong,
            _ => false,
        }
}

fn is_default_16bit(spec: &KernelSpec) -> bool {
    spec.arch == Arch::Sm90a
        && spec.tile_scheduler == TileScheduler::Persistent
        && SM90_16BIT_INPUTS.contains(&spec.a.ty)
        && spec.kernel_schedule == SM90_TILES_16BIT[0].schedule
        && spec.tile == SM90_TILES_16BIT[0].tile
        && spec.cluster == SM90_TILES_16BIT[0].cluster
        && (spec.d.ty == spec.a.ty
            || (spec.d.ty == DataType::F32
                && (spec.a.layout, spec.b.layout) == (Layout::RowMajor, Layout::ColumnMajor)))
}

/// A kernel-name filter, like CUTLASS's `CUTLASS_LIBRARY_KERNELS`: comma-separated patterns; a name
/// is selected when any pattern matches it. A pattern with `*` or `?` is a glob over the whole name;
/// a pattern without them matches any name that contains it; a preset's name (`default`,
/// `gpu-tests`: [`Preset`]) selects its entries.
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

    /// The presets among the patterns (`default`, `gpu-tests`: [`Preset`]).
    pub fn presets(&self) -> Vec<Preset> {
        self.patterns
            .iter()
            .filter_map(|p| Preset::parse(p))
            .collect()
    }

    /// Whether `name` is selected by a pattern other than a preset.
    pub fn matches(&self, name: &str) -> bool {
        self.patterns
            .iter()
            .filter(|p| Preset::parse(p).is_none())
            .any(|p| {
                if p.contains('*') || p.contains('?') {
                    glob_match(p.as_bytes(), name.as_bytes())
                } else {
                    name.contains(p.as_str())
                }
            })
    }

    /// Whether the filter selects this entry: a preset holds it or a pattern matches its name.
    pub fn selects(&self, spec: &KernelSpec) -> bool {
        self.presets().iter().any(|p| p.contains(spec)) || self.matches(&spec.name())
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

/// Selects catalog entries: those for one of `archs` that `filter` selects, or, with an empty
/// filter, the default set for those architectures. Presets add their entries to what the other
/// patterns select (`default,*e5m2*`).
pub fn select(archs: &[Arch], filter: &NameFilter) -> Vec<KernelSpec> {
    all()
        .into_iter()
        .filter(|s| archs.contains(&s.arch))
        .filter(|s| {
            if filter.is_empty() {
                is_default(s)
            } else {
                filter.selects(s)
            }
        })
        .collect()
}

/// Looks a kernel up by its exact name.
pub fn find(name: &str) -> Option<KernelSpec> {
    all().into_iter().find(|s| s.name() == name)
}

/// The MMA instruction an entry's PTX must contain: `wgmma.mma_async...{acc}.{a}.{b}` (SM90, a
/// glob with `*`),
/// `tcgen05.mma[.sp].cta_group::{1,2}.kind::{kind}` (SM100) or `mma.sync...kind::{kind}` (SM120), with
/// the kind from the type row (Tables 1–3) and, for the mxf4/nvf4 rows, the dispatch policy.
pub fn expected_mma(spec: &KernelSpec) -> String {
    // A grouped kernel runs its dense twin's MMA.
    let kind = match spec
        .kernel_schedule
        .dense_twin()
        .unwrap_or(spec.kernel_schedule)
    {
        KernelSchedule::Sm100Mxf8f6f4OneSm
        | KernelSchedule::Sm100Mxf8f6f4TwoSm
        | KernelSchedule::Sm120Mxf8f6f4Cooperative
        | KernelSchedule::Sm120Mxf8f6f4Pingpong => "mxf8f6f4".to_string(),
        KernelSchedule::Sm100Mxf4OneSm | KernelSchedule::Sm100Mxf4TwoSm => "mxf4".to_string(),
        KernelSchedule::Sm100Nvf4OneSm | KernelSchedule::Sm100Nvf4TwoSm => "mxf4nvf4".to_string(),
        KernelSchedule::Sm100SparseMxf8f6f4OneSm | KernelSchedule::Sm100SparseMxf8f6f4TwoSm => {
            "mxf8f6f4".to_string()
        }
        KernelSchedule::Sm100SparseNvf4OneSm | KernelSchedule::Sm100SparseNvf4TwoSm => {
            "mxf4nvf4".to_string()
        }
        KernelSchedule::Sm100SparseMxf4OneSm | KernelSchedule::Sm100SparseMxf4TwoSm => {
            "mxf4".to_string()
        }
        // The weight converted to the activations' 16-bit type before the MMA.
        KernelSchedule::Sm100MixedInputOneSm | KernelSchedule::Sm100MixedInputTwoSm => {
            "f16".to_string()
        }
        _ => match spec.origin.and_then(|o| type_row(o.type_table, o.type_row)) {
            Some(row) => row.kind.ptx().to_string(),
            None => String::new(),
        },
    };
    match spec.arch {
        // `wgmma.mma_async.sync.aligned.m64n{N}k{K}.{acc}.{a}.{b}` (a glob: N and K vary). A
        // mixed-input kernel converts its narrow operand to the wide one's type: its MMA is the
        // wide type's.
        Arch::Sm90a => {
            let a = if spec.mixed_input.is_some() {
                spec.b.ty
            } else {
                spec.a.ty
            };
            format!(
                "wgmma.mma_async.sync.aligned.m64n*k*.{}.{}.{}*",
                spec.accumulator.short_name(),
                a.short_name(),
                spec.b.ty.short_name()
            )
        }
        Arch::Sm100a => format!(
            "tcgen05.mma{}.cta_group::{}.kind::{kind}",
            if spec.op_class.is_sparse() { ".sp" } else { "" },
            spec.mma_sms()
        ),
        _ => format!("mma.sync.aligned.kind::{kind}"),
    }
}
