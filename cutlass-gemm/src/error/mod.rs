//! The crate's error type: [`Error`], the operand it names ([`OperandName`]) and the rules it
//! names ([`rules`]).

use std::fmt;

use cutlass_gemm_catalog::{Arch, Layout};

pub mod rules;
pub use rules::*;

/// Which operand an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OperandName {
    /// The left input, m x k.
    A,
    /// The right input, k x n.
    B,
    /// The epilogue source, m x n.
    C,
    /// The output, m x n.
    D,
    /// The kernel's scratch buffer.
    Workspace,
    /// The scale factors of a quantized tensor.
    Scales,
    /// The scales of A (blockwise and block-scaled GEMMs).
    ScalesA,
    /// The scales of B (blockwise and block-scaled GEMMs).
    ScalesB,
    /// The stream a launch was given ([`Error::DeviceMismatch`]).
    Stream,
    /// The CUDA context current on the calling thread, which raw launches run on
    /// ([`Error::DeviceMismatch`]).
    CurrentContext,
    /// A fused epilogue's bias ([`crate::plans::epilogue`]).
    Bias,
    /// A fused epilogue's scales per row of D.
    RowScales,
    /// A fused epilogue's scales per column of D.
    ColScales,
    /// The auxiliary output of an epilogue that also writes its pre-activation value
    /// ([`crate::Epilogue::with_aux_output`]).
    Aux,
    /// A grouped GEMM's rows per group: the offsets of the contiguous layout or the counts of the
    /// masked one ([`crate::GroupedGemm`]).
    GroupRows,
    /// A grouped GEMM's per-group alphas.
    GroupAlphas,
    /// A quantized weight's additive zeros, or a checkpoint's zero points.
    Zeros,
    /// GPTQ's `g_idx` (the group of each column).
    GroupIndex,
}

impl fmt::Display for OperandName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OperandName::A => "A",
            OperandName::B => "B",
            OperandName::C => "C",
            OperandName::D => "D",
            OperandName::Workspace => "workspace",
            OperandName::Scales => "scale factors",
            OperandName::ScalesA => "scales of A",
            OperandName::ScalesB => "scales of B",
            OperandName::Stream => "stream",
            OperandName::CurrentContext => "the thread's current CUDA context",
            OperandName::Bias => "bias",
            OperandName::RowScales => "row scales",
            OperandName::ColScales => "column scales",
            OperandName::Aux => "auxiliary output",
            OperandName::GroupRows => "group rows (offsets or counts)",
            OperandName::GroupAlphas => "group alphas",
            OperandName::Zeros => "zeros",
            OperandName::GroupIndex => "g_idx",
        })
    }
}

