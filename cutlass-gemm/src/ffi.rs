//! The one path to the C ABI: a kernel's entry points, [`RawArgs`] to the C argument struct, and
//! C statuses to [`crate::Error`].

use cudarc::driver::{sys, CudaContext};
use cutlass_gemm_catalog::KernelSpec;
use cutlass_gemm_sys::{cutlass_rs_gemm_args, cutlass_rs_kernel_entry};

use crate::error::Result;

/// One compiled kernel: its catalog spec and its C entry points.
#[derive(Clone, Copy)]
pub struct Kernel {
    /// What the kernel is (types, layouts, tile, schedule, architecture).
    pub spec: KernelSpec,
    /// The procedural name.
    pub name: &'static str,
    pub(crate) entry: Entry,
}

/// The C entry points of one kernel.
#[derive(Clone, Copy)]
pub(crate) struct Entry {
    pub(crate) workspace_size: unsafe extern "C" fn(*const cutlass_rs_gemm_args, *mut usize) -> i32,
    pub(crate) run: unsafe extern "C" fn(
        *const cutlass_rs_gemm_args,
        *mut std::ffi::c_void,
        usize,
        *mut std::ffi::c_void,
    ) -> i32,
    pub(crate) prepare:
        unsafe extern "C" fn(*const cutlass_rs_gemm_args, *mut std::ffi::c_void, usize) -> i32,
    pub(crate) relaunch: unsafe extern "C" fn(*mut std::ffi::c_void) -> i32,
}

impl Entry {
    pub(crate) fn new(e: &cutlass_rs_kernel_entry) -> Entry {
        Entry {
            workspace_size: e.workspace_size.expect("registry entry has workspace_size"),
            run: e.run.expect("registry entry has run"),
            prepare: e.prepare.expect("registry entry has prepare"),
            relaunch: e.relaunch.expect("registry entry has relaunch"),
        }
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel").field("name", &self.name).finish()
    }
}

/// The device facts that kernel selection and launches need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// CUDA device ordinal.
    pub ordinal: usize,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Number of streaming multiprocessors.
    pub sm_count: i32,
}

/// The fewest SMs a kernel is sized for ([`DeviceInfo::kernel_sm_count`]): the largest cluster
/// of the catalog (4x4 CTAs).
pub(crate) const MIN_KERNEL_SM_COUNT: i32 = 16;

impl DeviceInfo {
    /// Queries a context's device.
    pub fn query(ctx: &CudaContext) -> Result<DeviceInfo> {
        Ok(DeviceInfo {
            ordinal: ctx.ordinal(),
            compute_capability: ctx.compute_capability()?,
            sm_count: ctx
                .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        })
    }

    /// The SM count the kernels are sized and launched for: `sm_count`, at least
    /// [`MIN_KERNEL_SM_COUNT`]. CUTLASS reads a count below 1 as "query the device", which
    /// without one sizes stream-K work by 0 SMs, and a count below the kernel's cluster size
    /// leaves its stream-K scheduler a wave without a whole cluster: both divide by zero in its
    /// host code. Every GPU these kernels run on has more SMs.
    pub(crate) fn kernel_sm_count(&self) -> i32 {
        self.sm_count.max(MIN_KERNEL_SM_COUNT)
    }
}

