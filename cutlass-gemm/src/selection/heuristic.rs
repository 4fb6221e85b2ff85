//! Kernel selection without running anything: a time estimate for each candidate kernel from the
//! problem's shape, the kernel's tile, schedule and tile scheduler, and the device's SM count.
//!
//! The estimate is the larger of a compute time and a memory time, plus a fixed cost:
//!
//! - compute: the output tiles (padded to whole tiles, which charges small problems for the rows a
//!   tile wastes) over the SMs, in whole waves for the data-parallel scheduler and evenly spread for
//!   stream-K, each tile at a throughput that falls with the tile's area (narrow tiles issue more
//!   shared-memory traffic per MMA);
//! - streaming: what the busiest SM reads for its tiles' A and B panels at what one CTA can pull
//!   (few output tiles cannot use the whole bandwidth: why stream-K and the operand swap help
//!   decode-size problems);
//! - memory: every byte of A, B and D once at the DRAM bandwidth;
//! - L2: every tile's A and B panels through the L2 (what many narrow tiles that re-read the long
//!   side's panels are bound by), less what a cluster's peers share by multicast;
//! - fixed: launch and epilogue, more for stream-K's workspace reset and reduction.
//!
//! The constants are for Hopper (H100/H200), fitted by `tools/fit_heuristic.py` to the profiler's
//! exhaustive runs over `bench/shapes.tsv` (`cutlass-profiler profile --kernels all`, the
//! CSVs in `bench/training/`): the bf16 menu on an H200 and an H100, the e4m3 menu on an H200 (CUTLASS's
//! f32-promoting kernels) and an H100 (with this crate's overlapped-promotion kernels), the tf32
//! and s8 menus on an H100, the bf16 and e4m3 menus with the 2026-11-24 tiles (128x176,
//! 64x96, 128x144) on an H100, their M = 16 and 128 shapes again with the swapped 64x8 and
//! 64x16 pingpong tiles, the e4m3 M = 4096 shapes with the sliced 128x192 and 128x256 tiles, and
//! the 140 shapes of `bench/shapes-broad.tsv` (eight model families; the constants come from a fit
//! that left the Gemma-2 and Llama-3 families out, which then scored as well as the rest:
//! `docs/performance.md`); the 2026-12-07 e4m3 runs with the current menu (the broad set and three
//! families outside it) are scored, not fitted. Tile efficiency is linear in log2(tile area) between
//! fitted anchors, times a factor for CuTe's extended wgmma shapes. Ties of the estimate
//! (memory-bound problems, and kernels that differ only in their cluster) go to the smaller tile,
//! then to fewer idle CTAs, then for the FP8 cooperative two-CTA clusters to the measured raster
//! (`raster_rank`), then to the cluster whose CTAs share the operand streamed from DRAM
//! (`unshared_panel`).
//! The script scores the picks per type and bf16 leave-one-shape-out (`docs/performance.md`).
//! [`crate::selection::tune`] measures instead of estimating. Automatic selection
//! never takes an FP8 fast-accumulation kernel (less precise): name it to use it; and it never
//! takes a CUTLASS f32-promoting FP8 kernel whose overlapped-promotion twin (same results, bit for
//! bit, faster) is built.

use cutlass_gemm_catalog::{DataType, KernelSchedule, KernelSpec, TileScheduler};

use crate::ffi::{Kernel, ScheduleHints};

/// Dense bf16 tensor-core FLOP per microsecond per SM at the sustained clock (989 TFLOP/s over
/// 132 SMs on an H100/H200 SXM).
const FLOP_PER_US_PER_SM: f64 = 7.5e6;
/// Sustained DRAM bandwidth in bytes per microsecond.
const BYTES_PER_US: f64 = 3.634e6;
/// The DRAM bandwidth of the raster model ([`default_schedule`]) and of the staging and scalar
/// epilogue costs, bytes per microsecond (measured copy bandwidth of an H100).
const COPY_BYTES_PER_US: f64 = 3.36e6;
/// What one CTA streams from DRAM at most, bytes per microsecond: why a few output tiles cannot
/// pull the whole bandwidth (decode-size problems), and what stream-K and the operand swap fix.
const CTA_BYTES_PER_US: f64 = 9.868e4;
/// What the L2 delivers to the SMs, bytes per microsecond (12 TB/s on an H100): every CTA reads its
/// A and B panels through it, so many narrow tiles that each re-read a panel of the long side are
/// bound by it (H100, 64 x 4096 x 4096 bf16: the swapped 64x16 tile reads the weights four times
/// over, 24.9 us against 17.3 us for 64x64; `bench/training/bf16-mid-h100.csv`).
const L2_BYTES_PER_US: f64 = 1.206e7;
/// Launch and epilogue, microseconds.
const FIXED_US: f64 = 4.126;
/// Stream-K's extra fixed cost: the workspace reset and the reduction of partial tiles.
const STREAM_K_US: f64 = 17.51;
/// Stream-K's extra fixed cost for the FP8 kernels, fitted on the e4m3 data alone (a scan of
/// 6-17 us over the six e4m3 CSVs): 8 us picks the swapped 128x64 stream-K kernel at 128 x 7168 x
/// 16384 (48.5 us against the 64x128 pingpong kernel's 53.2 us in
/// bench/training/e4m3-m128-h100.csv, the same in the decode and 2026-11-24 CSVs),
/// and on the CSVs of the current menu changes no other pick; 10 us and more change none. (On the
/// 2026-11-21 H100 CSV, whose menu lacks the 144- and 192-wide tiles, it takes stream-K 128x128
/// at 4096 x 2112 x 7168, 0.82 of the best there; the current menu's 128x192 undercuts both.)
const STREAM_K_FP8_US: f64 = 8.466;
/// Stream-K FP8 kernels (f32-promoting main loops) run this much slower than their even share of
/// the work predicts: measured on an H100 (e4m3, 2026-11-24), the persistent 128x128 overlapped
/// kernel beat its stream-K twin by 1-5 % at 8192³, 4096 x 7168 x 16384 and 4096 x 8192 x 28672,
/// where the share saves 3 % of a wave. The picks on the fitted data are the same from 1.04 to 1.1.
const STREAM_K_FP8_FACTOR: f64 = 1.086;
/// Extra main-loop cost of a tile's padded rows, per unit of padded fraction.
const PADDING_PENALTY: f64 = 1.445;

/// Main-loop efficiency (fraction of the peak) at tile areas of 512, 1024, 2048, 4096, 8192,
/// 16384 and 32768 elements; between them linear in log2(area), beyond them the end values (a
/// 128x176 tile sits between 128x128 and 128x256; the swapped 64x8 decode tile is the smallest).
const TILE_EFFICIENCY: [f64; 7] = [0.213, 0.312, 0.413, 0.496, 0.498, 0.618, 0.64];
/// Efficiency factor of CuTe's extended wgmma shapes ([`KernelSpec::uses_extended_wgmma_shape`]:
/// the 144- and 176-wide tiles, whose epilogue also stores 16-column subtiles).
const EXTENDED_SHAPE_EFFICIENCY: f64 = 0.963;

