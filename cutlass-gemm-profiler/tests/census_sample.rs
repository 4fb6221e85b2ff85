//! Compiles a sample of six catalog entries to PTX (`cutlass-profiler census --sample 6`), a
//! different sample on each commit: the seed is the commit's hash (`git rev-parse HEAD`), or
//! `CUTLASS_RS_CENSUS_SEED` where that is set (to replay a sample) or there is no git checkout
//! (then 0). Each entry must agree with the catalog's rules: compile with the MMA kind the tables
//! imply, or fail with the assertion of the CUTLASS 4.2 limit that marks it. Runs in CI (no GPU
//! needed: PTX only); the full census is `cutlass-gemm-catalog/census.tsv`.

mod census_support;
use census_support::run_census;
use cutlass_gemm_catalog::limits::check_census_result;

const SAMPLE: usize = 6;

fn seed() -> u64 {
    if let Some(s) = std::env::var("CUTLASS_RS_CENSUS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return s;
    }
    std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| u64::from_str_radix(String::from_utf8_lossy(&o.stdout).get(..16)?, 16).ok())
        .unwrap_or(0)
}

#[test]
fn a_sample_of_the_catalog_compiles_as_the_rules_say() {
    let seed = seed();
    println!("census sample of {SAMPLE}, seed {seed} (CUTLASS_RS_CENSUS_SEED={seed} replays it)");
    let (sample, seed_text) = (SAMPLE.to_string(), seed.to_string());
    let (text, rows) = run_census(
        "census-sample.tsv",
        &["--sample", &sample, "--seed", &seed_text],
    );
    assert_eq!(rows.len(), SAMPLE, "{text}");
    let mut wrong = Vec::new();
    for r in &rows {
        assert_eq!(r.len(), 5, "{r:?}");
        let spec = cutlass_gemm_catalog::catalog::find(&r[0])
            .unwrap_or_else(|| panic!("{} is not in the catalog", r[0]));
        println!("{}\t{}\t{} s\t{}", r[0], r[1], r[2], r[3]);
        if let Err(why) = check_census_result(&spec, r[1] == "pass", &r[3], r[4] == "1") {
            wrong.push(why);
        }
    }
    assert!(wrong.is_empty(), "seed {seed}:\n{}", wrong.join("\n"));
}