/// A kernel's arguments as raw device pointers, in the kernel's own view (no transposition):
/// what [`Kernel::prepare_raw`] and [`Kernel::run_raw`] pass through the C ABI. Leading dimensions
/// and batch strides are in elements; scale pointers are for block-scaled and blockwise kernels,
/// null otherwise.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawArgs {
    /// Rows of A, C, D.
    pub m: usize,
    /// Columns of B, C, D.
    pub n: usize,
    /// The reduction extent.
    pub k: usize,
    /// Batch count (at least 1).
    pub batch: usize,
    /// A, B, C, D and their leading dimensions and batch strides.
    pub a: sys::CUdeviceptr,
    /// Leading dimension of A.
    pub lda: usize,
    /// Batch stride of A.
    pub batch_stride_a: usize,
    /// B.
    pub b: sys::CUdeviceptr,
    /// Leading dimension of B.
    pub ldb: usize,
    /// Batch stride of B.
    pub batch_stride_b: usize,
    /// C.
    pub c: sys::CUdeviceptr,
    /// Leading dimension of C.
    pub ldc: usize,
    /// Batch stride of C.
    pub batch_stride_c: usize,
    /// D.
    pub d: sys::CUdeviceptr,
    /// Leading dimension of D.
    pub ldd: usize,
    /// Batch stride of D.
    pub batch_stride_d: usize,
    /// Scale factors of A (block-scaled: `Sm1xxBlockScaledConfig` layout; blockwise: M-major).
    pub sfa: sys::CUdeviceptr,
    /// Scale factors of B.
    pub sfb: sys::CUdeviceptr,
    /// Scale factors of a block-scaled D (written by `LinCombBlockScaleFactor` kernels); for the
    /// kernels with an auxiliary output (`Fusion::BiasActivationAux`), Aux, with D's leading
    /// dimension and batch stride.
    pub sfd: sys::CUdeviceptr,
    /// Device f32 the block-scaled epilogue normalizes by (`norm_constant`).
    pub norm_constant: sys::CUdeviceptr,
    /// `alpha`.
    pub alpha: f32,
    /// `beta`.
    pub beta: f32,
    /// Tile-scheduler hints (0: CUTLASS's defaults).
    pub schedule: ScheduleHints,
    /// Launch with programmatic dependent launch (CUDA's programmatic stream serialization): the
    /// kernel may start while the kernel before it in the stream finishes, and waits for that
    /// kernel's completion and memory before its first global memory access. Ignored by kernels
    /// without it ([`KernelSpec::supports_programmatic_dependent_launch`]). Off by default here;
    /// [`crate::Gemm`] plans turn it on.
    pub programmatic_dependent_launch: bool,
    /// Fused epilogues ([`crate::plans::epilogue`]): f32 scales per row and per column of D, and
    /// biases (D's type) per row and per column; 0 for none.
    pub row_scale: sys::CUdeviceptr,
    /// Scales per column of D.
    pub col_scale: sys::CUdeviceptr,
    /// Bias per row of D.
    pub row_bias: sys::CUdeviceptr,
    /// Bias per column of D.
    pub col_bias: sys::CUdeviceptr,
    /// The activation (`CUTLASS_RS_ACTIVATION_*`).
    pub activation: i32,
}

/// Tile-scheduler hints a launch passes to the kernel; zeros keep CUTLASS's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ScheduleHints {
    /// Raster swizzle: 1, 2, 4 or 8 CTAs (0: CUTLASS's default, 1).
    pub swizzle: u8,
    /// Raster order: 0 CUTLASS's heuristic, 1 along M, 2 along N.
    pub raster: u8,
    /// Split-K factor for stream-K kernels (0 or 1: the stream-K decomposition).
    pub splits: u16,
}

impl Kernel {
    pub(crate) fn abi_args(&self, device: &DeviceInfo, r: &RawArgs) -> cutlass_rs_gemm_args {
        cutlass_rs_gemm_args {
            m: r.m as i64,
            n: r.n as i64,
            k: r.k as i64,
            batch: r.batch as i64,
            a: r.a as *const _,
            lda: r.lda as i64,
            batch_stride_a: r.batch_stride_a as i64,
            b: r.b as *const _,
            ldb: r.ldb as i64,
            batch_stride_b: r.batch_stride_b as i64,
            c: r.c as *const _,
            ldc: r.ldc as i64,
            batch_stride_c: r.batch_stride_c as i64,
            d: r.d as *mut _,
            ldd: r.ldd as i64,
            batch_stride_d: r.batch_stride_d as i64,
            alpha: r.alpha,
            beta: r.beta,
            sfa: r.sfa as *const _,
            sfb: r.sfb as *const _,
            e: std::ptr::null(),
            sfd: r.sfd as *mut _,
            norm_constant: r.norm_constant as *const f32,
            device_id: device.ordinal as i32,
            sm_count: device.kernel_sm_count(),
            swizzle: r.schedule.swizzle as i32,
            raster: r.schedule.raster as i32,
            splits: r.schedule.splits as i32,
            launch_flags: if r.programmatic_dependent_launch {
                cutlass_gemm_sys::CUTLASS_RS_LAUNCH_PDL
            } else {
                0
            },
            row_scale: r.row_scale as *const f32,
            col_scale: r.col_scale as *const f32,
            row_bias: r.row_bias as *const _,
            col_bias: r.col_bias as *const _,
            activation: r.activation,
            reserved: 0,
        }
    }

