//! Gated linear units in the GEMM: an MLP's gate and up projections and their SwiGLU (GeGLU,
//! ReGLU) in one kernel.
//!
//! A Llama-style MLP computes `act(x·W_gateᵀ) ⊙ (x·W_upᵀ)` before its down projection: two GEMMs
//! and an elementwise pass over two `m x n` results, or one GEMM over the concatenated weight and
//! the same pass. [`GatedGemm`] computes it in one GEMM whose epilogue multiplies each gate value's
//! activation by its up value and writes only the `m x n` product:
//!
//! ```text
//! h = alpha · row_scale[i] · col_scale[c] · (x·Wᵀ)[i][c] + bias[c]      (c < 2n, f32)
//! D[i][8j + t] = act(h[i][16j + t]) · h[i][16j + 8 + t]                (t < 8)
//! ```
//!
//! where `W` is the `2n x k` weight that [`interleave_gate_up`] makes from the two `n x k`
//! weights once at load time: blocks of 8 gate rows and 8 up rows in turn, so that each thread of
//! the warpgroup MMA holds a gate value and its up value in registers. The bias and the column
//! scales (optional, as the scales per row) are interleaved the same way. `act` is any
//! [`Activation`]: SiLU gives SwiGLU, GELU GeGLU, ReLU ReGLU.
//!
//! The kernels are the catalog's [`cutlass_gemm_catalog::Fusion::Gated`] entries (SM90, in the
//! default set: three tiles each for bf16 and f16, two for e4m3 inputs with a bf16 output). With
//! FP8 inputs, `alpha` carries the tensor-wise scales and the epilogue's row and column scales
//! the rowwise ones (each column scale interleaved as the weight).

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, DevicePtr, DevicePtrMut};
use cutlass_gemm_catalog::{KernelSpec, Layout};

use crate::error::{
    require_device, require_len, Error, Extent, KernelRule, LayoutRule, OperandName, ProblemRule,
    Quantity, Result, Scalar,
};
use crate::ffi::{DeviceInfo, Kernel, RawArgs};
use crate::formats::element::Element;
use crate::plans::epilogue::{
    check_operands, row_major_reach, Activation, BiasAxis, Epilogue, EpilogueOperands,
};
use crate::plans::gemm::{workspace_ptr, Workspace, MAX_STRIDE_BYTES, POINTER_ALIGNMENT};
use crate::plans::problem::{GemmProblem, ResolvedMatrix, MAX_EXTENT};
use crate::selection::{heuristic, select, ArchPolicy};

/// Rows of the weight per gate (or up) block of [`interleave_gate_up`].
pub const GATE_BLOCK: usize = 8;

/// A planned gated GEMM: `D = act(x·W_gateᵀ + b_gate) ⊙ (x·W_upᵀ + b_up)` in one kernel, with
/// the weight interleaved by [`interleave_gate_up`] (see the [module](self) docs). `T` is the
/// type of the activations and the weight, `O` of D and the bias (`T` itself for bf16 and f16;
/// bf16 for e4m3 inputs).
#[derive(Clone, Debug)]
pub struct GatedGemm<T: Element, O: Element = T> {
    problem: GemmProblem,
    device: DeviceInfo,
    kernel: Kernel,
    /// A (m x k), the interleaved weight as B (k x 2n), D (m x n), resolved.
    ops: [ResolvedMatrix; 3],
    epilogue: Epilogue,
    workspace_size: usize,
    dependent_launch: bool,
    _types: std::marker::PhantomData<(T, O)>,
}

impl<T: Element, O: Element> GatedGemm<T, O> {
    /// Plans on `ctx`'s device, choosing among the gated kernels of this build. `problem.n` is
    /// the number of outputs (D's columns); B is the interleaved weight with `2n` columns.
    pub fn new(ctx: &CudaContext, problem: &GemmProblem, activation: Activation) -> Result<Self> {
        Self::plan(DeviceInfo::query(ctx)?, problem, activation, None)
    }

