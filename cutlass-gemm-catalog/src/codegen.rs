//! Code generation: C++ held as templates with named `${placeholders}`, rendered from specs.
//!
//! Every generated file starts with "generated, do not edit". One kernel instantiation per `.cu`;
//! nvcc compiles several of them as one translation unit ([`translation_units`]).

use crate::spec::{Fusion, KernelSpec};
use crate::types::Arch;

/// The C ABI header template (one header: shared types, the registry, per-kernel declarations).
pub const HEADER_TEMPLATE: &str = include_str!("../templates/cutlass_rs.h.in");
/// Declarations of one kernel's entry points.
pub const KERNEL_DECL_TEMPLATE: &str = include_str!("../templates/kernel_decl.h.in");
/// The registry source.
pub const REGISTRY_TEMPLATE: &str = include_str!("../templates/registry.cc.in");
/// One registry entry.
pub const REGISTRY_ENTRY_TEMPLATE: &str = include_str!("../templates/registry_entry.cc.in");
/// Stubs for the quantization entry points, for builds without CUDA kernels.
pub const QUANTIZE_STUBS_TEMPLATE: &str = include_str!("../templates/quantize_stubs.cc.in");
/// One SM100 or SM120 GEMM instantiation (dense and block-scaled).
pub const SM1XX_GEMM_TEMPLATE: &str = include_str!("../templates/gemm_sm1xx.cu.in");
/// One SM90 GEMM instantiation.
pub const SM90_GEMM_TEMPLATE: &str = include_str!("../templates/gemm_sm90.cu.in");
/// One SM90 grouped (pointer-array) GEMM.
pub const SM90_GROUPED_GEMM_TEMPLATE: &str = include_str!("../templates/gemm_sm90_grouped.cu.in");
/// One SM100 or SM120 grouped (pointer-array) GEMM, dense or block-scaled.
pub const SM1XX_GROUPED_GEMM_TEMPLATE: &str = include_str!("../templates/gemm_sm1xx_grouped.cu.in");
/// Declarations of one grouped kernel's entry points.
pub const GROUPED_KERNEL_DECL_TEMPLATE: &str =
    include_str!("../templates/grouped_kernel_decl.h.in");
/// One entry of the grouped kernels' registry.
pub const GROUPED_REGISTRY_ENTRY_TEMPLATE: &str =
    include_str!("../templates/grouped_registry_entry.cc.in");
/// One SM90 weight-only (mixed-input) GEMM.
pub const SM90_WEIGHT_ONLY_GEMM_TEMPLATE: &str =
    include_str!("../templates/gemm_sm90_weight_only.cu.in");
/// One SM100 weight-only (mixed-input) GEMM.
pub const SM100_WEIGHT_ONLY_GEMM_TEMPLATE: &str =
    include_str!("../templates/gemm_sm100_weight_only.cu.in");
/// Declarations of one weight-only kernel's entry points.
pub const WEIGHT_ONLY_KERNEL_DECL_TEMPLATE: &str =
    include_str!("../templates/weight_only_kernel_decl.h.in");
/// One entry of the weight-only kernels' registry.
pub const WEIGHT_ONLY_REGISTRY_ENTRY_TEMPLATE: &str =
    include_str!("../templates/weight_only_registry_entry.cc.in");
/// One SM90 FP8 GEMM with blockwise f32 scales of A and B.
pub const SM90_BLOCKWISE_GEMM_TEMPLATE: &str =
    include_str!("../templates/gemm_sm90_blockwise.cu.in");

// The hand-written C++ and CUDA sources live in `cutlass-gemm-sys/csrc/`, beside the build script
// that compiles them; the generated sources include them by these names.

