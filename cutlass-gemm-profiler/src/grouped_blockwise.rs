//! `cutlass-profiler profile --grouped --types fp8bw`: the grouped FP8 blockwise GEMM
//! ([`GroupedBlockwiseGemm`]: e4m3, 1x128 scales of A, 128x128 of each expert's weight, bf16 out)
//! against two per-expert loops in the same process, kernel against kernel:
//!
//! - cuBLASLt's blockwise GEMM (`VEC128_32F` / `BLK128x128_32F` scales), one launch per expert with
//!   rows (no loop where cuBLASLt has no algorithm for some expert's rows);
//! - this crate's own [`BlockwiseGemm`], one launch per expert: the grouped kernel's result is
//!   checked against this loop's (all scales 1, so both compute the same products).
//!
//! On the mixture-of-experts layers of [`crate::grouped`], and on DeepGEMM's published grouped
//! shapes (its README at commit 327ec92, H800 SXM5, NVCC 12.8: the contiguous layout with 4 or 8
//! groups of 8192 or 4096 rows, the masked layout with 1, 2 or 4 groups of 1024, 512 or 256), each
//! printed with DeepGEMM's TFLOP/s beside ours.

use std::collections::HashMap;

use anyhow::{anyhow, Result};
use cudarc::driver::{CudaSlice, DevicePtr};
use cutlass_gemm::numeric::E4M3;
use cutlass_gemm::{
    BlockwiseGemm, GemmProblem, GroupedBlockwiseGemm, GroupedInputs, GroupedProblem, Workspace,
};
use half::bf16;

use crate::args::KernelMode;
use crate::cublas::{LtEpilogue, LtMatmul, LtScales};
use crate::device::Device;
use crate::grouped::{
    candidates, duel, fill, offsets, route, to_pair, Measured, MoeModel, Routing, Row,
};
use crate::kind::Kind;
use crate::timing::rel_diff;

/// DeepGEMM's grouped shapes with its H800 TFLOP/s (README, commit 327ec92, 2025-04-09):
/// (masked layout, groups, rows per group, n, k, TFLOP/s).
pub const DEEPGEMM: [(bool, usize, usize, usize, usize, f64); 10] = [
    (false, 4, 8192, 4096, 7168, 1346.0),
    (false, 4, 8192, 7168, 2048, 1214.0),
    (false, 8, 4096, 4096, 7168, 1346.0),
    (false, 8, 4096, 7168, 2048, 1214.0),
    (true, 1, 1024, 4096, 7168, 1233.0),
    (true, 1, 1024, 7168, 2048, 925.0),
    (true, 2, 512, 4096, 7168, 1040.0),
    (true, 2, 512, 7168, 2048, 916.0),
    (true, 4, 256, 4096, 7168, 932.0),
    (true, 4, 256, 7168, 2048, 815.0),
];

/// One model's expert layer (`gemm`, `n x k` weights) at every token count and routing.
pub fn model_cases(
    dev: &Device,
    model: &MoeModel,
    gemm: &'static str,
    (n, k): (usize, usize),
    rounds: usize,
    mode: &KernelMode,
    steps: &[usize],
) -> Result<Vec<Row>> {
    let mut out = Measured { rows: Vec::new() };
    let mut bench = Bench::new(dev, model.experts, n, k)?;
    for routing in [Routing::Uniform, Routing::Skewed] {
        for &tokens in steps {
            let per_expert = route(model, tokens, routing, 17 + tokens as u64);
            let case = Case {
                model: model.name,
                gemm,
                tokens,
                routing,
                masked: false,
            };
            bench.measure(&case, &per_expert, rounds, mode, &mut out)?;
        }
    }
    Ok(out.rows)
}

/// DeepGEMM's grouped shapes ([`DEEPGEMM`]), the library's choice of kernel, printed beside
/// DeepGEMM's H800 numbers.
pub fn deepgemm_cases(dev: &Device, rounds: usize, mode: &KernelMode) -> Result<Vec<Row>> {
    let mut out = Measured { rows: Vec::new() };
    println!();
    println!("DeepGEMM's grouped shapes (its README, H800; ours on this device):");
    for (masked, groups, m, n, k, theirs) in DEEPGEMM {
        let mut bench = Bench::new(dev, groups, n, k)?;
        let case = Case {
            model: if masked {
                "deepgemm-mask"
            } else {
                "deepgemm-cont"
            },
            gemm: if n == 4096 { "up" } else { "down" },
            tokens: groups * m,
            routing: Routing::Even,
            masked,
        };
        let first = out.rows.len();
        bench.measure(&case, &vec![m; groups], rounds, mode, &mut out)?;
        for r in out.rows[first..].iter().filter(|r| r.chosen) {
            println!(
                "  {} groups x {m} rows, n {n}, k {k}, {}: ours {:.0} TFLOP/s, DeepGEMM (H800) {theirs:.0} TFLOP/s, ratio {:.3}",
                groups,
                if masked { "masked" } else { "contiguous" },
                r.flops / r.ours / 1e12,
                r.flops / r.ours / 1e12 / theirs
            );
        }
    }
    Ok(out.rows)
}