    /// This kernel's C status as a `Result`.
    pub(crate) fn status(&self, status: i32) -> Result<()> {
        check_status(self.name, status)
    }

    /// The workspace size for C arguments (it depends on the shape only).
    pub(crate) fn workspace_size_of(&self, abi: &cutlass_rs_gemm_args) -> Result<usize> {
        let mut bytes = 0usize;
        // SAFETY: workspace_size reads the arguments and writes `bytes`; no pointer is dereferenced.
        self.status(unsafe { (self.entry.workspace_size)(abi, &mut bytes) })?;
        Ok(bytes)
    }

    /// Launches on C arguments (the entry point runs CUTLASS's `can_implement` itself, once per
    /// distinct arguments).
    ///
    /// # Safety
    /// As [`Kernel::run_raw`], for the pointers of `abi`.
    pub(crate) unsafe fn launch_abi(
        &self,
        abi: &cutlass_rs_gemm_args,
        workspace: sys::CUdeviceptr,
        workspace_bytes: usize,
        stream: sys::CUstream,
    ) -> Result<()> {
        let status = (self.entry.run)(
            abi,
            workspace as *mut std::ffi::c_void,
            workspace_bytes,
            stream as *mut std::ffi::c_void,
        );
        run_status(self.name, status, abi.device_id)
    }

    /// The workspace size for these arguments (depends on the shape only).
    pub(crate) fn workspace_bytes(&self, device: &DeviceInfo, args: &RawArgs) -> Result<usize> {
        self.workspace_size_of(&self.abi_args(device, args))
    }

    /// Everything a launch does on the host, for any architecture on any device: CUTLASS's
    /// `can_implement`, the workspace size, and the kernel parameters with their TMA descriptors
    /// (encoded by the driver for these pointers). Launches nothing. Returns the workspace size.
    /// This is how SM100 and SM120 kernels' host paths are exercised on a Hopper GPU.
    ///
    /// # Safety
    /// The pointers must be device allocations of `device` large enough for the extents the
    /// arguments describe (TMA descriptors encode them; nothing is read or written), and the
    /// device's context must be current on this thread.
    pub unsafe fn prepare_raw(&self, device: &DeviceInfo, args: &RawArgs) -> Result<usize> {
        let abi = self.abi_args(device, args);
        let mut bytes = 0usize;
        self.status((self.entry.workspace_size)(&abi, &mut bytes))?;
        self.status((self.entry.prepare)(&abi, std::ptr::null_mut(), usize::MAX))?;
        Ok(bytes)
    }

    /// Launches on raw pointers after checking that the device can run the kernel: a kernel of
    /// another architecture returns [`crate::Error::ArchMismatch`] before any call into it.
    ///
    /// # Safety
    /// As [`Kernel::prepare_raw`], and the buffers must hold valid data for the kernel, the
    /// workspace at least the size [`Kernel::prepare_raw`] returned, `stream` a live stream of the
    /// device; nothing else may write the buffers until the kernel completes.
    pub unsafe fn run_raw(
        &self,
        device: &DeviceInfo,
        args: &RawArgs,
        workspace: sys::CUdeviceptr,
        workspace_bytes: usize,
        stream: sys::CUstream,
    ) -> Result<()> {
        if !self.spec.arch.runs_on(device.compute_capability) {
            return Err(crate::Error::ArchMismatch {
                kernel: self.name.into(),
                arch: self.spec.arch,
                device: device.compute_capability,
            });
        }
        self.launch_abi(
            &self.abi_args(device, args),
            workspace,
            workspace_bytes,
            stream,
        )
    }

