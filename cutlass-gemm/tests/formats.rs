//! Properties of the narrow formats, block scaling and the host reference (CPU only).

use cutlass_gemm::formats::packed::PackedVec;
use cutlass_gemm::formats::scale_layout::ScaleFactorLayout;
use cutlass_gemm::numeric::{E2M1, E2M3, E3M2, E4M3, E5M2, UE4M3, UE8M0};
use cutlass_gemm::quantize::host::{
    dequantize_fp8_blockwise, quantize_fp8_blockwise, quantize_mx, quantize_nvfp4, ScaledElement,
};
use cutlass_gemm::reference::{self, HostMatrix, PackedStrided, Scaled, Strided};
use cutlass_gemm::{DataType, GemmProblem, Layout, MatrixLayout, OperandName};
use cutlass_gemm_catalog::tables::{type_rows, TypeFamily};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Values spread over several binades, with a few outliers and zeros.
    fn value(&mut self) -> f32 {
        let r = self.next();
        if r < 0.02 {
            return 0.0;
        }
        let mag = 2f64.powf(self.next() * 16.0 - 8.0) * if r > 0.99 { 1000.0 } else { 1.0 };
        (if self.next() < 0.5 { -mag } else { mag }) as f32
    }
}

/// Half an ulp of `y` in a format with `man` mantissa bits and minimum normal exponent `emin`,
/// plus how far |y| lies beyond the format's max (saturation).
fn element_bound(y: f64, man: u32, emin: i32, max: f64) -> f64 {
    let e = if y == 0.0 {
        emin
    } else {
        (y.abs().log2().floor() as i32).max(emin)
    };
    2f64.powi(e - man as i32 - 1) + (y.abs() - max).max(0.0)
}

fn check_mx<E: ScaledElement>(man: u32, emin: i32, max: f64) -> usize {
    assert_eq!(E::MAX, max, "format max");
    let mut rng = Rng(0x1234_5678);
    let (rows, k) = (37, 200); // k not a multiple of 32: a partial last block
    let x: Vec<f32> = (0..rows * k).map(|_| rng.value()).collect();
    let q = quantize_mx::<E>(&x, rows, k);
    assert_eq!(q.scales.len(), rows * k.div_ceil(32));
    let deq = q.dequantize();
    let mut checked = 0;
    for r in 0..rows {
        for c in 0..k {
            let s = q.scales[r * k.div_ceil(32) + c / 32].to_f64();
            let xv = x[r * k + c] as f64;
            let bound = s * element_bound(xv / s, man, emin, E::MAX);
            assert!(
                (xv - deq[r * k + c]).abs() <= bound,
                "row {r} col {c}: {xv} -> {} (bound {bound})",
                deq[r * k + c]
            );
            checked += 1;
        }
        // OCP rule: the block max lands in [2^emax, 2^(emax+1)) after scaling, emax being the
        // exponent of the format's largest value (from the decoded format, not the constant).
        let emax = E::MAX.log2().floor() as i32;
        for b in 0..k.div_ceil(32) {
            let amax = x[r * k + b * 32..(r * k + (b + 1) * 32).min((r + 1) * k)]
                .iter()
                .fold(0f32, |m, v| m.max(v.abs())) as f64;
            if amax > 0.0 {
                let y = amax / q.scales[r * k.div_ceil(32) + b].to_f64();
                assert!(
                    y >= 2f64.powi(emax) && y < 2f64.powi(emax + 1),
                    "block scale off: {y}"
                );
            }
        }
    }
    checked
}

#[test]
fn mx_quantization_error_is_within_the_format_bound() {
    assert!(check_mx::<E4M3>(3, -6, E4M3::max_finite()) > 0);
    check_mx::<E5M2>(2, -14, E5M2::max_finite());
    check_mx::<E2M3>(3, 0, E2M3::max_finite());
    check_mx::<E3M2>(2, -2, E3M2::max_finite());
    check_mx::<E2M1>(1, 0, E2M1::max_finite());
}