    /// Plans for a described device without touching it; `kernel` names a gated kernel, or
    /// `None` chooses one.
    ///
    /// Rules, each a typed error: A row-major, B column-major (the interleaved weight `2n x k`
    /// row-major), D row-major ([`LayoutRule::GatedLayouts`]); `n` a multiple of 8
    /// ([`ProblemRule::GatedOutputs`]); no C (`beta` 0); A's and B's leading dimensions, batch
    /// strides and `k` multiples of 16 bytes (TMA's rule: 8 bf16 or f16 elements, 16 e4m3), D's
    /// of 2 elements (the epilogue stores pairs of outputs).
    pub fn plan(
        device: DeviceInfo,
        problem: &GemmProblem,
        activation: Activation,
        kernel: Option<&str>,
    ) -> Result<Self> {
        problem.check()?;
        for (operand, layout, want) in [
            (OperandName::A, problem.a.layout, Layout::RowMajor),
            (OperandName::B, problem.b.layout, Layout::ColumnMajor),
            (OperandName::D, problem.d.layout, Layout::RowMajor),
        ] {
            if layout != want {
                return Err(Error::UnsupportedLayout {
                    operand,
                    rule: LayoutRule::GatedLayouts,
                });
            }
        }
        if problem.n % GATE_BLOCK != 0 {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::GatedOutputs { n: problem.n },
            });
        }
        if 2 * problem.n > MAX_EXTENT {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::ExtentTooLarge {
                    extent: Extent::N,
                    value: 2 * problem.n,
                },
            });
        }
        if problem.beta != 0.0 {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::BetaWithoutC {
                    beta: Scalar(problem.beta),
                },
            });
        }
        let gemm = GemmProblem {
            n: 2 * problem.n,
            ..*problem
        };
        let ops = [
            gemm.resolve(OperandName::A)?,
            gemm.resolve(OperandName::B)?,
            problem.resolve(OperandName::D)?,
        ];
        // TMA reads A and B: 16-byte rows (k first, the extent every default leading dimension
        // follows); the epilogue stores D in pairs.
        let bytes = std::mem::size_of::<T>();
        let wide = (16 / bytes) as u64;
        crate::error::require_aligned(
            OperandName::A,
            Quantity::Extent(Extent::K),
            problem.k as u64,
            wide,
        )?;
        for (operand, m, align) in [
            (OperandName::A, &ops[0], wide),
            (OperandName::B, &ops[1], wide),
            (OperandName::D, &ops[2], 2),
        ] {
            crate::error::require_aligned(operand, Quantity::LeadingDimension, m.ld as u64, align)?;
            if problem.batch > 1 {
                crate::error::require_aligned(
                    operand,
                    Quantity::BatchStride,
                    m.batch_stride as u64,
                    align,
                )?;
            }
        }
        // TMA addresses A's and B's strides in fewer than 2^40 bytes.
        for (operand, m) in [(OperandName::A, &ops[0]), (OperandName::B, &ops[1])] {
            let size = bytes as u128;
            if m.ld as u128 * size >= MAX_STRIDE_BYTES
                || m.batch_stride as u128 * size >= MAX_STRIDE_BYTES
            {
                return Err(Error::InvalidProblem {
                    reason: ProblemRule::StrideTooLarge { operand },
                });
            }
        }
        let serves = |s: &KernelSpec| -> std::result::Result<(), KernelRule> {
            let cutlass_gemm_catalog::Fusion::Gated { bias } = s.fusion else {
                return Err(KernelRule::Gated { kernel: false });
            };
            for (operand, o, ty, layout) in [
                (OperandName::A, s.a, T::DATA_TYPE, Layout::RowMajor),
                (OperandName::B, s.b, T::DATA_TYPE, Layout::ColumnMajor),
                (OperandName::D, s.d, O::DATA_TYPE, Layout::RowMajor),
            ] {
                if (o.ty, o.layout) != (ty, layout) {
                    return Err(KernelRule::Operand {
                        operand,
                        kernel: (o.ty, o.layout),
                        required: (ty, layout),
                    });
                }
            }
            if bias != O::DATA_TYPE {
                return Err(KernelRule::BiasType {
                    kernel: bias,
                    required: O::DATA_TYPE,
                });
            }
            Ok(())
        };
        let request = format!(
            "gated: A {} row-major x B {} column-major (interleaved, 2n = {}) -> D {} row-major",
            T::DATA_TYPE,
            T::DATA_TYPE,
            gemm.n,
            O::DATA_TYPE
        );
        let kernel = select(
            &device,
            kernel,
            ArchPolicy::Runnable,
            &serves,
            &request,
            &|runnable: &[Kernel]| {
                heuristic::choose(
                    runnable,
                    problem.k,
                    problem.batch,
                    device.sm_count,
                    &|_| (problem.m, gemm.n),
                    &|_| 0.0,
                )
            },
        )?;
        let mut plan = GatedGemm {
            problem: *problem,
            device,
            kernel,
            ops,
            epilogue: Epilogue::NONE.with_activation(activation),
            workspace_size: 0,
            dependent_launch: false,
            _types: std::marker::PhantomData,
        };
        plan.workspace_size = plan
            .kernel
            .workspace_bytes(&plan.device, &plan.raw([0; 3], [0; 3]))?;
        Ok(plan)
    }

    /// The plan with these epilogue vectors and activation: a bias per column of the interleaved
    /// weight (`2n` values, interleaved as the weight: [`interleave_gate_up`] on the two biases
    /// as `n x 1` matrices), f32 scales per row (`m`) and per column (`2n`, interleaved). A bias
    /// per row is refused ([`ProblemRule::GatedRowBias`]).
    pub fn with_epilogue(self, epilogue: Epilogue) -> Result<Self> {
        crate::plans::epilogue::refuse_aux_output(&epilogue)?;
        if epilogue.bias == Some(BiasAxis::PerRow) {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::GatedRowBias,
            });
        }
        // The gated kernels read a bias of D's type (an f32 one: KernelRule::BiasType).
        if let (Some(required), cutlass_gemm_catalog::Fusion::Gated { bias }) =
            (epilogue.bias_type(O::DATA_TYPE), self.kernel.spec.fusion)
        {
            if required != bias {
                return Err(Error::KernelMismatch {
                    name: self.kernel.name.into(),
                    reason: KernelRule::BiasType {
                        kernel: bias,
                        required,
                    },
                });
            }
        }
        Ok(GatedGemm { epilogue, ..self })
    }

    /// The plan with programmatic dependent launch on or off (off by default; see
    /// [`crate::Gemm::with_programmatic_dependent_launch`]).
    pub fn with_programmatic_dependent_launch(self, on: bool) -> Self {
        GatedGemm {
            dependent_launch: on,
            ..self
        }
    }

    /// The plan's epilogue (its activation, and which vectors it reads).
    pub fn epilogue(&self) -> Epilogue {
        self.epilogue
    }

    /// The chosen kernel's name.
    pub fn kernel_name(&self) -> &'static str {
        self.kernel.name
    }

    /// The chosen kernel's spec.
    pub fn kernel_spec(&self) -> &KernelSpec {
        &self.kernel.spec
    }

    /// The problem (`n` the outputs).
    pub fn problem(&self) -> &GemmProblem {
        &self.problem
    }

    /// Bytes of workspace a launch needs.
    pub fn workspace_size(&self) -> usize {
        self.workspace_size
    }

    /// The elements each operand must hold: A, the interleaved weight, D.
    pub fn required_lens(&self) -> [usize; 3] {
        self.ops.map(|m| m.required_len())
    }

    /// `D = act(h_gate) ⊙ h_up` for activations `x` (A), the interleaved weight `w` (B) and the
    /// epilogue's vectors (exactly those the plan's epilogue names; see
    /// [`GatedGemm::with_epilogue`]). Every operand is checked (device, length, 16-byte
    /// alignment; D overlapping no input) before the launch.
    pub fn run(
        &self,
        stream: &Arc<CudaStream>,
        x: &dyn DevicePtr<T>,
        w: &dyn DevicePtr<T>,
        d: &mut dyn DevicePtrMut<O>,
        vectors: &EpilogueOperands<'_, O>,
        workspace: Workspace<'_>,
    ) -> Result<()> {
        let device = self.device.ordinal;
        crate::error::require_stream(stream, device)?;
        require_device(OperandName::A, x, device)?;
        require_device(OperandName::B, w, device)?;
        require_device(OperandName::D, d, device)?;
        vectors.check(&self.epilogue, O::DATA_TYPE, device)?;
        let [la, lb, ld] = self.required_lens();
        require_len(OperandName::A, x.len(), la)?;
        require_len(OperandName::B, w.len(), lb)?;
        require_len(OperandName::D, d.len(), ld)?;
        let (pa, _ga) = x.device_ptr(stream);
        let (pb, _gb) = w.device_ptr(stream);
        let (pd, _gd) = d.device_ptr_mut(stream);
        let sizes = [size_of::<T>(), size_of::<T>(), size_of::<O>()];
        let spans = [0, 1, 2].map(|i| self.ops[i].required_len() as u64 * sizes[i] as u64);
        for (operand, p) in [
            (OperandName::A, pa),
            (OperandName::B, pb),
            (OperandName::D, pd),
        ] {
            crate::error::require_aligned(operand, Quantity::Pointer, p, POINTER_ALIGNMENT)?;
        }
        for (input, p, span) in [
            (OperandName::A, pa, spans[0]),
            (OperandName::B, pb, spans[1]),
        ] {
            if crate::error::overlaps((p, span), (pd, spans[2])) {
                return Err(Error::Aliasing {
                    output: OperandName::D,
                    input,
                });
            }
        }
        let (given, _gv) = vectors.addresses(stream);
        // The bias and column scales run along the GEMM's 2n columns.
        check_operands(
            &self.epilogue,
            (self.problem.m, 2 * self.problem.n),
            size_of::<O>(),
            given,
            (pd, spans[2]),
        )?;
        let mut managed = None;
        let (pw, _gw) = workspace_ptr(stream, workspace, self.workspace_size, &mut managed, false)?;
        let args = self.raw([pa, pb, pd], given.map(|v| v.map_or(0, |(p, _)| p)));
        let abi = self.kernel.abi_args(&self.device, &args);
        // SAFETY: every pointer was checked against the extent the problem reaches, its alignment
        // and aliasing; the guards keep the buffers' stream ordering until the launch is queued.
        unsafe {
            self.kernel
                .launch_abi(&abi, pw, self.workspace_size, stream.cu_stream())
        }
    }

    /// The kernel's arguments: the GEMM's n is 2n; C is D (not read).
    fn raw(&self, [a, b, d]: [u64; 3], [bias, row_scale, col_scale]: [u64; 3]) -> RawArgs {
        let [oa, ob, od] = self.ops;
        RawArgs {
            m: self.problem.m,
            n: 2 * self.problem.n,
            k: self.problem.k,
            batch: self.problem.batch,
            a,
            lda: oa.ld,
            batch_stride_a: oa.batch_stride,
            b,
            ldb: ob.ld,
            batch_stride_b: ob.batch_stride,
            c: d,
            ldc: od.ld,
            batch_stride_c: od.batch_stride,
            d,
            ldd: od.ld,
            batch_stride_d: od.batch_stride,
            alpha: self.problem.alpha,
            programmatic_dependent_launch: self.dependent_launch,
            row_scale,
            col_scale,
            col_bias: bias,
            activation: self.epilogue.activation.code(),
            ..Default::default()
        }
    }
}

