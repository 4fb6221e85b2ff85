//! The GEMM types `profile` measures (`--types`), and what each implies: operand sizes, the
//! roofline multiplier, the reference library and cutlass_profiler's type spelling.

use clap::ValueEnum;

/// One measured type: A/B element type, output type and the library it is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// bf16 x bf16 -> bf16, f32 accumulation, against cuBLAS.
    Bf16,
    /// f16 x f16 -> f16, f32 accumulation, against cuBLAS.
    F16,
    /// e4m3 x e4m3 -> bf16 (tensor-wise), against cuBLASLt's FP8 matmul.
    #[value(alias = "fp8")]
    E4m3,
    /// FP8 1x128 x 128x128 blockwise -> bf16, against cuBLASLt's blockwise FP8 matmul.
    #[value(name = "fp8bw", alias = "fp8-blockwise")]
    Fp8Blockwise,
    /// tf32 x tf32 -> f32, against cublasGemmEx with fast TF32.
    Tf32,
    /// s8 x s8 -> s32, against cublasGemmEx with 32-bit integer compute.
    #[value(aliases = ["s8", "int8"])]
    I8,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Bf16 => "bf16",
            Kind::F16 => "f16",
            Kind::E4m3 => "e4m3",
            Kind::Fp8Blockwise => "fp8bw",
            Kind::Tf32 => "tf32",
            Kind::I8 => "i8",
        }
    }

    pub fn input_bytes(self) -> usize {
        match self {
            Kind::Bf16 | Kind::F16 => 2,
            Kind::Tf32 => 4,
            Kind::E4m3 | Kind::Fp8Blockwise | Kind::I8 => 1,
        }
    }

    pub fn output_bytes(self) -> usize {
        match self {
            Kind::Tf32 | Kind::I8 => 4,
            _ => 2,
        }
    }

    /// Peak multiplier over the bf16 tensor-core rate.
    pub fn speed(self) -> f64 {
        match self {
            Kind::Bf16 | Kind::F16 => 1.0,
            Kind::Tf32 => 0.5,
            Kind::E4m3 | Kind::Fp8Blockwise | Kind::I8 => 2.0,
        }
    }

    /// The library this type is compared with (also its `Provider` in the CSV).
    pub fn reference(self) -> &'static str {
        match self {
            Kind::Bf16 | Kind::F16 | Kind::Tf32 | Kind::I8 => "cuBLAS",
            Kind::E4m3 => "cuBLASLt",
            Kind::Fp8Blockwise => "cuBLASLt-blockwise",
        }
    }

    /// The A/B type in cutlass_profiler's spelling.
    pub fn cutlass_profiler_type(self) -> &'static str {
        match self {
            Kind::Bf16 => "bf16",
            Kind::F16 => "f16",
            Kind::Tf32 => "tf32",
            Kind::I8 => "s8",
            Kind::E4m3 | Kind::Fp8Blockwise => "e4m3",
        }
    }

    /// The C/D type in cutlass_profiler's spelling.
    pub fn cutlass_profiler_output(self) -> &'static str {
        match self {
            Kind::F16 => "f16",
            Kind::Tf32 => "f32",
            Kind::I8 => "s32",
            Kind::Bf16 | Kind::E4m3 | Kind::Fp8Blockwise => "bf16",
        }
    }
}