#[test]
fn mx_special_blocks() {
    let mut x = vec![0.0f32; 64];
    x[40] = f32::NAN;
    let q = quantize_mx::<E4M3>(&x, 1, 64);
    assert_eq!(q.scales[0], UE8M0::from_exponent(-127)); // all-zero block
    assert!(q.scales[1].is_nan()); // a NaN poisons its block's scale
    assert!(q.dequantize()[32..].iter().all(|v| v.is_nan()));
    assert!(q.dequantize()[..32].iter().all(|&v| v == 0.0));
}

#[test]
fn nvfp4_two_level_quantization_error_is_bounded() {
    let mut rng = Rng(99);
    let (rows, k) = (20, 100);
    let x: Vec<f32> = (0..rows * k).map(|_| rng.value()).collect();
    let q = quantize_nvfp4(&x, rows, k);
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    assert_eq!(q.global_scale, amax / (448.0 * 6.0));
    let deq = q.dequantize();
    for r in 0..rows {
        for c in 0..k {
            let s = q.scales[r * k.div_ceil(16) + c / 16].to_f64() * q.global_scale as f64;
            let xv = x[r * k + c] as f64;
            let bound = if s > 0.0 {
                s * element_bound(xv / s, 1, 0, 6.0)
            } else {
                xv.abs()
            };
            assert!(
                (xv - deq[r * k + c]).abs() <= bound * (1.0 + 1e-6),
                "({r},{c}) {xv} vs {}",
                deq[r * k + c]
            );
        }
    }
    // Block scales are RNE of amax/(6 g): within half an ue4m3 ulp (rel 2^-4) of it.
    for r in 0..rows {
        for b in 0..k.div_ceil(16) {
            let bmax = x[r * k + b * 16..(r * k + (b + 1) * 16).min((r + 1) * k)]
                .iter()
                .fold(0f32, |m, v| m.max(v.abs()));
            let want = (bmax / (6.0 * q.global_scale)) as f64;
            let got = q.scales[r * k.div_ceil(16) + b].to_f64();
            assert!(
                (got - want).abs() <= want * 2f64.powi(-4) + 2f64.powi(-10),
                "{got} vs {want}"
            );
        }
    }
}

#[test]
fn fp8_blockwise_round_trip() {
    let mut rng = Rng(7);
    for (rows, cols, br, bc) in [(300, 260, 1, 128), (300, 260, 128, 128)] {
        let x: Vec<f32> = (0..rows * cols).map(|_| rng.value()).collect();
        let (q, s) = quantize_fp8_blockwise(&x, rows, cols, br, bc);
        assert_eq!(s.len(), rows.div_ceil(br) * cols.div_ceil(bc));
        let deq = dequantize_fp8_blockwise(&q, &s, rows, cols, br, bc);
        for i in 0..rows * cols {
            let scale = s[(i / cols / br) * cols.div_ceil(bc) + (i % cols) / bc] as f64;
            let bound = scale * element_bound(x[i] as f64 / scale, 3, -6, 448.0) * (1.0 + 1e-6);
            assert!(
                (x[i] as f64 - deq[i]).abs() <= bound,
                "{i}: {} vs {}",
                x[i],
                deq[i]
            );
        }
    }
}

#[test]
fn scale_layout_round_trips_and_is_injective() {
    let mut rng = Rng(3);
    for (rows, k, batch, vec) in [
        (1, 16, 1, 16),
        (129, 200, 2, 16),
        (300, 544, 3, 32),
        (128, 128, 1, 32),
        (257, 1000, 1, 64),
    ] {
        let layout = ScaleFactorLayout::new(rows, k, batch, vec);
        let plain: Vec<u8> = (0..batch * rows * layout.sf_cols())
            .map(|_| (rng.next() * 255.0) as u8)
            .collect();
        let sw = layout.swizzle(&plain, 0u8);
        assert_eq!(sw.len(), layout.size());
        assert_eq!(layout.unswizzle(&sw), plain);
        let mut seen = vec![false; layout.size()];
        for l in 0..batch {
            for r in 0..rows {
                for j in 0..layout.sf_cols() {
                    let o = layout.offset_sf(r, j, l);
                    assert!(!seen[o], "offset {o} used twice");
                    seen[o] = true;
                }
            }
        }
    }
}

