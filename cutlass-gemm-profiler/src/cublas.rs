//! The reference libraries' calls: cuBLAS (`cublasGemm*`, `cublasGemmEx`) and cuBLASLt's matmul
//! (FP8 tensor-wise, blockwise with `VEC128_32F` x `BLK128x128_32F` scales and per row and column
//! with `OUTER_VEC_32F`; the bias and activation epilogues).
//!
//! The problem is row-major `D[m,n] = A[m,k] · W[n,k]ᵀ`; the column-major libraries get the same
//! memory as `Dᵀ = W · Aᵀ` (`transa = T`).

use std::ffi::c_void;
use std::sync::Arc;

use anyhow::{anyhow, bail, Result};
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, GemmConfig};
use cudarc::cublaslt::{result as lt, sys as ltsys};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

use crate::device::Device;
use crate::kind::Kind;
use crate::shapes::Shape;

/// `cublasGemm*`'s configuration for the shape, in the column-major view.
pub fn tn_config<T>(s: &Shape, alpha: T, beta: T) -> GemmConfig<T> {
    GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_T,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: s.n as i32,
        n: s.m as i32,
        k: s.k as i32,
        alpha,
        lda: s.k as i32,
        ldb: s.k as i32,
        beta,
        ldc: s.n as i32,
    }
}

/// tf32 (f32 output) with `cublasGemmEx` and `CUBLAS_COMPUTE_32F_FAST_TF32`, or s8 (s32 output)
/// with `CUBLAS_COMPUTE_32I`: `d = a · bᵀ` for the shape.
pub fn gemm_ex<T, TD>(
    blas: &CudaBlas,
    stream: &Arc<CudaStream>,
    kind: Kind,
    s: &Shape,
    a: &CudaSlice<T>,
    b: &CudaSlice<T>,
    d: &mut CudaSlice<TD>,
) -> Result<()> {
    use cudarc::cublas::{result as blas_result, sys as blas_sys};
    let (ab_type, d_type, compute) = match kind {
        Kind::Tf32 => (
            blas_sys::cudaDataType::CUDA_R_32F,
            blas_sys::cudaDataType::CUDA_R_32F,
            blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        ),
        Kind::I8 => (
            blas_sys::cudaDataType::CUDA_R_8I,
            blas_sys::cudaDataType::CUDA_R_32I,
            blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32I,
        ),
        _ => bail!("gemm_ex serves tf32 and i8"),
    };
    // alpha = 1, beta = 0 in the compute type (f32 for tf32, s32 for i8).
    let (one_f, zero_f, one_i, zero_i) = (1.0f32, 0.0f32, 1i32, 0i32);
    let (alpha, beta): (*const c_void, *const c_void) = if kind == Kind::I8 {
        (&one_i as *const i32 as _, &zero_i as *const i32 as _)
    } else {
        (&one_f as *const f32 as _, &zero_f as *const f32 as _)
    };
    let (pa, _ga) = a.device_ptr(stream);
    let (pb, _gb) = b.device_ptr(stream);
    let (pd, _gd) = d.device_ptr_mut(stream);
    // SAFETY: the buffers hold m x k, n x k and m x n elements of the types named; alpha and
    // beta point at values of the compute type; the handle's stream is `stream`.
    unsafe {
        blas_result::gemm_ex(
            *blas.handle(),
            cublasOperation_t::CUBLAS_OP_T,
            cublasOperation_t::CUBLAS_OP_N,
            s.n as i32,
            s.m as i32,
            s.k as i32,
            alpha,
            pb as *const c_void,
            ab_type,
            s.k as i32,
            pa as *const c_void,
            ab_type,
            s.k as i32,
            beta,
            pd as *mut c_void,
            d_type,
            s.n as i32,
            compute,
            blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
        )
    }
    .map_err(|e| anyhow!("cublasGemmEx: {e:?}"))
}

