//! GEMM plans: a problem's geometry ([`problem`]), checked against a chosen kernel's rules once, then
//! launched many times: [`Gemm`](gemm::Gemm) (16-bit, tf32, s8, FP8 tensor-wise),
//! [`BlockwiseGemm`](blockwise::BlockwiseGemm) (FP8 with blockwise scales) and
//! [`BlockScaledGemm`](block_scaled::BlockScaledGemm) (SM100/SM120 MX, NVFP4 and plain narrow
//! types), [`GroupedGemm`](grouped::GroupedGemm) (many problems sharing N and K in one launch:
//! mixture-of-experts layers), [`WeightOnlyGemm`](weight_only::WeightOnlyGemm) (4-bit, FP8 and
//! int8 weights, bf16/f16 activations) and [`GatedGemm`](gated::GatedGemm) (an MLP's gate and up projections
//! with SwiGLU or GeGLU in one kernel).

pub mod block_scaled;
pub mod blockwise;
pub mod epilogue;
pub mod gated;
pub mod gemm;
pub mod grouped;
pub mod grouped_block_scaled;
pub mod problem;
pub(crate) mod staging;
pub mod weight_only;