/// Builds an operand of `ty` holding random values in the given layout; returns it and its values.
struct Operand {
    geometry: cutlass_gemm::ResolvedMatrix,
    dense: Vec<f64>, // row-major values of the logical matrix (per batch)
    kind: Storage,
}

enum Storage {
    F32(Vec<f32>),
    Half(Vec<half::f16>),
    Bf16(Vec<half::bf16>),
    I8(Vec<i8>),
    U8(Vec<u8>),
    E4M3(Vec<E4M3>),
    E5M2(Vec<E5M2>),
    E2M3(PackedVec<E2M3>),
    E3M2(PackedVec<E3M2>),
    E2M1(PackedVec<E2M1>),
}

fn make_operand(rng: &mut Rng, ty: DataType, geometry: cutlass_gemm::ResolvedMatrix) -> Operand {
    let n = geometry.required_len();
    let mut dense = vec![0.0; geometry.batch * geometry.rows * geometry.cols];
    let mut vals = vec![0.0f32; n];
    for l in 0..geometry.batch {
        for r in 0..geometry.rows {
            for c in 0..geometry.cols {
                let v = (rng.next() * 8.0 - 4.0) as f32;
                vals[geometry.offset(l, r, c)] = v;
            }
        }
    }
    let kind = match ty {
        DataType::F32 | DataType::Tf32 => Storage::F32(
            vals.iter()
                .map(|&v| cutlass_gemm::numeric::Tf32::from_f32(v).to_f32())
                .collect(),
        ),
        DataType::F16 => Storage::Half(vals.iter().map(|&v| half::f16::from_f32(v)).collect()),
        DataType::Bf16 => Storage::Bf16(vals.iter().map(|&v| half::bf16::from_f32(v)).collect()),
        DataType::I8 => Storage::I8(vals.iter().map(|&v| (v * 30.0) as i8).collect()),
        DataType::U8 => Storage::U8(vals.iter().map(|&v| (v.abs() * 60.0) as u8).collect()),
        DataType::E4M3 => Storage::E4M3(vals.iter().map(|&v| E4M3::from_f32(v)).collect()),
        DataType::E5M2 => Storage::E5M2(vals.iter().map(|&v| E5M2::from_f32(v)).collect()),
        DataType::E2M3 => Storage::E2M3(PackedVec::from_values(
            &vals.iter().map(|&v| E2M3::from_f32(v)).collect::<Vec<_>>(),
        )),
        DataType::E3M2 => Storage::E3M2(PackedVec::from_values(
            &vals.iter().map(|&v| E3M2::from_f32(v)).collect::<Vec<_>>(),
        )),
        DataType::E2M1 => Storage::E2M1(PackedVec::from_values(
            &vals.iter().map(|&v| E2M1::from_f32(v)).collect::<Vec<_>>(),
        )),
        other => panic!("no operand storage for {other}"),
    };
    let value_at = |i: usize| -> f64 {
        match &kind {
            Storage::F32(v) => v[i] as f64,
            Storage::Half(v) => v[i].to_f64(),
            Storage::Bf16(v) => v[i].to_f64(),
            Storage::I8(v) => v[i] as f64,
            Storage::U8(v) => v[i] as f64,
            Storage::E4M3(v) => v[i].to_f64(),
            Storage::E5M2(v) => v[i].to_f64(),
            Storage::E2M3(v) => v.get(i).to_f64(),
            Storage::E3M2(v) => v.get(i).to_f64(),
            Storage::E2M1(v) => v.get(i).to_f64(),
        }
    };
    for l in 0..geometry.batch {
        for r in 0..geometry.rows {
            for c in 0..geometry.cols {
                dense[(l * geometry.rows + r) * geometry.cols + c] =
                    value_at(geometry.offset(l, r, c));
            }
        }
    }
    Operand {
        geometry,
        dense,
        kind,
    }
}

