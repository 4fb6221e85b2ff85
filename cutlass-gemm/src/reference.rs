//! Host reference GEMM with f64 accumulation, and a tolerance check against it.
//!
//! Independent of the kernels: it reads the operands through the same geometry rules
//! ([`GemmProblem::resolve`]) but does its own arithmetic in f64, so it is the yardstick GPU results
//! are compared with.

use crate::error::{Error, OperandName, ProblemRule, Result, Scalar};
use crate::formats::element::Element;
pub use crate::formats::HostValue;
use crate::plans::epilogue::{Activation, BiasAxis};
use crate::plans::problem::{GemmProblem, ResolvedMatrix};

/// The exact-as-f64 result of a GEMM, with the magnitudes that bound its rounding error.
#[derive(Clone, Debug)]
pub struct Reference {
    /// `alpha * A·B + beta * C` per element, batch-major then row-major: index
    /// `(l * m + i) * n + j`.
    pub value: Vec<f64>,
    /// `|alpha| * sum_k |A_ik B_kj| + |beta * C_ij|` per element, in the same order.
    pub magnitude: Vec<f64>,
    /// m, n, k, batch.
    pub shape: (usize, usize, usize, usize),
    /// Error the device may add beyond rounding and accumulation, per element (a fused
    /// epilogue's arithmetic and activation: [`fused`]); empty for none.
    pub extra_error: Vec<f64>,
}

/// A host matrix whose every element has an exact value: the operands of the reference.
pub trait HostMatrix: Sync {
    /// Rows.
    fn rows(&self) -> usize;
    /// Columns.
    fn cols(&self) -> usize;
    /// Value of element (row, col) of batch l.
    fn value(&self, l: usize, row: usize, col: usize) -> f64;
}

/// A strided host matrix of one element type.
pub struct Strided<'a, T> {
    data: &'a [T],
    geometry: ResolvedMatrix,
}

impl<'a, T: HostValue> Strided<'a, T> {
    /// A view; fails when `data` is shorter than the geometry reaches.
    pub fn new(data: &'a [T], geometry: ResolvedMatrix, operand: OperandName) -> Result<Self> {
        if data.len() < geometry.required_len() {
            return Err(Error::BufferTooSmall {
                operand,
                len: data.len(),
                required: geometry.required_len(),
            });
        }
        Ok(Strided { data, geometry })
    }
}

impl<T: HostValue> HostMatrix for Strided<'_, T> {
    fn rows(&self) -> usize {
        self.geometry.rows
    }
    fn cols(&self) -> usize {
        self.geometry.cols
    }
    fn value(&self, l: usize, row: usize, col: usize) -> f64 {
        self.data[self.geometry.offset(l, row, col)].host_value()
    }
}

/// A strided matrix of packed sub-byte elements.
pub struct PackedStrided<'a, T: crate::formats::packed::SubByte> {
    data: crate::formats::packed::PackedSlice<'a, T>,
    geometry: ResolvedMatrix,
}

impl<'a, T: crate::formats::packed::SubByte + HostValue> PackedStrided<'a, T> {
    /// A view; fails when `data` is shorter than the geometry reaches.
    pub fn new(
        data: crate::formats::packed::PackedSlice<'a, T>,
        geometry: ResolvedMatrix,
        operand: OperandName,
    ) -> Result<Self> {
        if data.len() < geometry.required_len() {
            return Err(Error::BufferTooSmall {
                operand,
                len: data.len(),
                required: geometry.required_len(),
            });
        }
        Ok(PackedStrided { data, geometry })
    }
}

impl<T: crate::formats::packed::SubByte + HostValue> HostMatrix for PackedStrided<'_, T> {
    fn rows(&self) -> usize {
        self.geometry.rows
    }
    fn cols(&self) -> usize {
        self.geometry.cols
    }
    fn value(&self, l: usize, row: usize, col: usize) -> f64 {
        self.data
            .get(self.geometry.offset(l, row, col))
            .host_value()
    }
}

/// A block-scaled operand: elements times their scale factor (from the `Sm1xxBlockScaledConfig`
/// layout) times a global factor. For A (m x k) the scale of (row, col) is at (row, col) of the
/// scale layout; for B (k x n) at (col, row).
pub struct Scaled<'a> {
    inner: &'a dyn HostMatrix,
    scales: Vec<f64>,
    layout: crate::formats::scale_layout::ScaleFactorLayout,
    is_b: bool,
    global: f64,
}

impl<'a> Scaled<'a> {
    /// Scales `inner` (A when `operand` is A, B when B) by swizzled scale factors.
    pub fn new<S: HostValue>(
        inner: &'a dyn HostMatrix,
        operand: OperandName,
        scales: &[S],
        layout: crate::formats::scale_layout::ScaleFactorLayout,
        global: f32,
    ) -> Result<Self> {
        let is_b = operand == OperandName::B;
        let (rows, k) = if is_b {
            (inner.cols(), inner.rows())
        } else {
            (inner.rows(), inner.cols())
        };
        if layout.rows != rows || layout.k != k {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::ScaleLayoutShape {
                    operand,
                    layout: (layout.rows, layout.k),
                    operand_shape: (rows, k),
                },
            });
        }
        if scales.len() < layout.size() {
            return Err(Error::BufferTooSmall {
                operand,
                len: scales.len(),
                required: layout.size(),
            });
        }
        Ok(Scaled {
            inner,
            scales: scales[..layout.size()]
                .iter()
                .map(|s| s.host_value())
                .collect(),
            layout,
            is_b,
            global: global as f64,
        })
    }
}

impl HostMatrix for Scaled<'_> {
    fn rows(&self) -> usize {
        self.inner.rows()
    }
    fn cols(&self) -> usize {
        self.inner.cols()
    }
    fn value(&self, l: usize, row: usize, col: usize) -> f64 {
        let (r, k) = if self.is_b { (col, row) } else { (row, col) };
        self.inner.value(l, row, col) * self.scales[self.layout.offset(r, k, l)] * self.global
    }
}

/// Computes the reference on host slices laid out as `problem` says. Uses all available cores.
pub fn gemm<TA: HostValue, TB: HostValue, TC: HostValue>(
    problem: &GemmProblem,
    a: &[TA],
    b: &[TB],
    c: Option<&[TC]>,
) -> Result<Reference> {
    problem.check()?;
    let a = Strided::new(a, problem.resolve(OperandName::A)?, OperandName::A)?;
    let b = Strided::new(b, problem.resolve(OperandName::B)?, OperandName::B)?;
    let c = match c {
        Some(c) => Some(Strided::new(
            c,
            problem.resolve(OperandName::C)?,
            OperandName::C,
        )?),
        None => None,
    };
    gemm_values(problem, &a, &b, c.as_ref().map(|c| c as &dyn HostMatrix))
}

