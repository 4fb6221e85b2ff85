//! `census.tsv` covers the whole catalog (every entry has a row) and what the catalog issue asks:
//! every type row of Tables 1–3 in each
//! of its layouts, every tile row of Tables 4–13 and 16–20 (its table, tile, density and policy),
//! a representative SM90 set per type and the block-scaled-output entries; every entry recorded
//! as passing contains the MMA instruction the tables imply and trips no rule of
//! `KernelSpec::cutlass_limit`, and every failure is one of those CUTLASS 4.2 limits, with the
//! compiler message that shows it; each rule is shown by a failure.

use std::collections::HashMap;

use cutlass_gemm_catalog::limits::check_census_result;
use cutlass_gemm_catalog::{catalog, tables, tile_tables, Arch, DataType, KernelSpec};

struct Row {
    status: String,
    ptx: String,
    kind_ok: bool,
}

fn census() -> HashMap<String, Row> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/census.tsv");
    let text = std::fs::read_to_string(path).expect("census.tsv");
    assert!(text.starts_with("# nvcc"), "the census names its toolchain");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("name\t"))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 5, "{l}");
            (
                f[0].to_string(),
                Row {
                    status: f[1].to_string(),
                    ptx: f[3].to_string(),
                    kind_ok: f[4] == "1",
                },
            )
        })
        .collect()
}

#[test]
fn census_covers_every_table_row_and_explains_every_failure() {
    let census = census();
    let specs: HashMap<String, KernelSpec> =
        catalog::all().into_iter().map(|s| (s.name(), s)).collect();
    for (name, row) in &census {
        let spec = specs
            .get(name)
            .unwrap_or_else(|| panic!("{name} is in the census but not in the catalog"));
        assert!(
            row.status == "pass" || row.status == "fail",
            "{name}: status {}",
            row.status
        );
        if let Err(why) = check_census_result(spec, row.status == "pass", &row.ptx, row.kind_ok) {
            panic!("{why}");
        }
    }
    // The whole catalog: every entry has a row, which passes with the expected MMA or fails on a
    // named CUTLASS 4.2 limit (checked above). A new entry needs its row: `cutlass-profiler
    // census` compiles the entries the file lacks.
    let mut missing: Vec<&String> = specs.keys().filter(|n| !census.contains_key(*n)).collect();
    missing.sort();
    assert!(
        missing.is_empty(),
        "{} of {} catalog entries have no census row (the first: {}); run `cutlass-profiler census`",
        missing.len(),
        specs.len(),
        missing[0]
    );
    let in_census = |f: &dyn Fn(&KernelSpec) -> bool| census.keys().any(|n| f(&specs[n]));
    // Every type row in each of its layouts.
    for r in tables::TABLE_1
        .iter()
        .chain(tables::TABLE_2)
        .chain(tables::TABLE_3)
    {
        for &(la, lb) in r.layouts() {
            assert!(
                in_census(&|s| s
                    .origin
                    .is_some_and(|o| (o.type_table, o.type_row) == (r.table, r.row))
                    && (s.a.layout, s.b.layout) == (la, lb)),
                "Table {} row {} in {la:?}/{lb:?} is not in the census",
                r.table,
                r.row
            );
        }
    }
    // Every tile row: table, tile, density, policy.
    let mut tile_rows = 0;
    for t in tile_tables::TILE_TABLES {
        for r in t.rows {
            tile_rows += 1;
            assert!(
                in_census(&|s| s.origin.is_some_and(|o| o.tile_table == t.table)
                    && s.op_class.is_sparse() == r.sparse
                    && [s.tile[0], s.tile[1]] == [r.m, r.n]
                    && r.policies.contains(&s.kernel_schedule.policy())),
                "table {} tile row {}x{} ({:?}, sparse {}) is not in the census",
                t.table,
                r.m,
                r.n,
                r.policies,
                r.sparse
            );
        }
    }
    // A representative SM90 set: every input type and every SM90 schedule.
    for ty in [
        DataType::F16,
        DataType::Bf16,
        DataType::Tf32,
        DataType::I8,
        DataType::U8,
        DataType::E4M3,
        DataType::E5M2,
    ] {
        assert!(
            in_census(&|s| s.arch == Arch::Sm90a && s.a.ty == ty),
            "no SM90 {ty} entry"
        );
    }
    for s90 in catalog::sm90() {
        assert!(
            in_census(&|s| s.arch == Arch::Sm90a && s.kernel_schedule == s90.kernel_schedule),
            "no SM90 entry with {}",
            s90.kernel_schedule.policy()
        );
    }
    for o in catalog::sm100_block_scaled_outputs() {
        assert!(
            census.contains_key(&o.name()),
            "{} is not in the census",
            o.name()
        );
    }
    // Each rule of cutlass_limit is shown by a failing census row with its assertion.
    for limit in cutlass_gemm_catalog::CutlassLimit::ALL {
        assert!(
            census.iter().any(|(n, r)| r.status == "fail"
                && specs[n].cutlass_limit() == Some(limit)
                && r.ptx.contains(limit.assertion())),
            "no census row shows {limit}"
        );
    }
    let passed = census.values().filter(|r| r.status == "pass").count();
    let diverging = census
        .values()
        .filter(|r| r.status == "pass" && !r.kind_ok)
        .count();
    println!(
        "census: {} entries, {passed} pass ({} with the expected MMA, {diverging} with a documented other kind), {} CUTLASS 4.2 limits; {tile_rows} tile rows covered",
        census.len(),
        passed - diverging,
        census.len() - passed
    );
}
