//! The committed tile tables (cutlass-gemm-catalog/src/tile_tables.rs) are exactly what tools/seed_tables.py
//! extracts from the seed document (`../shared/seeds/cutlass-blackwell-sm100-gemms.txt`).

#[test]
fn tile_tables_are_the_seeds() {
    let root = env!("CARGO_MANIFEST_DIR");
    // The seed lives in shared/ beside the checkout (as CI lays it out); CUTLASS_RS_SEED overrides.
    let seed = std::env::var("CUTLASS_RS_SEED")
        .unwrap_or_else(|_| format!("{root}/../../shared/seeds/cutlass-blackwell-sm100-gemms.txt"));
    assert!(
        std::path::Path::new(&seed).is_file(),
        "the seed document is not at {seed} (shared/ beside the checkout, or set CUTLASS_RS_SEED)"
    );
    let status = std::process::Command::new("python3")
        .arg(format!("{root}/../tools/seed_tables.py"))
        .arg("--check")
        .arg(&seed)
        .status()
        .expect("python3 is needed for this test");
    assert!(status.success(), "cutlass-gemm-catalog/src/tile_tables.rs is stale: run tools/seed_tables.py > cutlass-gemm-catalog/src/tile_tables.rs");
}