/// What a measured case is called in the rows.
struct Case {
    model: &'static str,
    gemm: &'static str,
    tokens: usize,
    routing: Routing,
    masked: bool,
}

/// The weights of one layer and the per-shape plans of both loops, kept across token counts.
struct Bench<'d> {
    dev: &'d Device,
    groups: usize,
    n: usize,
    k: usize,
    weights: CudaSlice<E4M3>,
    /// All ones: the weights' scales (grouped and per expert) and A's.
    ones: CudaSlice<f32>,
    lts: HashMap<usize, Option<LtMatmul>>,
    own: HashMap<usize, BlockwiseGemm<E4M3, E4M3, bf16>>,
}

impl<'d> Bench<'d> {
    fn new(dev: &'d Device, groups: usize, n: usize, k: usize) -> Result<Self> {
        let stream = &dev.stream;
        Ok(Bench {
            dev,
            groups,
            n,
            k,
            weights: fill(stream, groups * n * k, 7)?,
            ones: stream.clone_htod(&[1.0f32])?,
            lts: HashMap::new(),
            own: HashMap::new(),
        })
    }

    /// At least `len` ones.
    fn ones(&mut self, len: usize) -> Result<()> {
        if self.ones.len() < len {
            self.ones = self.dev.stream.clone_htod(&vec![1.0f32; len])?;
        }
        Ok(())
    }