/// The ABI header the kernels and the rendered C header include (types, status and type codes).
pub const ABI_HEADER_NAME: &str = "cutlass_rs_abi.h";
/// C++ helpers shared by all generated kernels.
pub const SHIM_HEADER_NAME: &str = "cutlass_rs_shim.hpp";
/// The hand-written quantization kernels.
pub const QUANTIZE_SOURCE_NAME: &str = "cutlass_rs_quantize.cu";
/// The hand-written staging copies (operands the TMA kernels cannot address in place).
pub const STAGING_SOURCE_NAME: &str = "cutlass_rs_staging.cu";
/// The hand-written bias-and-activation pass over D: the fused epilogue's unfused twin.
pub const ELEMENTWISE_SOURCE_NAME: &str = "cutlass_rs_elementwise.cu";
/// The FP6/FP4 encoders the quantization kernels include (also built for the host by a test).
pub const ENCODE_HEADER_NAME: &str = "narrow_encode.cuh";
/// This crate's SM90 FP8 mainloop (overlapped promotion), included by the kernels of
/// [`crate::KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap`] only.
pub const SM90_FP8_HEADER_NAME: &str = "cutlass_rs_sm90_fp8.hpp";
/// The blockwise variant of the overlapped mainloop, included by the kernels of
/// [`crate::KernelSchedule::TmaWarpSpecializedCooperativeFp8BlockwiseOverlap`] only.
pub const SM90_FP8_BLOCKWISE_HEADER_NAME: &str = "cutlass_rs_sm90_fp8_blockwise.hpp";
/// The SM90 FP8 mainloop for the wide cooperative tiles (N slices, the promotion hidden across the
/// warp groups), included by the kernels that [`KernelSpec::mainloop_wrapper`] gives it.
pub const SM90_FP8_SLICED_HEADER_NAME: &str = "cutlass_rs_sm90_fp8_sliced.hpp";
/// This crate's fused epilogue (bias, activation, row and column scales), included by the kernels
/// of [`crate::Fusion::ScaleBiasActivation`] only.
pub const EPILOGUE_HEADER_NAME: &str = "cutlass_rs_epilogue.hpp";
/// This crate's gated epilogue (a gated linear unit over gate and up columns interleaved in B),
/// included by the kernels of [`crate::Fusion::Gated`] only.
pub const GATED_EPILOGUE_HEADER_NAME: &str = "cutlass_rs_gated_epilogue.hpp";

/// File name of the hand-written header (in `cutlass-gemm-sys/csrc/`) of the epilogue with an
/// auxiliary output, included by the kernels of [`crate::Fusion::BiasActivationAux`] only.
pub const AUX_EPILOGUE_HEADER_NAME: &str = "cutlass_rs_aux_epilogue.hpp";
/// The grouped kernels' C++ side (the per-group argument builder, the entry points), included by
/// the grouped kernels only.
pub const GROUPED_HEADER_NAME: &str = "cutlass_rs_grouped.hpp";
/// The grouped kernels' C ABI (argument struct, layouts, registry entry), included by the grouped
/// kernels and the rendered C header.
pub const GROUPED_ABI_HEADER_NAME: &str = "cutlass_rs_grouped_abi.h";
/// The weight-only kernels' C++ side (argument building, entry points), included by the
/// weight-only kernels only.
pub const WEIGHT_ONLY_HEADER_NAME: &str = "cutlass_rs_weight_only.hpp";
/// The SM100 weight-only kernels' arguments (the scales' layout, a weight as stored), included by
/// those kernels only, so that the SM90 ones' cached objects stay valid.
pub const WEIGHT_ONLY_SM100_HEADER_NAME: &str = "cutlass_rs_weight_only_sm100.hpp";
/// The packed order of the weight-only kernels' weights, included by those kernels and by
/// [`WEIGHT_PACK_SOURCE_NAME`].
pub const WEIGHT_LAYOUT_HEADER_NAME: &str = "cutlass_rs_weight_layout.hpp";
/// The weight-only kernels' C ABI (argument struct, registry entry), included by the weight-only
/// kernels, the hand-written weight kernels and the rendered C header.
pub const WEIGHT_ONLY_ABI_HEADER_NAME: &str = "cutlass_rs_weight_only_abi.h";
/// The hand-written weight kernels' C ABI (packing, zeros, quantizers, the decode GEMV), included by
/// those kernels and the rendered C header, not by the CUTLASS weight-only kernels (whose cached
/// objects it therefore leaves valid).
pub const WEIGHT_PREP_ABI_HEADER_NAME: &str = "cutlass_rs_weight_prep_abi.h";
/// The weight preparation kernels (packing, zeros, quantizer) of `cutlass-gemm-sys/csrc`.
pub const WEIGHT_PACK_SOURCE_NAME: &str = "cutlass_rs_weight_pack.cu";
/// The weight-only decode GEMV (hand-written, `csrc/`).
pub const WEIGHT_GEMV_SOURCE_NAME: &str = "cutlass_rs_weight_gemv.cu";
/// The FP8 blockwise decode GEMV (hand-written, `csrc/`).
pub const BLOCKWISE_GEMV_SOURCE_NAME: &str = "cutlass_rs_blockwise_gemv.cu";
/// The FP8 blockwise decode GEMV's C ABI, included by it and the rendered C header, not by the
/// CUTLASS kernels (whose cached objects it therefore leaves valid).
pub const BLOCKWISE_GEMV_ABI_HEADER_NAME: &str = "cutlass_rs_blockwise_gemv_abi.h";
/// The 16-bit decode GEMV (hand-written, `csrc/`).
pub const DENSE_GEMV_SOURCE_NAME: &str = "cutlass_rs_dense_gemv.cu";
/// The 16-bit decode GEMV's C ABI, included by it and the rendered C header only.
pub const DENSE_GEMV_ABI_HEADER_NAME: &str = "cutlass_rs_dense_gemv_abi.h";
/// What the decode GEMVs share (the MMA, e4m3 to 16-bit pairs, a streaming load, the warps' sums
/// and the launch shape).
pub const GEMV_FRAGMENTS_HEADER_NAME: &str = "cutlass_rs_gemv_fragments.cuh";
/// The activations of every fused epilogue (the visitor trees, the gated epilogue, the unfused
/// twin, the decode GEMV).
pub const ACTIVATION_HEADER_NAME: &str = "cutlass_rs_activation.cuh";
/// The name of the rendered C ABI header.
pub const HEADER_NAME: &str = "cutlass_rs.h";