impl Operand {
    fn matrix(&self, op: OperandName) -> Box<dyn HostMatrix + '_> {
        let g = self.geometry;
        match &self.kind {
            Storage::F32(v) => Box::new(Strided::new(v, g, op).unwrap()),
            Storage::Half(v) => Box::new(Strided::new(v, g, op).unwrap()),
            Storage::Bf16(v) => Box::new(Strided::new(v, g, op).unwrap()),
            Storage::I8(v) => Box::new(Strided::new(v, g, op).unwrap()),
            Storage::U8(v) => Box::new(Strided::new(v, g, op).unwrap()),
            Storage::E4M3(v) => Box::new(Strided::new(v, g, op).unwrap()),
            Storage::E5M2(v) => Box::new(Strided::new(v, g, op).unwrap()),
            Storage::E2M3(v) => Box::new(PackedStrided::new(v.as_slice(), g, op).unwrap()),
            Storage::E3M2(v) => Box::new(PackedStrided::new(v.as_slice(), g, op).unwrap()),
            Storage::E2M1(v) => Box::new(PackedStrided::new(v.as_slice(), g, op).unwrap()),
        }
    }
}

fn ml(l: Layout) -> MatrixLayout {
    match l {
        Layout::RowMajor => MatrixLayout::row_major(),
        Layout::ColumnMajor => MatrixLayout::col_major(),
    }
}

type ScaledOperand<'a> = (Scaled<'a>, Vec<f64>, ScaleFactorLayout);

/// Random scale factors (as their values) for a block-scaled family, swizzled, wrapped around `inner`.
fn scaled<'a>(
    fam: TypeFamily,
    inner: &'a dyn HostMatrix,
    rows: usize,
    k: usize,
    batch: usize,
    op: OperandName,
    rng: &mut Rng,
) -> Option<ScaledOperand<'a>> {
    let (sf, vec) = fam.block_scale()?;
    let layout = ScaleFactorLayout::new(rows, k, batch, vec as usize);
    let plain: Vec<f64> = (0..batch * rows * layout.sf_cols())
        .map(|_| match sf {
            DataType::UE8M0 => UE8M0::from_exponent((rng.next() * 8.0) as i32 - 4).to_f64(),
            _ => UE4M3::from_f32((rng.next() * 4.0) as f32).to_f64(),
        })
        .collect();
    let sw = layout.swizzle(&plain, 0.0);
    Some((
        Scaled::new(inner, op, &sw, layout, 1.0).unwrap(),
        plain,
        layout,
    ))
}

