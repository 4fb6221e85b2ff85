//! Raw C ABI over the CUTLASS kernels that this crate's build script generated and compiled.
//!
//! Every kernel `NAME` (its `cutlass_library` procedural name) exports its entry points over
//! [`cutlass_rs_gemm_args`]; the registry ([`cutlass_rs_kernel_count`], [`cutlass_rs_kernel_get`],
//! [`kernels`]) lists the kernels this build contains with pointers to them. Statuses are `int`s:
//! [`CUTLASS_RS_OK`], the `cutlass::Status` values, or [`CUTLASS_RS_ERROR_CUDA_BASE`] plus a
//! `cudaError_t`.
//!
//! Which kernels are built is chosen at build time: the cargo features select kernel families
//! (`bf16`, `f16`, `fp8`, `fp8-blockwise` by default; `tf32`, `i8`, `sm100`, `sm120`), and
//! `CUTLASS_RS_KERNELS` overrides them (see the crate's `build.rs` for every variable).
//! [`BUILD_REPORT`] says what a build holds. Use the safe `cutlass-gemm` crate unless you need the
//! raw entry points.
//!
//! The C++ and CUDA sources that are not generated live in `csrc/`: the ABI header, the shim every
//! kernel includes, this project's SM90 FP8 main loops, and the quantization kernels.
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]
#![allow(clippy::all)]

mod bindings;
pub use bindings::*;

/// The directory holding this build's C header, `cutlass_rs.h` (with `cutlass_rs_abi.h`).
pub const INCLUDE_DIR: &str = env!("CUTLASS_RS_INCLUDE_DIR");
/// The directory holding this build's static library, `libcutlass_rs_kernels.a` (kernels,
/// quantizers, registry). Link it with the CUDA runtime (`-lcudart_static` from
/// [`CUDA_LIB_DIR`]) and `-lstdc++ -ldl -lrt -lpthread`.
pub const LIB_DIR: &str = env!("CUTLASS_RS_LIB_DIR");
/// The CUDA toolkit's include directory this build used (empty when it used none).
pub const CUDA_INCLUDE_DIR: &str = env!("CUTLASS_RS_CUDA_INCLUDE_DIR");
/// The CUDA toolkit's library directory this build used (empty when it used none).
pub const CUDA_LIB_DIR: &str = env!("CUTLASS_RS_CUDA_LIB_DIR");
/// The nvcc this build used (empty when it used none).
pub const NVCC: &str = env!("CUTLASS_RS_NVCC");
/// The CUTLASS `include` directory this build used (empty when it used none).
pub const CUTLASS_INCLUDE_DIR: &str = env!("CUTLASS_RS_CUTLASS_INCLUDE_DIR");
/// The architectures (`90a`, `100a`, `120a`, comma-separated) this build compiled its hand-written
/// kernels for: the quantizers, the weight packing, the weight-only decode GEMV
/// ([`cutlass_rs_weight_gemv`]), the FP8 blockwise one ([`cutlass_rs_blockwise_gemv`]) and the
/// 16-bit one ([`cutlass_rs_dense_gemv`]). Empty for a build without a toolchain.
pub const BUILT_ARCHS: &str = env!("CUTLASS_RS_BUILT_ARCHS");
/// Whether this build holds the weight-only decode GEMV ([`cutlass_rs_weight_gemv`]): the
/// `weight-only` feature, or a kernel selection with weight-only kernels.
pub const WEIGHT_GEMV_BUILT: bool = matches!(env!("CUTLASS_RS_WEIGHT_GEMV").as_bytes(), b"1");
/// The hand-written C++/CUDA sources of this crate (`csrc/`).
pub const CSRC_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/csrc");

/// What the build script built: the kernel count, the architectures, the selection, the toolchain
/// and where it was found, and the kernel names, one per line.
pub const BUILD_REPORT: &str = include_str!(concat!(env!("OUT_DIR"), "/build-report.txt"));

/// The kernels compiled into this library, as a safe slice over the C registry.
pub fn kernels() -> &'static [cutlass_rs_kernel_entry] {
    // SAFETY: the registry is a static array of `count` entries followed by a terminator; it lives
    // for the whole program and is never written.
    unsafe {
        let n = cutlass_rs_kernel_count();
        if n <= 0 {
            return &[];
        }
        std::slice::from_raw_parts(cutlass_rs_kernel_get(0), n as usize)
    }
}

/// The name of a registry entry.
pub fn entry_name(entry: &cutlass_rs_kernel_entry) -> &'static str {
    // SAFETY: names are static, NUL-terminated ASCII string literals in the generated registry.
    unsafe { std::ffi::CStr::from_ptr(entry.name) }
        .to_str()
        .expect("kernel names are ASCII")
}

/// The grouped kernels compiled into this library (`cutlass_rs_grouped_abi.h`), as a safe slice
/// over their C registry.
pub fn grouped_kernels() -> &'static [cutlass_rs_grouped_kernel_entry] {
    // SAFETY: as for `kernels`: a static array of `count` entries and a terminator, never written.
    unsafe {
        let n = cutlass_rs_grouped_kernel_count();
        if n <= 0 {
            return &[];
        }
        std::slice::from_raw_parts(cutlass_rs_grouped_kernel_get(0), n as usize)
    }
}

/// The name of a grouped registry entry.
pub fn grouped_entry_name(entry: &cutlass_rs_grouped_kernel_entry) -> &'static str {
    // SAFETY: names are static, NUL-terminated ASCII string literals in the generated registry.
    unsafe { std::ffi::CStr::from_ptr(entry.name) }
        .to_str()
        .expect("kernel names are ASCII")
}

/// The weight-only kernels compiled into this library (`cutlass_rs_weight_only_abi.h`), as a safe
/// slice over their C registry.
pub fn weight_only_kernels() -> &'static [cutlass_rs_weight_only_kernel_entry] {
    // SAFETY: as for `kernels`: a static array of `count` entries and a terminator, never written.
    unsafe {
        let n = cutlass_rs_weight_only_kernel_count();
        if n <= 0 {
            return &[];
        }
        std::slice::from_raw_parts(cutlass_rs_weight_only_kernel_get(0), n as usize)
    }
}

/// The name of a weight-only registry entry.
pub fn weight_only_entry_name(entry: &cutlass_rs_weight_only_kernel_entry) -> &'static str {
    // SAFETY: names are static, NUL-terminated ASCII string literals in the generated registry.
    unsafe { std::ffi::CStr::from_ptr(entry.name) }
        .to_str()
        .expect("kernel names are ASCII")
}