/// Fraction of the peak a tile sustains in its main loop.
fn tile_efficiency(spec: &KernelSpec) -> f64 {
    let [tm, tn, _] = spec.tile;
    // Position on the anchors: 0 at 512 elements, 6 at 32768.
    let last = TILE_EFFICIENCY.len() - 1;
    let x = (((tm * tn) as f64).log2() - 9.0).clamp(0.0, last as f64);
    let i = (x.floor() as usize).min(last - 1);
    let f = x - i as f64;
    let base = TILE_EFFICIENCY[i] * (1.0 - f) + TILE_EFFICIENCY[i + 1] * f;
    let schedule = match spec.kernel_schedule {
        KernelSchedule::TmaWarpSpecialized => 0.756,
        KernelSchedule::TmaWarpSpecializedPingpong
        | KernelSchedule::TmaWarpSpecializedPingpongFp8FastAccum
        | KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap => 0.846,
        _ => 1.0,
    };
    let extended = if spec.uses_extended_wgmma_shape() {
        EXTENDED_SHAPE_EFFICIENCY
    } else {
        1.0
    };
    base * schedule * extended
}

/// MMA throughput of the input type relative to bf16.
fn type_speed(t: DataType) -> f64 {
    match t.bits() {
        8 => 2.0,
        32 => 0.5,
        _ => 1.0,
    }
}

/// Output tiles in whole clusters: a cluster's CTAs beyond the problem still take SMs (a 2x1
/// cluster on a 16-row problem idles half of them).
fn cluster_tiles(spec: &KernelSpec, m: usize, n: usize, batch: usize) -> usize {
    let [tm, tn, _] = spec.tile.map(|v| v as usize);
    let [cm, cn, _] = spec.cluster.map(|v| v.max(1) as usize);
    m.div_ceil(tm).next_multiple_of(cm) * n.div_ceil(tn).next_multiple_of(cn) * batch.max(1)
}

/// The CTAs of a cluster dimension `c` that share a panel by multicast: peers exist only where the
/// problem has that many tiles across.
fn peers(tiles: usize, c: usize) -> usize {
    if tiles >= c {
        c
    } else {
        1
    }
}

/// Rows (or columns) of the long side's panel that each CTA reads for itself, on a lopsided
/// problem (one side of the output at least 8x the other: decode-size M); 0 otherwise. That
/// operand streams from DRAM once, the short one stays in the L2; a cluster whose CTAs along the
/// short side share the long operand's panel (TMA multicast) reads it once per cluster. The
/// tie-break of [`choose`] among kernels of equal estimates (memory-bound problems): measured on
/// an H100 (e4m3, 128 x 4096 x 4096), the 64x64 pingpong kernel takes 10.8 us with a 2x1x1
/// cluster and 11.9 us with 1x2x1; the cluster that pairs CTAs along the long side instead shares
/// the short operand, which gains nothing.
fn unshared_panel(spec: &KernelSpec, m: usize, n: usize) -> usize {
    if m.max(n) < 8 * m.min(n) {
        return 0;
    }
    let [tm, tn, _] = spec.tile.map(|v| v as usize);
    let [cm, cn, _] = spec.cluster.map(|v| v.max(1) as usize);
    if n >= m {
        tn / peers(m.div_ceil(tm), cm)
    } else {
        tm / peers(n.div_ceil(tn), cn)
    }
}

/// Estimated microseconds for an `m x n x k` (kernel view) problem of `batch` on `sms` SMs: the
/// largest of the compute time, the time the busiest CTA needs to stream its A and B panels, the
/// time to move every byte once from DRAM and the time for all tiles' panels through the L2, plus
/// fixed costs.
pub fn estimate_us(
    spec: &KernelSpec,
    m: usize,
    n: usize,
    k: usize,
    batch: usize,
    sms: usize,
) -> f64 {
    let [tm, tn, _] = spec.tile.map(|v| v as usize);
    let sms = sms.max(1);
    let bits = |t: DataType| t.bits() as usize;
    let tiles = cluster_tiles(spec, m, n, batch);
    // Rows of the last tile beyond M still cost MMA time, and more than their share: a tile
    // that is mostly padding runs its main loop at a lower rate (fitted: about twice the cost when
    // all rows but a few are padding).
    let padded = m.div_ceil(tm) * tm;
    let waste = 1.0 - m as f64 / padded as f64;
    let tile_us = (2 * tm * tn * k) as f64
        / (FLOP_PER_US_PER_SM * tile_efficiency(spec) * type_speed(spec.a.ty))
        * (1.0 + PADDING_PENALTY * waste);
    let tile_bytes = ((tm * bits(spec.a.ty) + tn * bits(spec.b.ty)) * k / 8) as f64;
    // In f64: with extents up to i32::MAX, a matrix's bits pass a usize.
    let bytes_of =
        |rows: usize, cols: usize, t: DataType| rows as f64 * cols as f64 * t.bits() as f64 / 8.0;
    let total_bytes =
        (bytes_of(m, k, spec.a.ty) + bytes_of(n, k, spec.b.ty) + bytes_of(m, n, spec.d.ty))
            * batch.max(1) as f64;
    let fp8 = matches!(spec.a.ty, DataType::E4M3 | DataType::E5M2);
    // Tiles per SM: whole waves for the data-parallel scheduler, an even share for stream-K.
    let (per_sm, fixed) = if spec.tile_scheduler == TileScheduler::StreamK {
        let stream_k = if fp8 { STREAM_K_FP8_US } else { STREAM_K_US };
        (tiles as f64 / sms as f64, FIXED_US + stream_k)
    } else {
        (tiles.div_ceil(sms) as f64, FIXED_US)
    };
    let compute = per_sm * tile_us;
    let stream = per_sm * tile_bytes / CTA_BYTES_PER_US;
    // Every tile's panels through the L2; a cluster's peers share (multicast) the panel they have
    // in common, where the problem has that many tiles across.
    let [cm, cn, _] = spec.cluster.map(|v| v.max(1) as usize);
    let (mt, nt) = (m.div_ceil(tm), n.div_ceil(tn));
    let panel_bits = (tm * bits(spec.a.ty)) as f64 / peers(nt, cn) as f64
        + (tn * bits(spec.b.ty)) as f64 / peers(mt, cm) as f64;
    let l2 = (mt * nt * batch.max(1)) as f64 * panel_bits * k as f64 / 8.0 / L2_BYTES_PER_US;
    let slow = if fp8 && spec.tile_scheduler == TileScheduler::StreamK {
        STREAM_K_FP8_FACTOR
    } else {
        1.0
    };
    compute.max(stream).max(total_bytes / BYTES_PER_US).max(l2) * slow
        + fixed
        + scalar_epilogue_us(spec, m, n, batch)
}