/// For every type row of Tables 1–3, every concrete type pair and every allowed layout: the
/// reference over the typed (packed, block-scaled) operands equals a textbook f64 GEMM over the
/// dequantized values.
#[test]
fn reference_matches_a_plain_f64_gemm_for_every_type_row() {
    let mut rng = Rng(2026);
    let (m, n, k, batch) = (33, 18, 96, 2);
    let mut combos = 0;
    for row in type_rows() {
        for (ta, tb) in row.type_pairs() {
            for &(la, lb) in row.layouts() {
                let p = GemmProblem::new(m, n, k)
                    .with_batch(batch)
                    .with_a(ml(la))
                    .with_b(ml(lb))
                    .with_scalars(0.5, 0.0);
                let a = make_operand(&mut rng, ta, p.resolve(OperandName::A).unwrap());
                let b = make_operand(&mut rng, tb, p.resolve(OperandName::B).unwrap());
                let (ma, mb) = (a.matrix(OperandName::A), b.matrix(OperandName::B));
                // Block scales for Table 3 rows: random scale factors in the swizzled layout.
                let sa = scaled(row.a, ma.as_ref(), m, k, batch, OperandName::A, &mut rng);
                let sb = scaled(row.b, mb.as_ref(), n, k, batch, OperandName::B, &mut rng);
                let ra: &dyn HostMatrix =
                    sa.as_ref().map_or(ma.as_ref(), |s| &s.0 as &dyn HostMatrix);
                let rb: &dyn HostMatrix =
                    sb.as_ref().map_or(mb.as_ref(), |s| &s.0 as &dyn HostMatrix);
                let got = reference::gemm_values(&p, ra, rb, None).unwrap();
                // Textbook GEMM on dequantized row-major copies (plain scale matrices).
                for l in 0..batch {
                    for i in 0..m {
                        for j in 0..n {
                            let mut acc = 0.0;
                            for q in 0..k {
                                let mut av = a.dense[(l * m + i) * k + q];
                                let mut bv = b.dense[(l * k + q) * n + j];
                                if let Some((_, plain, lay)) = &sa {
                                    av *= plain[(l * m + i) * lay.sf_cols() + q / lay.vec];
                                }
                                if let Some((_, plain, lay)) = &sb {
                                    bv *= plain[(l * n + j) * lay.sf_cols() + q / lay.vec];
                                }
                                acc += av * bv;
                            }
                            let want = 0.5 * acc;
                            let g = got.value[(l * m + i) * n + j];
                            assert!(
                                (g - want).abs() <= 1e-12 * want.abs().max(1.0),
                                "table {} row {} {ta}x{tb} {la:?}/{lb:?} at ({l},{i},{j}): {g} vs {want}",
                                row.table,
                                row.row
                            );
                        }
                    }
                }
                combos += 1;
            }
        }
    }
    println!("{combos} (type row, type pair, layout) combinations checked");
    assert!(combos >= 100);
}

#[test]
fn output_conversion_and_block_scaled_output() {
    let mut rng = Rng(5);
    let (m, n, k) = (8, 64, 32);
    let p = GemmProblem::new(m, n, k);
    let a: Vec<f32> = (0..m * k).map(|_| rng.value()).collect();
    let b: Vec<f32> = (0..k * n).map(|_| rng.value()).collect();
    let r = reference::gemm(&p, &a, &b, None::<&[f32]>).unwrap();
    let d8 = r.to_output(E4M3::from_f32);
    for (v, q) in r.value.iter().zip(&d8) {
        assert_eq!(q.to_bits(), E4M3::from_f32(*v as f32).to_bits());
    }
    // NVFP4-style output: e2m1 with ue4m3 scales per 16 along N.
    let (el, sf) = r.to_block_scaled::<E2M1, UE4M3>(16, 1.0, UE4M3::from_f32);
    assert_eq!(sf.len(), m * n / 16);
    for (i, v) in r.value.iter().enumerate() {
        let s = sf[i / 16].to_f64();
        let got = el[i].to_f64() * s;
        // Element rounding (half an e2m1 ulp of the scaled value) plus the scale's rounding.
        let y = *v / s;
        let bound = s * element_bound(y, 1, 0, 6.0) + v.abs() * 2f64.powi(-4);
        assert!(
            (got - v).abs() <= bound * 1.001 + 1e-30,
            "{i}: {got} vs {v}"
        );
    }
    // MX output: e4m3 with ue8m0 (round up) scales per 32.
    let (el, sf) = r.to_block_scaled::<E4M3, UE8M0>(32, 1.0, UE8M0::from_f32);
    for (i, v) in r.value.iter().enumerate() {
        let s = sf[i / 32].to_f64();
        assert!((el[i].to_f64() * s - v).abs() <= s * element_bound(v / s, 3, -6, 448.0) * 1.001);
    }
}