/// `out[r][j] = act(h[r][j]) · h[r][cols + j]` as a separate pass: the gated epilogue's unfused
/// twin, after a plain GEMM over the concatenated (not interleaved) gate and up weights, whose
/// `rows x 2·cols` result `h` (row-major, leading dimension `ld_h`) holds each row's gate values,
/// then its up values. `out` is `rows x cols` row-major with leading dimension `ld_out`; bf16 or
/// f16, f32 arithmetic with the fused epilogue's activations. For comparisons (`cutlass-profiler
/// profile --epilogue swiglu`) and for results a gated kernel did not make.
pub fn apply_unfused_gated<T: Element>(
    stream: &Arc<CudaStream>,
    h: &dyn DevicePtr<T>,
    (rows, cols, ld_h): (usize, usize, usize),
    out: &mut dyn DevicePtrMut<T>,
    ld_out: usize,
    activation: Activation,
) -> Result<()> {
    let dtype = match T::DATA_TYPE {
        cutlass_gemm_catalog::DataType::Bf16 => cutlass_gemm_sys::CUTLASS_RS_DTYPE_BF16,
        cutlass_gemm_catalog::DataType::F16 => cutlass_gemm_sys::CUTLASS_RS_DTYPE_F16,
        other => {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::UnfusedEpilogueType(other),
            })
        }
    };
    let overflow = |operand| Error::InvalidProblem {
        reason: ProblemRule::OperandReachOverflows { operand },
    };
    let width = cols
        .checked_mul(2)
        .ok_or_else(|| overflow(OperandName::C))?;
    for (operand, ld, min) in [
        (OperandName::C, ld_h, width),
        (OperandName::D, ld_out, cols),
    ] {
        if ld < min {
            return Err(Error::LeadingDimension {
                operand,
                ld,
                min,
                layout: Layout::RowMajor,
                rows,
                cols: min,
            });
        }
    }
    let (reach_h, reach_out) = (
        row_major_reach::<T>(OperandName::C, rows, ld_h, width)?,
        row_major_reach::<T>(OperandName::D, rows, ld_out, cols)?,
    );
    require_len(OperandName::C, h.len(), reach_h)?;
    require_len(OperandName::D, out.len(), reach_out)?;
    let device = stream.context().ordinal();
    require_device(OperandName::C, h, device)?;
    require_device(OperandName::D, out, device)?;
    crate::error::require_stream(stream, device)?;
    let (ph, _gh) = h.device_ptr(stream);
    let (po, _go) = out.device_ptr_mut(stream);
    let size = std::mem::size_of::<T>() as u64;
    if crate::error::overlaps((ph, reach_h as u64 * size), (po, reach_out as u64 * size)) {
        return Err(Error::Aliasing {
            output: OperandName::D,
            input: OperandName::C,
        });
    }
    // SAFETY: h and out hold the extents checked above and do not overlap; the guards keep the
    // buffers' stream ordering until the launch is queued.
    let status = unsafe {
        cutlass_gemm_sys::cutlass_rs_gated_activation(
            ph as *const _,
            rows as i64,
            cols as i64,
            ld_h as i64,
            po as *mut _,
            ld_out as i64,
            activation.code(),
            dtype,
            stream.cu_stream() as *mut _,
        )
    };
    crate::ffi::check_status("cutlass_rs_gated_activation", status)
}

