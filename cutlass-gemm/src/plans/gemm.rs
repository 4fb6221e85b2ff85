//! Planned GEMMs: resolve once ([`Gemm::new`]), launch many times ([`Gemm::run`]).

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{sys, CudaContext, CudaStream, DevicePtr, DevicePtrMut};
use cutlass_gemm_catalog::{KernelSpec, Layout};
use cutlass_gemm_sys::cutlass_rs_gemm_args;

use crate::error::{
    require_device, require_len, require_ordinal, AuxRule, Error, Extent, GemvRule, KernelRule,
    LayoutPairs, LayoutRule, OperandName, ProblemRule, Quantity, Result, Scalar, SplitKRule,
};
use crate::ffi::{DeviceInfo, Kernel, ScheduleHints, StagingCopy, BLOCKWISE_GEMV, DENSE_GEMV};
use crate::formats::element::Element;
use crate::plans::epilogue::{BiasAxis, BiasElement, Epilogue, EpilogueOperands};
use crate::plans::problem::{GemmProblem, ResolvedMatrix};
use crate::plans::staging::{self, Slot, StagingPlan, STAGING_ALIGNMENT};
use crate::selection::heuristic;
use crate::selection::{select, ArchPolicy};

/// TMA needs 16-byte aligned global addresses.
pub(crate) const POINTER_ALIGNMENT: u64 = 16;
/// TMA strides must stay below 2^40 bytes.
pub(crate) const MAX_STRIDE_BYTES: u128 = 1 << 40;

/// Where the kernel's scratch memory comes from.
pub enum Workspace<'a> {
    /// Allocated on the stream for each launch that needs it (most kernels need none).
    Managed,
    /// A caller-owned buffer of at least [`Gemm::workspace_size`] bytes.
    Buffer(&'a mut dyn DevicePtrMut<u8>),
}

/// How A and B are scaled beyond alpha.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scaling {
    /// Plain or tensor-wise (folded into alpha).
    None,
    /// Blockwise f32 scales of A and B (SM90 FP8 blockwise kernels).
    Blockwise,
}

/// Where C comes from.
enum Source<'a, T> {
    None,
    Buffer(&'a dyn DevicePtr<T>),
    D,
}

impl<'a, T> From<Option<&'a dyn DevicePtr<T>>> for Source<'a, T> {
    fn from(c: Option<&'a dyn DevicePtr<T>>) -> Self {
        c.map_or(Source::None, Source::Buffer)
    }
}

/// One operand as the kernel sees it, and which user operand it is.
#[derive(Clone, Copy, Debug)]
struct KernelOperand {
    user: OperandName,
    m: ResolvedMatrix,
}

/// Up to this many tokens (rows of A and D) an FP8 blockwise plan runs on the decode GEMV
/// ([`BLOCKWISE_GEMV`]) rather than a CUTLASS kernel, where the GEMV takes the problem (it takes up
/// to 32 named). Fitted on an H200 with both kinds timed on the decode shapes of
/// `bench/shapes-broad.tsv` (`docs/performance.md`): at 8 tokens the GEMV ran faster than the
/// better CUTLASS kernel on every shape (1.2–2.3x on weights of a few thousand rows), at 16 on
/// fewer than half (0.75–0.9x on the large weights, where its second group of 8 tokens doubles
/// the MMAs and X's conversions per byte of weight).
pub const BLOCKWISE_GEMV_TOKENS: usize = 8;

/// Up to this many tokens, and on weights of at most [`DENSE_GEMV_MAX_WEIGHT`] elements, a bf16 or
/// f16 plan of a linear layer's orientation (A row-major, B column-major, D row-major) runs on the
/// 16-bit decode GEMV ([`DENSE_GEMV`]) rather than a CUTLASS kernel, where the GEMV takes the
/// problem (it takes up to 32 tokens and any weight named). Fitted on an H200 with both kinds timed
/// on the broad set's shapes of 1 to 32 tokens (`docs/performance.md`): the CUTLASS swapped tiles
/// stream large weights at 92-104 % of the copy bandwidth where the GEMV reaches 82-92 %, and from
/// 16 tokens they win on most shapes; on small weights at 1 to 8 tokens the GEMV ran 1.0-1.5x
/// them.
pub const DENSE_GEMV_TOKENS: usize = 8;

/// The largest weight (n · k elements) the library gives the 16-bit decode GEMV
/// ([`DENSE_GEMV_TOKENS`]): 2^25. Fitted on Llama-2-7B, Mistral-7B, Qwen2.5-7B and GPT-2 (the GEMV
/// won up to Mistral-7B's 25 M-element qkv layer, lost from Llama-2-7B's 45 M-element down layer);
/// on the held-out families it took 9 shapes of 1 and 8 tokens, and ran 0.99-1.5x the CUTLASS
/// kernel there.
pub const DENSE_GEMV_MAX_WEIGHT: usize = 1 << 25;

/// A hand-written decode GEMV that runs a plan instead of its CUTLASS kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gemv {
    /// FP8 blockwise ([`BLOCKWISE_GEMV`]).
    Blockwise,
    /// bf16 or f16 ([`DENSE_GEMV`]).
    Dense,
}

impl Gemv {
    fn name(self) -> &'static str {
        match self {
            Gemv::Blockwise => BLOCKWISE_GEMV,
            Gemv::Dense => DENSE_GEMV,
        }
    }

    fn mismatch(self, rule: GemvRule) -> Error {
        Error::KernelMismatch {
            name: self.name().into(),
            reason: match self {
                Gemv::Blockwise => KernelRule::BlockwiseGemv { rule },
                Gemv::Dense => KernelRule::DenseGemv { rule },
            },
        }
    }
}

/// A GEMM resolved for one device, problem and element types: the kernel is chosen and every
/// shape-level rule is checked. [`Gemm::run`] then checks the buffers and launches.
///
/// `TA` and `TB` are the input element types, `TD` the type of C and D.
pub struct Gemm<TA: Element, TB: Element, TD: Element> {
    problem: GemmProblem,
    device: DeviceInfo,
    kernel: Kernel,
    /// The user's D is column-major: the kernel computes Dᵀ = Bᵀ·Aᵀ with A and B exchanged.
    swapped: bool,
    /// Kernel-side A, B, C, D.
    ops: [KernelOperand; 4],
    /// User-side geometry of A, B, C, D.
    user: [ResolvedMatrix; 4],
    /// Operands served through padded copies in the workspace ([`staging`]).
    staging: StagingPlan,
    /// Bytes of the kernel's own workspace (the staging area follows it).
    kernel_workspace: usize,
    workspace_size: usize,
    scaling: Scaling,
    schedule: ScheduleHints,
    /// Launch with programmatic dependent launch where the kernel supports it.
    dependent_launch: bool,
    /// The fused epilogue ([`Gemm::with_epilogue`]).
    epilogue: Epilogue,
    /// The epilogue runs as a separate pass over D after the plain kernel
    /// ([`Gemm::epilogue_is_separate`]).
    separate_epilogue: bool,
    /// The kernel was named by the caller (re-planning keeps it).
    pinned: bool,
    /// Bytes of the staged epilogue vectors (after the operands' staging area).
    vector_bytes: usize,
    /// A decode GEMV runs the plan instead of `kernel` (the CUTLASS kernel the plan would take
    /// without it).
    gemv: Option<Gemv>,
    /// Split-K with a separate reduction ([`Gemm::with_schedule`] on a kernel that is not
    /// stream-K): the kernel's f32-output twin that computes the slices of K.
    partials: Option<Kernel>,
    _types: PhantomData<(TA, TB, TD)>,
}

// A plan is plain data (no device resources): cloning it is cheap, e.g. to try other
// tile-scheduler hints with [`Gemm::with_schedule`].
impl<TA: Element, TB: Element, TD: Element> Clone for Gemm<TA, TB, TD> {
    fn clone(&self) -> Self {
        Gemm {
            problem: self.problem,
            device: self.device,
            kernel: self.kernel,
            swapped: self.swapped,
            ops: self.ops,
            user: self.user,
            staging: self.staging,
            kernel_workspace: self.kernel_workspace,
            workspace_size: self.workspace_size,
            scaling: self.scaling,
            schedule: self.schedule,
            dependent_launch: self.dependent_launch,
            epilogue: self.epilogue,
            separate_epilogue: self.separate_epilogue,
            pinned: self.pinned,
            vector_bytes: self.vector_bytes,
            gemv: self.gemv,
            partials: self.partials,
            _types: PhantomData,
        }
    }
}

impl<TA: Element, TB: Element, TD: Element> std::fmt::Debug for Gemm<TA, TB, TD> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gemm")
            .field("kernel", &self.kernel.name)
            .field("problem", &self.problem)
            .field("swapped", &self.swapped)
            .finish()
    }
}

impl<TA: Element, TB: Element, TD: Element> Gemm<TA, TB, TD> {
    /// Plans a GEMM on `ctx`'s device, choosing among the kernels of this build.
    pub fn new(ctx: &CudaContext, problem: &GemmProblem) -> Result<Self> {
        Self::plan(DeviceInfo::query(ctx)?, problem, None)
    }

    /// Plans a GEMM with the kernel of this name (a `cutlass_library` procedural name).
    pub fn with_kernel(ctx: &CudaContext, problem: &GemmProblem, name: &str) -> Result<Self> {
        Self::plan(DeviceInfo::query(ctx)?, problem, Some(name))
    }

    /// Plans a GEMM for a described device without touching it: every check that does not need
    /// the buffers runs here, so this is how to validate a problem on a machine without the GPU.
    pub fn plan(device: DeviceInfo, problem: &GemmProblem, kernel: Option<&str>) -> Result<Self> {
        Self::plan_with(device, problem, kernel, Scaling::None, Epilogue::NONE)
    }

    /// [`Gemm::with_kernel`] with an epilogue from the start: the way to name a kernel that
    /// writes an auxiliary output ([`Epilogue::with_aux_output`]), which a plain plan refuses
    /// ([`KernelRule::AuxOutput`]).
    pub fn with_kernel_and_epilogue(
        ctx: &CudaContext,
        problem: &GemmProblem,
        name: &str,
        epilogue: Epilogue,
    ) -> Result<Self> {
        Self::plan_with_epilogue(DeviceInfo::query(ctx)?, problem, epilogue, Some(name))
    }

    /// [`Gemm::plan`] with an epilogue from the start: the same plan as
    /// `Gemm::plan(..)?.with_epilogue(epilogue)`, and a kernel named here may be one that writes
    /// an auxiliary output.
    pub fn plan_with_epilogue(
        device: DeviceInfo,
        problem: &GemmProblem,
        epilogue: Epilogue,
        kernel: Option<&str>,
    ) -> Result<Self> {
        if !epilogue.aux_output {
            return Self::plan(device, problem, kernel)?.with_epilogue(epilogue);
        }
        Self::aux_output_rules(Scaling::None, &epilogue)?;
        Self::plan_with(device, problem, kernel, Scaling::None, epilogue)?.aux_output_placed()
    }

