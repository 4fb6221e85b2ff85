//! Every catalog name equals the name CUTLASS's own generator (`cutlass_library`, from the
//! nvidia-cutlass wheel that `scripts/bootstrap.sh` installs) gives the same configuration.

use std::io::Write;
use std::process::{Command, Stdio};

use cutlass_gemm_catalog::spec::OpClass;
use cutlass_gemm_catalog::{
    catalog, Blockwise, EpilogueSchedule, Fusion, KernelSchedule, KernelSpec, MixedInputMode,
    ScaleOrder, TileScheduler,
};

fn line(s: &cutlass_gemm_catalog::KernelSpec) -> String {
    let x = |v: [u32; 3]| format!("{}x{}x{}", v[0], v[1], v[2]);
    // cutlass_library's KernelScheduleType member names (they order words differently from the
    // C++ policy names).
    let ks = match s.kernel_schedule {
        KernelSchedule::TmaWarpSpecializedCooperative => "TmaWarpSpecializedCooperative",
        KernelSchedule::TmaWarpSpecializedPingpong => "TmaWarpSpecializedPingpong",
        KernelSchedule::TmaWarpSpecialized => "TmaWarpSpecialized",
        KernelSchedule::TmaWarpSpecializedCooperativeFp8FastAccum => {
            "TmaWarpSpecializedCooperativeFP8FastAccum"
        }
        KernelSchedule::TmaWarpSpecializedPingpongFp8FastAccum => {
            "TmaWarpSpecializedPingpongFP8FastAccum"
        }
        KernelSchedule::TmaWarpSpecializedCooperativeFp8Blockwise => {
            "BlockwiseTmaWarpSpecializedCooperative"
        }
        KernelSchedule::Sm100OneSm => "TmaWarpSpecialized1SmSm100",
        KernelSchedule::Sm100TwoSm => "TmaWarpSpecialized2SmSm100",
        KernelSchedule::Sm100Mxf8f6f4OneSm => "Mxf8f6f4TmaWarpSpecialized1SmSm100",
        KernelSchedule::Sm100Mxf8f6f4TwoSm => "Mxf8f6f4TmaWarpSpecialized2SmSm100",
        KernelSchedule::Sm100Mxf4OneSm => "Mxf4TmaWarpSpecialized1SmSm100",
        KernelSchedule::Sm100Mxf4TwoSm => "Mxf4TmaWarpSpecialized2SmSm100",
        KernelSchedule::Sm100Nvf4OneSm => "Nvf4TmaWarpSpecialized1SmSm100",
        KernelSchedule::Sm100Nvf4TwoSm => "Nvf4TmaWarpSpecialized2SmSm100",
        KernelSchedule::Sm120Mxf8f6f4Cooperative => "Mxf8f6f4TmaWarpSpecializedCooperativeSm120",
        KernelSchedule::Sm120Mxf8f6f4Pingpong => "Mxf8f6f4TmaWarpSpecializedPingpongSm120",
        KernelSchedule::PtrArrayTmaWarpSpecializedCooperative => {
            "PtrArrayTmaWarpSpecializedCooperative"
        }
        KernelSchedule::PtrArrayTmaWarpSpecializedPingpong => "PtrArrayTmaWarpSpecializedPingpong",
        KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8Blockwise => {
            "PtrArrayBlockwiseTmaWarpSpecializedCooperative"
        }
        KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8Blockwise => {
            "PtrArrayBlockwiseTmaWarpSpecializedPingpong"
        }
        KernelSchedule::Sm100SparseOneSm => "SparseTmaWarpSpecialized1SmSm100",
        KernelSchedule::Sm100SparseTwoSm => "SparseTmaWarpSpecialized2SmSm100",
        KernelSchedule::Sm100Auto => "ScheduleAuto",
        KernelSchedule::Sm100BlockScaledOneSm => "BlockScaledTmaWarpSpecialized1SmSm100",
        KernelSchedule::Sm100BlockScaledTwoSm => "BlockScaledTmaWarpSpecialized2SmSm100",
        KernelSchedule::PtrArraySm100OneSm => "PtrArrayTmaWarpSpecialized1SmSm100",
        KernelSchedule::PtrArraySm100TwoSm => "PtrArrayTmaWarpSpecialized2SmSm100",
        KernelSchedule::PtrArraySm100Mxf8f6f4OneSm => "PtrArrayMxf8f6f4TmaWarpSpecialized1SmSm100",
        KernelSchedule::PtrArraySm100Mxf8f6f4TwoSm => "PtrArrayMxf8f6f4TmaWarpSpecialized2SmSm100",
        KernelSchedule::PtrArraySm100Nvf4OneSm => "PtrArrayNvf4TmaWarpSpecialized1SmSm100",
        KernelSchedule::PtrArraySm100Nvf4TwoSm => "PtrArrayNvf4TmaWarpSpecialized2SmSm100",
        other => panic!("add {other:?} to this test"),
    };
    let es = match s.epilogue_schedule {
        EpilogueSchedule::TmaWarpSpecializedCooperative => "TmaWarpSpecializedCooperative",
        EpilogueSchedule::TmaWarpSpecialized => "TmaWarpSpecialized",
        EpilogueSchedule::TmaWarpSpecialized1Sm => "TmaWarpSpecialized1Sm",
        EpilogueSchedule::TmaWarpSpecialized2Sm => "TmaWarpSpecialized2Sm",
        EpilogueSchedule::Auto => "ScheduleAuto",
        EpilogueSchedule::NoSmemWarpSpecialized => "NoSmemWarpSpecialized",
        EpilogueSchedule::NoSmemWarpSpecialized1Sm => "NoSmemWarpSpecialized1Sm",
        EpilogueSchedule::NoSmemWarpSpecialized2Sm => "NoSmemWarpSpecialized2Sm",
        EpilogueSchedule::PtrArrayTmaWarpSpecializedCooperative => {
            "PtrArrayTmaWarpSpecializedCooperative"
        }
        EpilogueSchedule::PtrArrayTmaWarpSpecializedPingpong => {
            "PtrArrayTmaWarpSpecializedPingpong"
        }
        EpilogueSchedule::PtrArrayTmaWarpSpecialized1Sm => "PtrArrayTmaWarpSpecialized1Sm",
        EpilogueSchedule::PtrArrayTmaWarpSpecialized2Sm => "PtrArrayTmaWarpSpecialized2Sm",
        other => panic!("add {other:?} to this test"),
    };
    let ts = match s.tile_scheduler {
        TileScheduler::Persistent => "Persistent",
        TileScheduler::StreamK => "StreamK",
        other => panic!("add {other:?} to this test"),
    };
    [
        s.arch.number().to_string(),
        s.a.ty.short_name().into(),
        s.b.ty.short_name().into(),
        s.accumulator.short_name().into(),
        s.c.ty.short_name().into(),
        s.d.ty.short_name().into(),
        s.a.layout.letter().into(),
        s.b.layout.letter().into(),
        s.c.layout.letter().into(),
        s.a.align.to_string(),
        s.b.align.to_string(),
        s.c.align.to_string(),
        s.d.align.to_string(),
        x(s.tile),
        x(s.cluster),
        s.stages.to_string(),
        ks.into(),
        es.into(),
        ts.into(),
        s.op_class.name().into(),
        s.block_scale
            .map_or("-".to_string(), |b| b.sf.short_name().to_string()),
        s.blockwise
            .map_or("-".to_string(), |b| format!("{}x{}x{}", b.m, b.n, b.k)),
        s.output_scale.map_or("-".to_string(), |o| {
            format!("{}x{}", o.sf.short_name(), o.vec)
        }),
        // A mixed-input kernel's MixedInputMode member and whether it is shuffled.
        s.mixed_input.map_or("-".to_string(), |x| {
            let mode = match x.mode {
                MixedInputMode::ConvertOnly => "ConvertOnly",
                MixedInputMode::ScaleOnly => "ScaleOnly",
                MixedInputMode::ScaleWithZeroPoint => "ScaleWithZeroPoint",
                other => panic!("add {other:?} to this test"),
            };
            format!("{mode}{}", if x.shuffled { "+shfl" } else { "" })
        }),
    ]
    .join("\t")
}