/// The epilogue of a [`LtMatmul`]: cuBLASLt's `CUBLASLT_EPILOGUE_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LtEpilogue {
    /// `DEFAULT`.
    None,
    /// `BIAS`: a bias per column of the row-major D (per row in cuBLASLt's column-major view).
    Bias,
    /// `RELU_BIAS`.
    ReluBias,
    /// `GELU_BIAS` (GELU's tanh approximation).
    GeluBias,
    /// `GELU_AUX_BIAS`: `GELU_BIAS` that also writes the pre-activation value to `aux` (device
    /// pointer, D's type and geometry: m x n row-major).
    GeluAuxBias {
        /// Where the pre-activation value goes.
        aux: u64,
    },
}

/// How a [`LtMatmul`] scales A and W (FP8 only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LtScales {
    /// None (tensor-wise scales would go in alpha).
    None,
    /// f32 scales per row of A and per row of W (per column of D), device pointers:
    /// `CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F` (CUDA 12.9 and later).
    Outer {
        /// m scales.
        rows: u64,
        /// n scales.
        cols: u64,
    },
    /// Blockwise scales, all 1: `VEC128_32F` for A and `BLK128x128_32F` for W.
    Blockwise,
}

/// A cuBLASLt matmul for `D[m,n] = epilogue(A[m,k] · W[n,k]ᵀ)`: bf16 or f16 in and out, or e4m3 in
/// and bf16 out (tensor-wise, blockwise or per-row and per-column scales), with a bias of D's type
/// for the bias epilogues.
pub struct LtMatmul {
    handle: ltsys::cublasLtHandle_t,
    desc: ltsys::cublasLtMatmulDesc_t,
    layouts: [ltsys::cublasLtMatrixLayout_t; 3],
    algo: ltsys::cublasLtMatmulAlgo_t,
    workspace: CudaSlice<u8>,
    ws_bytes: usize,
    _scales: Option<(CudaSlice<f32>, CudaSlice<f32>)>,
}