    /// Launches the kernel again exactly as this thread's last successful launch of it (any plan's
    /// [`crate::Gemm::run`] or `run_raw` that chose this kernel, on whichever device): the same
    /// arguments, buffers, workspace and kernel parameters, without any check or argument
    /// handling. A bare launch of
    /// the kernel, for measuring what the checked entry points add to it
    /// (`cutlass-profiler overhead`); [`crate::Error::Cutlass`] with `CUTLASS_RS_ERROR_INVALID` when
    /// this thread has not launched the kernel.
    ///
    /// # Safety
    /// Every buffer of that last launch must still be allocated (nothing checks), `stream` must be
    /// a live stream of the same device with its context current on this thread, and nothing else
    /// may write those buffers until the kernel completes.
    pub unsafe fn relaunch_raw(&self, stream: sys::CUstream) -> Result<()> {
        match (self.entry.relaunch)(stream as *mut std::ffi::c_void) {
            cutlass_gemm_sys::CUTLASS_RS_ERROR_INVALID => Err(crate::Error::Cutlass {
                kernel: self.name.into(),
                status: cutlass_gemm_sys::CUTLASS_RS_ERROR_INVALID,
                message: "nothing to relaunch: this thread has not launched the kernel (or its \
                          last launch failed)"
                    .into(),
            }),
            status => self.status(status),
        }
    }
}

/// The ordinal of the device whose context is current on the calling thread (the device a kernel
/// launched from this thread runs on), if any context is current.
pub fn current_device() -> Option<usize> {
    if !crate::driver_library_present() {
        return None;
    }
    cudarc::driver::result::ctx::get_current().ok()??;
    let mut device: sys::CUdevice = 0;
    // SAFETY: cuCtxGetDevice writes the current context's device into `device`.
    let r = unsafe { sys::cuCtxGetDevice(&mut device) };
    (r == sys::CUresult::CUDA_SUCCESS).then_some(device as usize)
}

/// How many times a kernel launch on the calling thread built the kernel's launch state (CUTLASS
/// arguments, kernel parameters and TMA descriptors) instead of reusing the state of the thread's
/// previous launch of that kernel on the same device. Launch states are kept per thread, kernel and
/// device, so steady-state launches with the same buffers add nothing here, also when a thread
/// alternates between devices.
pub fn launch_state_builds() -> u64 {
    // SAFETY: reads a thread-local counter.
    unsafe { cutlass_gemm_sys::cutlass_rs_launch_state_builds() }
}

/// The name of the weight-only decode GEMV (`csrc/cutlass_rs_weight_gemv.cu`, its C entry point):
/// hand-written, not a catalog kernel, so not in any registry. [`crate::WeightOnlyGemm`] takes it
/// for a few tokens, and [`crate::WeightOnlyGemm::with_kernel`] names it.
pub const WEIGHT_ONLY_GEMV: &str = "cutlass_rs_weight_gemv";

/// The name of the FP8 blockwise decode GEMV (`csrc/cutlass_rs_blockwise_gemv.cu`, its C entry
/// point): hand-written, not a catalog kernel. [`crate::BlockwiseGemm`] takes it for a few tokens
/// ([`crate::BlockwiseGemm::is_gemv`]), and [`crate::BlockwiseGemm::with_kernel`] names it.
pub const BLOCKWISE_GEMV: &str = "cutlass_rs_blockwise_gemv";

/// The FP8 blockwise decode GEMV over C arguments (`dtype` D's `CUTLASS_RS_DTYPE_*`): its checks
/// only (`stream` `None`), or the checks and the launch on `stream`.
///
/// # Safety
/// When launching, the pointers of `abi` must be device pointers of its device holding what the
/// problem reaches (`cutlass_rs_blockwise_gemv_abi.h`), and `stream` a live stream of the calling
/// thread's current context.
pub(crate) unsafe fn blockwise_gemv(
    abi: &cutlass_gemm_sys::cutlass_rs_blockwise_gemv_args,
    dtype: i32,
    stream: Option<sys::CUstream>,
) -> Result<()> {
    let launch = stream.map_or(std::ptr::null_mut(), |s| s as *mut std::ffi::c_void);
    let status = cutlass_gemm_sys::cutlass_rs_blockwise_gemv(
        abi,
        dtype,
        i32::from(stream.is_some()),
        launch,
    );
    match stream {
        Some(_) => run_status(BLOCKWISE_GEMV, status, abi.device_id),
        None => check_status(BLOCKWISE_GEMV, status),
    }
}