/// The reference over any host operands: `alpha * A·B + beta * C` in f64, for `problem.batch`
/// batches (the operands' shapes must be A m x k, B k x n, C m x n).
pub fn gemm_values(
    problem: &GemmProblem,
    a: &dyn HostMatrix,
    b: &dyn HostMatrix,
    c: Option<&dyn HostMatrix>,
) -> Result<Reference> {
    problem.check()?;
    let (m, n, k, batch) = (problem.m, problem.n, problem.k, problem.batch);
    for (op, x, want) in [(OperandName::A, a, (m, k)), (OperandName::B, b, (k, n))] {
        if (x.rows(), x.cols()) != want {
            return Err(Error::InvalidProblem {
                reason: ProblemRule::MatrixShape {
                    operand: op,
                    found: (x.rows(), x.cols()),
                    required: want,
                },
            });
        }
    }
    if c.is_none() && problem.beta != 0.0 {
        return Err(Error::InvalidProblem {
            reason: ProblemRule::BetaWithoutC {
                beta: Scalar(problem.beta),
            },
        });
    }
    let alpha = problem.alpha as f64;
    let beta = problem.beta as f64;
    let mut value = vec![0.0f64; batch * m * n];
    let mut magnitude = vec![0.0f64; batch * m * n];
    // Threads only where the work repays starting them (about 2^20 multiply-adds each).
    let work = (batch * m * n).saturating_mul(k.max(1));
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .min(64)
        .min(work.div_ceil(1 << 20));
    let chunk_rows = (batch * m).div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        for (chunk, (vals, mags)) in value
            .chunks_mut(chunk_rows * n)
            .zip(magnitude.chunks_mut(chunk_rows * n))
            .enumerate()
        {
            s.spawn(move || {
                let mut arow = vec![0.0f64; k];
                let mut bcol = vec![0.0f64; k];
                for (r, (vrow, mrow)) in vals.chunks_mut(n).zip(mags.chunks_mut(n)).enumerate() {
                    let global = chunk * chunk_rows + r;
                    let (l, i) = (global / m, global % m);
                    for (p, x) in arow.iter_mut().enumerate() {
                        *x = a.value(l, i, p);
                    }
                    for j in 0..n {
                        for (p, x) in bcol.iter_mut().enumerate() {
                            *x = b.value(l, p, j);
                        }
                        let (mut acc, mut mag) = (0.0f64, 0.0f64);
                        for (x, y) in arow.iter().zip(bcol.iter()) {
                            acc += x * y;
                            mag += (x * y).abs();
                        }
                        let cv = match c {
                            Some(c) if beta != 0.0 => beta * c.value(l, i, j),
                            _ => 0.0,
                        };
                        vrow[j] = alpha * acc + cv;
                        mrow[j] = alpha.abs() * mag + cv.abs();
                    }
                }
            });
        }
    });
    Ok(Reference {
        value,
        magnitude,
        shape: (m, n, k, batch),
        extra_error: Vec::new(),
    })
}

/// One group of a grouped GEMM's reference ([`grouped`]): its rows of D and their reference.
#[derive(Clone, Debug)]
pub struct GroupReference {
    /// The group.
    pub group: usize,
    /// Index in D of the group's first element (row 0, column 0).
    pub d_offset: usize,
    /// The reference of the group's `m_g x n` product (absent for an empty group).
    pub reference: Option<Reference>,
}

/// The rows of group `g` in a grouped GEMM's layout, as the device reads them: `(first row of its
/// slot, rows)`, offsets and counts clamped to the plan's rows or capacity
/// ([`crate::GroupedGemm`]).
pub fn group_rows(problem: &crate::GroupedProblem, group_rows: &[i32], g: usize) -> (usize, usize) {
    let limit = problem.rows() as i64;
    match problem.layout {
        crate::GroupedLayout::Contiguous { .. } => {
            let start = i64::from(group_rows[g]).clamp(0, limit);
            let end = i64::from(group_rows[g + 1]).clamp(start, limit);
            (start as usize, (end - start) as usize)
        }
        crate::GroupedLayout::Masked { capacity } => (
            g * capacity,
            i64::from(group_rows[g]).clamp(0, limit) as usize,
        ),
    }
}

/// The reference of a grouped GEMM on host operands in the plan's layout (A, the `groups x n x k`
/// weights, C and D row-major; `group_rows` the offsets or counts; `alphas` one per group): per
/// group `alpha * alpha_g * A_g·W_gᵀ + beta * C_g` in f64 (`alpha * alpha_g` rounded once in f32,
/// as the device computes it).
pub fn grouped<T: HostValue, TC: HostValue>(
    problem: &crate::GroupedProblem,
    a: &[T],
    b: &[T],
    group_rows_host: &[i32],
    alphas: Option<&[f32]>,
    c: Option<&[TC]>,
) -> Result<Vec<GroupReference>> {
    problem.check()?;
    let (n, k) = (problem.n, problem.k);
    for (operand, len, required) in [
        (OperandName::A, a.len(), problem.a_len()),
        (OperandName::B, b.len(), problem.b_len()),
        (
            OperandName::GroupRows,
            group_rows_host.len(),
            problem.group_rows_len(),
        ),
        (
            OperandName::GroupAlphas,
            alphas.map_or(usize::MAX, <[f32]>::len),
            problem.groups,
        ),
        (
            OperandName::C,
            c.map_or(usize::MAX, <[TC]>::len),
            problem.d_len(),
        ),
    ] {
        crate::error::require_len(operand, len, required)?;
    }
    (0..problem.groups)
        .map(|g| {
            let (first, m) = group_rows(problem, group_rows_host, g);
            let alpha = problem.alpha * alphas.map_or(1.0, |x| x[g]);
            let reference = if m == 0 {
                None
            } else {
                let p = GemmProblem::new(m, n, k).with_scalars(alpha, problem.beta);
                let c = c.map(|c| &c[first * n..(first + m) * n]);
                Some(gemm(
                    &p,
                    &a[first * k..(first + m) * k],
                    &b[g * n * k..(g + 1) * n * k],
                    c,
                )?)
            };
            Ok(GroupReference {
                group: g,
                d_offset: first * n,
                reference,
            })
        })
        .collect()
}

/// The reference of a grouped FP8 blockwise GEMM ([`crate::GroupedBlockwiseGemm`]): [`grouped`]
/// on the operands dequantized exactly in f64, A with its K-major 1x128 scales (`ceil(k / 128)`
/// per row) and each group's weight with its K-major 128x128 scales (`ceil(n / 128) *
/// ceil(k / 128)` per group).
#[allow(clippy::too_many_arguments)]
pub fn grouped_blockwise<TC: HostValue>(
    problem: &crate::GroupedProblem,
    a: &[crate::numeric::E4M3],
    scales_a: &[f32],
    b: &[crate::numeric::E4M3],
    scales_b: &[f32],
    group_rows_host: &[i32],
    alphas: Option<&[f32]>,
    c: Option<&[TC]>,
) -> Result<Vec<GroupReference>> {
    problem.check()?;
    let (n, k) = (problem.n, problem.k);
    let (kb, nb) = (k.div_ceil(128), n.div_ceil(128));
    let rows = problem.a_len() / k;
    for (operand, len, required) in [
        (OperandName::A, a.len(), problem.a_len()),
        (OperandName::B, b.len(), problem.b_len()),
        (OperandName::ScalesA, scales_a.len(), rows * kb),
        (
            OperandName::ScalesB,
            scales_b.len(),
            problem.groups * nb * kb,
        ),
    ] {
        crate::error::require_len(operand, len, required)?;
    }
    use crate::quantize::host::dequantize_fp8_blockwise;
    let a = dequantize_fp8_blockwise(a, &scales_a[..rows * kb], rows, k, 1, 128);
    let b: Vec<f64> = (0..problem.groups)
        .flat_map(|g| {
            dequantize_fp8_blockwise(
                &b[g * n * k..(g + 1) * n * k],
                &scales_b[g * nb * kb..(g + 1) * nb * kb],
                n,
                k,
                128,
                128,
            )
        })
        .collect();
    grouped(problem, &a, &b, group_rows_host, alphas, c)
}

