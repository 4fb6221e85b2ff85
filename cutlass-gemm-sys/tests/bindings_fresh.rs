//! `src/bindings.rs` is bindgen's output for the C header's fixed part (types, status codes, the
//! registry, the quantizers, the decode GEMVs), checked in so that building needs no libclang. This test renders the
//! header as the build script does, runs bindgen and compares. After a change of the ABI:
//! `CUTLASS_RS_BLESS=1 cargo test -p cutlass-gemm-sys --test bindings_fresh` rewrites the file.

use std::path::Path;

use cutlass_gemm_catalog::codegen;

/// bindgen's Rust for the header rendered with no kernel (per-kernel entry points are reached
/// through the registry, never by name from Rust).
fn generate() -> String {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bindings_fresh");
    std::fs::create_dir_all(&dir).unwrap();
    let header = dir.join(codegen::HEADER_NAME);
    std::fs::write(&header, codegen::header(&[]).unwrap()).unwrap();
    let csrc = Path::new(env!("CARGO_MANIFEST_DIR")).join("csrc");
    for name in [
        codegen::ABI_HEADER_NAME,
        codegen::GROUPED_ABI_HEADER_NAME,
        codegen::WEIGHT_ONLY_ABI_HEADER_NAME,
        codegen::WEIGHT_PREP_ABI_HEADER_NAME,
        codegen::BLOCKWISE_GEMV_ABI_HEADER_NAME,
        codegen::DENSE_GEMV_ABI_HEADER_NAME,
    ] {
        std::fs::copy(csrc.join(name), dir.join(name)).unwrap();
    }
    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .allowlist_function("cutlass_rs_.*")
        .allowlist_type("cutlass_rs_.*")
        .allowlist_var("CUTLASS_RS_.*")
        .default_macro_constant_type(bindgen::MacroTypeVariation::Signed)
        .layout_tests(true)
        .generate()
        .expect("bindgen needs libclang: apt-get install libclang-dev, or set LIBCLANG_PATH");
    format!(
        "// generated, do not edit: bindgen over csrc/cutlass_rs_abi.h, csrc/cutlass_rs_grouped_abi.h, \
         csrc/cutlass_rs_weight_only_abi.h, csrc/cutlass_rs_weight_prep_abi.h, \
         csrc/cutlass_rs_blockwise_gemv_abi.h, csrc/cutlass_rs_dense_gemv_abi.h and the registry part of cutlass_rs.h\n// (tests/bindings_fresh.rs checks it; CUTLASS_RS_BLESS=1 rewrites it).\n{}",
        bindings
    )
}

#[test]
fn checked_in_bindings_match_the_header() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bindings.rs");
    let fresh = generate();
    if std::env::var_os("CUTLASS_RS_BLESS").is_some() {
        std::fs::write(&path, &fresh).unwrap();
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap();
    assert!(
        checked_in == fresh,
        "src/bindings.rs is stale: the C header changed. Rewrite it with\n    \
         CUTLASS_RS_BLESS=1 cargo test -p cutlass-gemm-sys --test bindings_fresh"
    );
}
