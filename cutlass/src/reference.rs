//! Host reference GEMM with f64 accumulation, and a tolerance check against it.
//!
//! Independent of the kernels: it reads the operands through the same geometry rules
//! ([`GemmProblem::resolve`]) but does its own arithmetic in f64, so it is the yardstick GPU results
//! are compared with.

use crate::element::Element;
use crate::error::{Error, OperandName, Result};
use crate::problem::{GemmProblem, ResolvedMatrix};

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
}

/// Computes the reference on host slices laid out as `problem` says. Uses all available cores.
pub fn gemm<TA: Element, TB: Element, TC: Element>(
    problem: &GemmProblem,
    a: &[TA],
    b: &[TB],
    c: Option<&[TC]>,
) -> Result<Reference> {
    problem.check()?;
    let ra = problem.resolve(OperandName::A)?;
    let rb = problem.resolve(OperandName::B)?;
    let rc = problem.resolve(OperandName::C)?;
    for (op, r, len) in [(OperandName::A, ra, a.len()), (OperandName::B, rb, b.len())] {
        if len < r.required_len() {
            return Err(Error::BufferTooSmall {
                operand: op,
                len,
                required: r.required_len(),
            });
        }
    }
    if let Some(c) = c {
        if c.len() < rc.required_len() {
            return Err(Error::BufferTooSmall {
                operand: OperandName::C,
                len: c.len(),
                required: rc.required_len(),
            });
        }
    } else if problem.beta != 0.0 {
        return Err(Error::InvalidProblem {
            reason: "beta is nonzero but no C was given".into(),
        });
    }
    let (m, n, k, batch) = (problem.m, problem.n, problem.k, problem.batch);
    let alpha = problem.alpha as f64;
    let beta = problem.beta as f64;
    let mut value = vec![0.0f64; batch * m * n];
    let mut magnitude = vec![0.0f64; batch * m * n];
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .min(64);
    let rows_total = batch * m;
    let chunk_rows = rows_total.div_ceil(threads).max(1);
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
                        *x = a[ra.offset(l, i, p)].to_f64();
                    }
                    for j in 0..n {
                        for (p, x) in bcol.iter_mut().enumerate() {
                            *x = b[rb.offset(l, p, j)].to_f64();
                        }
                        let (mut acc, mut mag) = (0.0f64, 0.0f64);
                        for (x, y) in arow.iter().zip(bcol.iter()) {
                            acc += x * y;
                            mag += (x * y).abs();
                        }
                        let cv = match c {
                            Some(c) if beta != 0.0 => beta * c[rc.offset(l, i, j)].to_f64(),
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
    })
}

/// The outcome of comparing a result with the reference.
#[derive(Clone, Debug, PartialEq)]
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
pub fn tolerance<TD: Element>(reference: f64, magnitude: f64, k: usize) -> f64 {
    let u32_ = f32::UNIT_ROUNDOFF;
    let tiny = match TD::DATA_TYPE {
        cutlass_kernels::DataType::F16 => 6.2e-5,
        cutlass_kernels::DataType::Bf16 => 1.2e-38,
        _ => 1.2e-38,
    };
    2.0 * TD::UNIT_ROUNDOFF * reference.abs() + 2.0 * k as f64 * u32_ * magnitude + tiny
}

/// Compares D (read through `d`'s geometry) with the reference, element by element.
pub fn compare<TD: Element>(
    d: &[TD],
    d_geometry: &ResolvedMatrix,
    reference: &Reference,
) -> Comparison {
    let (m, n, k, batch) = reference.shape;
    let mut out = Comparison {
        checked: 0,
        failures: 0,
        max_abs_error: 0.0,
        max_error_ratio: 0.0,
        first_failure: None,
    };
    for l in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let idx = (l * m + i) * n + j;
                let want = reference.value[idx];
                let got = d[d_geometry.offset(l, i, j)].to_f64();
                let bound = tolerance::<TD>(want, reference.magnitude[idx], k);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::MatrixLayout;
    use half::bf16;

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
                    la.with_ld(if la.layout == cutlass_kernels::Layout::RowMajor {
                        k + 2
                    } else {
                        m + 3
                    })
                    .with_batch_stride(100),
                )
                .with_b(
                    lb.with_ld(if lb.layout == cutlass_kernels::Layout::RowMajor {
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