/// The hand-written headers a kernel's source includes besides the shim and the ABI header, by
/// file name (their texts are part of its object's cache key).
pub fn extra_headers(spec: &KernelSpec) -> Vec<&'static str> {
    let mut headers = match spec.mainloop_wrapper() {
        // The blockwise and sliced headers include the tensor-wise one (the operand partitioning
        // all three share; the blockwise one also its k-tile loop).
        Some((_, name)) if name != SM90_FP8_HEADER_NAME => vec![name, SM90_FP8_HEADER_NAME],
        Some((_, name)) => vec![name],
        None => Vec::new(),
    };
    match spec.fusion {
        Fusion::LinearCombination => {}
        Fusion::ScaleBiasActivation { .. } => {
            headers.extend([EPILOGUE_HEADER_NAME, ACTIVATION_HEADER_NAME])
        }
        Fusion::Gated { .. } => {
            headers.extend([GATED_EPILOGUE_HEADER_NAME, ACTIVATION_HEADER_NAME])
        }
        Fusion::BiasActivationAux { .. } => headers.extend([
            AUX_EPILOGUE_HEADER_NAME,
            EPILOGUE_HEADER_NAME,
            ACTIVATION_HEADER_NAME,
        ]),
    }
    if spec.kernel_schedule.is_grouped() {
        headers.extend([GROUPED_HEADER_NAME, GROUPED_ABI_HEADER_NAME]);
    }
    if spec.mixed_input.is_some() {
        if spec.arch == Arch::Sm100a {
            headers.push(WEIGHT_ONLY_SM100_HEADER_NAME);
        }
        headers.extend([
            WEIGHT_ONLY_HEADER_NAME,
            WEIGHT_LAYOUT_HEADER_NAME,
            WEIGHT_ONLY_ABI_HEADER_NAME,
        ]);
    }
    headers
}

/// The fusion's placeholders of the SM1xx and weight-only templates: its declaration, the
/// builder's argument and the include of the fused epilogue's header (all empty without fusion).
fn push_fusion(values: &mut Vec<(&str, String)>, spec: &KernelSpec) {
    let (fusion_decl, epilogue_fusion) = fusion_values(spec);
    values.push(("fusion_decl", fusion_decl));
    values.push(("epilogue_fusion", epilogue_fusion));
    values.push((
        "extra_include",
        fusion_header(spec)
            .map(|h| format!("\n#include \"{h}\""))
            .unwrap_or_default(),
    ));
}

/// The hand-written header a kernel's epilogue fusion includes (none for CUTLASS's).
fn fusion_header(spec: &KernelSpec) -> Option<&'static str> {
    match spec.fusion {
        Fusion::LinearCombination => None,
        Fusion::ScaleBiasActivation { .. } => Some(EPILOGUE_HEADER_NAME),
        Fusion::Gated { .. } => Some(GATED_EPILOGUE_HEADER_NAME),
        Fusion::BiasActivationAux { .. } => Some(AUX_EPILOGUE_HEADER_NAME),
    }
}

