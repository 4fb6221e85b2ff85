//! `profile`'s results: the measured rows, the terminal table, the CSV file and the summaries.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use cutlass_gemm::ScheduleHints;
use serde::{Deserialize, Serialize};

use crate::args::{KernelMode, Pdl};
use crate::device::Roofline;
use crate::kind::Kind;
use crate::shapes::Shape;

/// One measured plan on one shape.
#[derive(Clone, Debug)]
pub struct Row {
    pub shape: Shape,
    pub kind: Kind,
    pub kernel: String,
    /// The tile-scheduler hints of the measured plan.
    pub schedule: ScheduleHints,
    /// The heuristic's choice when it differs from the measured kernel (`--kernels all`).
    pub heuristic: Option<String>,
    /// Programmatic dependent launch: `None` where the kernel has none, else whether the measured
    /// plan used it.
    pub pdl: Option<bool>,
    /// Seconds per launch, this crate's plan.
    pub ours_s: f64,
    /// Seconds per launch, the reference library (`None` where it has no algorithm).
    pub theirs_s: Option<f64>,
    /// max |ours - reference| / max |reference|.
    pub max_rel_diff: f64,
    /// Whether `max_rel_diff` is within the type's tolerance.
    pub ok: bool,
}

impl Row {
    pub fn flops(&self) -> f64 {
        2.0 * self.shape.m as f64 * self.shape.n as f64 * self.shape.k as f64
    }

    pub fn bytes(&self) -> f64 {
        let s = &self.shape;
        ((s.m * s.k + s.n * s.k) * self.kind.input_bytes() + s.m * s.n * self.kind.output_bytes())
            as f64
    }

    pub fn tflops(&self, secs: f64) -> f64 {
        self.flops() / secs / 1e12
    }

    /// The roofline for this problem (TFLOP/s) and whether memory binds.
    pub fn roof(&self, roofline: &Roofline) -> (f64, bool) {
        roofline.bound(self.kind, self.flops(), self.bytes())
    }

    /// Reference time over ours: above 1 where this crate is faster.
    pub fn ratio(&self) -> Option<f64> {
        self.theirs_s.map(|t| t / self.ours_s)
    }
}

/// The tile, cluster, layout and schedule part of a procedural kernel name.
fn short(kernel: &str) -> String {
    kernel
        .split_once("_f32_")
        .map(|(_, rest)| rest.to_string())
        .unwrap_or_else(|| kernel.to_string())
}

pub fn print_header() {
    println!(
        "{:<24} {:<6} {:>6} {:>6} {:>6} {:>9} {:>9} {:>6} {:>6} {:>4} {:>9}  kernel",
        "shape", "type", "m", "n", "k", "TFLOP/s", "ref", "ratio", "roof%", "bnd", "maxdiff"
    );
}

pub fn print_row(roofline: &Roofline, r: &Row) {
    let (roof, mem) = r.roof(roofline);
    let ours = r.tflops(r.ours_s);
    let theirs = r.theirs_s.map(|t| r.tflops(t));
    let mark = if r.ok { "" } else { "  MISMATCH" };
    let mut sched = match r.schedule {
        ScheduleHints {
            swizzle: 0 | 1,
            raster: 0,
            ..
        } => String::new(),
        h => format!(
            " [swizzle {} along {}]",
            h.swizzle.max(1),
            ["-", "M", "N"][h.raster.min(2) as usize]
        ),
    };
    if r.schedule.splits > 1 {
        sched += &format!(" [split-K {}]", r.schedule.splits);
    }
    if r.pdl == Some(false) {
        sched += " [no PDL]";
    }
    let h = match &r.heuristic {
        Some(h) if *h != r.kernel => format!(" (heuristic: {})", short(h)),
        _ => String::new(),
    };
    println!(
        "{:<24} {:<6} {:>6} {:>6} {:>6} {:>9.1} {:>9} {:>6} {:>6.1} {:>4} {:>9.2e}  {}{h}{mark}",
        r.shape.name,
        r.kind.label(),
        r.shape.m,
        r.shape.n,
        r.shape.k,
        ours,
        theirs.map_or("-".into(), |t| format!("{t:.1}")),
        theirs.map_or("-".into(), |t| format!("{:.3}", ours / t)),
        100.0 * ours / roof,
        if mem { "mem" } else { "comp" },
        r.max_rel_diff,
        short(&r.kernel) + &sched,
    );
}