    pub(crate) fn plan_with(
        device: DeviceInfo,
        problem: &GemmProblem,
        kernel: Option<&str>,
        scaling: Scaling,
        epilogue: Epilogue,
    ) -> Result<Self> {
        problem.check()?;
        // A decode GEMV named: the CUTLASS kernel behind it is the heuristic's.
        let gemv_named = match kernel {
            Some(BLOCKWISE_GEMV) => Some(Gemv::Blockwise),
            Some(DENSE_GEMV) => Some(Gemv::Dense),
            _ => None,
        };
        let kernel = kernel.filter(|_| gemv_named.is_none());
        let kernel_name_given = kernel.is_some();
        let user = [
            problem.resolve(OperandName::A)?,
            problem.resolve(OperandName::B)?,
            problem.resolve(OperandName::C)?,
            problem.resolve(OperandName::D)?,
        ];
        // Two orientations: the kernel computes D as the user lays it out ("direct"), or Dᵀ =
        // Bᵀ·Aᵀ with A and B exchanged ("swapped"). A kernel's D layout says which one it serves.
        // The primary orientation gives the kernel a row-major D (every catalog kernel has one);
        // the other serves the menu's column-major-output kernels, which put a small M on the
        // kernel's N side.
        let primary = problem.d.layout == Layout::ColumnMajor;
        let orient = |swapped: bool| orientation::<TA, TB>(&user, swapped);
        let (ops_p, ta_p, tb_p) = orient(primary);
        let (ops_s, ta_s, tb_s) = orient(!primary);
        check_layout_rules(&device, ta_p, tb_p, &ops_p)?;
        let secondary_ok = check_layout_rules(&device, ta_s, tb_s, &ops_s).is_ok();
        let serves_in = |s: &KernelSpec,
                         ops: &[KernelOperand; 4],
                         ta: cutlass_gemm_catalog::DataType,
                         tb: cutlass_gemm_catalog::DataType|
         -> std::result::Result<(), KernelRule> {
            if s.block_scale.is_some() {
                return Err(KernelRule::BlockScaled);
            }
            if s.op_class.is_sparse() {
                return Err(KernelRule::Sparse);
            }
            if s.fusion.is_gated() {
                return Err(KernelRule::Gated { kernel: true });
            }
            if s.blockwise.is_some() != (scaling == Scaling::Blockwise) {
                return Err(if scaling == Scaling::Blockwise {
                    KernelRule::NotBlockwise
                } else {
                    KernelRule::Blockwise
                });
            }
            crate::plans::epilogue::fusion_rule(s, &epilogue, kernel_name_given, TD::DATA_TYPE)?;
            let want = [
                (ta, ops[0].m.layout),
                (tb, ops[1].m.layout),
                (TD::DATA_TYPE, ops[2].m.layout),
                (TD::DATA_TYPE, ops[3].m.layout),
            ];
            let have = [s.a, s.b, s.c, s.d];
            let names = [
                OperandName::A,
                OperandName::B,
                OperandName::C,
                OperandName::D,
            ];
            for ((&required, o), operand) in want.iter().zip(have.iter()).zip(names) {
                if (o.ty, o.layout) != required {
                    return Err(KernelRule::Operand {
                        operand,
                        kernel: (o.ty, o.layout),
                        required,
                    });
                }
            }
            Ok(())
        };
        // Which orientation a kernel serves (primary first), or why it serves none.
        let serving = |s: &KernelSpec| -> std::result::Result<bool, KernelRule> {
            match serves_in(s, &ops_p, ta_p, tb_p) {
                Ok(()) => Ok(primary),
                Err(_) if secondary_ok && serves_in(s, &ops_s, ta_s, tb_s).is_ok() => Ok(!primary),
                Err(e) => Err(e),
            }
        };
        let request = format!(
            "A {} {:?} x B {} {:?} -> D {} {:?}",
            TA::DATA_TYPE,
            problem.a.layout,
            TB::DATA_TYPE,
            problem.b.layout,
            TD::DATA_TYPE,
            problem.d.layout
        );
        let shape = |swapped: bool| {
            let od = if swapped == primary { &ops_p } else { &ops_s }[3].m;
            (od.rows, od.cols)
        };
        // The padded copies a kernel would need in an orientation ([`staging`]).
        let plan_staging = |spec: &KernelSpec, ops: &[KernelOperand; 4]| {
            staging::plan(
                spec,
                ops.map(|o| o.m),
                ops.map(|o| o.user),
                [spec.a.ty, spec.b.ty, spec.c.ty, spec.d.ty]
                    .map(|t| (t.bits() as usize).div_ceil(8)),
                spec.blockwise
                    .filter(|_| scaling == Scaling::Blockwise)
                    .map(|bw| problem.k.div_ceil(bw.k as usize)),
                problem.beta != 0.0,
                MAX_STRIDE_BYTES,
            )
        };
        let kernel = select(
            &device,
            kernel,
            ArchPolicy::Runnable,
            &|s: &KernelSpec| serving(s).map(|_| ()),
            &request,
            &|runnable: &[Kernel]| {
                heuristic::choose(
                    runnable,
                    problem.k,
                    problem.batch,
                    device.sm_count,
                    &|s| shape(serving(s).unwrap_or(primary)),
                    &|s| {
                        let swapped = serving(s).unwrap_or(primary);
                        let ops = if swapped == primary { &ops_p } else { &ops_s };
                        heuristic::staging_us(&plan_staging(s, ops), problem.beta != 0.0)
                    },
                )
            },
        )?;
        let swapped = serving(&kernel.spec).map_err(|reason| Error::KernelMismatch {
            name: kernel.name.into(),
            reason,
        })?;
        let mut ops = if swapped == primary { ops_p } else { ops_s };
        // Operands TMA cannot address in place go through padded copies; after that every
        // alignment rule holds, which check_alignment confirms.
        let staging = plan_staging(&kernel.spec, &ops);
        if let Some(operand) = staging.overflow {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::OperandReachOverflows { operand },
            });
        }
        for (o, m) in ops.iter_mut().zip(staging.ops) {
            o.m = m;
        }
        check_alignment(&kernel.spec, &ops, swapped, problem.batch)?;
        let (kernel_m, kernel_n) = shape(swapped);
        let schedule = crate::selection::heuristic::default_schedule(
            &kernel.spec,
            (kernel_m, kernel_n, problem.k),
            device.sm_count,
        );

        let mut gemm = Gemm {
            problem: *problem,
            device,
            kernel,
            swapped,
            ops,
            user,
            staging,
            kernel_workspace: 0,
            workspace_size: 0,
            scaling,
            schedule,
            dependent_launch: true,
            epilogue,
            separate_epilogue: false,
            pinned: kernel_name_given || gemv_named.is_some(),
            vector_bytes: 0,
            gemv: None,
            partials: None,
            _types: PhantomData,
        };
        gemm.gemv = match gemv_named {
            // Neither GEMV writes an auxiliary output: the rule `with_epilogue` gives.
            Some(g) if gemm.epilogue.aux_output => {
                return Err(Error::KernelMismatch {
                    name: g.name().into(),
                    reason: KernelRule::AuxOutput { kernel: false },
                })
            }
            Some(g) => match gemm.gemv_rule(g) {
                Some(rule) => return Err(g.mismatch(rule)),
                None => Some(g),
            },
            None if kernel_name_given => None,
            None => {
                let (g, tokens, weight) = match scaling {
                    Scaling::Blockwise => (Gemv::Blockwise, BLOCKWISE_GEMV_TOKENS, usize::MAX),
                    _ => (Gemv::Dense, DENSE_GEMV_TOKENS, DENSE_GEMV_MAX_WEIGHT),
                };
                (problem.m <= tokens
                    && problem.n.saturating_mul(problem.k) <= weight
                    && gemm.gemv_rule(g).is_none())
                .then_some(g)
            }
        };
        gemm.size_workspace()?;
        Ok(gemm)
    }

    /// The rule of a decode GEMV this plan breaks, if any.
    fn gemv_rule(&self, gemv: Gemv) -> Option<GemvRule> {
        use cutlass_gemm_catalog::DataType;
        let p = &self.problem;
        let sixteen = |t: DataType| matches!(t, DataType::Bf16 | DataType::F16);
        let (types, max, align) = match gemv {
            Gemv::Blockwise => (
                self.scaling == Scaling::Blockwise
                    && TA::DATA_TYPE == DataType::E4M3
                    && TB::DATA_TYPE == DataType::E4M3
                    && sixteen(TD::DATA_TYPE),
                cutlass_gemm_sys::CUTLASS_RS_BLOCKWISE_GEMV_MAX_TOKENS as usize,
                16,
            ),
            // A linear layer's orientation (blockwise plans have it by their rules).
            Gemv::Dense => (
                self.scaling == Scaling::None
                    && TA::DATA_TYPE == TB::DATA_TYPE
                    && TA::DATA_TYPE == TD::DATA_TYPE
                    && sixteen(TD::DATA_TYPE)
                    && (p.a.layout, p.b.layout, p.d.layout)
                        == (Layout::RowMajor, Layout::ColumnMajor, Layout::RowMajor),
                cutlass_gemm_sys::CUTLASS_RS_DENSE_GEMV_MAX_TOKENS as usize,
                8,
            ),
        };
        // The 16-bit GEMV computes the fused epilogue (as the fused kernels do); the blockwise one
        // has none.
        // Neither writes an auxiliary output.
        let epilogue =
            (gemv == Gemv::Dense && !self.epilogue.aux_output) || self.epilogue.is_none();
        let [a, b, ..] = self.user;
        Some(if !types {
            GemvRule::Types
        } else if !epilogue {
            GemvRule::Epilogue
        } else if p.m > max {
            GemvRule::Tokens { m: p.m, max }
        } else if p.batch != 1 {
            GemvRule::Batch { batch: p.batch }
        } else if p.n % 16 != 0 || p.k % 64 != 0 || p.n * p.k > i32::MAX as usize {
            GemvRule::Extents { n: p.n, k: p.k }
        } else if a.ld % align != 0 {
            GemvRule::LeadingDimension {
                operand: OperandName::A,
                ld: a.ld,
            }
        } else if b.ld % align != 0 {
            GemvRule::LeadingDimension {
                operand: OperandName::B,
                ld: b.ld,
            }
        } else if self.user[2].layout != Layout::RowMajor {
            GemvRule::ColumnMajorC
        } else if !crate::ffi::hand_written_runs_on(self.device.compute_capability) {
            GemvRule::NotBuilt
        } else {
            return None;
        })
    }

    /// Whether a decode GEMV runs this plan: the FP8 blockwise one ([`BLOCKWISE_GEMV`]) or the
    /// 16-bit one ([`DENSE_GEMV`]); [`Gemm::kernel_name`] says which.
    pub fn is_gemv(&self) -> bool {
        self.gemv.is_some()
    }

    /// The plan with a fused epilogue: bias, activation, row and column scales computed in the
    /// kernel's epilogue ([`crate::plans::epilogue`]); launch it with [`Gemm::run_fused`]. A plain
    /// plan runs a kernel with CUTLASS's own epilogue, so the problem is planned again among the
    /// kernels with the fused one (usually the same tile's fused twin, which the default build has
    /// for its main SM90 tiles; else another tile, which may stage an unaligned D through a padded
    /// copy). A plan on the 16-bit decode GEMV ([`DENSE_GEMV`]) keeps it: the GEMV computes the
    /// epilogue. Where the fused kernels would copy an input (A or B) at least as large as D into a padded
    /// buffer that the plain plan reads in place, or no fused kernel serves, a bias per column and
    /// an activation on a row-major bf16/f16 D run as a separate pass over D after the plain
    /// kernel ([`Gemm::epilogue_is_separate`]; GPT-2's LM head, n = 50257, up to 768 tokens). A
    /// plan whose kernel already has the epilogue keeps it. A kernel named by the caller is kept
    /// if it has the fused epilogue, or refused
    /// ([`KernelRule::NoFusedEpilogue`]). Tile-scheduler hints set before are kept when the kernel
    /// is.
    pub fn with_epilogue(self, epilogue: Epilogue) -> Result<Self> {
        self.planned_with_epilogue(epilogue, true)
    }

    /// [`Gemm::with_epilogue`] computed in the kernel (a fused CUTLASS kernel or the decode
    /// GEMV), never as a separate pass: D is rounded once, after the activation. Slower where the
    /// fused kernels copy an input into a padded buffer.
    pub fn with_epilogue_in_kernel(self, epilogue: Epilogue) -> Result<Self> {
        self.planned_with_epilogue(epilogue, false)
    }

    fn planned_with_epilogue(self, epilogue: Epilogue, may_separate: bool) -> Result<Self> {
        if epilogue.aux_output {
            return self.planned_with_aux_output(epilogue);
        }
        if let Some(gemv) = self.gemv.filter(|_| !epilogue.is_none()) {
            // The 16-bit decode GEMV computes the fused epilogue itself; the blockwise one has
            // none: named, it is refused; chosen, the problem is planned again among the CUTLASS
            // kernels with one, and where none of this build serves the epilogue (an f32 bias in
            // the default build) the 16-bit GEMV keeps the plan with the plain kernel behind it.
            if gemv == Gemv::Blockwise && self.pinned {
                return Err(gemv.mismatch(GemvRule::Epilogue));
            }
            let named = (gemv == Gemv::Dense && self.pinned).then_some(gemv.name());
            return match Self::plan_with(self.device, &self.problem, named, self.scaling, epilogue)
            {
                Ok(gemm) => Ok(gemm.with_programmatic_dependent_launch(self.dependent_launch)),
                // No fused CUTLASS kernel of this build serves the epilogue (an f32 bias in the
                // default build): the 16-bit GEMV computes it on its own.
                Err(_)
                    if gemv == Gemv::Dense
                        && Gemm {
                            epilogue,
                            ..self.clone()
                        }
                        .gemv_rule(gemv)
                        .is_none() =>
                {
                    self.keeping_kernel(epilogue, false)
                }
                Err(e) => Err(e),
            };
        }
        let same_kernel =
            crate::plans::epilogue::fusion_rule(&self.kernel.spec, &epilogue, true, TD::DATA_TYPE)
                .is_ok();
        if same_kernel {
            return self.keeping_kernel(epilogue, false);
        }
        let kernel = self.pinned.then_some(self.kernel.name);
        let fused = Self::plan_with(self.device, &self.problem, kernel, self.scaling, epilogue);
        // Where no fused kernel serves, or the fused plan copies an input (A or B, the weight)
        // into a padded buffer that the plain plan reads in place and the copy is at least as
        // large as D (which the separate pass reads and writes), the plain plan with the epilogue
        // as a separate pass over D is the faster one. GPT-2's LM head (n = 50257, k = 768;
        // H100, docs/performance.md): the epilogue in a fused kernel took 4.3–8.7x the separate
        // plan's time at 1–128 tokens; at 4096 tokens the pass would cost 1.5x the copy.
        let (m, n, k) = (self.problem.m, self.problem.n, self.problem.k);
        let staged_inputs = |g: &Self| -> usize {
            g.staged_operands()
                .iter()
                .map(|o| match o {
                    OperandName::A => m * k,
                    OperandName::B => n * k,
                    _ => 0,
                })
                .sum()
        };
        // (Never on an aux kernel: without its auxiliary output it cannot run.)
        let separate = may_separate
            && !self.pinned
            && !self.kernel.spec.fusion.has_aux()
            && self.separate_pass_serves(&epilogue)
            && match &fused {
                Err(_) => true,
                Ok(f) => {
                    let copied = staged_inputs(f);
                    staged_inputs(&self) == 0 && copied > 0 && m * n <= copied
                }
            };
        if separate {
            // The pass follows a plain kernel: a plan that already runs a fused one (its bias of
            // another type) is planned plainly first.
            if self.kernel.spec.fusion.is_fused() {
                let dependent_launch = self.dependent_launch;
                return Self::plan_with(
                    self.device,
                    &self.problem,
                    None,
                    self.scaling,
                    Epilogue::NONE,
                )?
                .with_programmatic_dependent_launch(dependent_launch)
                .planned_with_epilogue(epilogue, may_separate);
            }
            return self.keeping_kernel(epilogue, true);
        }
        Ok(fused?.with_programmatic_dependent_launch(self.dependent_launch))
    }

    /// [`Gemm::with_epilogue`] for an epilogue that also writes its pre-activation value
    /// ([`Epilogue::with_aux_output`]): a plain 16-bit plan, a bias per column or none, on the
    /// kernels that write it (the plan's own if it is one, else the problem planned again among
    /// them), never the decode GEMV or a separate pass, and no padded copy of C or D.
    fn planned_with_aux_output(self, epilogue: Epilogue) -> Result<Self> {
        Self::aux_output_rules(self.scaling, &epilogue)?;
        if let Some(gemv) = self.gemv.filter(|_| self.pinned) {
            return Err(Error::KernelMismatch {
                name: gemv.name().into(),
                reason: KernelRule::AuxOutput { kernel: false },
            });
        }
        let same_kernel = self.gemv.is_none()
            && crate::plans::epilogue::fusion_rule(
                &self.kernel.spec,
                &epilogue,
                true,
                TD::DATA_TYPE,
            )
            .is_ok();
        let gemm = if same_kernel {
            self.keeping_kernel(epilogue, false)?
        } else {
            let kernel = self.pinned.then_some(self.kernel.name);
            let dependent_launch = self.dependent_launch;
            Self::plan_with(self.device, &self.problem, kernel, self.scaling, epilogue)?
                .with_programmatic_dependent_launch(dependent_launch)
        };
        gemm.aux_output_placed()
    }

    /// The auxiliary output's rules on the plan and its epilogue: a plain 16-bit GEMM
    /// ([`AuxRule::Plan`]), a bias per column or none and no scales ([`AuxRule::Vectors`]).
    fn aux_output_rules(scaling: Scaling, epilogue: &Epilogue) -> Result<()> {
        use cutlass_gemm_catalog::DataType;
        let refuse = |rule| Error::InvalidProblem {
            reason: ProblemRule::AuxOutput { rule },
        };
        let sixteen = matches!(TD::DATA_TYPE, DataType::Bf16 | DataType::F16);
        if scaling != Scaling::None
            || !sixteen
            || TA::DATA_TYPE != TD::DATA_TYPE
            || TB::DATA_TYPE != TD::DATA_TYPE
        {
            return Err(refuse(AuxRule::Plan));
        }
        if epilogue.row_scales || epilogue.col_scales || epilogue.bias == Some(BiasAxis::PerRow) {
            return Err(refuse(AuxRule::Vectors));
        }
        Ok(())
    }

    /// A plan with the auxiliary output as planned: the kernel writes Aux with D's geometry in
    /// place, so no padded copy of C or D, split-K reduction, separate pass or GEMV
    /// ([`AuxRule::Staged`]), and computes D as the user lays it out, row-major (a swapped
    /// kernel would read the user's bias per column as its bias per row, which the aux kernels
    /// do not take: [`AuxRule::ColumnMajorD`]).
    fn aux_output_placed(self) -> Result<Self> {
        if self.swapped || self.user[3].layout != Layout::RowMajor {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::AuxOutput {
                    rule: AuxRule::ColumnMajorD,
                },
            });
        }
        let staged = self.staging.staged[Slot::C as usize].is_some()
            || self.staging.staged[Slot::D as usize].is_some();
        if staged || self.partials.is_some() || self.separate_epilogue || self.gemv.is_some() {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::AuxOutput {
                    rule: AuxRule::Staged,
                },
            });
        }
        Ok(self)
    }

    /// This plan's kernel with `epilogue`, in the kernel or as a separate pass, its workspace
    /// sized again.
    fn keeping_kernel(self, epilogue: Epilogue, separate_epilogue: bool) -> Result<Self> {
        let mut gemm = Gemm {
            epilogue,
            separate_epilogue,
            ..self
        };
        gemm.size_workspace()?;
        Ok(gemm)
    }

    /// Whether the epilogue can run as a separate pass over D after this plan's plain kernel
    /// (`cutlass_rs_bias_activation`): a bias per column (or none) and an activation, no scales,
    /// a row-major bf16/f16 D of one batch, no blockwise scales, no decode GEMV.
    fn separate_pass_serves(&self, e: &Epilogue) -> bool {
        use cutlass_gemm_catalog::DataType;
        !e.row_scales
            && !e.col_scales
            && e.bias != Some(BiasAxis::PerRow)
            && matches!(TD::DATA_TYPE, DataType::Bf16 | DataType::F16)
            && self.user[3].layout == Layout::RowMajor
            && self.problem.batch == 1
            && self.scaling == Scaling::None
            && self.gemv.is_none()
    }

    /// The plan's fused epilogue ([`Epilogue::NONE`] unless [`Gemm::with_epilogue`] set one).
    pub fn epilogue(&self) -> Epilogue {
        self.epilogue
    }

    /// Whether the plan computes its epilogue as a separate pass over D after a plain kernel
    /// rather than in the kernel ([`Gemm::with_epilogue`] chooses it where the fused kernels
    /// would copy an input into a padded buffer, or none serves). The pass rounds D to its type
    /// once more, before the bias and the activation.
    pub fn epilogue_is_separate(&self) -> bool {
        self.separate_epilogue
    }

    /// The epilogue the kernel computes (none where the plan runs it as a separate pass).
    fn kernel_epilogue(&self) -> Epilogue {
        if self.separate_epilogue {
            Epilogue::NONE
        } else {
            self.epilogue
        }
    }

    /// The chosen kernel's name ([`BLOCKWISE_GEMV`] or [`DENSE_GEMV`] where a decode GEMV runs
    /// the plan).
    pub fn kernel_name(&self) -> &'static str {
        match self.gemv {
            Some(g) => g.name(),
            None => self.kernel.name,
        }
    }

    /// The chosen kernel's spec (for a plan a decode GEMV runs, the CUTLASS kernel it would take
    /// without the GEMV).
    pub fn kernel_spec(&self) -> &KernelSpec {
        &self.kernel.spec
    }

    /// The problem.
    pub fn problem(&self) -> &GemmProblem {
        &self.problem
    }

    /// Bytes of workspace a launch needs: the kernel's own, plus room for the padded copies of
    /// [`Gemm::staged_operands`].
    pub fn workspace_size(&self) -> usize {
        self.workspace_size
    }

    /// The plan with these tile-scheduler hints (raster swizzle and order; split-K). The
    /// workspace size is recomputed: split-K needs more.
    ///
    /// Split-K (`splits` > 1) on a stream-K kernel is CUTLASS's, reduced in the kernel. On other
    /// kernels it is a batch of `splits` GEMMs over equal slices of K on the kernel's f32-output
    /// twin, whose partial products a reduction kernel then adds up into D with alpha and beta
    /// ([`Gemm::split_k_kernel`]; the partials take `splits · m · n · 4` bytes of the workspace);
    /// [`KernelRule::SplitK`] says why a plan cannot have it, [`Error::KernelNotBuilt`] names a
    /// twin this build lacks.
    pub fn with_schedule(mut self, schedule: ScheduleHints) -> Result<Self> {
        if !matches!(schedule.swizzle, 0 | 1 | 2 | 4 | 8) || schedule.raster > 2 {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::ScheduleOutOfRange(schedule),
            });
        }
        let stream_k =
            self.kernel.spec.tile_scheduler == cutlass_gemm_catalog::TileScheduler::StreamK;
        if schedule.splits > 1 && self.gemv.is_some() {
            return Err(Error::KernelMismatch {
                name: self.kernel_name().into(),
                reason: KernelRule::SplitKNeedsStreamK {
                    splits: schedule.splits,
                },
            });
        }
        if schedule.splits > 1 && !stream_k && self.epilogue.aux_output {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::AuxOutput {
                    rule: AuxRule::Staged,
                },
            });
        }
        self.partials = if schedule.splits > 1 && !stream_k {
            Some(self.partials_kernel(schedule.splits)?)
        } else {
            None
        };
        self.schedule = schedule;
        self.size_workspace()?;
        Ok(self)
    }

    /// The f32-output twin that computes the slices of K of split-K over `splits`, or why the
    /// plan cannot split K with a reduction.
    fn partials_kernel(&self, splits: u16) -> Result<Kernel> {
        use cutlass_gemm_catalog::DataType;
        let refuse = |rule: SplitKRule| Error::KernelMismatch {
            name: self.kernel.name.into(),
            reason: KernelRule::SplitK { splits, rule },
        };
        let spec = self.kernel.spec;
        let is_twin = |s: &KernelSpec| {
            let mut same = *s;
            (same.c, same.d) = (spec.c, spec.d);
            same == spec
                && (s.c.ty, s.d.ty) == (DataType::F32, DataType::F32)
                && (s.c.layout, s.d.layout) == (spec.c.layout, spec.d.layout)
        };
        let sixteen = matches!(TD::DATA_TYPE, DataType::Bf16 | DataType::F16);
        let Some(twin) = crate::selection::catalog_entries()
            .iter()
            .find(|s| is_twin(s))
            .filter(|_| sixteen && spec.fusion == cutlass_gemm_catalog::Fusion::LinearCombination)
        else {
            return Err(refuse(SplitKRule::NoPartialsKernel));
        };
        if self.problem.batch != 1 {
            return Err(refuse(SplitKRule::Batch {
                batch: self.problem.batch,
            }));
        }
        if let Some(s) = self.staging.staged.iter().flatten().next() {
            let operand = match s.slot {
                Slot::A => self.ops[0].user,
                Slot::B => self.ops[1].user,
                Slot::C => OperandName::C,
                Slot::D => OperandName::D,
                Slot::ScalesA => OperandName::ScalesA,
            };
            return Err(refuse(SplitKRule::Staged { operand }));
        }
        let k = self.problem.k;
        if k % splits as usize != 0 || (k / splits as usize) % 8 != 0 {
            return Err(refuse(SplitKRule::Slices { k, splits }));
        }
        let name = twin.name();
        crate::selection::built_kernels()
            .iter()
            .find(|b| b.name == name)
            .copied()
            .ok_or_else(|| Error::KernelNotBuilt {
                build_with: crate::selection::build_hint(&name),
                name,
            })
    }

    /// The f32-output kernel that computes the slices of K where the plan splits K with a
    /// separate reduction ([`Gemm::with_schedule`]), `None` otherwise.
    pub fn split_k_kernel(&self) -> Option<&'static str> {
        self.partials.map(|k| k.name)
    }

    /// Split-K's slices: their count, length, and the lines (of `inner` contiguous elements) of
    /// the kernel's D that each partial product holds.
    fn slices(&self) -> (usize, usize, usize, usize) {
        let splits = self.schedule.splits as usize;
        let od = self.ops[3].m;
        let (lines, inner) = match od.layout {
            Layout::RowMajor => (od.rows, od.cols),
            Layout::ColumnMajor => (od.cols, od.rows),
        };
        (splits, self.problem.k / splits, lines, inner)
    }

    /// The twin's arguments for split-K's slices: a batch of `splits` GEMMs over consecutive
    /// slices of K into the packed f32 partials.
    fn partials_args(
        &self,
        twin: &Kernel,
        ka: u64,
        kb: u64,
        partials: u64,
    ) -> cutlass_rs_gemm_args {
        let (splits, len, lines, inner) = self.slices();
        let [oa, ob, _, od] = self.ops;
        // Elements between consecutive k of A (m x k) and of B (k x n).
        let step_a = match oa.m.layout {
            Layout::RowMajor => 1,
            Layout::ColumnMajor => oa.m.ld,
        };
        let step_b = match ob.m.layout {
            Layout::RowMajor => ob.m.ld,
            Layout::ColumnMajor => 1,
        };
        let raw = crate::ffi::RawArgs {
            m: od.m.rows,
            n: od.m.cols,
            k: len,
            batch: splits,
            a: ka,
            lda: oa.m.ld,
            batch_stride_a: len * step_a,
            b: kb,
            ldb: ob.m.ld,
            batch_stride_b: len * step_b,
            c: partials,
            ldc: inner,
            batch_stride_c: lines * inner,
            d: partials,
            ldd: inner,
            batch_stride_d: lines * inner,
            alpha: 1.0,
            beta: 0.0,
            schedule: ScheduleHints {
                splits: 0,
                ..self.schedule
            },
            programmatic_dependent_launch: self.programmatic_dependent_launch(),
            ..Default::default()
        };
        twin.abi_args(&self.device, &raw)
    }

    /// Sizes the workspace: the kernel's own (with aligned stand-in addresses: it depends on the
    /// shape only), then the staging area.
    fn size_workspace(&mut self) -> Result<()> {
        let args = self.args([16; 4], true, Some((16, 16)), &[0; 4]);
        // Staging pads extents to the kernel's alignment: the padded problem must still fit
        // CUTLASS's int extents (the user's were checked by GemmProblem::check).
        let (m, n) = if self.swapped {
            (self.problem.n, self.problem.m)
        } else {
            (self.problem.m, self.problem.n)
        };
        for (extent, value, padded) in [
            (Extent::M, m, args.m),
            (Extent::N, n, args.n),
            (Extent::K, self.problem.k, args.k),
        ] {
            if padded as usize > crate::plans::problem::MAX_EXTENT {
                let extent = match (self.swapped, extent) {
                    (true, Extent::M) => Extent::N,
                    (true, Extent::N) => Extent::M,
                    (_, e) => e,
                };
                return Err(Error::InvalidProblem {
                    reason: ProblemRule::PaddedExtentTooLarge {
                        extent,
                        value,
                        padded: padded as usize,
                    },
                });
            }
        }
        if let Some(twin) = self.partials {
            // The twin's own workspace, then the packed f32 partials (nothing is staged).
            let (splits, _, lines, inner) = self.slices();
            let a = self.partials_args(&twin, 16, 16, 16);
            self.kernel_workspace = twin.workspace_size_of(&a)?;
            self.vector_bytes = 0;
            self.workspace_size = self.kernel_workspace.next_multiple_of(STAGING_ALIGNMENT)
                + splits * lines * inner * 4;
            return Ok(());
        }
        self.kernel_workspace = self.kernel.workspace_size_of(&args)?;
        self.vector_bytes = self
            .staged_vectors()
            .iter()
            .flatten()
            .map(|v| v.bytes.next_multiple_of(STAGING_ALIGNMENT))
            .sum();
        let staging = self.staging.bytes.next_multiple_of(STAGING_ALIGNMENT) + self.vector_bytes;
        if self.gemv.is_some() {
            // The GEMV reads the operands in place and needs no workspace.
            (
                self.kernel_workspace,
                self.vector_bytes,
                self.workspace_size,
            ) = (0, 0, 0);
            return Ok(());
        }
        self.workspace_size = if staging == 0 {
            self.kernel_workspace
        } else {
            self.kernel_workspace.next_multiple_of(STAGING_ALIGNMENT) + staging
        };
        Ok(())
    }

    /// The epilogue vectors in the kernel's view (row scales, column scales, row bias, column
    /// bias: the user's rows are the kernel's columns when the plan is swapped), each with the
    /// kernel's extent along it and its element size, and whether that extent is padded beyond
    /// the user's (then the vector is copied into the workspace, zero-filled, like the operands).
    fn staged_vectors(&self) -> [Option<VectorCopy>; 4] {
        let e = self.kernel_epilogue();
        let od = self.ops[3].m;
        let (km, kn) = (od.rows, od.cols);
        let (um, un) = if self.swapped {
            (self.problem.n, self.problem.m)
        } else {
            (self.problem.m, self.problem.n)
        };
        // Which user vectors the kernel's row and column slots hold.
        let (user_rows, user_cols) = if self.swapped {
            (e.col_scales, e.row_scales)
        } else {
            (e.row_scales, e.col_scales)
        };
        let bias_rows = matches!(
            (e.bias, self.swapped),
            (Some(BiasAxis::PerRow), false) | (Some(BiasAxis::PerColumn), true)
        );
        let bias_cols = e.bias.is_some() && !bias_rows;
        let bias_size = e.bias_size(std::mem::size_of::<TD>());
        let slot = |present: bool, user: usize, kernel: usize, size: usize| {
            (present && kernel != user).then_some(VectorCopy {
                len: user,
                padded: kernel,
                element_bytes: size,
                bytes: kernel * size,
            })
        };
        [
            slot(user_rows, um, km, 4),
            slot(user_cols, un, kn, 4),
            slot(bias_rows, um, km, bias_size),
            slot(bias_cols, un, kn, bias_size),
        ]
    }

    /// The user's operands that this plan serves through padded copies in its workspace, because
    /// the kernels' TMA cannot address them in place (an extent or leading dimension off the
    /// kernel's alignment, such as k = 4095 or n = 50257 in bf16, or m not a multiple of 4 with
    /// blockwise scales). Each costs one extra pass over the operand (D: copied back after the
    /// kernel). Empty for aligned problems.
    pub fn staged_operands(&self) -> Vec<OperandName> {
        let mut ops: Vec<OperandName> = self
            .staging
            .staged
            .iter()
            .flatten()
            .filter(|_| self.gemv.is_none())
            .map(|s| s.user)
            .collect();
        let order = [
            OperandName::A,
            OperandName::B,
            OperandName::C,
            OperandName::D,
            OperandName::ScalesA,
        ];
        ops.sort_by_key(|o| order.iter().position(|x| x == o));
        ops
    }

    /// The tile-scheduler hints of this plan: the library's choice for the kernel and problem
    /// (`heuristic::default_schedule`: for the overlapped FP8 cooperative kernels with a two-CTA
    /// cluster, raster across the cluster and the swizzle of a DRAM-traffic model; CUTLASS's
    /// defaults otherwise) until [`Gemm::with_schedule`] replaces them.
    pub fn schedule(&self) -> ScheduleHints {
        self.schedule
    }

    /// The plan launching with programmatic dependent launch (`true`, the default) or without.
    ///
    /// With it (CUDA's programmatic stream serialization), the kernel may be scheduled while the
    /// kernel before it in the stream finishes: it sets up (barriers, TMA descriptor prefetch) and
    /// then waits (`griddepcontrol.wait`) for that kernel's completion and memory before its first
    /// global memory access, so results are the same; and it lets a kernel after it that was
    /// launched the same way start once its last tile's main loop is done. What it saves is the
    /// launch gap and prologue between back-to-back kernels (a microsecond or two: noticeable on
    /// decode-size GEMMs). Kernels without it (SM100/SM120, stream-K, blockwise scales:
    /// [`KernelSpec::supports_programmatic_dependent_launch`]) launch as before either way.
    /// Turn it off to keep each kernel from overlapping its predecessor's tail, e.g. when
    /// profiling kernels one by one.
    pub fn with_programmatic_dependent_launch(mut self, on: bool) -> Self {
        self.dependent_launch = on;
        self
    }

    /// Whether launches of this plan use programmatic dependent launch: asked for
    /// ([`Gemm::with_programmatic_dependent_launch`], on by default) and supported by the kernel.
    pub fn programmatic_dependent_launch(&self) -> bool {
        self.dependent_launch && self.kernel.spec.supports_programmatic_dependent_launch()
    }

    /// Whether the kernel computes Dᵀ = Bᵀ·Aᵀ (column-major D).
    pub fn is_swapped(&self) -> bool {
        self.swapped
    }

    /// Checks the buffers and launches the GEMM on `stream`. C may be `None` when beta is 0. To
    /// accumulate into D (C = D), use [`Gemm::run_in_place`].
    pub fn run(
        &self,
        stream: &Arc<CudaStream>,
        a: &dyn DevicePtr<TA>,
        b: &dyn DevicePtr<TB>,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        let none = EpilogueOperands::default();
        self.run_checked(
            stream,
            a,
            b,
            None,
            Source::from(c),
            d,
            None,
            &none,
            workspace,
        )
    }

    /// [`Gemm::run`] with the vectors of the plan's fused epilogue ([`Gemm::with_epilogue`]):
    /// exactly those it names, each checked (length, 16-byte alignment, not overlapping D) before
    /// the launch.
    #[allow(clippy::too_many_arguments)]
    pub fn run_fused(
        &self,
        stream: &Arc<CudaStream>,
        a: &dyn DevicePtr<TA>,
        b: &dyn DevicePtr<TB>,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
        epilogue: &EpilogueOperands<'_, TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        self.run_checked(
            stream,
            a,
            b,
            None,
            Source::from(c),
            d,
            None,
            epilogue,
            workspace,
        )
    }

    /// [`Gemm::run_fused`] for a plan whose epilogue also writes its pre-activation value
    /// ([`Epilogue::with_aux_output`]) to `aux`: D's geometry ([`Gemm::operand`] of
    /// [`OperandName::D`]: its length, leading dimension and batch stride), a 16-byte aligned
    /// address, overlapping no other operand. Checked like D before the launch.
    #[allow(clippy::too_many_arguments)]
    pub fn run_with_aux(
        &self,
        stream: &Arc<CudaStream>,
        a: &dyn DevicePtr<TA>,
        b: &dyn DevicePtr<TB>,
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
        aux: &mut dyn DevicePtrMut<TD>,
        epilogue: &EpilogueOperands<'_, TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        self.run_checked(
            stream,
            a,
            b,
            None,
            Source::from(c),
            d,
            Some(aux),
            epilogue,
            workspace,
        )
    }

    /// `D = alpha * A·B + beta * D`: C is D itself, with D's geometry.
    pub fn run_in_place(
        &self,
        stream: &Arc<CudaStream>,
        a: &dyn DevicePtr<TA>,
        b: &dyn DevicePtr<TB>,
        d: &mut dyn DevicePtrMut<TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        if self.user[2].ld != self.user[3].ld
            || (self.problem.batch > 1 && self.user[2].batch_stride != self.user[3].batch_stride)
        {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::InPlaceGeometry,
            });
        }
        let none = EpilogueOperands::default();
        self.run_checked(stream, a, b, None, Source::D, d, None, &none, workspace)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_scaled(
        &self,
        stream: &Arc<CudaStream>,
        a: &dyn DevicePtr<TA>,
        b: &dyn DevicePtr<TB>,
        scales: (&dyn DevicePtr<f32>, &dyn DevicePtr<f32>),
        c: Option<&dyn DevicePtr<TD>>,
        d: &mut dyn DevicePtrMut<TD>,
        epilogue: &EpilogueOperands<'_, TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        self.run_checked(
            stream,
            a,
            b,
            Some(scales),
            Source::from(c),
            d,
            None,
            epilogue,
            workspace,
        )
    }

    /// [`Gemm::run_raw`] with blockwise scales.
    ///
    /// # Safety
    /// As [`Gemm::run_raw`]; the scale pointers must hold [`Gemm::scale_lens`] f32 values.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn run_raw_scaled(
        &self,
        a: sys::CUdeviceptr,
        b: sys::CUdeviceptr,
        scales: (sys::CUdeviceptr, sys::CUdeviceptr),
        c: Option<sys::CUdeviceptr>,
        d: sys::CUdeviceptr,
        workspace: sys::CUdeviceptr,
        workspace_bytes: usize,
        stream: sys::CUstream,
    ) -> Result<()> {
        self.raw_checked(a, b, Some(scales), c, d, workspace, workspace_bytes, stream)
    }

    /// The checks of the raw entry points, then the launch.
    #[allow(clippy::too_many_arguments)]
    unsafe fn raw_checked(
        &self,
        a: sys::CUdeviceptr,
        b: sys::CUdeviceptr,
        scales: Option<(sys::CUdeviceptr, sys::CUdeviceptr)>,
        c: Option<sys::CUdeviceptr>,
        d: sys::CUdeviceptr,
        workspace: sys::CUdeviceptr,
        workspace_bytes: usize,
        stream: sys::CUstream,
    ) -> Result<()> {
        if c.is_none() && self.problem.beta != 0.0 {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::BetaWithoutC {
                    beta: Scalar(self.problem.beta),
                },
            });
        }
        if (self.scaling == Scaling::Blockwise) != scales.is_some() {
            return Err(Error::InvalidProblem {
                reason: if scales.is_some() {
                    ProblemRule::ScalesNotTaken
                } else {
                    ProblemRule::ScalesRequired
                },
            });
        }
        self.check_pointers(a, b, c, d)?;
        if let Some(sf) = scales {
            self.check_scale_pointers(sf)?;
        }
        self.check_epilogue_operands([None; 3], d)?;
        self.check_aux_presence(false)?;
        require_len(OperandName::Workspace, workspace_bytes, self.workspace_size)?;
        // The staging copies and the kernel launch on the thread's current device: it must be the
        // plan's (the kernel's entry point checks it again, for C callers).
        let current = crate::ffi::current_device().unwrap_or(usize::MAX);
        require_ordinal(OperandName::CurrentContext, current, self.device.ordinal)?;
        self.launch(
            a,
            b,
            c,
            d,
            scales,
            [0; 3],
            0,
            workspace,
            workspace_bytes,
            stream,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn run_checked(
        &self,
        stream: &Arc<CudaStream>,
        a: &dyn DevicePtr<TA>,
        b: &dyn DevicePtr<TB>,
        scales: Option<(&dyn DevicePtr<f32>, &dyn DevicePtr<f32>)>,
        c: Source<'_, TD>,
        d: &mut dyn DevicePtrMut<TD>,
        aux: Option<&mut dyn DevicePtrMut<TD>>,
        epilogue: &EpilogueOperands<'_, TD>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        self.check_stream(stream)?;
        self.check_aux_presence(aux.is_some())?;
        let device = self.device.ordinal;
        require_device(OperandName::A, a, device)?;
        require_device(OperandName::B, b, device)?;
        if let Source::Buffer(c) = &c {
            require_device(OperandName::C, *c, device)?;
        }
        require_device(OperandName::D, d, device)?;
        if let Some((sa, sb)) = scales {
            require_device(OperandName::ScalesA, sa, device)?;
            require_device(OperandName::ScalesB, sb, device)?;
        }
        epilogue.check(&self.epilogue, TD::DATA_TYPE, device)?;
        if let Some(x) = &aux {
            require_device(OperandName::Aux, *x, device)?;
            require_len(OperandName::Aux, x.len(), self.user[3].required_len())?;
        }
        self.check_len(OperandName::A, a.len())?;
        self.check_len(OperandName::B, b.len())?;
        self.check_len(OperandName::D, d.len())?;
        match &c {
            Source::Buffer(c) => self.check_len(OperandName::C, c.len())?,
            Source::None if self.problem.beta != 0.0 => {
                return Err(Error::InvalidProblem {
                    reason: ProblemRule::BetaWithoutC {
                        beta: Scalar(self.problem.beta),
                    },
                })
            }
            _ => {}
        }
        if (self.scaling == Scaling::Blockwise) != scales.is_some() {
            return Err(Error::InvalidProblem {
                reason: if scales.is_some() {
                    ProblemRule::ScalesNotTaken
                } else {
                    ProblemRule::ScalesRequired
                },
            });
        }
        if let Some((sa, sb)) = scales {
            self.check_scale_lens(sa.len(), sb.len())?;
        }
        let (pa, _ga) = a.device_ptr(stream);
        let (pb, _gb) = b.device_ptr(stream);
        let (psf, _gsa, _gsb) = match scales {
            Some((sa, sb)) => {
                let (p1, g1) = sa.device_ptr(stream);
                let (p2, g2) = sb.device_ptr(stream);
                (Some((p1, p2)), Some(g1), Some(g2))
            }
            None => (None, None, None),
        };
        let (pc, _gc) = match c {
            Source::Buffer(c) => {
                let (p, g) = c.device_ptr(stream);
                (Some(p), Some(g))
            }
            _ => (None, None),
        };
        let (pd, _gd) = d.device_ptr_mut(stream);
        let pc = if matches!(c, Source::D) { Some(pd) } else { pc };
        self.check_pointers(pa, pb, pc, pd)?;
        if let Some(sf) = psf {
            self.check_scale_pointers(sf)?;
        }
        // The epilogue's vectors: bias, row scales, column scales (pointer, length).
        let (vectors, _gv) = epilogue.addresses(stream);
        self.check_epilogue_operands(vectors, pd)?;
        let (px, _gx) = match aux {
            Some(x) => {
                let (p, g) = x.device_ptr_mut(stream);
                (p, Some(g))
            }
            None => (0, None),
        };
        if px != 0 {
            self.check_aux_pointer(px, [pa, pb, pd], pc, vectors)?;
        }
        let mut managed = None;
        let (pw, _gw) = workspace_ptr(stream, workspace, self.workspace_size, &mut managed, false)?;
        // SAFETY: every pointer was checked against the extent the problem reaches, its alignment
        // and aliasing; the guards keep the buffers' stream ordering until the launch is queued.
        unsafe {
            self.launch(
                pa,
                pb,
                pc,
                pd,
                psf,
                vectors.map(|v| v.map_or(0, |(p, _)| p)),
                px,
                pw,
                self.workspace_size,
                stream.cu_stream(),
            )
        }
    }

    /// Launches on raw device pointers, for callers that manage memory themselves (FFI,
    /// benchmarks). Checks pointer alignment and aliasing of the extents the problem reaches, and
    /// that the calling thread's current CUDA context is on the plan's device
    /// ([`Error::DeviceMismatch`] naming [`OperandName::CurrentContext`], `found` `usize::MAX`
    /// when no context is current).
    ///
    /// # Safety
    /// `a`, `b`, `c` (when given) and `d` must be device pointers of the planned device holding at
    /// least the extents the problem reaches ([`ResolvedMatrix::required_len`] elements of their
    /// types); `workspace` must hold `workspace_bytes >= self.workspace_size()` bytes (or be 0 when
    /// the size is 0); `stream` must be a live stream of the device's current context, which must
    /// be bound to this thread; nothing else may write these buffers until the kernel completes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn run_raw(
        &self,
        a: sys::CUdeviceptr,
        b: sys::CUdeviceptr,
        c: Option<sys::CUdeviceptr>,
        d: sys::CUdeviceptr,
        workspace: sys::CUdeviceptr,
        workspace_bytes: usize,
        stream: sys::CUstream,
    ) -> Result<()> {
        self.raw_checked(a, b, None, c, d, workspace, workspace_bytes, stream)
    }

    /// A decode GEMV on the caller's buffers (checked by the caller as for the CUTLASS kernel; the
    /// GEMV reads them in place), with the fused epilogue's vectors (0 for none; the dense GEMV's,
    /// in D's orientation as the plan's).
    ///
    /// # Safety
    /// As [`Gemm::launch`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn launch_gemv(
        &self,
        gemv: Gemv,
        a: u64,
        b: u64,
        c: Option<u64>,
        d: u64,
        scales: Option<(u64, u64)>,
        [bias, row_scales, col_scales]: [u64; 3],
        stream: sys::CUstream,
    ) -> Result<()> {
        let p = &self.problem;
        let [ua, ub, uc, ud] = self.user;
        let dtype = match TD::DATA_TYPE {
            cutlass_gemm_catalog::DataType::Bf16 => cutlass_gemm_sys::CUTLASS_RS_DTYPE_BF16,
            _ => cutlass_gemm_sys::CUTLASS_RS_DTYPE_F16,
        };
        let c = c.filter(|_| p.beta != 0.0);
        let ldc = if c.is_some() {
            uc.ld as i64
        } else {
            p.n as i64
        };
        let ptr = |v: u64| v as *const std::ffi::c_void;
        match gemv {
            Gemv::Blockwise => {
                let Some((sa, sb)) = scales else {
                    return Err(Error::InvalidProblem {
                        reason: ProblemRule::ScalesRequired,
                    });
                };
                let args = cutlass_gemm_sys::cutlass_rs_blockwise_gemv_args {
                    m: p.m as i64,
                    n: p.n as i64,
                    k: p.k as i64,
                    x: ptr(a),
                    ldx: ua.ld as i64,
                    scales_x: sa as *const f32,
                    w: ptr(b),
                    ldw: ub.ld as i64,
                    scales_w: sb as *const f32,
                    c: ptr(c.unwrap_or(0)),
                    ldc,
                    d: d as *mut std::ffi::c_void,
                    ldd: ud.ld as i64,
                    alpha: p.alpha,
                    beta: p.beta,
                    device_id: self.device.ordinal as i32,
                    sm_count: self.device.sm_count,
                };
                // SAFETY: the caller's contract (the pointers hold what the problem reaches).
                unsafe { crate::ffi::blockwise_gemv(&args, dtype, Some(stream)) }
            }
            Gemv::Dense => {
                let (row_bias, col_bias) = match self.epilogue.bias {
                    Some(BiasAxis::PerRow) => (bias, 0),
                    Some(BiasAxis::PerColumn) => (0, bias),
                    None => (0, 0),
                };
                let args = cutlass_gemm_sys::cutlass_rs_dense_gemv_args {
                    m: p.m as i64,
                    n: p.n as i64,
                    k: p.k as i64,
                    x: ptr(a),
                    ldx: ua.ld as i64,
                    w: ptr(b),
                    ldw: ub.ld as i64,
                    c: ptr(c.unwrap_or(0)),
                    ldc,
                    d: d as *mut std::ffi::c_void,
                    ldd: ud.ld as i64,
                    alpha: p.alpha,
                    beta: p.beta,
                    device_id: self.device.ordinal as i32,
                    sm_count: self.device.sm_count,
                    row_scale: row_scales as *const f32,
                    col_scale: col_scales as *const f32,
                    row_bias: ptr(row_bias),
                    col_bias: ptr(col_bias),
                    activation: self.epilogue.activation.code(),
                    bias_f32: i32::from(self.epilogue.bias_element == BiasElement::F32),
                };
                // SAFETY: the caller's contract (the pointers hold what the problem reaches).
                unsafe { crate::ffi::dense_gemv(&args, dtype, Some(stream)) }
            }
        }
    }

    /// Stages the operands the plan serves through padded copies, launches the kernel, and copies a
    /// staged D back. `c` is the user's C (`Some(d)` when C is D).
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn launch(
        &self,
        a: u64,
        b: u64,
        c: Option<u64>,
        d: u64,
        scales: Option<(u64, u64)>,
        vectors: [u64; 3],
        aux: u64,
        workspace: u64,
        workspace_bytes: usize,
        stream: sys::CUstream,
    ) -> Result<()> {
        if !self.separate_epilogue {
            return self.launch_kernel(
                a,
                b,
                c,
                d,
                scales,
                vectors,
                aux,
                workspace,
                workspace_bytes,
                stream,
            );
        }
        // The plain kernel, then the bias and activation over the user's D (row-major, one
        // batch: `separate_pass_serves`).
        self.launch_kernel(
            a,
            b,
            c,
            d,
            scales,
            [0; 3],
            0,
            workspace,
            workspace_bytes,
            stream,
        )?;
        let (p, ud) = (&self.problem, self.user[3]);
        let dtype = match TD::DATA_TYPE {
            cutlass_gemm_catalog::DataType::Bf16 => cutlass_gemm_sys::CUTLASS_RS_DTYPE_BF16,
            _ => cutlass_gemm_sys::CUTLASS_RS_DTYPE_F16,
        };
        // SAFETY: the caller's contract: D holds the m x n elements at its leading dimension, the
        // bias n values (checked by the plan's epilogue rules).
        let status = unsafe {
            cutlass_gemm_sys::cutlass_rs_bias_activation(
                d as *mut _,
                p.m as i64,
                p.n as i64,
                ud.ld as i64,
                vectors[0] as *const _,
                i32::from(self.epilogue.bias_element == BiasElement::F32),
                self.epilogue.activation.code(),
                dtype,
                stream as *mut _,
            )
        };
        crate::ffi::check_status("cutlass_rs_bias_activation", status)
    }

    /// [`Gemm::launch`] without the separate epilogue pass.
    #[allow(clippy::too_many_arguments)]
    unsafe fn launch_kernel(
        &self,
        a: u64,
        b: u64,
        c: Option<u64>,
        d: u64,
        scales: Option<(u64, u64)>,
        [bias, row_scales, col_scales]: [u64; 3],
        aux: u64,
        workspace: u64,
        workspace_bytes: usize,
        stream: sys::CUstream,
    ) -> Result<()> {
        if let Some(gemv) = self.gemv {
            return self.launch_gemv(
                gemv,
                a,
                b,
                c,
                d,
                scales,
                [bias, row_scales, col_scales],
                stream,
            );
        }
        let (ka, kb) = if self.swapped { (b, a) } else { (a, b) };
        if let Some(twin) = self.partials {
            // Split-K with a reduction: the slices into the partials, then D from their sum.
            let partials =
                workspace + self.kernel_workspace.next_multiple_of(STAGING_ALIGNMENT) as u64;
            let args = self.partials_args(&twin, ka, kb, partials);
            twin.launch_abi(&args, workspace, workspace_bytes, stream)?;
            let (splits, _, lines, inner) = self.slices();
            let ld_d = self.ops[3].m.ld;
            let (pc, ld_c) = match c {
                Some(c) if self.problem.beta != 0.0 && c != d => (c, self.ops[2].m.ld),
                _ => (d, ld_d),
            };
            return crate::ffi::splitk_reduce(
                partials,
                [splits, lines, inner],
                (self.problem.alpha, self.problem.beta),
                (pc, ld_c),
                (d, ld_d),
                TD::DATA_TYPE,
                stream,
            );
        }
        let c_read = self.problem.beta != 0.0;
        let in_place = c == Some(d);
        // Kernel-side A, B, C, D; C stands for D when it is not read or is D.
        let mut ptrs = [ka, kb, c.unwrap_or(d), d];
        let mut scales = scales;
        let base = workspace + self.kernel_workspace.next_multiple_of(STAGING_ALIGNMENT) as u64;
        for s in self.staging.staged.iter().flatten() {
            let copy = base + s.offset as u64;
            let source = match s.slot {
                Slot::A => Some(ptrs[0]),
                Slot::B => Some(ptrs[1]),
                Slot::C => (c_read && !in_place).then_some(ptrs[2]),
                Slot::D => (c_read && in_place).then_some(d),
                Slot::ScalesA => scales.map(|(sa, _)| sa),
            };
            if let Some(src) = source {
                crate::ffi::copy_matrix(
                    StagingCopy::Padded,
                    src,
                    &s.from,
                    copy,
                    &s.to,
                    s.element_bytes,
                    stream,
                )?;
            }
            match s.slot {
                Slot::A => ptrs[0] = copy,
                Slot::B => ptrs[1] = copy,
                Slot::C => ptrs[2] = copy,
                Slot::D => ptrs[3] = copy,
                Slot::ScalesA => scales = scales.map(|(_, sb)| (copy, sb)),
            }
        }
        let c_is_d = !c_read || in_place || c.is_none();
        if c_is_d {
            ptrs[2] = ptrs[3];
        }
        // The epilogue's vectors in the kernel's view (row scales, column scales, row bias,
        // column bias); those along a padded extent go through zero-filled copies after the
        // operands' staging area.
        let e = self.kernel_epilogue();
        let (bias_rows, bias_cols) = match e.bias {
            Some(BiasAxis::PerRow) => (bias, 0),
            _ => (0, bias),
        };
        let mut vectors = if self.swapped {
            [col_scales, row_scales, bias_cols, bias_rows]
        } else {
            [row_scales, col_scales, bias_rows, bias_cols]
        };
        let mut next = base + self.staging.bytes.next_multiple_of(STAGING_ALIGNMENT) as u64;
        for (v, copy) in vectors.iter_mut().zip(self.staged_vectors()) {
            if let Some(copy) = copy {
                let row = |n: usize| ResolvedMatrix {
                    rows: 1,
                    cols: n,
                    layout: Layout::RowMajor,
                    ld: n,
                    batch_stride: n,
                    batch: 1,
                };
                crate::ffi::copy_matrix(
                    StagingCopy::Padded,
                    *v,
                    &row(copy.len),
                    next,
                    &row(copy.padded),
                    copy.element_bytes,
                    stream,
                )?;
                *v = next;
                next += copy.bytes.next_multiple_of(STAGING_ALIGNMENT) as u64;
            }
        }
        let mut args = self.args(ptrs, c_is_d, scales, &vectors);
        // The auxiliary output's address goes where a block-scaled D's scale factors would: the
        // aux kernels (cutlass_rs_aux_epilogue.hpp) write no block-scaled D, and take Aux with
        // D's geometry.
        if self.epilogue.aux_output {
            args.sfd = aux as *mut _;
        }
        self.kernel
            .launch_abi(&args, workspace, workspace_bytes, stream)?;
        if let Some(s) = self.staging.staged[3] {
            crate::ffi::copy_matrix(
                StagingCopy::Back,
                ptrs[3],
                &s.to,
                d,
                &s.from,
                s.element_bytes,
                stream,
            )?;
        }
        Ok(())
    }

    /// The C ABI arguments from kernel-side pointers (A, B, C, D: A and B already exchanged when
    /// swapped). `c_is_d` gives C D's geometry (C is D, or is not read). `scales` (of A, of B) are
    /// passed to blockwise kernels only.
    fn args(
        &self,
        [ka, kb, pc, d]: [u64; 4],
        c_is_d: bool,
        scales: Option<(u64, u64)>,
        [row_scale, col_scale, row_bias, col_bias]: &[u64; 4],
    ) -> cutlass_rs_gemm_args {
        let (sfa, sfb) = match (self.scaling, scales) {
            (Scaling::Blockwise, Some(sf)) => sf,
            _ => (0, 0),
        };
        let [oa, ob, oc, od] = self.ops;
        let c_geom = if c_is_d { od.m } else { oc.m };
        let raw = crate::ffi::RawArgs {
            m: od.m.rows,
            n: od.m.cols,
            k: oa.m.cols,
            batch: self.problem.batch,
            a: ka,
            lda: oa.m.ld,
            batch_stride_a: oa.m.batch_stride,
            b: kb,
            ldb: ob.m.ld,
            batch_stride_b: ob.m.batch_stride,
            c: pc,
            ldc: c_geom.ld,
            batch_stride_c: c_geom.batch_stride,
            d,
            ldd: od.m.ld,
            batch_stride_d: od.m.batch_stride,
            sfa,
            sfb,
            alpha: self.problem.alpha,
            beta: self.problem.beta,
            schedule: self.schedule,
            programmatic_dependent_launch: self.programmatic_dependent_launch(),
            row_scale: *row_scale,
            col_scale: *col_scale,
            row_bias: *row_bias,
            col_bias: *col_bias,
            activation: self.kernel_epilogue().activation.code(),
            ..Default::default()
        };
        self.kernel.abi_args(&self.device, &raw)
    }

    fn check_stream(&self, stream: &CudaStream) -> Result<()> {
        crate::error::require_stream(stream, self.device.ordinal)
    }

    /// Checks buffer lengths (in elements) against the extents the problem reaches, as
    /// [`Gemm::run`] does before launching: A, B, C (when given) and D.
    pub fn check_lengths(&self, a: usize, b: usize, c: Option<usize>, d: usize) -> Result<()> {
        self.check_len(OperandName::A, a)?;
        self.check_len(OperandName::B, b)?;
        if let Some(c) = c {
            self.check_len(OperandName::C, c)?;
        }
        self.check_len(OperandName::D, d)
    }

    /// The geometry of a user operand (A, B, C or D) as planned.
    pub fn operand(&self, op: OperandName) -> ResolvedMatrix {
        self.user[op_index(op)]
    }

    fn check_len(&self, op: OperandName, len: usize) -> Result<()> {
        require_len(op, len, self.user[op_index(op)].required_len())
    }

    fn check_pointers(&self, a: u64, b: u64, c: Option<u64>, d: u64) -> Result<()> {
        let mut ptrs = vec![
            (OperandName::A, a),
            (OperandName::B, b),
            (OperandName::D, d),
        ];
        if let Some(c) = c {
            ptrs.push((OperandName::C, c));
        }
        for (op, p) in &ptrs {
            crate::error::require_aligned(*op, Quantity::Pointer, *p, POINTER_ALIGNMENT)?;
        }
        let bytes = |op: OperandName| -> u64 {
            let size = match op {
                OperandName::A => std::mem::size_of::<TA>(),
                OperandName::B => std::mem::size_of::<TB>(),
                _ => std::mem::size_of::<TD>(),
            };
            (self.user[op_index(op)].required_len() * size) as u64
        };
        let range = |op: OperandName, p: u64| (p, bytes(op));
        let overlaps = crate::error::overlaps;
        let dr = range(OperandName::D, d);
        for (op, p) in [(OperandName::A, a), (OperandName::B, b)] {
            if overlaps(dr, range(op, p)) {
                return Err(Error::Aliasing {
                    output: OperandName::D,
                    input: op,
                });
            }
        }
        if let Some(c) = c {
            let same_geometry = c == d
                && self.user[2].ld == self.user[3].ld
                && self.user[2].batch_stride == self.user[3].batch_stride;
            if !same_geometry && overlaps(dr, range(OperandName::C, c)) {
                return Err(Error::Aliasing {
                    output: OperandName::D,
                    input: OperandName::C,
                });
            }
        }
        Ok(())
    }
}