/// What an epilogue that stores each element itself (C and D of alignment below TMA's:
/// [`cutlass_gemm_catalog::catalog::SM90_MENU_16BIT_UNALIGNED_OUTPUT`]) adds: one more pass over D
/// at the DRAM bandwidth, not hidden behind the main loop. Enough that such a kernel is never
/// chosen where a TMA epilogue can store D in place, and less than copying D out and back.
fn scalar_epilogue_us(spec: &KernelSpec, m: usize, n: usize, batch: usize) -> f64 {
    if spec.d.align >= spec.d.ty.tma_alignment() {
        return 0.0;
    }
    m as f64 * n as f64 * batch.max(1) as f64 * spec.d.ty.bits() as f64 / 8.0 / COPY_BYTES_PER_US
}

/// Fixed cost of one staging copy (a launch and its tail), microseconds.
const STAGING_COPY_US: f64 = 3.0;

/// Microseconds of a plan's staging copies ([`crate::plans::staging`]): each staged input read
/// from the user's buffer and written padded, a staged D read back and written to the user's
/// buffer after the kernel, and a launch for each. A staged C counts only where it is read.
pub(crate) fn staging_us(plan: &crate::plans::staging::StagingPlan, c_read: bool) -> f64 {
    use crate::plans::staging::Slot;
    plan.staged
        .iter()
        .flatten()
        .filter(|s| c_read || s.slot != Slot::C)
        .map(|s| {
            // In f64: a padded copy of a long batch can reach past a usize in bytes.
            let elements = s.from.required_len() as f64 + s.to.required_len() as f64;
            elements * s.element_bytes as f64 / COPY_BYTES_PER_US + STAGING_COPY_US
        })
        .sum()
}

fn fast_accum(spec: &KernelSpec) -> bool {
    matches!(
        spec.kernel_schedule,
        KernelSchedule::TmaWarpSpecializedCooperativeFp8FastAccum
            | KernelSchedule::TmaWarpSpecializedPingpongFp8FastAccum
    )
}

/// What of the L2 (50 MB on an H100, 60 MB on an H200) an operand may take and still be read
/// from DRAM once, bytes: the raster model's threshold.
const L2_RESIDENT_BYTES: f64 = 30e6;

/// The raster model's view of the tile scheduler's work for `swizzle` and a raster along M
/// (`along_m`) or N: microseconds of main loop (tiles padded as CUTLASS's scheduler pads them, in
/// whole waves) and of DRAM traffic (an operand that does not stay in the L2 is read again for
/// every wave, as far as the wave's tiles span it), combined as the larger plus half the smaller
/// (they overlap, not perfectly).
fn raster_cost_us(
    spec: &KernelSpec,
    (m, n, k): (usize, usize, usize),
    along_m: bool,
    swizzle: usize,
    sms: usize,
) -> f64 {
    let [tm, tn, _] = spec.tile.map(|v| v as usize);
    let [cm, cn, _] = spec.cluster.map(|v| v.max(1) as usize);
    // CUTLASS rounds both tile counts up to whole swizzle groups of clusters; the padded tiles
    // run their main loop on nothing.
    let tiles_m = m.div_ceil(tm).next_multiple_of(swizzle * cm);
    let tiles_n = n.div_ceil(tn).next_multiple_of(swizzle * cn);
    let tiles = tiles_m * tiles_n;
    let wave = (sms / (cm * cn) * (cm * cn)).clamp(1, tiles);
    // A wave walks bands `swizzle` clusters wide: along M it touches `band` tile columns and as
    // many rows as the wave holds (all of them when it covers whole bands).
    let (rows, cols) = if along_m {
        let band = swizzle * cn;
        (
            tiles_m.min(wave.div_ceil(band)),
            band * wave.div_ceil(band * tiles_m).max(1),
        )
    } else {
        let band = swizzle * cm;
        (
            band * wave.div_ceil(band * tiles_n).max(1),
            tiles_n.min(wave.div_ceil(band)),
        )
    };
    let waves = tiles as f64 / wave as f64;
    let (ea, eb) = (spec.a.ty.bits() as f64 / 8.0, spec.b.ty.bits() as f64 / 8.0);
    let traffic = |whole: f64, per_wave: f64| {
        if whole <= L2_RESIDENT_BYTES {
            whole
        } else {
            (waves * per_wave).max(whole)
        }
    };
    let bytes = traffic((m * k) as f64 * ea, (rows * tm * k) as f64 * ea)
        + traffic((n * k) as f64 * eb, (cols * tn * k) as f64 * eb);
    let memory = bytes / COPY_BYTES_PER_US;
    let compute = tiles.div_ceil(wave) as f64 * (2 * tm * tn * k) as f64
        / (FLOP_PER_US_PER_SM * 0.8 * type_speed(spec.a.ty));
    compute.max(memory) + 0.5 * compute.min(memory)
}

/// The tile-scheduler hints a plan starts with (what [`crate::Gemm::schedule`] reports until
/// [`crate::Gemm::with_schedule`] replaces them), for the kernel's view of the problem
/// (`m x n x k`) on `sms` SMs.
///
/// The overlapped-promotion FP8 cooperative kernels (tensor-wise) with a two-CTA cluster raster
/// across their cluster: along M for a 1x2x1 cluster (its CTAs share A), along N for a 2x1x1 one,
/// and take the smallest swizzle (1, 2, 4, 8) whose cost in [`raster_cost_us`] is within 2 % of the
/// least, if it saves at least a tenth of swizzle 1's cost. Measured on an H100 (e4m3 -> bf16,
/// `bench/training/e4m3-schedules-h100.csv`, 4 kernels x 6 shapes x 9 schedules): these
/// hints reach 0.997 of the best schedule of each pair (worst 0.984), CUTLASS's defaults 0.941
/// (worst 0.801); at 8192³ the 128x128 1x2x1 kernel goes from 0.84x to 0.96x of cuBLASLt with
/// swizzle 4. Everything else keeps CUTLASS's defaults (the 16-bit 128x256 kernels measured
/// within noise of their best schedule with them).
pub(crate) fn default_schedule(
    spec: &KernelSpec,
    (m, n, k): (usize, usize, usize),
    sms: i32,
) -> ScheduleHints {
    let clustered = match spec.cluster {
        [1, 2, 1] => Some(true),
        [2, 1, 1] => Some(false),
        _ => None,
    };
    let Some(along_m) = clustered.filter(|_| {
        spec.kernel_schedule == KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap
    }) else {
        return ScheduleHints::default();
    };
    let sms = sms.max(1) as usize;
    let cost = |s: usize| raster_cost_us(spec, (m.max(1), n.max(1), k.max(1)), along_m, s, sms);
    let least = [1, 2, 4, 8]
        .map(cost)
        .into_iter()
        .fold(f64::INFINITY, f64::min);
    let swizzle = [1u8, 2, 4, 8]
        .into_iter()
        .find(|&s| cost(s as usize) <= 1.02 * least)
        .unwrap_or(1);
    // A swizzle that saves less than a tenth of the cost buys nothing measurable, and a larger one
    // ran up to 3 % slower where the model saw DRAM at half the main loop's time (4096 x 8192 x
    // 28672: swizzle 4 1298 TFLOP/s, 1 1343).
    let swizzle = if cost(swizzle as usize) > 0.9 * cost(1) {
        1
    } else {
        swizzle
    };
    ScheduleHints {
        swizzle,
        raster: if along_m { 1 } else { 2 },
        splits: 0,
    }
}