/// Compares a grouped GEMM's D with its reference ([`grouped`]), group by group; the comparison of
/// all groups together.
pub fn compare_grouped<TD: Element>(d: &[TD], groups: &[GroupReference]) -> Comparison {
    let mut out = Comparison::default();
    for g in groups {
        let Some(r) = &g.reference else { continue };
        let (m, n, _, _) = r.shape;
        let geometry = ResolvedMatrix {
            rows: m,
            cols: n,
            layout: cutlass_gemm_catalog::Layout::RowMajor,
            ld: n,
            batch_stride: m * n,
            batch: 1,
        };
        let one = compare(&d[g.d_offset..g.d_offset + m * n], &geometry, r);
        out.checked += one.checked;
        out.failures += one.failures;
        out.max_abs_error = out.max_abs_error.max(one.max_abs_error);
        out.max_error_ratio = out.max_error_ratio.max(one.max_error_ratio);
        if out.first_failure.is_none() {
            // (group, row, column, got, expected, bound)
            out.first_failure = one
                .first_failure
                .map(|(_, i, j, got, want, bound)| (g.group, i, j, got, want, bound));
        }
    }
    out
}

/// A fused epilogue on the host, for [`fused`]: the plan's [`crate::Epilogue`] with its vectors'
/// exact values.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostEpilogue<'a> {
    /// The activation.
    pub activation: Activation,
    /// The bias, and the extent it runs along (`n` values per column, `m` per row).
    pub bias: Option<(BiasAxis, &'a [f64])>,
    /// Scales per row of D (`m`).
    pub row_scales: Option<&'a [f32]>,
    /// Scales per column of D (`n`).
    pub col_scales: Option<&'a [f32]>,
}

/// The reference of a GEMM with a fused epilogue, in f64:
/// `act(alpha · row_scale[i] · col_scale[j] · (A·B)[i][j] + beta · C[i][j] + bias)`.
///
/// The bound of each element ([`compare`]) is that of the plain GEMM's value before the
/// activation (output rounding, f32 accumulation), carried through the activation's Lipschitz
/// constant ([`Activation::lipschitz`]), plus the epilogue's six f32 roundings and the device's
/// own activation error ([`Activation::device_error`]) in [`Reference::extra_error`].
pub fn fused(
    problem: &GemmProblem,
    a: &dyn HostMatrix,
    b: &dyn HostMatrix,
    c: Option<&dyn HostMatrix>,
    epilogue: &HostEpilogue<'_>,
) -> Result<Reference> {
    let plain = gemm_values(&problem.with_scalars(problem.alpha, 0.0), a, b, None)?;
    if c.is_none() && problem.beta != 0.0 {
        return Err(Error::InvalidProblem {
            reason: ProblemRule::BetaWithoutC {
                beta: Scalar(problem.beta),
            },
        });
    }
    let (m, n, _, batch) = plain.shape;
    let lens = [
        (
            OperandName::Bias,
            epilogue.bias.map(|(axis, v)| {
                (
                    v.len(),
                    match axis {
                        BiasAxis::PerColumn => n,
                        BiasAxis::PerRow => m,
                    },
                )
            }),
        ),
        (
            OperandName::RowScales,
            epilogue.row_scales.map(|v| (v.len(), m)),
        ),
        (
            OperandName::ColScales,
            epilogue.col_scales.map(|v| (v.len(), n)),
        ),
    ];
    for (operand, len) in lens {
        if let Some((found, required)) = len {
            crate::error::require_len(operand, found, required)?;
        }
    }
    let beta = problem.beta as f64;
    let act = epilogue.activation;
    let u = f32::UNIT_ROUNDOFF;
    let mut out = Reference {
        value: Vec::with_capacity(plain.value.len()),
        magnitude: Vec::with_capacity(plain.value.len()),
        shape: plain.shape,
        extra_error: Vec::with_capacity(plain.value.len()),
    };
    for l in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let idx = (l * m + i) * n + j;
                let rs = epilogue.row_scales.map_or(1.0, |v| v[i] as f64);
                let cs = epilogue.col_scales.map_or(1.0, |v| v[j] as f64);
                let bias = match epilogue.bias {
                    Some((BiasAxis::PerColumn, v)) => v[j],
                    Some((BiasAxis::PerRow, v)) => v[i],
                    None => 0.0,
                };
                let cv = match c {
                    Some(c) if beta != 0.0 => beta * c.value(l, i, j),
                    _ => 0.0,
                };
                let pre = rs * cs * plain.value[idx] + cv + bias;
                let mag = (rs * cs).abs() * plain.magnitude[idx] + cv.abs() + bias.abs();
                out.value.push(act.apply(pre));
                out.magnitude.push(act.lipschitz() * mag);
                out.extra_error
                    .push(act.lipschitz() * 6.0 * u * mag + act.device_error() * pre.abs());
            }
        }
    }
    Ok(out)
}

/// The reference of a gated GEMM ([`crate::GatedGemm`]), in f64: `problem.n` outputs from the
/// interleaved weight `b` (`2n` columns); the epilogue's bias and column scales have `2n` values
/// (interleaved), its row scales `m`; `problem.beta` must be 0.
///
/// Each output `act(g)·u` is bounded from the bounds of its two f32 values before the product
/// (accumulation and the epilogue's roundings, as [`fused`] gives them without an activation),
/// `e_g` and `e_u`: `L·e_g·(|u| + e_u) + (|act(g)| + L·e_g)·e_u`, plus the device's own activation
/// error and the product's f32 rounding; the output's rounding comes from [`compare`].
pub fn gated(
    problem: &GemmProblem,
    a: &dyn HostMatrix,
    b: &dyn HostMatrix,
    epilogue: &HostEpilogue<'_>,
) -> Result<Reference> {
    let n = problem.n;
    if n % crate::plans::gated::GATE_BLOCK != 0 {
        return Err(Error::InvalidProblem {
            reason: ProblemRule::GatedOutputs { n },
        });
    }
    if matches!(epilogue.bias, Some((BiasAxis::PerRow, _))) {
        return Err(Error::InvalidProblem {
            reason: ProblemRule::GatedRowBias,
        });
    }
    let inner = GemmProblem {
        n: 2 * n,
        ..*problem
    };
    let pre = fused(
        &inner,
        a,
        b,
        None,
        &HostEpilogue {
            activation: Activation::Identity,
            ..*epilogue
        },
    )?;
    let (m, _, k, batch) = pre.shape;
    let act = epilogue.activation;
    let lip = act.lipschitz();
    let u32_ = f32::UNIT_ROUNDOFF;
    let mut out = Reference {
        value: Vec::with_capacity(batch * m * n),
        magnitude: vec![0.0; batch * m * n],
        shape: (m, n, k, batch),
        extra_error: Vec::with_capacity(batch * m * n),
    };
    for l in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let at = |up| (l * m + i) * 2 * n + crate::plans::gated::interleaved_column(j, up);
                let (g, u) = (pre.value[at(false)], pre.value[at(true)]);
                // Each value's bound before the product: f32 accumulation plus the epilogue's.
                let bound =
                    |idx: usize| 2.0 * k as f64 * u32_ * pre.magnitude[idx] + pre.extra_error[idx];
                let (eg, eu) = (bound(at(false)), bound(at(true)));
                let v = act.apply(g) * u;
                out.value.push(v);
                out.extra_error.push(
                    lip * eg * (u.abs() + eu)
                        + (act.apply(g).abs() + lip * eg) * eu
                        + act.device_error() * g.abs() * (u.abs() + eu)
                        + 2.0 * u32_ * v.abs(),
                );
            }
        }
    }
    Ok(out)
}