impl LtMatmul {
    /// `input`: `CUDA_R_16BF`, `CUDA_R_16F` or `CUDA_R_8F_E4M3`; D is bf16 for e4m3, else the input
    /// type. `bias` is a device pointer (0 for none).
    pub fn new(
        dev: &Device,
        (m, n, k): (usize, usize, usize),
        input: ltsys::cudaDataType_t,
        epilogue: LtEpilogue,
        bias: u64,
        scales: LtScales,
    ) -> Result<LtMatmul> {
        use ltsys::cublasLtMatmulDescAttributes_t as A;
        use ltsys::cudaDataType_t as T;
        let lt_err = |e: cudarc::cublaslt::result::CublasError| anyhow!("cuBLASLt: {e:?}");
        let handle = lt::create_handle().map_err(lt_err)?;
        let desc = lt::create_matmul_desc(
            ltsys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            T::CUDA_R_32F,
        )
        .map_err(lt_err)?;
        let set = |attr: A, v: *const c_void, size: usize| -> Result<()> {
            // SAFETY: v points at `size` bytes of the attribute's type.
            unsafe { lt::set_matmul_desc_attribute(desc, attr, v, size) }.map_err(lt_err)
        };
        let t = cublasOperation_t::CUBLAS_OP_T;
        set(A::CUBLASLT_MATMUL_DESC_TRANSA, &t as *const _ as _, 4)?;
        let out = if input == T::CUDA_R_16F {
            T::CUDA_R_16F
        } else {
            T::CUDA_R_16BF
        };
        // cuBLASLt's A is W (scales per output column), its B is A (per row).
        use ltsys::cublasLtMatmulMatrixScale_t as Mode;
        let mut owned = None;
        let modes = match scales {
            LtScales::None => None,
            LtScales::Outer { rows, cols } => Some((
                Mode::CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
                Mode::CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
                cols,
                rows,
            )),
            LtScales::Blockwise => {
                // All ones, generously sized for either scale order.
                let kb = k.div_ceil(128) + 1;
                let ones_w = dev
                    .stream
                    .clone_htod(&vec![1.0f32; (n.div_ceil(128) + 1) * kb])?;
                let ones_a = dev.stream.clone_htod(&vec![1.0f32; (m + 128) * kb])?;
                let (pw, pa) = (
                    ones_w.device_ptr(&dev.stream).0,
                    ones_a.device_ptr(&dev.stream).0,
                );
                owned = Some((ones_w, ones_a));
                Some((
                    Mode::CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
                    Mode::CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
                    pw,
                    pa,
                ))
            }
        };
        if let Some((mode_a, mode_b, ptr_a, ptr_b)) = modes {
            set(
                A::CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                &mode_a as *const _ as _,
                4,
            )?;
            set(
                A::CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                &mode_b as *const _ as _,
                4,
            )?;
            set(
                A::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                &ptr_a as *const _ as _,
                8,
            )?;
            set(
                A::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                &ptr_b as *const _ as _,
                8,
            )?;
        }
        let epi = match epilogue {
            LtEpilogue::None => ltsys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_DEFAULT,
            LtEpilogue::Bias => ltsys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS,
            LtEpilogue::ReluBias => ltsys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU_BIAS,
            LtEpilogue::GeluBias => ltsys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_BIAS,
            LtEpilogue::GeluAuxBias { .. } => {
                ltsys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_AUX_BIAS
            }
        };
        set(A::CUBLASLT_MATMUL_DESC_EPILOGUE, &epi as *const _ as _, 4)?;
        if let LtEpilogue::GeluAuxBias { aux } = epilogue {
            // Aux of D's type (the default) and geometry: n x m column-major in cuBLASLt's view.
            let ld = n as i64;
            set(
                A::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                &aux as *const _ as _,
                8,
            )?;
            set(
                A::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                &ld as *const _ as _,
                8,
            )?;
        }
        if epilogue != LtEpilogue::None {
            set(
                A::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                &bias as *const _ as _,
                8,
            )?;
            set(
                A::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                &out as *const _ as _,
                4,
            )?;
        }
        let la = lt::create_matrix_layout(input, k as u64, n as u64, k as i64).map_err(lt_err)?;
        let lb = lt::create_matrix_layout(input, k as u64, m as u64, k as i64).map_err(lt_err)?;
        let ld = lt::create_matrix_layout(out, n as u64, m as u64, n as i64).map_err(lt_err)?;
        let ws_bytes = 64usize << 20;
        let pref = lt::create_matmul_pref().map_err(lt_err)?;
        // SAFETY: a u64 attribute.
        unsafe {
            lt::set_matmul_pref_attribute(
                pref,
                ltsys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &(ws_bytes as u64) as *const u64 as _,
                8,
            )
        }
        .map_err(lt_err)?;
        // SAFETY: valid handle, descriptors and preference.
        let heur = unsafe { lt::get_matmul_algo_heuristic(handle, desc, la, lb, ld, ld, pref) }
            .map_err(|e| anyhow!("cuBLASLt has no algorithm for this matmul: {e:?}"))?;
        // SAFETY: created above.
        unsafe { lt::destroy_matmul_pref(pref) }.map_err(lt_err)?;
        Ok(LtMatmul {
            handle,
            desc,
            layouts: [la, lb, ld],
            algo: heur.algo,
            workspace: dev.stream.alloc_zeros::<u8>(ws_bytes)?,
            ws_bytes,
            _scales: owned,
        })
    }

    /// Runs on device pointers of A (m x k), W (n x k) and D (m x n) of the types given to
    /// [`LtMatmul::new`].
    pub fn run(&mut self, stream: &Arc<CudaStream>, a: u64, w: u64, d: u64) -> Result<()> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (pws, _g) = self.workspace.device_ptr_mut(stream);
        let [la, lb, ld] = self.layouts;
        // SAFETY: the caller's buffers match the layouts created for this shape.
        unsafe {
            lt::matmul(
                self.handle,
                self.desc,
                &alpha as *const f32 as _,
                &beta as *const f32 as _,
                w as *const c_void,
                la,
                a as *const c_void,
                lb,
                d as *const c_void,
                ld,
                d as *mut c_void,
                ld,
                &self.algo,
                pws as *mut c_void,
                self.ws_bytes,
                stream.cu_stream() as _,
            )
        }
        .map_err(|e| anyhow!("cuBLASLt matmul: {e:?}"))
    }
}

impl Drop for LtMatmul {
    fn drop(&mut self) {
        // SAFETY: created in new, destroyed once.
        unsafe {
            for l in self.layouts {
                let _ = lt::destroy_matrix_layout(l);
            }
            let _ = lt::destroy_matmul_desc(self.desc);
            let _ = lt::destroy_handle(self.handle);
        }
    }
}