impl<TA: Element, TB: Element, TD: Element> Gemm<TA, TB, TD> {
    /// Blockwise scales: `ceil(m / 1) * ceil(k / 128) * batch` for A, `ceil(n / 128) *
    /// ceil(k / 128) * batch` for B (the kernel's M- and N-major layouts, batch after batch).
    pub(crate) fn scale_lens(&self) -> (usize, usize) {
        let bw = self
            .kernel
            .spec
            .blockwise
            .unwrap_or(cutlass_gemm_catalog::catalog::SM90_BLOCKWISE);
        let p = &self.problem;
        let kb = p.k.div_ceil(bw.k as usize);
        (
            p.m.div_ceil(bw.m as usize) * kb * p.batch,
            p.n.div_ceil(bw.n as usize) * kb * p.batch,
        )
    }

    pub(crate) fn check_scale_lens(&self, a: usize, b: usize) -> Result<()> {
        let (ra, rb) = self.scale_lens();
        require_len(OperandName::ScalesA, a, ra)?;
        require_len(OperandName::ScalesB, b, rb)
    }

    /// Checks the fused epilogue's vectors against the plan's [`Epilogue`]
    /// ([`crate::plans::epilogue::check_operands`]).
    fn check_epilogue_operands(&self, vectors: [Option<(u64, usize)>; 3], d: u64) -> Result<()> {
        let d_bytes = (self.user[3].required_len() * std::mem::size_of::<TD>()) as u64;
        crate::plans::epilogue::check_operands(
            &self.epilogue,
            (self.problem.m, self.problem.n),
            std::mem::size_of::<TD>(),
            vectors,
            (d, d_bytes),
        )
    }

