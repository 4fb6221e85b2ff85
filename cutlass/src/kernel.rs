//! The kernels of this build: the C registry of `cutlass-sys` joined with the catalog's specs.

use std::collections::HashMap;
use std::sync::OnceLock;

use cudarc::driver::{sys, CudaContext};
use cutlass_kernels::{catalog, KernelSpec};
use cutlass_sys::{cutlass_rs_gemm_args, cutlass_rs_kernel_entry};

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
    fn new(e: &cutlass_rs_kernel_entry) -> Entry {
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

/// The kernels compiled into this build, in registry order.
///
/// Each registry name is looked up among the catalog's specs by computing the specs' names; a
/// name the catalog does not produce is a build bug and panics.
pub fn built_kernels() -> &'static [Kernel] {
    static KERNELS: OnceLock<Vec<Kernel>> = OnceLock::new();
    KERNELS.get_or_init(|| {
        let by_name: HashMap<String, KernelSpec> =
            catalog::all().into_iter().map(|s| (s.name(), s)).collect();
        cutlass_sys::kernels()
            .iter()
            .map(|entry| {
                let name = cutlass_sys::entry_name(entry);
                let spec = *by_name.get(name).unwrap_or_else(|| {
                    panic!("kernel {name} of the registry is not in the catalog (stale build?)")
                });
                Kernel {
                    spec,
                    name,
                    entry: Entry::new(entry),
                }
            })
            .collect()
    })
}

/// How [`select`] treats a kernel the device cannot run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArchPolicy {
    /// Refuse it ([`crate::Error::ArchMismatch`]).
    Runnable,
    /// Accept it: the plan only drives the kernel's host path (launches check again).
    AnyArch,
}

/// Chooses a kernel of this build: the one named (it must be built, runnable unless `arch` says
/// otherwise, and serve the plan), or, without a name, `choose` among the runnable kernels that
/// serve it. `serves` explains why a kernel does not fit; `request` describes the plan for errors.
pub(crate) fn select(
    device: &DeviceInfo,
    name: Option<&str>,
    arch: ArchPolicy,
    serves: &dyn Fn(&KernelSpec) -> std::result::Result<(), String>,
    request: &str,
    choose: &dyn Fn(&[Kernel]) -> Kernel,
) -> Result<Kernel> {
    let cc = device.compute_capability;
    let arch_error = |name: &str, arch| crate::Error::ArchMismatch {
        kernel: name.into(),
        arch,
        device: cc,
    };
    match name {
        Some(name) => {
            let Some(k) = built_kernels().iter().find(|k| k.name == name).copied() else {
                // A catalog kernel of another architecture: say that, rather than "not built".
                if let Some(spec) = catalog::find(name) {
                    if arch == ArchPolicy::Runnable && !spec.arch.runs_on(cc) {
                        return Err(arch_error(name, spec.arch));
                    }
                }
                return Err(crate::Error::KernelNotBuilt { name: name.into() });
            };
            if arch == ArchPolicy::Runnable && !k.spec.arch.runs_on(cc) {
                return Err(arch_error(k.name, k.spec.arch));
            }
            serves(&k.spec).map_err(|reason| crate::Error::KernelMismatch {
                name: k.name.into(),
                reason: format!("{reason} ({request})"),
            })?;
            Ok(k)
        }
        None => {
            let candidates: Vec<Kernel> = built_kernels()
                .iter()
                .filter(|k| serves(&k.spec).is_ok())
                .copied()
                .collect();
            let Some(first) = candidates.first().copied() else {
                return Err(crate::Error::NoKernel {
                    request: request.into(),
                    built: built_kernels().iter().map(|k| k.name.to_string()).collect(),
                });
            };
            let runnable: Vec<Kernel> = candidates
                .iter()
                .copied()
                .filter(|k| k.spec.arch.runs_on(cc))
                .collect();
            match (runnable.is_empty(), arch) {
                (false, _) => Ok(choose(&runnable)),
                (true, ArchPolicy::AnyArch) => Ok(choose(&candidates)),
                (true, ArchPolicy::Runnable) => Err(arch_error(first.name, first.spec.arch)),
            }
        }
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
    /// Scale factors of a block-scaled D (written by `LinCombBlockScaleFactor` kernels).
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
            sm_count: device.sm_count,
            swizzle: r.schedule.swizzle as i32,
            raster: r.schedule.raster as i32,
            splits: r.schedule.splits as i32,
            launch_flags: if r.programmatic_dependent_launch {
                cutlass_sys::CUTLASS_RS_LAUNCH_PDL
            } else {
                0
            },
        }
    }

    fn status(&self, status: i32) -> Result<()> {
        if status == cutlass_sys::CUTLASS_RS_OK {
            Ok(())
        } else {
            Err(crate::Error::Cutlass {
                kernel: self.name.into(),
                status,
                message: crate::error::status_message(status),
            })
        }
    }

    /// The workspace size for these arguments (depends on the shape only).
    pub(crate) fn workspace_bytes(&self, device: &DeviceInfo, args: &RawArgs) -> Result<usize> {
        let abi = self.abi_args(device, args);
        let mut bytes = 0usize;
        // SAFETY: workspace_size reads the arguments and writes `bytes`; no pointer is dereferenced.
        self.status(unsafe { (self.entry.workspace_size)(&abi, &mut bytes) })?;
        Ok(bytes)
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
        let abi = self.abi_args(device, args);
        // The entry point runs CUTLASS's can_implement itself (once per distinct arguments).
        self.status((self.entry.run)(
            &abi,
            workspace as *mut std::ffi::c_void,
            workspace_bytes,
            stream as *mut std::ffi::c_void,
        ))
    }

    /// Launches the kernel again exactly as this thread's last successful launch of it (any plan's
    /// [`crate::Gemm::run`] or `run_raw` that chose this kernel): the same arguments, buffers,
    /// workspace and kernel parameters, without any check or argument handling. A bare launch of
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
            cutlass_sys::CUTLASS_RS_ERROR_INVALID => Err(crate::Error::Cutlass {
                kernel: self.name.into(),
                status: cutlass_sys::CUTLASS_RS_ERROR_INVALID,
                message: "nothing to relaunch: this thread has not launched the kernel (or its \
                          last launch failed)"
                    .into(),
            }),
            status => self.status(status),
        }
    }
}