/// The CSV's columns: cutlass_profiler's where they overlap, then this tool's.
pub const CSV_COLUMNS: [&str; 31] = [
    "Problem",
    "Provider",
    "OperationKind",
    "Operation",
    "Disposition",
    "Status",
    "gemm_kind",
    "m",
    "n",
    "k",
    "A",
    "B",
    "C",
    "D",
    "alpha",
    "beta",
    "batch_count",
    "Bytes",
    "Flops",
    "Runtime",
    "GB/s",
    "GFLOPs",
    "shape",
    "roofline_pct",
    "ratio_vs_reference",
    "max_rel_diff",
    "device",
    "raster_order",
    "swizzle_size",
    "split_k_slices",
    "pdl",
];

/// One CSV line, field for field in [`CSV_COLUMNS`]' order. Numbers that have a fixed format
/// are written as text.
#[derive(Serialize)]
struct CsvRecord<'a> {
    problem: usize,
    provider: &'a str,
    operation_kind: &'static str,
    operation: &'a str,
    disposition: &'static str,
    status: &'static str,
    gemm_kind: &'static str,
    m: usize,
    n: usize,
    k: usize,
    a: String,
    b: String,
    c: String,
    d: String,
    alpha: u8,
    beta: u8,
    batch_count: u8,
    /// `{:.0}`
    bytes: String,
    /// `{:.0}`
    flops: String,
    /// Milliseconds, `{:.6}`.
    runtime: String,
    /// `{:.1}`
    gb_per_s: String,
    /// `{:.1}`
    gflops: String,
    shape: &'a str,
    /// `{:.1}`
    roofline_pct: String,
    /// Reference time over ours, `{:.4}`, on this crate's lines; empty on the reference's.
    ratio_vs_reference: String,
    /// `{:.3e}`
    max_rel_diff: String,
    device: String,
    raster_order: &'static str,
    swizzle_size: u8,
    split_k_slices: u16,
    /// `on`, `off`, or `-` for kernels without programmatic dependent launch (and the reference).
    pdl: &'static str,
}

impl<'a> CsvRecord<'a> {
    /// Problem `problem`'s line for one provider, measured at `secs` per launch.
    fn new(
        problem: usize,
        roofline: &Roofline,
        r: &'a Row,
        (provider, operation): (&'a str, &'a str),
        secs: f64,
        ratio: String,
        pdl: &'static str,
    ) -> CsvRecord<'a> {
        let t = r.kind.cutlass_profiler_type();
        let out = r.kind.cutlass_profiler_output();
        let (roof, _) = r.roof(roofline);
        CsvRecord {
            problem,
            provider,
            operation_kind: "gemm",
            operation,
            disposition: if r.ok { "passed" } else { "incorrect" },
            status: "success",
            gemm_kind: "universal",
            m: r.shape.m,
            n: r.shape.n,
            k: r.shape.k,
            a: format!("{t}:row"),
            b: format!("{t}:column"),
            c: format!("{out}:row"),
            d: format!("{out}:row"),
            alpha: 1,
            beta: 0,
            batch_count: 1,
            bytes: format!("{:.0}", r.bytes()),
            flops: format!("{:.0}", r.flops()),
            runtime: format!("{:.6}", secs * 1e3),
            gb_per_s: format!("{:.1}", r.bytes() / secs / 1e9),
            gflops: format!("{:.1}", r.flops() / secs / 1e9),
            shape: &r.shape.name,
            roofline_pct: format!("{:.1}", 100.0 * r.tflops(secs) / roof),
            ratio_vs_reference: ratio,
            max_rel_diff: format!("{:.3e}", r.max_rel_diff),
            device: roofline.device.replace(',', " "),
            raster_order: ["heuristic", "along_m", "along_n"][r.schedule.raster.min(2) as usize],
            swizzle_size: r.schedule.swizzle.max(1),
            split_k_slices: r.schedule.splits.max(1),
            pdl,
        }
    }
}