impl Reference {
    /// The values converted to an output type the way CUTLASS's epilogue does: computed in f32,
    /// then converted (`convert` is e.g. `E4M3::from_f32`, saturating RNE).
    pub fn to_output<T>(&self, convert: impl Fn(f32) -> T) -> Vec<T> {
        self.value.iter().map(|&v| convert(v as f32)).collect()
    }

    /// Block-scaled output as CUTLASS's `LinCombBlockScaleFactor` epilogue makes it, for a
    /// row-major D with `vec` elements of N per scale: per block, `sf = convert_sf(amax *
    /// norm_constant / E::MAX)`, then `d = E(v * min(norm_constant / sf, f32::MAX))`. Returns
    /// elements (row-major, batch-major) and a plain row-major `[batch][m][ceil(n/vec)]` scale
    /// matrix. The device uses approximate reciprocals (`rcp.approx.ftz`); this uses exact ones,
    /// so a device result may differ from it by one code where a value sits at a rounding boundary.
    pub fn to_block_scaled<E, S>(
        &self,
        vec: usize,
        norm_constant: f32,
        convert_sf: impl Fn(f32) -> S,
    ) -> (Vec<E>, Vec<S>)
    where
        E: crate::quantize::host::ScaledElement,
        S: Copy + HostValue,
    {
        let (m, n, _, batch) = self.shape;
        let cols = n.div_ceil(vec);
        let mut elements = Vec::with_capacity(batch * m * n);
        let mut scales = Vec::with_capacity(batch * m * cols);
        let scale_down = norm_constant / E::MAX as f32;
        for row in self.value.chunks(n) {
            for block in row.chunks(vec) {
                let vals: Vec<f32> = block.iter().map(|&v| v as f32).collect();
                let amax = vals.iter().fold(0.0f32, |a, v| {
                    if v.is_nan() || a.is_nan() {
                        f32::NAN
                    } else {
                        a.max(v.abs())
                    }
                });
                let sf = convert_sf(amax * scale_down);
                let sf_value = sf.host_value() as f32;
                let acc_scale = (norm_constant / sf_value).min(f32::MAX);
                for v in vals {
                    elements.push(E::quantize(v * acc_scale));
                }
                scales.push(sf);
            }
        }
        (elements, scales)
    }
}

/// The outcome of comparing a result with the reference.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    /// Elements compared.
    pub checked: usize,
    /// Elements outside the tolerance (NaN counts as outside).
    pub failures: usize,
    /// Largest `|d - ref|`.
    pub max_abs_error: f64,
    /// Largest `|d - ref| / bound`: at most 1 when everything passes.
    pub max_error_ratio: f64,
    /// The first failure: (batch, row, column, got, expected, bound).
    pub first_failure: Option<(usize, usize, usize, f64, f64, f64)>,
}

impl Comparison {
    /// Whether every element is within tolerance.
    pub fn passed(&self) -> bool {
        self.failures == 0 && self.checked > 0
    }
}

/// The error bound of one output element: rounding the output to `TD`
/// (`2 u_out |ref|`) plus fp32 accumulation over `k` terms (`2 k u_f32 * magnitude`), plus the
/// smallest normal of the output type for results near zero.
///
/// Integer outputs come from an exact s32 accumulator and an f32 epilogue (`alpha * acc + beta *
/// c`, three roundings at most, each within `u_f32` of the magnitude) rounded to the nearest
/// integer: `0.5 + 3 u_f32 * magnitude`, against the reference saturated to the output's range
/// (see [`compare`]). Below a magnitude of 2^23 / 3 that admits no off-by-one result.
pub fn tolerance<TD: Element>(reference: f64, magnitude: f64, k: usize) -> f64 {
    let u32_ = f32::UNIT_ROUNDOFF;
    if is_integer::<TD>() {
        return 0.5 + 3.0 * u32_ * magnitude;
    }
    let tiny = match TD::DATA_TYPE {
        cutlass_gemm_catalog::DataType::F16 => 6.2e-5,
        cutlass_gemm_catalog::DataType::Bf16 => 1.2e-38,
        _ => 1.2e-38,
    };
    2.0 * TD::UNIT_ROUNDOFF * reference.abs() + 2.0 * k as f64 * u32_ * magnitude + tiny
}

fn is_integer<T: Element>() -> bool {
    T::DATA_TYPE.is_integer()
}

/// The reference value an output of type `T` should hold before rounding: saturated to `T`'s
/// range for the integer types (the epilogue's conversion saturates), unchanged otherwise.
fn saturated<T: Element>(v: f64) -> f64 {
    if is_integer::<T>() {
        v.clamp(
            T::from_f64(f64::MIN).to_f64(),
            T::from_f64(f64::MAX).to_f64(),
        )
    } else {
        v
    }
}

/// Compares D (read through `d`'s geometry) with the reference, element by element.
pub fn compare<TD: Element>(
    d: &[TD],
    d_geometry: &ResolvedMatrix,
    reference: &Reference,
) -> Comparison {
    let (m, n, k, batch) = reference.shape;
    let mut out = Comparison::default();
    for l in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let idx = (l * m + i) * n + j;
                let want = saturated::<TD>(reference.value[idx]);
                let got = d[d_geometry.offset(l, i, j)].to_f64();
                let bound = tolerance::<TD>(want, reference.magnitude[idx], k)
                    + reference.extra_error.get(idx).copied().unwrap_or(0.0);
                let err = (got - want).abs();
                out.checked += 1;
                let within = err <= bound; // false for NaN
                if !within {
                    out.failures += 1;
                    if out.first_failure.is_none() {
                        out.first_failure = Some((l, i, j, got, want, bound));
                    }
                }
                if err.is_finite() {
                    out.max_abs_error = out.max_abs_error.max(err);
                    out.max_error_ratio = out.max_error_ratio.max(err / bound);
                } else {
                    out.max_abs_error = f64::INFINITY;
                    out.max_error_ratio = f64::INFINITY;
                }
            }
        }
    }
    out
}

