//! GEMMs on [candle](https://github.com/huggingface/candle) CUDA tensors through this crate
//! (feature `candle`; candle-core 0.11, which uses cudarc 0.19 as this crate does).
//!
//! | item | computes | element types |
//! |---|---|---|
//! | [`matmul`] | candle's `a.matmul(b)`: `(…, m, k) x (…, k, n) -> (…, m, n)` | bf16, f16 |
//! | [`broadcast_matmul`] | candle's `a.broadcast_matmul(b)` (batch dimensions broadcast) | bf16, f16 |
//! | [`Matmul`] | the same as a candle `CustomOp2` (`a.apply_op2_no_bwd(&b, &Matmul)`) | bf16, f16 |
//! | [`matmul_fp8`] / [`MatmulFp8`] | `scale_a * scale_b * (a · b)` to bf16; `a` row-major, `b` column-major (`w.t()`) | F8E4M3 |
//! | [`Linear`] | `act(x · Wᵀ + bias)` with the bias and activation (ReLU, GELU, SiLU) fused into the GEMM's epilogue; `candle_nn::Linear` plus the activation in one kernel | bf16, f16 |
//! | [`GatedLinear`] | an MLP's gate and up projections with SwiGLU / GeGLU in one GEMM: `act(x · W_gateᵀ + b_gate) ⊙ (x · W_upᵀ + b_up)`, the weights interleaved once ([`crate::GatedGemm`]) | bf16, f16 |
//! | [`Fp8Linear`] | a `Linear` layer (`act(x · Wᵀ + bias)`, bias and activation in the epilogue) whose weight is quantized once to FP8 e4m3 with one f32 scale per 128x128 block; activations are quantized per call (1x128 groups) on the GPU; the DeepSeek-V3 recipe | bf16 in and out |
//! | [`Nvfp4Linear`] | the same with NVFP4 weights and activations | bf16 in and out; SM100/SM120 GPUs |
//! | [`WeightOnlyLinear`] | `x · dequant(W)ᵀ (+ bias)` with a 4-bit (GPTQ, AWQ, or quantized here), FP8 or int8 weight (per-channel or per-tensor scales, from safetensors as quantization tools write them) and 16-bit activations (feature `weight-only`) | bf16, f16 activations; I32, F8E4M3 or U8 weights |
//! | [`grouped_matmul`] / [`GroupedMatmul`] | a mixture-of-experts layer's expert GEMMs in one launch: `x (rows, k)` sorted by expert, `experts (e, n, k)`, `offsets (e + 1)` → `(rows, n)`, rows of expert `g` times `experts[g]ᵀ` | bf16, f16 (offsets I32 or U32) |
//! | [`grouped_matmul_fp8_blockwise`] | the same with FP8 blockwise scales (DeepSeek-V3's experts): `x` and its scales `(rows, ceil(k / 128))`, `experts` and theirs `(e, ceil(n / 128), ceil(k / 128))` | F8E4M3 with F32 scales, to bf16 |
//!
//! **Layouts.** Each operand's last two dimensions may be row-major (contiguous rows, any row
//! stride) or column-major (a transposed view such as `w.t()`), and its batch dimensions may have
//! any strides that one stride describes. Every m, n and k runs: extents and leading dimensions
//! that the kernels' TMA cannot address in place (k = 100, n = 50257, a 2 x 2 product) are served
//! through padded copies in the plan's workspace ([`Gemm::staged_operands`]). A view's offset must
//! be 16-byte aligned; [`matmul`] copies operands it cannot serve as they are (a strided batch, a
//! misaligned view, a layout without a built kernel) into packed tensors. The custom ops never
//! copy: they return the planner's error. A batch
//! broadcast over `b` (stride 0, as from `broadcast_as`) is folded into M when `a`'s batches are
//! contiguous, the common `x · W` case.
//!
//! **Plans.** The kernel is chosen once per (device, types, shape, layouts) and kept in a
//! process-wide cache, so repeated calls cost a hash lookup and a launch on candle's stream.
//!
//! **Precision.** bf16/f16 products accumulate in f32 and round once, like cuBLAS: results agree
//! with candle's own matmul within one rounding of the output type plus f32 accumulation error
//! (`tests/gpu/candle.rs` checks this bound elementwise). [`Fp8Linear`]'s error is that of e4m3
//! quantization of both operands: each product carries at most 2 x 2^-4 relative error, so
//! `|y_fp8 - y| <= 0.13 * (|x| · |W|ᵀ)` elementwise (checked by the tests), and typically a few
//! percent of `|y|` in RMS.
//!
//! Building the feature needs candle's CUDA build (nvcc, and the CUDA libraries at link time;
//! see README "From candle").

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::CudaStorageSlice;
use candle_core::{
    CpuStorage, CudaStorage, CustomOp1, CustomOp2, DType, Layout, Module, Shape, Tensor,
};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use half::{bf16, f16};

use crate::formats::numeric::{E2M1, E4M3};
use crate::formats::scale_layout::ScaleMajor;
use crate::quantize::{self, Fp8Block, Fp8BlockwiseTensor, Nvfp4Tensor};
use crate::{
    Activation, BlockScaledGemm, BlockwiseGemm, DeviceInfo, Element, Epilogue, EpilogueOperands,
    Gemm, GemmProblem, GroupedGemm, GroupedInputs, GroupedProblem, MatrixLayout, Workspace,
};

/// This crate's error as a candle error.
fn cerr(e: crate::Error) -> candle_core::Error {
    candle_core::Error::Cuda(Box::new(e))
}

fn msg(s: impl Into<String>) -> candle_core::Error {
    candle_core::Error::Msg(s.into())
}

/// The bf16 `(m, k)` input of a quantized linear layer's op, from its layout's offset.
fn linear_input<'a>(
    op: &str,
    s: &'a CudaStorage,
    l: &Layout,
) -> candle_core::Result<(cudarc::driver::CudaView<'a, bf16>, usize, usize)> {
    let CudaStorageSlice::BF16(x) = &s.slice else {
        return Err(msg(format!("{op} takes bf16 inputs")));
    };
    let (m, k) = l.shape().dims2()?;
    Ok((x.slice(l.start_offset()..), m, k))
}

/// An uninitialized bf16 `m x n` output for a quantized linear layer's GEMM.
fn linear_output(
    stream: &Arc<CudaStream>,
    m: usize,
    n: usize,
) -> candle_core::Result<CudaSlice<bf16>> {
    // SAFETY: the caller's GEMM writes every element of D before anything reads it.
    unsafe { stream.alloc::<bf16>(m * n) }.map_err(|e| cerr(e.into()))
}

/// D, written by the GEMM, as the op's `(m, n)` output on the input's device.
fn wrap_output(s: &CudaStorage, d: CudaSlice<bf16>, m: usize, n: usize) -> (CudaStorage, Shape) {
    (
        CudaStorage::wrap_cuda_slice(d, s.device.clone()),
        Shape::from((m, n)),
    )
}

/// How one candle operand `(batch dims…, rows, cols)` maps onto a GEMM operand.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Geometry {
    batch: usize,
    rows: usize,
    cols: usize,
    /// Layout and leading dimension; the batch stride when `batch > 1`.
    layout: MatrixLayout,
    /// Stride between batches (0 for a broadcast batch).
    batch_stride: usize,
    /// First element, in elements.
    offset: usize,
}

/// The geometry of a candle layout, or why one GEMM operand cannot describe it.
fn geometry(l: &Layout) -> Result<Geometry, String> {
    let dims = l.dims();
    let strides = l.stride();
    let r = dims.len();
    if r < 2 {
        return Err(format!(
            "a matmul operand needs at least 2 dimensions, this one has {r}"
        ));
    }
    let (rows, cols) = (dims[r - 2], dims[r - 1]);
    let (sr, sc) = (strides[r - 2], strides[r - 1]);
    let layout = if sc == 1 || cols == 1 {
        let ld = if rows == 1 { cols } else { sr };
        if ld < cols {
            return Err(format!("rows overlap (row stride {sr} < {cols} columns)"));
        }
        MatrixLayout::row_major().with_ld(ld)
    } else if sr == 1 || rows == 1 {
        let ld = if cols == 1 { rows } else { sc };
        if ld < rows {
            return Err(format!(
                "columns overlap (column stride {sc} < {rows} rows)"
            ));
        }
        MatrixLayout::col_major().with_ld(ld)
    } else {
        return Err(format!(
            "neither the rows nor the columns are contiguous (strides {sr}, {sc})"
        ));
    };
    // Batch dimensions: one stride must describe them (dimensions of size 1 do not count).
    let mut batch = 1usize;
    let mut batch_stride = None::<usize>;
    let mut expect = None::<usize>;
    for i in (0..r - 2).rev() {
        batch *= dims[i];
        if dims[i] == 1 {
            continue;
        }
        match expect {
            None => {
                batch_stride = Some(strides[i]);
                expect = Some(strides[i] * dims[i]);
            }
            Some(e) if strides[i] == e => expect = Some(e * dims[i]),
            Some(_) => {
                return Err(format!(
                    "the batch dimensions {:?} with strides {:?} are not one strided batch",
                    &dims[..r - 2],
                    &strides[..r - 2]
                ))
            }
        }
    }
    Ok(Geometry {
        batch,
        rows,
        cols,
        layout,
        batch_stride: batch_stride.unwrap_or(0),
        offset: l.start_offset(),
    })
}