/// The name of the 16-bit decode GEMV (`csrc/cutlass_rs_dense_gemv.cu`, its C entry point):
/// hand-written, not a catalog kernel. [`crate::Gemm`] takes it for bf16 and f16 linear layers of a
/// few tokens ([`crate::Gemm::is_gemv`]), and [`crate::Gemm::with_kernel`] names it. It computes
/// the fused epilogue ([`crate::Gemm::with_epilogue`]) as the fused CUTLASS kernels do.
pub const DENSE_GEMV: &str = "cutlass_rs_dense_gemv";

/// The 16-bit decode GEMV over C arguments (`dtype` the `CUTLASS_RS_DTYPE_*` of A, B and D): its
/// checks only (`stream` `None`), or the checks and the launch on `stream`.
///
/// # Safety
/// As [`blockwise_gemv`].
pub(crate) unsafe fn dense_gemv(
    abi: &cutlass_gemm_sys::cutlass_rs_dense_gemv_args,
    dtype: i32,
    stream: Option<sys::CUstream>,
) -> Result<()> {
    let launch = stream.map_or(std::ptr::null_mut(), |s| s as *mut std::ffi::c_void);
    let status =
        cutlass_gemm_sys::cutlass_rs_dense_gemv(abi, dtype, i32::from(stream.is_some()), launch);
    match stream {
        Some(_) => run_status(DENSE_GEMV, status, abi.device_id),
        None => check_status(DENSE_GEMV, status),
    }
}

/// Split-K's reduction (`cutlass_rs_splitk_reduce`): `D = alpha · Σ partials + beta · C` over
/// `[splits, lines, inner]` packed f32 partial products, C and D given with their leading
/// dimensions (lines of `inner` elements), D of type `out` (bf16 or f16).
///
/// # Safety
/// The pointers must address device memory of those extents, ordered on `stream`.
pub(crate) unsafe fn splitk_reduce(
    partials: sys::CUdeviceptr,
    [splits, lines, inner]: [usize; 3],
    (alpha, beta): (f32, f32),
    (c, ld_c): (sys::CUdeviceptr, usize),
    (d, ld_d): (sys::CUdeviceptr, usize),
    out: cutlass_gemm_catalog::DataType,
    stream: sys::CUstream,
) -> Result<()> {
    let dtype = match out {
        cutlass_gemm_catalog::DataType::Bf16 => cutlass_gemm_sys::CUTLASS_RS_DTYPE_BF16,
        _ => cutlass_gemm_sys::CUTLASS_RS_DTYPE_F16,
    };
    let status = cutlass_gemm_sys::cutlass_rs_splitk_reduce(
        partials as *const f32,
        splits as i64,
        lines as i64,
        inner as i64,
        alpha,
        beta,
        c as *const _,
        ld_c as i64,
        d as *mut _,
        ld_d as i64,
        dtype,
        stream as *mut _,
    );
    check_status("cutlass_rs_splitk_reduce", status)
}

/// Whether this build compiled its hand-written kernels (the quantizers, the weight packing, the
/// decode GEMV) for a device of compute capability `cc` ([`cutlass_gemm_sys::BUILT_ARCHS`]).
pub(crate) fn hand_written_runs_on(cc: (i32, i32)) -> bool {
    cutlass_gemm_sys::BUILT_ARCHS
        .split(',')
        .filter_map(cutlass_gemm_catalog::Arch::parse)
        .any(|a| a.runs_on(cc))
}

