//! One kernel instantiation as data, and its procedural name.

use crate::types::{Arch, DataType, Layout};

/// One operand of a GEMM as a kernel sees it: element type, layout and alignment in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Operand {
    /// Element type.
    pub ty: DataType,
    /// Layout in memory.
    pub layout: Layout,
    /// Alignment in elements that the kernel requires of the base pointer, the leading dimension,
    /// the batch stride and the contiguous extent.
    pub align: u32,
}

impl Operand {
    /// An operand aligned for TMA: 16 bytes.
    pub const fn tma(ty: DataType, layout: Layout) -> Operand {
        Operand {
            ty,
            layout,
            align: ty.tma_alignment(),
        }
    }
}

/// The mainloop schedule (`KernelSchedule` in CUTLASS).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KernelSchedule {
    /// `KernelTmaWarpSpecializedCooperative`: two consumer warp groups share one output tile.
    TmaWarpSpecializedCooperative,
    /// `KernelTmaWarpSpecializedPingpong`: two consumer warp groups alternate over output tiles.
    TmaWarpSpecializedPingpong,
}

impl KernelSchedule {
    /// The suffix in procedural names (`KernelScheduleSuffixes` in `cutlass_library`).
    pub const fn suffix(self) -> &'static str {
        match self {
            KernelSchedule::TmaWarpSpecializedCooperative => "_warpspecialized_cooperative",
            KernelSchedule::TmaWarpSpecializedPingpong => "_warpspecialized_pingpong",
        }
    }

    /// The C++ policy type.
    pub const fn cpp_type(self) -> &'static str {
        match self {
            KernelSchedule::TmaWarpSpecializedCooperative => {
                "cutlass::gemm::KernelTmaWarpSpecializedCooperative"
            }
            KernelSchedule::TmaWarpSpecializedPingpong => {
                "cutlass::gemm::KernelTmaWarpSpecializedPingpong"
            }
        }
    }

    /// Short name for listings.
    pub const fn short_name(self) -> &'static str {
        match self {
            KernelSchedule::TmaWarpSpecializedCooperative => "cooperative",
            KernelSchedule::TmaWarpSpecializedPingpong => "pingpong",
        }
    }
}

/// The epilogue schedule (`EpilogueSchedule` in CUTLASS).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EpilogueSchedule {
    /// `TmaWarpSpecializedCooperative`: TMA-store epilogue for cooperative mainloops.
    TmaWarpSpecializedCooperative,
    /// `TmaWarpSpecialized`: TMA-store epilogue for pingpong mainloops.
    TmaWarpSpecialized,
}

impl EpilogueSchedule {
    /// The suffix in procedural names (`EpilogueScheduleSuffixes` in `cutlass_library`).
    pub const fn suffix(self) -> &'static str {
        match self {
            EpilogueSchedule::TmaWarpSpecializedCooperative
            | EpilogueSchedule::TmaWarpSpecialized => "_epi_tma",
        }
    }

    /// The C++ policy type.
    pub const fn cpp_type(self) -> &'static str {
        match self {
            EpilogueSchedule::TmaWarpSpecializedCooperative => {
                "cutlass::epilogue::TmaWarpSpecializedCooperative"
            }
            EpilogueSchedule::TmaWarpSpecialized => "cutlass::epilogue::TmaWarpSpecialized",
        }
    }
}

/// The tile scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TileScheduler {
    /// The persistent data-parallel scheduler (CUTLASS's default; no name suffix).
    Persistent,
}

impl TileScheduler {
    /// The suffix in procedural names (`TileSchedulerSuffixes` in `cutlass_library`).
    pub const fn suffix(self) -> &'static str {
        match self {
            TileScheduler::Persistent => "",
        }
    }

    /// The C++ tag type.
    pub const fn cpp_type(self) -> &'static str {
        match self {
            TileScheduler::Persistent => "cutlass::gemm::PersistentScheduler",
        }
    }
}

/// One GEMM kernel instantiation: everything that the generated code, the name and the runtime
/// checks depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelSpec {
    /// Target architecture.
    pub arch: Arch,
    /// A (m x k).
    pub a: Operand,
    /// B (k x n).
    pub b: Operand,
    /// C (m x n), the source of the epilogue.
    pub c: Operand,
    /// D (m x n), the output.
    pub d: Operand,
    /// Accumulator type.
    pub accumulator: DataType,
    /// Type of alpha, beta and the epilogue's arithmetic.
    pub compute: DataType,
    /// CTA tile (m, n, k) in elements.
    pub tile: [u32; 3],
    /// Cluster shape (m, n, k) in CTAs.
    pub cluster: [u32; 3],
    /// Pipeline stages; 0 lets the collective builder choose (`StageCountAutoCarveout`).
    pub stages: u32,
    /// Mainloop schedule.
    pub kernel_schedule: KernelSchedule,
    /// Epilogue schedule.
    pub epilogue_schedule: EpilogueSchedule,
    /// Tile scheduler.
    pub tile_scheduler: TileScheduler,
}