/// Writes every row as CSV: per row, this crate's line, then the reference's (same problem
/// number) where it ran.
pub fn write_csv(path: &Path, roofline: &Roofline, rows: &[Row]) -> Result<()> {
    let file = std::fs::File::create(path).with_context(|| format!("{}", path.display()))?;
    write_csv_to(file, roofline, rows).with_context(|| format!("{}", path.display()))
}

fn write_csv_to(out: impl Write, roofline: &Roofline, rows: &[Row]) -> Result<()> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(out);
    w.write_record(CSV_COLUMNS)?;
    for (i, r) in rows.iter().enumerate() {
        let ratio = r.ratio().map_or(String::new(), |x| format!("{x:.4}"));
        let pdl = match r.pdl {
            Some(true) => "on",
            Some(false) => "off",
            None => "-",
        };
        let ours = ("cutlass-rs", r.kernel.as_str());
        w.serialize(CsvRecord::new(
            i + 1,
            roofline,
            r,
            ours,
            r.ours_s,
            ratio,
            pdl,
        ))?;
        if let Some(t) = r.theirs_s {
            let theirs = (r.kind.reference(), r.kind.reference());
            w.serialize(CsvRecord::new(
                i + 1,
                roofline,
                r,
                theirs,
                t,
                String::new(),
                "-",
            ))?;
        }
    }
    w.flush()?;
    Ok(())
}

/// The columns of a CSV line that [`read_csv`] needs (the reader skips the others).
#[derive(Deserialize)]
struct CsvLine {
    #[serde(rename = "Problem")]
    problem: usize,
    #[serde(rename = "Provider")]
    provider: String,
    #[serde(rename = "Operation")]
    operation: String,
    #[serde(rename = "Disposition")]
    disposition: String,
    m: usize,
    n: usize,
    k: usize,
    #[serde(rename = "A")]
    a: String,
    /// Milliseconds.
    #[serde(rename = "Runtime")]
    runtime: f64,
    shape: String,
    max_rel_diff: f64,
    device: String,
    /// Absent from files written before the column existed.
    #[serde(default)]
    pdl: String,
}

/// Reads a CSV that [`write_csv`] wrote back into rows (for `cutlass-profiler chart`): this
/// crate's line of each problem with the reference's time beside it. Returns the device too.
pub fn read_csv(path: &Path) -> Result<(String, Vec<Row>)> {
    let mut reader = csv::Reader::from_path(path).with_context(|| format!("{}", path.display()))?;
    let (mut rows, mut device) = (Vec::<(usize, Row)>::new(), String::new());
    for line in reader.deserialize::<CsvLine>() {
        let l = line.with_context(|| format!("{}", path.display()))?;
        let secs = l.runtime / 1e3;
        if l.provider != "cutlass-rs" {
            if let Some((_, ours)) = rows.iter_mut().rev().find(|(p, _)| *p == l.problem) {
                ours.theirs_s = Some(secs);
            }
            continue;
        }
        let ty = l.a.split(':').next().unwrap_or("");
        let kind = if l.operation.contains("1x128f32") {
            Kind::Fp8Blockwise
        } else {
            [Kind::Bf16, Kind::F16, Kind::E4m3, Kind::Tf32, Kind::I8]
                .into_iter()
                .find(|k| k.cutlass_profiler_type() == ty)
                .with_context(|| format!("{}: unknown type {ty}", path.display()))?
        };
        device = l.device;
        rows.push((
            l.problem,
            Row {
                shape: Shape {
                    name: l.shape,
                    m: l.m,
                    n: l.n,
                    k: l.k,
                },
                kind,
                kernel: l.operation,
                schedule: ScheduleHints::default(),
                heuristic: None,
                pdl: match l.pdl.as_str() {
                    "on" => Some(true),
                    "off" => Some(false),
                    _ => None,
                },
                ours_s: secs,
                theirs_s: None,
                max_rel_diff: l.max_rel_diff,
                ok: l.disposition == "passed",
            },
        ));
    }
    Ok((device, rows.into_iter().map(|(_, r)| r).collect()))
}