    /// The auxiliary output is given exactly when the plan's epilogue writes one.
    fn check_aux_presence(&self, given: bool) -> Result<()> {
        let operand = OperandName::Aux;
        match (self.epilogue.aux_output, given) {
            (true, false) => Err(Error::InvalidProblem {
                reason: ProblemRule::EpilogueOperandMissing { operand },
            }),
            (false, true) => Err(Error::InvalidProblem {
                reason: ProblemRule::EpilogueOperandNotTaken { operand },
            }),
            _ => Ok(()),
        }
    }

    /// The auxiliary output's address: 16-byte aligned, its extent (D's) clear of A, B, C, D and
    /// the epilogue's vectors.
    fn check_aux_pointer(
        &self,
        aux: u64,
        [a, b, d]: [u64; 3],
        c: Option<u64>,
        vectors: [Option<(u64, usize)>; 3],
    ) -> Result<()> {
        crate::error::require_aligned(OperandName::Aux, Quantity::Pointer, aux, POINTER_ALIGNMENT)?;
        let size = |op: OperandName| match op {
            OperandName::A => std::mem::size_of::<TA>(),
            OperandName::B => std::mem::size_of::<TB>(),
            _ => std::mem::size_of::<TD>(),
        };
        let extent = |op: OperandName| (self.user[op_index(op)].required_len() * size(op)) as u64;
        let mine = (aux, extent(OperandName::D));
        let mut others = vec![
            (OperandName::A, (a, extent(OperandName::A))),
            (OperandName::B, (b, extent(OperandName::B))),
            (OperandName::D, (d, extent(OperandName::D))),
        ];
        if let Some(c) = c.filter(|_| self.problem.beta != 0.0) {
            others.push((OperandName::C, (c, extent(OperandName::C))));
        }
        let names = [
            OperandName::Bias,
            OperandName::RowScales,
            OperandName::ColScales,
        ];
        let sizes = [std::mem::size_of::<TD>(), 4, 4];
        for ((name, v), size) in names.into_iter().zip(vectors).zip(sizes) {
            if let Some((p, len)) = v {
                others.push((name, (p, (len * size) as u64)));
            }
        }
        for (op, range) in others {
            if crate::error::overlaps(mine, range) {
                return Err(Error::Aliasing {
                    output: OperandName::Aux,
                    input: op,
                });
            }
        }
        Ok(())
    }

