//! `profile --svg PREFIX`: two SVG charts per type, from the fastest plan per shape (launched with
//! programmatic dependent launch where the kernel has it):
//!
//! - `PREFIX-TYPE.svg`: TFLOP/s of cutlass-rs and of the reference library per shape, as grouped
//!   bars;
//! - `PREFIX-TYPE-ratio.svg`: the ratio cutlass-rs / reference (TFLOP/s) per shape, sorted, as
//!   bars from 1.0, with the geometric mean marked.

use std::path::{Path, PathBuf};

use anyhow::Result;
use plotters::coord::combinators::{BindKeyPoints, WithKeyPoints};
use plotters::coord::types::{RangedCoordf64, RangedCoordi32};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::args::{ChartArgs, Pdl};
use crate::kind::Kind;
use crate::report::{best_rows, geometric_mean, read_csv, Row};

const OURS: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const THEIRS: RGBColor = RGBColor(0x99, 0x99, 0x99);
const SLOWER: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
const MEAN: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const FONT: &str = "sans-serif";

/// Width of one shape on the category axis: shape `i` spans `[i * SLOT, (i + 1) * SLOT)`.
const SLOT: i32 = 100;

type Chart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<WithKeyPoints<RangedCoordi32>, RangedCoordf64>>;

/// `cutlass-profiler chart`: the charts of every type in a profile CSV.
pub fn main(args: &ChartArgs) -> std::process::ExitCode {
    let run = || -> Result<()> {
        let (device, rows) = read_csv(&args.csv)?;
        let mut kinds: Vec<Kind> = Vec::new();
        for r in &rows {
            if !kinds.contains(&r.kind) {
                kinds.push(r.kind);
            }
        }
        for kind in kinds {
            for path in write_charts(&args.svg, &device, &rows, kind)? {
                println!("wrote {}", path.display());
            }
        }
        Ok(())
    };
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cutlass-profiler chart: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Writes the type's charts; returns the files written (the ratio chart only where the reference
/// ran).
///
/// The charts compare kernel against kernel: our launches without programmatic dependent launch
/// (cuBLAS uses none) where the run measured them (`--pdl off` or `both`), else as launched.
pub fn write_charts(prefix: &Path, device: &str, rows: &[Row], kind: Kind) -> Result<Vec<PathBuf>> {
    let of_kind = |pdl: Option<bool>| rows.iter().any(|r| r.kind == kind && r.pdl == pdl);
    let (best, launch) = if of_kind(Some(false)) || !of_kind(Some(true)) {
        (
            best_rows(rows, kind, Pdl::Off),
            "kernel against kernel, no PDL",
        )
    } else {
        (best_rows(rows, kind, Pdl::On), "with PDL")
    };
    let device = &format!("{device} ({launch})");
    let mut written = Vec::new();
    let path = PathBuf::from(format!("{}-{}.svg", prefix.display(), kind.label()));
    tflops_chart(&path, device, &best, kind)?;
    written.push(path);
    let mut ratios: Vec<(&str, f64)> = best
        .iter()
        .filter_map(|r| r.ratio().map(|x| (r.shape.name.as_str(), x)))
        .collect();
    if !ratios.is_empty() {
        ratios.sort_by(|a, b| a.1.total_cmp(&b.1));
        let path = PathBuf::from(format!("{}-{}-ratio.svg", prefix.display(), kind.label()));
        ratio_chart(&path, device, &ratios, kind)?;
        written.push(path);
    }
    Ok(written)
}

/// Shape `i`'s span from `from` to `to` percent of its slot.
fn span(i: usize, from: i32, to: i32) -> (i32, i32) {
    let x = i as i32 * SLOT;
    (x + from * SLOT / 100, x + to * SLOT / 100)
}

/// A chart with one slot per shape along x (labelled with the shape names) and `y_range` up the
/// side, described as `y_desc` with `y_decimals` decimals.
fn bar_chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
    names: &[&str],
    y_range: std::ops::Range<f64>,
    (y_desc, y_decimals): (&str, usize),
) -> Result<Chart<'a, 'b>> {
    let n = names.len() as i32;
    let longest = names.iter().map(|s| s.len()).max().unwrap_or(0) as u32;
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 17))
        .margin(12)
        .x_label_area_size(20 + 7 * longest)
        .y_label_area_size(64)
        .build_cartesian_2d(
            (0..n * SLOT).with_key_points((0..n).map(|i| i * SLOT + SLOT / 2).collect()),
            y_range.clone(),
        )?;
    let y_label = |v: &f64| format!("{v:.y_decimals$}");
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(TRANSPARENT)
        .label_style((FONT, 14))
        // The shape names are drawn below, rotated.
        .x_label_formatter(&|_| String::new())
        .y_label_formatter(&y_label)
        .y_desc(y_desc)
        .axis_desc_style((FONT, 16))
        .draw()?;
    // Each name hangs from its tick mark, read from bottom to top. (The mesh's own labels centre
    // rotated text on the tick.)
    let style = TextStyle::from((FONT, 14).into_font().transform(FontTransform::Rotate270))
        .pos(Pos::new(HPos::Right, VPos::Center));
    for (i, name) in names.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as i32 * SLOT + SLOT / 2, y_range.start));
        root.draw(&Text::new(name.to_string(), (x, y + 10), style.clone()))?;
    }
    Ok(chart)
}

/// The size of a chart of `n` shapes named `names`: wide enough for a readable slot each.
fn size(names: &[&str]) -> (u32, u32) {
    let longest = names.iter().map(|s| s.len()).max().unwrap_or(0) as u32;
    ((140 + 36 * names.len() as u32).max(720), 460 + 7 * longest)
}

