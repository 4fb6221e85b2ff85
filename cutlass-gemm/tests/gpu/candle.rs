//! The candle integration (feature `candle`) on a GPU, against candle's own matmul.
//!
//! Build and run: `cargo test --release --features candle --test gpu_candle -- --include-ignored`
//! (README "From candle" says how to build it on a machine without the CUDA libraries). Every test
//! is `#[ignore = "needs a CUDA GPU"]`, and fails rather than passing when asked to run without one.
//!
//! Bounds (elementwise, from rounding analysis; each test also prints the observed errors):
//! - bf16/f16 `matmul` vs candle's (cuBLAS): both accumulate in f32 and round once, so
//!   `|ours - candle| <= 2u |candle| + 2 k 2^-24 (|a|·|b|)` with u the output's unit roundoff.
//! - FP8 `matmul_fp8` vs the f32 product of the same e4m3 values: `2 u_bf16 |ref| + 2 k 2^-24 (|a|·|b|)`
//!   (the bound of `cutlass_gemm::reference::tolerance`, which the FP8 kernel tests use).
//! - `Linear` (bias and activation fused) vs candle's layer and activation in f32 on the same
//!   values: the f32 value before the activation is within `(2k + 6) 2^-24 (|x|·|W|ᵀ + |b|)` of
//!   exact on both sides, the activations grow that by at most 1.13, the GPU's tanh adds up to
//!   `2^-11.9 |pre|` (GELU), and D is rounded once: `2u |ref| + 1.13 ((4k + 12) 2^-24 + 2^-11)
//!   (|x|·|W|ᵀ + |b|)`.
//! - `grouped_matmul` vs the loop of candle matmuls per expert: the `matmul` bound, per expert.
//! - `Fp8Linear` vs the bf16 layer in f32: each product term carries at most (1 + 2^-4)^2 - 1 <
//!   0.13 relative error from e4m3 rounding of x and W, so `|y_q - y| <= 0.13 (|x|·|W|ᵀ) + 2^-8 |y|`.

use crate::common;

use candle_core::{DType, Device, Module, Tensor, D};
use cutlass_gemm::candle::{
    broadcast_matmul, grouped_matmul, grouped_matmul_fp8_blockwise, matmul, matmul_fp8, Fp8Linear,
    GatedLinear, Linear, Matmul, Nvfp4Linear, WeightOnlyLinear,
};
use cutlass_gemm::Activation;

fn gpu() -> Device {
    common::gemm_device(); // asserts a GPU is there
    Device::new_cuda(0).expect("candle CUDA device")
}

fn rand(dev: &Device, shape: &[usize], dtype: DType) -> Tensor {
    Tensor::rand(-1f32, 1f32, shape, dev)
        .and_then(|t| t.to_dtype(dtype))
        .unwrap()
}

/// Elementwise `|ours - reference| <= rel |reference| + abs_scale * magnitude`, with `magnitude`
/// the product of absolute values. Returns (violations, max |diff|, rms(diff) / rms(reference)).
fn compare(
    ours: &Tensor,
    reference: &Tensor,
    magnitude: &Tensor,
    rel: f64,
    abs_scale: f64,
) -> (f32, f32, f32) {
    compare_beyond(ours, reference, magnitude, rel, abs_scale, None)
}

/// [`compare`] with a further bound per element (broadcast to the output's shape).
fn compare_beyond(
    ours: &Tensor,
    reference: &Tensor,
    magnitude: &Tensor,
    rel: f64,
    abs_scale: f64,
    extra: Option<&Tensor>,
) -> (f32, f32, f32) {
    let ours = ours.to_dtype(DType::F32).unwrap();
    let reference = reference.to_dtype(DType::F32).unwrap();
    let magnitude = magnitude.to_dtype(DType::F32).unwrap();
    assert_eq!(ours.dims(), reference.dims());
    let diff = (&ours - &reference).unwrap().abs().unwrap();
    let mut bound =
        ((reference.abs().unwrap() * rel).unwrap() + (magnitude * abs_scale).unwrap()).unwrap();
    if let Some(extra) = extra {
        bound = bound.broadcast_add(extra).unwrap();
    }
    let violations = diff
        .gt(&bound)
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap()
        .sum_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    let max = diff
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    let rms = |t: &Tensor| {
        t.sqr()
            .unwrap()
            .mean_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
            .sqrt()
    };
    (violations, max, rms(&diff) / rms(&reference))
}

/// |a|·|b| in f32 (for the accumulation-error term).
fn magnitude(a: &Tensor, b: &Tensor) -> Tensor {
    let a = a.abs().unwrap().to_dtype(DType::F32).unwrap();
    let b = b.abs().unwrap().to_dtype(DType::F32).unwrap();
    a.contiguous()
        .unwrap()
        .matmul(&b.contiguous().unwrap())
        .unwrap()
}