    fn check_scale_pointers(&self, (sa, sb): (u64, u64)) -> Result<()> {
        for (op, p) in [(OperandName::ScalesA, sa), (OperandName::ScalesB, sb)] {
            crate::error::require_aligned(op, Quantity::Pointer, p, POINTER_ALIGNMENT)?;
        }
        Ok(())
    }
}

/// The layouts the catalog's kernels for these types on the device's architecture read (one source
/// of truth: the catalog, not this build). A layout no entry has is an error that names the
/// operand, its layout and the layouts there are, in the user's view, before any kernel is looked
/// up.
/// The kernel's view of the user's operands in one orientation, and the kernel's A and B types.
fn orientation<TA: Element, TB: Element>(
    user: &[ResolvedMatrix; 4],
    swapped: bool,
) -> (
    [KernelOperand; 4],
    cutlass_gemm_catalog::DataType,
    cutlass_gemm_catalog::DataType,
) {
    let op = |user: OperandName, m: ResolvedMatrix| KernelOperand { user, m };
    if swapped {
        (
            [
                op(OperandName::B, user[1].transposed()),
                op(OperandName::A, user[0].transposed()),
                op(OperandName::C, user[2].transposed()),
                op(OperandName::D, user[3].transposed()),
            ],
            TB::DATA_TYPE,
            TA::DATA_TYPE,
        )
    } else {
        (
            [
                op(OperandName::A, user[0]),
                op(OperandName::B, user[1]),
                op(OperandName::C, user[2]),
                op(OperandName::D, user[3]),
            ],
            TA::DATA_TYPE,
            TB::DATA_TYPE,
        )
    }
}