/// Where python3 finds `cutlass_library`: `CUTLASS_LIBRARY_PYTHONPATH`, else this repository's
/// `third_party/toolchain` (scripts/bootstrap.sh), else python3's own packages.
fn python_path() -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    std::env::var("CUTLASS_LIBRARY_PYTHONPATH").unwrap_or_else(|_| {
        let tp = format!("{root}/../third_party/toolchain");
        if std::path::Path::new(&tp).join("cutlass_library").is_dir() {
            tp
        } else {
            std::env::var("PYTHONPATH").unwrap_or_default()
        }
    })
}

#[test]
fn catalog_names_equal_cutlass_library_procedural_names() {
    let root = env!("CARGO_MANIFEST_DIR");
    let pythonpath = python_path();
    // cutlass_library 4.2 has no sparse block-scaled kernels (no schedule, no opcode class) and
    // none of this crate's own schedules (the overlapped FP8 mainloop): those names are this
    // catalog's own extension of its scheme, checked for uniqueness (and the own schedules' names
    // against their CUTLASS twin's, below).
    let (mut specs, ours): (Vec<_>, Vec<_>) = catalog::all().into_iter().partition(|s| {
        s.op_class != OpClass::BlockScaledSparseTensorOp
            && s.kernel_schedule.mainloop_wrapper().is_none()
            && s.fusion == Fusion::LinearCombination
            && s.blockwise.is_none_or(|b| b.order == ScaleOrder::MnMajor)
            && s.mixed_input.is_none_or(|m| m.group == 0)
    });
    // SM100 mixed-input kernels (cutlass_library 4.2 has no mixed-input schedule for SM100, and its
    // names show no mixed-input mode from SM100 on): the name cutlass_library gives the same
    // configuration with the dense schedule of the MMA's SM count, plus the mode's suffix and
    // `_g{group}` before the tile (as SM90 mixed-input names place the mode); that twin goes to
    // cutlass_library.
    for s in ours
        .iter()
        .filter(|s| s.mixed_input.is_some_and(|m| m.group > 0))
    {
        let mx = s.mixed_input.unwrap();
        let mut twin = *s;
        twin.kernel_schedule = match s.kernel_schedule {
            KernelSchedule::Sm100MixedInputOneSm => KernelSchedule::Sm100OneSm,
            KernelSchedule::Sm100MixedInputTwoSm => KernelSchedule::Sm100TwoSm,
            other => panic!("add {other:?} to this test"),
        };
        twin.mixed_input = None;
        let tile = format!("_{}x{}x{}_", s.tile[0], s.tile[1], s.tile[2]);
        assert_eq!(
            s.name(),
            twin.name()
                .replacen(&tile, &format!("{}{tile}", mx.suffix()), 1)
        );
        specs.push(twin);
    }
    // K-major blockwise scales (this crate's grouped blockwise kernels): the name of the entry
    // with CUTLASS's M-/N-major scales plus `_sfk`; that twin goes to cutlass_library (when it
    // has CUTLASS's own main loop).
    for s in ours
        .iter()
        .filter(|s| s.blockwise.is_some_and(|b| b.order == ScaleOrder::KMajor))
    {
        let mut twin = *s;
        twin.blockwise = s.blockwise.map(|b| Blockwise {
            order: ScaleOrder::MnMajor,
            ..b
        });
        assert_eq!(s.name(), twin.name() + "_sfk");
        if s.kernel_schedule.mainloop_wrapper().is_none() {
            specs.push(twin);
        }
    }
    // Fused and gated epilogues (this crate's own): the name of the kernel with CUTLASS's
    // epilogue (and the same epilogue schedule), plus the fusion's suffix; that twin goes to
    // cutlass_library when it has CUTLASS's own main loop.
    for s in ours
        .iter()
        .filter(|s| s.fusion != Fusion::LinearCombination)
    {
        let twin = KernelSpec {
            fusion: Fusion::LinearCombination,
            ..*s
        };
        assert_eq!(s.name(), twin.name() + &s.fusion.suffix());
        // (Unless an entry of that name is there already: the kernels for unaligned outputs
        // have the same epilogue and a name that does not show D's alignment.)
        if s.fusion.is_gated()
            && s.kernel_schedule.mainloop_wrapper().is_none()
            && !specs.iter().any(|x| x.name() == twin.name())
        {
            specs.push(twin);
        }
    }
    for s in ours
        .iter()
        .filter(|s| s.kernel_schedule.mainloop_wrapper().is_some())
    {
        // The name of the CUTLASS kernel whose mainloop it wraps, with `_fp8_overlap` added to
        // the schedule suffix.
        let mut twin = *s;
        twin.kernel_schedule = match s.kernel_schedule {
            KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap => {
                KernelSchedule::TmaWarpSpecializedCooperative
            }
            KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap => {
                KernelSchedule::TmaWarpSpecializedPingpong
            }
            KernelSchedule::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap => {
                KernelSchedule::TmaWarpSpecializedCooperativeFp8Blockwise
            }
            KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8BlockwiseOverlap => {
                KernelSchedule::PtrArrayTmaWarpSpecializedCooperativeFp8Blockwise
            }
            KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8BlockwiseOverlap => {
                KernelSchedule::PtrArrayTmaWarpSpecializedPingpongFp8Blockwise
            }
            other => panic!("add {other:?} to this test"),
        };
        let suffix = twin.kernel_schedule.suffix();
        assert_eq!(
            s.name(),
            twin.name()
                .replace(suffix, &format!("{suffix}_fp8_overlap")),
        );
    }
    let input: String = specs.iter().map(|s| line(s) + "\n").collect();
    let mut child = Command::new("python3")
        .arg(format!("{root}/tests/python/cutlass_library_names.py"))
        .env("PYTHONPATH", &pythonpath)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 is needed for this test");
    // Feed stdin from a thread: thousands of lines would fill both pipes otherwise.
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "cutlass_library failed (run scripts/bootstrap.sh, or set CUTLASS_LIBRARY_PYTHONPATH): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(theirs.len(), specs.len());
    for (s, t) in specs.iter().zip(&theirs) {
        assert_eq!(&s.name(), t);
    }
    let all: std::collections::HashSet<String> =
        specs.iter().chain(&ours).map(|s| s.name()).collect();
    assert_eq!(all.len(), specs.len() + ours.len(), "names are not unique");
    println!(
        "{} names compared with cutlass_library, 0 differ; {} sparse block-scaled and own-schedule names (not in cutlass_library 4.2) unique",
        specs.len(),
        ours.len()
    );
}