/// The C++ of a kernel's epilogue fusion: a declaration before the collective epilogue and the
/// builder's fusion argument (both empty for CUTLASS's default, `LinearCombination`, so those
/// sources stay as they were).
fn fusion_values(spec: &KernelSpec) -> (String, String) {
    match (spec.fusion, spec.output_scale) {
        // The tree's broadcasts are laid out over one CTA's tile: half the MMA tile's M for
        // SM100's 2SM MMAs (as CUTLASS's epilogue builder gives its own fusions).
        // SM90: a fusion tag for which cutlass_rs_epilogue.hpp specializes CUTLASS's epilogue
        // builder (lean trees with the activation fixed at compile time beside the whole tree);
        // SM100 and SM120: the whole tree as the builder's callbacks.
        (Fusion::ScaleBiasActivation { bias }, _) => (
            format!(
                "using FusionCallbacks = cutlass_rs::{}<\n    Shape<_{}, _{}, _{}>, {}, {}, {}>;\n\n",
                if spec.arch == Arch::Sm90a {
                    "ScaleBiasActivationFusion"
                } else {
                    "ScaleBiasActivation"
                },
                spec.tile[0] / u32::from(spec.mma_sms()),
                spec.tile[1],
                spec.tile[2],
                spec.d.ty.cpp_type(),
                spec.c.ty.cpp_type(),
                bias.cpp_type()
            ),
            ",\n    FusionCallbacks".to_string(),
        ),
        // A block-scaled D: the LinCombBlockScaleFactor fusion (D and its scale factors).
        (Fusion::LinearCombination, Some(o)) => (
            format!(
                "using FusionOperation = cutlass::epilogue::fusion::LinCombBlockScaleFactor<\n    {}, {}, {}, {}, {}, {}>;\n\n",
                o.vec,
                spec.d.ty.cpp_type(),
                spec.compute.cpp_type(),
                o.sf.cpp_type(),
                spec.d.layout.cpp_type(),
                spec.c.ty.cpp_type()
            ),
            ",\n    FusionOperation".to_string(),
        ),
        // The gated epilogue: a fusion tag for which cutlass_rs_gated_epilogue.hpp specializes
        // CUTLASS's epilogue builder.
        (Fusion::Gated { bias }, _) => (
            format!(
                "using FusionOperation = cutlass_rs::GatedFusion<{}>;\n\n",
                bias.cpp_type()
            ),
            ",\n    FusionOperation".to_string(),
        ),
        // The auxiliary output: CUTLASS's LinCombPerColBiasEltActAux, with the arguments
        // cutlass_rs_aux_epilogue.hpp gives it (Aux of D's type).
        (Fusion::BiasActivationAux { bias }, _) => (
            format!(
                "using FusionOperation = cutlass_rs::BiasActivationAuxFusion<\n    {d}, {}, {}, {d}>;\n\n",
                spec.c.ty.cpp_type(),
                bias.cpp_type(),
                d = spec.d.ty.cpp_type(),
            ),
            ",\n    FusionOperation".to_string(),
        ),
        (Fusion::LinearCombination, None) => (String::new(), String::new()),
    }
}

/// Substitutes every `${key}` in `template`. Fails on a placeholder without a value and on a value
/// whose placeholder does not occur, so templates and generators cannot drift apart silently.
pub fn render(template: &str, values: &[(&str, String)]) -> Result<String, String> {
    let mut out = String::with_capacity(template.len() + 256);
    let mut used = vec![false; values.len()];
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| "unterminated ${ in template".to_string())?;
        let key = &after[..end];
        let idx = values
            .iter()
            .position(|(k, _)| *k == key)
            .ok_or_else(|| format!("template placeholder ${{{key}}} has no value"))?;
        used[idx] = true;
        out.push_str(&values[idx].1);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(format!(
            "value for ${{{}}} given but the template has no such placeholder",
            values[i].0
        ));
    }
    Ok(out)
}

