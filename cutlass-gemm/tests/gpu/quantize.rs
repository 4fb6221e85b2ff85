//! GPU quantizers against the host quantizers of `cutlass_gemm::quantize::host`: bit-exact, zero differences
//! allowed. Shapes with M and K not multiples of 128; inputs with outliers, all-zero blocks,
//! subnormals, NaN and infinity.
//!
//! `#[ignore = "needs a CUDA GPU"]`: run with `--include-ignored` on a GPU machine.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use cutlass_gemm::formats::packed::{PackedVec, SubByte};
use cutlass_gemm::formats::scale_layout::{ScaleFactorLayout, ScaleMajor};
use cutlass_gemm::numeric::{E2M1, E2M3, E3M2, E4M3, E5M2};
use cutlass_gemm::quantize::host::{self, ScaledElement};
use cutlass_gemm::quantize::{self, Fp8Block, MxElement, QuantInput};
use half::{bf16, f16};

use crate::common::device;

/// Inputs that stress the edge cases: a wide spread of magnitudes, outliers, all-zero 128-blocks,
/// f32 subnormals and, when `specials`, NaN and ±inf.
fn inputs(rows: usize, k: usize, seed: u64, specials: bool) -> Vec<f32> {
    let mut s = seed | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..rows * k)
        .map(|i| {
            let (r, c) = (i / k, i % k);
            if (r / 16 + c / 128) % 7 == 3 {
                return 0.0; // zero blocks
            }
            let u = next();
            let v = if u < 0.01 {
                (next() * 1e4) as f32 // outlier
            } else if u < 0.03 {
                f32::from_bits((next() * 8_000_000.0) as u32) // subnormal
            } else {
                (2f64.powf(next() * 20.0 - 10.0) * if next() < 0.5 { -1.0 } else { 1.0 }) as f32
            };
            if specials && i % 997 == 5 {
                [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][i % 3]
            } else {
                v
            }
        })
        .collect()
}

/// The input as T, and the f32 values T holds (what the host quantizer sees).
fn as_input<T: QuantInput>(x: &[f32]) -> (Vec<T>, Vec<f32>) {
    let t: Vec<T> = x.iter().map(|&v| T::from_f64(v as f64)).collect();
    let back = t.iter().map(|v| v.to_f64() as f32).collect();
    (t, back)
}

const SHAPES: [(usize, usize); 4] = [(200, 160), (129, 100), (1, 4096), (300, 520)];

fn check_fp8<T: QuantInput>(stream: &Arc<CudaStream>, specials: bool) -> usize {
    let mut compared = 0;
    for (rows, k) in SHAPES {
        for (block, major) in [
            (Fp8Block::Group1x128, ScaleMajor::K),
            (Fp8Block::Block128x128, ScaleMajor::K),
            (Fp8Block::Group1x128, ScaleMajor::MN),
            (Fp8Block::Block128x128, ScaleMajor::MN),
        ] {
            let (t, x) = as_input::<T>(&inputs(rows, k, rows as u64 * 31 + k as u64, specials));
            let dx = stream.clone_htod(&t).unwrap();
            let q = quantize::quantize_fp8_blockwise(stream, &dx, rows, k, block, major).unwrap();
            let (he, hs_k) = host::quantize_fp8_blockwise(&x, rows, k, block.rows(), 128);
            let (rb, kb) = (rows.div_ceil(block.rows()), k.div_ceil(128));
            // The GPU writes the same scales in `major` order.
            let hs = cutlass_gemm::formats::scale_layout::scales_to_major(
                &hs_k,
                rb,
                kb,
                ScaleMajor::K,
                major,
            );
            let de = stream.clone_dtoh(&q.data).unwrap();
            let ds = stream.clone_dtoh(&q.scales).unwrap();
            let diff_e = he
                .iter()
                .zip(&de)
                .filter(|(a, b)| a.to_bits() != b.to_bits())
                .count();
            let diff_s = hs
                .iter()
                .zip(&ds)
                .filter(|(a, b)| a.to_bits() != b.to_bits())
                .count();
            assert_eq!(
                (diff_e, diff_s),
                (0, 0),
                "FP8 {block:?} {rows}x{k}: elements and scales differing"
            );
            // Dequantization: e4m3 * scale rounded once, as the host computes it.
            let hd = host::dequantize_fp8_blockwise(&he, &hs_k, rows, k, block.rows(), 128);
            let dd = stream.clone_dtoh(&q.dequantize(stream).unwrap()).unwrap();
            let diff_d = hd
                .iter()
                .zip(&dd)
                .filter(|(a, b)| {
                    !((**a as f32).to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()))
                })
                .count();
            assert_eq!(diff_d, 0, "FP8 dequantization {block:?} {rows}x{k}");
            compared += he.len() + hs.len() + hd.len();
        }
    }
    compared
}