fn check_layout_rules(
    device: &DeviceInfo,
    ta: cutlass_gemm_catalog::DataType,
    tb: cutlass_gemm_catalog::DataType,
    ops: &[KernelOperand; 4],
) -> Result<()> {
    let arch_specs: Vec<KernelSpec> = crate::selection::catalog_entries()
        .iter()
        .copied()
        .filter(|s| s.arch.runs_on(device.compute_capability))
        .filter(|s| s.a.ty == ta && s.b.ty == tb && !s.op_class.is_sparse())
        .filter(|s| !s.kernel_schedule.is_grouped())
        .collect();
    let Some(arch) = arch_specs.first().map(|s| s.arch) else {
        // No kernel for these types on this architecture at all: kernel lookup reports it.
        return Ok(());
    };
    let (la, lb) = (ops[0].m.layout, ops[1].m.layout);
    if arch_specs
        .iter()
        .any(|s| s.a.layout == la && s.b.layout == lb)
    {
        return Ok(());
    }
    // In the user's view: with a column-major D the kernel computes Dᵀ = Bᵀ·Aᵀ, so its A is the
    // user's B transposed and its B the user's A transposed.
    let swapped = ops[0].user == OperandName::B;
    let user = |ka: Layout, kb: Layout| {
        if swapped {
            (kb.transposed(), ka.transposed())
        } else {
            (ka, kb)
        }
    };
    let allowed: LayoutPairs = arch_specs
        .iter()
        .map(|s| user(s.a.layout, s.b.layout))
        .collect();
    let (ua, ub) = user(la, lb);
    // Blame A when no allowed pair has A's layout, else B.
    let a_ok = arch_specs
        .iter()
        .any(|s| user(s.a.layout, s.b.layout).0 == ua);
    let (op, layout) = if a_ok {
        (OperandName::B, ub)
    } else {
        (OperandName::A, ua)
    };
    Err(Error::UnsupportedLayout {
        operand: op,
        rule: LayoutRule::KernelLayouts {
            layout,
            a: if swapped { tb } else { ta },
            b: if swapped { ta } else { tb },
            arch,
            d: if swapped {
                ops[3].m.layout.transposed()
            } else {
                ops[3].m.layout
            },
            allowed,
        },
    })
}