/// Renders the `.cu` source of one kernel.
pub fn kernel_source(spec: &KernelSpec) -> Result<String, String> {
    spec.validate()?;
    let v = |x: u32| x.to_string();
    // Block-scaled operands are CUTLASS's mx/nv wrapper types.
    let operand_type = |ty: crate::DataType| -> String {
        match spec.block_scale {
            Some(bs) if bs.sf == crate::DataType::UE4M3 => {
                format!("cutlass::nv_float4_t<{}>", ty.cpp_type())
            }
            Some(_) => {
                let family = match ty.bits() {
                    8 => "mx_float8_t",
                    6 => "mx_float6_t",
                    _ => "mx_float4_t",
                };
                format!("cutlass::{family}<{}>", ty.cpp_type())
            }
            None => ty.cpp_type().to_string(),
        }
    };
    // `element_a` is the third value (mixed-input kernels replace it).
    let mut values: Vec<(&str, String)> = vec![
        ("name", spec.name()),
        ("arch_tag", spec.arch.cpp_type().into()),
        ("element_a", operand_type(spec.a.ty)),
        ("layout_a", spec.a.layout.cpp_type().into()),
        ("align_a", v(spec.a.align)),
        ("element_b", operand_type(spec.b.ty)),
        ("layout_b", spec.b.layout.cpp_type().into()),
        ("align_b", v(spec.b.align)),
        ("element_c", spec.c.ty.cpp_type().into()),
        ("layout_c", spec.c.layout.cpp_type().into()),
        ("align_c", v(spec.c.align)),
        ("element_d", spec.d.ty.cpp_type().into()),
        ("layout_d", spec.d.layout.cpp_type().into()),
        ("align_d", v(spec.d.align)),
        ("element_acc", spec.accumulator.cpp_type().into()),
        ("element_compute", spec.compute.cpp_type().into()),
        ("tile_m", v(spec.tile[0])),
        ("tile_n", v(spec.tile[1])),
        ("tile_k", v(spec.tile[2])),
        ("cluster_m", v(spec.cluster[0])),
        ("cluster_n", v(spec.cluster[1])),
        ("cluster_k", v(spec.cluster[2])),
        ("kernel_schedule", spec.kernel_schedule.cpp_type()),
        (
            "epilogue_schedule",
            spec.epilogue_schedule.cpp_type().into(),
        ),
    ];
    let template = match spec.arch {
        Arch::Sm90a if spec.kernel_schedule.is_grouped() => {
            // A and B through per-group pointers; with blockwise scales, each paired with the
            // layout of its scales (also per group).
            let (scale_config, [sfa, sfb]) = match spec.blockwise {
                Some(bw) => (
                    format!(
                        "// FP8 with blockwise f32 scales: one per {m}x{k} block of A, one per {n}x{k} block of B, {order:?}.\nusing ScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<{m}, {n}, {k}, {major}, {major}>;\nusing LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());\nusing LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());\n\n",
                        m = bw.m,
                        n = bw.n,
                        k = bw.k,
                        order = bw.order,
                        major = bw.order.cpp_major(),
                    ),
                    ["LayoutSFA", "LayoutSFB"].map(Some),
                ),
                None => (String::new(), [None, None]),
            };
            for (slot, sf) in [(3, sfa), (6, sfb)] {
                let layout = &values[slot].1;
                values[slot].1 = match sf {
                    Some(sf) => format!("cute::tuple<{layout} *, {sf} *>"),
                    None => format!("{layout} *"),
                };
            }
            values.push(("scale_config", scale_config));
            let (mainloop, extra_include) = mainloop_values(spec);
            values.push(("mainloop", mainloop));
            values.push(("extra_include", extra_include));
            SM90_GROUPED_GEMM_TEMPLATE
        }
        Arch::Sm90a if spec.mixed_input.is_some() => {
            values.push(("tile_scheduler", spec.tile_scheduler.cpp_type().into()));
            // Empty for CUTLASS's epilogue, so those sources (and cached objects) stay as they were.
            push_fusion(&mut values, spec);
            // The weight's element carries its scale (and zero) types; its layout is LayoutNarrow.
            values[2].1 = narrow_element(spec);
            values.retain(|(key, _)| *key != "layout_a");
            values.push(("narrow_layout", narrow_layout(spec)));
            SM90_WEIGHT_ONLY_GEMM_TEMPLATE
        }
        Arch::Sm90a => {
            values.push(("tile_scheduler", spec.tile_scheduler.cpp_type().into()));
            let (mainloop, mut extra_include) = mainloop_values(spec);
            if let Some(h) = fusion_header(spec) {
                extra_include.push_str(&format!("\n#include \"{h}\""));
            }
            let (fusion_decl, epilogue_fusion) = fusion_values(spec);
            values.push(("fusion_decl", fusion_decl));
            values.push(("epilogue_fusion", epilogue_fusion));
            values.push(("mainloop", mainloop));
            values.push(("extra_include", extra_include));
            match spec.blockwise {
                Some(bw) => {
                    values.push(("sf_m", v(bw.m)));
                    values.push(("sf_n", v(bw.n)));
                    values.push(("sf_k", v(bw.k)));
                    SM90_BLOCKWISE_GEMM_TEMPLATE
                }
                None => SM90_GEMM_TEMPLATE,
            }
        }
        Arch::Sm100a if spec.mixed_input.is_some() => {
            let group = spec.mixed_input.map_or(0, |m| m.group);
            // The weight's element carries its scale (and zero) types.
            values[2].1 = narrow_element(spec);
            values.push(("group", group.to_string()));
            SM100_WEIGHT_ONLY_GEMM_TEMPLATE
        }
        _ if spec.kernel_schedule.is_grouped() => {
            let o = spec
                .origin
                .ok_or_else(|| format!("{}: SM1xx entries need their seed rows", spec.name()))?;
            values.push(("op_class", spec.op_class.cpp_type().into()));
            values.push(("type_table", o.type_table.to_string()));
            values.push(("type_row", o.type_row.to_string()));
            values.push(("tile_table", o.tile_table.to_string()));
            SM1XX_GROUPED_GEMM_TEMPLATE
        }
        _ => {
            let o = spec
                .origin
                .ok_or_else(|| format!("{}: SM1xx entries need their seed rows", spec.name()))?;
            values.push(("op_class", spec.op_class.cpp_type().into()));
            // Sparse SM100 mainloops carve the epilogue's shared memory out with the builder's
            // `StageCountAutoCarveoutEpi`, as CUTLASS's generator does.
            let stage_count = if spec.op_class.is_sparse() {
                "cutlass::gemm::collective::StageCountAutoCarveoutEpi<CollectiveEpilogue>"
                    .to_string()
            } else {
                "cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(\n        sizeof(typename CollectiveEpilogue::SharedStorage))>".to_string()
            };
            values.push(("stage_count", stage_count));
            push_fusion(&mut values, spec);
            values.push(("type_table", o.type_table.to_string()));
            values.push(("type_row", o.type_row.to_string()));
            values.push(("tile_table", o.tile_table.to_string()));
            SM1XX_GEMM_TEMPLATE
        }
    };
    values.push(("macros", macros(spec)));
    render(template, &values)
}

