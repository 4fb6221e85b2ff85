//! A Mixtral-8x7B mixture-of-experts block in candle (hidden 4096, expert FFN 14336, 8 experts,
//! top-2 routing), its expert GEMMs grouped: one `cutlass_gemm::candle::grouped_matmul` for every
//! expert's fused gate-and-up projection and one for every expert's down projection, beside the
//! per-expert loop of candle matmuls (cuBLAS) that a framework without a grouped kernel runs.
//! Routing, SiLU, the gating product and the weighted sum are candle ops in both; the outputs are
//! compared and the times printed side by side.
//!
//! `cargo run --release --features candle --example 08_moe_grouped [tokens...]` (default: 16 512
//! 4096). Times: median of 20 timed runs of the whole block after 3 warm-up runs, CUDA events on
//! candle's stream; both include routing (one host round trip for the routing table, as a loop
//! needs it to size its GEMMs).

use std::sync::Arc;

use anyhow::Result;
use candle_core::{DType, Device, Tensor, D};
use cudarc::driver::CudaStream;
use cutlass_gemm::candle::grouped_matmul;

#[path = "common/timing.rs"]
mod timing;

const HIDDEN: usize = 4096;
const FFN: usize = 14336;
const EXPERTS: usize = 8;
const TOP_K: usize = 2;
const RUNS: usize = 20;

/// The layer's weights, like a trained layer's: N(0, 0.02).
struct Moe {
    router: Tensor,
    /// (experts, 2 x FFN, hidden): each expert's gate rows, then its up rows.
    gate_up: Tensor,
    /// (experts, hidden, FFN).
    down: Tensor,
}

/// Which tokens go to which expert: token-slots sorted by expert, their routing weights, and the
/// offsets of each expert's rows.
struct Routing {
    /// (tokens x top-k) token indices, sorted by expert (U32).
    order: Tensor,
    /// (tokens x top-k, 1) routing weights in the same order.
    weights: Tensor,
    /// (experts + 1) offsets (U32), and the same on the host.
    offsets: Tensor,
    offsets_host: Vec<u32>,
}

fn route(moe: &Moe, x: &Tensor) -> Result<Routing> {
    let tokens = x.dim(0)?;
    let logits = x.matmul(&moe.router.t()?)?.to_dtype(DType::F32)?;
    let e = logits.broadcast_sub(&logits.max_keepdim(1)?)?.exp()?;
    let probs = e.broadcast_div(&e.sum_keepdim(1)?)?;
    let top = probs
        .arg_sort_last_dim(false)?
        .narrow(1, 0, TOP_K)?
        .contiguous()?;
    let top_p = probs.gather(&top, 1)?;
    let top_p = top_p.broadcast_div(&top_p.sum_keepdim(1)?)?;
    // The routing table on the host: sort the token-slots by expert.
    let experts: Vec<Vec<u32>> = top.to_vec2()?;
    let p: Vec<Vec<f32>> = top_p.to_vec2()?;
    let mut slots: Vec<(u32, u32, f32)> = Vec::with_capacity(tokens * TOP_K);
    for t in 0..tokens {
        for j in 0..TOP_K {
            slots.push((experts[t][j], t as u32, p[t][j]));
        }
    }
    slots.sort_by_key(|s| s.0);
    let mut offsets_host = vec![0u32; EXPERTS + 1];
    for s in &slots {
        offsets_host[s.0 as usize + 1] += 1;
    }
    for e in 0..EXPERTS {
        offsets_host[e + 1] += offsets_host[e];
    }
    let dev = x.device();
    let order: Vec<u32> = slots.iter().map(|s| s.1).collect();
    let weights: Vec<f32> = slots.iter().map(|s| s.2).collect();
    Ok(Routing {
        order: Tensor::new(order.as_slice(), dev)?,
        weights: Tensor::new(weights.as_slice(), dev)?
            .unsqueeze(1)?
            .to_dtype(x.dtype())?,
        offsets: Tensor::new(offsets_host.as_slice(), dev)?,
        offsets_host,
    })
}

/// silu(gate) * up from the fused projection's output (rows, 2 x FFN).
fn swiglu(h: &Tensor) -> Result<Tensor> {
    let gate = h.narrow(D::Minus1, 0, FFN)?;
    let up = h.narrow(D::Minus1, FFN, FFN)?;
    Ok((gate.silu()? * up)?)
}