/// The weight of a gated GEMM from a gate and an up projection, each `n x k` row-major (as a
/// Linear layer stores them; `n` a multiple of 8): `2n x k`, blocks of 8 gate rows and 8 up rows
/// in turn. With `k = 1` it interleaves two biases (or column scales) the same way.
pub fn interleave_gate_up<T: Copy>(gate: &[T], up: &[T], n: usize, k: usize) -> Result<Vec<T>> {
    if n % GATE_BLOCK != 0 {
        return Err(Error::InvalidProblem {
            reason: ProblemRule::GatedOutputs { n },
        });
    }
    if k == 0 {
        return Err(Error::InvalidProblem {
            reason: ProblemRule::ZeroExtent(Extent::K),
        });
    }
    let len = n.checked_mul(k).ok_or(Error::InvalidProblem {
        reason: ProblemRule::OperandReachOverflows {
            operand: OperandName::B,
        },
    })?;
    require_len(OperandName::B, gate.len(), len)?;
    require_len(OperandName::B, up.len(), len)?;
    let block = GATE_BLOCK * k;
    let mut out = Vec::with_capacity(2 * len);
    for (g, u) in gate[..len].chunks(block).zip(up[..len].chunks(block)) {
        out.extend_from_slice(g);
        out.extend_from_slice(u);
    }
    Ok(out)
}