impl KernelSpec {
    /// The procedural name, compatible with `cutlass_library`'s `GemmOperation.procedural_name()`
    /// for CUTLASS 3.x kernels:
    /// `cutlass3x_sm{arch}_tensorop_gemm_{a}_{b}_{acc}_{c}_{d}_{tile}_{cluster}_{stages}_{layouts}_align{n}{scheduler}{schedule}{epilogue}`.
    ///
    /// It names the generated file, the C symbols and what `CUTLASS_RS_KERNELS` matches.
    pub fn name(&self) -> String {
        let join = |v: &[u32; 3]| format!("{}x{}x{}", v[0], v[1], v[2]);
        format!(
            "cutlass3x_sm{arch}_tensorop_gemm_{a}_{b}_{acc}_{c}_{d}_{tile}_{cluster}_{stages}_{la}{lb}{lc}_align{align}{sched}{ks}{es}",
            arch = self.arch.number(),
            a = self.a.ty.short_name(),
            b = self.b.ty.short_name(),
            acc = self.accumulator.short_name(),
            c = self.c.ty.short_name(),
            d = self.d.ty.short_name(),
            tile = join(&self.tile),
            cluster = join(&self.cluster),
            stages = self.stages,
            la = self.a.layout.letter(),
            lb = self.b.layout.letter(),
            lc = self.c.layout.letter(),
            align = self.a.align.max(self.b.align),
            sched = self.tile_scheduler.suffix(),
            ks = self.kernel_schedule.suffix(),
            es = self.epilogue_schedule.suffix(),
        )
    }

    /// The two-letter A/B layout, as in the seed tables (`TN` = row-major A, column-major B).
    pub fn layout_name(&self) -> String {
        let up = |l: Layout| l.letter().to_ascii_uppercase();
        format!("{}{}", up(self.a.layout), up(self.b.layout))
    }

    /// Checks the rules that make a spec instantiable; `Err` says which rule fails.
    pub fn validate(&self) -> Result<(), String> {
        let name = self.name();
        for (op, o) in [("A", self.a), ("B", self.b), ("C", self.c), ("D", self.d)] {
            if o.align == 0 || (o.align * o.ty.bits()) % 128 != 0 {
                return Err(format!(
                    "{name}: operand {op} alignment {} elements of {} is not a multiple of 16 bytes, as TMA needs",
                    o.align, o.ty
                ));
            }
        }
        if self.c.layout != self.d.layout {
            return Err(format!("{name}: C and D must have the same layout"));
        }
        if self.tile.iter().chain(self.cluster.iter()).any(|&v| v == 0) {
            return Err(format!("{name}: tile and cluster extents must be positive"));
        }
        match self.arch {
            Arch::Sm90a => {
                let cluster_size: u32 = self.cluster.iter().product();
                if cluster_size > 8 || self.cluster[2] != 1 {
                    return Err(format!(
                        "{name}: SM90 clusters have at most 8 CTAs and cluster k = 1"
                    ));
                }
                let tile_k_bytes = self.tile[2] * self.a.ty.bits() / 8;
                if tile_k_bytes % 128 != 0 {
                    return Err(format!(
                        "{name}: SM90 tile k must span a multiple of 128 bytes (one 128B swizzle atom)"
                    ));
                }
                match self.kernel_schedule {
                    KernelSchedule::TmaWarpSpecializedCooperative => {
                        if self.tile[0] % 128 != 0 {
                            return Err(format!(
                                "{name}: the cooperative schedule needs tile m a multiple of 128"
                            ));
                        }
                        if self.epilogue_schedule != EpilogueSchedule::TmaWarpSpecializedCooperative
                        {
                            return Err(format!(
                                "{name}: the cooperative schedule needs the cooperative epilogue"
                            ));
                        }
                    }
                    KernelSchedule::TmaWarpSpecializedPingpong => {
                        if self.tile[0] % 64 != 0 {
                            return Err(format!(
                                "{name}: the pingpong schedule needs tile m a multiple of 64"
                            ));
                        }
                        if self.epilogue_schedule != EpilogueSchedule::TmaWarpSpecialized {
                            return Err(format!(
                                "{name}: the pingpong schedule needs the TmaWarpSpecialized epilogue"
                            ));
                        }
                    }
                }
                if self.tile[1] % 8 != 0 || self.tile[1] > 256 {
                    return Err(format!(
                        "{name}: the wgmma n extent must be a multiple of 8 and at most 256"
                    ));
                }
            }
            Arch::Sm100a | Arch::Sm120a => {
                return Err(format!(
                    "{name}: code generation for {} arrives with the catalog issue; only sm90a kernels can be built",
                    self.arch
                ));
            }
        }
        Ok(())
    }
}