/// The device address of a launch's workspace (0 when the kernel needs none), allocating it on
/// `stream` into `managed` for [`Workspace::Managed`] (zero-filled when `zero_managed`); a caller's
/// buffer must hold `size` bytes and be 16-byte aligned. The guard keeps the buffer's stream
/// ordering until the launch is queued.
///
/// The grouped plans zero their managed workspace: CUTLASS's SM90 grouped kernels publish their
/// per-SM TMA descriptors into it with atomic exchanges, whose discarded old values
/// compute-sanitizer's initcheck would otherwise report as reads of uninitialized memory.
pub(crate) fn workspace_ptr<'g, 'w: 'g>(
    stream: &'g Arc<CudaStream>,
    workspace: Workspace<'w>,
    size: usize,
    managed: &'g mut Option<cudarc::driver::CudaSlice<u8>>,
    zero_managed: bool,
) -> Result<(u64, Option<cudarc::driver::SyncOnDrop<'g>>)> {
    // A caller's buffer belongs to the stream's device also when this kernel needs none of it.
    if let Workspace::Buffer(w) = &workspace {
        require_device(OperandName::Workspace, &**w, stream.context().ordinal())?;
    }
    Ok(match workspace {
        _ if size == 0 => (0, None),
        Workspace::Managed => {
            let buf = if zero_managed {
                stream.alloc_zeros::<u8>(size)
            } else {
                // SAFETY: the kernel writes the workspace before reading it.
                unsafe { stream.alloc::<u8>(size) }
            }
            .map_err(|e| out_of_memory(e, size))?;
            let (p, g) = managed.insert(buf).device_ptr(stream);
            (p, Some(g))
        }
        Workspace::Buffer(w) => {
            require_len(OperandName::Workspace, w.len(), size)?;
            let (p, g) = w.device_ptr_mut(stream);
            crate::error::require_aligned(
                OperandName::Workspace,
                Quantity::Pointer,
                p,
                POINTER_ALIGNMENT,
            )?;
            (p, Some(g))
        }
    })
}