/// Per shape, the fastest measured kernel of this crate (all rows in heuristic mode), among the
/// plans launched with programmatic dependent launch where the kernel has it (`Pdl::On`, the
/// library's default) or without it (`Pdl::Off`).
pub fn best_rows(rows: &[Row], kind: Kind, pdl: Pdl) -> Vec<&Row> {
    let mine = rows_of(rows, kind, pdl);
    let references = median_references_s(&mine);
    let adjusted = |r: &Row| drift_adjusted_s(r, references.get(r.shape.name.as_str()).copied());
    let mut out: Vec<&Row> = Vec::new();
    for &r in &mine {
        match out.iter_mut().find(|b| b.shape.name == r.shape.name) {
            Some(b) if adjusted(r) < adjusted(b) => *b = r,
            Some(_) => {}
            None => out.push(r),
        }
    }
    out
}

/// The rows of one type and launch mode (`Pdl::On` and `Pdl::Both` take the rows with PDL or
/// without a mode).
fn rows_of(rows: &[Row], kind: Kind, pdl: Pdl) -> Vec<&Row> {
    let launch = |r: &Row| match pdl {
        Pdl::Off => r.pdl != Some(true),
        _ => r.pdl != Some(false),
    };
    rows.iter()
        .filter(|r| r.kind == kind && launch(r))
        .collect()
}

/// Per shape, the median time of the reference over the races of its rows (of those that have
/// one; the mean of the two middle ones for an even count).
pub fn median_references_s<'a>(rows: &[&'a Row]) -> std::collections::HashMap<&'a str, f64> {
    let mut times: std::collections::HashMap<&str, Vec<f64>> = std::collections::HashMap::new();
    for r in rows {
        if let Some(t) = r.theirs_s {
            times.entry(r.shape.name.as_str()).or_default().push(t);
        }
    }
    times
        .into_iter()
        .map(|(shape, mut t)| {
            t.sort_by(f64::total_cmp);
            let n = t.len();
            (shape, (t[(n - 1) / 2] + t[n / 2]) / 2.0)
        })
        .collect()
}

/// A row's time corrected for the clock's drift over a run of many kernels: scaled by how far the
/// reference of its own race ran from the shape's median reference time (`--kernels all` races
/// each kernel against the reference; over an exhaustive H100 run the reference's time moved by
/// up to 11 % within one shape). A race whose reference ran more than a fifth off the median (a
/// one-off stall of the reference, not drift) is not corrected.
pub fn drift_adjusted_s(r: &Row, median_reference: Option<f64>) -> f64 {
    match (r.theirs_s, median_reference) {
        (Some(t), Some(m)) if t > 0.0 && (t / m - 1.0).abs() <= 0.2 => r.ours_s * m / t,
        _ => r.ours_s,
    }
}

