//! `cutlass-profiler list`: the kernel catalog as a table, TSV or JSON.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use cutlass_gemm_catalog::catalog;
use cutlass_gemm_catalog::KernelSpec;
use serde::{Serialize, Serializer};

use crate::args::{ListArgs, ListFormat};

/// The columns, in order (also the JSON keys).
const COLUMNS: [&str; 16] = [
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
    "cutlass_4_2",
];

/// One catalog entry as listed. Field order is [`COLUMNS`]' order.
#[derive(Debug, Serialize)]
struct Entry {
    name: String,
    arch: String,
    sparse: u8,
    a: String,
    b: String,
    layout: String,
    align_a: u32,
    align_b: u32,
    tile: String,
    sm: u8,
    policy: &'static str,
    /// The MMA instruction the tables imply.
    kind: String,
    /// The table and row of CUTLASS's Blackwell documentation an SM100/SM120 entry comes from (`-` for the SM90 menu).
    #[serde(serialize_with = "number_or_dash")]
    type_table: Option<u8>,
    #[serde(serialize_with = "number_or_dash")]
    type_row: Option<u8>,
    #[serde(serialize_with = "number_or_dash")]
    tile_table: Option<u8>,
    /// `builds`, or the CUTLASS 4.2 limit that refuses the entry (`KernelSpec::cutlass_limit`)
    /// with its assertion's source.
    cutlass_4_2: String,
}

fn number_or_dash<S: Serializer>(v: &Option<u8>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(n) => s.serialize_u8(*n),
        None => s.serialize_str("-"),
    }
}

impl Entry {
    fn new(s: &KernelSpec) -> Entry {
        Entry {
            name: s.name(),
            arch: format!("sm{}", s.arch.tag()),
            sparse: u8::from(s.op_class.is_sparse()),
            a: s.operand_label(false),
            b: s.operand_label(true),
            layout: s.layout_name(),
            align_a: s.a.align,
            align_b: s.b.align,
            tile: format!("{}x{}x{}", s.tile[0], s.tile[1], s.tile[2]),
            sm: s.mma_sms(),
            policy: s.kernel_schedule.policy(),
            kind: catalog::expected_mma(s),
            type_table: s.origin.map(|o| o.type_table),
            type_row: s.origin.map(|o| o.type_row),
            tile_table: s.origin.map(|o| o.tile_table),
            cutlass_4_2: s
                .cutlass_limit()
                .map_or("builds".to_string(), |l| format!("refused: {}", l.source())),
        }
    }

    /// The columns as text, in [`COLUMNS`]' order.
    fn cells(&self) -> [String; 16] {
        let dash = |v: Option<u8>| v.map_or("-".to_string(), |n| n.to_string());
        [
            self.name.clone(),
            self.arch.clone(),
            self.sparse.to_string(),
            self.a.clone(),
            self.b.clone(),
            self.layout.clone(),
            self.align_a.to_string(),
            self.align_b.to_string(),
            self.tile.clone(),
            self.sm.to_string(),
            self.policy.to_string(),
            self.kind.clone(),
            dash(self.type_table),
            dash(self.type_row),
            dash(self.tile_table),
            self.cutlass_4_2.clone(),
        ]
    }
}

pub fn main(args: &ListArgs) -> ExitCode {
    let entries: Vec<Entry> = catalog::all()
        .iter()
        .filter(|s| args.filter.is_empty() || args.filter.matches(&s.name()))
        .map(Entry::new)
        .collect();
    let out = std::io::stdout().lock();
    let result = match args.format {
        ListFormat::Tsv => write_tsv(out, &entries),
        ListFormat::Json => write_json(out, &entries),
        ListFormat::Table => write_table(out, &entries),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cutlass-profiler: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Output cut short by the reader (`| head`): not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    let kind = if let Some(e) = e.downcast_ref::<std::io::Error>() {
        Some(e.kind())
    } else if let Some(e) = e.downcast_ref::<serde_json::Error>() {
        e.io_error_kind()
    } else if let Some(e) = e.downcast_ref::<csv::Error>() {
        match e.kind() {
            csv::ErrorKind::Io(e) => Some(e.kind()),
            _ => None,
        }
    } else {
        None
    };
    kind == Some(std::io::ErrorKind::BrokenPipe)
}

fn write_tsv(out: impl Write, entries: &[Entry]) -> Result<()> {
    let mut w = csv::WriterBuilder::new().delimiter(b'\t').from_writer(out);
    w.write_record(COLUMNS)?;
    for e in entries {
        w.write_record(e.cells())?;
    }
    w.flush()?;
    Ok(())
}

/// A JSON array, one object a line, `", "` and `": "` between items.
fn write_json(mut out: impl Write, entries: &[Entry]) -> Result<()> {
    writeln!(out, "[")?;
    for (i, e) in entries.iter().enumerate() {
        out.write_all(b"  ")?;
        let mut ser = serde_json::Serializer::with_formatter(&mut out, OneLine);
        e.serialize(&mut ser)?;
        out.write_all(if i + 1 < entries.len() { b",\n" } else { b"\n" })?;
    }
    writeln!(out, "]")?;
    Ok(())
}

/// serde_json's compact layout with a space after each `,` and `:`.
struct OneLine;

impl serde_json::ser::Formatter for OneLine {
    fn begin_object_key<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

/// Columns padded to their widest cell, the name last, then the count.
fn write_table(mut out: impl Write, entries: &[Entry]) -> Result<()> {
    let rows: Vec<[String; 16]> = entries.iter().map(Entry::cells).collect();
    let widths: Vec<usize> = (1..16)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([COLUMNS[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |r: &[String]| -> String {
        let cols: Vec<String> = (1..16)
            .map(|i| format!("{:<w$}", r[i], w = widths[i - 1]))
            .collect();
        format!("{}  {}", cols.join("  "), r[0])
    };
    let header: Vec<String> = COLUMNS.iter().map(|s| s.to_string()).collect();
    writeln!(out, "{}", line(&header))?;
    for row in &rows {
        writeln!(out, "{}", line(row))?;
    }
    writeln!(out, "{} entries", rows.len())?;
    Ok(())
}