/// The overlapped-promotion schedule that computes what a CUTLASS FP8 schedule computes, bit for
/// bit, faster (measured: `docs/performance.md`).
fn overlapped(schedule: KernelSchedule) -> Option<KernelSchedule> {
    match schedule {
        KernelSchedule::TmaWarpSpecializedCooperative => {
            Some(KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap)
        }
        KernelSchedule::TmaWarpSpecializedPingpong => {
            Some(KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap)
        }
        KernelSchedule::TmaWarpSpecializedCooperativeFp8Blockwise => {
            Some(KernelSchedule::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap)
        }
        _ => None,
    }
}

/// Whether `kernels` has the overlapped-promotion twin of this CUTLASS FP8 kernel (which then
/// takes its place).
fn superseded<'a>(spec: &KernelSpec, mut kernels: impl Iterator<Item = &'a KernelSpec>) -> bool {
    let fp8 = matches!(spec.a.ty, DataType::E4M3 | DataType::E5M2);
    match overlapped(spec.kernel_schedule) {
        Some(s) if fp8 => {
            let mut twin = *spec;
            twin.kernel_schedule = s;
            kernels.any(|k| *k == twin)
        }
        _ => false,
    }
}

/// Rows of M (the kernel's view) from which the FP8 cooperative kernels of a two-CTA cluster
/// prefer 1x2x1 (raster along M) to 2x1x1 (raster along N) where their estimates tie
/// ([`raster_rank`]).
const RASTER_ALONG_M_FROM_ROWS: usize = 4096;

/// A tie-break of [`choose`] ([`preference`]): 0 for the preferred of the overlapped FP8
/// cooperative kernels' two-CTA clusters, whose raster runs across the cluster
/// ([`default_schedule`]), 1 for the other; 0 for every other kernel. The cost model ties them.
/// Measured on an H100 (e4m3 -> bf16, 2026-12-07, the plans of two builds in one process,
/// docs/performance.md): on the five shapes of the broad set and the held-out families where it
/// moves a pick from 1x2x1 to 2x1x1 (all with fewer than 4096 rows), Gemma-2-9B's 512 x 3584 x
/// 14336 went from 0.81x to 0.90x cuBLASLt in each of four runs, Phi-3-mini's 512 x 3072 x 3072
/// and 512 x 3072 x 8192 and Yi-6B's 2048 x 5120 x 4096 gained 0.6-3.7 % in each of two, GPT-2's
/// 512 x 3072 x 768 stayed within the runs' spread. With 4096 rows and more, where no current pick
/// moves, 1x2x1 measured ahead on most shapes timed by name.
fn raster_rank(spec: &KernelSpec, m: usize) -> u8 {
    let pair = matches!(spec.cluster, [2, 1, 1] | [1, 2, 1])
        && spec.kernel_schedule == KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap;
    u8::from(pair && (spec.cluster[0] == 2) == (m >= RASTER_ALONG_M_FROM_ROWS))
}

/// What [`choose`] orders kernels by, for a kernel's view of the output (`m x n`): the estimate;
/// on ties (memory-bound problems, where the DRAM term binds, and kernels that differ only in
/// their cluster) the smaller tile (more CTAs in flight, measured: docs/performance.md), then the
/// cluster shape that idles fewer CTAs, then the FP8 raster ([`raster_rank`]), then the cluster
/// that shares the streamed operand ([`unshared_panel`]).
type Preference = (f64, u32, usize, u8, usize);

fn preference(
    spec: &KernelSpec,
    (m, n): (usize, usize),
    k: usize,
    batch: usize,
    sms: usize,
) -> Preference {
    (
        estimate_us(spec, m, n, k, batch, sms),
        spec.tile[0] * spec.tile[1],
        cluster_tiles(spec, m, n, batch),
        raster_rank(spec, m),
        unshared_panel(spec, m, n),
    )
}

fn compare(x: Preference, y: Preference) -> std::cmp::Ordering {
    x.0.total_cmp(&y.0)
        .then(x.1.cmp(&y.1))
        .then(x.2.cmp(&y.2))
        .then(x.3.cmp(&y.3))
        .then(x.4.cmp(&y.4))
}

/// The k-tiles of 128 that the busiest SM saves when a stream-K kernel shares the K loops of
/// the output tiles out evenly, against whole waves of tiles (`k / 128 · (waves − tiles / SMs)`),
/// at which the FP8 blockwise stream-K kernel takes over from its persistent twin.
///
/// Fitted on an H200 (`profile --types fp8bw --kernels all`, both kernels on the 140 shapes of
/// `bench/shapes-broad.tsv`, `docs/performance.md`) with Llama-2-7B, Mistral-7B, Qwen2.5-7B and
/// GPT-2 only: the persistent kernel streams about 0.42 µs per k-tile and CTA where tiles are few,
/// and stream-K costs 16–21 µs more in fixed work (workspace reset, turnstile reduction of the
/// partial tiles), so it pays from about 45 k-tiles saved, reliably from 60 (the fit: 65). On the
/// four held-out families the rule took the pair from 0.921x to 0.931x cuBLASLt (the better
/// kernel per shape: 0.949x on all eight). The cost model of [`estimate_us`] does not separate
/// the two: its padded-rows penalty, fitted on the 16-bit and tensor-wise tiles, charges a
/// 128-row tile at 16 rows more than the blockwise kernel runs.
const BLOCKWISE_STREAM_K_SAVED_K_TILES: f64 = 64.0;