/// The block with the expert GEMMs grouped: two grouped launches.
fn grouped(moe: &Moe, x: &Tensor) -> Result<Tensor> {
    let r = route(moe, x)?;
    let xs = x.index_select(&r.order, 0)?;
    let h = swiglu(&grouped_matmul(&xs, &moe.gate_up, &r.offsets)?)?;
    let y = grouped_matmul(&h, &moe.down, &r.offsets)?.broadcast_mul(&r.weights)?;
    Ok(x.zeros_like()?.index_add(&r.order, &y, 0)?)
}

/// The block with one candle matmul per expert and projection.
fn looped(moe: &Moe, x: &Tensor) -> Result<Tensor> {
    let r = route(moe, x)?;
    let mut out = x.zeros_like()?;
    for e in 0..EXPERTS {
        let (start, end) = (r.offsets_host[e] as usize, r.offsets_host[e + 1] as usize);
        if start == end {
            continue;
        }
        let idx = r.order.narrow(0, start, end - start)?;
        let xs = x.index_select(&idx, 0)?;
        let h = swiglu(&xs.matmul(&moe.gate_up.get(e)?.t()?)?)?;
        let y = h
            .matmul(&moe.down.get(e)?.t()?)?
            .broadcast_mul(&r.weights.narrow(0, start, end - start)?)?;
        out = out.index_add(&idx, &y, 0)?;
    }
    Ok(out)
}

fn time(stream: &Arc<CudaStream>, f: &mut dyn FnMut() -> Result<Tensor>) -> Result<f64> {
    timing::median_ms(stream, RUNS, &mut || f().map(drop))
}

fn main() -> Result<()> {
    anyhow::ensure!(
        cutlass_gemm::cuda_available(),
        "no CUDA GPU found: the example needs one"
    );
    let tokens: Vec<usize> = {
        let args: Vec<usize> = std::env::args()
            .skip(1)
            .filter_map(|a| a.parse().ok())
            .collect();
        if args.is_empty() {
            vec![16, 512, 4096]
        } else {
            args
        }
    };
    let dev = Device::new_cuda(0)?;
    let stream = dev.as_cuda_device()?.cuda_stream();
    println!(
        "device: {}; Mixtral-8x7B MoE block: hidden {HIDDEN}, expert FFN {FFN}, {EXPERTS} experts, top-{TOP_K}, bf16",
        stream.context().name()?
    );
    let w = |shape: &[usize]| -> Result<Tensor> {
        Ok(Tensor::randn(0f32, 0.02, shape, &dev)?.to_dtype(DType::BF16)?)
    };
    let moe = Moe {
        router: w(&[EXPERTS, HIDDEN])?,
        gate_up: w(&[EXPERTS, 2 * FFN, HIDDEN])?,
        down: w(&[EXPERTS, HIDDEN, FFN])?,
    };
    println!(
        "{:>7} {:>14} {:>14} {:>9} {:>12} {:>12}",
        "tokens", "loop (ms)", "grouped (ms)", "speed-up", "max |diff|", "rms diff"
    );
    for t in tokens {
        let x = Tensor::randn(0f32, 1.0, (t, HIDDEN), &dev)?.to_dtype(DType::BF16)?;
        let a = looped(&moe, &x)?;
        let b = grouped(&moe, &x)?;
        let d = (a.to_dtype(DType::F32)? - b.to_dtype(DType::F32)?)?;
        let max = d.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
        let rms = |t: &Tensor| -> Result<f32> {
            Ok(t.to_dtype(DType::F32)?
                .sqr()?
                .mean_all()?
                .to_scalar::<f32>()?
                .sqrt())
        };
        let rel = rms(&d)? / rms(&a)?;
        // Both round the same f32 sums to bf16 at the same points: a relative rms difference
        // beyond a few bf16 roundings would be a wrong result, not rounding.
        anyhow::ensure!(
            rel < 2e-2,
            "grouped and looped blocks differ: rms {rel:.3e}"
        );
        let tl = time(&stream, &mut || looped(&moe, &x))?;
        let tg = time(&stream, &mut || grouped(&moe, &x))?;
        println!(
            "{t:>7} {tl:>14.3} {tg:>14.3} {:>8.2}x {max:>12.3e} {rel:>12.3e}",
            tl / tg
        );
    }
    Ok(())
}
