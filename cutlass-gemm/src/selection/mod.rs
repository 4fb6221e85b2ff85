//! Kernel selection: the kernels of this build (the C registry joined with the catalog's specs),
//! the choice among them ([`heuristic`], [`tune`]), and the rules a named kernel must meet.

use std::collections::HashMap;
use std::sync::OnceLock;

use cutlass_gemm_catalog::families::families_of;
use cutlass_gemm_catalog::{catalog, KernelSpec};

use crate::error::{BuildHint, KernelRule, Result};
use crate::ffi::{
    DeviceInfo, Entry, GroupedKernel, Kernel, RegistryArgs, RegistryEntry, RegistryKernel,
    WeightOnlyKernel,
};

pub mod heuristic;
pub mod tune;

/// The catalog's entries, built once per process (about 3 900 of them: a planner's rules and
/// errors look through them, and building them takes milliseconds).
pub(crate) fn catalog_entries() -> &'static [KernelSpec] {
    static ENTRIES: OnceLock<Vec<KernelSpec>> = OnceLock::new();
    ENTRIES.get_or_init(catalog::all)
}

/// The catalog entry named `name`.
pub(crate) fn catalog_entry(name: &str) -> Option<KernelSpec> {
    catalog_entries().iter().find(|s| s.name() == name).copied()
}