/// The GEMM of `a (…, m, k) · b (…, k, n)` with a packed row-major D, and the output dims.
fn problem_of(la: &Layout, lb: &Layout) -> Result<(GemmProblem, Vec<usize>), String> {
    let (da, db) = (la.dims(), lb.dims());
    let (ra, rb) = (da.len(), db.len());
    if ra < 2 || rb < 2 || da[..ra - 2] != db[..rb - 2] || da[ra - 1] != db[rb - 2] {
        return Err(format!(
            "matmul shapes {da:?} x {db:?} do not match (…, m, k) x (…, k, n) with equal batch dimensions"
        ));
    }
    let (a, b) = (geometry(la)?, geometry(lb)?);
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let mut out_dims = da[..ra - 2].to_vec();
    out_dims.extend([m, n]);
    let batch = a.batch;
    if batch == 1 {
        let p = GemmProblem::new(m, n, k).with_a(a.layout).with_b(b.layout);
        return Ok((p, out_dims));
    }
    if b.batch_stride == 0 {
        // b broadcast over the batch: fold the batch into M when a's batches follow each other.
        let a_ld = a.layout.ld.unwrap_or(k);
        if a.layout.layout == crate::Layout::RowMajor && a.batch_stride == m * a_ld {
            let p = GemmProblem::new(batch * m, n, k)
                .with_a(a.layout)
                .with_b(b.layout);
            return Ok((p, out_dims));
        }
        return Err("b is broadcast over the batch and a's batches are not contiguous".into());
    }
    if a.batch_stride == 0 {
        return Err("a is broadcast over the batch".into());
    }
    let p = GemmProblem::new(m, n, k)
        .with_batch(batch)
        .with_a(a.layout.with_batch_stride(a.batch_stride))
        .with_b(b.layout.with_batch_stride(b.batch_stride));
    Ok((p, out_dims))
}

/// A plan for one device, element types and problem, planned once per process.
fn plan<TA: Element, TB: Element, TD: Element>(
    stream: &Arc<CudaStream>,
    problem: &GemmProblem,
) -> crate::Result<Arc<Gemm<TA, TB, TD>>> {
    cached(stream, problem, "gemm", |info, p| Gemm::plan(info, p, None))
}

type PlanCache = Mutex<HashMap<(usize, &'static str, String), Arc<dyn Any + Send + Sync>>>;

/// The process-wide cache of plans (and of device descriptions), keyed by device, plan kind and
/// element types, and the problem.
fn cached<P: Any + Send + Sync, Q: std::fmt::Debug>(
    stream: &Arc<CudaStream>,
    problem: &Q,
    kind: &'static str,
    make: impl FnOnce(DeviceInfo, &Q) -> crate::Result<P>,
) -> crate::Result<Arc<P>> {
    static PLANS: OnceLock<PlanCache> = OnceLock::new();
    static DEVICES: OnceLock<Mutex<HashMap<usize, DeviceInfo>>> = OnceLock::new();
    let ctx = stream.context();
    let ordinal = ctx.ordinal();
    let info = {
        let mut devices = DEVICES.get_or_init(Default::default).lock().unwrap();
        match devices.get(&ordinal) {
            Some(i) => *i,
            None => {
                let i = DeviceInfo::query(ctx)?;
                devices.insert(ordinal, i);
                i
            }
        }
    };
    // The problem's Debug form names every field (alpha and beta included).
    let key = (
        ordinal,
        kind,
        format!("{}{problem:?}", std::any::type_name::<P>()),
    );
    let plans = PLANS.get_or_init(Default::default);
    if let Some(p) = plans.lock().unwrap().get(&key) {
        if let Ok(p) = p.clone().downcast::<P>() {
            return Ok(p);
        }
    }
    let p = Arc::new(make(info, problem)?);
    plans.lock().unwrap().insert(key, p.clone());
    Ok(p)
}

fn cuda_device(t: &Tensor) -> candle_core::Result<&candle_core::CudaDevice> {
    match t.device() {
        candle_core::Device::Cuda(d) => Ok(d),
        other => Err(msg(format!(
            "cutlass GEMMs run on CUDA tensors; this tensor is on {:?}",
            other.location()
        ))),
    }
}

/// Whether the plan for these layouts exists and the offsets are 16-byte aligned.
fn servable<T: Element>(stream: &Arc<CudaStream>, la: &Layout, lb: &Layout) -> bool {
    let aligned = |l: &Layout| (l.start_offset() * std::mem::size_of::<T>()) % 16 == 0;
    aligned(la)
        && aligned(lb)
        && problem_of(la, lb).is_ok_and(|(p, _)| plan::<T, T, T>(stream, &p).is_ok())
}

/// candle's `a.matmul(b)` through this crate, for bf16 and f16 CUDA tensors: `(…, m, k) x (…,
/// k, n) -> (…, m, n)`, f32 accumulation. Operands it cannot serve as they are get copied with
/// `contiguous()` (see the module docs); if even that cannot be served, the error says why.
pub fn matmul(a: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
    let stream = cuda_device(a)?.cuda_stream();
    cuda_device(b)?;
    let ok = match (a.dtype(), b.dtype()) {
        (DType::BF16, DType::BF16) => servable::<bf16>(&stream, a.layout(), b.layout()),
        (DType::F16, DType::F16) => servable::<f16>(&stream, a.layout(), b.layout()),
        (x, y) => {
            return Err(msg(format!(
                "cutlass_gemm::candle::matmul takes bf16 x bf16 or f16 x f16, not {x:?} x {y:?} \
                 (FP8: matmul_fp8)"
            )))
        }
    };
    if ok {
        return a.apply_op2_no_bwd(b, &Matmul);
    }
    // Copy what the kernels cannot read as it is; errors then come from the op itself.
    packed(a)?.apply_op2_no_bwd(&packed(b)?, &Matmul)
}

/// A contiguous copy at offset 0 (the tensor itself when it is one already).
fn packed(t: &Tensor) -> candle_core::Result<Tensor> {
    if t.is_contiguous() && t.layout().start_offset() == 0 {
        Ok(t.clone())
    } else {
        t.force_contiguous()
    }
}

/// candle's `a.broadcast_matmul(b)` through [`matmul`]: the batch dimensions of `a` and `b`
/// broadcast against each other (a rank-2 weight against a batch of activations, for example).
pub fn broadcast_matmul(a: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
    let (da, db) = (a.dims(), b.dims());
    if da.len() < 2 || db.len() < 2 {
        return Err(msg(format!(
            "matmul operands need at least 2 dimensions, got {da:?} x {db:?}"
        )));
    }
    let batch_a = Shape::from(&da[..da.len() - 2]);
    let batch_b = Shape::from(&db[..db.len() - 2]);
    let batch = batch_a.broadcast_shape_binary_op(&batch_b, "broadcast_matmul")?;
    let with = |t: &Tensor, d: &[usize]| -> candle_core::Result<Tensor> {
        let mut dims = batch.dims().to_vec();
        dims.extend_from_slice(&d[d.len() - 2..]);
        t.broadcast_as(dims)
    };
    matmul(&with(a, da)?, &with(b, db)?)
}

/// candle's matmul on bf16/f16 CUDA tensors as a `CustomOp2` (no copies: a layout the kernels
/// cannot read is an error; [`matmul`] copies instead). Forward only.
#[derive(Clone, Copy, Debug, Default)]
pub struct Matmul;

impl CustomOp2 for Matmul {
    fn name(&self) -> &'static str {
        "cutlass-matmul"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(msg("cutlass-matmul runs on CUDA tensors only"))
    }

    fn cuda_fwd(
        &self,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (problem, dims) = problem_of(l1, l2).map_err(|e| {
            msg(format!("cutlass-matmul cannot read these operands: {e} (cutlass_gemm::candle::matmul copies them)"))
        })?;
        match (&s1.slice, &s2.slice) {
            (CudaStorageSlice::BF16(a), CudaStorageSlice::BF16(b)) => {
                run_same::<bf16>(s1, a, l1, b, l2, &problem, dims)
            }
            (CudaStorageSlice::F16(a), CudaStorageSlice::F16(b)) => {
                run_same::<f16>(s1, a, l1, b, l2, &problem, dims)
            }
            _ => Err(msg(format!(
                "cutlass-matmul takes bf16 x bf16 or f16 x f16, not {:?} x {:?}",
                s1.dtype(),
                s2.dtype()
            ))),
        }
    }
}

fn run_same<T: Element + candle_core::cuda_backend::CudaDType>(
    s1: &CudaStorage,
    a: &CudaSlice<T>,
    la: &Layout,
    b: &CudaSlice<T>,
    lb: &Layout,
    problem: &GemmProblem,
    dims: Vec<usize>,
) -> candle_core::Result<(CudaStorage, Shape)> {
    let stream = s1.device.cuda_stream();
    let gemm = plan::<T, T, T>(&stream, problem).map_err(cerr)?;
    let len = dims.iter().product::<usize>();
    // SAFETY: the GEMM writes every element of D (beta is 0) before anything reads it.
    let mut d = unsafe { stream.alloc::<T>(len) }.map_err(|e| cerr(e.into()))?;
    let av = a.slice(la.start_offset()..);
    let bv = b.slice(lb.start_offset()..);
    gemm.run(&stream, &av, &bv, None, &mut d, Workspace::Managed)
        .map_err(cerr)?;
    Ok((
        CudaStorage::wrap_cuda_slice(d, s1.device.clone()),
        Shape::from(dims),
    ))
}

/// `scale_a * scale_b * (a · b)` for F8E4M3 CUDA tensors, to bf16 (tensor-wise scaled FP8, f32
/// accumulation). Hopper's FP8 kernels read both operands K-contiguous: `a (…, m, k)` row-major
/// and `b (…, k, n)` column-major, i.e. `b = w.t()` for a contiguous `w (…, n, k)`. Other layouts
/// are refused rather than copied: candle 0.11.1 cannot copy strided F8E4M3 tensors on CUDA (it
/// asks for a kernel `ucopy_f8e4m3` that its kernels name `ucopy_f8_e4m3`), so transpose in
/// another type before converting to FP8.
pub fn matmul_fp8(
    a: &Tensor,
    b: &Tensor,
    scale_a: f32,
    scale_b: f32,
) -> candle_core::Result<Tensor> {
    cuda_device(a)?;
    cuda_device(b)?;
    if a.dtype() != DType::F8E4M3 || b.dtype() != DType::F8E4M3 {
        return Err(msg(format!(
            "matmul_fp8 takes F8E4M3 x F8E4M3, not {:?} x {:?}",
            a.dtype(),
            b.dtype()
        )));
    }
    let major = |t: &Tensor| geometry(t.layout()).map(|g| g.layout.layout);
    if major(a) != Ok(crate::Layout::RowMajor) || major(b) != Ok(crate::Layout::ColumnMajor) {
        return Err(msg(
            "matmul_fp8 needs a (…, m, k) row-major and b (…, k, n) column-major (b = w.t() of a \
             contiguous w (…, n, k)): Hopper's FP8 kernels read both operands K-contiguous",
        ));
    }
    a.apply_op2_no_bwd(b, &MatmulFp8 { scale_a, scale_b })
}

