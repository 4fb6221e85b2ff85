//! Every catalog name equals the name CUTLASS's own generator (`cutlass_library`, from the
//! nvidia-cutlass wheel that `scripts/bootstrap.sh` installs) gives the same configuration.

use std::io::Write;
use std::process::{Command, Stdio};

use cutlass_kernels::{catalog, EpilogueSchedule, KernelSchedule, TileScheduler};

fn line(s: &cutlass_kernels::KernelSpec) -> String {
    let x = |v: [u32; 3]| format!("{}x{}x{}", v[0], v[1], v[2]);
    // cutlass_library's KernelScheduleType member names (they order words differently from the
    // C++ policy names).
    let ks = match s.kernel_schedule {
        KernelSchedule::TmaWarpSpecializedCooperative => "TmaWarpSpecializedCooperative",
        KernelSchedule::TmaWarpSpecializedPingpong => "TmaWarpSpecializedPingpong",
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
        other => panic!("add {other:?} to this test"),
    };
    let es = match s.epilogue_schedule {
        EpilogueSchedule::TmaWarpSpecializedCooperative => "TmaWarpSpecializedCooperative",
        EpilogueSchedule::TmaWarpSpecialized => "TmaWarpSpecialized",
        EpilogueSchedule::TmaWarpSpecialized1Sm => "TmaWarpSpecialized1Sm",
        EpilogueSchedule::TmaWarpSpecialized2Sm => "TmaWarpSpecialized2Sm",
        EpilogueSchedule::Auto => "ScheduleAuto",
        other => panic!("add {other:?} to this test"),
    };
    let ts = match s.tile_scheduler {
        TileScheduler::Persistent => "Persistent",
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
    ]
    .join("\t")
}

#[test]
fn catalog_names_equal_cutlass_library_procedural_names() {
    let root = env!("CARGO_MANIFEST_DIR");
    let pythonpath = std::env::var("CUTLASS_LIBRARY_PYTHONPATH")
        .unwrap_or_else(|_| format!("{root}/third_party/toolchain"));
    let specs = catalog::all();
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
    println!(
        "{} names compared with cutlass_library, 0 differ",
        specs.len()
    );
}
