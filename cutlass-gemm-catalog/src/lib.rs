//! The CUTLASS kernel catalog as data.
//!
//! This crate is the one source of truth about kernels: the element types, layouts, tiles and
//! schedules of every kernel the project can instantiate ([`catalog`]), their procedural names
//! (compatible with CUTLASS's `cutlass_library`), and the C++ code generated for them
//! ([`codegen`]). `cutlass-gemm-sys`'s build script uses it to generate and compile the selected kernels;
//! the safe `cutlass` crate uses it to validate problems and pick kernels.
//!
//! It has no dependencies and does no I/O.
#![deny(missing_docs)]

pub mod catalog;
pub mod codegen;
pub mod families;
pub mod limits;
pub mod spec;
pub mod tables;
#[rustfmt::skip]
pub mod tile_tables;
pub mod types;

pub use families::{Family, Preset};
pub use limits::CutlassLimit;
pub use spec::{
    Blockwise, EpilogueSchedule, Fusion, KernelSchedule, KernelSpec, MixedInput, MixedInputMode,
    Operand, ScaleOrder, TileScheduler,
};
pub use types::{Arch, DataType, Layout};

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_and_every_entry_validates() {
        let all = catalog::all();
        let names: HashSet<String> = all.iter().map(KernelSpec::name).collect();
        assert_eq!(names.len(), all.len());
        for s in &all {
            s.validate().unwrap();
        }
    }

    #[test]
    fn name_matches_cutlass_library_format() {
        // The name cutlass_library's GemmOperation.procedural_name() gives this configuration
        // (CUTLASS 4.2 generator, SM90 bf16 TN, row-major C/D, 128x256x64, cluster 2x1x1,
        // auto stages, persistent scheduler, cooperative schedule, TMA epilogue).
        let s = catalog::all()
            .into_iter()
            .find(|s| {
                s.a.ty == DataType::Bf16
                    && s.d.ty == DataType::Bf16
                    && s.layout_name() == "TN"
                    && s.tile == [128, 256, 64]
            })
            .unwrap();
        assert_eq!(
            s.name(),
            "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_2x1x1_0_tnt_align8_warpspecialized_cooperative_epi_tma"
        );
    }

    #[test]
    fn default_set_is_small_and_covers_all_layouts() {
        let with_grouped = catalog::select(&[Arch::Sm90a], &catalog::NameFilter::parse(""));
        assert_eq!(with_grouped.len(), 102);
        // Thirteen grouped kernels: four tiles per 16-bit type and three for e4m3 (one of them
        // with a column-major D, for the operand swap), and two for e4m3 with blockwise scales
        // (bf16 out, K-major scales, the overlapped main loop).
        let (grouped, all): (Vec<KernelSpec>, Vec<KernelSpec>) = with_grouped
            .into_iter()
            .partition(|s| s.kernel_schedule.is_grouped());
        assert_eq!(grouped.len(), 13);
        for (ty, n) in [(DataType::Bf16, 4), (DataType::F16, 4), (DataType::E4M3, 5)] {
            assert_eq!(grouped.iter().filter(|s| s.a.ty == ty).count(), n, "{ty}");
            let swapped = grouped
                .iter()
                .filter(|s| s.a.ty == ty && s.d.layout == crate::Layout::ColumnMajor);
            assert_eq!(swapped.count(), 1, "{ty}");
        }
        let blockwise: Vec<&KernelSpec> =
            grouped.iter().filter(|s| s.blockwise.is_some()).collect();
        assert_eq!(blockwise.len(), 2);
        assert!(blockwise.iter().all(|s| s.d.ty == DataType::Bf16
            && s.blockwise.unwrap().order == crate::ScaleOrder::KMajor
            && s.kernel_schedule.mainloop_wrapper().is_some()));
        assert!(grouped.iter().all(|s| s.layout_name() == "TN"
            && s.name().contains("_gemm_grouped_")
            && !s.supports_programmatic_dependent_launch()));
        // Eight with the gated epilogue (three tiles per 16-bit type, two for e4m3 to bf16), each
        // the twin of a kernel with CUTLASS's epilogue but for the epilogue schedule.
        let (gated, all): (Vec<KernelSpec>, Vec<KernelSpec>) =
            all.into_iter().partition(|s| s.fusion.is_gated());
        assert_eq!(gated.len(), 8);
        assert_eq!(gated.iter().filter(|g| g.a.ty == DataType::E4M3).count(), 2);
        assert!(gated.iter().all(|g| all.contains(&KernelSpec {
            fusion: crate::Fusion::LinearCombination,
            epilogue_schedule: if matches!(
                g.kernel_schedule,
                crate::KernelSchedule::TmaWarpSpecializedPingpong
                    | crate::KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap
            ) {
                crate::EpilogueSchedule::TmaWarpSpecialized
            } else {
                crate::EpilogueSchedule::TmaWarpSpecializedCooperative
            },
            ..*g
        })));
        // Three with the auxiliary output (bf16, SM90_TILES_AUX), each the twin of a kernel with
        // CUTLASS's epilogue.
        let (aux, all): (Vec<KernelSpec>, Vec<KernelSpec>) =
            all.into_iter().partition(|s| s.fusion.has_aux());
        assert_eq!(aux.len(), catalog::SM90_TILES_AUX.len());
        assert!(aux.iter().all(|x| x.d.ty == DataType::Bf16
            && all.contains(&KernelSpec {
                fusion: crate::Fusion::LinearCombination,
                ..*x
            })));
        // Twenty-three with the fused epilogue, each the twin of a kernel with CUTLASS's.
        let (fused, d): (Vec<KernelSpec>, Vec<KernelSpec>) =
            all.iter().partition(|s| s.fusion.is_fused());
        assert_eq!((fused.len(), d.len()), (23, 55));
        assert!(fused.iter().all(|f| d.contains(&KernelSpec {
            fusion: crate::Fusion::LinearCombination,
            ..*f
        })));
        // The small- and odd-shape kernels: per 16-bit type, five pingpong (64x128 and 64x64 with
        // two cluster shapes each, 64x96 2x1x1), stream-K, four swapped ones (two stream-K, the 64x8 and
        // 64x16 pingpong) and the 128x128, 144- and 176-wide cooperative ones.
        for ty in catalog::SM90_16BIT_INPUTS {
            let small = d
                .iter()
                .filter(|s| {
                    s.a.ty == ty
                        && s.d.align == s.d.ty.tma_alignment()
                        && (s.tile[1] < 256
                            || s.tile[0] == 64
                            || s.tile_scheduler == crate::TileScheduler::StreamK)
                })
                .count();
            assert_eq!(small, 13, "{ty}");
            // And the two kernels for outputs of any alignment.
            let unaligned = d.iter().filter(|s| s.a.ty == ty && s.d.align == 1).count();
            assert_eq!(unaligned, 2, "{ty}");
        }
        // FP8: two blockwise kernels (persistent and stream-K) and thirteen tensor-wise ones, all
        // with the overlapped-promotion main loops (CUTLASS's own kernels are in the gpu-tests
        // preset).
        let blockwise: Vec<&KernelSpec> = d
            .iter()
            .filter(|s| s.a.ty == DataType::E4M3 && s.blockwise.is_some())
            .collect();
        assert_eq!(
            blockwise
                .iter()
                .map(|s| s.tile_scheduler)
                .collect::<Vec<_>>(),
            [
                crate::TileScheduler::Persistent,
                crate::TileScheduler::StreamK
            ]
        );
        assert_eq!(
            d.iter()
                .filter(|s| s.kernel_schedule.mainloop_wrapper().is_some())
                .count(),
            15
        );
        assert!(d
            .iter()
            .filter(|s| s.a.ty == DataType::E4M3)
            .all(|s| s.kernel_schedule.mainloop_wrapper().is_some()));
        // The sliced main loop for the wide cooperative tiles.
        assert_eq!(
            d.iter()
                .filter(|s| s.mainloop_wrapper() != s.kernel_schedule.mainloop_wrapper())
                .map(|s| s.tile)
                .collect::<Vec<_>>(),
            [[128, 192, 128], [128, 256, 128]]
        );
        for ty in catalog::SM90_16BIT_INPUTS {
            let layouts: HashSet<String> = d
                .iter()
                .filter(|s| s.a.ty == ty && s.d.ty == ty)
                .map(KernelSpec::layout_name)
                .collect();
            assert_eq!(layouts.len(), 4, "{ty}");
        }
        assert!(catalog::select(&[Arch::Sm100a], &catalog::NameFilter::parse("")).is_empty());
        // `default` adds the default set to other patterns.
        let more = catalog::select(
            &[Arch::Sm90a],
            &catalog::NameFilter::parse("default,*_e5m2_e5m2_*"),
        );
        assert!(more.len() > d.len());
        assert!(d.iter().all(|s| more.contains(s)));
        assert!(more
            .iter()
            .all(|s| catalog::is_default(s) || s.name().contains("_e5m2_e5m2_")));
        assert_eq!(
            catalog::NameFilter::parse("gpu-tests, x").presets(),
            [Preset::GpuTests]
        );
    }

    #[test]
    fn filters_behave_like_cutlass_library_kernels() {
        let f = catalog::NameFilter::parse("cutlass3x_sm90_*_bf16_bf16_f32_bf16_bf16_*_tnt_*");
        let sel = catalog::select(&[Arch::Sm90a], &f);
        // The base tiles plus the menu's row-major-output (stream-K) kernels and its kernels for
        // unaligned outputs.
        let menu = catalog::SM90_MENU_16BIT
            .iter()
            .chain(catalog::SM90_MENU_16BIT_UNALIGNED_OUTPUT)
            .filter(|m| m.output == crate::Layout::RowMajor)
            .count();
        // The default set's kernels among them come twice: with CUTLASS's epilogue and the fused
        // one (three also with the gated one: the 16-bit tiles of SM90_TILES_GATED).
        let (fused, plain): (Vec<KernelSpec>, Vec<KernelSpec>) = sel
            .iter()
            .filter(|s| {
                !s.kernel_schedule.is_grouped() && !s.fusion.is_gated() && !s.fusion.has_aux()
            })
            .partition(|s| s.fusion.is_fused());
        assert_eq!(
            sel.iter().filter(|s| s.fusion.has_aux()).count(),
            catalog::SM90_TILES_AUX.len()
        );
        let fp8_schedule = |s: &crate::KernelSchedule| {
            matches!(
                s,
                crate::KernelSchedule::TmaWarpSpecializedCooperativeFp8Overlap
                    | crate::KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap
            )
        };
        assert_eq!(
            sel.iter().filter(|s| s.fusion.is_gated()).count(),
            catalog::SM90_TILES_GATED
                .iter()
                .filter(|(_, _, schedule)| !fp8_schedule(schedule))
                .count()
        );
        assert_eq!(plain.len(), catalog::SM90_TILES_16BIT.len() + menu);
        assert_eq!(
            sel.iter()
                .filter(|s| s.kernel_schedule.is_grouped())
                .count(),
            catalog::SM90_TILES_GROUPED_16BIT.len() + catalog::SM90_TILES_GROUPED_16BIT_EXTRA.len()
        );
        assert!(!fused.is_empty());
        assert!(fused.iter().all(|f| plain.contains(&KernelSpec {
            fusion: crate::Fusion::LinearCombination,
            ..*f
        })));
        assert!(sel
            .iter()
            .all(|s| s.layout_name() == "TN" && s.a.ty == DataType::Bf16));
        let sub = catalog::NameFilter::parse("64x128x64, nothing_matches_this");
        let sel = catalog::select(&[Arch::Sm90a], &sub);
        assert!(!sel.is_empty() && sel.iter().all(|s| s.tile == [64, 128, 64]));
        assert!(catalog::glob_match(b"a*c", b"abbbc"));
        assert!(!catalog::glob_match(b"a*c", b"abbbd"));
        assert!(catalog::glob_match(b"a?c*", b"abc"));
        assert!(!catalog::glob_match(b"abc", b"abcd"));
    }

    #[test]
    fn render_rejects_missing_and_unused_values() {
        assert_eq!(
            codegen::render("x${a}y", &[("a", "1".into())]).unwrap(),
            "x1y"
        );
        assert!(codegen::render("x${a}y", &[]).is_err());
        assert!(codegen::render("xy", &[("a", "1".into())]).is_err());
    }

    #[test]
    fn generated_sources_are_complete() {
        for s in catalog::sm90() {
            let src = codegen::kernel_source(&s).unwrap();
            assert!(src.starts_with("// generated, do not edit"));
            assert!(!src.contains("${"));
            if s.kernel_schedule.is_grouped() {
                assert!(src.contains(&format!(
                    "CUTLASS_RS_DEFINE_GROUPED_ENTRY_POINTS({0}, {0}::Gemm)",
                    s.name()
                )));
                assert!(src.contains(&format!("#include \"{}\"", codegen::GROUPED_HEADER_NAME)));
                assert!(src.contains(&format!("{} *", s.a.layout.cpp_type())));
                // Blockwise scales pair each operand's stride with its scale layout.
                assert_eq!(
                    src.contains("cute::tuple<cutlass::layout::RowMajor *, LayoutSFA *>"),
                    s.blockwise.is_some()
                );
                // An overlapped main loop's header, and the tensor-wise one it builds on.
                let mut headers = match s.kernel_schedule.mainloop_wrapper() {
                    Some((_, h)) if h == codegen::SM90_FP8_HEADER_NAME => vec![h],
                    Some((_, h)) => vec![h, codegen::SM90_FP8_HEADER_NAME],
                    None => vec![],
                };
                headers.extend([
                    codegen::GROUPED_HEADER_NAME,
                    codegen::GROUPED_ABI_HEADER_NAME,
                ]);
                assert_eq!(codegen::extra_headers(&s), headers);
                continue;
            }
            if let Some(mx) = s.mixed_input {
                assert!(src.contains(&format!(
                    "CUTLASS_RS_DEFINE_WEIGHT_ONLY_ENTRY_POINTS({0}, {0}::Gemm)",
                    s.name()
                )));
                assert!(src.contains(&format!(
                    "#include \"{}\"",
                    codegen::WEIGHT_ONLY_HEADER_NAME
                )));
                // The weight's element carries its scale (and zero) type: the activations'.
                let wide = s.b.ty.cpp_type();
                let element = if mx.mode.has_zeros() {
                    format!("cute::tuple<{}, {wide}, {wide}>", s.a.ty.cpp_type())
                } else {
                    format!("cute::tuple<{}, {wide}>", s.a.ty.cpp_type())
                };
                assert!(
                    src.contains(&format!("{element}, LayoutNarrow")),
                    "{}",
                    s.name()
                );
                assert!(src.contains(s.tile_scheduler.cpp_type()));
                // A 4-bit weight in the packed order, with the text its sources have always had
                // (their cached objects stay valid); an e4m3 or s8 one as stored.
                let layout = if mx.shuffled {
                    format!(
                        "// The narrow operand (the weight, cutlass::layout::RowMajor n x k) in the packed order of\n// cutlass_rs_weight_layout.hpp.\nusing LayoutNarrow = cutlass_rs::weight::PackedLayout<{wide}>;\n"
                    )
                } else {
                    "using LayoutNarrow = cutlass::layout::RowMajor;\n".to_string()
                };
                assert!(src.contains(&layout), "{}", s.name());
                assert_eq!(mx.shuffled, s.a.ty.bits() == 4, "{}", s.name());
                let mut headers = vec![
                    codegen::WEIGHT_ONLY_HEADER_NAME,
                    codegen::WEIGHT_LAYOUT_HEADER_NAME,
                    codegen::WEIGHT_ONLY_ABI_HEADER_NAME,
                ];
                // The fused twins also include the fused epilogue's header (and its
                // activations').
                if s.fusion.is_fused() {
                    headers.splice(
                        0..0,
                        [
                            codegen::EPILOGUE_HEADER_NAME,
                            codegen::ACTIVATION_HEADER_NAME,
                        ],
                    );
                    assert!(
                        src.contains(&format!("#include \"{}\"", codegen::EPILOGUE_HEADER_NAME))
                    );
                    assert!(src.contains("FusionCallbacks>::CollectiveOp"));
                }
                assert_eq!(codegen::extra_headers(&s), headers);
                continue;
            }
            let entry = match s.blockwise {
                Some(_) => format!(
                    "CUTLASS_RS_DEFINE_SCALED_ENTRY_POINTS({0}, {0}::Gemm, {0}::ScaleConfig)",
                    s.name()
                ),
                None => format!("CUTLASS_RS_DEFINE_ENTRY_POINTS({0}, {0}::Gemm)", s.name()),
            };
            assert!(src.contains(&entry), "{}", s.name());
            // CUTLASS's kernels use the builder's mainloop as it is (their sources, and so their
            // cached objects, do not change when this crate adds mainloops of its own); this
            // crate's schedules wrap it and include the wrapper's header, which is part of the
            // object's cache key.
            // The fused epilogue's header likewise.
            assert_eq!(
                src.contains(&format!("#include \"{}\"", codegen::EPILOGUE_HEADER_NAME)),
                s.fusion.is_fused()
            );
            assert_eq!(
                codegen::extra_headers(&s).contains(&codegen::EPILOGUE_HEADER_NAME),
                s.fusion.is_fused() || s.fusion.has_aux()
            );
            assert_eq!(
                src.contains("FusionCallbacks>::CollectiveOp;"),
                s.fusion.is_fused()
            );
            // The auxiliary output's header, which includes the fused epilogue's (for its
            // activations chosen at run time).
            assert_eq!(
                src.contains(&format!(
                    "#include \"{}\"",
                    codegen::AUX_EPILOGUE_HEADER_NAME
                )),
                s.fusion.has_aux()
            );
            if s.fusion.has_aux() {
                assert!(src.contains("cutlass_rs::BiasActivationAuxFusion<"));
                assert_eq!(
                    codegen::extra_headers(&s),
                    [
                        codegen::AUX_EPILOGUE_HEADER_NAME,
                        codegen::EPILOGUE_HEADER_NAME,
                        codegen::ACTIVATION_HEADER_NAME
                    ]
                );
            }
            match s.mainloop_wrapper() {
                None if s.fusion == crate::Fusion::LinearCombination => {
                    assert!(src.contains(&format!(
                        "#include \"cutlass_rs_shim.hpp\"\n\nnamespace {} {{",
                        s.name()
                    )));
                    assert!(src.contains("Shape<int, int, int, int>, CollectiveMainloop,"));
                    assert!(codegen::extra_headers(&s).is_empty());
                }
                None => {}
                Some((wrapper, header)) => {
                    assert!(src.contains(&format!("#include \"{header}\"")));
                    assert!(src.contains(&format!("{wrapper}<CollectiveMainloop>")));
                    assert_eq!(codegen::extra_headers(&s)[0], header);
                }
            }
        }
        let specs = catalog::all();
        let h = codegen::header(&specs).unwrap();
        assert!(h.contains(&format!("int {}_run(", specs[0].name())));
        let r = codegen::registry(&specs, 40200, true).unwrap();
        assert!(!r.contains("NOT_BUILT"));
        assert!(codegen::registry(&[], 0, false)
            .unwrap()
            .contains("CUTLASS_RS_ERROR_NOT_BUILT"));
        // Grouped kernels have a registry of their own (their entry points take other arguments).
        let grouped: Vec<&KernelSpec> = specs
            .iter()
            .filter(|s| s.kernel_schedule.is_grouped())
            .collect();
        assert!(!grouped.is_empty());
        // So have the weight-only kernels.
        let weight_only: Vec<&KernelSpec> =
            specs.iter().filter(|s| s.mixed_input.is_some()).collect();
        assert!(!weight_only.is_empty());
        assert!(r.contains(&format!(
            "static const int64_t kCount = {};",
            specs.len() - grouped.len() - weight_only.len()
        )));
        assert!(r.contains(&format!(
            "static const int64_t kWeightOnlyCount = {};",
            weight_only.len()
        )));
        assert!(h.contains(&format!(
            "int {}_run(const cutlass_rs_weight_only_args *args",
            weight_only[0].name()
        )));
        assert!(r.contains(&format!(
            "static const int64_t kGroupedCount = {};",
            grouped.len()
        )));
        assert!(h.contains(&format!(
            "int {}_run(const cutlass_rs_grouped_args *args",
            grouped[0].name()
        )));
    }

    #[test]
    fn sm1xx_entries_follow_the_seed() {
        let entries = catalog::sm1xx();
        let mut per_arch = std::collections::BTreeMap::new();
        for s in &entries {
            *per_arch.entry(s.arch.tag()).or_insert(0usize) += 1;
            let o = s
                .origin
                .expect("SM100/SM120 entries record their seed rows");
            let row = tables::type_row(o.type_table, o.type_row).unwrap();
            // Alignment and layout obey the type row.
            assert_eq!(
                s.a.align,
                row.align_a.for_layout(s.a.layout),
                "{}",
                s.name()
            );
            assert_eq!(s.b.align, row.align_b, "{}", s.name());
            assert!(
                row.layouts().contains(&(s.a.layout, s.b.layout)),
                "{}",
                s.name()
            );
            assert!(row.type_pairs().contains(&(s.a.ty, s.b.ty)), "{}", s.name());
            // And the tile table allows the tile in this layout.
            let table = tile_tables::TILE_TABLES
                .iter()
                .find(|t| t.table == o.tile_table)
                .unwrap();
            let sparse = s.op_class.is_sparse();
            assert_eq!(sparse, row.sparse, "{}", s.name());
            assert_eq!(sparse, s.kernel_schedule.is_sparse(), "{}", s.name());
            assert!(
                table.rows.iter().any(|r| r.sparse == sparse
                    && r.m == s.tile[0]
                    && r.n == s.tile[1]
                    && r.allows(s.a.layout, s.b.layout)),
                "{}",
                s.name()
            );
        }
        assert!(per_arch["100a"] > 0 && per_arch["120a"] > 0, "{per_arch:?}");
        // Every type row, dense and sparse, is represented in each of its layouts.
        for r in tables::TABLE_1
            .iter()
            .chain(tables::TABLE_2)
            .chain(tables::TABLE_3)
        {
            for &(la, lb) in r.layouts() {
                assert!(
                    entries.iter().any(|s| {
                        let o = s.origin.unwrap();
                        (o.type_table, o.type_row) == (r.table, r.row)
                            && (s.a.layout, s.b.layout) == (la, lb)
                    }),
                    "Table {} row {} has no entry in {la:?}/{lb:?}",
                    r.table,
                    r.row
                );
            }
        }
        // Every row of every tile table, dense and sparse, is represented.
        for t in tile_tables::TILE_TABLES {
            for r in t.rows.iter() {
                assert!(
                    entries
                        .iter()
                        .any(|s| s.origin.unwrap().tile_table == t.table
                            && s.op_class.is_sparse() == r.sparse
                            && s.tile[0] == r.m
                            && s.tile[1] == r.n
                            && r.policies.contains(&s.kernel_schedule.policy())),
                    "table {} row {}x{} has no entry",
                    t.table,
                    r.m,
                    r.n
                );
            }
        }
    }

    #[test]
    fn n_cells_and_wrong_alignments_are_rejected_with_the_rule() {
        // Table 5 row 64x64x128 (1SM) allows TN only for {float4,float6} x {float4,float6}.
        let ok = catalog::sm1xx()
            .into_iter()
            .find(|s| s.origin.unwrap().tile_table == 5 && s.tile[0] == 64 && s.tile[1] == 64)
            .unwrap();
        ok.validate().unwrap();
        let mut nt = ok;
        nt.a.layout = Layout::ColumnMajor;
        nt.b.layout = Layout::RowMajor;
        let e = nt.validate().unwrap_err();
        assert!(e.contains("tile table 5") && e.contains(" N for NT"), "{e}");
        let mut misaligned = ok;
        misaligned.a.align = 32;
        assert!(misaligned
            .validate()
            .unwrap_err()
            .contains("needs alignments 128"));
        let mut wrong_types = ok;
        wrong_types.a.ty = DataType::F16;
        assert!(wrong_types.validate().is_err());
        // An SM120 entry in NN: Table 16 is TN-only and so is SM120.
        let sm120 = catalog::sm1xx()
            .into_iter()
            .find(|s| s.arch == Arch::Sm120a)
            .unwrap();
        let mut nn = sm120;
        nn.a.layout = Layout::ColumnMajor;
        assert!(nn.validate().is_err());
    }

    #[test]
    fn block_scaled_output_entries_mirror_the_seed_walkthrough() {
        let e = catalog::sm100_block_scaled_outputs();
        assert_eq!(e.len(), 2);
        let w = e[0];
        w.validate().unwrap();
        // mx_float4_t x mx_float4_t, NT, 256x256x128, 2SM mxf8f6f4 policy, cluster 4x4x1,
        // C f16, D e2m1 with ue4m3 per 16.
        assert_eq!((w.a.ty, w.b.ty), (DataType::E2M1, DataType::E2M1));
        assert_eq!(
            w.block_scale.map(|b| (b.sf, b.vec)),
            Some((DataType::UE8M0, 32))
        );
        assert_eq!(w.layout_name(), "NT");
        assert_eq!((w.tile, w.cluster), ([256, 256, 128], [4, 4, 1]));
        assert_eq!(
            w.kernel_schedule.policy(),
            "KernelTmaWarpSpecialized2SmMxf8f6f4Sm100"
        );
        assert_eq!((w.c.ty, w.d.ty), (DataType::F16, DataType::E2M1));
        assert_eq!((w.a.align, w.b.align, w.d.align), (128, 128, 32));
        assert_eq!(
            w.output_scale.map(|o| (o.sf, o.vec)),
            Some((DataType::UE4M3, 16))
        );
        assert!(w.name().ends_with("_epiVs16t"));
        e[1].validate().unwrap();
        let src = codegen::kernel_source(&w).unwrap();
        assert!(src.contains("LinCombBlockScaleFactor<\n    16, cutlass::float_e2m1_t"));
        assert!(src.contains("FusionOperation>::CollectiveOp"));
        // The rules: an output scale needs a block-scaled kernel and a narrow D.
        let mut wide = w;
        wide.d = Operand::tma(DataType::F16, Layout::RowMajor);
        assert!(wide.validate().unwrap_err().contains("block-scaled output"));
        let mut sm90 = catalog::sm90()[0];
        sm90.output_scale = w.output_scale;
        assert!(sm90.validate().is_err());
        // Names stay unique across the whole catalog.
        let all = catalog::all();
        let names: HashSet<String> = all.iter().map(KernelSpec::name).collect();
        assert_eq!(names.len(), all.len());
    }

    #[test]
    fn translation_units_partition_the_kernels_by_their_macros() {
        let all = catalog::all();
        // The grouping key is complete: a source defines exactly the macros of
        // `codegen::macro_definitions` (with `codegen::macros`' comments), before CUTLASS's first
        // header, and declares its types in a namespace of its own name.
        let defines = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| l.starts_with("#define"))
                .map(str::to_owned)
                .collect()
        };
        let mut with_macros = 0;
        for s in &all {
            let src = codegen::kernel_source(s).unwrap();
            let macros = codegen::macros(s);
            assert_eq!(defines(&src), codegen::macro_definitions(s), "{}", s.name());
            assert_eq!(defines(&macros), codegen::macro_definitions(s));
            assert!(src.contains(&format!("{macros}#include \"cutlass/cutlass.h\"")));
            assert!(src.contains(&format!("\nnamespace {} {{\n", s.name())));
            assert_eq!(src.matches("\nnamespace ").count(), 1, "{}", s.name());
            with_macros += usize::from(!macros.is_empty());
        }
        assert!(with_macros > 0 && with_macros < all.len());
        let default = families::select_families(&[Arch::Sm90a], &families::Family::DEFAULT);
        assert!(default.len() > 50);
        for (specs, max) in [
            (&all, 6),
            (&default, 6),
            (&default, 1),
            (&default, 4),
            (&all, 0),
        ] {
            let units = codegen::translation_units(specs, max);
            let max = max.max(1);
            // Every kernel exactly once, no unit empty or over the bound.
            let mut seen: Vec<String> = units
                .iter()
                .flat_map(|u| u.kernels.iter().map(KernelSpec::name))
                .collect();
            seen.sort();
            let mut want: Vec<String> = specs.iter().map(KernelSpec::name).collect();
            want.sort();
            assert_eq!(seen, want);
            let mut sizes: std::collections::HashMap<(Arch, Vec<&str>), Vec<usize>> =
                std::collections::HashMap::new();
            for u in &units {
                assert!(!u.kernels.is_empty() && u.kernels.len() <= max);
                // One architecture and one set of macros per unit, its kernels in name order.
                let k = &u.kernels[0];
                let class = (k.arch, codegen::macro_definitions(k));
                assert!(u
                    .kernels
                    .iter()
                    .all(|s| (s.arch, codegen::macro_definitions(s)) == class));
                assert!(u.kernels.windows(2).all(|w| w[0].name() < w[1].name()));
                sizes.entry(class).or_default().push(u.kernels.len());
                if u.kernels.len() == 1 {
                    assert_eq!(u.file_name(), format!("{}.cu", k.name()));
                } else {
                    let src = u.source();
                    assert!(src.starts_with("// generated, do not edit"));
                    let includes: Vec<String> = u
                        .kernels
                        .iter()
                        .map(|s| format!("#include \"{}.cu\"", s.name()))
                        .collect();
                    assert_eq!(
                        src.lines()
                            .filter(|l| l.starts_with("#include"))
                            .collect::<Vec<_>>(),
                        includes
                    );
                    assert!(u.file_name().ends_with(".unit.cu"));
                    assert!(u.name().starts_with(&k.name()));
                }
            }
            // As few units as the bound allows, as even as the count allows.
            for v in sizes.values() {
                let n: usize = v.iter().sum();
                assert_eq!(v.len(), n.div_ceil(max));
                assert!(v.iter().max().unwrap() - v.iter().min().unwrap() <= 1);
            }
            if max == 1 {
                assert_eq!(units.len(), specs.len());
            }
        }
        // Adding a kernel changes only the units of its class.
        let units = codegen::translation_units(&default, 6);
        let extra = all
            .iter()
            .find(|s| {
                !default.contains(s)
                    && s.arch == Arch::Sm90a
                    && !codegen::macro_definitions(s).is_empty()
            })
            .copied()
            .unwrap();
        let mut more = default.clone();
        more.push(extra);
        let after = codegen::translation_units(&more, 6);
        let class = |s: &KernelSpec| (s.arch, codegen::macro_definitions(s));
        for u in units
            .iter()
            .filter(|u| class(&u.kernels[0]) != class(&extra))
        {
            assert!(after.contains(u), "{}", u.name());
        }
    }

    #[test]
    fn grid_dependency_control_is_compiled_into_exactly_the_kernels_that_support_it() {
        const GDC: &str = "#define CUTLASS_ENABLE_GDC_FOR_SM90 1";
        let all = catalog::all();
        let mut seen = [0usize; 2];
        for s in &all {
            let src = codegen::kernel_source(s).unwrap();
            let on = s.supports_programmatic_dependent_launch();
            assert_eq!(src.contains(GDC), on, "{}", s.name());
            // Defined before CUTLASS's headers, which read it.
            if on {
                assert!(src.find(GDC) < src.find("#include \"cutlass/cutlass.h\""));
            }
            seen[usize::from(on)] += 1;
        }
        assert!(seen[0] > 0 && seen[1] > 0);
        // The rule, by kind: SM90 data-parallel kernels, cooperative or pingpong, CUTLASS's
        // mainloops and this crate's; not stream-K, blockwise scales or SM100/SM120.
        let has = |f: &dyn Fn(&KernelSpec) -> bool| -> Vec<bool> {
            let mut v: Vec<bool> = all
                .iter()
                .filter(|s| f(s))
                .map(KernelSpec::supports_programmatic_dependent_launch)
                .collect();
            v.dedup();
            v
        };
        assert_eq!(
            has(&|s| s.arch == Arch::Sm90a
                && s.tile_scheduler == TileScheduler::Persistent
                && s.blockwise.is_none()
                && !s.kernel_schedule.is_grouped()
                && s.mixed_input.is_none()),
            [true]
        );
        assert_eq!(has(&|s| s.kernel_schedule.is_grouped()), [false]);
        assert_eq!(has(&|s| s.mixed_input.is_some()), [false]);
        assert_eq!(
            has(&|s| s.tile_scheduler == TileScheduler::StreamK),
            [false]
        );
        assert_eq!(has(&|s| s.blockwise.is_some()), [false]);
        assert_eq!(has(&|s| s.arch != Arch::Sm90a), [false]);
        assert!(all
            .iter()
            .any(|s| s.uses_sliced_promotion() && s.supports_programmatic_dependent_launch()));
        assert!(all.iter().any(|s| s.kernel_schedule
            == KernelSchedule::TmaWarpSpecializedPingpongFp8Overlap
            && s.supports_programmatic_dependent_launch()));
    }

    #[test]
    fn arch_parsing_and_capabilities() {
        assert_eq!(Arch::parse("90a"), Some(Arch::Sm90a));
        assert_eq!(Arch::parse("sm_100a"), Some(Arch::Sm100a));
        assert_eq!(Arch::parse("120"), Some(Arch::Sm120a));
        assert_eq!(Arch::parse("80"), None);
        assert!(Arch::Sm90a.runs_on((9, 0)));
        assert!(!Arch::Sm90a.runs_on((10, 0)));
        assert!(!Arch::Sm100a.runs_on((9, 0)));
    }
}