/// The weight-only decode GEMV over C arguments (`weight` a `CUTLASS_RS_WEIGHT_GEMV_*` code): its
/// checks only (`stream` `None`), or the checks and the launch on `stream`.
///
/// # Safety
/// When launching, as [`RegistryKernel::launch_abi`] for the pointers of `abi`.
pub(crate) unsafe fn weight_gemv(
    abi: &cutlass_gemm_sys::cutlass_rs_weight_only_args,
    dtype: i32,
    weight: i32,
    stream: Option<sys::CUstream>,
) -> Result<()> {
    let launch = stream.map_or(std::ptr::null_mut(), |s| s as *mut std::ffi::c_void);
    let status = cutlass_gemm_sys::cutlass_rs_weight_gemv(
        abi,
        dtype,
        weight,
        i32::from(stream.is_some()),
        launch,
    );
    match stream {
        Some(_) => run_status(WEIGHT_ONLY_GEMV, status, abi.device_id),
        None => check_status(WEIGHT_ONLY_GEMV, status),
    }
}

/// A C status as a `Result`: [`crate::Error::Cutlass`] naming `what` (a kernel or an entry point)
/// unless it is `CUTLASS_RS_OK`. The one place statuses become errors.
/// A `run` entry point's status: a launch refused for the thread's current device is the device
/// rule's error ([`crate::OperandName::CurrentContext`]), any other failure the C status's.
fn run_status(kernel: &str, status: i32, device_id: i32) -> Result<()> {
    if status == cutlass_gemm_sys::CUTLASS_RS_ERROR_WRONG_DEVICE {
        crate::error::require_ordinal(
            crate::OperandName::CurrentContext,
            current_device().unwrap_or(usize::MAX),
            device_id as usize,
        )?;
    }
    check_status(kernel, status)
}

pub(crate) fn check_status(what: &str, status: i32) -> Result<()> {
    if status == cutlass_gemm_sys::CUTLASS_RS_OK {
        Ok(())
    } else {
        Err(crate::Error::Cutlass {
            kernel: what.into(),
            status,
            message: status_message(status),
        })
    }
}

/// Words for a C ABI status.
pub fn status_message(status: i32) -> String {
    use cutlass_gemm_sys as s;
    match status {
        s::CUTLASS_RS_OK => "success".into(),
        s::CUTLASS_RS_ERROR_MISALIGNED_OPERAND => "operand fails alignment requirements".into(),
        s::CUTLASS_RS_ERROR_INVALID_DATA_TYPE => "invalid data type".into(),
        s::CUTLASS_RS_ERROR_INVALID_LAYOUT => "invalid layout".into(),
        s::CUTLASS_RS_ERROR_INVALID_PROBLEM => "problem size not supported by the kernel".into(),
        s::CUTLASS_RS_ERROR_NOT_SUPPORTED => "not supported on this device".into(),
        s::CUTLASS_RS_ERROR_WORKSPACE_NULL => "workspace is required but null".into(),
        s::CUTLASS_RS_ERROR_INTERNAL => "internal CUTLASS error".into(),
        s::CUTLASS_RS_ERROR_ARCH_MISMATCH => "kernel not compiled for this device".into(),
        s::CUTLASS_RS_ERROR_INSUFFICIENT_DRIVER => "driver too old".into(),
        s::CUTLASS_RS_ERROR_MEMORY_ALLOCATION => "insufficient device memory".into(),
        s::CUTLASS_RS_ERROR_INVALID => "unspecified status".into(),
        s::CUTLASS_RS_ERROR_EXCEPTION => "C++ exception in the kernel shim".into(),
        s::CUTLASS_RS_ERROR_NULL_ARGUMENT => "null argument".into(),
        s::CUTLASS_RS_ERROR_WORKSPACE_TOO_SMALL => "workspace too small".into(),
        s::CUTLASS_RS_ERROR_NOT_BUILT => {
            "these kernels are not in this build (built with CUTLASS_RS_KERNELS=none?)".into()
        }
        s::CUTLASS_RS_ERROR_WRONG_DEVICE => {
            "the calling thread's current CUDA device is not the one the arguments name (make the \
             device's context current first)"
                .into()
        }
        s::CUTLASS_RS_ERROR_TMA_DESCRIPTOR => {
            "the driver refused a TMA descriptor of the kernel (cuTensorMapEncodeTiled failed; \
             sub-byte TMA types need an SM100 device)"
                .into()
        }
        x if x >= s::CUTLASS_RS_ERROR_CUDA_BASE => {
            format!("CUDA runtime error {}", x - s::CUTLASS_RS_ERROR_CUDA_BASE)
        }
        x => format!("unknown status {x}"),
    }
}

