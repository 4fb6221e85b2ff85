//! The reference libraries' calls: cuBLAS (`cublasGemm*`, `cublasGemmEx`) and cuBLASLt's FP8
//! matmul (tensor-wise, and blockwise with `VEC128_32F` x `BLK128x128_32F` scales).
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
use cutlass_gemm::numeric::E4M3;
use half::bf16;

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

/// cuBLASLt FP8 (e4m3 x e4m3 -> bf16) matmul for `D[m,n] = A[m,k] · W[n,k]ᵀ`, optionally with
/// blockwise scales (`VEC128_32F` for A, `BLK128x128_32F` for W).
pub struct LtFp8 {
    handle: ltsys::cublasLtHandle_t,
    desc: ltsys::cublasLtMatmulDesc_t,
    layouts: [ltsys::cublasLtMatrixLayout_t; 3],
    algo: ltsys::cublasLtMatmulAlgo_t,
    workspace: CudaSlice<u8>,
    ws_bytes: usize,
    _scales: Option<(CudaSlice<f32>, CudaSlice<f32>)>,
}

impl LtFp8 {
    pub fn new(dev: &Device, m: usize, n: usize, k: usize, blockwise: bool) -> Result<LtFp8> {
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
        let scales = if blockwise {
            let sa =
                ltsys::cublasLtMatmulMatrixScale_t::CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
            let sb = ltsys::cublasLtMatmulMatrixScale_t::CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
            set(
                A::CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                &sa as *const _ as _,
                4,
            )?;
            set(
                A::CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                &sb as *const _ as _,
                4,
            )?;
            // All ones, generously sized for either scale order.
            let kb = k.div_ceil(128) + 1;
            let ones_a = vec![1.0f32; (n.div_ceil(128) + 1) * kb];
            let ones_b = vec![1.0f32; (m + 128) * kb];
            let da = dev.stream.clone_htod(&ones_a)?;
            let db = dev.stream.clone_htod(&ones_b)?;
            let pa = da.device_ptr(&dev.stream).0;
            let pb = db.device_ptr(&dev.stream).0;
            set(
                A::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                &pa as *const _ as _,
                8,
            )?;
            set(
                A::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                &pb as *const _ as _,
                8,
            )?;
            Some((da, db))
        } else {
            None
        };
        // Column-major view: A_cb = W as k x n (transposed to n x k), B_cb = A as k x m, D_cb n x m.
        let la = lt::create_matrix_layout(T::CUDA_R_8F_E4M3, k as u64, n as u64, k as i64)
            .map_err(lt_err)?;
        let lb = lt::create_matrix_layout(T::CUDA_R_8F_E4M3, k as u64, m as u64, k as i64)
            .map_err(lt_err)?;
        let ld = lt::create_matrix_layout(T::CUDA_R_16BF, n as u64, m as u64, n as i64)
            .map_err(lt_err)?;
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
            .map_err(|e| anyhow!("cuBLASLt has no algorithm for this FP8 matmul: {e:?}"))?;
        // SAFETY: created above.
        unsafe { lt::destroy_matmul_pref(pref) }.map_err(lt_err)?;
        Ok(LtFp8 {
            handle,
            desc,
            layouts: [la, lb, ld],
            algo: heur.algo,
            workspace: dev.stream.alloc_zeros::<u8>(ws_bytes)?,
            ws_bytes,
            _scales: scales,
        })
    }

    pub fn run(
        &mut self,
        stream: &Arc<CudaStream>,
        a: &CudaSlice<E4M3>,
        w: &CudaSlice<E4M3>,
        d: &mut CudaSlice<bf16>,
    ) -> Result<()> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (pa, _g1) = a.device_ptr(stream);
        let (pw, _g2) = w.device_ptr(stream);
        let (pd, _g3) = d.device_ptr_mut(stream);
        let (pws, _g4) = self.workspace.device_ptr_mut(stream);
        let [la, lb, ld] = self.layouts;
        // SAFETY: the buffers match the layouts created for this shape; workspace as declared.
        unsafe {
            lt::matmul(
                self.handle,
                self.desc,
                &alpha as *const f32 as _,
                &beta as *const f32 as _,
                pw as *const c_void,
                la,
                pa as *const c_void,
                lb,
                pd as *const c_void,
                ld,
                pd as *mut c_void,
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

impl Drop for LtFp8 {
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