/// Everything that can go wrong. Input errors are found before any call into a kernel; each names
/// the operand and the rule it breaks.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The problem itself is malformed: a zero or too-large extent, beta without C, ...
    InvalidProblem {
        /// What is wrong.
        reason: ProblemRule,
    },
    /// A leading dimension is smaller than the contiguous extent of the matrix.
    LeadingDimension {
        /// The operand.
        operand: OperandName,
        /// The leading dimension given, in elements.
        ld: usize,
        /// The smallest allowed leading dimension: the contiguous extent.
        min: usize,
        /// The operand's layout.
        layout: Layout,
        /// Its rows.
        rows: usize,
        /// Its columns.
        cols: usize,
    },
    /// A pointer, leading dimension, batch stride or contiguous extent breaks the kernel's
    /// alignment rule.
    Misaligned {
        /// The operand.
        operand: OperandName,
        /// What is misaligned.
        what: Quantity,
        /// The offending value (bytes for pointers, elements otherwise).
        value: u64,
        /// The required alignment (bytes for pointers, elements otherwise).
        required: u64,
    },
    /// A batch stride lets consecutive matrices of a batch overlap.
    BatchStride {
        /// The operand.
        operand: OperandName,
        /// The stride given, in elements.
        stride: usize,
        /// The smallest allowed stride: the span of one matrix.
        min: usize,
    },
    /// The kernels for these element types on this architecture do not read this operand in this
    /// layout (for example, Hopper's wgmma reads 8-bit operands K-major only).
    UnsupportedLayout {
        /// The operand.
        operand: OperandName,
        /// The rule.
        rule: LayoutRule,
    },
    /// A scale tensor does not match what the kernel reads: its granularity, layout or shape.
    ScaleMismatch {
        /// The scales (or the operand they scale).
        operand: OperandName,
        /// The rule.
        rule: ScaleRule,
    },
    /// A buffer is shorter than the extent implied by the shape, leading dimension and batch stride.
    BufferTooSmall {
        /// The operand.
        operand: OperandName,
        /// Its length, in elements.
        len: usize,
        /// The elements the problem reaches.
        required: usize,
    },
    /// Two operands share memory where the kernel cannot allow it (the output may alias C only).
    Aliasing {
        /// The output.
        output: OperandName,
        /// The input it overlaps.
        input: OperandName,
    },
    /// No kernel of this build serves the problem's types and layouts.
    NoKernel {
        /// The request, in words.
        request: String,
        /// Up to three built kernels nearest to the request (same input types first).
        nearest: Vec<String>,
        /// How to build a kernel that serves it.
        build_with: BuildHint,
    },
    /// A kernel was asked for by name and this build does not contain it.
    KernelNotBuilt {
        /// The name asked for.
        name: String,
        /// How to build it.
        build_with: BuildHint,
    },
    /// A kernel was asked for by name but does not serve this problem.
    KernelMismatch {
        /// The kernel.
        name: String,
        /// Why not.
        reason: KernelRule,
    },
    /// The kernel targets an architecture this device is not.
    ArchMismatch {
        /// The kernel.
        kernel: String,
        /// Its architecture.
        arch: Arch,
        /// The device's compute capability.
        device: (i32, i32),
    },
    /// A buffer or stream belongs to another device than the plan.
    DeviceMismatch {
        /// The operand or [`OperandName::Stream`].
        what: OperandName,
        /// The plan's device ordinal.
        expected: usize,
        /// The ordinal found.
        found: usize,
    },
    /// Device memory the library allocates for a launch (a managed workspace) could not be
    /// allocated. Nothing was launched and the plan stays usable: free memory, or pass a
    /// [`Workspace::Buffer`](crate::Workspace::Buffer) allocated beforehand.
    OutOfMemory {
        /// What was allocated ([`OperandName::Workspace`]).
        operand: OperandName,
        /// Its size in bytes.
        bytes: usize,
    },
    /// The stream is capturing a CUDA graph and the launch could not be captured; nothing was
    /// queued and the capture is left as it was.
    StreamCapture {
        /// Why.
        rule: CaptureRule,
    },
    /// CUTLASS rejected the arguments (`can_implement`) or failed to run.
    Cutlass {
        /// The kernel.
        kernel: String,
        /// The C ABI status.
        status: i32,
        /// The status in words.
        message: String,
    },
    /// A CUDA driver call failed.
    Cuda(cudarc::driver::DriverError),
    /// Reading or writing a file (the autotuning cache) failed.
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        error: std::io::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidProblem { reason } => write!(f, "invalid GEMM problem: {reason}"),
            Error::LeadingDimension { operand, ld, min, layout, rows, cols } => {
                let (what, dim) = match layout {
                    Layout::RowMajor => ("row-major", "a row"),
                    Layout::ColumnMajor => ("column-major", "a column"),
                };
                write!(
                    f,
                    "operand {operand}: leading dimension {ld} is too small, it must be at least {min} \
                     ({what} {rows} x {cols}: it must cover {dim})"
                )
            }
            Error::Misaligned {
                operand,
                what,
                value,
                required,
            } => {
                // Addresses in hex, counts of elements in decimal.
                write!(f, "operand {operand}: {what}")?;
                match what {
                    w if w.is_address() => write!(f, " {value:#x}")?,
                    Quantity::Extent(_) | Quantity::PackedK { .. } => write!(f, " = {value}")?,
                    _ => write!(f, " {value}")?,
                }
                let unit = if what.is_address() { "bytes" } else { "elements" };
                write!(f, " is not a multiple of {required} {unit}")?;
                match what {
                    Quantity::PackedK { bits, .. } => write!(
                        f,
                        " ({bits}-bit elements pack whole bytes per row only when k is a multiple \
                         of {required})"
                    ),
                    _ => write!(
                        f,
                        " (TMA needs 16-byte aligned addresses, strides and contiguous extents, \
                         and 32-byte aligned bases for the sub-byte types it unpacks)"
                    ),
                }
            }
            Error::BatchStride { operand, stride, min } => write!(
                f,
                "operand {operand}: batch stride {stride} is smaller than one matrix ({min} elements); \
                 matrices of a batch may not overlap"
            ),
            Error::UnsupportedLayout { operand, rule } => {
                write!(f, "operand {operand}: unsupported layout: {rule}")
            }
            Error::ScaleMismatch { operand, rule } => write!(f, "{operand}: {rule}"),
            Error::BufferTooSmall { operand, len, required } => write!(
                f,
                "operand {operand}: buffer holds {len} elements but the shape, leading dimension and \
                 batch stride reach {required}"
            ),
            Error::Aliasing { output, input } => write!(
                f,
                "operand {output} overlaps operand {input}; the output may only alias C"
            ),
            Error::NoKernel { request, nearest, build_with } => {
                write!(f, "no kernel of this build serves {request}; {build_with}")?;
                match nearest.as_slice() {
                    [] => write!(f, " (this build has no kernels)"),
                    n => write!(f, " (nearest built: {})", n.join(", ")),
                }
            }
            Error::KernelNotBuilt { name, build_with } => {
                write!(f, "kernel {name} is not in this build; {build_with}")
            }
            Error::KernelMismatch { name, reason } => {
                write!(f, "kernel {name} does not serve this problem: {reason}")
            }
            Error::ArchMismatch { kernel, arch, device } => write!(
                f,
                "kernel {kernel} targets {arch} (compute capability {}.{}); this device is {}.{}",
                arch.compute_capability().0,
                arch.compute_capability().1,
                device.0,
                device.1
            ),
            Error::DeviceMismatch { what, expected, found } => write!(
                f,
                "{what} is on device {found} but the GEMM was planned for device {expected}"
            ),
            Error::OutOfMemory { operand, bytes } => write!(
                f,
                "out of device memory: the {operand} of {bytes} bytes could not be allocated \
                 (nothing was launched; free memory or pass a workspace buffer)"
            ),
            Error::StreamCapture { rule } => {
                write!(f, "the stream is capturing a CUDA graph: {rule}")
            }
            Error::Cutlass { kernel, status, message } => {
                write!(f, "CUTLASS kernel {kernel} returned status {status}: {message}")
            }
            Error::Cuda(e) => write!(f, "CUDA driver error: {e}"),
            Error::Io { path, error } => write!(f, "{}: {error}", path.display()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Cuda(e) => Some(e),
            Error::Io { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl From<cudarc::driver::DriverError> for Error {
    fn from(e: cudarc::driver::DriverError) -> Self {
        Error::Cuda(e)
    }
}

/// How to build a kernel that a plan asked for: what [`Error::NoKernel`] and
/// [`Error::KernelNotBuilt`] suggest.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildHint {
    /// Enable this cargo feature of `cutlass-gemm`: its kernel family holds one.
    Feature(cutlass_gemm_catalog::Family),
    /// Build with this catalog entry: `CUTLASS_RS_KERNELS=default,<name>`.
    Kernels(String),
    /// No catalog entry serves it.
    NotInCatalog,
    /// The catalog entry asked for is one CUTLASS 4.2 refuses to compile (its assertion and
    /// where CUTLASS makes it).
    CutlassLimit(cutlass_gemm_catalog::CutlassLimit),
    /// Build for this architecture too (`CUTLASS_RS_ARCHS`): the hand-written kernels are compiled
    /// for the build's architectures only.
    Architecture(cutlass_gemm_catalog::Arch),
}

impl fmt::Display for BuildHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildHint::Feature(family) => write!(
                f,
                "enable the cargo feature `{family}` of cutlass-gemm to build one"
            ),
            BuildHint::Kernels(name) => {
                write!(f, "build one with CUTLASS_RS_KERNELS=default,{name}")
            }
            BuildHint::NotInCatalog => write!(f, "no kernel of the catalog serves it"),
            BuildHint::CutlassLimit(limit) => write!(f, "{limit}"),
            BuildHint::Architecture(arch) => write!(
                f,
                "build for it with CUTLASS_RS_ARCHS including {} (with the build's other architectures)",
                arch.tag()
            ),
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The device rule: a buffer belongs to the plan's device (the device of the context its stream
/// was made in; a kernel reads and writes only its own device's memory).
pub(crate) fn require_device<T>(
    operand: OperandName,
    buffer: &(impl cudarc::driver::DeviceSlice<T> + ?Sized),
    expected: usize,
) -> Result<()> {
    require_ordinal(operand, buffer.stream().context().ordinal(), expected)
}

/// The device rule for an ordinal already known (a stream's, the thread's current device, a
/// tensor's): `found` must be `expected`.
pub(crate) fn require_ordinal(operand: OperandName, found: usize, expected: usize) -> Result<()> {
    if found != expected {
        return Err(Error::DeviceMismatch {
            what: operand,
            expected,
            found,
        });
    }
    Ok(())
}

/// The stream rule of the safe entry points: the stream is on the plan's device (`expected`), its
/// context is bound to this thread, and a stream capturing a CUDA graph can take the launch:
/// refused while cudarc manages the synchronization of several streams with events (see
/// [`CaptureRule::EventTracking`]) or after the capture was invalidated. The capture status is
/// asked only in that mode, so a plain launch makes no extra driver call.
pub(crate) fn require_stream(stream: &cudarc::driver::CudaStream, expected: usize) -> Result<()> {
    require_ordinal(OperandName::Stream, stream.context().ordinal(), expected)?;
    stream.context().bind_to_thread()?;
    if stream.context().is_managing_stream_synchronization() {
        use cudarc::driver::sys::CUstreamCaptureStatus as Status;
        let rule = match stream.capture_status()? {
            Status::CU_STREAM_CAPTURE_STATUS_NONE => return Ok(()),
            Status::CU_STREAM_CAPTURE_STATUS_ACTIVE => CaptureRule::EventTracking,
            _ => CaptureRule::Invalidated,
        };
        return Err(Error::StreamCapture { rule });
    }
    Ok(())
}

/// The architecture rule: the device runs the kernel's architecture (an SM90a kernel needs a
/// compute capability 9.0 device, SM100a 10.x, SM120a 12.x).
pub(crate) fn require_arch(kernel: &str, arch: Arch, device: (i32, i32)) -> Result<()> {
    if !arch.runs_on(device) {
        return Err(Error::ArchMismatch {
            kernel: kernel.into(),
            arch,
            device,
        });
    }
    Ok(())
}

/// The alignment rule of an address (or of a quantity `what` names): `value` a multiple of
/// `align`.
pub(crate) fn require_aligned(
    operand: OperandName,
    what: Quantity,
    value: u64,
    align: u64,
) -> Result<()> {
    if value % align != 0 {
        return Err(Error::Misaligned {
            operand,
            what,
            value,
            required: align,
        });
    }
    Ok(())
}

/// Whether two byte ranges, each `(start, length)`, share a byte.
pub(crate) fn overlaps((a, an): (u64, u64), (b, bn): (u64, u64)) -> bool {
    an > 0 && bn > 0 && a < b + bn && b < a + an
}

/// The buffer-length rule: `len` elements (or bytes) must reach `required`.
pub(crate) fn require_len(operand: OperandName, len: usize, required: usize) -> Result<()> {
    if len < required {
        return Err(Error::BufferTooSmall {
            operand,
            len,
            required,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cutlass_gemm_catalog::DataType;

    fn misaligned(operand: OperandName, what: Quantity, value: u64, required: u64) -> String {
        Error::Misaligned {
            operand,
            what,
            value,
            required,
        }
        .to_string()
    }

    #[test]
    fn misaligned_shows_addresses_in_hex_and_counts_in_decimal() {
        let tma = " (TMA needs 16-byte aligned addresses, strides and contiguous extents, and \
                   32-byte aligned bases for the sub-byte types it unpacks)";
        assert_eq!(
            misaligned(OperandName::A, Quantity::Pointer, 0x1002, 16),
            format!("operand A: pointer 0x1002 is not a multiple of 16 bytes{tma}")
        );
        assert_eq!(
            misaligned(OperandName::D, Quantity::ScaleFactorPointer, 0x2004, 16),
            format!("operand D: scale-factor pointer 0x2004 is not a multiple of 16 bytes{tma}")
        );
        assert_eq!(
            misaligned(OperandName::B, Quantity::LeadingDimension, 130, 8),
            format!("operand B: leading dimension 130 is not a multiple of 8 elements{tma}")
        );
        assert_eq!(
            misaligned(OperandName::C, Quantity::BatchStride, 8196, 8),
            format!("operand C: batch stride 8196 is not a multiple of 8 elements{tma}")
        );
        assert_eq!(
            misaligned(OperandName::A, Quantity::Extent(Extent::K), 100, 8),
            format!("operand A: contiguous extent k = 100 is not a multiple of 8 elements{tma}")
        );
        let packed = Quantity::PackedK {
            op: QuantizeOp::QuantizeMx,
            bits: 6,
        };
        assert_eq!(
            misaligned(OperandName::A, packed, 10, 4),
            "operand A: MX quantization: k = 10 is not a multiple of 4 elements (6-bit elements \
             pack whole bytes per row only when k is a multiple of 4)"
        );
    }

    #[test]
    fn layout_pairs_are_named_in_order() {
        use Layout::{ColumnMajor as N, RowMajor as T};
        let set: LayoutPairs = [(T, T), (N, N), (T, N)].into_iter().collect();
        assert_eq!(set.to_string(), "NN, TN, TT");
        assert!(set.contains(T, N) && !set.contains(N, T));
        assert_eq!(set.iter().collect::<Vec<_>>(), [(N, N), (T, N), (T, T)]);
        assert_eq!(LayoutPairs::default().to_string(), "");
    }

    #[test]
    fn rules_display_as_before() {
        let rule = LayoutRule::KernelLayouts {
            layout: Layout::ColumnMajor,
            a: DataType::E4M3,
            b: DataType::E4M3,
            arch: Arch::Sm90a,
            d: Layout::RowMajor,
            allowed: [(Layout::RowMajor, Layout::ColumnMajor)]
                .into_iter()
                .collect(),
        };
        assert_eq!(
            Error::UnsupportedLayout {
                operand: OperandName::A,
                rule
            }
            .to_string(),
            "operand A: unsupported layout: column-major but the e4m3 x e4m3 kernels for sm90a \
             with a row-major D take TN only (A's letter, then B's: T row-major, N column-major); \
             Hopper's wgmma reads 8-bit operands K-major only"
        );
        assert_eq!(
            Error::InvalidProblem {
                reason: ProblemRule::BetaWithoutC { beta: Scalar(0.5) }
            }
            .to_string(),
            "invalid GEMM problem: beta is 0.5 but no C was given"
        );
        assert_eq!(
            Error::DeviceMismatch {
                what: OperandName::Stream,
                expected: 0,
                found: 1
            }
            .to_string(),
            "stream is on device 1 but the GEMM was planned for device 0"
        );
        assert_eq!(
            Error::DeviceMismatch {
                what: OperandName::CurrentContext,
                expected: 1,
                found: 0
            }
            .to_string(),
            "the thread's current CUDA context is on device 0 but the GEMM was planned for device 1"
        );
        assert_eq!(
            Error::KernelMismatch {
                name: "k".into(),
                reason: KernelRule::SplitKNeedsStreamK { splits: 2 }
            }
            .to_string(),
            "kernel k does not serve this problem: split-K (2 splits) needs a stream-K kernel"
        );
        // NaN rules equal themselves: scalars compare bit for bit.
        let nan = ProblemRule::NonFiniteScalars {
            alpha: Scalar(f32::NAN),
            beta: Scalar(0.0),
        };
        assert_eq!(nan, nan);
        assert_ne!(Scalar(0.0), Scalar(-0.0));
    }
}
