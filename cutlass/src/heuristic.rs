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
//! - fixed: launch and epilogue, more for stream-K's workspace reset and reduction.
//!
//! The constants are for Hopper (H100/H200), fitted by `tools/fit_heuristic.py` to the profiler's
//! exhaustive runs over `shared/bench/shapes.tsv` (`cutlass-profiler profile --kernels all`, the
//! CSVs in `docs/perf/`): the bf16 menu on an H200 and an H100, the e4m3 menu on an H200 (CUTLASS's
//! f32-promoting kernels) and an H100 (with this crate's overlapped-promotion kernels), the tf32
//! and s8 menus on an H100.
//! The script scores the picks per type and bf16 leave-one-shape-out (`docs/performance.md`).
//! [`crate::tune`] measures instead of estimating. Automatic selection
//! never takes an FP8 fast-accumulation kernel (less precise): name it to use it; and it never
//! takes a CUTLASS f32-promoting FP8 kernel whose overlapped-promotion twin (same results, bit for
//! bit, faster) is built.

use cutlass_kernels::{DataType, KernelSchedule, KernelSpec, TileScheduler};

use crate::kernel::{Kernel, ScheduleHints};

/// Dense bf16 tensor-core FLOP per microsecond per SM at the sustained clock (989 TFLOP/s over
/// 132 SMs on an H100/H200 SXM).
const FLOP_PER_US_PER_SM: f64 = 7.5e6;
/// Sustained DRAM bandwidth in bytes per microsecond.
const BYTES_PER_US: f64 = 3.36e6;
/// What one CTA streams from DRAM at most, bytes per microsecond: why a few output tiles cannot
/// pull the whole bandwidth (decode-size problems), and what stream-K and the operand swap fix.
const CTA_BYTES_PER_US: f64 = 1.203e5;
/// Launch and epilogue, microseconds.
const FIXED_US: f64 = 4.60;
/// Stream-K's extra fixed cost: the workspace reset and the reduction of partial tiles.
const STREAM_K_US: f64 = 17.32;
/// Extra main-loop cost of a tile's padded rows, per unit of padded fraction.
const PADDING_PENALTY: f64 = 1.222;

/// Fraction of the peak a tile sustains in its main loop.
fn tile_efficiency(spec: &KernelSpec) -> f64 {
    let [tm, tn, _] = spec.tile;
    let base = match tm * tn {
        a if a >= 32768 => 0.839,
        a if a >= 16384 => 0.615,
        a if a >= 8192 => 0.486,
        a if a >= 4096 => 0.418,
        _ => 0.374,
    };
    let schedule = match spec.kernel_schedule {
        KernelSchedule::TmaWarpSpecialized => 0.775,
        KernelSchedule::TmaWarpSpecializedPingpong
        | KernelSchedule::TmaWarpSpecializedPingpongFp8FastAccum
        | KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap => 0.797,
        _ => 1.0,
    };
    base * schedule
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

/// Estimated microseconds for an `m x n x k` (kernel view) problem of `batch` on `sms` SMs: the
/// largest of the compute time, the time the busiest CTA needs to stream its A and B panels, and
/// the time to move every byte once, plus fixed costs.
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
    let total_bytes =
        ((m * k * bits(spec.a.ty) + n * k * bits(spec.b.ty) + m * n * bits(spec.d.ty))
            * batch.max(1)
            / 8) as f64;
    // Tiles per SM: whole waves for the data-parallel scheduler, an even share for stream-K.
    let (per_sm, fixed) = if spec.tile_scheduler == TileScheduler::StreamK {
        (tiles as f64 / sms as f64, FIXED_US + STREAM_K_US)
    } else {
        (tiles.div_ceil(sms) as f64, FIXED_US)
    };
    let compute = per_sm * tile_us;
    let stream = per_sm * tile_bytes / CTA_BYTES_PER_US;
    compute.max(stream).max(total_bytes / BYTES_PER_US) + fixed
}

fn fast_accum(spec: &KernelSpec) -> bool {
    matches!(
        spec.kernel_schedule,
        KernelSchedule::TmaWarpSpecializedCooperativeFp8FastAccum
            | KernelSchedule::TmaWarpSpecializedPingpongFp8FastAccum
    )
}