/// [`matmul_fp8`] as a `CustomOp2` (no copies). Forward only.
#[derive(Clone, Copy, Debug)]
pub struct MatmulFp8 {
    /// Scale of A (its elements times this are the values).
    pub scale_a: f32,
    /// Scale of B.
    pub scale_b: f32,
}

impl CustomOp2 for MatmulFp8 {
    fn name(&self) -> &'static str {
        "cutlass-matmul-fp8"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(msg("cutlass-matmul-fp8 runs on CUDA tensors only"))
    }

    fn cuda_fwd(
        &self,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (CudaStorageSlice::F8E4M3(a), CudaStorageSlice::F8E4M3(b)) = (&s1.slice, &s2.slice)
        else {
            return Err(msg("cutlass-matmul-fp8 takes F8E4M3 x F8E4M3"));
        };
        let (problem, dims) = problem_of(l1, l2).map_err(|e| {
            msg(format!(
                "cutlass-matmul-fp8 cannot read these operands: {e}"
            ))
        })?;
        let problem = problem.with_tensor_scales(self.scale_a, self.scale_b);
        let stream = s1.device.cuda_stream();
        let gemm = plan::<E4M3, E4M3, bf16>(&stream, &problem).map_err(cerr)?;
        let len = dims.iter().product::<usize>();
        let (oa, ob) = (l1.start_offset(), l2.start_offset());
        gemm.check_lengths(a.len() - oa, b.len() - ob, None, len)
            .map_err(cerr)?;
        // SAFETY: the GEMM writes every element of D before anything reads it.
        let mut d = unsafe { stream.alloc::<bf16>(len) }.map_err(|e| cerr(e.into()))?;
        let mut ws = stream
            .alloc_zeros::<u8>(gemm.workspace_size().max(1))
            .map_err(|e| cerr(e.into()))?;
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| cerr(e.into()))?;
        {
            // candle's F8E4M3 and this crate's E4M3 are the same bytes; the raw entry point takes
            // addresses, with the lengths checked above.
            let (pa, _ga) = a.device_ptr(&stream);
            let (pb, _gb) = b.device_ptr(&stream);
            let (pd, _gd) = d.device_ptr_mut(&stream);
            let (pw, _gw) = ws.device_ptr_mut(&stream);
            // SAFETY: pointers of live allocations on this stream's device holding the checked
            // lengths; d and the workspace are fresh and unaliased.
            unsafe {
                gemm.run_raw(
                    pa + oa as u64,
                    pb + ob as u64,
                    None,
                    pd,
                    pw,
                    gemm.workspace_size().max(1),
                    stream.cu_stream(),
                )
            }
            .map_err(cerr)?;
        }
        Ok((
            CudaStorage::wrap_cuda_slice(d, s1.device.clone()),
            Shape::from(dims),
        ))
    }
}

/// `op` over the rows of `x (…, k)`: `x` as `(m, k)`, contiguous, through the op, and the result
/// back to `(…, n)`.
fn apply_to_rows<Op: CustomOp1>(
    x: &Tensor,
    k: usize,
    n: usize,
    op: &Op,
) -> candle_core::Result<Tensor> {
    let (x2, m) = rows_of(x, k)?;
    let y = x2.reshape((m, k))?.apply_op1_no_bwd(op)?;
    let mut out = x.dims().to_vec();
    *out.last_mut().unwrap() = n;
    y.reshape(out)
}

/// The input of a quantized linear layer as `(m, k)`, contiguous.
fn rows_of(x: &Tensor, k: usize) -> candle_core::Result<(Tensor, usize)> {
    let dims = x.dims();
    if dims.last() != Some(&k) {
        return Err(msg(format!(
            "the layer takes (…, {k}) inputs, this one is {dims:?}"
        )));
    }
    Ok((packed(x)?, dims.iter().product::<usize>() / k))
}

/// Evaluates `$body` with `$x` bound to a view of the weight's elements (its contiguous storage),
/// for bf16, f16 and f32 weights; other types are an error naming `$what`.
macro_rules! with_weight_elements {
    ($what:expr, $weight:expr, |$x:ident| $body:expr) => {{
        let w = $weight.contiguous()?;
        let (storage, layout) = w.storage_and_layout();
        let candle_core::Storage::Cuda(s) = &*storage else {
            return Err(msg(format!("{} needs a CUDA weight", $what)));
        };
        let off = layout.start_offset();
        match &s.slice {
            CudaStorageSlice::BF16(x) => {
                let $x = x.slice(off..);
                $body
            }
            CudaStorageSlice::F16(x) => {
                let $x = x.slice(off..);
                $body
            }
            CudaStorageSlice::F32(x) => {
                let $x = x.slice(off..);
                $body
            }
            _ => {
                return Err(msg(format!(
                    "{} takes bf16, f16 or f32 weights, not {:?}",
                    $what,
                    $weight.dtype()
                )))
            }
        }
    }};
}

/// The forward pass of the quantized layers: `x (…, k)` bf16 flattened to `(m, k)` rows (M padded
/// with zero rows to a multiple of `m_multiple`, the padding dropped from the output), `op` applied
/// to give `(m, n)`, the shape restored and `bias` added.
fn linear_forward<C: CustomOp1>(
    what: &str,
    op: &C,
    (n, k): (usize, usize),
    m_multiple: usize,
    bias: Option<&Tensor>,
    x: &Tensor,
) -> candle_core::Result<Tensor> {
    if x.dtype() != DType::BF16 {
        return Err(msg(format!(
            "{what} takes bf16 inputs, not {:?}",
            x.dtype()
        )));
    }
    let dims = x.dims().to_vec();
    let (x2, m) = rows_of(x, k)?;
    let padded = m.div_ceil(m_multiple) * m_multiple;
    let x2 = x2.reshape((m, k))?;
    let x2 = if padded == m {
        x2
    } else {
        x2.pad_with_zeros(0, 0, padded - m)?
    };
    let y = x2.apply_op1_no_bwd(op)?;
    let y = if padded == m { y } else { y.narrow(0, 0, m)? };
    let mut out = dims;
    *out.last_mut().unwrap() = n;
    let y = y.reshape(out)?;
    match bias {
        Some(b) => y.broadcast_add(b),
        None => Ok(y),
    }
}

/// A linear layer `y = act(x · Wᵀ + bias)` whose bias and activation run in the GEMM's epilogue
/// (no extra pass over `y`): a drop-in for `candle_nn::Linear` followed by the activation, for bf16
/// and f16. The weight `W (out_features, in_features)` and the bias `(out_features,)` are used as
/// they are (made contiguous once); `x (…, in_features)` is flattened to rows. The bias is of the
/// weight's type, or f32 ([`crate::Epilogue::with_f32_bias`]: added before `y` is rounded where
/// an f32-bias kernel or the decode GEMV runs the layer, else by a separate pass after `y`).
pub struct Linear {
    op: LinearOp,
}

struct LinearOp {
    weight: Tensor,
    bias: Option<Tensor>,
    activation: Activation,
}

impl Linear {
    /// A layer with this weight and optional bias (the weight's type or f32, on the same CUDA
    /// device).
    pub fn new(weight: Tensor, bias: Option<Tensor>) -> candle_core::Result<Self> {
        cuda_device(&weight)?;
        let (n, _) = weight.dims2()?;
        if !matches!(weight.dtype(), DType::BF16 | DType::F16) {
            return Err(msg(format!(
                "cutlass_gemm::candle::Linear takes bf16 or f16 weights, not {:?}",
                weight.dtype()
            )));
        }
        if let Some(b) = &bias {
            if b.dims() != [n] || (b.dtype() != weight.dtype() && b.dtype() != DType::F32) {
                return Err(msg(format!(
                    "the bias must be ({n},) {:?} or F32, not {:?} {:?}",
                    weight.dtype(),
                    b.dims(),
                    b.dtype()
                )));
            }
        }
        Ok(Linear {
            op: LinearOp {
                weight: packed(&weight)?,
                bias: bias.as_ref().map(packed).transpose()?,
                activation: Activation::Identity,
            },
        })
    }

    /// The layer with an activation applied in the epilogue.
    pub fn with_activation(mut self, activation: Activation) -> Self {
        self.op.activation = activation;
        self
    }

    /// The weight, `(out_features, in_features)`.
    pub fn weight(&self) -> &Tensor {
        &self.op.weight
    }

    /// The bias, `(out_features,)`.
    pub fn bias(&self) -> Option<&Tensor> {
        self.op.bias.as_ref()
    }

    /// The activation.
    pub fn activation(&self) -> Activation {
        self.op.activation
    }
}

impl Module for Linear {
    /// `x (…, in_features)` → `(…, out_features)`, of the weight's type.
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let (n, k) = self.op.weight.dims2()?;
        apply_to_rows(x, k, n, &self.op)
    }
}

impl CustomOp1 for LinearOp {
    fn name(&self) -> &'static str {
        "cutlass-linear"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(msg("cutlass-linear runs on CUDA tensors only"))
    }

    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        match &s.slice {
            CudaStorageSlice::BF16(x) => self.run::<bf16>(s, x, l),
            CudaStorageSlice::F16(x) => self.run::<f16>(s, x, l),
            _ => Err(msg(format!(
                "cutlass-linear takes bf16 or f16 inputs, not {:?}",
                s.dtype()
            ))),
        }
    }
}

