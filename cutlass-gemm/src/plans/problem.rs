//! The description of a GEMM problem, independent of any device, and its shape-level checks.

use cutlass_gemm_catalog::Layout;

use crate::error::{Error, Extent, OperandName, ProblemRule, Result, Scalar};

/// How one matrix operand lies in memory: its layout, leading dimension and batch stride.
///
/// `ld` and `batch_stride` are in elements; `None` means packed (the contiguous extent, and the
/// span of one matrix).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatrixLayout {
    /// Row- or column-major.
    pub layout: Layout,
    /// Leading dimension in elements; `None` for packed.
    pub ld: Option<usize>,
    /// Distance between consecutive matrices of a batch, in elements; `None` for packed.
    pub batch_stride: Option<usize>,
}

impl MatrixLayout {
    /// Packed row-major.
    pub const fn row_major() -> MatrixLayout {
        MatrixLayout {
            layout: Layout::RowMajor,
            ld: None,
            batch_stride: None,
        }
    }

    /// Packed column-major.
    pub const fn col_major() -> MatrixLayout {
        MatrixLayout {
            layout: Layout::ColumnMajor,
            ld: None,
            batch_stride: None,
        }
    }

    /// With this leading dimension, in elements.
    pub const fn with_ld(self, ld: usize) -> MatrixLayout {
        MatrixLayout {
            ld: Some(ld),
            ..self
        }
    }

    /// With this batch stride, in elements.
    pub const fn with_batch_stride(self, stride: usize) -> MatrixLayout {
        MatrixLayout {
            batch_stride: Some(stride),
            ..self
        }
    }
}

/// `D = alpha * A·B + beta * C` for `batch` independent problems, with A m x k, B k x n and C, D
/// m x n.
///
/// Defaults from [`GemmProblem::new`]: A row-major and B column-major (both K-contiguous, "TN": the
/// layout of `x · Wᵀ` with a row-major weight `W[n, k]`), C and D row-major, one batch, alpha 1,
/// beta 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmProblem {
    /// Rows of A, C and D.
    pub m: usize,
    /// Columns of B, C and D.
    pub n: usize,
    /// Columns of A, rows of B.
    pub k: usize,
    /// Number of problems in the batch.
    pub batch: usize,
    /// Layout of A.
    pub a: MatrixLayout,
    /// Layout of B.
    pub b: MatrixLayout,
    /// Layout of C; it must have the layout (row- or column-major) of D.
    pub c: MatrixLayout,
    /// Layout of D.
    pub d: MatrixLayout,
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of C; C must be given when it is not zero.
    pub beta: f32,
}

/// One operand's geometry, resolved: rows, columns, layout, leading dimension and batch stride.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResolvedMatrix {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Layout.
    pub layout: Layout,
    /// Leading dimension in elements.
    pub ld: usize,
    /// Batch stride in elements.
    pub batch_stride: usize,
    /// Batch count.
    pub batch: usize,
}

impl ResolvedMatrix {
    /// The extent of the contiguous dimension.
    pub fn contiguous(&self) -> usize {
        match self.layout {
            Layout::RowMajor => self.cols,
            Layout::ColumnMajor => self.rows,
        }
    }

    /// The extent of the strided dimension.
    pub fn strided(&self) -> usize {
        match self.layout {
            Layout::RowMajor => self.rows,
            Layout::ColumnMajor => self.cols,
        }
    }

    /// The elements one matrix spans: `(strided - 1) * ld + contiguous`.
    pub fn span(&self) -> usize {
        (self.strided() - 1) * self.ld + self.contiguous()
    }

    /// The elements the whole batch reaches: `(batch - 1) * batch_stride + span`.
    pub fn required_len(&self) -> usize {
        (self.batch - 1) * self.batch_stride + self.span()
    }

    /// Offset of element (l, row, col).
    pub fn offset(&self, l: usize, row: usize, col: usize) -> usize {
        l * self.batch_stride
            + match self.layout {
                Layout::RowMajor => row * self.ld + col,
                Layout::ColumnMajor => col * self.ld + row,
            }
    }

    /// The same memory seen as the transposed matrix.
    pub fn transposed(&self) -> ResolvedMatrix {
        ResolvedMatrix {
            rows: self.cols,
            cols: self.rows,
            layout: self.layout.transposed(),
            ..*self
        }
    }
}

/// The largest extent CUTLASS's problem shape (`int`) holds.
pub(crate) const MAX_EXTENT: usize = i32::MAX as usize;

impl GemmProblem {
    /// A problem with the defaults described on [`GemmProblem`].
    pub fn new(m: usize, n: usize, k: usize) -> GemmProblem {
        GemmProblem {
            m,
            n,
            k,
            batch: 1,
            a: MatrixLayout::row_major(),
            b: MatrixLayout::col_major(),
            c: MatrixLayout::row_major(),
            d: MatrixLayout::row_major(),
            alpha: 1.0,
            beta: 0.0,
        }
    }

    /// With this batch count.
    pub fn with_batch(self, batch: usize) -> GemmProblem {
        GemmProblem { batch, ..self }
    }