/// The kernels compiled into this build, in registry order.
///
/// Each registry name is looked up among the catalog's specs by computing the specs' names; a
/// name the catalog does not produce is a build bug and panics.
pub fn built_kernels() -> &'static [Kernel] {
    static KERNELS: OnceLock<Vec<Kernel>> = OnceLock::new();
    KERNELS.get_or_init(|| {
        let by_name: HashMap<String, KernelSpec> =
            catalog_entries().iter().map(|s| (s.name(), *s)).collect();
        cutlass_gemm_sys::kernels()
            .iter()
            .map(|entry| {
                let name = cutlass_gemm_sys::entry_name(entry);
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

/// The kernels of a registry of their own (`entries`, in registry order), each looked up among
/// the catalog's entries of that kind (`kind`): a name the catalog does not produce is a build bug
/// and panics.
fn registry_kernels<E, A: RegistryArgs>(
    entries: &'static [E],
    name_of: fn(&E) -> &'static str,
    kind: fn(&KernelSpec) -> bool,
) -> Vec<RegistryKernel<A>>
where
    for<'e> RegistryEntry<A>: From<&'e E>,
{
    let by_name: HashMap<String, KernelSpec> = catalog_entries()
        .iter()
        .filter(|s| kind(s))
        .map(|s| (s.name(), *s))
        .collect();
    entries
        .iter()
        .map(|entry| {
            let name = name_of(entry);
            let spec = *by_name.get(name).unwrap_or_else(|| {
                panic!("kernel {name} of a registry is not in the catalog (stale build?)")
            });
            RegistryKernel {
                spec,
                name,
                entry: RegistryEntry::from(entry),
            }
        })
        .collect()
}

/// The grouped kernels compiled into this build (their own registry: their entry points take the
/// grouped arguments), in registry order.
pub fn built_grouped_kernels() -> &'static [GroupedKernel] {
    static KERNELS: OnceLock<Vec<GroupedKernel>> = OnceLock::new();
    KERNELS.get_or_init(|| {
        registry_kernels(
            cutlass_gemm_sys::grouped_kernels(),
            cutlass_gemm_sys::grouped_entry_name,
            |s| s.kernel_schedule.is_grouped(),
        )
    })
}

/// The weight-only kernels compiled into this build (their own registry), in registry order.
pub fn built_weight_only_kernels() -> &'static [WeightOnlyKernel] {
    static KERNELS: OnceLock<Vec<WeightOnlyKernel>> = OnceLock::new();
    KERNELS.get_or_init(|| {
        registry_kernels(
            cutlass_gemm_sys::weight_only_kernels(),
            cutlass_gemm_sys::weight_only_entry_name,
            |s| s.mixed_input.is_some(),
        )
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
/// serve it. `serves` says which rule a kernel breaks; `request` describes the plan for
/// [`crate::Error::NoKernel`].
pub(crate) fn select(
    device: &DeviceInfo,
    name: Option<&str>,
    arch: ArchPolicy,
    serves: &dyn Fn(&KernelSpec) -> std::result::Result<(), KernelRule>,
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
                if let Some(spec) = catalog_entry(name) {
                    // A grouped kernel is planned with GroupedGemm (its own registry).
                    if spec.kernel_schedule.is_grouped() {
                        return Err(crate::Error::KernelMismatch {
                            name: name.into(),
                            reason: KernelRule::Grouped { kernel: true },
                        });
                    }
                    // So is a weight-only kernel with WeightOnlyGemm.
                    if spec.mixed_input.is_some() {
                        return Err(crate::Error::KernelMismatch {
                            name: name.into(),
                            reason: KernelRule::WeightOnly { kernel: true },
                        });
                    }
                    if arch == ArchPolicy::Runnable && !spec.arch.runs_on(cc) {
                        return Err(arch_error(name, spec.arch));
                    }
                }
                return Err(crate::Error::KernelNotBuilt {
                    name: name.into(),
                    build_with: build_hint(name),
                });
            };
            if arch == ArchPolicy::Runnable && !k.spec.arch.runs_on(cc) {
                return Err(arch_error(k.name, k.spec.arch));
            }
            serves(&k.spec).map_err(|reason| crate::Error::KernelMismatch {
                name: k.name.into(),
                reason,
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
                return Err(no_kernel(request, serves, cc));
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

/// How to build the catalog entry `name`: the cargo feature whose family holds it, else the
/// kernel filter that adds it.
pub(crate) fn build_hint(name: &str) -> BuildHint {
    match catalog_entry(name) {
        None => BuildHint::NotInCatalog,
        Some(spec) => match (spec.cutlass_limit(), families_of(&spec).first()) {
            (Some(limit), _) => BuildHint::CutlassLimit(limit),
            (None, Some(&family)) => BuildHint::Feature(family),
            (None, None) => BuildHint::Kernels(name.to_string()),
        },
    }
}

/// The error for a request no built kernel serves: up to three built kernels nearest to it (same
/// input types first, then output type, layouts and architecture), and how to build a catalog
/// entry that serves it (one that runs on the device if there is one).
fn no_kernel(
    request: &str,
    serves: &dyn Fn(&KernelSpec) -> std::result::Result<(), KernelRule>,
    cc: (i32, i32),
) -> crate::Error {
    let serving: Vec<KernelSpec> = catalog_entries()
        .iter()
        .copied()
        .filter(|s| !s.kernel_schedule.is_grouped() && s.cutlass_limit().is_none())
        .filter(|s| serves(s).is_ok())
        .collect();
    let pick = serving
        .iter()
        .filter(|s| s.arch.runs_on(cc))
        .min_by_key(|s| families_of(s).is_empty())
        .or_else(|| serving.iter().min_by_key(|s| families_of(s).is_empty()));
    let build_with = pick.map_or(BuildHint::NotInCatalog, |s| build_hint(&s.name()));
    let target = pick.copied();
    let closeness = |k: &Kernel| -> u32 {
        let Some(t) = &target else {
            return 0;
        };
        let s = &k.spec;
        4 * u32::from((s.a.ty, s.b.ty) == (t.a.ty, t.b.ty))
            + 2 * u32::from(s.d.ty == t.d.ty)
            + u32::from(
                (s.a.layout, s.b.layout, s.d.layout) == (t.a.layout, t.b.layout, t.d.layout),
            )
            + u32::from(s.arch == t.arch)
    };
    let mut built: Vec<&Kernel> = built_kernels().iter().collect();
    built.sort_by_key(|k| std::cmp::Reverse(closeness(k)));
    crate::Error::NoKernel {
        request: request.into(),
        nearest: built.iter().take(3).map(|k| k.name.to_string()).collect(),
        build_with,
    }
}

/// The kernel `name` of a registry (`built`): [`crate::Error::KernelMismatch`] with `other` when it
/// is a catalog entry of another kind (`kind` says which entries are of the registry's), with the
/// rule `mismatch` gives when it is built but does not serve the plan;
/// [`crate::Error::KernelNotBuilt`] with how to build it; [`crate::Error::ArchMismatch`] when the
/// device cannot run it.
pub(crate) fn named_in_registry<A: RegistryArgs>(
    built: &[RegistryKernel<A>],
    name: &str,
    device: &DeviceInfo,
    kind: impl Fn(&KernelSpec) -> bool,
    other: KernelRule,
    mismatch: impl Fn(&KernelSpec) -> Option<KernelRule>,
) -> Result<RegistryKernel<A>> {
    let k = named_in_registry_any_arch(built, name, kind, other, mismatch)?;
    crate::error::require_arch(name, k.spec.arch, device.compute_capability)?;
    Ok(k)
}

/// [`named_in_registry`] for a kernel of any architecture (a plan whose host path alone runs on
/// this device).
pub(crate) fn named_in_registry_any_arch<A: RegistryArgs>(
    built: &[RegistryKernel<A>],
    name: &str,
    kind: impl Fn(&KernelSpec) -> bool,
    other: KernelRule,
    mismatch: impl Fn(&KernelSpec) -> Option<KernelRule>,
) -> Result<RegistryKernel<A>> {
    let Some(k) = built.iter().find(|k| k.name == name).copied() else {
        if catalog_entry(name).is_some_and(|spec| !kind(&spec)) {
            return Err(crate::Error::KernelMismatch {
                name: name.into(),
                reason: other,
            });
        }
        return Err(crate::Error::KernelNotBuilt {
            name: name.into(),
            build_with: build_hint(name),
        });
    };
    if let Some(reason) = mismatch(&k.spec) {
        return Err(crate::Error::KernelMismatch {
            name: name.into(),
            reason,
        });
    }
    Ok(k)
}

/// The kernels of a registry that serve a plan and that the device can run: those of the default
/// set (`default` says which) when there are any, else all of them.
pub(crate) fn registry_pool<A: RegistryArgs>(
    built: &[RegistryKernel<A>],
    device: &DeviceInfo,
    serves: impl Fn(&KernelSpec) -> bool,
    default: impl Fn(&KernelSpec) -> bool,
) -> Vec<RegistryKernel<A>> {
    let candidates: Vec<RegistryKernel<A>> = built
        .iter()
        .filter(|k| serves(&k.spec) && k.spec.arch.runs_on(device.compute_capability))
        .copied()
        .collect();
    let preferred: Vec<RegistryKernel<A>> = candidates
        .iter()
        .filter(|k| default(&k.spec))
        .copied()
        .collect();
    if preferred.is_empty() {
        candidates
    } else {
        preferred
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry CUTLASS 4.2 cannot build is not suggested as something to build: its hint is the
    /// limit, with the assertion; a request it would serve names another entry.
    #[test]
    fn entries_cutlass_cannot_build_are_not_suggested() {
        let limited = catalog_entries()
            .iter()
            .find(|s| s.cutlass_limit().is_some())
            .expect("the catalog lists entries CUTLASS 4.2 refuses");
        let limit = limited.cutlass_limit().unwrap();
        let hint = build_hint(&limited.name());
        assert_eq!(hint, BuildHint::CutlassLimit(limit));
        assert!(hint.to_string().contains(limit.assertion()), "{hint}");
        let same_types = |s: &KernelSpec| -> std::result::Result<(), KernelRule> {
            if (s.arch, s.a.ty, s.b.ty, s.op_class)
                == (limited.arch, limited.a.ty, limited.b.ty, limited.op_class)
            {
                Ok(())
            } else {
                Err(KernelRule::BlockScaled)
            }
        };
        let cc = limited.arch.compute_capability();
        match no_kernel("test", &same_types, cc) {
            crate::Error::NoKernel { build_with, .. } => {
                assert!(
                    !matches!(build_with, BuildHint::CutlassLimit(_)),
                    "{build_with}"
                )
            }
            e => panic!("{e:?}"),
        }
    }
}