/// SM90 entries CUTLASS's generator does not emit, and why they are in the catalog anyway.
const BEYOND_GENERATOR: &[(&str, &str)] = &[
    (
        "_f32_f32_f32_128x256x64_2x1x1_0_",
        "16-bit inputs with an f32 TMA-store output at 128x256x64: the generator's shared-memory \
     heuristic prunes it, yet it compiles (census.tsv) and passes the GPU tests \
     (cutlass-gemm/tests/gpu/gemm.rs, f32 output with beta and C); it is the default f32-output kernel",
    ),
    (
        "_64x8x64_1x2x1_0_tnn_align8_warpspecialized_pingpong_",
        "16-bit pingpong with wgmma N = 8 (the generator emits no SM90 tile narrower than 16): \
         the tile cuBLASLt runs at M = 16 through the operand swap, compiled by CUTLASS's builder \
         and verified by cutlass-gemm/tests/gpu/gemm.rs; 16 x 4096 x 4096 bf16 0.88x -> 1.04x cuBLAS \
         (docs/performance.md); with its f32-output twins for split-K with a reduction",
    ),
    (
        "x128f32xe4m3_f32_bf16_bf16_64x128x128_1x1x1_0_tnt_align16_warpspecialized_pingpong_",
        "grouped FP8 blockwise with the pingpong schedule: the generator emits blockwise kernels \
         with the cooperative schedule only, yet CUTLASS 4.2 has \
         KernelPtrArrayTmaWarpSpecializedPingpongFP8Blockwise, its builder builds it (census.tsv) \
         and cutlass-gemm/tests/gpu/grouped.rs checks it against the f64 reference: the tile for \
         groups of a few rows",
    ),
    (
        "x128f32xe4m3_f32_f16_f16_64x128x128_1x1x1_0_tnt_align16_warpspecialized_pingpong_",
        "the f16-output twin of the entry above",
    ),
];

