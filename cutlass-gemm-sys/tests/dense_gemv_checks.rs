//! The 16-bit decode GEMV's argument checks, which run on the host before any launch (`launch_it`
//! 0): no GPU needed. Addresses are placeholders, never dereferenced.

use cutlass_gemm_sys as sys;

fn args() -> sys::cutlass_rs_dense_gemv_args {
    let at = |a: usize| a as *const std::ffi::c_void;
    sys::cutlass_rs_dense_gemv_args {
        m: 4,
        n: 256,
        k: 512,
        x: at(1 << 20),
        ldx: 512,
        w: at(2 << 20),
        ldw: 512,
        c: std::ptr::null(),
        ldc: 256,
        d: (3usize << 20) as *mut std::ffi::c_void,
        ldd: 256,
        alpha: 1.0,
        beta: 0.0,
        device_id: 0,
        sm_count: 132,
        row_scale: (4usize << 20) as *const f32,
        col_scale: (5usize << 20) as *const f32,
        row_bias: at(6 << 20),
        col_bias: at(7 << 20),
        activation: sys::CUTLASS_RS_ACTIVATION_GELU_TANH,
        bias_f32: 0,
    }
}

fn check(a: &sys::cutlass_rs_dense_gemv_args) -> i32 {
    // SAFETY: with launch_it 0 the entry point only reads the struct.
    unsafe { sys::cutlass_rs_dense_gemv(a, sys::CUTLASS_RS_DTYPE_BF16, 0, std::ptr::null_mut()) }
}

#[test]
fn epilogue_vectors_are_checked_before_any_launch() {
    if sys::BUILT_ARCHS.is_empty() {
        // A build without CUDA sources: the stub refuses every call.
        assert_eq!(check(&args()), sys::CUTLASS_RS_ERROR_NOT_BUILT);
        return;
    }
    assert_eq!(check(&args()), sys::CUTLASS_RS_OK);
    let off = |p: usize, by: usize| (p + by) as *const std::ffi::c_void;
    let misaligned = [
        sys::cutlass_rs_dense_gemv_args {
            row_scale: ((4usize << 20) + 2) as *const f32,
            ..args()
        },
        sys::cutlass_rs_dense_gemv_args {
            col_scale: ((5usize << 20) + 2) as *const f32,
            ..args()
        },
        sys::cutlass_rs_dense_gemv_args {
            row_bias: off(6 << 20, 1),
            ..args()
        },
        sys::cutlass_rs_dense_gemv_args {
            col_bias: off(7 << 20, 1),
            ..args()
        },
    ];
    for a in &misaligned {
        assert_eq!(check(a), sys::CUTLASS_RS_ERROR_MISALIGNED_OPERAND);
    }
    // Element-aligned vectors (not 16-byte aligned) are taken; none at all too.
    let element_aligned = sys::cutlass_rs_dense_gemv_args {
        row_scale: ((4usize << 20) + 4) as *const f32,
        col_bias: off(7 << 20, 2),
        ..args()
    };
    assert_eq!(check(&element_aligned), sys::CUTLASS_RS_OK);
    // An f32 bias is read as f32: 2-byte alignment is not enough, 4 is.
    let f32_bias = |by: usize| sys::cutlass_rs_dense_gemv_args {
        bias_f32: 1,
        row_bias: off(6 << 20, by),
        col_bias: off(7 << 20, by),
        ..args()
    };
    assert_eq!(
        check(&f32_bias(2)),
        sys::CUTLASS_RS_ERROR_MISALIGNED_OPERAND
    );
    assert_eq!(check(&f32_bias(4)), sys::CUTLASS_RS_OK);
    let none = sys::cutlass_rs_dense_gemv_args {
        row_scale: std::ptr::null(),
        col_scale: std::ptr::null(),
        row_bias: std::ptr::null(),
        col_bias: std::ptr::null(),
        activation: sys::CUTLASS_RS_ACTIVATION_IDENTITY,
        ..args()
    };
    assert_eq!(check(&none), sys::CUTLASS_RS_OK);
    // An unknown activation code.
    for activation in [-1, sys::CUTLASS_RS_ACTIVATION_SILU + 1] {
        let a = sys::cutlass_rs_dense_gemv_args {
            activation,
            ..args()
        };
        assert_eq!(check(&a), sys::CUTLASS_RS_ERROR_INVALID_PROBLEM);
    }
}