/// Whether the FP8 blockwise stream-K kernel should run an `m x n x k` problem rather than its
/// persistent twin ([`BLOCKWISE_STREAM_K_SAVED_K_TILES`]).
fn blockwise_stream_k(
    spec: &KernelSpec,
    (m, n): (usize, usize),
    k: usize,
    batch: usize,
    sms: usize,
) -> bool {
    let tiles = cluster_tiles(spec, m, n, batch) as f64;
    let sms = sms.max(1) as f64;
    let k_tiles = k.div_ceil(spec.tile[2] as usize) as f64;
    k_tiles * ((tiles / sms).ceil() - tiles / sms) >= BLOCKWISE_STREAM_K_SAVED_K_TILES
}

/// Whether a kernel may run a problem of this kernel view (`m x n`) by the tokens it was measured
/// on. The row-major 64x32 pingpong tile (e4m3 in the default set; no other type has it) serves
/// up to 64 tokens, one tile row of M (twice the CTAs of 64x64 over a weight of a few thousand
/// rows). Beyond, the cost model prices it too well: on an H100 it took DeepSeek-V3's 128 x 2112 x
/// 7168 from 0.95x to 0.85x cuBLASLt against the 64x64 2x1x1 tile (docs/performance.md). Its
/// swapped twin keeps the cost model's choice (measured faster at 16, 32 and 128 tokens).
fn within_measured_tokens(spec: &KernelSpec, (m, _n): (usize, usize)) -> bool {
    spec.tile[..2] != [64, 32] || spec.d.layout != cutlass_gemm_catalog::Layout::RowMajor || m <= 64
}