impl LinearOp {
    fn run<T: Element + candle_core::cuda_backend::CudaDType>(
        &self,
        s: &CudaStorage,
        x: &CudaSlice<T>,
        l: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (m, k) = l.shape().dims2()?;
        let (n, _) = self.weight.dims2()?;
        let stream = s.device.cuda_stream();
        let f32_bias = self.bias.as_ref().is_some_and(|b| b.dtype() == DType::F32);
        let epilogue = Epilogue {
            bias: self.bias.as_ref().map(|_| crate::BiasAxis::PerColumn),
            activation: self.activation,
            ..Epilogue::NONE
        };
        let epilogue = if f32_bias {
            epilogue.with_f32_bias()
        } else {
            epilogue
        };
        // W (n, k) row-major is B (k x n) column-major.
        let problem = GemmProblem::new(m, n, k).with_b(MatrixLayout::col_major());
        let kind = match (self.bias.is_some(), self.activation) {
            (false, Activation::Identity) => "linear",
            _ => "linear-fused",
        };
        let key = format!("{kind}-{}", epilogue.describe());
        let gemm = cached(&stream, &problem, leak(key), |info, p| {
            Gemm::<T, T, T>::plan(info, p, None)?.with_epilogue(epilogue)
        })
        .map_err(cerr)?;
        // SAFETY: the GEMM writes every element of D before anything reads it.
        let mut d = unsafe { stream.alloc::<T>(m * n) }.map_err(|e| cerr(e.into()))?;
        let xv = x.slice(l.start_offset()..);
        let mut run = |wv: &cudarc::driver::CudaView<'_, T>, ops: &EpilogueOperands<'_, T>| {
            gemm.run_fused(&stream, &xv, wv, None, &mut d, ops, Workspace::Managed)
                .map_err(cerr)
        };
        let op = "cutlass-linear";
        if f32_bias {
            with_weight_and_bias::<T, f32, _>(op, &self.weight, self.bias.as_ref(), |wv, bias| {
                run(
                    wv,
                    &EpilogueOperands {
                        bias_f32: bias.map(|b| b as &dyn DevicePtr<f32>),
                        ..Default::default()
                    },
                )
            })?;
        } else {
            with_weight_and_bias::<T, T, _>(op, &self.weight, self.bias.as_ref(), |wv, bias| {
                run(
                    wv,
                    &EpilogueOperands {
                        bias: bias.map(|b| b as &dyn DevicePtr<T>),
                        ..Default::default()
                    },
                )
            })?;
        }
        Ok((
            CudaStorage::wrap_cuda_slice(d, s.device.clone()),
            Shape::from((m, n)),
        ))
    }
}

/// An MLP's gate and up projections with their gated activation in one GEMM ([`crate::GatedGemm`]):
/// `x (…, in_features)` → `act(x·W_gateᵀ + b_gate) ⊙ (x·W_upᵀ + b_up)`, `(…, out_features)`. SiLU
/// makes it a Llama-style SwiGLU, GELU a GeGLU. The two weights (and biases) are interleaved once,
/// on the device, when the layer is made; the `m x 2·out_features` intermediate of the unfused
/// layer never reaches memory. bf16 or f16, `out_features` a multiple of 8.
pub struct GatedLinear {
    op: GatedOp,
}

struct GatedOp {
    /// `(2·out_features, in_features)`, blocks of 8 gate rows and 8 up rows in turn.
    weight: Tensor,
    /// `(2·out_features,)`, interleaved the same way.
    bias: Option<Tensor>,
    activation: Activation,
}

impl GatedLinear {
    /// The layer from the gate and up weights, `(out_features, in_features)` each, and optional
    /// biases, `(out_features,)` each (both or neither), of one type on one CUDA device.
    pub fn new(
        gate: &Tensor,
        up: &Tensor,
        biases: Option<(&Tensor, &Tensor)>,
        activation: Activation,
    ) -> candle_core::Result<Self> {
        cuda_device(gate)?;
        let (n, k) = gate.dims2()?;
        if up.dims() != [n, k] || up.dtype() != gate.dtype() {
            return Err(msg(format!(
                "the up weight must be ({n}, {k}) {:?} as the gate's, not {:?} {:?}",
                gate.dtype(),
                up.dims(),
                up.dtype()
            )));
        }
        if !matches!(gate.dtype(), DType::BF16 | DType::F16) {
            return Err(msg(format!(
                "cutlass_gemm::candle::GatedLinear takes bf16 or f16 weights, not {:?}",
                gate.dtype()
            )));
        }
        if n % crate::plans::gated::GATE_BLOCK != 0 {
            return Err(cerr(crate::Error::InvalidProblem {
                reason: crate::ProblemRule::GatedOutputs { n },
            }));
        }
        if let Some((bg, bu)) = biases {
            for b in [bg, bu] {
                if b.dims() != [n] || b.dtype() != gate.dtype() {
                    return Err(msg(format!(
                        "the biases must be ({n},) {:?}, not {:?} {:?}",
                        gate.dtype(),
                        b.dims(),
                        b.dtype()
                    )));
                }
            }
        }
        // Blocks of 8 rows in turn: (n/8, 2, 8, k) viewed as (2n, k).
        let block = crate::plans::gated::GATE_BLOCK;
        let interleave = |g: &Tensor, u: &Tensor, cols: usize| -> candle_core::Result<Tensor> {
            let g = g.reshape((n / block, block, cols))?;
            let u = u.reshape((n / block, block, cols))?;
            Tensor::stack(&[g, u], 1)?
                .reshape((2 * n, cols))?
                .contiguous()
        };
        let weight = interleave(gate, up, k)?;
        let bias = biases
            .map(|(bg, bu)| interleave(bg, bu, 1)?.reshape(2 * n))
            .transpose()?;
        Ok(GatedLinear {
            op: GatedOp {
                weight: packed(&weight)?,
                bias: bias.as_ref().map(packed).transpose()?,
                activation,
            },
        })
    }

    /// The interleaved weight, `(2·out_features, in_features)`.
    pub fn weight(&self) -> &Tensor {
        &self.op.weight
    }

    /// The activation.
    pub fn activation(&self) -> Activation {
        self.op.activation
    }
}

impl Module for GatedLinear {
    /// `x (…, in_features)` → `(…, out_features)`, of the weight's type.
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let (n2, k) = self.op.weight.dims2()?;
        apply_to_rows(x, k, n2 / 2, &self.op)
    }
}

impl CustomOp1 for GatedOp {
    fn name(&self) -> &'static str {
        "cutlass-gated-linear"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(msg("cutlass-gated-linear runs on CUDA tensors only"))
    }

    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        match &s.slice {
            CudaStorageSlice::BF16(x) => self.run::<bf16>(s, x, l),
            CudaStorageSlice::F16(x) => self.run::<f16>(s, x, l),
            _ => Err(msg(format!(
                "cutlass-gated-linear takes bf16 or f16 inputs, not {:?}",
                s.dtype()
            ))),
        }
    }
}

impl GatedOp {
    fn run<T: Element + candle_core::cuda_backend::CudaDType>(
        &self,
        s: &CudaStorage,
        x: &CudaSlice<T>,
        l: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (m, k) = l.shape().dims2()?;
        let n = self.weight.dims2()?.0 / 2;
        let stream = s.device.cuda_stream();
        let epilogue = Epilogue {
            bias: self.bias.as_ref().map(|_| crate::BiasAxis::PerColumn),
            activation: self.activation,
            ..Epilogue::NONE
        };
        let problem = GemmProblem::new(m, n, k);
        let key = leak(format!("gated-{}", epilogue.describe()));
        let gemm = cached(&stream, &problem, key, |info, p| {
            crate::GatedGemm::<T>::plan(info, p, epilogue.activation, None)?.with_epilogue(epilogue)
        })
        .map_err(cerr)?;
        // SAFETY: the GEMM writes every element of D before anything reads it.
        let mut d = unsafe { stream.alloc::<T>(m * n) }.map_err(|e| cerr(e.into()))?;
        let xv = x.slice(l.start_offset()..);
        with_weight_and_bias::<T, T, _>(
            "cutlass-gated-linear",
            &self.weight,
            self.bias.as_ref(),
            |wv, bias| {
                let ops = EpilogueOperands {
                    bias: bias.map(|b| b as &dyn DevicePtr<T>),
                    ..Default::default()
                };
                gemm.run(&stream, &xv, wv, &mut d, &ops, Workspace::Managed)
                    .map_err(cerr)
            },
        )?;
        Ok((
            CudaStorage::wrap_cuda_slice(d, s.device.clone()),
            Shape::from((m, n)),
        ))
    }
}

/// Runs `f` on the CUDA views of a layer's weight and optional bias (of `T`, from their layouts'
/// offsets), holding their storage for the call. `op` names the layer in errors.
fn with_weight_and_bias<
    T: candle_core::cuda_backend::CudaDType,
    B: candle_core::cuda_backend::CudaDType,
    R,
>(
    op: &str,
    weight: &Tensor,
    bias: Option<&Tensor>,
    f: impl FnOnce(
        &cudarc::driver::CudaView<'_, T>,
        Option<&cudarc::driver::CudaView<'_, B>>,
    ) -> candle_core::Result<R>,
) -> candle_core::Result<R> {
    let (w_storage, w_layout) = weight.storage_and_layout();
    let candle_core::Storage::Cuda(ws) = &*w_storage else {
        return Err(msg(format!("{op} needs a CUDA weight")));
    };
    let wv = ws.as_cuda_slice::<T>()?.slice(w_layout.start_offset()..);
    let bias = bias.map(|b| b.storage_and_layout());
    let bias_slice = match &bias {
        Some((storage, layout)) => {
            let candle_core::Storage::Cuda(bs) = &**storage else {
                return Err(msg(format!("{op} needs a CUDA bias")));
            };
            Some((bs.as_cuda_slice::<B>()?, layout.start_offset()))
        }
        None => None,
    };
    let bias_view = bias_slice.as_ref().map(|(b, off)| b.slice(*off..));
    f(&wv, bias_view.as_ref())
}

/// A cache-key name that lives as long as the process (a handful of epilogue descriptions).
fn leak(key: String) -> &'static str {
    static KEYS: OnceLock<Mutex<HashMap<String, &'static str>>> = OnceLock::new();
    let mut keys = KEYS.get_or_init(Default::default).lock().unwrap();
    keys.entry(key.clone())
        .or_insert_with(|| Box::leak(key.into_boxed_str()))
}