/// The collective mainloop an SM90 kernel instantiates (this crate's wrapper around the builder's,
/// or the builder's own) and the include of the wrapper's header (nothing for CUTLASS's schedules,
/// so those sources, and their cached objects, stay as they were).
fn mainloop_values(spec: &KernelSpec) -> (String, String) {
    match spec.mainloop_wrapper() {
        Some((wrapper, header)) => (
            format!("{wrapper}<CollectiveMainloop>"),
            format!("\n#include \"{header}\""),
        ),
        None => ("CollectiveMainloop".to_string(), String::new()),
    }
}

/// The declaration of a mixed-input kernel's `LayoutNarrow`, the layout of its narrow operand: the
/// packed order of `cutlass_rs_weight_layout.hpp` for a 4-bit weight (the text its sources have
/// always had, so that their cached objects stay), CUTLASS's row-major layout for one read as
/// stored.
fn narrow_layout(spec: &KernelSpec) -> String {
    let layout_a = spec.a.layout.cpp_type();
    if spec.mixed_input.is_some_and(|m| m.shuffled) {
        format!(
            "// The narrow operand (the weight, {layout_a} n x k) in the packed order of\n// cutlass_rs_weight_layout.hpp.\nusing LayoutNarrow = cutlass_rs::weight::PackedLayout<{}>;",
            spec.b.ty.cpp_type()
        )
    } else {
        format!(
            "// The narrow operand (the weight, n x k) as stored.\nusing LayoutNarrow = {layout_a};"
        )
    }
}

