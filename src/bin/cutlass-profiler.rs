//! `cutlass-profiler`: the kernel catalog from the command line (like cutlass_profiler's
//! enumerate mode).
//!
//! ```text
//! cutlass-profiler list [--format tsv|json|table] [--filter PATTERNS]
//! ```
//! PATTERNS: comma-separated name patterns, as `CUTLASS_RS_KERNELS` takes them (`*`/`?` globs over
//! the whole name, plain text as a substring).

use std::io::Write;
use std::process::ExitCode;

use cutlass_kernels::catalog::{self, NameFilter};
use cutlass_kernels::KernelSpec;

const USAGE: &str = "usage: cutlass-profiler list [--format tsv|json|table] [--filter PATTERNS]";
const COLUMNS: [&str; 15] = [
    "name",
    "arch",
    "sparse",
    "a",
    "b",
    "layout",
    "align_a",
    "align_b",
    "tile",
    "sm",
    "policy",
    "kind",
    "type_table",
    "type_row",
    "tile_table",
];

fn fields(s: &KernelSpec) -> [String; 15] {
    let ty = |t: cutlass_kernels::DataType| match s.block_scale {
        Some(bs) => format!("{}x{}", bs.sf.short_name(), t.short_name()),
        None => t.short_name().to_string(),
    };
    let origin = |f: fn(&cutlass_kernels::spec::Origin) -> u8| {
        s.origin.map_or("-".to_string(), |o| f(&o).to_string())
    };
    [
        s.name(),
        format!("sm{}", s.arch.tag()),
        "0".into(),
        ty(s.a.ty),
        ty(s.b.ty),
        s.layout_name(),
        s.a.align.to_string(),
        s.b.align.to_string(),
        format!("{}x{}x{}", s.tile[0], s.tile[1], s.tile[2]),
        s.kernel_schedule.sms().to_string(),
        s.kernel_schedule.policy().to_string(),
        catalog::expected_mma(s),
        origin(|o| o.type_table),
        origin(|o| o.type_row),
        origin(|o| o.tile_table),
    ]
}

fn json_string(v: &str) -> String {
    let mut out = String::from("\"");
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) != Some("list") {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    let (mut format, mut filter) = ("table".to_string(), NameFilter::parse(""));
    let mut it = args[1..].iter();
    while let Some(a) = it.next() {
        match (a.as_str(), it.next()) {
            ("--format", Some(f)) if ["tsv", "json", "table"].contains(&f.as_str()) => {
                format = f.clone()
            }
            ("--filter", Some(p)) => filter = NameFilter::parse(p),
            _ => {
                eprintln!("{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let rows: Vec<[String; 15]> = catalog::all()
        .iter()
        .filter(|s| filter.is_empty() || filter.matches(&s.name()))
        .map(fields)
        .collect();
    let mut out = std::io::stdout().lock();
    let result = match format.as_str() {
        "tsv" => {
            let mut r = writeln!(out, "{}", COLUMNS.join("\t"));
            for row in &rows {
                r = r.and_then(|_| writeln!(out, "{}", row.join("\t")));
            }
            r
        }
        "json" => {
            let items: Vec<String> = rows
                .iter()
                .map(|row| {
                    let kv: Vec<String> = COLUMNS
                        .iter()
                        .zip(row)
                        .map(|(k, v)| {
                            let numeric = ["sparse", "align_a", "align_b", "sm"].contains(k)
                                || (["type_table", "type_row", "tile_table"].contains(k)
                                    && v != "-");
                            format!(
                                "{}: {}",
                                json_string(k),
                                if numeric { v.clone() } else { json_string(v) }
                            )
                        })
                        .collect();
                    format!("  {{{}}}", kv.join(", "))
                })
                .collect();
            writeln!(out, "[\n{}\n]", items.join(",\n"))
        }
        _ => {
            let widths: Vec<usize> = (1..15)
                .map(|i| {
                    rows.iter()
                        .map(|r| r[i].len())
                        .chain([COLUMNS[i].len()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let line = |r: &[String]| -> String {
                let cols: Vec<String> = (1..15)
                    .map(|i| format!("{:<w$}", r[i], w = widths[i - 1]))
                    .collect();
                format!("{}  {}", cols.join("  "), r[0])
            };
            let header: Vec<String> = COLUMNS.iter().map(|s| s.to_string()).collect();
            let mut r = writeln!(out, "{}", line(&header));
            for row in &rows {
                r = r.and_then(|_| writeln!(out, "{}", line(row)));
            }
            r.and_then(|_| writeln!(out, "{} entries", rows.len()))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cutlass-profiler: {e}");
            ExitCode::FAILURE
        }
    }
}
