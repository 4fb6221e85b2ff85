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
    pub(crate) can_implement: unsafe extern "C" fn(*const cutlass_rs_gemm_args) -> i32,
    pub(crate) workspace_size: unsafe extern "C" fn(*const cutlass_rs_gemm_args, *mut usize) -> i32,
    pub(crate) run: unsafe extern "C" fn(
        *const cutlass_rs_gemm_args,
        *mut std::ffi::c_void,
        usize,
        *mut std::ffi::c_void,
    ) -> i32,
}

impl Entry {
    fn new(e: &cutlass_rs_kernel_entry) -> Entry {
        Entry {
            can_implement: e.can_implement.expect("registry entry has can_implement"),
            workspace_size: e.workspace_size.expect("registry entry has workspace_size"),
            run: e.run.expect("registry entry has run"),
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