/// The narrow operand of a mixed-input kernel as its collective builder takes it: the element,
/// with the scale (and zero) type when it is scaled, as `cutlass_library` emits it (scales and
/// zeros of the wide operand's type).
fn narrow_element(spec: &KernelSpec) -> String {
    let narrow = spec.a.ty.cpp_type();
    let wide = spec.b.ty.cpp_type();
    match spec.mixed_input.map(|m| m.mode) {
        Some(crate::MixedInputMode::ScaleOnly) => format!("cute::tuple<{narrow}, {wide}>"),
        Some(crate::MixedInputMode::ScaleWithZeroPoint) => {
            format!("cute::tuple<{narrow}, {wide}, {wide}>")
        }
        _ => narrow.to_string(),
    }
}

/// The macros a kernel's source defines before CUTLASS's headers, which read them, each with a
/// comment: grid dependency control and the extended wgmma shapes, or nothing.
pub fn macros(spec: &KernelSpec) -> String {
    dependent_launch(spec) + &mma_shapes(spec)
}

/// The `#define` lines of [`macros`], without their comments: kernels compiled in one translation
/// unit ([`translation_units`]) have the same.
pub fn macro_definitions(spec: &KernelSpec) -> Vec<&'static str> {
    let mut defines = Vec::new();
    if spec.supports_programmatic_dependent_launch() {
        defines.push(GDC_DEFINE);
    }
    if spec.uses_extended_wgmma_shape() {
        defines.push(EXTENDED_MMA_SHAPES_DEFINE);
    }
    defines
}

const GDC_DEFINE: &str = "#define CUTLASS_ENABLE_GDC_FOR_SM90 1";
const EXTENDED_MMA_SHAPES_DEFINE: &str = "#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED";

/// The define that gives an SM90 kernel one wgmma of its whole tile N when that N is one of
/// CuTe's extended shapes ([`KernelSpec::uses_extended_wgmma_shape`]; CUTLASS's generator emits
/// them at instantiation level 3 and builds them with `CUTLASS_ENABLE_SM90_EXTENDED_MMA_SHAPES`),
/// or nothing (so the sources of every other kernel, and their cached objects, stay as they were).
fn mma_shapes(spec: &KernelSpec) -> String {
    if spec.uses_extended_wgmma_shape() {
        format!(
            "// wgmma N = {} is one of CuTe's extended SM90 MMA shapes.\n{EXTENDED_MMA_SHAPES_DEFINE}\n",
            spec.tile[1]
        )
    } else {
        String::new()
    }
}

/// The define that compiles CUTLASS's grid dependency control (`griddepcontrol.wait` before the
/// kernel's first global memory access, `griddepcontrol.launch_dependents` after its last tile's
/// main loop) into the kernels that support programmatic dependent launch
/// ([`KernelSpec::supports_programmatic_dependent_launch`]); the shim launches those with the
/// attribute when the arguments ask for it (`CUTLASS_RS_LAUNCH_PDL`). Nothing for the others.
fn dependent_launch(spec: &KernelSpec) -> String {
    if spec.supports_programmatic_dependent_launch() {
        format!(
            "// Programmatic dependent launch: CUTLASS's grid dependency control compiled in.\n{GDC_DEFINE}\n"
        )
    } else {
        String::new()
    }
}

/// Kernels that one nvcc compiles together: their `.cu` files included one after another, so that
/// CUTLASS's headers are parsed, and the templates the kernels share instantiated, once for all of
/// them. Each kernel's declarations live in a namespace of its own name. Its SM90 code is the same
/// as when it is compiled alone (SM100/SM120: up to the constants ptxas shares among a cubin's
/// kernels). Six kernels compile in about a third of the time they take one by one, with about
/// twice the memory of one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TranslationUnit {
    /// The kernels, in the order the source includes them (by name).
    pub kernels: Vec<KernelSpec>,
}

impl TranslationUnit {
    /// The name of the unit: its first kernel's, with the count of the others when there are any.
    pub fn name(&self) -> String {
        match self.kernels.len() {
            1 => self.kernels[0].name(),
            n => format!("{}+{}", self.kernels[0].name(), n - 1),
        }
    }

    /// The file nvcc compiles: the kernel's own `.cu` for a unit of one, else the unit's source
    /// ([`TranslationUnit::source`]) under the unit's name.
    pub fn file_name(&self) -> String {
        match self.kernels.len() {
            1 => format!("{}.cu", self.kernels[0].name()),
            _ => format!("{}.unit.cu", self.name()),
        }
    }