/// The tile-scheduler hints a plan starts with (what [`crate::Gemm::schedule`] reports until
/// [`crate::Gemm::with_schedule`] replaces them). The overlapped-promotion FP8 kernels with a 1x2x1
/// cluster raster along M: CUTLASS's heuristic rasters along N unless N has more tiles than M, and
/// on an H100 (e4m3 -> bf16, 128x128x128, `docs/performance.md` section 6) along M ran faster at
/// every measured shape with M >= N: 8192³ 1196 -> 1209 TFLOP/s, 4096 x 2112 x 7168 896 -> 1117,
/// 4096 x 4096 x 14336 1303 -> 1367, and the same at 4096 x 57344 x 8192 (1351, where CUTLASS's
/// heuristic already rasters along M). Everything else keeps CUTLASS's defaults.
pub(crate) fn default_schedule(spec: &KernelSpec) -> ScheduleHints {
    let along_m = spec.kernel_schedule == KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap
        && spec.cluster == [1, 2, 1]
        && spec.tile_scheduler == TileScheduler::Persistent;
    ScheduleHints {
        raster: if along_m { 1 } else { 0 },
        ..ScheduleHints::default()
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

/// The kernel with the smallest estimate; `shape` gives each kernel's view of the output
/// (`m x n`: the problem's, or its transpose for kernels that compute Dᵀ). Fast-accumulation
/// kernels only when nothing else serves; a CUTLASS FP8 kernel never when its
/// overlapped-promotion twin is there; ties go to the smaller tile, then to fewer idle CTAs.
pub(crate) fn choose(
    kernels: &[Kernel],
    k: usize,
    batch: usize,
    sm_count: i32,
    shape: &dyn Fn(&KernelSpec) -> (usize, usize),
) -> Kernel {
    let sms = sm_count.max(1) as usize;
    let precise = kernels.iter().any(|kn| !fast_accum(&kn.spec));
    *kernels
        .iter()
        .filter(|kn| !precise || !fast_accum(&kn.spec))
        .filter(|kn| !superseded(&kn.spec, kernels.iter().map(|k| &k.spec)))
        .min_by(|x, y| {
            let cost = |kn: &Kernel| {
                let (m, n) = shape(&kn.spec);
                estimate_us(&kn.spec, m, n, k, batch, sms)
            };
            let area = |kn: &Kernel| kn.spec.tile[0] * kn.spec.tile[1];
            let tiles = |kn: &Kernel| {
                let (m, n) = shape(&kn.spec);
                cluster_tiles(&kn.spec, m, n, batch)
            };
            // Ties (memory-bound problems, where the DRAM term binds) go to the smaller tile:
            // more CTAs in flight (measured: docs/performance.md); then to the cluster shape
            // that idles fewer CTAs.
            cost(x)
                .total_cmp(&cost(y))
                .then(area(x).cmp(&area(y)))
                .then(tiles(x).cmp(&tiles(y)))
        })
        .expect("non-empty")
}

#[cfg(test)]
mod tests {
    use super::*;
    use cutlass_kernels::{catalog, Layout};

    /// The TN kernels of one A/D type pair (row-major D, or column-major D for the swap).
    fn menu(a: DataType, d: DataType) -> Vec<KernelSpec> {
        catalog::sm90()
            .into_iter()
            .filter(|s| s.a.ty == a && s.d.ty == d && s.layout_name() == "TN")
            .filter(|s| s.blockwise.is_none() && !fast_accum(s))
            .collect()
    }

    fn bf16_menu() -> Vec<KernelSpec> {
        menu(DataType::Bf16, DataType::Bf16)
    }

    fn pick(m: usize, n: usize, k: usize) -> KernelSpec {
        pick_in(bf16_menu(), m, n, k)
    }

    fn pick_in(candidates: Vec<KernelSpec>, m: usize, n: usize, k: usize) -> KernelSpec {
        candidates
            .into_iter()
            .min_by(|x, y| {
                let e = |s: &KernelSpec| {
                    let (km, kn) = if s.d.layout == Layout::ColumnMajor {
                        (n, m)
                    } else {
                        (m, n)
                    };
                    estimate_us(s, km, kn, k, 1, 132)
                };
                let area = |s: &KernelSpec| s.tile[0] * s.tile[1];
                let t = |s: &KernelSpec| {
                    let (km, kn) = if s.d.layout == Layout::ColumnMajor {
                        (n, m)
                    } else {
                        (m, n)
                    };
                    cluster_tiles(s, km, kn, 1)
                };
                e(x).total_cmp(&e(y))
                    .then(area(x).cmp(&area(y)))
                    .then(t(x).cmp(&t(y)))
            })
            .unwrap()
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
        // Decode: 64x64 pingpong with the cluster along N (a 2x1 cluster idles half its CTAs
        // on 16 rows; H100: 23.8 us against 31.1 us).
        let s = pick(16, 6144, 4096);
        assert_eq!(
            (s.tile, s.cluster, s.kernel_schedule),
            (
                [64, 64, 64],
                [1, 2, 1],
                KernelSchedule::TmaWarpSpecializedPingpong
            )
        );
        let s = pick(16, 4096, 4096);
        assert_eq!(
            (s.tile, s.cluster),
            ([64, 64, 64], [1, 2, 1]),
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
        // s8 -> s32 on an H100 (docs/perf/tf32-i8-all-kernels-h100.csv): at 4096 x 2112 x 7168
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

    /// e4m3 -> bf16 on an H100 (docs/perf/e4m3-all-kernels-h100.csv): at 16 x 4096 x 4096 the
    /// 64x64 overlapped pingpong kernel (cluster 1x2x1) is the fastest of the menu (11.3 us; the
    /// narrow swapped stream-K kernel 15.2 us).
    #[test]
    fn fp8_decode_picks_the_overlapped_pingpong_kernel() {
        let all = menu(DataType::E4M3, DataType::Bf16);
        let candidates: Vec<KernelSpec> = all
            .iter()
            .filter(|s| !superseded(s, all.iter()))
            .copied()
            .collect();
        let s = pick_in(candidates, 16, 4096, 4096);
        assert_eq!(
            (s.tile, s.cluster, s.kernel_schedule),
            (
                [64, 64, 128],
                [1, 2, 1],
                KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap
            ),
            "{}",
            s.name()
        );
    }

    #[test]
    fn only_overlapped_fp8_kernels_with_a_1x2_cluster_raster_along_m() {
        let along_m: Vec<KernelSpec> = catalog::sm90()
            .into_iter()
            .filter(|s| default_schedule(s).raster == 1)
            .collect();
        // e4m3 -> bf16 and f16, 128x128x128, persistent.
        assert_eq!(along_m.len(), 2, "{along_m:?}");
        for s in &along_m {
            assert_eq!(
                (s.tile, s.cluster, s.kernel_schedule),
                (
                    [128, 128, 128],
                    [1, 2, 1],
                    KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap
                )
            );
        }
        assert!(catalog::sm90()
            .iter()
            .all(|s| default_schedule(s).swizzle == 0 && default_schedule(s).splits == 0));
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
}
