//! Runs `cutlass-profiler census` into a fresh file of the tests' target directory and reads its
//! rows (shared by `census_ptx.rs` and `census_sample.rs`).

/// The census file's text and its rows (`name status seconds ptx_mma kind_ok`), after running
/// `cutlass-profiler census ARGS --out FILE`.
pub fn run_census(file: &str, args: &[&str]) -> (String, Vec<Vec<String>>) {
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(file);
    let _ = std::fs::remove_file(&out);
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_cutlass-profiler"))
        .arg("census")
        .args(args)
        .arg("--out")
        .arg(&out)
        .status()
        .expect("run cutlass-profiler");
    assert!(status.success());
    let text = std::fs::read_to_string(&out).unwrap();
    let rows = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("name\t"))
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect();
    (text, rows)
}