fn legend<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>, position: SeriesLabelPosition) -> Result<()> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, 15))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn swatch(color: RGBColor) -> impl Fn((i32, i32)) -> Rectangle<(i32, i32)> {
    move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled())
}

/// (a) TFLOP/s per shape: cutlass-rs and the reference side by side.
fn tflops_chart(path: &Path, device: &str, best: &[&Row], kind: Kind) -> Result<()> {
    let names: Vec<&str> = best.iter().map(|r| r.shape.name.as_str()).collect();
    let max = best
        .iter()
        .flat_map(|r| [Some(r.tflops(r.ours_s)), r.theirs_s.map(|t| r.tflops(t))])
        .flatten()
        .fold(1.0f64, f64::max)
        * 1.2;
    let root = SVGBackend::new(path, size(&names)).into_drawing_area();
    root.fill(&WHITE)?;
    let title = format!(
        "{} TFLOP/s: cutlass-rs vs {}, {device}",
        kind.label(),
        kind.reference()
    );
    let mut chart = bar_chart(&root, &title, &names, 0.0..max, ("TFLOP/s", 0))?;
    chart
        .draw_series(best.iter().enumerate().map(|(i, r)| {
            let (x0, x1) = span(i, 10, 50);
            Rectangle::new([(x0, 0.0), (x1, r.tflops(r.ours_s))], OURS.filled())
        }))?
        .label("cutlass-rs")
        .legend(swatch(OURS));
    chart
        .draw_series(best.iter().enumerate().filter_map(|(i, r)| {
            let (x0, x1) = span(i, 50, 90);
            let t = r.tflops(r.theirs_s?);
            Some(Rectangle::new([(x0, 0.0), (x1, t)], THEIRS.filled()))
        }))?
        .label(kind.reference())
        .legend(swatch(THEIRS));
    legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present()?;
    Ok(())
}

/// (b) The ratio cutlass-rs / reference per shape, sorted ascending, as bars from parity (1.0),
/// with the geometric mean marked.
fn ratio_chart(path: &Path, device: &str, ratios: &[(&str, f64)], kind: Kind) -> Result<()> {
    let names: Vec<&str> = ratios.iter().map(|r| r.0).collect();
    let n = names.len();
    let values: Vec<f64> = ratios.iter().map(|r| r.1).collect();
    let geo = geometric_mean(&values);
    let lo = values.iter().cloned().fold(1.0f64, f64::min);
    let hi = values.iter().cloned().fold(1.0f64, f64::max);
    let pad = ((hi - lo) * 0.1).max(0.02);
    // Room above the bars for the legend.
    let y = (lo - pad).max(0.0)..hi + 3.0 * pad;
    let root = SVGBackend::new(path, size(&names)).into_drawing_area();
    root.fill(&WHITE)?;
    let title = format!(
        "{}: cutlass-rs / {}, sorted, {device}",
        kind.label(),
        kind.reference()
    );
    let y_desc = format!("TFLOP/s ratio cutlass-rs / {}", kind.reference());
    let mut chart = bar_chart(&root, &title, &names, y, (&y_desc, 2))?;
    let bars = |faster: bool| {
        let color = if faster { OURS } else { SLOWER };
        values.iter().enumerate().filter_map(move |(i, &v)| {
            let (x0, x1) = span(i, 15, 85);
            ((v >= 1.0) == faster).then(|| Rectangle::new([(x0, 1.0), (x1, v)], color.filled()))
        })
    };
    chart
        .draw_series(bars(true))?
        .label("cutlass-rs faster")
        .legend(swatch(OURS));
    chart
        .draw_series(bars(false))?
        .label(format!("{} faster", kind.reference()))
        .legend(swatch(SLOWER));
    let end = n as i32 * SLOT;
    chart
        .draw_series(LineSeries::new(
            [(0, 1.0), (end, 1.0)],
            BLACK.stroke_width(1),
        ))?
        .label("parity (1.0)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK.stroke_width(1)));
    chart
        .draw_series(DashedLineSeries::new(
            [(0, geo), (end, geo)],
            8,
            5,
            MEAN.stroke_width(2),
        ))?
        .label(format!("geometric mean {geo:.3}x over {n} shapes"))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], MEAN.stroke_width(2)));
    legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::row;

    #[test]
    fn charts_from_synthetic_rows() {
        let dir =
            std::env::temp_dir().join(format!("cutlass-profiler-charts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rows = [
            row("square-4096", (4096, 4096, 4096), 0.18, 0.19),
            row("llama3-8b-qkv-m16", (16, 6144, 4096), 0.043, 0.022),
            row("llama3-8b-gateup-m4096", (4096, 28672, 4096), 1.35, 1.30),
            row("dsv3-b-m128", (128, 24576, 1536), 0.03, 0.035),
        ];
        let written = write_charts(
            &dir.join("chart"),
            "NVIDIA H100 80GB HBM3",
            &rows,
            Kind::Bf16,
        )
        .unwrap();
        assert_eq!(
            written,
            [dir.join("chart-bf16.svg"), dir.join("chart-bf16-ratio.svg")]
        );
        for path in &written {
            let svg = std::fs::read_to_string(path).unwrap();
            assert!(svg.starts_with("<svg"), "{}", path.display());
            for r in &rows {
                assert!(
                    svg.contains(&r.shape.name),
                    "{} lacks {}",
                    path.display(),
                    r.shape.name
                );
            }
        }
        let ratio = std::fs::read_to_string(&written[1]).unwrap();
        assert!(ratio.contains("geometric mean"));
        // Without reference times there is no ratio chart.
        let mut alone = rows[0].clone();
        alone.theirs_s = None;
        let written = write_charts(&dir.join("alone"), "GPU", &[alone], Kind::Bf16).unwrap();
        assert_eq!(written, [dir.join("alone-bf16.svg")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
