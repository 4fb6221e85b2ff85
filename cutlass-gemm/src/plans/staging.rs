//! Operands the TMA kernels cannot address in place, and the padded copies that serve them.
//!
//! Hopper's TMA reads and writes global memory through descriptors whose strides must be multiples
//! of 16 bytes, and CUTLASS's kernels also want each operand's contiguous extent to be a multiple
//! of their alignment (8 elements for 16-bit types, 16 for FP8, 4 for tf32). Shapes every model
//! has break those rules: a vocabulary of 50257, k = 4095, a 2 x 2 product, a leading dimension of
//! 1001, or m = 257 with blockwise scales (whose M-major rows of m floats TMA loads).
//!
//! Such a GEMM still runs on the TMA kernels: the plan pads the offending extents of the kernel's
//! problem to the alignment, copies each operand that has a padded extent or a stride TMA cannot
//! take into an aligned buffer in the workspace (zeros in the padding: they add nothing to a dot
//! product, and padded rows and columns of D are never copied back), runs the kernel there and
//! copies D back. The cost is one extra pass over the staged operands, and only they are staged:
//! with n = 50257 in a TN GEMM that is B and D, never A.

use cutlass_gemm_catalog::{KernelSpec, Layout};

use crate::error::OperandName;
use crate::plans::problem::ResolvedMatrix;

/// Workspace offsets of staged operands are multiples of this many bytes.
pub(crate) const STAGING_ALIGNMENT: usize = 256;

/// The most bytes one padded copy may take (2^60: no device holds it, and five such copies and
/// their offsets still fit a `usize`, so the workspace arithmetic never wraps).
const MAX_COPY_BYTES: u128 = 1 << 60;

/// The kernel's operand a staged copy stands in for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// The kernel's A (the user's B when the plan is swapped).
    A,
    /// The kernel's B.
    B,
    /// C.
    C,
    /// D: staged before the launch only when it is also C (in place), copied back after.
    D,
    /// A's blockwise scales (M-major rows of m floats per 128-deep k-block).
    ScalesA,
}

/// One operand served through a padded copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Staged {
    pub(crate) slot: Slot,
    /// The user's operand (in the kernel's view).
    pub(crate) user: OperandName,
    /// Its geometry as the user laid it out (in the kernel's view).
    pub(crate) from: ResolvedMatrix,
    /// The padded copy's geometry, which the kernel reads or writes.
    pub(crate) to: ResolvedMatrix,
    /// Bytes per element.
    pub(crate) element_bytes: usize,
    /// Byte offset of the copy from the start of the staging area.
    pub(crate) offset: usize,
}

impl Staged {
    /// Bytes of the padded copy.
    pub(crate) fn bytes(&self) -> usize {
        self.to.required_len() * self.element_bytes
    }
}

/// The kernel's view of a GEMM after staging: its operands' geometries (padded where staged) and
/// the staged copies, in slot order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StagingPlan {
    /// Kernel-side A, B, C and D as the kernel addresses them.
    pub(crate) ops: [ResolvedMatrix; 4],
    /// The staged copies (at most one per slot).
    pub(crate) staged: [Option<Staged>; 5],
    /// Bytes of the staging area.
    pub(crate) bytes: usize,
    /// The first operand whose padded copy would pass [`MAX_COPY_BYTES`] (not staged; the plan
    /// refuses the problem with `ProblemRule::OperandReachOverflows`).
    pub(crate) overflow: Option<OperandName>,
}

/// Which of the kernel's extents (M, N, K) an operand's rows and columns are: A is M x K, B K x N,
/// C and D M x N.
const DIMS: [(usize, usize); 4] = [(0, 2), (2, 1), (0, 1), (0, 1)];

fn lcm(a: usize, b: usize) -> usize {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    a / gcd(a, b) * b
}

/// The index (into M, N, K) of an operand's contiguous extent.
fn contiguous_dim(i: usize, layout: Layout) -> usize {
    match layout {
        Layout::RowMajor => DIMS[i].1,
        Layout::ColumnMajor => DIMS[i].0,
    }
}