    fn measure(
        &mut self,
        case: &Case,
        per_expert: &[usize],
        rounds: usize,
        mode: &KernelMode,
        out: &mut Measured,
    ) -> Result<()> {
        let (dev, stream) = (self.dev, &self.dev.stream);
        let (groups, n, k) = (self.groups, self.n, self.k);
        let rows: usize = per_expert.iter().sum();
        // Masked: each group's rows at the start of its slot of `capacity` rows.
        let capacity = per_expert.iter().copied().max().unwrap_or(1).max(1);
        let (problem, group_rows, slot) = if case.masked {
            let counts: Vec<i32> = per_expert.iter().map(|&m| m as i32).collect();
            (
                GroupedProblem::masked(groups, capacity, n, k),
                counts,
                capacity,
            )
        } else {
            (
                GroupedProblem::contiguous(groups, rows, n, k),
                offsets(per_expert),
                0,
            )
        };
        let start = |e: usize| {
            if case.masked {
                e * slot
            } else {
                group_rows[e] as usize
            }
        };
        let a_rows = problem.a_len() / k;
        let a: CudaSlice<E4M3> = fill(stream, a_rows * k, 11)?;
        let mut d_ours = stream.alloc_zeros::<bf16>(problem.d_len())?;
        let d_loop = stream.alloc_zeros::<bf16>(problem.d_len())?;
        let d_own = stream.alloc_zeros::<bf16>(problem.d_len())?;
        let chosen = GroupedBlockwiseGemm::<bf16>::plan(dev.info, &problem, None)?.kernel_name();
        let flops = 2.0 * rows as f64 * n as f64 * k as f64;
        // Both loops' plans and the scales they read.
        let mut own_ws = 0;
        for &m in per_expert.iter().filter(|&&m| m > 0) {
            if let std::collections::hash_map::Entry::Vacant(v) = self.lts.entry(m) {
                let e4m3 = cudarc::cublaslt::sys::cudaDataType_t::CUDA_R_8F_E4M3;
                let scales = LtScales::Blockwise;
                v.insert(LtMatmul::new(dev, (m, n, k), e4m3, LtEpilogue::None, 0, scales).ok());
            }
            if let std::collections::hash_map::Entry::Vacant(v) = self.own.entry(m) {
                v.insert(BlockwiseGemm::plan(
                    dev.info,
                    &GemmProblem::new(m, n, k),
                    None,
                )?);
            }
            let plan = &self.own[&m];
            own_ws = own_ws.max(plan.plan_inner().workspace_size());
            let (sa, sb) = plan.scale_lens();
            self.ones(sa.max(sb))?;
        }
        let plan = GroupedBlockwiseGemm::<bf16>::plan(dev.info, &problem, None)?;
        let (sa, sb) = plan.scale_lens();
        self.ones(sa.max(sb))?;
        let own_ws_buf = stream.alloc_zeros::<u8>(own_ws.max(1))?;
        let (pa, pw, pones) = (
            a.device_ptr(stream).0,
            self.weights.device_ptr(stream).0,
            self.ones.device_ptr(stream).0,
        );
        let (pl, po, pws) = (
            d_loop.device_ptr(stream).0,
            d_own.device_ptr(stream).0,
            own_ws_buf.device_ptr(stream).0,
        );
        let live: Vec<(usize, usize)> = (0..groups)
            .filter(|&e| per_expert[e] > 0)
            .map(|e| (e, per_expert[e]))
            .collect();
        let lt_ok = live.iter().all(|(_, m)| self.lts[m].is_some());
        let lts = &mut self.lts;
        let mut lt_loop = || -> Result<()> {
            for &(e, m) in &live {
                let s = start(e) as u64;
                let lt = lts.get_mut(&m).and_then(Option::as_mut).expect("checked");
                lt.run(
                    stream,
                    pa + s * k as u64,
                    pw + (e * n * k) as u64,
                    pl + s * n as u64 * 2,
                )?;
            }
            Ok(())
        };
        let own = &self.own;
        let mut own_loop = || -> Result<()> {
            for &(e, m) in &live {
                let s = start(e) as u64;
                // SAFETY: A's rows of the group, the expert's weight and D's rows lie inside
                // their buffers; the scales are ones of at least the plan's counts; the workspace
                // holds every plan's.
                unsafe {
                    own[&m].run_raw(
                        pa + s * k as u64,
                        pones,
                        pw + (e * n * k) as u64,
                        pones,
                        None,
                        po + s * n as u64 * 2,
                        pws,
                        own_ws,
                        stream.cu_stream(),
                    )
                }?;
            }
            Ok(())
        };
        let mut t_lt = None;
        for candidate in candidates(&dev.info, mode, cutlass_gemm::DataType::E4M3, true) {
            let plan = GroupedBlockwiseGemm::<bf16>::plan(dev.info, &problem, candidate)?;
            let group_rows = plan.upload_group_rows(stream, &group_rows)?;
            let mut ws = stream.alloc_zeros::<u8>(plan.workspace_size().max(1))?;
            let ones = &self.ones;
            let mut ours = || -> Result<()> {
                plan.run(
                    stream,
                    &GroupedInputs::new(&a, &self.weights, &group_rows),
                    ones,
                    ones,
                    &mut d_ours,
                    Workspace::Buffer(&mut ws),
                )?;
                Ok(())
            };
            // cuBLASLt's loop once per case (like cuBLAS's grouped GEMM in crate::grouped).
            if lt_ok && t_lt.is_none() {
                t_lt = Some(duel(dev, flops, rounds, &mut ours, &mut lt_loop)?.1);
            }
            let (t_ours, t_own) = duel(dev, flops, rounds, &mut ours, &mut own_loop)?;
            stream.synchronize()?;
            // Only the groups' rows: the masked layout leaves the rest of each slot.
            let (o, l) = to_pair(stream, &d_ours, &d_own)?;
            let pick = |v: &[f64]| -> Vec<f64> {
                live.iter()
                    .flat_map(|&(e, m)| v[start(e) * n..(start(e) + m) * n].to_vec())
                    .collect()
            };
            let diff = rel_diff(&pick(&o), &pick(&l));
            if lt_ok {
                let (_, lt) = to_pair(stream, &d_ours, &d_loop)?;
                if rel_diff(&pick(&lt), &pick(&l)) > 1e-2 {
                    return Err(anyhow!("cuBLASLt's blockwise loop disagrees with ours"));
                }
            }
            out.push(Row {
                model: case.model,
                gemm: case.gemm,
                tokens: case.tokens,
                routing: case.routing,
                kind: Kind::Fp8Blockwise,
                kernel: plan.kernel_name().to_string(),
                chosen: plan.kernel_name() == chosen,
                ours: t_ours,
                looped: t_lt,
                grouped_cublas: None,
                own_loop: Some(t_own),
                flops,
                diff,
            })?;
        }
        Ok(())
    }
}