/// A weight-only GEMM's weight dequantized on the host exactly as the CUTLASS kernels do it (the
/// decode GEMV differs by [`weight_only_gemv_error`]): for row `j`
/// and column `i` of the `n x k` weight, group `g = i / group_size`,
/// `w = round(q · s[g][j] + z[g][j])` in `T`, rounded once (CUTLASS's source multiplies and then
/// adds in the activations' type, which nvcc contracts, as far as measured, into one fused
/// multiply-add: an H200 run of every weight-only kernel matches this bit for bit,
/// `tests/gpu/weight_only.rs`; `z` 0 without zeros). `values` holds q in the plain order
/// (`n x k`, two per byte, the even column in the low nibble), signed (s4) or unsigned (u4); the
/// scales and zeros are `(k / group_size) x n` row-major. Returns the weight `n x k` row-major.
#[allow(clippy::too_many_arguments)]
pub fn dequantize_weight<T: Element>(
    values: &[u8],
    signed: bool,
    scales: &[T],
    zeros: Option<&[T]>,
    n: usize,
    k: usize,
    group_size: usize,
) -> Result<Vec<T>> {
    crate::plans::weight_only::check_weight_extents(n, k, group_size)?;
    let groups = k / group_size;
    crate::error::require_len(OperandName::B, values.len(), n * k / 2)?;
    crate::error::require_len(OperandName::Scales, scales.len(), groups * n)?;
    if let Some(z) = zeros {
        crate::error::require_len(OperandName::Zeros, z.len(), groups * n)?;
    }
    let mut out = Vec::with_capacity(n * k);
    // q · s + z is exact in f64 (a 4-bit integer times a 16-bit value, plus a 16-bit one).
    for_each_weight(
        values,
        signed,
        scales,
        zeros,
        n,
        k,
        group_size,
        |q, s, z| out.push(T::from_f64(q * s + z)),
    );
    Ok(out)
}

/// An FP8 weight-only GEMM's weight ([`crate::WeightFormat::Fp8`]) dequantized on the host as the
/// CUTLASS kernels do it: `w = round(e4m3(q) · s[j])` in `T` for row `j` (the e4m3 value is exact
/// in `T`, and its product with the row's scale is rounded once). `values` holds the `n x k`
/// e4m3 bytes row-major, `scales` the `n` per-channel scales. Returns the weight `n x k`
/// row-major.
pub fn dequantize_fp8_weight<T: Element>(
    values: &[u8],
    scales: &[T],
    n: usize,
    k: usize,
) -> Result<Vec<T>> {
    dequantize_per_channel(values, e4m3_value, scales, n, k)
}

/// An int8 weight-only GEMM's weight ([`crate::WeightFormat::Int8`]) dequantized on the host as
/// the CUTLASS kernels do it: `w = round(q · s[j])` in `T` for row `j` (the s8 value is exact in
/// `T`, and its product with the row's scale is rounded once). `values` holds the `n x k` s8
/// values row-major, `scales` the `n` per-channel scales. Returns the weight `n x k` row-major.
pub fn dequantize_int8_weight<T: Element>(
    values: &[i8],
    scales: &[T],
    n: usize,
    k: usize,
) -> Result<Vec<T>> {
    dequantize_per_channel(values, |q| f64::from(*q), scales, n, k)
}

fn e4m3_value(q: &u8) -> f64 {
    crate::numeric::E4M3::from_bits(*q).to_f64()
}

/// A per-channel weight (one byte a value, `decode` giving its value) dequantized as the CUTLASS
/// kernels do: `round(q · s[j])` in `T`.
fn dequantize_per_channel<T: Element, B>(
    values: &[B],
    decode: impl Fn(&B) -> f64,
    scales: &[T],
    n: usize,
    k: usize,
) -> Result<Vec<T>> {
    crate::plans::weight_only::check_weight_extents(n, k, k)?;
    crate::error::require_len(OperandName::B, values.len(), n * k)?;
    crate::error::require_len(OperandName::Scales, scales.len(), n)?;
    let mut out = Vec::with_capacity(n * k);
    for (j, row) in values.chunks_exact(k).take(n).enumerate() {
        let s = scales[j].to_f64();
        // A value of at most 8 significant bits times a 16-bit one: exact in f64, rounded once
        // to T.
        out.extend(row.iter().map(|q| T::from_f64(decode(q) * s)));
    }
    Ok(out)
}

/// Calls `f(q, s, z)` for each element of an `n x k` 4-bit weight (as [`dequantize_weight`] takes
/// it, lengths checked), row by row.
#[allow(clippy::too_many_arguments)]
fn for_each_weight<T: Element>(
    values: &[u8],
    signed: bool,
    scales: &[T],
    zeros: Option<&[T]>,
    n: usize,
    k: usize,
    group_size: usize,
    mut f: impl FnMut(f64, f64, f64),
) {
    for j in 0..n {
        for i in 0..k {
            let e = j * k + i;
            let nibble = (values[e / 2] >> ((e % 2) * 4)) & 0xF;
            let q = if signed && nibble >= 8 {
                f64::from(nibble) - 16.0
            } else {
                f64::from(nibble)
            };
            let g = (i / group_size) * n + j;
            f(q, scales[g].to_f64(), zeros.map_or(0.0, |z| z[g].to_f64()));
        }
    }
}

/// The reference of a weight-only GEMM, `alpha · X · Wᵀ + beta · C`, over the weight as
/// [`dequantize_weight`] gives it (`n x k` row-major): the kernels' products of that weight are
/// exact in f32, so the bound is a 16-bit GEMM's.
pub fn weight_only<T: Element + HostValue>(
    problem: &crate::WeightOnlyProblem,
    x: &[T],
    dequantized: &[T],
    c: Option<&[T]>,
) -> Result<Reference> {
    problem.check()?;
    let p =
        GemmProblem::new(problem.m, problem.n, problem.k).with_scalars(problem.alpha, problem.beta);
    gemm(&p, x, dequantized, c)
}