/// A linear layer `y = x · Wᵀ (+ bias)` whose weight `W (out_features, in_features)` is quantized
/// once to FP8 e4m3 with one f32 scale per 128x128 block (on the GPU, [`quantize`]); each call
/// quantizes `x` in 1x128 groups and runs the SM90 FP8 blockwise GEMM (Hopper), bf16 out.
pub struct Fp8Linear {
    op: Fp8LinearOp,
}

struct Fp8LinearOp {
    weight: Arc<Fp8BlockwiseTensor>,
    /// bf16, `(out_features,)`, added in the GEMM's epilogue.
    bias: Option<Tensor>,
    activation: Activation,
}

impl Fp8Linear {
    /// Quantizes `weight` (`(out_features, in_features)`, bf16, f16 or f32, on a CUDA device).
    /// `bias` (`(out_features,)`, converted to bf16 once) is added in the GEMM's epilogue.
    pub fn new(weight: &Tensor, bias: Option<Tensor>) -> candle_core::Result<Self> {
        let stream = cuda_device(weight)?.cuda_stream();
        let (n, k) = weight.dims2()?;
        let q = with_weight_elements!("Fp8Linear", weight, |x| {
            quantize::quantize_fp8_blockwise(
                &stream,
                &x,
                n,
                k,
                Fp8Block::Block128x128,
                ScaleMajor::MN,
            )
        })
        .map_err(cerr)?;
        let bias = match bias {
            Some(b) if b.dims() == [n] => Some(packed(&b.to_dtype(DType::BF16)?)?),
            Some(b) => {
                return Err(msg(format!(
                    "Fp8Linear: the bias must be ({n},), not {:?}",
                    b.dims()
                )))
            }
            None => None,
        };
        Ok(Fp8Linear {
            op: Fp8LinearOp {
                weight: Arc::new(q),
                bias,
                activation: Activation::Identity,
            },
        })
    }

    /// The layer with an activation applied in the GEMM's epilogue (after the bias).
    pub fn with_activation(mut self, activation: Activation) -> Self {
        self.op.activation = activation;
        self
    }

    /// `(out_features, in_features)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.op.weight.rows, self.op.weight.cols)
    }

    /// The quantized weight (e4m3 elements, 128x128 block scales in [`ScaleMajor::MN`] order).
    pub fn weight(&self) -> &Fp8BlockwiseTensor {
        &self.op.weight
    }
}

impl Module for Fp8Linear {
    /// `x (…, in_features)` bf16 → `(…, out_features)` bf16.
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        // The kernel reads A's scales as M-major rows of m floats through TMA (16-byte multiples):
        // M is padded to a multiple of 4.
        linear_forward("Fp8Linear", &self.op, self.shape(), 4, None, x)
    }
}

impl CustomOp1 for Fp8LinearOp {
    fn name(&self) -> &'static str {
        "cutlass-fp8-linear"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(msg("cutlass-fp8-linear runs on CUDA tensors only"))
    }

    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        let (x, m, k) = linear_input(self.name(), s, l)?;
        let n = self.weight.rows;
        let stream = s.device.cuda_stream();
        let xq = quantize::quantize_fp8_blockwise(
            &stream,
            &x,
            m,
            k,
            Fp8Block::Group1x128,
            ScaleMajor::MN,
        )
        .map_err(cerr)?;
        let epilogue = Epilogue {
            bias: self.bias.as_ref().map(|_| crate::BiasAxis::PerColumn),
            activation: self.activation,
            ..Epilogue::NONE
        };
        let gemm = cached(
            &stream,
            &GemmProblem::new(m, n, k),
            leak(format!("fp8-blockwise-{}", epilogue.describe())),
            |info, p| {
                BlockwiseGemm::<E4M3, E4M3, bf16>::plan(info, p, None)?.with_epilogue(epilogue)
            },
        )
        .map_err(cerr)?;
        let mut d = linear_output(&stream, m, n)?;
        let bias = self.bias.as_ref().map(|b| b.storage_and_layout());
        let bias_view = match &bias {
            Some((storage, layout)) => {
                let candle_core::Storage::Cuda(bs) = &**storage else {
                    return Err(msg("Fp8Linear needs a CUDA bias"));
                };
                Some(bs.as_cuda_slice::<bf16>()?.slice(layout.start_offset()..))
            }
            None => None,
        };
        let ops = EpilogueOperands {
            bias: bias_view.as_ref().map(|b| b as &dyn DevicePtr<bf16>),
            ..Default::default()
        };
        gemm.run_tensors_fused(
            &stream,
            &xq,
            &self.weight,
            None,
            &mut d,
            &ops,
            Workspace::Managed,
        )
        .map_err(cerr)?;
        Ok(wrap_output(s, d, m, n))
    }
}

/// A linear layer with NVFP4 weights (e2m1 with ue4m3 scales per 16 and a per-tensor scale,
/// quantized once on the GPU) and NVFP4 activations (quantized per call), bf16 out. The GEMM
/// runs on SM100/SM120 GPUs only (Hopper has no FP4 tensor cores): [`Nvfp4Linear::new`] plans it
/// for the weight's device and returns the planner's error elsewhere.
pub struct Nvfp4Linear {
    op: Nvfp4LinearOp,
    bias: Option<Tensor>,
}

struct Nvfp4LinearOp {
    weight: Arc<Nvfp4Tensor>,
    n: usize,
    k: usize,
}

impl Nvfp4Linear {
    /// Quantizes `weight` (`(out_features, in_features)`, bf16, f16 or f32, on a CUDA device)
    /// and checks that this device has an NVFP4 kernel for the layer.
    pub fn new(weight: &Tensor, bias: Option<Tensor>) -> candle_core::Result<Self> {
        let stream = cuda_device(weight)?.cuda_stream();
        let (n, k) = weight.dims2()?;
        // Plan first: on a GPU without an NVFP4 kernel nothing is quantized.
        cached(&stream, &GemmProblem::new(128, n, k), "nvfp4", |info, p| {
            BlockScaledGemm::<E2M1, E2M1, bf16>::plan_nvfp4(info, p, None)
        })
        .map_err(cerr)?;
        let q = with_weight_elements!("Nvfp4Linear", weight, |x| {
            quantize::quantize_nvfp4(&stream, &x, n, k)
        })
        .map_err(cerr)?;
        Ok(Nvfp4Linear {
            op: Nvfp4LinearOp {
                weight: Arc::new(q),
                n,
                k,
            },
            bias,
        })
    }
}

impl Module for Nvfp4Linear {
    /// `x (…, in_features)` bf16 → `(…, out_features)` bf16.
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let shape = (self.op.n, self.op.k);
        linear_forward("Nvfp4Linear", &self.op, shape, 1, self.bias.as_ref(), x)
    }
}

impl CustomOp1 for Nvfp4LinearOp {
    fn name(&self) -> &'static str {
        "cutlass-nvfp4-linear"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(msg("cutlass-nvfp4-linear runs on CUDA tensors only"))
    }

    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        let (x, m, k) = linear_input(self.name(), s, l)?;
        let n = self.n;
        let stream = s.device.cuda_stream();
        let gemm = cached(&stream, &GemmProblem::new(m, n, k), "nvfp4", |info, p| {
            BlockScaledGemm::<E2M1, E2M1, bf16>::plan_nvfp4(info, p, None)
        })
        .map_err(cerr)?;
        let xq = quantize::quantize_nvfp4(&stream, &x, m, k).map_err(cerr)?;
        let mut d = linear_output(&stream, m, n)?;
        gemm.run(
            &stream,
            &xq,
            &*self.weight,
            None,
            &mut d,
            Workspace::Managed,
        )
        .map_err(cerr)?;
        Ok(wrap_output(s, d, m, n))
    }
}

/// A mixture-of-experts layer's expert GEMMs in one grouped launch ([`crate::GroupedGemm`]): `x`
/// `(rows, k)` holds the tokens sorted by expert, `experts` `(e, n, k)` one weight per expert (as a
/// Linear layer stores it), and `offsets` `(e + 1)` (I32 or U32) where each expert's rows start and
/// end: row `i` of the result is `x[i] · experts[g]ᵀ` for the expert `g` whose rows hold `i`.
/// Rows no expert holds (before `offsets[0]` or after `offsets[e]`) are 0. bf16 or f16; `x` and
/// `experts` are made contiguous if they are not.
///
/// The offsets are read on the GPU and clamped to `rows`, never trusted (decreasing offsets give
/// an unspecified result in the rows concerned, never an access out of bounds). The plan is
/// cached per (device, types, experts, rows, n, k), so a decode loop plans once per batch size.
pub fn grouped_matmul(
    x: &Tensor,
    experts: &Tensor,
    offsets: &Tensor,
) -> candle_core::Result<Tensor> {
    cuda_device(x)?;
    cuda_device(experts)?;
    cuda_device(offsets)?;
    let x = x.contiguous()?;
    let experts = experts.contiguous()?;
    let offsets = offsets.contiguous()?;
    x.apply_op3_no_bwd(&experts, &offsets, &GroupedMatmul)
}

/// [`grouped_matmul`] as a candle `CustomOp3` (`x.apply_op3_no_bwd(&experts, &offsets,
/// &GroupedMatmul)`), over contiguous tensors.
pub struct GroupedMatmul;