/// Plans the staging of a GEMM whose kernel is `spec`, in the kernel's view: `ops` are the user's
/// A, B, C and D as the kernel sees them (`users` names them), `element_bytes` their element
/// sizes. `blockwise_scales` is `Some(k_blocks)` for blockwise kernels (A's scales need m a
/// multiple of 4). `stage_c` says whether C is read (beta != 0). `max_stride_bytes` is TMA's
/// stride limit.
pub(crate) fn plan(
    spec: &KernelSpec,
    ops: [ResolvedMatrix; 4],
    users: [OperandName; 4],
    element_bytes: [usize; 4],
    blockwise_scales: Option<usize>,
    stage_c: bool,
    max_stride_bytes: u128,
) -> StagingPlan {
    let aligns =
        [spec.a.align, spec.b.align, spec.c.align, spec.d.align].map(|a| a.max(1) as usize);
    let extents = [ops[3].rows, ops[3].cols, ops[0].cols];
    // Each extent is padded to a multiple of every alignment of an operand it is contiguous in,
    // once one of them does not divide it.
    let mut multiple = [1usize; 3];
    for dim in 0..3 {
        let aligns_here: Vec<usize> = (0..4)
            .filter(|&i| contiguous_dim(i, ops[i].layout) == dim)
            .map(|i| aligns[i])
            .collect();
        if aligns_here.iter().any(|a| extents[dim] % a != 0) {
            multiple[dim] = aligns_here.iter().fold(1, |m, &a| lcm(m, a));
        }
    }
    if blockwise_scales.is_some() {
        multiple[0] = lcm(multiple[0], 4);
    }
    let padded = [0, 1, 2].map(|d| extents[d].next_multiple_of(multiple[d]));

    let mut out = StagingPlan {
        ops,
        staged: [None; 5],
        bytes: 0,
        overflow: None,
    };
    let mut offset = 0usize;
    let mut push = |out: &mut StagingPlan, s: Staged| {
        let s = Staged { offset, ..s };
        offset = (offset + s.bytes()).next_multiple_of(STAGING_ALIGNMENT);
        out.bytes = offset;
        let index = match s.slot {
            Slot::A => 0,
            Slot::B => 1,
            Slot::C => 2,
            Slot::D => 3,
            Slot::ScalesA => 4,
        };
        out.staged[index] = Some(s);
    };
    let slots = [Slot::A, Slot::B, Slot::C, Slot::D];
    for i in 0..4 {
        let m = ops[i];
        let align = aligns[i];
        let (rows, cols) = (padded[DIMS[i].0], padded[DIMS[i].1]);
        let batched = m.batch > 1;
        let too_far = |ld: usize| ld as u128 * element_bytes[i] as u128 >= max_stride_bytes;
        let needs = rows != m.rows
            || cols != m.cols
            || m.ld % align != 0
            || (batched && m.batch_stride % align != 0)
            || too_far(m.ld)
            || (batched && too_far(m.batch_stride));
        if !needs || (slots[i] == Slot::C && !stage_c) {
            continue;
        }
        let mut to = ResolvedMatrix {
            rows,
            cols,
            ld: 0,
            batch_stride: 0,
            ..m
        };
        // The copy's reach in 128-bit arithmetic: extents near 2^31 in a large batch pass 2^64.
        let ld = (to.contiguous() as u128).next_multiple_of(align as u128);
        let batch_stride = ld * to.strided() as u128;
        let reach = (to.batch as u128 - 1) * batch_stride + batch_stride;
        if reach * element_bytes[i] as u128 > MAX_COPY_BYTES {
            out.overflow = out.overflow.or(Some(users[i]));
            continue;
        }
        to.ld = ld as usize;
        to.batch_stride = batch_stride as usize;
        out.ops[i] = to;
        push(
            &mut out,
            Staged {
                slot: slots[i],
                user: users[i],
                from: m,
                to,
                element_bytes: element_bytes[i],
                offset: 0,
            },
        );
    }
    // C read in place of D (beta = 0, or C is D) takes D's geometry; an unread C whose own
    // geometry is off is not addressed at all (the kernel is given D's).
    if !stage_c && out.staged[3].is_some() {
        out.ops[2] = out.ops[3];
    }
    if let Some(k_blocks) = blockwise_scales {
        let (m, m_padded) = (extents[0], padded[0]);
        if m != m_padded {
            let batch = ops[0].batch;
            let scales = |cols: usize| ResolvedMatrix {
                rows: k_blocks,
                cols,
                layout: Layout::RowMajor,
                ld: cols,
                batch_stride: cols * k_blocks,
                batch,
            };
            push(
                &mut out,
                Staged {
                    slot: Slot::ScalesA,
                    user: OperandName::ScalesA,
                    from: scales(m),
                    to: scales(m_padded),
                    element_bytes: 4,
                    offset: 0,
                },
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plans::problem::GemmProblem;
    use cutlass_gemm_catalog::catalog;

    fn bf16_tn() -> KernelSpec {
        catalog::all()
            .into_iter()
            .find(|s| {
                s.name()
                    == "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_2x1x1_0_tnt_align8_warpspecialized_cooperative_epi_tma"
            })
            .expect("the default bf16 kernel is in the catalog")
    }

    fn ops(p: &GemmProblem) -> [ResolvedMatrix; 4] {
        [
            OperandName::A,
            OperandName::B,
            OperandName::C,
            OperandName::D,
        ]
        .map(|o| p.resolve(o).unwrap())
    }

    const USERS: [OperandName; 4] = [
        OperandName::A,
        OperandName::B,
        OperandName::C,
        OperandName::D,
    ];

    fn staged_slots(s: &StagingPlan) -> Vec<Slot> {
        s.staged.iter().flatten().map(|s| s.slot).collect()
    }

    #[test]
    fn aligned_problems_stage_nothing() {
        let p = GemmProblem::new(4096, 4096, 4096);
        let s = plan(&bf16_tn(), ops(&p), USERS, [2; 4], None, false, 1 << 40);
        assert_eq!(s.bytes, 0);
        assert_eq!(s.ops, ops(&p));
    }

    #[test]
    fn a_vocabulary_stages_b_and_d_but_not_a() {
        let p = GemmProblem::new(512, 50257, 768);
        let s = plan(&bf16_tn(), ops(&p), USERS, [2; 4], None, false, 1 << 40);
        assert_eq!(staged_slots(&s), vec![Slot::B, Slot::D]);
        let d = s.staged[3].unwrap();
        assert_eq!((d.to.rows, d.to.cols, d.to.ld), (512, 50264, 50264));
        let b = s.staged[1].unwrap();
        assert_eq!((b.to.rows, b.to.cols, b.to.ld), (768, 50264, 768));
        // C is not read: the kernel is given D's geometry for it.
        assert_eq!(s.ops[2], s.ops[3]);
        assert!(s.staged[3].unwrap().offset >= s.staged[1].unwrap().bytes());
        assert_eq!(s.staged[3].unwrap().offset % STAGING_ALIGNMENT, 0);
    }

    #[test]
    fn odd_k_pads_k_in_both_inputs() {
        let p = GemmProblem::new(64, 64, 4095).with_scalars(1.0, 0.5);
        let s = plan(&bf16_tn(), ops(&p), USERS, [2; 4], None, true, 1 << 40);
        assert_eq!(staged_slots(&s), vec![Slot::A, Slot::B]);
        assert_eq!(s.ops[0].cols, 4096);
        assert_eq!(s.ops[1].rows, 4096);
        assert_eq!(s.ops[3], ops(&p)[3]);
    }

    #[test]
    fn a_leading_dimension_off_alignment_stages_only_its_operand() {
        let p = GemmProblem::new(64, 64, 64)
            .with_a(crate::MatrixLayout::row_major().with_ld(67))
            .with_scalars(1.0, 1.0);
        let s = plan(&bf16_tn(), ops(&p), USERS, [2; 4], None, true, 1 << 40);
        assert_eq!(staged_slots(&s), vec![Slot::A]);
        assert_eq!(s.ops[0].ld, 64);
    }

    #[test]
    fn blockwise_scales_pad_m_to_four() {
        let p = GemmProblem::new(257, 512, 512);
        let s = plan(
            &bf16_tn(),
            ops(&p),
            USERS,
            [1, 1, 2, 2],
            Some(4),
            false,
            1 << 40,
        );
        assert_eq!(staged_slots(&s), vec![Slot::A, Slot::D, Slot::ScalesA]);
        let sf = s.staged[4].unwrap();
        assert_eq!((sf.from.cols, sf.to.cols, sf.to.rows), (257, 260, 4));
        assert_eq!(s.ops[0].rows, 260);
    }
}