/// A failed workspace allocation: out of memory is [`Error::OutOfMemory`] (nothing was launched,
/// the plan stays usable), any other failure the driver's error.
fn out_of_memory(e: cudarc::driver::DriverError, bytes: usize) -> Error {
    if e.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
        Error::OutOfMemory {
            operand: OperandName::Workspace,
            bytes,
        }
    } else {
        Error::Cuda(e)
    }
}

fn op_index(op: OperandName) -> usize {
    match op {
        OperandName::A => 0,
        OperandName::B => 1,
        OperandName::C => 2,
        _ => 3,
    }
}

/// Alignment rules of the chosen kernel, in the kernel's view of each operand; errors name the
/// user's operand.
fn check_alignment(
    spec: &KernelSpec,
    ops: &[KernelOperand; 4],
    swapped: bool,
    batch: usize,
) -> Result<()> {
    let kernel_ops = [spec.a, spec.b, spec.c, spec.d];
    // In the user's order (A, B, then D before C: C is optional, and its rules are D's), whichever
    // orientation the kernel computes: the first error names the same operand either way.
    let order = if swapped { [1, 0, 3, 2] } else { [0, 1, 3, 2] };
    for i in order {
        let (o, k) = (&ops[i], &kernel_ops[i]);
        let align = k.align as usize;
        let size = (k.ty.bits() / 8) as u128;
        let contiguous = o.m.contiguous();
        // In the user's view of this operand the contiguous dimension is the same extent.
        let dim = match (o.user, o.m.layout, swapped) {
            (OperandName::A, Layout::RowMajor, false)
            | (OperandName::A, Layout::ColumnMajor, true) => Extent::K,
            (OperandName::A, _, _) => Extent::M,
            (OperandName::B, Layout::ColumnMajor, false)
            | (OperandName::B, Layout::RowMajor, true) => Extent::K,
            (OperandName::B, _, _) => Extent::N,
            (_, Layout::RowMajor, false) | (_, Layout::ColumnMajor, true) => Extent::N,
            _ => Extent::M,
        };
        if contiguous % align != 0 {
            return Err(Error::Misaligned {
                operand: o.user,
                what: Quantity::Extent(dim),
                value: contiguous as u64,
                required: align as u64,
            });
        }
        if o.m.ld % align != 0 {
            return Err(Error::Misaligned {
                operand: o.user,
                what: Quantity::LeadingDimension,
                value: o.m.ld as u64,
                required: align as u64,
            });
        }
        if batch > 1 && o.m.batch_stride % align != 0 {
            return Err(Error::Misaligned {
                operand: o.user,
                what: Quantity::BatchStride,
                value: o.m.batch_stride as u64,
                required: align as u64,
            });
        }
        if o.m.ld as u128 * size >= MAX_STRIDE_BYTES
            || o.m.batch_stride as u128 * size >= MAX_STRIDE_BYTES
        {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::StrideTooLarge { operand: o.user },
            });
        }
    }
    Ok(())
}

/// An epilogue vector the plan copies into its workspace, zero-filled to the kernel's padded extent.
#[derive(Clone, Copy, Debug)]
struct VectorCopy {
    /// Elements the user's vector has (the user's extent).
    len: usize,
    /// Elements the kernel reads (its padded extent).
    padded: usize,
    element_bytes: usize,
    bytes: usize,
}

/// Convenience: plan and run once, with a managed workspace.
pub fn gemm<TA: Element, TB: Element, TD: Element>(
    stream: &Arc<CudaStream>,
    problem: &GemmProblem,
    a: &dyn DevicePtr<TA>,
    b: &dyn DevicePtr<TB>,
    c: Option<&dyn DevicePtr<TD>>,
    d: &mut dyn DevicePtrMut<TD>,
) -> Result<()> {
    let plan = Gemm::<TA, TB, TD>::new(stream.context(), problem)?;
    plan.run(stream, a, b, c, d, Workspace::Managed)
}

/// The device facts of a context, for [`Gemm::plan`].
pub fn device_info(ctx: &CudaContext) -> Result<DeviceInfo> {
    DeviceInfo::query(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: DeviceInfo = DeviceInfo {
        ordinal: 0,
        compute_capability: (9, 0),
        sm_count: 132,
    };

    /// What reaches the C ABI: the launch flag follows the plan's setting and the kernel's support.
    #[test]
    fn programmatic_dependent_launch_reaches_the_abi_where_the_kernel_has_it() {
        let p = GemmProblem::new(256, 256, 256);
        let mut seen = [false; 2];
        for k in crate::built_kernels()
            .iter()
            .filter(|k| k.spec.arch == cutlass_gemm_catalog::Arch::Sm90a)
        {
            let Ok(g) = Gemm::<half::bf16, half::bf16, half::bf16>::plan(H100, &p, Some(k.name))
            else {
                continue;
            };
            let supported = k.spec.supports_programmatic_dependent_launch();
            seen[usize::from(supported)] = true;
            assert_eq!(g.programmatic_dependent_launch(), supported, "{}", k.name);
            let flags = |g: &Gemm<half::bf16, half::bf16, half::bf16>| {
                g.args([16; 4], true, None, &[0; 4]).launch_flags
            };
            let on = if supported {
                cutlass_gemm_sys::CUTLASS_RS_LAUNCH_PDL
            } else {
                0
            };
            assert_eq!(flags(&g), on, "{}", k.name);
            let off = g.with_programmatic_dependent_launch(false);
            assert!(!off.programmatic_dependent_launch());
            assert_eq!(flags(&off), 0, "{}", k.name);
        }
        // The default build has both: persistent bf16 kernels and a swapped stream-K one.
        assert_eq!(seen, [true, true]);
    }

    /// Fused epilogues: a plain GEMM runs on a kernel with CUTLASS's epilogue; with an epilogue
    /// the plan moves to the same tile's fused twin (the default build has one for its main
    /// tiles), or to another fused kernel; a kernel without the fusion that the caller pinned is
    /// refused; vectors along a padded extent get workspace.
    #[test]
    fn epilogues_move_to_fused_kernels() {
        use crate::plans::epilogue::{Activation, Epilogue};
        type G = Gemm<half::bf16, half::bf16, half::bf16>;
        let gelu = Epilogue::bias().with_activation(Activation::GeluTanh);
        let p = GemmProblem::new(4096, 4096, 4096);
        let g = G::plan(H100, &p, None).unwrap();
        assert!(!g.kernel_spec().fusion.is_fused(), "{}", g.kernel_name());
        let f = g.clone().with_epilogue(gelu).unwrap();
        assert!(f.kernel_spec().fusion.is_fused());
        assert_eq!(f.epilogue(), gelu);
        assert_eq!(
            f.kernel_spec().tile,
            g.kernel_spec().tile,
            "the same tile with the fused epilogue"
        );
        assert_eq!(f.args([16; 4], true, None, &[0; 4]).activation, 2);
        // Named, a fused kernel runs a plain GEMM too.
        let named = G::plan(H100, &p, Some(f.kernel_name())).unwrap();
        assert_eq!(named.kernel_name(), f.kernel_name());

        let p = GemmProblem::new(512, 50257, 4096);
        let unaligned = crate::built_kernels()
            .iter()
            .find(|k| {
                k.spec.d.align == 1
                    && k.spec.a.ty == cutlass_gemm_catalog::DataType::Bf16
                    && k.spec.tile[0] == 128
            })
            .expect("the default build has alignment-1 bf16 kernels");
        let g = G::plan(H100, &p, Some(unaligned.name)).unwrap();
        assert!(!g.kernel_spec().fusion.is_fused());
        assert!(g.staged_operands().is_empty());
        match g.clone().with_epilogue(Epilogue::bias()) {
            Err(Error::KernelMismatch {
                reason: KernelRule::NoFusedEpilogue,
                ..
            }) => {}
            other => panic!("a pinned kernel without the fusion: {other:?}"),
        }
        let unpinned = G::plan(H100, &p, None).unwrap();
        // The fused kernels would copy B (50257 x 4096, larger than D): a separate pass after the
        // plain kernel, whose vectors are not staged.
        let separate = unpinned.clone().with_epilogue(Epilogue::bias()).unwrap();
        assert!(separate.epilogue_is_separate());
        assert_eq!(separate.kernel_name(), unpinned.kernel_name());
        assert!(separate.staged_vectors().iter().all(Option::is_none));
        assert_eq!(separate.args([16; 4], true, None, &[0; 4]).activation, 0);
        // In the kernel: a fused one, through padded copies.
        let f = unpinned.with_epilogue_in_kernel(Epilogue::bias()).unwrap();
        assert!(f.kernel_spec().fusion.is_fused() && !f.epilogue_is_separate());
        assert!(f.staged_operands().contains(&OperandName::D));
        // The bias (50257 values) is copied to the kernel's padded n.
        let vectors = f.staged_vectors();
        let bias = vectors[3].expect("the column bias is staged");
        assert_eq!((bias.len, bias.padded % 8), (50257, 0));
        assert!(f.workspace_size() >= f.kernel_workspace + bias.bytes);
        // Back to no epilogue: the same kernel, no vector copies.
        let plain = f.clone().with_epilogue(Epilogue::NONE).unwrap();
        assert_eq!(plain.kernel_name(), f.kernel_name());
        assert!(plain.staged_vectors().iter().all(Option::is_none));
    }
}