/// How far the decode GEMV ([`crate::WEIGHT_ONLY_GEMV`]) may be from [`weight_only`]'s
/// reference beyond a 16-bit GEMM's bound, per output element (`m x n`, row-major), to add to
/// [`Reference::extra_error`]. The arguments are [`dequantize_weight`]'s and X (`m x k`,
/// row-major) of the problem.
///
/// The GEMV computes with the exact dequantized values `w = q · s + z`, where the reference (like
/// the CUTLASS kernels) rounds each to `T`: `Σ_k |x|·|w − round(w)|`. And it sums each 64 columns of
/// k in f32 over the stored values `M + u` (u the nibble, `M` 128 for bf16, 1024 for f16),
/// starting from `−(M + 8)·Σx` (`−M·Σx` with zeros), and scales the sum afterwards: 64 f32
/// additions whose partial sums are at most `((M + 16)·|s| + |z|)·Σ|x|`, each off by at most two
/// units of f32 (the tensor cores may truncate). Both times `|alpha|`.
#[allow(clippy::too_many_arguments)]
pub fn weight_only_gemv_error<T: Element>(
    problem: &crate::WeightOnlyProblem,
    x: &[T],
    values: &[u8],
    signed: bool,
    scales: &[T],
    zeros: Option<&[T]>,
) -> Result<Vec<f64>> {
    problem.check()?;
    let (m, n, k, group_size) = (problem.m, problem.n, problem.k, problem.group_size);
    crate::error::require_len(OperandName::A, x.len(), m * k)?;
    let rounded = dequantize_weight(values, signed, scales, zeros, n, k, group_size)?;
    let magic = match T::DATA_TYPE {
        cutlass_gemm_catalog::DataType::F16 => 1024.0,
        _ => 128.0,
    };
    let chunk = 64.0;
    let u32_ = f32::UNIT_ROUNDOFF;
    // Per weight element: the rounding the reference has and the GEMV has not, and the f32 sums'
    // factor.
    let mut rounding = Vec::with_capacity(n * k);
    let mut summing = Vec::with_capacity(n * k);
    for_each_weight(
        values,
        signed,
        scales,
        zeros,
        n,
        k,
        group_size,
        |q, s, z| {
            rounding.push((q * s + z - rounded[rounding.len()].to_f64()).abs());
            summing.push(2.0 * chunk * u32_ * ((magic + 16.0) * s.abs() + z.abs()));
        },
    );
    let alpha = f64::from(problem.alpha).abs();
    let mut out = Vec::with_capacity(m * n);
    for t in 0..m {
        let row = &x[t * k..(t + 1) * k];
        for j in 0..n {
            let w = j * k..(j + 1) * k;
            let e: f64 = row
                .iter()
                .zip(&rounding[w.clone()])
                .zip(&summing[w])
                .map(|((x, r), s)| x.to_f64().abs() * (r + s))
                .sum();
            out.push(alpha * e);
        }
    }
    Ok(out)
}

/// How far the decode GEMV ([`crate::WEIGHT_ONLY_GEMV`]) may be from [`weight_only`]'s
/// reference over an FP8 weight beyond a 16-bit GEMM's bound, per output element (`m x n`,
/// row-major), to add to [`Reference::extra_error`]. The arguments are
/// [`dequantize_fp8_weight`]'s and X (`m x k`, row-major) of the problem.
///
/// The GEMV multiplies the e4m3 values `q` themselves (exact in 16 bits) with X, sums the products
/// (exact in f32) in f32 over all of k, and scales the sum by the row's `s` once, where the
/// reference (like the CUTLASS kernels) rounds each `q · s` to `T`: `Σ_k |x|·|q s − round(q s)|`,
/// plus k f32 additions whose partial sums are at most `Σ_k |q x|`, each off by at most two units
/// of f32 (the tensor cores may truncate), and the scaling's one rounding: `(2 k + 1)·u·|s|·Σ|q x|`
/// (to first order, on that model of the tensor cores' accumulation). Both times `|alpha|`.
pub fn fp8_weight_gemv_error<T: Element>(
    problem: &crate::WeightOnlyProblem,
    x: &[T],
    values: &[u8],
    scales: &[T],
) -> Result<Vec<f64>> {
    per_channel_gemv_error(problem, x, values, e4m3_value, scales)
}

/// How far the decode GEMV may be from [`weight_only`]'s reference over an int8 weight
/// ([`crate::WeightFormat::Int8`]), as [`fp8_weight_gemv_error`] bounds it for FP8 ones (the GEMV
/// multiplies the s8 values themselves, exact in 16 bits, and scales the row's f32 sum once). The
/// arguments are [`dequantize_int8_weight`]'s and X (`m x k`, row-major) of the problem.
pub fn int8_weight_gemv_error<T: Element>(
    problem: &crate::WeightOnlyProblem,
    x: &[T],
    values: &[i8],
    scales: &[T],
) -> Result<Vec<f64>> {
    per_channel_gemv_error(problem, x, values, |q| f64::from(*q), scales)
}