/// Every SM90 entry is a configuration CUTLASS's own generator (`cutlass_library/generator.py`,
/// exhaustive instantiation level, with the level-3 wgmma shapes of the catalog's tile N) emits:
/// same types, tile, cluster, schedules and alignment. The generator writes column-major C/D; the
/// catalog's C/D are row-major (column-major outputs go through the transpose identity, see
/// ARCHITECTURE.md), so the C/D layout letter is compared as column-major.
#[test]
fn sm90_entries_are_emitted_by_cutlass_generator() {
    let root = env!("CARGO_MANIFEST_DIR");
    let pythonpath = python_path();
    // The tile N extents of the catalog (= wgmma N): the generator adds its level-3 wgmma shapes
    // (N = 96, 144, 176, ...) for these only.
    let wgmma_n: std::collections::BTreeSet<u32> = catalog::sm90()
        .iter()
        .filter(|s| s.kernel_schedule.mainloop_wrapper().is_none())
        .map(|s| s.tile[1])
        .collect();
    let wgmma_n: Vec<String> = wgmma_n.iter().map(u32::to_string).collect();
    let out = Command::new("python3")
        .arg(format!("{root}/tests/python/cutlass_generator_sm90.py"))
        .arg("--wgmma-n")
        .arg(wgmma_n.join(","))
        .env("PYTHONPATH", &pythonpath)
        .output()
        .expect("python3 is needed for this test");
    assert!(
        out.status.success(),
        "cutlass_library's generator failed (run scripts/bootstrap.sh, or set CUTLASS_LIBRARY_PYTHONPATH): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let emitted: std::collections::HashSet<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert!(emitted.len() > 1000, "only {} names", emitted.len());
    let (mut found, mut excepted, mut own, mut unaligned_output) = (0, 0, 0, 0);
    for s in catalog::sm90() {
        // A fused epilogue or one with an auxiliary output (this crate's own): its twin with
        // CUTLASS's epilogue is checked.
        if s.fusion.is_fused() || s.fusion.has_aux() {
            assert!(catalog::sm90().contains(&KernelSpec {
                fusion: Fusion::LinearCombination,
                ..s
            }));
            continue;
        }
        // The gated epilogue (this crate's own): its twin with CUTLASS's TMA epilogue is checked.
        if s.fusion.is_gated() {
            let pingpong = matches!(
                s.kernel_schedule,
                KernelSchedule::TmaWarpSpecializedPingpong
                    | KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap
            );
            let tma = if pingpong {
                EpilogueSchedule::TmaWarpSpecialized
            } else {
                EpilogueSchedule::TmaWarpSpecializedCooperative
            };
            assert!(catalog::sm90().contains(&KernelSpec {
                fusion: Fusion::LinearCombination,
                epilogue_schedule: tma,
                ..s
            }));
            continue;
        }
        // K-major blockwise scales (`_sfk`, this crate's grouped blockwise kernels): the
        // generator emits the configuration with CUTLASS's M-/N-major scales.
        let name = s.name();
        let name = name
            .strip_suffix(ScaleOrder::KMajor.suffix())
            .unwrap_or(&name)
            .to_string();
        // This crate's own schedules (CUTLASS's kernels with a mainloop of ours): checked by name
        // in the test above, and on the GPU against their CUTLASS twins (cutlass-gemm/tests/gpu/fp8.rs).
        if s.kernel_schedule.mainloop_wrapper().is_some() {
            own += 1;
            continue;
        }
        // C and D of alignment 1 (an epilogue without shared memory, for outputs TMA cannot
        // store): the generator emits alignment-1 outputs with A and B of alignment 2 or 4 only
        // (GenerateSM90_TensorOp_16b_WGMMA_alignx_gemm), and names them as their aligned twins;
        // the configuration is its aligned twin's, checked by that name below, and compiled and
        // run by the GPU tests (cutlass-gemm/tests/gpu/gemm.rs, any_shape).
        if s.d.align < s.d.ty.tma_alignment() {
            unaligned_output += 1;
        }
        let layouts = format!("_{}t_align", s.layout_name().to_lowercase());
        let as_generated = name.replace(
            &layouts,
            &format!("_{}n_align", s.layout_name().to_lowercase()),
        );
        if emitted.contains(&as_generated) {
            found += 1;
        } else {
            let why = BEYOND_GENERATOR
                .iter()
                .find(|(part, _)| name.contains(part));
            assert!(
                why.is_some(),
                "{name} is not emitted by CUTLASS's generator (looked for {as_generated})"
            );
            excepted += 1;
        }
    }
    println!(
        "{found} SM90 entries emitted by CUTLASS's generator ({} names; {unaligned_output} of them with alignment-1 outputs), {excepted} documented exceptions, {own} of this crate's own schedules",
        emitted.len()
    );
    // The exceptions stay few, each explained in BEYOND_GENERATOR.
    assert!(excepted <= 14, "{excepted} exceptions");
}