fn unit_roundoff(dtype: DType) -> f64 {
    match dtype {
        DType::BF16 => 2f64.powi(-8),
        DType::F16 => 2f64.powi(-11),
        _ => unreachable!(),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn matmul_matches_candle_across_layouts() {
    let dev = gpu();
    let mut cases = 0;
    for dtype in [DType::BF16, DType::F16] {
        let u = unit_roundoff(dtype);
        // (name, a, b): every pair is (…, m, k) x (…, k, n).
        let big = rand(&dev, &[4, 3, 64, 320], dtype);
        let w = rand(&dev, &[256, 128], dtype); // a weight (n, k)
        let x3 = rand(&dev, &[3, 48, 128], dtype);
        let pairs: Vec<(&str, Tensor, Tensor)> = vec![
            (
                "2d",
                rand(&dev, &[64, 128], dtype),
                rand(&dev, &[128, 256], dtype),
            ),
            (
                "decode m=1",
                rand(&dev, &[1, 512], dtype),
                rand(&dev, &[512, 1024], dtype),
            ),
            (
                "odd m, n",
                rand(&dev, &[300, 520], dtype),
                rand(&dev, &[520, 136], dtype),
            ),
            (
                "batched 2x3",
                rand(&dev, &[2, 3, 40, 64], dtype),
                rand(&dev, &[2, 3, 64, 96], dtype),
            ),
            ("b = w.t()", rand(&dev, &[80, 128], dtype), w.t().unwrap()),
            (
                "a transposed",
                rand(&dev, &[128, 72], dtype).t().unwrap(),
                rand(&dev, &[128, 64], dtype),
            ),
            (
                "both transposed",
                rand(&dev, &[128, 72], dtype).t().unwrap(),
                w.t().unwrap().t().unwrap().t().unwrap(),
            ),
            // A column slice of a wider matrix: row stride 320, offset 64 elements (128 bytes).
            (
                "column slice",
                big.get(0)
                    .unwrap()
                    .get(0)
                    .unwrap()
                    .narrow(1, 64, 128)
                    .unwrap(),
                rand(&dev, &[128, 64], dtype),
            ),
            // Batch dims (2, 3) out of (4, 3) slices... strides (3*64*320, 64*320): one strided batch.
            (
                "outer batch slice",
                big.narrow(0, 1, 2).unwrap().narrow(3, 0, 128).unwrap(),
                rand(&dev, &[2, 3, 128, 32], dtype),
            ),
            // Batch dims (4, 2) of (4, 3): not one stride, copied.
            (
                "strided batch (copied)",
                big.narrow(1, 0, 2).unwrap().narrow(3, 0, 64).unwrap(),
                rand(&dev, &[4, 2, 64, 48], dtype),
            ),
            // Shapes whose rows TMA cannot read in place: served through padded copies.
            (
                "2x2 by 2x2",
                rand(&dev, &[2, 2], dtype),
                rand(&dev, &[2, 2], dtype),
            ),
            (
                "odd 3x7 by 7x5",
                rand(&dev, &[3, 7], dtype),
                rand(&dev, &[7, 5], dtype),
            ),
            (
                "k = 100, batched",
                rand(&dev, &[2, 32, 100], dtype),
                rand(&dev, &[2, 100, 65], dtype),
            ),
            // A view one element into its storage (2 bytes off the 16-byte alignment).
            (
                "misaligned view",
                big.get(1)
                    .unwrap()
                    .get(2)
                    .unwrap()
                    .narrow(1, 1, 200)
                    .unwrap(),
                rand(&dev, &[200, 24], dtype)
                    .t()
                    .unwrap()
                    .contiguous()
                    .unwrap()
                    .t()
                    .unwrap(),
            ),
            // x · W with W broadcast over the batch: folded into M.
            (
                "broadcast b",
                x3.clone(),
                w.t().unwrap().broadcast_as((3, 128, 256)).unwrap(),
            ),
        ];
        for (name, a, b) in pairs {
            let ours = matmul(&a, &b).unwrap_or_else(|e| panic!("{dtype:?} {name}: {e}"));
            let reference = a
                .contiguous()
                .unwrap()
                .matmul(&b.contiguous().unwrap())
                .unwrap();
            let k = a.dim(D::Minus1).unwrap() as f64;
            let mag = magnitude(&a, &b);
            let (bad, max, rel_rms) =
                compare(&ours, &reference, &mag, 2.0 * u, 2.0 * k * 2f64.powi(-24));
            println!(
                "{dtype:?} {name:<24} {:?} x {:?}: max |diff| {max:.3e}, rms diff / rms {rel_rms:.2e}, {bad} outside the bound",
                a.dims(),
                b.dims()
            );
            assert_eq!(bad, 0.0, "{dtype:?} {name}");
            assert!(
                rel_rms < 2.0 * u as f32,
                "{dtype:?} {name}: rms error {rel_rms}"
            );
            cases += 1;
        }
    }
    assert_eq!(cases, 30);
    // broadcast_matmul: a rank-2 weight against a batch.
    let w = rand(&dev, &[256, 128], DType::BF16);
    check_broadcast(&rand(&dev, &[3, 48, 128], DType::BF16), &w.t().unwrap());
    // Both sides broadcast, odd extents: (2, 1, 5, 9) x (1, 3, 9, 7) -> (2, 3, 5, 7).
    check_broadcast(
        &rand(&dev, &[2, 1, 5, 9], DType::F16),
        &rand(&dev, &[1, 3, 9, 7], DType::F16),
    );
}

/// `broadcast_matmul` against candle's, elementwise within the bound (|a|·|b| with both sides
/// broadcast to the common batch).
fn check_broadcast(x: &Tensor, y: &Tensor) {
    let ours = broadcast_matmul(x, y).unwrap();
    let reference = x.broadcast_matmul(y).unwrap();
    assert_eq!(ours.dims(), reference.dims());
    let batch = &reference.dims()[..reference.rank() - 2];
    let full = |t: &Tensor| {
        let mut dims = batch.to_vec();
        dims.extend_from_slice(&t.dims()[t.rank() - 2..]);
        t.broadcast_as(dims).unwrap()
    };
    let k = x.dim(D::Minus1).unwrap() as f64;
    let (bad, max, rel_rms) = compare(
        &ours,
        &reference,
        &magnitude(&full(x), &full(y)),
        2.0 * unit_roundoff(x.dtype()),
        2.0 * k * 2f64.powi(-24),
    );
    println!(
        "{:?} broadcast_matmul {:?} x {:?}: max |diff| {max:.3e}, rms {rel_rms:.2e}, {bad} outside the bound",
        x.dtype(),
        x.dims(),
        y.dims()
    );
    assert_eq!(bad, 0.0);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn unservable_operands_get_clear_errors() {
    let dev = gpu();
    let a = rand(&dev, &[32, 100], DType::BF16);
    let b = rand(&dev, &[100, 64], DType::BF16);
    // Mixed types and CPU tensors are refused before any launch.
    let e = matmul(&a, &b.to_dtype(DType::F16).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("bf16 x bf16"), "{e}");
    let cpu = Tensor::zeros((4, 8), DType::BF16, &Device::Cpu).unwrap();
    let e = matmul(&cpu, &cpu).unwrap_err().to_string();
    assert!(e.contains("CUDA"), "{e}");
    // The custom op does not copy: a layout it cannot read is an error naming the reason.
    let big = rand(&dev, &[4, 3, 16, 64], DType::BF16);
    let strided = big.narrow(1, 0, 2).unwrap();
    let e = strided
        .apply_op2_no_bwd(&rand(&dev, &[4, 2, 64, 16], DType::BF16), &Matmul)
        .unwrap_err()
        .to_string();
    println!("custom op on a strided batch: {e}");
    assert!(e.contains("not one strided batch"), "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn custom_op_composes_with_candle_ops() {
    let dev = gpu();
    let x = rand(&dev, &[2, 64, 256], DType::BF16);
    let w1 = rand(&dev, &[512, 256], DType::BF16);
    let w2 = rand(&dev, &[256, 512], DType::BF16);
    // y = relu(x · W1ᵀ) · W2ᵀ, through the op and through candle.
    let step =
        |what: &str, r: candle_core::Result<Tensor>| r.unwrap_or_else(|e| panic!("{what}: {e}"));
    let w1b = step(
        "broadcast W1",
        w1.t().and_then(|t| t.broadcast_as((2, 256, 512))),
    );
    let h_ours = step("x · W1ᵀ (op)", x.apply_op2_no_bwd(&w1b, &Matmul));
    let h_ours = step("relu (ours)", h_ours.relu());
    let ours = step(
        "h · W2ᵀ (broadcast_matmul)",
        w2.t().and_then(|t| broadcast_matmul(&h_ours, &t)),
    );
    let h = step(
        "x · W1ᵀ (candle)",
        w1.t().and_then(|t| x.broadcast_matmul(&t)),
    );
    let h = step("relu (candle)", h.relu());
    let reference = step(
        "h · W2ᵀ (candle)",
        w2.t().and_then(|t| h.broadcast_matmul(&t)),
    );
    // Two roundings to bf16 (the hidden layer and the output), each amplified at most by the
    // second GEMM's |W2|: compare in RMS.
    let (_, max, rel_rms) = compare(
        &ours,
        &reference,
        &reference.zeros_like().unwrap(),
        0.0,
        0.0,
    );
    println!("relu MLP through the op: max |diff| {max:.3e}, rms diff / rms {rel_rms:.2e}");
    assert!(rel_rms < 4.0 * 2f32.powi(-8), "{rel_rms}");
}

/// An F8E4M3 tensor of integers in [-8, 8], converted on the host (candle 0.11.1 lacks some of its
/// CUDA F8 kernels), and the same values as f32 on the GPU. Integers, because Hopper's FP8 MMA
/// keeps fewer bits than f32 while it accumulates (about 14: the kernels promote to f32 every 128
/// elements of k): with products of at most 64, each 128-long partial sum stays below 2^13 and is
/// exact, so the crate's f32-accumulation bound holds. Random real values broke it now and then
/// (one element of 27200 at 200 x 136 x 256, 2026-11-26).
fn fp8_pair(dev: &Device, shape: &[usize]) -> (Tensor, Tensor) {
    let host = Tensor::rand(-8f32, 8f32, shape, &Device::Cpu)
        .unwrap()
        .round()
        .unwrap()
        .to_dtype(DType::F8E4M3)
        .unwrap();
    let values = host.to_dtype(DType::F32).unwrap().to_device(dev).unwrap();
    (host.to_device(dev).unwrap(), values)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_matmul_matches_f32_product_of_the_same_values() {
    let dev = gpu();
    for (m, n, k) in [
        (128, 256, 512),
        (1, 512, 1024),
        (200, 136, 256),
        (64, 4096, 4096),
    ] {
        let (a, af) = fp8_pair(&dev, &[m, k]);
        let (w, wf) = fp8_pair(&dev, &[n, k]);
        let (sa, sb) = (0.125f32, 0.25f32);
        let ours = matmul_fp8(&a, &w.t().unwrap(), sa, sb).unwrap();
        assert_eq!(ours.dtype(), DType::BF16);
        let reference = (af.matmul(&wf.t().unwrap()).unwrap() * (sa * sb) as f64).unwrap();
        let mag = (magnitude(&af, &wf.t().unwrap()) * (sa * sb) as f64).unwrap();
        // The crate's bound (cutlass_gemm::reference::tolerance): 2 u_out |ref| + 2 k u_f32 |a|·|b|.
        let (bad, max, rel_rms) = compare(
            &ours,
            &reference,
            &mag,
            2f64.powi(-7),
            2.0 * k as f64 * 2f64.powi(-24),
        );
        println!("fp8 {m}x{n}x{k}: max |diff| {max:.3e}, rms diff / rms {rel_rms:.2e}, {bad} outside the bound");
        assert_eq!(bad, 0.0);
    }
    // A row-major b is refused with the rule (the kernels read K-contiguous operands).
    let (a, _) = fp8_pair(&dev, &[64, 256]);
    let (b, _) = fp8_pair(&dev, &[256, 128]);
    let e = matmul_fp8(&a, &b, 1.0, 1.0).unwrap_err().to_string();
    println!("row-major b: {e}");
    assert!(e.contains("column-major"), "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_linear_is_within_its_documented_error() {
    let dev = gpu();
    for (shape, n, k, with_bias) in [
        (vec![256, 1024], 512, 1024, false),
        (vec![2, 16, 4096], 1024, 4096, true),
        (vec![1, 4096], 14336, 4096, false),
    ] {
        let x = rand(&dev, &shape, DType::BF16);
        let w = (rand(&dev, &[n, k], DType::F32) * 0.05)
            .unwrap()
            .to_dtype(DType::BF16)
            .unwrap();
        let bias = with_bias.then(|| rand(&dev, &[n], DType::BF16));
        let layer = Fp8Linear::new(&w, bias.clone()).unwrap();
        let ours = layer.forward(&x).unwrap();
        let mut out_shape = shape.clone();
        *out_shape.last_mut().unwrap() = n;
        assert_eq!(ours.dims(), &out_shape[..]);
        // The bf16 layer, in f32.
        let xf = x.to_dtype(DType::F32).unwrap();
        let wf = w.to_dtype(DType::F32).unwrap();
        let mut reference = xf.broadcast_matmul(&wf.t().unwrap()).unwrap();
        if let Some(b) = &bias {
            reference = reference
                .broadcast_add(&b.to_dtype(DType::F32).unwrap())
                .unwrap();
        }
        let mag = xf
            .abs()
            .unwrap()
            .broadcast_matmul(&wf.abs().unwrap().t().unwrap())
            .unwrap();
        let (bad, max, rel_rms) = compare(&ours, &reference, &mag, 2f64.powi(-7), 0.13);
        println!(
            "Fp8Linear x {shape:?} · W ({n}, {k}){}: max |diff| {max:.3e}, rms diff / rms {rel_rms:.2e}, {bad} outside the bound",
            if with_bias { " + bias" } else { "" }
        );
        assert_eq!(bad, 0.0);
        assert!(rel_rms < 0.06, "{rel_rms}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn nvfp4_linear_needs_blackwell() {
    let dev = gpu();
    let (ctx, _) = common::gemm_device();
    let cc = cutlass_gemm::DeviceInfo::query(&ctx)
        .unwrap()
        .compute_capability;
    let w = rand(&dev, &[256, 512], DType::BF16);
    match Nvfp4Linear::new(&w, None) {
        Ok(layer) => {
            assert!(
                cc.0 >= 10,
                "an NVFP4 layer was planned on sm_{}{}",
                cc.0,
                cc.1
            );
            let x = rand(&dev, &[64, 512], DType::BF16);
            let y = layer.forward(&x).unwrap();
            assert_eq!(y.dims(), &[64, 256]);
        }
        Err(e) => {
            println!("sm_{}{}: Nvfp4Linear::new refused: {e}", cc.0, cc.1);
            assert!(cc.0 < 10, "refused on a Blackwell GPU: {e}");
        }
    }
}

/// `Linear` with each activation, with and without a bias, against candle's own layer and
/// activation in f32 (see the bound in the module docs); n = 1001 stages the bias too.
#[test]
#[ignore = "needs a CUDA GPU"]
fn linear_with_fused_bias_and_activation_matches_candle() {
    let dev = gpu();
    for dtype in [DType::BF16, DType::F16] {
        for (shape, n, k) in [(vec![2, 37, 512], 1024, 512), (vec![5, 96], 1001, 96)] {
            let x = rand(&dev, &shape, dtype);
            let w = rand(&dev, &[n, k], dtype);
            let b = rand(&dev, &[n], dtype);
            // An f32 bias too, read as f32 (one read as the layer's type would be far outside
            // the bound; that it is not rounded first is f32_bias_is_added_before_rounding's).
            let b32 = rand(&dev, &[n], DType::F32);
            for act in Activation::ALL {
                for bias in [None, Some(b.clone()), Some(b32.clone())] {
                    let layer = Linear::new(w.clone(), bias.clone())
                        .unwrap()
                        .with_activation(act);
                    let ours = layer.forward(&x).unwrap();
                    let xf = x.to_dtype(DType::F32).unwrap();
                    let wf = w.to_dtype(DType::F32).unwrap();
                    let mut pre = xf.broadcast_matmul(&wf.t().unwrap()).unwrap();
                    let mut mag = magnitude(&x.flatten_to(D::Minus2).unwrap(), &w.t().unwrap())
                        .reshape(pre.dims())
                        .unwrap();
                    if let Some(b) = &bias {
                        let bf = b.to_dtype(DType::F32).unwrap();
                        pre = pre.broadcast_add(&bf).unwrap();
                        mag = mag.broadcast_add(&bf.abs().unwrap()).unwrap();
                    }
                    let reference = match act {
                        Activation::Identity => pre.clone(),
                        Activation::Relu => pre.relu().unwrap(),
                        Activation::GeluTanh => pre.gelu().unwrap(),
                        Activation::GeluErf => pre.gelu_erf().unwrap(),
                        Activation::Silu => pre.silu().unwrap(),
                        _ => unreachable!(),
                    };
                    assert_eq!(ours.dtype(), dtype);
                    let u = unit_roundoff(dtype);
                    let abs = 1.13 * ((4 * k + 12) as f64 * 2f64.powi(-24) + 2f64.powi(-11));
                    let (bad, max, rel_rms) = compare(&ours, &reference, &mag, 2.0 * u, abs);
                    println!(
                        "{dtype:?} Linear {shape:?} x ({n}, {k}) {act}{}: max |diff| {max:.3e}, rms diff / rms {rel_rms:.2e}, {bad} outside the bound",
                        match &bias {
                            Some(b) => format!(" + {:?} bias", b.dtype()),
                            None => String::new(),
                        }
                    );
                    assert_eq!(bad, 0.0);
                }
            }
        }
    }
    // The layer refuses what it cannot serve, with a message.
    let w = rand(&dev, &[64, 32], DType::F32);
    assert!(Linear::new(w, None).is_err());
    let w = rand(&dev, &[64, 32], DType::BF16);
    assert!(Linear::new(w.clone(), Some(rand(&dev, &[64], DType::F16))).is_err());
    assert!(Linear::new(w, Some(rand(&dev, &[63], DType::F32))).is_err());
}

/// `GatedLinear` (gate and up projections with SwiGLU / GeGLU in one GEMM) against candle's two
/// f32 matmuls, activation and product. The bound carries each projection's accumulation error
/// (as `Linear`'s test) through the product: `L·e_g·(|u| + e_u) + (|act(g)| + L·e_g)·e_u`, plus
/// the output's rounding.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gated_linear_matches_candle() {
    let dev = gpu();
    for dtype in [DType::BF16, DType::F16] {
        for (shape, n, k) in [(vec![2, 37, 512], 1024, 512), (vec![5, 96], 136, 96)] {
            let x = rand(&dev, &shape, dtype);
            let (wg, wu) = (rand(&dev, &[n, k], dtype), rand(&dev, &[n, k], dtype));
            let (bg, bu) = (rand(&dev, &[n], dtype), rand(&dev, &[n], dtype));
            for act in [Activation::Silu, Activation::GeluTanh, Activation::Relu] {
                for biases in [None, Some((&bg, &bu))] {
                    let layer = GatedLinear::new(&wg, &wu, biases, act).unwrap();
                    let ours = layer.forward(&x).unwrap();
                    assert_eq!(ours.dims()[..shape.len() - 1], shape[..shape.len() - 1]);
                    assert_eq!(ours.dims()[shape.len() - 1], n);
                    let xf = x.to_dtype(DType::F32).unwrap();
                    let x2 = x.flatten_to(D::Minus2).unwrap();
                    let project = |w: &Tensor, b: &Tensor| {
                        let wf = w.to_dtype(DType::F32).unwrap();
                        let mut pre = xf.broadcast_matmul(&wf.t().unwrap()).unwrap();
                        let mut mag = magnitude(&x2, &w.t().unwrap()).reshape(pre.dims()).unwrap();
                        if biases.is_some() {
                            let bf = b.to_dtype(DType::F32).unwrap();
                            pre = pre.broadcast_add(&bf).unwrap();
                            mag = mag.broadcast_add(&bf.abs().unwrap()).unwrap();
                        }
                        (pre, mag)
                    };
                    let ((g, mag_g), (u, mag_u)) = (project(&wg, &bg), project(&wu, &bu));
                    let act_g = match act {
                        Activation::Relu => g.relu().unwrap(),
                        Activation::GeluTanh => g.gelu().unwrap(),
                        _ => g.silu().unwrap(),
                    };
                    let reference = (&act_g * &u).unwrap();
                    let e = (4 * k + 12) as f64 * 2f64.powi(-24) + 2f64.powi(-11);
                    let (eg, eu) = ((mag_g * e).unwrap(), (mag_u * e).unwrap());
                    let lip = 1.13;
                    let bound = (((&eg * lip).unwrap() * (u.abs().unwrap() + &eu).unwrap())
                        .unwrap()
                        + ((act_g.abs().unwrap() + (&eg * lip).unwrap()).unwrap() * &eu).unwrap()
                        + (reference.abs().unwrap() * (2.0 * unit_roundoff(dtype))).unwrap())
                    .unwrap();
                    let diff = (ours.to_dtype(DType::F32).unwrap() - &reference)
                        .unwrap()
                        .abs()
                        .unwrap();
                    let bad = diff
                        .gt(&bound)
                        .unwrap()
                        .to_dtype(DType::F32)
                        .unwrap()
                        .sum_all()
                        .unwrap()
                        .to_scalar::<f32>()
                        .unwrap();
                    println!(
                        "{dtype:?} GatedLinear {shape:?} x 2 x ({n}, {k}) {act}{}: {bad} outside the bound",
                        if biases.is_some() { " + biases" } else { "" }
                    );
                    assert_eq!(bad, 0.0);
                }
            }
        }
    }
    // What it cannot serve, refused with a message: outputs not in blocks of 8, mismatched weights.
    let (a, b) = (
        rand(&dev, &[12, 32], DType::BF16),
        rand(&dev, &[12, 32], DType::BF16),
    );
    assert!(GatedLinear::new(&a, &b, None, Activation::Silu).is_err());
    let c = rand(&dev, &[16, 32], DType::BF16);
    assert!(GatedLinear::new(&c, &a, None, Activation::Silu).is_err());
}

/// A GPTQ and an AWQ checkpoint of one layer, made here, written to safetensors and loaded back
/// as those tools write them (I32 qweight and qzeros, F16 scales): `WeightOnlyLinear` matches
/// candle's matmul on the dequantized weight (computed on the host as the kernels dequantize) within
/// a 16-bit GEMM's bound, for bf16 and f16 activations, with a bias; and a layer quantized here
/// from a bf16 weight stays within half a quantization step per weight of candle's product.
#[test]
#[ignore = "needs a CUDA GPU"]
fn weight_only_linear_loads_gptq_and_awq_safetensors() {
    use rand::Rng;
    let dev = gpu();
    let mut rng = common::rng();
    let (n, k, g) = (256usize, 512usize, 128usize);
    let groups = k / g;
    let q: Vec<u8> = (0..n * k).map(|_| rng.random_range(0..16)).collect(); // q[j * k + i]
    let zp: Vec<u8> = (0..groups * n).map(|_| rng.random_range(1..16)).collect();
    let scales: Vec<half::f16> = (0..groups * n)
        .map(|_| half::f16::from_f64(f64::from(rng.random_range(1..=24)) / 256.0))
        .collect();
    // GPTQ: qweight (k / 8, n), qzeros (groups, n / 8) holding zp - 1.
    let mut gq = vec![0u32; k / 8 * n];
    for i in 0..k {
        for j in 0..n {
            gq[(i / 8) * n + j] |= u32::from(q[j * k + i]) << (4 * (i % 8));
        }
    }
    let mut gz = vec![0u32; groups * n / 8];
    for gi in 0..groups {
        for j in 0..n {
            gz[gi * (n / 8) + j / 8] |= u32::from(zp[gi * n + j] - 1) << (4 * (j % 8));
        }
    }
    // AWQ: qweight (k, n / 8) and qzeros in the order 0 2 4 6 1 3 5 7.
    const ORDER: [usize; 8] = [0, 2, 4, 6, 1, 3, 5, 7];
    let mut aq = vec![0u32; k * n / 8];
    for i in 0..k {
        for w in 0..n / 8 {
            for (p, &o) in ORDER.iter().enumerate() {
                aq[i * (n / 8) + w] |= u32::from(q[(w * 8 + o) * k + i]) << (4 * p);
            }
        }
    }
    let mut az = vec![0u32; groups * n / 8];
    for gi in 0..groups {
        for w in 0..n / 8 {
            for (p, &o) in ORDER.iter().enumerate() {
                az[gi * (n / 8) + w] |= u32::from(zp[gi * n + w * 8 + o]) << (4 * p);
            }
        }
    }
    let i32s = |v: &[u32], shape: (usize, usize)| {
        Tensor::from_vec(
            v.iter().map(|&x| x as i32).collect::<Vec<i32>>(),
            shape,
            &Device::Cpu,
        )
        .unwrap()
    };
    let mut tensors = std::collections::HashMap::new();
    tensors.insert("gptq.qweight".to_string(), i32s(&gq, (k / 8, n)));
    tensors.insert("gptq.qzeros".to_string(), i32s(&gz, (groups, n / 8)));
    tensors.insert("awq.qweight".to_string(), i32s(&aq, (k, n / 8)));
    tensors.insert("awq.qzeros".to_string(), i32s(&az, (groups, n / 8)));
    let sc = Tensor::from_vec(scales.clone(), (groups, n), &Device::Cpu).unwrap();
    tensors.insert("gptq.scales".to_string(), sc.clone());
    tensors.insert("awq.scales".to_string(), sc);
    let g_idx: Vec<i32> = (0..k).map(|i| (i / g) as i32).collect();
    tensors.insert(
        "gptq.g_idx".to_string(),
        Tensor::from_vec(g_idx, k, &Device::Cpu).unwrap(),
    );
    let path = std::env::temp_dir().join(format!(
        "cutlass-gemm-wo-{}.safetensors",
        std::process::id()
    ));
    candle_core::safetensors::save(&tensors, &path).unwrap();
    let loaded = candle_core::safetensors::load(&path, &dev).unwrap();
    std::fs::remove_file(&path).ok();
    for dtype in [DType::BF16, DType::F16] {
        // The weight as the kernels dequantize it: round(q · s + z), z = round(-s · zp), in the
        // activations' type (the scales converted to it first).
        let u = unit_roundoff(dtype);
        let round = |v: f64| match dtype {
            DType::BF16 => half::bf16::from_f64(v).to_f64(),
            _ => half::f16::from_f64(v).to_f64(),
        };
        let mut w = vec![0f32; n * k];
        for j in 0..n {
            for i in 0..k {
                let e = (i / g) * n + j;
                let s = round(scales[e].to_f64());
                let z = round(-s * f64::from(zp[e]));
                w[j * k + i] = round(f64::from(q[j * k + i]) * s + z) as f32;
            }
        }
        let w = Tensor::from_vec(w, (n, k), &dev).unwrap();
        let bias = rand(&dev, &[n], dtype);
        let x = rand(&dev, &[2, 3, k], dtype);
        let reference = x
            .to_dtype(DType::F32)
            .unwrap()
            .broadcast_matmul(&w.t().unwrap())
            .unwrap()
            .broadcast_add(&bias.to_dtype(DType::F32).unwrap())
            .unwrap();
        let mag = magnitude(&x.flatten_to(D::Minus2).unwrap(), &w.t().unwrap())
            .reshape(reference.dims())
            .unwrap()
            .broadcast_add(&bias.to_dtype(DType::F32).unwrap().abs().unwrap())
            .unwrap();
        let t = |name: &str| loaded.get(name).unwrap();
        let gptq = WeightOnlyLinear::from_gptq(
            t("gptq.qweight"),
            t("gptq.qzeros"),
            t("gptq.scales"),
            Some(t("gptq.g_idx")),
            Some(bias.clone()),
            dtype,
            1,
        )
        .unwrap();
        let awq = WeightOnlyLinear::from_awq(
            t("awq.qweight"),
            t("awq.qzeros"),
            t("awq.scales"),
            Some(bias.clone()),
            dtype,
        )
        .unwrap();
        // Six tokens run the decode GEMV, which computes with the exact q · s + z (at most u |w|
        // from the rounded weight) and sums each 64 columns in f32 over M + u before scaling
        // (cutlass_gemm::reference::weight_only_gemv_error): 2 · 64 · u_f32 · ((M + 16) s + |z|)
        // per |x|, s at most 24 / 256 and |z| at most 15 s here.
        let big_m = if dtype == DType::BF16 { 128.0 } else { 1024.0 };
        let s_max = round(24.0 / 256.0);
        let sums = 2.0 * 64.0 * 2f64.powi(-24) * ((big_m + 16.0) * s_max + 15.0 * s_max);
        let gemv = (x
            .abs()
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap()
            .sum_keepdim(D::Minus1)
            .unwrap()
            * sums)
            .unwrap()
            .broadcast_add(&(&mag * u).unwrap())
            .unwrap();
        for (name, layer) in [("gptq", &gptq), ("awq", &awq)] {
            assert_eq!(layer.dims(), (n, k));
            let ours = layer.forward(&x).unwrap();
            assert_eq!(ours.dtype(), dtype);
            let abs = 1.13 * ((4 * k + 12) as f64 * 2f64.powi(-24) + 2f64.powi(-11));
            let (bad, max, rel_rms) =
                compare_beyond(&ours, &reference, &mag, 2.0 * u, abs, Some(&gemv));
            println!(
                "{dtype:?} {name} WeightOnlyLinear (2, 3, {k}) x ({n}, {k}): max |diff| {max:.3e}, rms diff / rms {rel_rms:.2e}, {bad} outside the bound"
            );
            assert_eq!(bad, 0.0, "{name} {dtype:?}");
        }
        // Quantized here from a 16-bit weight: each weight within half a step (plus rounding) of
        // the original, so the product within that error times |x|.
        let wf = rand(&dev, &[n, k], dtype);
        let layer = WeightOnlyLinear::quantize(&wf, None, g, cutlass_gemm::WeightFormat::ZeroPoint)
            .unwrap();
        let ours = layer.forward(&x).unwrap().to_dtype(DType::F32).unwrap();
        let exact = x
            .to_dtype(DType::F32)
            .unwrap()
            .broadcast_matmul(&wf.to_dtype(DType::F32).unwrap().t().unwrap())
            .unwrap();
        // Weights in [-1, 1): step at most 2 / 15, error at most a step / 2 (+ rounding).
        let per_weight = 1.0 / 15.0 + 2.0 * u;
        let xabs = x
            .abs()
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap()
            .sum_keepdim(D::Minus1)
            .unwrap();
        let bound = (xabs * per_weight)
            .unwrap()
            .broadcast_add(&Tensor::new(&[1e-2f32], &dev).unwrap())
            .unwrap();
        let over = (ours - &exact)
            .unwrap()
            .abs()
            .unwrap()
            .broadcast_gt(&bound)
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap()
            .sum_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert_eq!(over, 0.0, "{dtype:?} quantized layer");
    }
    // Typed refusals: act-order g_idx, wrong dtypes.
    let mut act: Vec<i32> = (0..k).map(|i| (i / g) as i32).collect();
    act.swap(3, k - 3);
    let act = Tensor::from_vec(act, k, &dev).unwrap();
    let t = |name: &str| loaded.get(name).unwrap();
    let err = WeightOnlyLinear::from_gptq(
        t("gptq.qweight"),
        t("gptq.qzeros"),
        t("gptq.scales"),
        Some(&act),
        None,
        DType::BF16,
        1,
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("act-order"), "{err}");
    assert!(WeightOnlyLinear::from_awq(
        t("awq.scales"),
        t("awq.qzeros"),
        t("awq.scales"),
        None,
        DType::BF16
    )
    .is_err());
}

/// candle's plan cache is keyed by device: the same shape and types on devices 0 and 1, called in
/// turn, each get a plan of their own device (a plan cached for one device and handed to the other
/// would be refused with `DeviceMismatch`), and each result matches candle's matmul on its device.
/// Needs two GPUs (`--skip devices` skips it on a one-GPU machine, with the `devices::` tests).
#[test]
#[ignore = "needs two CUDA GPUs"]
fn matmul_plans_on_two_devices() {
    let two = crate::devices::two_devices();
    drop(two);
    let devs = [0, 1].map(|i| Device::new_cuda(i).expect("candle CUDA device"));
    let u = unit_roundoff(DType::BF16);
    for round in 0..3 {
        for (i, dev) in devs.iter().enumerate() {
            let a = rand(dev, &[96, 512], DType::BF16);
            let b = rand(dev, &[512, 384], DType::BF16);
            let ours = matmul(&a, &b).unwrap_or_else(|e| panic!("device {i}, round {round}: {e}"));
            assert!(
                ours.device().same_device(dev),
                "device {i}: result on another device"
            );
            let theirs = a.matmul(&b).unwrap();
            let (violations, max, rel) = compare(
                &ours,
                &theirs,
                &magnitude(&a, &b),
                2.0 * u,
                2.0 * 512.0 * 2f64.powi(-24),
            );
            assert_eq!(
                violations, 0.0,
                "device {i}, round {round}: max diff {max}, rms rel {rel}"
            );
        }
    }
}

/// `grouped_matmul` (one grouped launch) against the loop of candle's matmuls per expert, bf16 and
/// f16, offsets as I32 and as U32: empty experts, a one-row expert, uneven ones, and rows after
/// the last offset, which stay 0.
#[test]
#[ignore = "needs a CUDA GPU"]
fn grouped_matmul_matches_the_loop_of_candle_matmuls_per_expert() {
    let dev = gpu();
    let (k, n) = (256, 384);
    let per_expert = [5usize, 0, 1, 40, 0, 130];
    let used: usize = per_expert.iter().sum();
    let rows = used + 3;
    let mut offsets = vec![0u32];
    for r in per_expert {
        offsets.push(offsets.last().unwrap() + r as u32);
    }
    for dtype in [DType::BF16, DType::F16] {
        let x = rand(&dev, &[rows, k], dtype);
        let w = rand(&dev, &[per_expert.len(), n, k], dtype);
        let as_u32 = Tensor::new(offsets.as_slice(), &dev).unwrap();
        // (candle 0.11 has no CUDA kernel to cast U32 to I32: made on the host.)
        let signed: Vec<i32> = offsets.iter().map(|&o| o as i32).collect();
        let as_i32 = Tensor::new(signed.as_slice(), &dev).unwrap();
        for o in [&as_u32, &as_i32] {
            let ours = grouped_matmul(&x, &w, o).unwrap();
            assert_eq!(ours.dims(), [rows, n]);
            let mut parts = Vec::new();
            let mut mags = Vec::new();
            for (g, &m) in per_expert.iter().enumerate() {
                if m == 0 {
                    continue;
                }
                let xs = x.narrow(0, offsets[g] as usize, m).unwrap();
                let wt = w.get(g).unwrap().t().unwrap();
                parts.push(xs.matmul(&wt).unwrap());
                mags.push(magnitude(&xs, &wt));
            }
            let reference = Tensor::cat(&parts, 0).unwrap();
            let mag = Tensor::cat(&mags, 0).unwrap();
            let grouped = ours.narrow(0, 0, used).unwrap();
            let (bad, max, rel_rms) = compare(
                &grouped,
                &reference,
                &mag,
                2.0 * unit_roundoff(dtype),
                2.0 * k as f64 * 2f64.powi(-24),
            );
            println!(
                "grouped_matmul {dtype:?} {:?}: max |diff| {max}, rms {rel_rms:.2e}",
                o.dtype()
            );
            assert_eq!(bad, 0.0, "{dtype:?}");
            let tail = ours
                .narrow(0, used, 3)
                .unwrap()
                .abs()
                .unwrap()
                .to_dtype(DType::F32)
                .unwrap()
                .sum_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            assert_eq!(tail, 0.0, "rows after the last offset are 0");
        }
    }
    // Shapes that do not agree are refused with the rule.
    let x = rand(&dev, &[8, 64], DType::BF16);
    let w = rand(&dev, &[2, 32, 64], DType::BF16);
    let bad = Tensor::new(&[0u32, 8], &dev).unwrap();
    let err = grouped_matmul(&x, &w, &bad).unwrap_err().to_string();
    assert!(err.contains("offsets (e + 1)"), "{err}");
}

/// `grouped_matmul_fp8_blockwise` on F8E4M3 tokens and experts (integers, exact in the FP8
/// accumulation) with power-of-two scales, against the crate's f64 grouped blockwise reference
/// on the same values; rows after the last offset stay 0; shapes that do not agree are refused.
#[test]
#[ignore = "needs a CUDA GPU"]
fn grouped_matmul_fp8_blockwise_matches_the_reference() {
    use cutlass_gemm::numeric::E4M3;
    use cutlass_gemm::reference;
    let dev = gpu();
    let (k, n) = (272usize, 256usize);
    let (kb, nb) = (k.div_ceil(128), n.div_ceil(128));
    let per_expert = [5usize, 0, 1, 40, 130];
    let used: usize = per_expert.iter().sum();
    let rows = used + 3;
    let groups = per_expert.len();
    let mut offsets = vec![0i32];
    for r in per_expert {
        offsets.push(offsets.last().unwrap() + r as i32);
    }
    let (x, xf) = fp8_pair(&dev, &[rows, k]);
    let (w, wf) = fp8_pair(&dev, &[groups, n, k]);
    let pow2 = |len: usize, seed: usize| -> Vec<f32> {
        (0..len)
            .map(|i| 2f32.powi(((i * 7 + seed) % 5) as i32 - 2))
            .collect()
    };
    let (sa, sb) = (pow2(rows * kb, 1), pow2(groups * nb * kb, 3));
    let x_scales = Tensor::from_vec(sa.clone(), (rows, kb), &dev).unwrap();
    let w_scales = Tensor::from_vec(sb.clone(), (groups, nb, kb), &dev).unwrap();
    let o = Tensor::new(offsets.as_slice(), &dev).unwrap();
    let ours = grouped_matmul_fp8_blockwise(&x, &x_scales, &w, &w_scales, &o).unwrap();
    assert_eq!((ours.dims(), ours.dtype()), (&[rows, n][..], DType::BF16));
    let host = |t: &Tensor| -> Vec<E4M3> {
        t.flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()
            .into_iter()
            .map(E4M3::from_f32)
            .collect()
    };
    let p = cutlass_gemm::GroupedProblem::contiguous(groups, rows, n, k);
    let refs = reference::grouped_blockwise(
        &p,
        &host(&xf),
        &sa,
        &host(&wf),
        &sb,
        &offsets,
        None,
        None::<&[f32]>,
    )
    .unwrap();
    let d: Vec<half::bf16> = ours.flatten_all().unwrap().to_vec1().unwrap();
    let cmp = reference::compare_grouped(&d, &refs);
    println!("grouped_matmul_fp8_blockwise: {cmp:?}");
    assert!(cmp.passed() && cmp.checked == used * n, "{cmp:?}");
    assert!(
        d[used * n..].iter().all(|v| v.to_f32() == 0.0),
        "rows after the last offset are 0"
    );
    // Scales of the wrong shape, and a strided x, are refused with the rule.
    let err = grouped_matmul_fp8_blockwise(&x, &w_scales, &w, &w_scales, &o).unwrap_err();
    assert!(err.to_string().contains("do not agree"), "{err}");
    let err = grouped_matmul_fp8_blockwise(&x, &x_scales, &w, &x_scales, &o).unwrap_err();
    assert!(err.to_string().contains("do not agree"), "{err}");
    let strided = xf.t().unwrap();
    let err = grouped_matmul_fp8_blockwise(&strided, &x_scales, &w, &w_scales, &o).unwrap_err();
    assert!(err.to_string().contains("F8E4M3"), "{err}");
}

/// A safetensors file written by hand (an 8-byte little-endian header length, the JSON header,
/// the data), so that it can hold an I8 tensor, which candle cannot write: (name, dtype, shape,
/// bytes) each.
fn safetensors_file(tensors: &[(&str, &str, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let mut header = Vec::new();
    let mut data = Vec::new();
    for (name, dtype, shape, bytes) in tensors {
        let shape: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        header.push(format!(
            "\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
            shape.join(","),
            data.len(),
            data.len() + bytes.len()
        ));
        data.extend_from_slice(bytes);
    }
    let mut header = format!("{{{}}}", header.join(",")).into_bytes();
    while header.len() % 8 != 0 {
        header.push(b' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header);
    out.extend(data);
    out
}

/// FP8 and int8 checkpoints of one layer in safetensors as quantization tools write them (an
/// F8_E4M3 weight with F32 scales per output channel `(n, 1)` or one for the tensor `()`; an I8
/// weight with per-channel F32 scales, read through its bytes as U8): `WeightOnlyLinear` gives
/// the f64 reference over the weight as the kernels dequantize it (`round(q · s)`, the scales
/// rounded to the activations' type first), for bf16 and f16 activations, at 1 token (the decode
/// GEMV, within its bound beyond the reference's) and 40 (a CUTLASS kernel); malformed scales and
/// weights are refused.
#[test]
#[ignore = "needs a CUDA GPU"]
fn weight_only_linear_loads_fp8_and_int8_safetensors() {
    use rand::Rng;
    let dev = gpu();
    let mut rng = common::rng();
    let (n, k) = (256usize, 512usize);
    let fp8: Vec<u8> = (0..n * k)
        .map(|_| {
            let b: u8 = rng.random();
            if b & 0x7F == 0x7F {
                b - 1
            } else {
                b
            }
        })
        .collect();
    let int8: Vec<u8> = (0..n * k).map(|_| rng.random::<u8>()).collect();
    let scales: Vec<f32> = (0..n)
        .map(|_| rng.random_range(1.0f32..2.0) / 512.0)
        .collect();
    let f32_bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let file = safetensors_file(&[
        ("fp8.weight", "F8_E4M3", vec![n, k], fp8.clone()),
        ("fp8.weight_scale", "F32", vec![n, 1], f32_bytes(&scales)),
        ("fp8t.weight_scale", "F32", vec![], f32_bytes(&[0.0123])),
        ("int8.weight", "I8", vec![n, k], int8.clone()),
        ("int8.weight_scale", "F32", vec![n, 1], f32_bytes(&scales)),
    ]);
    let st = candle_core::safetensors::SliceSafetensors::new(&file).unwrap();
    let load = |name: &str| st.load(name, &dev).unwrap();
    let fp8_weight = load("fp8.weight");
    assert_eq!(fp8_weight.dtype(), DType::F8E4M3);
    let view = st.get("int8.weight").unwrap();
    assert_eq!(format!("{:?}", view.dtype()), "I8");
    let int8_weight = Tensor::from_raw_buffer(view.data(), DType::U8, view.shape(), &dev).unwrap();
    for dtype in [DType::BF16, DType::F16] {
        let layers = [
            (
                "fp8 per channel",
                WeightOnlyLinear::from_fp8(&fp8_weight, &load("fp8.weight_scale"), None, dtype),
                cutlass_gemm::WeightFormat::Fp8,
                scales.clone(),
            ),
            (
                "fp8 per tensor",
                WeightOnlyLinear::from_fp8(&fp8_weight, &load("fp8t.weight_scale"), None, dtype),
                cutlass_gemm::WeightFormat::Fp8,
                vec![0.0123; n],
            ),
            (
                "int8 per channel",
                WeightOnlyLinear::from_int8(&int8_weight, &load("int8.weight_scale"), None, dtype),
                cutlass_gemm::WeightFormat::Int8,
                scales.clone(),
            ),
        ];
        for (name, layer, format, scales) in layers {
            let layer = layer.unwrap();
            assert_eq!(layer.dims(), (n, k));
            let bytes = if format == cutlass_gemm::WeightFormat::Fp8 {
                &fp8
            } else {
                &int8
            };
            match dtype {
                DType::BF16 => per_channel_layer_matches::<half::bf16>(
                    &dev, dtype, name, &layer, format, bytes, &scales,
                ),
                _ => per_channel_layer_matches::<half::f16>(
                    &dev, dtype, name, &layer, format, bytes, &scales,
                ),
            }
        }
    }
    // Refused: scales of another shape or type, a weight of another type.
    let scale = load("fp8.weight_scale");
    let wide = scale.broadcast_as((n, 2)).unwrap();
    assert!(WeightOnlyLinear::from_fp8(&fp8_weight, &wide, None, DType::BF16).is_err());
    let short = scale.narrow(0, 0, n - 1).unwrap();
    assert!(WeightOnlyLinear::from_fp8(&fp8_weight, &short, None, DType::BF16).is_err());
    let ints = Tensor::zeros(n, DType::U32, &dev).unwrap();
    assert!(WeightOnlyLinear::from_fp8(&fp8_weight, &ints, None, DType::BF16).is_err());
    assert!(WeightOnlyLinear::from_int8(&fp8_weight, &scale, None, DType::BF16).is_err());
    let bf = rand(&dev, &[n, k], DType::BF16);
    assert!(WeightOnlyLinear::from_fp8(&bf, &scale, None, DType::BF16).is_err());
    assert!(WeightOnlyLinear::from_fp8(&fp8_weight, &scale, None, DType::F32).is_err());
}

/// `layer` at 1 and 40 tokens against the f64 reference over the weight dequantized on the host
/// from its bytes and f32 scales (rounded to `T`).
fn per_channel_layer_matches<T: cutlass_gemm::WeightOnlyInput>(
    dev: &Device,
    dtype: DType,
    name: &str,
    layer: &WeightOnlyLinear,
    format: cutlass_gemm::WeightFormat,
    bytes: &[u8],
    scales: &[f32],
) {
    use cutlass_gemm::reference;
    let (n, k) = layer.dims();
    let scales: Vec<T> = scales.iter().map(|&s| T::from_f64(f64::from(s))).collect();
    let signed: Vec<i8> = bytes.iter().map(|&b| b as i8).collect();
    let fp8 = format == cutlass_gemm::WeightFormat::Fp8;
    let deq = if fp8 {
        reference::dequantize_fp8_weight(bytes, &scales, n, k)
    } else {
        reference::dequantize_int8_weight(&signed, &scales, n, k)
    }
    .unwrap();
    let host = |t: &Tensor| -> Vec<T> {
        t.to_dtype(DType::F32)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()
            .into_iter()
            .map(|v| T::from_f64(f64::from(v)))
            .collect()
    };
    for m in [1usize, 40] {
        let x = rand(dev, &[m, k], dtype);
        let y = layer.forward(&x).unwrap();
        assert_eq!((y.dims2().unwrap(), y.dtype()), ((m, n), dtype));
        let xh = host(&x);
        let p = cutlass_gemm::WeightOnlyProblem::new(m, n, k, k, format);
        let mut want = reference::weight_only(&p, &xh, &deq, None).unwrap();
        if m <= cutlass_gemm::plans::weight_only::GEMV_TOKENS {
            want.extra_error = if fp8 {
                reference::fp8_weight_gemv_error(&p, &xh, bytes, &scales)
            } else {
                reference::int8_weight_gemv_error(&p, &xh, &signed, &scales)
            }
            .unwrap();
        }
        let geometry = cutlass_gemm::GemmProblem::new(m, n, k)
            .resolve(cutlass_gemm::OperandName::D)
            .unwrap();
        let cmp = reference::compare(&host(&y), &geometry, &want);
        println!("{name} {:?} m={m}: {cmp:?}", dtype);
        assert!(cmp.passed(), "{name} {:?} m={m}: {cmp:?}", dtype);
    }
}