/// The bound of [`fp8_weight_gemv_error`] for a per-channel weight whose bytes `decode` reads.
fn per_channel_gemv_error<T: Element, B>(
    problem: &crate::WeightOnlyProblem,
    x: &[T],
    values: &[B],
    decode: impl Fn(&B) -> f64 + Copy,
    scales: &[T],
) -> Result<Vec<f64>> {
    problem.check()?;
    let (m, n, k) = (problem.m, problem.n, problem.k);
    crate::error::require_len(OperandName::A, x.len(), m * k)?;
    let rounded = dequantize_per_channel(values, decode, scales, n, k)?;
    let sums = (2 * k + 1) as f64 * f32::UNIT_ROUNDOFF;
    // Per weight element: the rounding the reference has and the GEMV has not, and the f32 sums'.
    let per_element: Vec<f64> = values[..n * k]
        .iter()
        .zip(&rounded)
        .enumerate()
        .map(|(e, (q, r))| {
            let exact = decode(q) * scales[e / k].to_f64();
            (exact - r.to_f64()).abs() + sums * exact.abs()
        })
        .collect();
    let alpha = f64::from(problem.alpha).abs();
    let mut out = Vec::with_capacity(m * n);
    for t in 0..m {
        let row = &x[t * k..(t + 1) * k];
        for j in 0..n {
            let e: f64 = row
                .iter()
                .zip(&per_element[j * k..(j + 1) * k])
                .map(|(x, w)| x.to_f64().abs() * w)
                .sum();
            out.push(alpha * e);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plans::problem::MatrixLayout;
    use half::bf16;

    /// The GEMV's extra bound on numbers worked out by hand: no rounding term where q · s is exact
    /// in bf16, only the f32 sums'; a rounding term where it is not.
    #[test]
    fn gemv_error_is_the_rounding_and_the_sums() {
        let (n, k) = (16, 64);
        let p = crate::WeightOnlyProblem::new(1, n, k, k, crate::WeightFormat::Symmetric);
        let values: Vec<u8> = (0..n * k / 2).map(|i| (i * 37 % 256) as u8).collect();
        let x = vec![bf16::from_f32(-1.0); k];
        let sums = 2.0 * 64.0 * f32::UNIT_ROUNDOFF * 144.0 * k as f64;
        let e = weight_only_gemv_error(&p, &x, &values, true, &vec![bf16::ONE; n], None).unwrap();
        assert_eq!(e.len(), n);
        for v in &e {
            assert!((v - sums).abs() <= 1e-12 * sums, "{v} {sums}");
        }
        // s = 0.30078125 (bf16 of 0.3, 8 significant bits): q · s needs up to 11 bits, so most
        // products round; the bound grows by exactly sum |q s - round(q s)|.
        let s = bf16::from_f32(0.3);
        let e = weight_only_gemv_error(&p, &x, &values, true, &vec![s; n], None).unwrap();
        let rounded = dequantize_weight(&values, true, &vec![s; n], None, n, k, k).unwrap();
        for (j, v) in e.iter().enumerate() {
            let mut want = 2.0 * 64.0 * f32::UNIT_ROUNDOFF * 144.0 * s.to_f64() * k as f64;
            for i in 0..k {
                let idx = j * k + i;
                let nib = (values[idx / 2] >> ((idx % 2) * 4)) & 0xF;
                let q = if nib >= 8 {
                    f64::from(nib) - 16.0
                } else {
                    f64::from(nib)
                };
                want += (q * s.to_f64() - rounded[idx].to_f64()).abs();
            }
            assert!((v - want).abs() <= 1e-12 * want, "{v} {want}");
            assert!(*v > sums * s.to_f64(), "some products round");
        }
    }

    /// The FP8 GEMV's extra bound on numbers worked out by hand: only the f32 sums' where q · s is
    /// exact in bf16 (s a power of two), the roundings' besides where it is not.
    #[test]
    fn fp8_gemv_error_is_the_rounding_and_the_sums() {
        let (n, k) = (16, 64);
        let p = crate::WeightOnlyProblem::new(1, n, k, k, crate::WeightFormat::Fp8);
        // e4m3 1.0 (0x38) and -1.875 (0xBF) alternating: Σ|q| = 32 · 2.875 = 92 a row.
        let values: Vec<u8> = (0..n * k)
            .map(|i| if i % 2 == 0 { 0x38 } else { 0xBF })
            .collect();
        let x = vec![bf16::from_f32(-2.0); k];
        let sums = (2 * k + 1) as f64 * f32::UNIT_ROUNDOFF;
        let e = fp8_weight_gemv_error(&p, &x, &values, &vec![bf16::from_f32(0.5); n]).unwrap();
        assert_eq!(e.len(), n);
        let want = sums * 0.5 * 92.0 * 2.0;
        for v in &e {
            assert!((v - want).abs() <= 1e-12 * want, "{v} {want}");
        }
        // s = bf16(0.3) = 0.30078125 (7 significant bits): 1.875 · s needs 11 and rounds to bf16;
        // 1.0 · s is exact. The bound grows by 32 · |x| · that rounding.
        let s = bf16::from_f32(0.3);
        let e = fp8_weight_gemv_error(&p, &x, &values, &vec![s; n]).unwrap();
        let exact = 1.875 * s.to_f64();
        let rounding = (exact - bf16::from_f64(exact).to_f64()).abs();
        assert!(rounding > 0.0);
        let want = sums * s.to_f64() * 92.0 * 2.0 + 32.0 * 2.0 * rounding;
        for v in &e {
            assert!((v - want).abs() <= 1e-12 * want, "{v} {want}");
        }
    }

    /// The int8 weight dequantized and the GEMV's bound on numbers worked out by hand: -128, 127
    /// and 3 at the scale 0.5 are exact; at s = bf16(0.3) 127 · s needs more bits than bf16 has.
    #[test]
    fn int8_weight_dequantized_and_gemv_error() {
        let (n, k) = (16, 64);
        let values: Vec<i8> = (0..n * k)
            .map(|i| match (i % k) % 3 {
                0 => -128,
                1 => 127,
                _ => 3,
            })
            .collect();
        let w = dequantize_int8_weight(&values, &vec![bf16::from_f32(0.5); n], n, k).unwrap();
        assert_eq!(
            (w[0].to_f32(), w[1].to_f32(), w[2].to_f32()),
            (-64.0, 63.5, 1.5)
        );
        let s = bf16::from_f32(0.3);
        let w = dequantize_int8_weight(&values, &vec![s; n], n, k).unwrap();
        let exact = 127.0 * s.to_f64();
        assert_eq!(w[1].to_f64(), bf16::from_f64(exact).to_f64());
        assert_ne!(w[1].to_f64(), exact, "127 · s rounds");
        // A short buffer is refused.
        assert!(dequantize_int8_weight(&values[1..], &vec![s; n], n, k).is_err());
        let p = crate::WeightOnlyProblem::new(1, n, k, k, crate::WeightFormat::Int8);
        let x = vec![bf16::from_f32(-2.0); k];
        // At s = 0.5 only the f32 sums': Σ|q| a row is 22 · 128 + 21 · 127 + 21 · 3.
        let q_sum = 22.0 * 128.0 + 21.0 * 127.0 + 21.0 * 3.0;
        let sums = (2 * k + 1) as f64 * f32::UNIT_ROUNDOFF;
        let e = int8_weight_gemv_error(&p, &x, &values, &vec![bf16::from_f32(0.5); n]).unwrap();
        let want = sums * 0.5 * q_sum * 2.0;
        for v in &e {
            assert!((v - want).abs() <= 1e-12 * want, "{v} {want}");
        }
        // At s = bf16(0.3) the roundings of each q · s add, times |x| = 2.
        let e = int8_weight_gemv_error(&p, &x, &values, &vec![s; n]).unwrap();
        let rounding = |q: f64| (q * s.to_f64() - bf16::from_f64(q * s.to_f64()).to_f64()).abs();
        let want = sums * s.to_f64() * q_sum * 2.0
            + 2.0 * (22.0 * rounding(-128.0) + 21.0 * rounding(127.0) + 21.0 * rounding(3.0));
        for v in &e {
            assert!((v - want).abs() <= 1e-12 * want, "{v} {want}");
        }
    }

    /// The fused reference on numbers worked out by hand, and its bound: wide where the GPU's
    /// tanh may err, and still catching a wrong activation.
    #[test]
    fn fused_reference_applies_scales_bias_and_activation() {
        // A = [[1, 2], [3, -4]] (2 x 2, row-major), B = [[3, 1], [4, 1]] (k x n, row-major):
        // A·B = [[11, 3], [-7, -1]].
        let p = GemmProblem::new(2, 2, 2)
            .with_b(MatrixLayout::row_major())
            .with_scalars(0.5, 0.25);
        let a = [1.0f32, 2.0, 3.0, -4.0];
        let b = [3.0f32, 1.0, 4.0, 1.0];
        let c = [4.0f32, 0.0, 0.0, 8.0];
        let sa = Strided::new(&a, p.resolve(OperandName::A).unwrap(), OperandName::A).unwrap();
        let sb = Strided::new(&b, p.resolve(OperandName::B).unwrap(), OperandName::B).unwrap();
        let sc = Strided::new(&c, p.resolve(OperandName::C).unwrap(), OperandName::C).unwrap();
        let bias = [1.0, -2.0];
        let rows = [2.0f32, 1.0];
        let cols = [1.0f32, 3.0];
        let e = HostEpilogue {
            activation: Activation::Relu,
            bias: Some((BiasAxis::PerColumn, &bias)),
            row_scales: Some(&rows),
            col_scales: Some(&cols),
        };
        let r = fused(&p, &sa, &sb, Some(&sc), &e).unwrap();
        // pre = 0.5 · rs · cs · acc + 0.25 · c + bias:
        // (0,0) 0.5·2·1·11 + 1 + 1 = 13; (0,1) 0.5·2·3·3 + 0 - 2 = 7;
        // (1,0) 0.5·1·1·(-7) + 0 + 1 = -2.5 -> 0; (1,1) 0.5·1·3·(-1) + 2 - 2 = -1.5 -> 0.
        assert_eq!(r.value, [13.0, 7.0, 0.0, 0.0]);
        assert_eq!(r.extra_error.len(), 4);
        let e = HostEpilogue {
            activation: Activation::GeluTanh,
            ..e
        };
        let r = fused(&p, &sa, &sb, Some(&sc), &e).unwrap();
        let d = p.resolve(OperandName::D).unwrap();
        let exact: Vec<f32> = r.value.iter().map(|&v| v as f32).collect();
        assert!(compare(&exact, &d, &r).passed());
        // ReLU's output where GELU's is expected: -2.5 -> 0 against GELU(-2.5) = -0.0154.
        let relu = [13.0f32, 7.0, 0.0, 0.0];
        assert!(!compare(&relu, &d, &r).passed());
        // The bound allows the hardware tanh's error at 13, and nothing near 1 ulp of f32 more.
        assert!(r.extra_error[0] > 0.5 * 13.0 * 2f64.powf(-11.0));
        // A short vector is an error naming it.
        let short = HostEpilogue {
            row_scales: Some(&rows[..1]),
            ..e
        };
        assert!(matches!(
            fused(&p, &sa, &sb, Some(&sc), &short),
            Err(Error::BufferTooSmall {
                operand: OperandName::RowScales,
                ..
            })
        ));
    }

    #[test]
    fn integer_outputs_saturate_and_admit_no_off_by_one() {
        assert_eq!(saturated::<i8>(300.0), 127.0);
        assert_eq!(saturated::<i8>(-300.5), -128.0);
        assert_eq!(saturated::<u8>(-3.0), 0.0);
        assert_eq!(saturated::<i32>(1e12), i32::MAX as f64);
        assert_eq!(saturated::<f32>(1e12), 1e12);
        // Rounding to an integer is allowed, an off-by-one is not, up to a magnitude of 2^23 / 3.
        let bound = tolerance::<i8>(127.0, 2f64.powi(23) / 3.0 * 0.99, 4096);
        assert!((0.5..1.0).contains(&bound), "{bound}");
        assert!(tolerance::<i32>(5.0, 1e6, 4096) < 1.0);
        // Floating-point outputs keep the accumulation term.
        assert!(tolerance::<f32>(1.0, 1e6, 4096) > 0.4);
    }

    /// The textbook triple loop over row-major copies: an independent check of the strided reader.
    fn naive(m: usize, n: usize, k: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
        let mut d = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    d[i * n + j] += a[i * k + p] * b[p * n + j];
                }
            }
        }
        d
    }

    fn lcg(seed: &mut u64) -> f64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }

    #[test]
    fn strided_layouts_agree_with_the_textbook_loop() {
        let (m, n, k, batch) = (5, 7, 3, 2);
        let mut seed = 42;
        // Plain row-major values per batch.
        let av: Vec<f64> = (0..batch * m * k)
            .map(|_| (lcg(&mut seed) * 8.0).round())
            .collect();
        let bv: Vec<f64> = (0..batch * k * n)
            .map(|_| (lcg(&mut seed) * 8.0).round())
            .collect();
        for (la, lb) in [
            (MatrixLayout::row_major(), MatrixLayout::col_major()),
            (MatrixLayout::col_major(), MatrixLayout::row_major()),
            (MatrixLayout::col_major(), MatrixLayout::col_major()),
            (MatrixLayout::row_major(), MatrixLayout::row_major()),
        ] {
            let p = GemmProblem::new(m, n, k)
                .with_batch(batch)
                .with_a(
                    la.with_ld(if la.layout == cutlass_gemm_catalog::Layout::RowMajor {
                        k + 2
                    } else {
                        m + 3
                    })
                    .with_batch_stride(100),
                )
                .with_b(
                    lb.with_ld(if lb.layout == cutlass_gemm_catalog::Layout::RowMajor {
                        n + 1
                    } else {
                        k + 5
                    })
                    .with_batch_stride(90),
                );
            let ra = p.resolve(OperandName::A).unwrap();
            let rb = p.resolve(OperandName::B).unwrap();
            let mut a = vec![bf16::from_f64(f64::NAN); ra.required_len()];
            let mut b = vec![bf16::from_f64(f64::NAN); rb.required_len()];
            for l in 0..batch {
                for i in 0..m {
                    for q in 0..k {
                        a[ra.offset(l, i, q)] = bf16::from_f64(av[(l * m + i) * k + q]);
                    }
                }
                for q in 0..k {
                    for j in 0..n {
                        b[rb.offset(l, q, j)] = bf16::from_f64(bv[(l * k + q) * n + j]);
                    }
                }
            }
            let r = gemm::<bf16, bf16, bf16>(&p, &a, &b, None).unwrap();
            for l in 0..batch {
                let want = naive(
                    m,
                    n,
                    k,
                    &av[l * m * k..(l + 1) * m * k],
                    &bv[l * k * n..(l + 1) * k * n],
                );
                assert_eq!(
                    &r.value[l * m * n..(l + 1) * m * n],
                    &want[..],
                    "{la:?} {lb:?}"
                );
            }
        }
    }

    #[test]
    fn alpha_beta_and_c_are_applied() {
        let p = GemmProblem::new(2, 2, 1).with_scalars(2.0, -1.0);
        let a = [1.0f32, 2.0];
        let b = [3.0f32, 4.0];
        let c = [1.0f32, 1.0, 1.0, 1.0];
        let r = gemm::<f32, f32, f32>(&p, &a, &b, Some(&c)).unwrap();
        // D = 2 * [[3,4],[6,8]] - 1
        assert_eq!(r.value, vec![5.0, 7.0, 11.0, 15.0]);
        assert!(gemm::<f32, f32, f32>(&p, &a, &b, None).is_err());
    }

    #[test]
    fn compare_flags_nan_and_wrong_values_but_accepts_rounding() {
        let p = GemmProblem::new(1, 3, 4);
        let a = [0.3f32, -0.7, 0.11, 0.9];
        let b: Vec<f32> = (0..12).map(|i| (i as f32 - 5.5) / 7.0).collect();
        let r = gemm::<f32, f32, f32>(&p, &a, &b, None).unwrap();
        let d_geom = p.resolve(OperandName::D).unwrap();
        let rounded: Vec<bf16> = r.value.iter().map(|&v| bf16::from_f64(v)).collect();
        assert!(compare(&rounded, &d_geom, &r).passed());
        let mut wrong = rounded.clone();
        wrong[1] = bf16::from_f64(r.value[1] * 1.05 + 0.01);
        let cmp = compare(&wrong, &d_geom, &r);
        assert_eq!(cmp.failures, 1);
        let mut nan = rounded;
        nan[2] = bf16::from_bits(0x7fff);
        assert_eq!(compare(&nan, &d_geom, &r).failures, 1);
    }

    #[test]
    fn short_host_buffers_are_rejected() {
        let p = GemmProblem::new(4, 4, 4);
        let err = gemm::<f32, f32, f32>(&p, &[0.0; 15], &[0.0; 16], None).unwrap_err();
        assert!(matches!(
            err,
            Error::BufferTooSmall {
                operand: OperandName::A,
                len: 15,
                required: 16
            }
        ));
    }
}