impl candle_core::CustomOp3 for GroupedMatmul {
    fn name(&self) -> &'static str {
        "cutlass-grouped-matmul"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(msg("cutlass-grouped-matmul runs on CUDA tensors only"))
    }

    fn cuda_fwd(
        &self,
        sx: &CudaStorage,
        lx: &Layout,
        sw: &CudaStorage,
        lw: &Layout,
        so: &CudaStorage,
        lo: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (rows, k) = match lx.shape().dims() {
            &[rows, k] => (rows, k),
            other => {
                return Err(msg(format!(
                    "cutlass-grouped-matmul: x must be (rows, k), not {other:?}"
                )))
            }
        };
        let (groups, n, wk) = match lw.shape().dims() {
            &[g, n, wk] => (g, n, wk),
            other => {
                return Err(msg(format!(
                    "cutlass-grouped-matmul: experts must be (experts, n, k), not {other:?}"
                )))
            }
        };
        if wk != k || lo.shape().dims() != [groups + 1] {
            return Err(msg(format!(
                "cutlass-grouped-matmul: x {:?}, experts {:?} and offsets {:?} do not agree: x (rows, k), experts (e, n, k), offsets (e + 1)",
                lx.shape().dims(),
                lw.shape().dims(),
                lo.shape().dims()
            )));
        }
        for (what, l) in [("x", lx), ("experts", lw), ("offsets", lo)] {
            if !l.is_contiguous() {
                return Err(msg(format!(
                    "cutlass-grouped-matmul: {what} must be contiguous (grouped_matmul copies it)"
                )));
            }
        }
        let problem = GroupedProblem::contiguous(groups, rows, n, k);
        let stream = sx.device.cuda_stream();
        let offsets = grouped_offsets(so, lo, groups)?;
        let out = match (&sx.slice, &sw.slice) {
            (CudaStorageSlice::BF16(x), CudaStorageSlice::BF16(w)) => CudaStorageSlice::BF16(
                run_grouped::<bf16>(&stream, &problem, x, lx, w, lw, &offsets)?,
            ),
            (CudaStorageSlice::F16(x), CudaStorageSlice::F16(w)) => CudaStorageSlice::F16(
                run_grouped::<f16>(&stream, &problem, x, lx, w, lw, &offsets)?,
            ),
            _ => {
                return Err(msg(format!(
                    "cutlass-grouped-matmul takes bf16 or f16 x and experts of one type, not {:?} and {:?}",
                    sx.dtype(),
                    sw.dtype()
                )))
            }
        };
        Ok((
            CudaStorage {
                slice: out,
                device: sx.device.clone(),
            },
            Shape::from((rows, n)),
        ))
    }
}

/// A candle F8E4M3 slice from its layout's offset as `len` of this crate's E4M3 (the same bytes).
fn as_e4m3<'a, F>(
    s: &'a CudaSlice<F>,
    l: &Layout,
    len: usize,
) -> candle_core::Result<cudarc::driver::CudaView<'a, E4M3>> {
    assert_eq!(std::mem::size_of::<F>(), 1, "an FP8 element is one byte");
    // SAFETY: both are one-byte FP8 e4m3 encodings; every bit pattern is valid in both.
    unsafe { s.slice(l.start_offset()..).transmute::<E4M3>(len) }
        .ok_or_else(|| msg("cutlass-grouped-matmul-fp8-blockwise: a tensor is too short"))
}

/// The `groups + 1` offsets of a grouped op as i32 (u32 offsets are read as i32: values past
/// i32::MAX become negative and are clamped on the GPU).
fn grouped_offsets<'a>(
    so: &'a CudaStorage,
    lo: &Layout,
    groups: usize,
) -> candle_core::Result<cudarc::driver::CudaView<'a, i32>> {
    match &so.slice {
        CudaStorageSlice::I32(o) => Ok(o.slice(lo.start_offset()..)),
        // SAFETY: u32 and i32 have the same size and alignment; every bit pattern is an i32.
        CudaStorageSlice::U32(o) => unsafe {
            o.slice(lo.start_offset()..)
                .transmute::<i32>(groups + 1)
                .ok_or_else(|| msg("cutlass-grouped-matmul: offsets too short"))
        },
        _ => Err(msg(format!(
            "cutlass-grouped-matmul: offsets are I32 or U32, not {:?}",
            so.dtype()
        ))),
    }
}

fn run_grouped<T: Element + cudarc::driver::ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    problem: &GroupedProblem,
    x: &CudaSlice<T>,
    lx: &Layout,
    w: &CudaSlice<T>,
    lw: &Layout,
    offsets: &cudarc::driver::CudaView<'_, i32>,
) -> candle_core::Result<CudaSlice<T>> {
    let plan = cached(stream, problem, "grouped", |info, p| {
        GroupedGemm::<T, T>::plan(info, p, None)
    })
    .map_err(cerr)?;
    // Zeros: rows no expert holds are not written by the GEMM.
    let mut d = stream
        .alloc_zeros::<T>(problem.d_len())
        .map_err(|e| cerr(e.into()))?;
    let xv = x.slice(lx.start_offset()..);
    let wv = w.slice(lw.start_offset()..);
    plan.run(
        stream,
        &GroupedInputs::new(&xv, &wv, offsets),
        &mut d,
        Workspace::Managed,
    )
    .map_err(cerr)?;
    Ok(d)
}

/// [`grouped_matmul`] for FP8 experts with blockwise scales ([`crate::GroupedBlockwiseGemm`],
/// the DeepSeek-V3 recipe): `x` `(rows, k)` F8E4M3 tokens sorted by expert with `x_scales` `(rows,
/// ceil(k / 128))` F32 (one per token and 128 elements of K), `experts` `(e, n, k)` F8E4M3 with
/// `expert_scales` `(e, ceil(n / 128), ceil(k / 128))` F32 (one per 128x128 block: a checkpoint's
/// `weight_scale_inv` stacked), `offsets` `(e + 1)` I32 or U32. Returns `(rows, n)` bf16: row `i`
/// is `Σ_kb x_scales[i, kb] · expert_scales[g, j / 128, kb] · (x[i] · experts[g][j])` over the
/// k-block `kb`, for the expert `g` whose rows hold `i`; rows no expert holds are 0.
///
/// Every tensor must be contiguous: candle 0.11.1 cannot copy strided F8E4M3 tensors on CUDA (see
/// [`matmul_fp8`]), so this refuses them rather than copy. Offsets are clamped on the GPU as in
/// [`grouped_matmul`]; the plan is cached per (device, experts, rows, n, k).
pub fn grouped_matmul_fp8_blockwise(
    x: &Tensor,
    x_scales: &Tensor,
    experts: &Tensor,
    expert_scales: &Tensor,
    offsets: &Tensor,
) -> candle_core::Result<Tensor> {
    for (what, t, dtype) in [
        ("x", x, Some(DType::F8E4M3)),
        ("x_scales", x_scales, Some(DType::F32)),
        ("experts", experts, Some(DType::F8E4M3)),
        ("expert_scales", expert_scales, Some(DType::F32)),
        ("offsets", offsets, None),
    ] {
        cuda_device(t)?;
        if dtype.is_some_and(|d| t.dtype() != d) {
            return Err(msg(format!(
                "grouped_matmul_fp8_blockwise: {what} must be {:?}, not {:?}",
                dtype.unwrap(),
                t.dtype()
            )));
        }
        if !t.is_contiguous() {
            return Err(msg(format!(
                "grouped_matmul_fp8_blockwise: {what} must be contiguous (candle cannot copy strided F8E4M3 tensors on CUDA)"
            )));
        }
    }
    let (rows, k) = x.dims2()?;
    let (groups, n, wk) = experts.dims3()?;
    let (kb, nb) = (k.div_ceil(128), n.div_ceil(128));
    if wk != k
        || x_scales.dims() != [rows, kb]
        || expert_scales.dims() != [groups, nb, kb]
        || offsets.dims() != [groups + 1]
    {
        return Err(msg(format!(
            "grouped_matmul_fp8_blockwise: x {:?}, x_scales {:?}, experts {:?}, expert_scales {:?} and offsets {:?} do not agree: x (rows, k), x_scales (rows, ceil(k / 128)), experts (e, n, k), expert_scales (e, ceil(n / 128), ceil(k / 128)), offsets (e + 1)",
            x.dims(),
            x_scales.dims(),
            experts.dims(),
            expert_scales.dims(),
            offsets.dims()
        )));
    }
    x.apply_op3_no_bwd(
        experts,
        offsets,
        &GroupedMatmulFp8Blockwise {
            x_scales: x_scales.clone(),
            expert_scales: expert_scales.clone(),
        },
    )
}

/// [`grouped_matmul_fp8_blockwise`]'s `CustomOp3` over `(x, experts, offsets)`, carrying the two
/// scale tensors (contiguous, checked by the function).
struct GroupedMatmulFp8Blockwise {
    x_scales: Tensor,
    expert_scales: Tensor,
}

impl candle_core::CustomOp3 for GroupedMatmulFp8Blockwise {
    fn name(&self) -> &'static str {
        "cutlass-grouped-matmul-fp8-blockwise"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(msg(
            "cutlass-grouped-matmul-fp8-blockwise runs on CUDA tensors only",
        ))
    }

    fn cuda_fwd(
        &self,
        sx: &CudaStorage,
        lx: &Layout,
        sw: &CudaStorage,
        lw: &Layout,
        so: &CudaStorage,
        lo: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (rows, k) = lx.shape().dims2()?;
        let (groups, n, _) = lw.shape().dims3()?;
        let (CudaStorageSlice::F8E4M3(x), CudaStorageSlice::F8E4M3(w)) = (&sx.slice, &sw.slice)
        else {
            return Err(msg(
                "cutlass-grouped-matmul-fp8-blockwise takes F8E4M3 x and experts",
            ));
        };
        let stream = sx.device.cuda_stream();
        let offsets = grouped_offsets(so, lo, groups)?;
        let xv = as_e4m3(x, lx, rows * k)?;
        let wv = as_e4m3(w, lw, groups * n * k)?;
        let (sa_storage, sa_layout) = self.x_scales.storage_and_layout();
        let (sb_storage, sb_layout) = self.expert_scales.storage_and_layout();
        let (candle_core::Storage::Cuda(sa), candle_core::Storage::Cuda(sb)) =
            (&*sa_storage, &*sb_storage)
        else {
            return Err(msg(
                "cutlass-grouped-matmul-fp8-blockwise needs CUDA scale tensors",
            ));
        };
        let sav = sa.as_cuda_slice::<f32>()?.slice(sa_layout.start_offset()..);
        let sbv = sb.as_cuda_slice::<f32>()?.slice(sb_layout.start_offset()..);
        let problem = GroupedProblem::contiguous(groups, rows, n, k);
        let plan = cached(&stream, &problem, "grouped-fp8-blockwise", |info, p| {
            crate::GroupedBlockwiseGemm::<bf16>::plan(info, p, None)
        })
        .map_err(cerr)?;
        // Zeros: rows no expert holds are not written by the GEMM.
        let mut d = stream
            .alloc_zeros::<bf16>(problem.d_len())
            .map_err(|e| cerr(e.into()))?;
        plan.run(
            &stream,
            &GroupedInputs::new(&xv, &wv, &offsets),
            &sav,
            &sbv,
            &mut d,
            Workspace::Managed,
        )
        .map_err(cerr)?;
        Ok((
            CudaStorage::wrap_cuda_slice(d, sx.device.clone()),
            Shape::from((rows, n)),
        ))
    }
}