    /// The source of a unit of several kernels: an include of each kernel's `.cu`.
    pub fn source(&self) -> String {
        let mut s = String::from(
            "// generated, do not edit: rendered by cutlass-gemm-sys/build.rs (codegen::translation_units)\n\
             // One translation unit of these kernels, whose sources define the same macros before\n\
             // CUTLASS's headers.\n",
        );
        for k in &self.kernels {
            s.push_str(&format!("#include \"{}.cu\"\n", k.name()));
        }
        s
    }
}

/// What kernels sharing a translation unit have in common.
type UnitClass = (Arch, Vec<&'static str>);

/// Splits kernels into translation units of at most `max_kernels` each (at least one). Kernels
/// share a unit only with kernels of the same architecture whose sources define the same macros
/// ([`macro_definitions`]), which CUTLASS's headers read once per unit; within that class, units take
/// kernels in name order (so similar kernels, which share the most templates, go together) and
/// are as even as the count allows. Adding a kernel changes only the units of its class.
pub fn translation_units(specs: &[KernelSpec], max_kernels: usize) -> Vec<TranslationUnit> {
    let max = max_kernels.max(1);
    let mut classes: Vec<(UnitClass, Vec<KernelSpec>)> = Vec::new();
    for s in specs {
        let key = (s.arch, macro_definitions(s));
        match classes.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(*s),
            None => classes.push((key, vec![*s])),
        }
    }
    let mut units = Vec::new();
    for (_, mut members) in classes {
        members.sort_by_cached_key(KernelSpec::name);
        let count = members.len().div_ceil(max);
        let (size, extra) = (members.len() / count, members.len() % count);
        let mut rest = members.as_slice();
        for i in 0..count {
            let (unit, tail) = rest.split_at(size + usize::from(i < extra));
            units.push(TranslationUnit {
                kernels: unit.to_vec(),
            });
            rest = tail;
        }
    }
    units
}

/// Renders the C ABI header declaring the given kernels.
pub fn header(specs: &[KernelSpec]) -> Result<String, String> {
    let mut decls = String::new();
    for s in specs {
        let template = if s.kernel_schedule.is_grouped() {
            GROUPED_KERNEL_DECL_TEMPLATE
        } else if s.mixed_input.is_some() {
            WEIGHT_ONLY_KERNEL_DECL_TEMPLATE
        } else {
            KERNEL_DECL_TEMPLATE
        };
        decls.push_str(&render(template, &[("name", s.name())])?);
    }
    render(HEADER_TEMPLATE, &[("kernel_declarations", decls)])
}

/// Renders the registry source listing the given kernels. `cutlass_version` is
/// major*10000 + minor*100 + patch of the CUTLASS the kernels were built with (0 when none);
/// `quantize_built` says whether the quantization kernels are compiled (else stubs refuse).
pub fn registry(
    specs: &[KernelSpec],
    cutlass_version: u32,
    quantize_built: bool,
) -> Result<String, String> {
    let (weight_only, dense): (Vec<&KernelSpec>, Vec<&KernelSpec>) =
        specs.iter().partition(|s| s.mixed_input.is_some());
    let (grouped, plain): (Vec<&KernelSpec>, Vec<&KernelSpec>) = dense
        .into_iter()
        .partition(|s| s.kernel_schedule.is_grouped());
    let mut entries = String::new();
    for s in &plain {
        entries.push_str(&render(REGISTRY_ENTRY_TEMPLATE, &[("name", s.name())])?);
    }
    let mut grouped_entries = String::new();
    for s in &grouped {
        grouped_entries.push_str(&render(
            GROUPED_REGISTRY_ENTRY_TEMPLATE,
            &[("name", s.name())],
        )?);
    }
    let mut weight_only_entries = String::new();
    for s in &weight_only {
        weight_only_entries.push_str(&render(
            WEIGHT_ONLY_REGISTRY_ENTRY_TEMPLATE,
            &[("name", s.name())],
        )?);
    }
    render(
        REGISTRY_TEMPLATE,
        &[
            ("registry_entries", entries),
            ("kernel_count", plain.len().to_string()),
            ("grouped_registry_entries", grouped_entries),
            ("grouped_kernel_count", grouped.len().to_string()),
            ("weight_only_registry_entries", weight_only_entries),
            ("weight_only_kernel_count", weight_only.len().to_string()),
            ("cutlass_version", cutlass_version.to_string()),
            (
                "quantize_stubs",
                if quantize_built {
                    String::new()
                } else {
                    QUANTIZE_STUBS_TEMPLATE.to_string()
                },
            ),
        ],
    )
}