/// Which staging copy (`csrc/cutlass_rs_staging.cu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StagingCopy {
    /// An operand into its padded copy: zeros in the rest of the destination
    /// (`copy_matrix_kernel`).
    Padded,
    /// A kernel's padded D back into the caller's D: the common part only, nothing else of the
    /// destination written (`copy_back_kernel`, a kernel of its own so that profilers and
    /// compute-sanitizer name it).
    Back,
}

/// Copies the common part of two matrices of one layout, `src`'s geometry `from` into `dst`'s
/// geometry `to`, as `copy` says. Both have `batch` slices.
///
/// # Safety
/// `src` and `dst` must be device pointers of the stream's device holding the extents their
/// geometries reach, of `element_bytes`-byte elements; `stream` must be live and its context bound.
pub(crate) unsafe fn copy_matrix(
    copy: StagingCopy,
    src: u64,
    from: &crate::plans::problem::ResolvedMatrix,
    dst: u64,
    to: &crate::plans::problem::ResolvedMatrix,
    element_bytes: usize,
    stream: sys::CUstream,
) -> Result<()> {
    use std::ffi::c_void;
    debug_assert_eq!(from.layout, to.layout);
    let batch = from.batch.max(1);
    // A single matrix's batch stride is never used.
    let stride = |m: &crate::plans::problem::ResolvedMatrix| {
        if batch > 1 {
            m.batch_stride as i64
        } else {
            0
        }
    };
    // Source and destination: pointer, leading dimension, batch stride.
    let (s, sl, ss) = (src as *const c_void, from.ld as i64, stride(from));
    let (d, dl, ds) = (dst as *mut c_void, to.ld as i64, stride(to));
    // Element bytes, the common extent (inner, outer), slices, stream.
    let (e, b, st) = (element_bytes as i64, batch as i64, stream as *mut c_void);
    let i = from.contiguous().min(to.contiguous()) as i64;
    let o = from.strided().min(to.strided()) as i64;
    let (status, function) = match copy {
        StagingCopy::Padded => {
            let (di, dout) = (to.contiguous() as i64, to.strided() as i64);
            let status = cutlass_gemm_sys::cutlass_rs_copy_matrix(
                s, sl, ss, d, dl, ds, e, i, o, di, dout, b, st,
            );
            (status, "cutlass_rs_copy_matrix")
        }
        StagingCopy::Back => {
            let status =
                cutlass_gemm_sys::cutlass_rs_copy_back(s, sl, ss, d, dl, ds, e, i, o, b, st);
            (status, "cutlass_rs_copy_back")
        }
    };
    check_status(function, status)
}

/// A C argument struct of one of the registries of their own (grouped, weight-only): what
/// [`RegistryKernel`]'s entry points take.
pub trait RegistryArgs: Copy + 'static {
    /// The CUDA device ordinal the arguments name.
    fn device_id(&self) -> i32;
}

impl RegistryArgs for cutlass_gemm_sys::cutlass_rs_grouped_args {
    fn device_id(&self) -> i32 {
        self.device_id
    }
}

impl RegistryArgs for cutlass_gemm_sys::cutlass_rs_weight_only_args {
    fn device_id(&self) -> i32 {
        self.device_id
    }
}

/// One compiled kernel of a registry of its own, whose entry points take the argument struct `A`:
/// its catalog spec and its C entry points.
#[derive(Clone, Copy)]
pub struct RegistryKernel<A: RegistryArgs> {
    /// What the kernel is (types, tile, schedule).
    pub spec: KernelSpec,
    /// The procedural name.
    pub name: &'static str,
    pub(crate) entry: RegistryEntry<A>,
}