    /// With this layout of A.
    pub fn with_a(self, a: MatrixLayout) -> GemmProblem {
        GemmProblem { a, ..self }
    }

    /// With this layout of B.
    pub fn with_b(self, b: MatrixLayout) -> GemmProblem {
        GemmProblem { b, ..self }
    }

    /// With this layout of C.
    pub fn with_c(self, c: MatrixLayout) -> GemmProblem {
        GemmProblem { c, ..self }
    }

    /// With this layout of D (and of C, unless C is set afterwards).
    pub fn with_d(self, d: MatrixLayout) -> GemmProblem {
        GemmProblem {
            d,
            c: MatrixLayout {
                layout: d.layout,
                ..self.c
            },
            ..self
        }
    }

    /// With these scalars.
    pub fn with_scalars(self, alpha: f32, beta: f32) -> GemmProblem {
        GemmProblem {
            alpha,
            beta,
            ..self
        }
    }

    /// Folds per-tensor scales of A and B into alpha: `D = alpha * (scale_a·A)(scale_b·B) + beta·C`
    /// (FP8 tensor-wise scaling; alpha becomes `alpha * scale_a * scale_b`, rounded once in f32).
    pub fn with_tensor_scales(self, scale_a: f32, scale_b: f32) -> GemmProblem {
        GemmProblem {
            alpha: self.alpha * (scale_a * scale_b),
            ..self
        }
    }

    /// Multiply-adds of the whole batch times two.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.batch as f64
    }

    fn dims(&self, op: OperandName) -> (usize, usize, MatrixLayout) {
        match op {
            OperandName::A => (self.m, self.k, self.a),
            OperandName::B => (self.k, self.n, self.b),
            OperandName::C => (self.m, self.n, self.c),
            _ => (self.m, self.n, self.d),
        }
    }

    /// Resolves an operand's geometry and checks the rules that need no kernel: extents, the
    /// leading dimension against the contiguous extent, and the batch stride against the span.
    pub fn resolve(&self, op: OperandName) -> Result<ResolvedMatrix> {
        let (rows, cols, ml) = self.dims(op);
        let contiguous = match ml.layout {
            Layout::RowMajor => cols,
            Layout::ColumnMajor => rows,
        };
        let ld = ml.ld.unwrap_or(contiguous);
        if ld < contiguous {
            return Err(Error::LeadingDimension {
                operand: op,
                ld,
                min: contiguous,
                layout: ml.layout,
                rows,
                cols,
            });
        }
        let mut m = ResolvedMatrix {
            rows,
            cols,
            layout: ml.layout,
            ld,
            batch_stride: 0,
            batch: self.batch,
        };
        // The elements one matrix and the whole batch reach must fit in usize (and so in any
        // buffer): a leading dimension or batch stride whose reach overflows is refused here, so
        // that no length check downstream compares against a wrapped value.
        let too_large = || Error::InvalidProblem {
            reason: ProblemRule::OperandReachOverflows { operand: op },
        };
        let strided = m.strided().max(1);
        let span = (strided - 1)
            .checked_mul(ld)
            .and_then(|x| x.checked_add(m.contiguous()))
            .ok_or_else(too_large)?;
        // A batch of one never steps by its batch stride, but TMA encodes the stride of every
        // mode, so the kernel is given the span (aligned whenever the leading dimension and the
        // contiguous extent are), never the caller's value: a stride off the 16-byte rule there
        // made cuTensorMapEncodeTiled fail and the kernel run on a broken descriptor.
        m.batch_stride = match ml.batch_stride {
            Some(stride) if self.batch > 1 => stride,
            _ => span,
        };
        if self.batch > 1 && m.batch_stride < span {
            return Err(Error::BatchStride {
                operand: op,
                stride: m.batch_stride,
                min: span,
            });
        }
        self.batch
            .max(1)
            .checked_sub(1)
            .and_then(|b| b.checked_mul(m.batch_stride))
            .and_then(|x| x.checked_add(span))
            .ok_or_else(too_large)?;
        Ok(m)
    }

    /// Checks the problem-wide rules: extents, scalars and C's layout.
    pub fn check(&self) -> Result<()> {
        for (extent, v) in [
            (Some(Extent::M), self.m),
            (Some(Extent::N), self.n),
            (Some(Extent::K), self.k),
            (None, self.batch),
        ] {
            let reason = match extent {
                Some(extent) if v == 0 => ProblemRule::ZeroExtent(extent),
                Some(extent) if v > MAX_EXTENT => ProblemRule::ExtentTooLarge { extent, value: v },
                None if v == 0 => ProblemRule::ZeroBatch,
                None if v > MAX_EXTENT => ProblemRule::BatchTooLarge { value: v },
                _ => continue,
            };
            return Err(Error::InvalidProblem { reason });
        }
        if !self.alpha.is_finite() || !self.beta.is_finite() {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::NonFiniteScalars {
                    alpha: Scalar(self.alpha),
                    beta: Scalar(self.beta),
                },
            });
        }
        if self.c.layout != self.d.layout {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::CLayoutDiffersFromD,
            });
        }
        Ok(())
    }
}