fn packed_bytes<E: ScaledElement + MxElement>(
    elements: &[E],
    to_code: impl Fn(E) -> u8,
    pack: impl Fn(&[u8]) -> Vec<u8>,
) -> Vec<u8> {
    let codes: Vec<u8> = elements.iter().map(|&e| to_code(e)).collect();
    pack(&codes)
}

fn pack_sub<S: SubByte>(codes: &[u8]) -> Vec<u8> {
    PackedVec::<S>::from_values(&codes.iter().map(|&c| S::from_code(c)).collect::<Vec<_>>())
        .as_bytes()
        .to_vec()
}

fn check_mx<E, T>(
    stream: &Arc<CudaStream>,
    to_code: fn(E) -> u8,
    pack: fn(&[u8]) -> Vec<u8>,
    specials: bool,
) -> usize
where
    E: ScaledElement + MxElement,
    T: QuantInput,
{
    let mut compared = 0;
    for (rows, k) in SHAPES {
        if k % E::K_MULTIPLE != 0 {
            continue;
        }
        let (t, x) = as_input::<T>(&inputs(rows, k, 7 * rows as u64 + k as u64, specials));
        let dx = stream.clone_htod(&t).unwrap();
        let q = quantize::quantize_mx::<E, T>(stream, &dx, rows, k).unwrap();
        let h = host::quantize_mx::<E>(&x, rows, k);
        let want = packed_bytes(&h.elements, to_code, pack);
        let got = stream.clone_dtoh(&q.data).unwrap();
        assert_eq!(got.len(), want.len());
        let diff = want.iter().zip(&got).filter(|(a, b)| a != b).count();
        assert_eq!(
            diff,
            0,
            "MX {} {rows}x{k}: packed bytes differing",
            std::any::type_name::<E>()
        );
        let layout = ScaleFactorLayout::new(rows, k, 1, 32);
        let want_sf: Vec<u8> =
            layout.swizzle(&h.scales.iter().map(|s| s.to_bits()).collect::<Vec<_>>(), 0);
        let got_sf: Vec<u8> = stream
            .clone_dtoh(&q.scales)
            .unwrap()
            .iter()
            .map(|s| s.to_bits())
            .collect();
        assert_eq!(want_sf, got_sf, "MX scales {rows}x{k}");
        let hd = h.dequantize();
        let dd = stream.clone_dtoh(&q.dequantize(stream).unwrap()).unwrap();
        let diff_d = hd
            .iter()
            .zip(&dd)
            .filter(|(a, b)| !((**a as f32).to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())))
            .count();
        assert_eq!(diff_d, 0, "MX dequantization {rows}x{k}");
        compared += want.len() + want_sf.len() + hd.len();
    }
    compared
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_blockwise_is_bit_exact() {
    let (_ctx, stream) = device();
    let n = check_fp8::<bf16>(&stream, false)
        + check_fp8::<f16>(&stream, false)
        + check_fp8::<f32>(&stream, true);
    println!("FP8 blockwise: {n} values compared, 0 differ");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn mx_formats_are_bit_exact() {
    let (_ctx, stream) = device();
    let mut n = 0;
    n += check_mx::<E4M3, bf16>(&stream, |e| e.to_bits(), |c| c.to_vec(), false);
    n += check_mx::<E5M2, bf16>(&stream, |e| e.to_bits(), |c| c.to_vec(), false);
    n += check_mx::<E2M3, bf16>(&stream, |e| e.to_bits(), pack_sub::<E2M3>, false);
    n += check_mx::<E3M2, f16>(&stream, |e| e.to_bits(), pack_sub::<E3M2>, false);
    n += check_mx::<E2M1, bf16>(&stream, |e| e.to_bits(), pack_sub::<E2M1>, false);
    n += check_mx::<E4M3, f32>(&stream, |e| e.to_bits(), |c| c.to_vec(), true);
    n += check_mx::<E2M1, f32>(&stream, |e| e.to_bits(), pack_sub::<E2M1>, true);
    println!("MX: {n} values compared, 0 differ");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn nvfp4_is_bit_exact() {
    let (_ctx, stream) = device();
    let mut n = 0;
    for (specials, (rows, k)) in [
        (false, (200, 160)),
        (false, (129, 100)),
        (true, (300, 520)),
        (false, (1, 4096)),
    ] {
        let (t, x) = as_input::<bf16>(&inputs(rows, k, 3 + rows as u64, specials));
        let dx = stream.clone_htod(&t).unwrap();
        let q = quantize::quantize_nvfp4(&stream, &dx, rows, k).unwrap();
        let h = host::quantize_nvfp4(&x, rows, k);
        assert_eq!(
            q.global_scale(&stream).unwrap().to_bits(),
            h.global_scale.to_bits(),
            "global scale"
        );
        let want = pack_sub::<E2M1>(&h.elements.iter().map(|e| e.to_bits()).collect::<Vec<_>>());
        let got = stream.clone_dtoh(&q.data).unwrap();
        let bad: Vec<String> = want
            .iter()
            .zip(&got)
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .take(4)
            .map(|(i, (a, b))| {
                let e0 = 2 * i;
                format!(
                    "byte {i}: want {a:#04x} got {b:#04x}; x = [{:e}, {:e}], row {} col {}",
                    x[e0],
                    x[(e0 + 1).min(x.len() - 1)],
                    e0 / k,
                    e0 % k
                )
            })
            .collect();
        assert!(
            bad.is_empty(),
            "NVFP4 {rows}x{k} elements differ:\n{}",
            bad.join("\n")
        );
        let layout = ScaleFactorLayout::new(rows, k, 1, 16);
        let want_sf = layout.swizzle(&h.scales.iter().map(|s| s.to_bits()).collect::<Vec<_>>(), 0);
        let got_sf: Vec<u8> = stream
            .clone_dtoh(&q.scales)
            .unwrap()
            .iter()
            .map(|s| s.to_bits())
            .collect();
        assert_eq!(want_sf, got_sf, "NVFP4 {rows}x{k} scales");
        let hd = h.dequantize();
        let dd = stream.clone_dtoh(&q.dequantize(&stream).unwrap()).unwrap();
        let diff_d = hd
            .iter()
            .zip(&dd)
            .filter(|(a, b)| !((**a as f32).to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())))
            .count();
        assert_eq!(diff_d, 0, "NVFP4 dequantization {rows}x{k}");
        // One pass with the amax given: the same bytes.
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        let mut q1 = quantize::Nvfp4Tensor::alloc(&stream, rows, k).unwrap();
        quantize::quantize_nvfp4_with_amax_into(&stream, &dx, amax, &mut q1).unwrap();
        assert_eq!(
            stream.clone_dtoh(&q1.data).unwrap(),
            got,
            "one-pass NVFP4 {rows}x{k} elements"
        );
        let got_sf1: Vec<u8> = stream
            .clone_dtoh(&q1.scales)
            .unwrap()
            .iter()
            .map(|s| s.to_bits())
            .collect();
        assert_eq!(got_sf1, want_sf, "one-pass NVFP4 {rows}x{k} scales");
        n += want.len() + want_sf.len() + hd.len() + 1;
    }
    println!("NVFP4: {n} values compared, 0 differ");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_arguments_get_typed_errors() {
    let (_ctx, stream) = device();
    let x = stream.alloc_zeros::<bf16>(100).unwrap();
    assert!(matches!(
        quantize::quantize_mx::<E2M1, bf16>(&stream, &x, 10, 11).unwrap_err(),
        cutlass_gemm::Error::BufferTooSmall { .. }
    ));
    assert!(matches!(
        quantize::quantize_mx::<E2M3, bf16>(&stream, &x, 10, 10).unwrap_err(),
        cutlass_gemm::Error::Misaligned {
            operand: cutlass_gemm::OperandName::A,
            what: cutlass_gemm::Quantity::PackedK {
                op: cutlass_gemm::QuantizeOp::QuantizeMx,
                bits: 6,
            },
            value: 10,
            required: 4,
        }
    ));
    assert!(matches!(
        quantize::quantize_fp8_blockwise(&stream, &x, 0, 10, Fp8Block::Group1x128, ScaleMajor::MN)
            .unwrap_err(),
        cutlass_gemm::Error::InvalidProblem {
            reason: cutlass_gemm::ProblemRule::ZeroRowsOrK {
                op: cutlass_gemm::QuantizeOp::QuantizeFp8Blockwise,
                rows: 0,
                k: 10,
            },
        }
    ));
}