/// A grouped kernel (`_gemm_grouped_` in its name), over
/// [`cutlass_rs_grouped_args`](cutlass_gemm_sys::cutlass_rs_grouped_args).
pub type GroupedKernel = RegistryKernel<cutlass_gemm_sys::cutlass_rs_grouped_args>;

/// A weight-only kernel (`_scl_shfl` or `_sclzr_shfl` in its name), over
/// [`cutlass_rs_weight_only_args`](cutlass_gemm_sys::cutlass_rs_weight_only_args).
pub type WeightOnlyKernel = RegistryKernel<cutlass_gemm_sys::cutlass_rs_weight_only_args>;

impl<A: RegistryArgs> std::fmt::Debug for RegistryKernel<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryKernel")
            .field("name", &self.name)
            .finish()
    }
}

/// The C entry points of one kernel of a registry of its own.
#[derive(Clone, Copy)]
pub(crate) struct RegistryEntry<A: RegistryArgs> {
    workspace_size: unsafe extern "C" fn(*const A, *mut usize) -> i32,
    run: unsafe extern "C" fn(*const A, *mut std::ffi::c_void, usize, *mut std::ffi::c_void) -> i32,
    prepare: unsafe extern "C" fn(*const A, *mut std::ffi::c_void, usize) -> i32,
}

/// The entry points of a registry's C entry, which every registry's generated code fills.
macro_rules! registry_entry_from {
    ($entry:ty, $args:ty) => {
        impl From<&$entry> for RegistryEntry<$args> {
            fn from(e: &$entry) -> Self {
                RegistryEntry {
                    workspace_size: e.workspace_size.expect("registry entry has workspace_size"),
                    run: e.run.expect("registry entry has run"),
                    prepare: e.prepare.expect("registry entry has prepare"),
                }
            }
        }
    };
}
registry_entry_from!(
    cutlass_gemm_sys::cutlass_rs_grouped_kernel_entry,
    cutlass_gemm_sys::cutlass_rs_grouped_args
);
registry_entry_from!(
    cutlass_gemm_sys::cutlass_rs_weight_only_kernel_entry,
    cutlass_gemm_sys::cutlass_rs_weight_only_args
);

impl<A: RegistryArgs> RegistryKernel<A> {
    pub(crate) fn workspace_size_of(&self, abi: &A) -> Result<usize> {
        let mut bytes = 0usize;
        // SAFETY: workspace_size reads the arguments' extents and counts and writes `bytes`; no
        // pointer is dereferenced.
        check_status(self.name, unsafe {
            (self.entry.workspace_size)(abi, &mut bytes)
        })?;
        Ok(bytes)
    }

    /// Everything a launch does on the host (CUTLASS's checks, the kernel parameters with their
    /// TMA descriptors), without launching.
    ///
    /// # Safety
    /// `abi`'s pointers are only encoded into descriptors, never dereferenced; `workspace` must
    /// hold `workspace_bytes` bytes when the kernel needs a workspace.
    pub(crate) unsafe fn prepare_abi(
        &self,
        abi: &A,
        workspace: sys::CUdeviceptr,
        workspace_bytes: usize,
    ) -> Result<()> {
        let status = (self.entry.prepare)(abi, workspace as *mut _, workspace_bytes);
        check_status(self.name, status)
    }

    /// Launches the kernel (for grouped kernels, the per-group argument builder and the kernel).
    ///
    /// # Safety
    /// Every pointer of `abi` must be a device pointer of `abi.device_id` holding what the
    /// extents (or the grouped layout) reach; `workspace` must hold `workspace_bytes` bytes;
    /// `stream` must be a live stream of the current context.
    pub(crate) unsafe fn launch_abi(
        &self,
        abi: &A,
        workspace: sys::CUdeviceptr,
        workspace_bytes: usize,
        stream: sys::CUstream,
    ) -> Result<()> {
        let status = (self.entry.run)(
            abi,
            workspace as *mut std::ffi::c_void,
            workspace_bytes,
            stream as *mut std::ffi::c_void,
        );
        run_status(self.name, status, abi.device_id())
    }
}