/// The column of the interleaved weight that holds output `j`'s gate (`up` false) or up value.
pub fn interleaved_column(j: usize, up: bool) -> usize {
    2 * GATE_BLOCK * (j / GATE_BLOCK) + j % GATE_BLOCK + if up { GATE_BLOCK } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaving_puts_blocks_of_eight_in_turn() {
        let (n, k) = (16, 3);
        let gate: Vec<u32> = (0..n * k).map(|i| i as u32).collect();
        let up: Vec<u32> = (0..n * k).map(|i| 1000 + i as u32).collect();
        let w = interleave_gate_up(&gate, &up, n, k).unwrap();
        assert_eq!(w.len(), 2 * n * k);
        for j in 0..n {
            for c in 0..k {
                assert_eq!(w[interleaved_column(j, false) * k + c], gate[j * k + c]);
                assert_eq!(w[interleaved_column(j, true) * k + c], up[j * k + c]);
            }
        }
        assert!(matches!(
            interleave_gate_up(&gate, &up, 16, 0),
            Err(Error::InvalidProblem {
                reason: ProblemRule::ZeroExtent(Extent::K)
            })
        ));
        assert!(matches!(
            interleave_gate_up(&gate, &up, 12, 4),
            Err(Error::InvalidProblem {
                reason: ProblemRule::GatedOutputs { n: 12 }
            })
        ));
    }
}