/// The geometric mean of positive ratios.
pub fn geometric_mean(ratios: &[f64]) -> f64 {
    (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp()
}

/// Per type (and launch mode with `--pdl both`): the geometric mean of the ratio to the
/// reference over the shapes, the lowest ratio, and with `--kernels all` how far the heuristic's
/// pick is from the best kernel.
pub fn summarize(rows: &[Row], kinds: &[Kind], mode: &KernelMode, pdl: Pdl) {
    // Kernel against kernel first: cuBLAS launches without programmatic dependent launch.
    let launches: &[Pdl] = match pdl {
        Pdl::Both => &[Pdl::Off, Pdl::On],
        _ => &[pdl],
    };
    for &kind in kinds {
        for &launch in launches {
            summarize_kind(rows, kind, mode, launch, pdl == Pdl::Both);
        }
        if pdl == Pdl::Both {
            if let Some(gain) = pdl_gain(rows, kind) {
                println!(
                    "{}: programmatic dependent launch saves {:.1}% of the time (geometric mean over the shapes; a second number: cuBLAS has none)",
                    kind.label(),
                    100.0 * (1.0 - 1.0 / gain)
                );
            }
        }
    }
}

/// The geometric mean over the shapes of (best time without PDL) / (best time with PDL), each
/// measured against the reference of its own race where both were.
pub fn pdl_gain(rows: &[Row], kind: Kind) -> Option<f64> {
    let off = best_rows(rows, kind, Pdl::Off);
    let on = best_rows(rows, kind, Pdl::On);
    let gains: Vec<f64> = off
        .iter()
        .filter_map(|o| {
            on.iter()
                .find(|r| r.shape.name == o.shape.name)
                .map(|r| match (r.ratio(), o.ratio()) {
                    // Each against the reference of its own race (cuBLAS has no PDL: a fixed
                    // yardstick across the two modes, under the clock of each race).
                    (Some(with), Some(without)) => with / without,
                    _ => o.ours_s / r.ours_s,
                })
        })
        .collect();
    (!gains.is_empty()).then(|| geometric_mean(&gains))
}

fn summarize_kind(rows: &[Row], kind: Kind, mode: &KernelMode, launch: Pdl, label: bool) {
    let label = match (label, launch) {
        (false, _) => "",
        (true, Pdl::Off) => ", kernel against kernel (no programmatic dependent launch)",
        (true, _) => {
            ", with programmatic dependent launch where the kernel has it (second number: cuBLAS has none)"
        }
    };
    let best = best_rows(rows, kind, launch);
    let ratios: Vec<f64> = best.iter().filter_map(|r| r.ratio()).collect();
    if ratios.is_empty() {
        return;
    }
    let geo = geometric_mean(&ratios);
    let min = ratios.iter().cloned().fold(f64::INFINITY, f64::min);
    println!(
        "{}: geometric mean {geo:.3}x {} over {} shapes, lowest {min:.3}x{label}{}",
        kind.label(),
        kind.reference(),
        ratios.len(),
        if matches!(mode, KernelMode::All) {
            " (best kernel per shape)"
        } else {
            ""
        }
    );
    if matches!(mode, KernelMode::All) {
        // How far the heuristic's pick is from the best measured kernel.
        let references = median_references_s(&rows_of(rows, kind, launch));
        let mut worst = (1.0f64, String::new());
        for b in &best {
            let h = rows.iter().find(|r| {
                r.kind == kind
                    && r.shape.name == b.shape.name
                    && r.pdl == b.pdl
                    && Some(&r.kernel) == r.heuristic.as_ref()
            });
            if let Some(h) = h {
                let reference = references.get(b.shape.name.as_str()).copied();
                let f = drift_adjusted_s(b, reference) / drift_adjusted_s(h, reference);
                if f < worst.0 {
                    worst = (f, b.shape.name.clone());
                }
            }
        }
        println!(
            "{}: the heuristic's pick reaches {:.3} of the best kernel's speed at worst ({})",
            kind.label(),
            worst.0,
            if worst.1.is_empty() { "-" } else { &worst.1 }
        );
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const KERNEL: &str = "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_2x1x1_0_tnt_align8_warpspecialized_cooperative_epi_tma";

    /// A roofline that reproduces the H100 rows of `bench/training/bf16-decode-h100.csv`.
    pub(crate) fn h100() -> Roofline {
        Roofline {
            device: "NVIDIA H100 80GB HBM3".into(),
            peak_bf16: 989.4,
            copy_gbs: 3001.3,
        }
    }

    pub(crate) fn row(
        name: &str,
        (m, n, k): (usize, usize, usize),
        ours_ms: f64,
        theirs_ms: f64,
    ) -> Row {
        Row {
            shape: Shape {
                name: name.into(),
                m,
                n,
                k,
            },
            kind: Kind::Bf16,
            kernel: KERNEL.into(),
            schedule: ScheduleHints::default(),
            heuristic: Some(KERNEL.into()),
            pdl: Some(true),
            ours_s: ours_ms * 1e-3,
            theirs_s: Some(theirs_ms * 1e-3),
            max_rel_diff: 0.0,
            ok: true,
        }
    }

    #[test]
    fn csv_reads_back_what_it_wrote() {
        let mut off = row("b", (16, 4096, 4096), 0.5, 0.25);
        off.pdl = Some(false);
        let mut fp8bw = row("c", (128, 7168, 16384), 0.75, 0.5);
        fp8bw.kind = Kind::Fp8Blockwise;
        fp8bw.kernel =
            "cutlass3x_sm90_tensorop_gemm_1x128f32xe4m3_128x128f32xe4m3_f32_bf16_bf16".into();
        fp8bw.pdl = None;
        fp8bw.theirs_s = None;
        let rows = [row("a", (128, 128, 128), 2.0, 1.0), off, fp8bw];
        let path = std::env::temp_dir().join(format!("profiler-csv-{}.csv", std::process::id()));
        write_csv(&path, &h100(), &rows).unwrap();
        let (device, back) = read_csv(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(device, "NVIDIA H100 80GB HBM3");
        assert_eq!(back.len(), rows.len());
        for (a, b) in rows.iter().zip(&back) {
            assert_eq!(
                (a.kind, a.pdl, &a.shape.name),
                (b.kind, b.pdl, &b.shape.name)
            );
            assert!((a.ours_s - b.ours_s).abs() < 1e-12);
            assert_eq!(a.theirs_s.is_some(), b.theirs_s.is_some());
            if let (Some(x), Some(y)) = (a.theirs_s, b.theirs_s) {
                assert!((x - y).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn csv_lines_match_the_training_files() {
        let rows = [row(
            "llama3-8b-qkv-m16",
            (16, 6144, 4096),
            0.0432466,
            0.02198196,
        )];
        let mut out = Vec::new();
        write_csv_to(&mut out, &h100(), &rows).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // bench/training/bf16-decode-h100.csv's header and first problem, which predate the
        // `pdl` column.
        let training = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/training/bf16-decode-h100.csv"),
        )
        .unwrap();
        let expected: Vec<&str> = training.lines().take(3).collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[0], format!("{},pdl", expected[0]));
        assert_eq!(lines[1], format!("{},on", expected[1]));
        assert_eq!(lines[2], format!("{},-", expected[2]));
    }

    #[test]
    fn csv_header_only_without_rows() {
        let mut out = Vec::new();
        write_csv_to(&mut out, &h100(), &[]).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            CSV_COLUMNS.join(",") + "\n"
        );
    }

    #[test]
    fn the_best_row_is_chosen_with_the_clock_drift_corrected() {
        // "drifted" ran faster in absolute time, but its race's reference ran faster still (the
        // clock was higher then); "steady" is the faster kernel at the same clock.
        let mut drifted = row("a", (128, 128, 128), 1.0, 0.9);
        drifted.kernel = "drifted".into();
        let mut steady = row("a", (128, 128, 128), 1.05, 1.0);
        steady.kernel = "steady".into();
        let mut third = row("a", (128, 128, 128), 1.2, 1.0);
        third.kernel = "third".into();
        let rows = [drifted, steady, third];
        let best = best_rows(&rows, Kind::Bf16, Pdl::On);
        assert_eq!(best.len(), 1);
        assert_eq!(best[0].kernel, "steady");
        let all: Vec<&Row> = rows.iter().collect();
        let m = median_references_s(&all).get("a").copied();
        assert_eq!(m, Some(1.0e-3));
        assert!((drift_adjusted_s(&rows[0], m) - 1.0e-3 / 0.9).abs() < 1e-12);
        // A reference that stalled (five times its median) corrects nothing: the kernel of that
        // race is not taken for the fastest on its account.
        let mut stalled = row("a", (128, 128, 128), 1.1, 5.0);
        stalled.kernel = "stalled".into();
        let rows = [rows[0].clone(), rows[1].clone(), rows[2].clone(), stalled];
        assert_eq!(best_rows(&rows, Kind::Bf16, Pdl::On)[0].kernel, "steady");
        let all: Vec<&Row> = rows.iter().collect();
        // An even count: the mean of the two middle times (1.0 and 1.0 ms).
        let m = median_references_s(&all).get("a").copied();
        assert_eq!(m, Some(1.0e-3));
        assert!((drift_adjusted_s(&rows[3], m) - 1.1e-3).abs() < 1e-12);
    }

    #[test]
    fn best_rows_per_shape() {
        let mut slow = row("a", (128, 128, 128), 2.0, 1.0);
        slow.kernel = "slow".into();
        let rows = [
            slow,
            row("a", (128, 128, 128), 1.0, 1.0),
            row("b", (64, 64, 64), 1.0, 2.0),
        ];
        let best = best_rows(&rows, Kind::Bf16, Pdl::On);
        assert_eq!(best.len(), 2);
        assert_eq!(best[0].kernel, KERNEL);
        let ratios: Vec<f64> = best.iter().filter_map(|r| r.ratio()).collect();
        assert!((geometric_mean(&ratios) - 2f64.sqrt()).abs() < 1e-12);
    }
}