/// The kernel with the smallest estimate; `shape` gives each kernel's view of the output
/// (`m x n`: the problem's, or its transpose for kernels that compute Dᵀ), `extra_us` what a
/// kernel costs beyond its own time (the staging copies it would need: [`staging_us`]).
/// Fast-accumulation kernels only when nothing else serves; a CUTLASS FP8 kernel never when its
/// overlapped-promotion twin is there; in the order of [`preference`].
pub(crate) fn choose(
    kernels: &[Kernel],
    k: usize,
    batch: usize,
    sm_count: i32,
    shape: &dyn Fn(&KernelSpec) -> (usize, usize),
    extra_us: &dyn Fn(&KernelSpec) -> f64,
) -> Kernel {
    let sms = sm_count.max(1) as usize;
    let precise = kernels.iter().any(|kn| !fast_accum(&kn.spec));
    // FP8 blockwise: the stream-K kernel or its persistent twin by the fitted rule, where both
    // are there.
    let blockwise_rule = |kn: &Kernel| {
        let spec = &kn.spec;
        let stream_k = spec.tile_scheduler == TileScheduler::StreamK;
        let twin = KernelSpec {
            tile_scheduler: if stream_k {
                TileScheduler::Persistent
            } else {
                TileScheduler::StreamK
            },
            ..*spec
        };
        spec.blockwise.is_none()
            || !kernels.iter().any(|other| other.spec == twin)
            || stream_k == blockwise_stream_k(spec, shape(spec), k, batch, sms)
    };
    let eligible: Vec<&Kernel> = kernels
        .iter()
        .filter(|kn| !precise || !fast_accum(&kn.spec))
        .filter(|kn| !superseded(&kn.spec, kernels.iter().map(|k| &k.spec)))
        .filter(|kn| blockwise_rule(kn))
        .collect();
    // The row-major 64x32 tile only up to 64 tokens ([`within_measured_tokens`]; where only such
    // a tile serves, it stays).
    let measured = |kn: &Kernel| within_measured_tokens(&kn.spec, shape(&kn.spec));
    let eligible: Vec<&Kernel> = if eligible.iter().any(|kn| measured(kn)) {
        eligible.into_iter().filter(|kn| measured(kn)).collect()
    } else {
        eligible
    };
    let rank = |kn: &Kernel| {
        let mut r = preference(&kn.spec, shape(&kn.spec), k, batch, sms);
        r.0 += extra_us(&kn.spec);
        r
    };
    let best = |pool: &mut dyn Iterator<Item = &Kernel>| {
        pool.min_by(|x, y| compare(rank(x), rank(y))).copied()
    };
    // The narrow decode tiles (64 x 8, 64 x 16 pingpong, persistent): a wider one stands in only
    // for the narrowest, where that would run the problem. The cost model prices the 64x16 tile
    // at two waves about a fifth under what it runs, which otherwise takes it over the stream-K
    // and 64x64 tiles at 32 tokens over a long K (docs/performance.md).
    let narrow = |s: &KernelSpec| {
        s.tile[0] == 64
            && s.tile[1] <= 16
            && s.tile_scheduler == TileScheduler::Persistent
            && matches!(
                s.kernel_schedule,
                KernelSchedule::TmaWarpSpecializedPingpong
                    | KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap
                    | KernelSchedule::TmaWarpSpecializedPingpongFp8FastAccum
            )
    };
    let narrowest = eligible
        .iter()
        .filter(|kn| narrow(&kn.spec))
        .map(|kn| kn.spec.tile[1])
        .min();
    let first = best(
        &mut eligible
            .iter()
            .copied()
            .filter(|kn| !narrow(&kn.spec) || Some(kn.spec.tile[1]) == narrowest),
    )
    .expect("non-empty");
    if narrow(&first.spec) {
        best(&mut eligible.iter().copied().filter(|kn| narrow(&kn.spec))).expect("non-empty")
    } else {
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cutlass_gemm_catalog::{catalog, Layout};

    /// The TN kernels of one A/D type pair (row-major D, or column-major D for the swap).
    fn menu(a: DataType, d: DataType) -> Vec<KernelSpec> {
        catalog::sm90()
            .into_iter()
            .filter(|s| s.a.ty == a && s.b.ty == a && s.d.ty == d && s.layout_name() == "TN")
            .filter(|s| s.blockwise.is_none() && !fast_accum(s) && !s.kernel_schedule.is_grouped())
            .collect()
    }

    fn bf16_menu() -> Vec<KernelSpec> {
        menu(DataType::Bf16, DataType::Bf16)
    }

    fn pick(m: usize, n: usize, k: usize) -> KernelSpec {
        pick_in(bf16_menu(), m, n, k)
    }

    /// The pick among the e4m3 -> bf16 kernels that automatic selection considers (no CUTLASS
    /// kernel whose overlapped twin is there).
    fn pick_e4m3(m: usize, n: usize, k: usize) -> KernelSpec {
        let all = menu(DataType::E4M3, DataType::Bf16);
        let candidates: Vec<KernelSpec> = all
            .iter()
            .filter(|s| !superseded(s, all.iter()))
            .copied()
            .collect();
        pick_in(candidates, m, n, k)
    }

    fn pick_in(candidates: Vec<KernelSpec>, m: usize, n: usize, k: usize) -> KernelSpec {
        let view = |s: &KernelSpec| {
            if s.d.layout == Layout::ColumnMajor {
                (n, m)
            } else {
                (m, n)
            }
        };
        candidates
            .into_iter()
            .filter(|s| within_measured_tokens(s, view(s)))
            .min_by(|x, y| {
                let rank = |s: &KernelSpec| preference(s, view(s), k, 1, 132);
                compare(rank(x), rank(y))
            })
            .unwrap()
    }

    /// The row-major e4m3 64x32 tile up to 64 tokens only: DeepSeek-V3's 128 x 2112 x 7168 ran
    /// 0.85x cuBLASLt on it against 0.95x on 64x64 2x1x1 (H100, docs/performance.md), which the
    /// cost model alone would not avoid.
    #[test]
    fn the_row_major_64x32_tile_stays_at_64_tokens_or_fewer() {
        let is_64x32 = |s: &KernelSpec| s.tile[..2] == [64, 32];
        let all = menu(DataType::E4M3, DataType::Bf16);
        let row_major = all
            .iter()
            .find(|s| is_64x32(s) && s.d.layout == Layout::RowMajor)
            .expect("the row-major 64x32 e4m3 tile");
        let swapped = all
            .iter()
            .find(|s| is_64x32(s) && s.d.layout == Layout::ColumnMajor)
            .expect("the swapped 64x32 e4m3 tile");
        assert!(within_measured_tokens(row_major, (64, 4096)));
        assert!(!within_measured_tokens(row_major, (65, 4096)));
        assert!(within_measured_tokens(swapped, (4096, 128)));
        // The cost model alone takes the row-major tile at 128 x 2112 x 7168; the rule does not.
        let view = |s: &KernelSpec| {
            if s.d.layout == Layout::ColumnMajor {
                (2112, 128)
            } else {
                (128, 2112)
            }
        };
        let unfiltered = all
            .iter()
            .filter(|s| !superseded(s, all.iter()))
            .min_by(|x, y| {
                compare(
                    preference(x, view(x), 7168, 1, 132),
                    preference(y, view(y), 7168, 1, 132),
                )
            })
            .unwrap();
        assert_eq!(unfiltered.name(), row_major.name());
        for (m, n, k) in [(128, 2112, 7168), (72, 4096, 4096), (96, 7168, 2048)] {
            let s = pick_e4m3(m, n, k);
            assert!(
                !is_64x32(&s) || s.d.layout == Layout::ColumnMajor,
                "{m} x {n} x {k}: {}",
                s.name()
            );
        }
        // Up to 64 tokens the row-major one is chosen where it measured fastest (H100,
        // 2026-12-07): 64 x 4096 x 14336, 1.09x cuBLASLt against 0.93x for 64x64 2x1x1.
        assert_eq!(pick_e4m3(64, 4096, 14336).name(), row_major.name());
    }

    /// The FP8 blockwise stream-K rule against the H200 measurements it separates clearly (time of
    /// the persistent kernel over the stream-K one, `profile --types fp8bw --kernels all`,
    /// 2026-11-28): stream-K where it ran 1.14-1.55x, persistent where it ran 0.71-0.84x.
    #[test]
    fn blockwise_stream_k_where_it_measured_faster() {
        let streamk = catalog::sm90()
            .into_iter()
            .find(|s| {
                s.blockwise.is_some()
                    && s.d.ty == DataType::Bf16
                    && s.tile_scheduler == TileScheduler::StreamK
                    && !s.kernel_schedule.is_grouped()
            })
            .expect("the blockwise stream-K kernel");
        for (m, n, k, faster) in [
            (16, 3584, 18944, true),   // 1.55x
            (128, 3584, 18944, true),  // 1.43x
            (8, 4096, 14336, true),    // 1.23x
            (128, 5120, 13824, true),  // 1.19x
            (32, 8192, 28672, true),   // 1.14x
            (16, 4096, 4096, false),   // 0.71x
            (64, 7168, 2048, false),   // 0.72x
            (32, 3584, 4096, false),   // 0.75x
            (16, 768, 3072, false),    // 0.76x
            (8192, 32768, 512, false), // 0.84x
        ] {
            assert_eq!(
                blockwise_stream_k(&streamk, (m, n), k, 1, 132),
                faster,
                "{m} x {n} x {k}"
            );
        }
    }

    /// Where the estimate agrees with the measurements of docs/performance.md (the fastest kernel
    /// of the menu measured by `cutlass-profiler profile --kernels all` on an H200 and an H100).
    #[test]
    fn picks_match_measured_winners() {
        let s = pick(4096, 4096, 4096);
        assert_eq!(
            (s.tile, s.tile_scheduler),
            ([128, 256, 64], TileScheduler::Persistent)
        );
        let s = pick(8192, 8192, 8192);
        assert_eq!(
            (s.tile, s.tile_scheduler),
            ([128, 256, 64], TileScheduler::StreamK)
        );
        // Decode (H100, bench/training/bf16-decode-h100.csv): the swapped 64x8
        // pingpong tile, two CTAs of a 1x2x1 cluster sharing the weights' panel (16 x 4096 x 4096:
        // 16.3 us against 19.3 us for 64x64 pingpong; 16 x 4096 x 14336: 44.5 against 49.9 us
        // for 128x16 stream-K; 16 x 6144 x 4096: 23.6 us, as fast as 64x16 2x1x1).
        for (m, n, k) in [(16, 6144, 4096), (16, 4096, 4096), (16, 4096, 14336)] {
            let s = pick(m, n, k);
            assert_eq!(
                (s.tile, s.cluster, s.kernel_schedule, s.d.layout),
                (
                    [64, 8, 64],
                    [1, 2, 1],
                    KernelSchedule::TmaWarpSpecializedPingpong,
                    Layout::ColumnMajor
                ),
                "{m}x{n}x{k}: {}",
                s.name()
            );
        }
        // ... but not at M = 128 (128 x 4096 x 4096: 50.0 us against 17.1 us for 64x64 pingpong
        // with a 2x1x1 cluster, whose CTA pairs share the streamed B: 18.9 us with 1x2x1).
        let s = pick(128, 4096, 4096);
        assert_eq!(
            (s.tile, s.cluster),
            ([64, 64, 64], [2, 1, 1]),
            "{}",
            s.name()
        );
        // M = 128, memory-bound (dsv3-b-m128): not 128x256 cooperative (H100 44.5 us, H200
        // 39.8 us), which the DRAM term ties with the smaller tiles; 128x128x64 cooperative is the
        // fastest on the H200 (29.0 us) and within 10 % of 64x64 pingpong on the H100 (36.4
        // against 33.1 us).
        let s = pick(128, 24576, 1536);
        assert!(
            [
                ([64, 64, 64], KernelSchedule::TmaWarpSpecializedPingpong),
                (
                    [128, 128, 64],
                    KernelSchedule::TmaWarpSpecializedCooperative
                )
            ]
            .contains(&(s.tile, s.kernel_schedule)),
            "{}",
            s.name()
        );
        // The tiles cuBLAS uses that the menu took over (H100,
        // bench/training/bf16-suite-h100.csv): N = 2112 = 12 x 176 at M = 4096 (0.97x cuBLAS against 0.88x for 128x256 stream-K),
        // and 128 x 6144 in one wave of 64x96 pingpong tiles (0.92x against 0.90x).
        let s = pick(4096, 2112, 7168);
        assert_eq!(
            (s.tile, s.cluster),
            ([128, 176, 64], [1, 2, 1]),
            "{}",
            s.name()
        );
        // 128 x 6144 x 4096 again (bench/training/bf16-m128-h100.csv): with the
        // 2x1x1 cluster whose CTA pair shares the streamed B, as cuBLAS runs it (23.7 us; 1x2x1
        // 26.0 us).
        let s = pick(128, 6144, 4096);
        assert_eq!(
            (s.tile, s.cluster),
            ([64, 96, 64], [2, 1, 1]),
            "{}",
            s.name()
        );
        // s8 -> s32 on an H100 (bench/training/tf32-i8-suite-h100.csv): at 4096 x 2112 x 7168
        // the 128x128 cooperative kernels (133 us, 137 us with stream-K) beat 64x128 pingpong
        // (205 us), which the constants before the s8 data picked.
        let s = pick_in(menu(DataType::I8, DataType::I32), 4096, 2112, 7168);
        assert_eq!(
            (s.tile, s.kernel_schedule),
            (
                [128, 128, 128],
                KernelSchedule::TmaWarpSpecializedCooperative
            )
        );
    }

    /// e4m3 -> bf16 on an H100 (bench/training/e4m3-decode-h100.csv): at 16 x 4096 x
    /// 4096 the swapped 64x8 overlapped pingpong kernel (cluster 1x2x1) is the fastest of the menu
    /// (10.1 us; 64x64 pingpong 11.9 us, the narrow swapped stream-K kernel 15.1 us); at 128 x
    /// 4096 x 4096 the 64x64 one with a 2x1x1 cluster (10.7 us; 1x2x1 11.8 us, 64x8 27.9 us).
    #[test]
    fn fp8_decode_picks_the_overlapped_pingpong_kernels() {
        let s = pick_e4m3(16, 4096, 4096);
        assert_eq!(
            (s.tile, s.cluster, s.kernel_schedule, s.d.layout),
            (
                [64, 8, 128],
                [1, 2, 1],
                KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap,
                Layout::ColumnMajor
            ),
            "{}",
            s.name()
        );
        let s = pick_e4m3(128, 4096, 4096);
        assert_eq!(
            (s.tile, s.cluster, s.kernel_schedule),
            (
                [64, 64, 128],
                [2, 1, 1],
                KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap
            ),
            "{}",
            s.name()
        );
    }

    /// e4m3 -> bf16 on an H100 at 128 x 7168 x 16384 (bench/training/e4m3-m128-h100.csv): the
    /// swapped 128x64 stream-K overlapped kernel (48.5 us) or the 64x128 pingpong one (53.2 us,
    /// 0.91 of it: the constants fitted with the broad set trade this shape for others); at 128 x
    /// 4096 x 4096 (no long K to share) the 64x64 pingpong kernel (10.7 us; stream-K 15.5 us).
    #[test]
    fn fp8_long_k_at_m_128_takes_swapped_stream_k() {
        let s = pick_e4m3(128, 7168, 16384);
        assert!(
            [
                ([128, 64, 128], TileScheduler::StreamK, Layout::ColumnMajor),
                ([64, 128, 128], TileScheduler::Persistent, Layout::RowMajor)
            ]
            .contains(&(s.tile, s.tile_scheduler, s.d.layout)),
            "{}",
            s.name()
        );
        let s = pick_e4m3(128, 4096, 4096);
        assert_eq!(
            (s.tile, s.tile_scheduler),
            ([64, 64, 128], TileScheduler::Persistent)
        );
    }

    /// e4m3 -> bf16 at large M on an H100: persistent kernels over their stream-K twins, which the
    /// even share of a fractional last wave would favour without [`STREAM_K_FP8_FACTOR`]
    /// (bench/training/e4m3-suite-h100.csv, 128x128 1x2x1: 8192³ 794.6 us against 832.7 us,
    /// 4096 x 7168 x 16384 699.5 against 708.1 us, 4096 x 8192 x 28672 1466.3 against 1487.0 us),
    /// and there the sliced 128x256 tile (bench/training/e4m3-large-h100.csv: 785,
    /// 676 and 1342 us; 128x128 796, 703 and 1440 us). At N = 2112 the 256-wide tile pads N to
    /// 2304 and leaves a third wave: 128x192 (105 us; 128x144 106, 128x128 111, 128x256 139).
    #[test]
    fn fp8_large_problems_take_the_persistent_kernel() {
        for (m, n, k) in [(8192, 8192, 8192), (4096, 7168, 16384), (4096, 8192, 28672)] {
            let s = pick_e4m3(m, n, k);
            assert_eq!(
                (s.tile, s.cluster, s.tile_scheduler),
                ([128, 256, 128], [1, 2, 1], TileScheduler::Persistent),
                "{m}x{n}x{k}: {}",
                s.name()
            );
            assert_eq!(
                s.mainloop_wrapper().map(|w| w.0),
                Some("cutlass_rs::Sm90Fp8SlicedPromotion")
            );
        }
        let s = pick_e4m3(4096, 2112, 7168);
        assert_eq!(
            (s.tile, s.cluster),
            ([128, 192, 128], [1, 2, 1]),
            "{}",
            s.name()
        );
    }

    /// The tie between the FP8 cooperative kernels' two-CTA clusters goes to 2x1x1 (raster along
    /// N) below 4096 rows and to 1x2x1 from there ([`raster_rank`]); other kernels tie as before.
    #[test]
    fn fp8_cluster_ties_follow_the_measured_raster() {
        // Gemma-2-9B's down projection at 512 tokens (1x2x1 before the rule).
        let s = pick_e4m3(512, 3584, 14336);
        assert_eq!(
            (s.tile, s.cluster),
            ([128, 128, 128], [2, 1, 1]),
            "{}",
            s.name()
        );
        let wide = overlapped([128, 128, 128], [2, 1, 1]);
        let tall = overlapped([128, 128, 128], [1, 2, 1]);
        assert_eq!((raster_rank(&wide, 4095), raster_rank(&tall, 4095)), (0, 1));
        assert_eq!((raster_rank(&wide, 4096), raster_rank(&tall, 4096)), (1, 0));
        let bf16 = bf16_menu()
            .into_iter()
            .find(|s| s.cluster == [2, 1, 1])
            .expect("a bf16 kernel of a 2x1x1 cluster");
        assert_eq!((raster_rank(&bf16, 1024), raster_rank(&bf16, 8192)), (0, 0));
    }

    /// The e4m3 -> bf16 overlapped cooperative kernel of this tile and cluster (persistent).
    fn overlapped(tile: [u32; 3], cluster: [u32; 3]) -> KernelSpec {
        menu(DataType::E4M3, DataType::Bf16)
            .into_iter()
            .find(|s| {
                s.kernel_schedule == KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap
                    && s.tile == tile
                    && s.cluster == cluster
                    && s.tile_scheduler == TileScheduler::Persistent
            })
            .expect("in the menu")
    }

    #[test]
    fn only_overlapped_fp8_kernels_raster_across_their_cluster() {
        for s in catalog::sm90() {
            let h = default_schedule(&s, (8192, 8192, 8192), 132);
            let ours = s.kernel_schedule == KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap
                && matches!(s.cluster, [1, 2, 1] | [2, 1, 1]);
            if ours {
                let along = if s.cluster == [1, 2, 1] { 1 } else { 2 };
                assert_eq!((h.raster, h.splits), (along, 0), "{}", s.name());
                assert!([1, 2, 4, 8].contains(&h.swizzle), "{}", s.name());
            } else {
                assert_eq!(h, ScheduleHints::default(), "{}", s.name());
            }
        }
    }

    /// The swizzles the traffic model gives where the H100 sweep measured the schedules
    /// (bench/training/e4m3-schedules-h100.csv; in brackets the fraction of cuBLASLt's speed).
    #[test]
    fn fp8_swizzle_follows_the_measured_winners() {
        let k128 = overlapped([128, 128, 128], [1, 2, 1]);
        let swizzle = |s: &KernelSpec, shape| default_schedule(s, shape, 132).swizzle;
        // 8192³: A (64 MB) is read again for every band; swizzle 4 along M (0.962) against 1
        // (0.834).
        assert_eq!(swizzle(&k128, (8192, 8192, 8192)), 4);
        // Both operands stay in the L2: swizzle 1 (0.989; 4: 0.950).
        assert_eq!(swizzle(&k128, (4096, 4096, 4096)), 1);
        // N = 2112: a larger swizzle pads the 17 tile columns (1: 0.873, 2: 0.791, 8: 0.462).
        assert_eq!(swizzle(&k128, (4096, 2112, 7168)), 1);
        // The 144-wide tile at 8192³: 57 columns, swizzle 2 (0.891; 1: 0.857, 4 pads: 0.840).
        let k144 = overlapped([128, 144, 128], [1, 2, 1]);
        assert_eq!(swizzle(&k144, (8192, 8192, 8192)), 2);
        // DRAM at about half the main loop: no swizzle (4096 x 8192 x 28672: 1: 1343 TFLOP/s,
        // 4: 1298; 4096 x 57344 x 8192: 1: 1338, 4: 1317; bench/training/e4m3-schedules-70b-h100.csv).
        assert_eq!(swizzle(&k128, (4096, 8192, 28672)), 1);
        assert_eq!(swizzle(&k128, (4096, 57344, 8192)), 1);
    }

    #[test]
    fn overlapped_fp8_kernels_replace_their_cutlass_twins() {
        let menu = menu(DataType::E4M3, DataType::Bf16);
        let twins: Vec<&KernelSpec> = menu.iter().filter(|s| superseded(s, menu.iter())).collect();
        // The cooperative kernels of the tile table and the menu (3 row-major, 3 swapped).
        assert_eq!(twins.len(), 6, "{twins:?}");
        for s in &twins {
            assert_eq!(
                s.kernel_schedule,
                KernelSchedule::TmaWarpSpecializedCooperative
            );
        }
        // 16-bit kernels have no twin, whatever else is there.
        let bf16 = bf16_menu();
        assert!(!bf16.iter().any(|s| superseded(s, bf16.iter().chain(&menu))));
    }

    #[test]
    fn decode_estimates_are_bounded_by_reading_the_weights() {
        let (m, n, k) = (16, 28672, 4096);
        let weights_us = (n * k * 2) as f64 / BYTES_PER_US;
        for s in bf16_menu() {
            let (km, kn) = if s.d.layout == Layout::ColumnMajor {
                (n, m)
            } else {
                (m, n)
            };
            assert!(
                estimate_us(&s, km, kn, k, 1, 132) >= weights_us,
                "{}",
                s.name()
            );
        }
    }

    /// Mid-size M on an H100 (bench/training/{bf16,e4m3}-mid-h100.csv): the swapped
    /// narrow tiles stop paying at M = 64, where each re-reads the weights once per token tile
    /// through the L2 (`L2_BYTES_PER_US`): 64 x 4096 x 4096 bf16 64x64 pingpong 17.3 us, the
    /// swapped 64x16 24.9 us and 64x8 27.2 us; e4m3 11.3 us, 14.5 us and 16.0 us. At M = 32 the
    /// narrow tiles still win (bf16 64x8 18.2 us, 64x64 2x1x1 18.7 us). (e4m3 at M = 64 takes the
    /// row-major 64x32 tile, measured on the broad set: docs/performance.md.)
    #[test]
    fn narrow_swapped_tiles_stay_below_m_64() {
        for s in [pick(64, 4096, 4096), pick_e4m3(64, 4096, 4096)] {
            assert!(s.tile[0] == 64 && s.tile[1] >= 32, "{}", s.name());
            assert_eq!(s.d.layout, Layout::RowMajor, "{}", s.name());
        }
        assert_eq!(pick(64, 4096, 4096).tile[..2], [64, 64]);
        for s in [pick(32, 4096, 4096), pick_e4m3(32, 4096, 4096)] {
            assert!(
                s.tile[1] <= 32 && s.d.layout == Layout::ColumnMajor,
                "{}",
                s.name()
            );
        }
    }

    /// Extents at CUTLASS's limit (i32::MAX: products of two of them and a bit width pass a
    /// `usize`) give finite estimates that grow with the problem. The bytes the operands move,
    /// and those of an unaligned output's scalar epilogue, were counted in a `usize` (panics
    /// under overflow checks, wrapped in release), like the staging copies' bytes that
    /// tests/fuzz_plans.rs hit.
    #[test]
    fn estimates_at_the_extent_limit_do_not_overflow() {
        let max = i32::MAX as usize;
        let menu = bf16_menu();
        assert!(
            menu.iter().any(|s| s.d.align < s.d.ty.tma_alignment()),
            "the menu has kernels with a scalar epilogue"
        );
        for s in menu {
            let big = estimate_us(&s, max, max, max, 1, 132);
            let half = estimate_us(&s, max / 2, max, max, 1, 132);
            assert!(
                big.is_finite() && big >= half,
                "{}: {big} < {half}",
                s.name()
            );
        }
    }
}