/// A linear layer `y = x · dequant(W)ᵀ (+ bias)` with a 4-bit, FP8 or int8 weight
/// ([`crate::QuantizedWeight`], the weight-only kernels of the `weight-only` feature, Hopper):
/// bf16 or f16 activations, the weight quantized here ([`WeightOnlyLinear::quantize`]; FP8 and
/// int8 with `group_size` = in_features) or taken from a GPTQ or AWQ checkpoint
/// as those tools write it in safetensors ([`WeightOnlyLinear::from_gptq`],
/// [`WeightOnlyLinear::from_awq`]), or from an FP8 or int8 checkpoint with per-channel or
/// per-tensor scales ([`WeightOnlyLinear::from_fp8`], [`WeightOnlyLinear::from_int8`]). The
/// bias, when given, is added after the GEMM.
pub struct WeightOnlyLinear {
    op: WeightOnlyOp,
    bias: Option<Tensor>,
}

enum QuantizedAny {
    Bf16(crate::QuantizedWeight<bf16>),
    F16(crate::QuantizedWeight<f16>),
}

struct WeightOnlyOp {
    weight: Arc<QuantizedAny>,
}

/// A contiguous CUDA tensor's elements from offset 0 (the tensor made so first).
macro_rules! with_cuda_slice {
    ($t:expr, $ty:ty, |$x:ident| $body:expr) => {{
        let t = packed($t)?;
        let (storage, _) = t.storage_and_layout();
        let candle_core::Storage::Cuda(s) = &*storage else {
            return Err(msg("the weight-only layers take CUDA tensors"));
        };
        let $x = s.as_cuda_slice::<$ty>()?;
        $body
    }};
}

/// Evaluates `$body` with the type `$t` bound to the activations' type of `$dtype` (bf16, or f16
/// for any other: callers check first) and wraps its weight.
macro_rules! by_activation {
    ($dtype:expr, |$t:ident| $body:expr) => {{
        match $dtype {
            DType::BF16 => {
                type $t = bf16;
                QuantizedAny::Bf16($body)
            }
            _ => {
                type $t = f16;
                QuantizedAny::F16($body)
            }
        }
    }};
}

impl WeightOnlyLinear {
    /// Quantizes `weight` (`(out_features, in_features)`, bf16 or f16 on a CUDA device: the
    /// activations' type) in groups of `group_size` columns, symmetric or with zero points, or to
    /// FP8 or int8 with a scale per output feature (`group_size` = in_features)
    /// ([`crate::QuantizedWeight::quantize`]).
    pub fn quantize(
        weight: &Tensor,
        bias: Option<Tensor>,
        group_size: usize,
        format: crate::WeightFormat,
    ) -> candle_core::Result<Self> {
        let stream = cuda_device(weight)?.cuda_stream();
        let (n, k) = weight.dims2()?;
        if !matches!(weight.dtype(), DType::BF16 | DType::F16) {
            return Err(msg(format!(
                "WeightOnlyLinear quantizes bf16 or f16 weights, not {:?}",
                weight.dtype()
            )));
        }
        let q = by_activation!(weight.dtype(), |T| with_cuda_slice!(weight, T, |w| {
            crate::QuantizedWeight::<T>::quantize(&stream, w, n, k, group_size, format)
                .map_err(cerr)?
        }));
        Self::with(q, bias)
    }

    /// A GPTQ checkpoint's layer: `qweight` (`(in_features / 8, out_features)` I32), `qzeros`
    /// (`(groups, out_features / 8)` I32), `scales` (`(groups, out_features)`, F16 as GPTQ writes
    /// them: converted once to `dtype`, the activations' type, bf16 or f16) and `g_idx` when the
    /// checkpoint has one (act-order checkpoints are refused). `zero_offset` is 1 for GPTQ's
    /// original format (zero points stored minus one), 0 for "v2".
    #[allow(clippy::too_many_arguments)]
    pub fn from_gptq(
        qweight: &Tensor,
        qzeros: &Tensor,
        scales: &Tensor,
        g_idx: Option<&Tensor>,
        bias: Option<Tensor>,
        dtype: DType,
        zero_offset: i32,
    ) -> candle_core::Result<Self> {
        let (k8, n) = qweight.dims2()?;
        let (groups, _) = scales.dims2()?;
        let k = k8 * 8;
        let group_size = k / groups.max(1);
        let g_idx = g_idx.map(|g| g.to_vec1::<i32>()).transpose()?;
        Self::import(
            qweight,
            qzeros,
            scales,
            dtype,
            bias,
            |stream, q, z, s, dtype| {
                Ok(by_activation!(dtype, |T| with_cuda_slice!(s, T, |s| {
                    crate::QuantizedWeight::<T>::from_gptq(
                        stream,
                        q,
                        z,
                        s,
                        g_idx.as_deref(),
                        n,
                        k,
                        group_size,
                        zero_offset,
                    )
                    .map_err(cerr)?
                })))
            },
        )
    }

    /// An AWQ checkpoint's layer (its GEMM layout): `qweight` (`(in_features, out_features / 8)`
    /// I32), `qzeros` (`(groups, out_features / 8)` I32) and `scales` (`(groups, out_features)`,
    /// converted once to `dtype`, bf16 or f16).
    pub fn from_awq(
        qweight: &Tensor,
        qzeros: &Tensor,
        scales: &Tensor,
        bias: Option<Tensor>,
        dtype: DType,
    ) -> candle_core::Result<Self> {
        let (k, n8) = qweight.dims2()?;
        let (groups, _) = scales.dims2()?;
        let n = n8 * 8;
        let group_size = k / groups.max(1);
        Self::import(
            qweight,
            qzeros,
            scales,
            dtype,
            bias,
            |stream, q, z, s, dtype| {
                Ok(by_activation!(dtype, |T| with_cuda_slice!(s, T, |s| {
                    crate::QuantizedWeight::<T>::from_awq(stream, q, z, s, n, k, group_size)
                        .map_err(cerr)?
                })))
            },
        )
    }

    /// An FP8 checkpoint's layer (weight-only FP8, as compressed-tensors and FBGEMM write it):
    /// `weight` (`(out_features, in_features)`, F8E4M3, or U8 holding its bytes) and
    /// `weight_scale` (F32, BF16 or F16: one per output feature, `(out_features,)` or
    /// `(out_features, 1)`, or one for the tensor, `()` or `(1,)`), so that the layer's weight is
    /// `e4m3(q) · s`. The scales are converted once to `dtype`, the activations' type (bf16 or
    /// f16: the kernels take scales of that type; bf16 keeps 8 significant bits of an f32
    /// scale). Activations stay in `dtype`: a static activation scale (`input_scale`) is not
    /// used. A row holding e4m3's NaN byte gives NaN ([`crate::QuantizedWeight::from_fp8`]).
    pub fn from_fp8(
        weight: &Tensor,
        weight_scale: &Tensor,
        bias: Option<Tensor>,
        dtype: DType,
    ) -> candle_core::Result<Self> {
        Self::per_channel(weight, weight_scale, bias, dtype, crate::WeightFormat::Fp8)
    }

    /// An int8 checkpoint's layer (symmetric per-channel int8, "W8A16"): `weight`
    /// (`(out_features, in_features)`, U8 holding the s8 values' two's complement bytes: candle
    /// has no I8 type, so read a safetensors I8 tensor's bytes into one, e.g. with
    /// `Tensor::from_raw_buffer(view.data(), DType::U8, view.shape(), &device)`) and
    /// `weight_scale` as [`WeightOnlyLinear::from_fp8`] takes it; the layer's weight is `q · s`.
    pub fn from_int8(
        weight: &Tensor,
        weight_scale: &Tensor,
        bias: Option<Tensor>,
        dtype: DType,
    ) -> candle_core::Result<Self> {
        Self::per_channel(weight, weight_scale, bias, dtype, crate::WeightFormat::Int8)
    }

    fn per_channel(
        weight: &Tensor,
        weight_scale: &Tensor,
        bias: Option<Tensor>,
        dtype: DType,
        format: crate::WeightFormat,
    ) -> candle_core::Result<Self> {
        let stream = cuda_device(weight)?.cuda_stream();
        if !matches!(dtype, DType::BF16 | DType::F16) {
            return Err(msg(format!(
                "WeightOnlyLinear runs bf16 or f16 activations, not {dtype:?}"
            )));
        }
        let (n, k) = weight.dims2()?;
        let byte_type = match format {
            crate::WeightFormat::Fp8 => matches!(weight.dtype(), DType::F8E4M3 | DType::U8),
            _ => weight.dtype() == DType::U8,
        };
        if !byte_type {
            return Err(msg(format!(
                "an {format} weight must be {}, not {:?}",
                if format == crate::WeightFormat::Fp8 {
                    "F8E4M3 or U8"
                } else {
                    "U8 (the s8 values' bytes)"
                },
                weight.dtype()
            )));
        }
        let scales = match weight_scale.dims() {
            [] | [1] => weight_scale.reshape(1)?.broadcast_as(n)?,
            [m] | [m, 1] if *m == n => weight_scale.reshape(n)?,
            other => {
                return Err(msg(format!(
                    "weight_scale must be ({n},), ({n}, 1), () or (1,) for a ({n}, {k}) weight, not {other:?}"
                )))
            }
        };
        if !matches!(weight_scale.dtype(), DType::F32 | DType::BF16 | DType::F16) {
            return Err(msg(format!(
                "weight_scale must be F32, BF16 or F16, not {:?}",
                weight_scale.dtype()
            )));
        }
        let scales = scales.to_dtype(dtype)?.contiguous()?;
        if weight.dtype() == DType::F8E4M3 && !weight.is_contiguous() {
            // candle 0.11.1 cannot copy strided F8E4M3 tensors on CUDA.
            return Err(msg(
                "an F8E4M3 weight must be contiguous (transpose or slice it in another type before converting to FP8)",
            ));
        }
        let weight = packed(weight)?;
        let (storage, layout) = weight.storage_and_layout();
        let candle_core::Storage::Cuda(w) = &*storage else {
            return Err(msg("the weight-only layers take CUDA tensors"));
        };
        let q = by_activation!(dtype, |T| with_cuda_slice!(&scales, T, |s| {
            let short = || msg("the weight holds fewer elements than its dims");
            match (&w.slice, format) {
                // SAFETY: an F8E4M3 element is one byte, as u8; the view covers n * k of them
                // from the layout's offset (none when fewer, refused).
                (CudaStorageSlice::F8E4M3(v), _) => {
                    let v = unsafe { v.slice(layout.start_offset()..).transmute::<u8>(n * k) }
                        .ok_or_else(short)?;
                    crate::QuantizedWeight::<T>::from_fp8(&stream, &v, s, n, k)
                }
                (CudaStorageSlice::U8(v), crate::WeightFormat::Fp8) => {
                    crate::QuantizedWeight::<T>::from_fp8(
                        &stream,
                        &v.slice(layout.start_offset()..),
                        s,
                        n,
                        k,
                    )
                }
                // SAFETY: u8 and i8 have one layout; the view covers n * k of the bytes.
                (CudaStorageSlice::U8(v), _) => {
                    let v = unsafe { v.slice(layout.start_offset()..).transmute::<i8>(n * k) }
                        .ok_or_else(short)?;
                    crate::QuantizedWeight::<T>::from_int8(&stream, &v, s, n, k)
                }
                _ => return Err(msg("the weight must be F8E4M3 or U8")),
            }
            .map_err(cerr)?
        }));
        Self::with(q, bias)
    }

    fn import(
        qweight: &Tensor,
        qzeros: &Tensor,
        scales: &Tensor,
        dtype: DType,
        bias: Option<Tensor>,
        make: impl FnOnce(
            &Arc<CudaStream>,
            &CudaSlice<i32>,
            &CudaSlice<i32>,
            &Tensor,
            DType,
        ) -> candle_core::Result<QuantizedAny>,
    ) -> candle_core::Result<Self> {
        let stream = cuda_device(qweight)?.cuda_stream();
        if !matches!(dtype, DType::BF16 | DType::F16) {
            return Err(msg(format!(
                "WeightOnlyLinear runs bf16 or f16 activations, not {dtype:?}"
            )));
        }
        for (what, t) in [("qweight", qweight), ("qzeros", qzeros)] {
            if t.dtype() != DType::I32 {
                return Err(msg(format!("{what} must be I32, not {:?}", t.dtype())));
            }
        }
        let scales = scales.to_dtype(dtype)?;
        let q = with_cuda_slice!(qweight, i32, |q| with_cuda_slice!(qzeros, i32, |z| make(
            &stream, q, z, &scales, dtype
        )?));
        Self::with(q, bias)
    }

    fn with(weight: QuantizedAny, bias: Option<Tensor>) -> candle_core::Result<Self> {
        let (n, dtype) = match &weight {
            QuantizedAny::Bf16(w) => (w.n(), DType::BF16),
            QuantizedAny::F16(w) => (w.n(), DType::F16),
        };
        if let Some(b) = &bias {
            if b.dims() != [n] || b.dtype() != dtype {
                return Err(msg(format!(
                    "the bias must be ({n},) {dtype:?}, not {:?} {:?}",
                    b.dims(),
                    b.dtype()
                )));
            }
        }
        Ok(WeightOnlyLinear {
            op: WeightOnlyOp {
                weight: Arc::new(weight),
            },
            bias,
        })
    }

    /// `(out_features, in_features)`.
    pub fn dims(&self) -> (usize, usize) {
        match &*self.op.weight {
            QuantizedAny::Bf16(w) => (w.n(), w.k()),
            QuantizedAny::F16(w) => (w.n(), w.k()),
        }
    }

    /// Bytes the quantized weight occupies on the device.
    pub fn weight_bytes(&self) -> usize {
        match &*self.op.weight {
            QuantizedAny::Bf16(w) => w.device_bytes(),
            QuantizedAny::F16(w) => w.device_bytes(),
        }
    }
}

impl Module for WeightOnlyLinear {
    /// `x (…, in_features)` of the activations' type → `(…, out_features)`.
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let (n, k) = self.dims();
        let y = apply_to_rows(x, k, n, &self.op)?;
        match &self.bias {
            Some(b) => y.broadcast_add(b),
            None => Ok(y),
        }
    }
}

impl CustomOp1 for WeightOnlyOp {
    fn name(&self) -> &'static str {
        "cutlass-weight-only-linear"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(msg("cutlass-weight-only-linear runs on CUDA tensors only"))
    }

    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        match (&s.slice, &*self.weight) {
            (CudaStorageSlice::BF16(x), QuantizedAny::Bf16(w)) => weight_only_run(s, x, l, w),
            (CudaStorageSlice::F16(x), QuantizedAny::F16(w)) => weight_only_run(s, x, l, w),
            _ => Err(msg(format!(
                "cutlass-weight-only-linear: the input is {:?}, the layer's activations {}",
                s.dtype(),
                match &*self.weight {
                    QuantizedAny::Bf16(_) => "bf16",
                    QuantizedAny::F16(_) => "f16",
                }
            ))),
        }
    }
}

fn weight_only_run<T: crate::WeightOnlyInput + candle_core::cuda_backend::CudaDType>(
    s: &CudaStorage,
    x: &CudaSlice<T>,
    l: &Layout,
    w: &crate::QuantizedWeight<T>,
) -> candle_core::Result<(CudaStorage, Shape)> {
    let (m, _) = l.shape().dims2()?;
    let n = w.n();
    let stream = s.device.cuda_stream();
    let problem = crate::WeightOnlyProblem::for_weight(m, w);
    let plan = cached(&stream, &problem, "weight-only", |info, p| {
        crate::WeightOnlyGemm::<T>::plan(info, p, None)
    })
    .map_err(cerr)?;
    // SAFETY: the GEMM writes every element of Y before anything reads it.
    let mut y = unsafe { stream.alloc::<T>(m * n) }.map_err(|e| cerr(e.into()))?;
    let xv = x.slice(l.start_offset()..);
    plan.run(&stream, &xv, w, None, &mut y, Workspace::Managed)
        .map_err(cerr)?;
    Ok((
        CudaStorage::wrap_cuda_slice(y, s.device.clone()),
        Shape::from((m, n)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(dims: &[usize], strides: &[usize], offset: usize) -> Layout {
        Layout::new(Shape::from(dims.to_vec()), strides.to_vec(), offset)
    }

    #[test]
    fn geometry_of_views() {
        // Contiguous (2, 3, 4, 8): row-major, ld 8, batch 6 with stride 32.
        let g = geometry(&layout(&[2, 3, 4, 8], &[96, 32, 8, 1], 0)).unwrap();
        assert_eq!((g.batch, g.rows, g.cols, g.batch_stride), (6, 4, 8, 32));
        assert_eq!(g.layout, MatrixLayout::row_major().with_ld(8));
        // Its transpose of the last two dims: column-major (8 x 4) with ld 8.
        let g = geometry(&layout(&[2, 3, 8, 4], &[96, 32, 1, 8], 0)).unwrap();
        assert_eq!(g.layout, MatrixLayout::col_major().with_ld(8));
        // A column slice: row-major with the parent's row stride, offset kept.
        let g = geometry(&layout(&[4, 16], &[64, 1], 8)).unwrap();
        assert_eq!(
            (g.layout, g.offset),
            (MatrixLayout::row_major().with_ld(64), 8)
        );
        // Neither rows nor columns contiguous.
        assert!(geometry(&layout(&[4, 8], &[16, 2], 0)).is_err());
        // Batch dims not describable by one stride (a slice of the outer batch dim).
        assert!(geometry(&layout(&[2, 3, 4, 8], &[200, 32, 8, 1], 0)).is_err());
        // Broadcast batch: stride 0.
        let g = geometry(&layout(&[5, 4, 8], &[0, 8, 1], 0)).unwrap();
        assert_eq!((g.batch, g.batch_stride), (5, 0));
    }

    #[test]
    fn problems_from_layouts() {
        // (2, 16, 32) x (2, 32, 64): batched, both row-major.
        let (p, dims) = problem_of(
            &layout(&[2, 16, 32], &[512, 32, 1], 0),
            &layout(&[2, 32, 64], &[2048, 64, 1], 0),
        )
        .unwrap();
        assert_eq!((p.m, p.n, p.k, p.batch), (16, 64, 32, 2));
        assert_eq!(
            p.a,
            MatrixLayout::row_major().with_ld(32).with_batch_stride(512)
        );
        assert_eq!(
            p.b,
            MatrixLayout::row_major()
                .with_ld(64)
                .with_batch_stride(2048)
        );
        assert_eq!(dims, vec![2, 16, 64]);
        // x (3, 16, 32) · W broadcast (3, 32, 64) with stride 0: folded into M = 48.
        let (p, dims) = problem_of(
            &layout(&[3, 16, 32], &[512, 32, 1], 0),
            &layout(&[3, 32, 64], &[0, 1, 32], 0),
        )
        .unwrap();
        assert_eq!((p.m, p.n, p.k, p.batch), (48, 64, 32, 1));
        assert_eq!(p.b, MatrixLayout::col_major().with_ld(32));
        assert_eq!(dims, vec![3, 16, 64]);
        // Mismatched k, mismatched batch dims.
        assert!(problem_of(
            &layout(&[16, 32], &[32, 1], 0),
            &layout(&[31, 8], &[8, 1], 0)
        )
        .is_err());
        assert!(problem_of(
            &layout(&[2, 16, 32], &[512, 32, 1], 0),
            &layout(&[3, 32, 8], &[256, 8, 1], 0)
        )
        .is_err());
    }
}
