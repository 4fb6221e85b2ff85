//! The GPU half of the fuzz (the planner's half is `tests/fuzz.rs` and `tests/fuzz_plans.rs`):
//! random problems launched through the safe API on random slices of device arenas, each ending
//! in a result equal to the reference bit for bit, or in a typed error before any launch.
//!
//! A case draws a type (bf16, f16, bf16 → f32, e4m3 tensor-wise, e4m3 blockwise, bf16 with a fused
//! bias and ReLU, or a grouped launch of a list of one to four bf16 problems, each D in its own
//! window), extents at and around the alignments (1 to 96, k to 300, batches of 1 to 3),
//! every layout, padded, exact and too-small leading dimensions and batch strides, scalars, a
//! kernel (the heuristic's, one named at random, or a split-K schedule), programmatic dependent
//! launch on or off, slices at aligned and odd offsets, buffers of the exact length, longer, or one
//! element short, a managed or caller's workspace (sometimes one byte short), and now and then a
//! raw launch whose D is A. Inputs are in {-1, 0, 1} and scales and scalars powers of two, so the
//! f32 accumulation is exact and D must equal the f64 reference rounded once, bit for bit (+0 and
//! −0 count as equal: with beta = 0 a kernel's alpha · 0 keeps alpha's sign). D's
//! slice lies in a window of sentinels: every element of the window that is not an element of D
//! must keep its sentinel (no stray write), and a refused case must leave the whole window as it
//! was (nothing launched). A CUTLASS or CUDA error, a panic, a wrong or stray element is a failure.
//!
//! `CUTLASS_RS_GPU_FUZZ_CASES` (default 20 000; the acceptance run takes 1 000 000),
//! `CUTLASS_RS_GPU_FUZZ_THREADS` (default 8, each with its own stream and arenas), the seed from
//! `CUTLASS_RS_TEST_SEED`; case `i` draws from its own generator, so a failure names the case and
//! `CUTLASS_RS_GPU_FUZZ_FIRST=i CUTLASS_RS_GPU_FUZZ_CASES=1` replays it alone.

use crate::common::*;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use cutlass_gemm::numeric::E4M3;
use cutlass_gemm::reference::{self, HostEpilogue, Strided};
use cutlass_gemm::{
    built_kernels, Activation, Arch, BiasAxis, BlockwiseGemm, Element, Epilogue, EpilogueOperands,
    Error, Gemm, GemmProblem, GroupedListGemm, GroupedListProblem, Layout, MatrixLayout,
    OperandName, ResolvedMatrix, ScheduleHints, Workspace,
};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Elements per arena: enough for the largest operand a case draws at the largest offset.
const ARENA: usize = 1 << 19;
/// Sentinel elements on each side of D's slice (64: a whole number of 16-byte units for every
/// element type, so that an aligned offset stays aligned).
const MARGIN: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Bf16,
    F16,
    Bf16ToF32,
    E4m3,
    Blockwise,
    FusedBias,
    GroupedList,
}

impl Kind {
    fn draw(rng: &mut StdRng) -> Kind {
        match rng.random_range(0..100) {
            0..30 => Kind::Bf16,
            30..45 => Kind::F16,
            45..55 => Kind::Bf16ToF32,
            55..75 => Kind::E4m3,
            75..83 => Kind::Blockwise,
            83..92 => Kind::FusedBias,
            _ => Kind::GroupedList,
        }
    }
}

/// A sentinel no kernel writes: a NaN with a payload (e4m3 is never an output here).
trait Sentinel: Element {
    const SENTINEL: Self;
}
impl Sentinel for bf16 {
    const SENTINEL: bf16 = bf16::from_bits(0x7fc5);
}
impl Sentinel for f16 {
    const SENTINEL: f16 = f16::from_bits(0x7e05);
}
impl Sentinel for f32 {
    const SENTINEL: f32 = f32::from_bits(0x7fc0_0005);
}

/// One thread's device memory: an arena per operand and type, and a workspace arena.
struct Arenas {
    bf16: [CudaSlice<bf16>; 4],
    f16: [CudaSlice<f16>; 4],
    f32: [CudaSlice<f32>; 2],
    e4m3: [CudaSlice<E4M3>; 2],
    scales: [CudaSlice<f32>; 2],
    workspace: CudaSlice<u8>,
}

impl Arenas {
    fn new(stream: &Arc<CudaStream>) -> Arenas {
        Arenas {
            bf16: std::array::from_fn(|_| stream.alloc_zeros(ARENA).unwrap()),
            f16: std::array::from_fn(|_| stream.alloc_zeros(ARENA).unwrap()),
            f32: std::array::from_fn(|_| stream.alloc_zeros(ARENA).unwrap()),
            e4m3: std::array::from_fn(|_| stream.alloc_zeros(ARENA).unwrap()),
            scales: std::array::from_fn(|_| stream.alloc_zeros(ARENA).unwrap()),
            // 0xff bytes: NaN in every float type, so a kernel reading a workspace byte that the
            // plan did not write would put NaN in D.
            workspace: stream.clone_htod(&vec![0xffu8; 64 << 20]).unwrap(),
        }
    }
}

/// How a case ended, when it did not fail.
enum Outcome {
    /// Launched; D and the sentinels checked.
    Checked,
    /// A typed error, from the plan or the launch: its variant.
    Refused(&'static str),
}

type CaseResult = Result<Outcome, String>;

fn variant(e: &Error) -> &'static str {
    match e {
        Error::InvalidProblem { .. } => "InvalidProblem",
        Error::LeadingDimension { .. } => "LeadingDimension",
        Error::Misaligned { .. } => "Misaligned",
        Error::BatchStride { .. } => "BatchStride",
        Error::UnsupportedLayout { .. } => "UnsupportedLayout",
        Error::ScaleMismatch { .. } => "ScaleMismatch",
        Error::BufferTooSmall { .. } => "BufferTooSmall",
        Error::Aliasing { .. } => "Aliasing",
        Error::NoKernel { .. } => "NoKernel",
        Error::KernelNotBuilt { .. } => "KernelNotBuilt",
        Error::KernelMismatch { .. } => "KernelMismatch",
        Error::ArchMismatch { .. } => "ArchMismatch",
        Error::DeviceMismatch { .. } => "DeviceMismatch",
        Error::OutOfMemory { .. } => "OutOfMemory",
        Error::StreamCapture { .. } => "StreamCapture",
        _ => "other",
    }
}

/// A typed input error, or the failure it is: CUTLASS's or CUDA's errors mean a launch was
/// attempted with what the checks let through, and the errors of other devices, captures and
/// memory cannot happen here.
fn refused(e: Error) -> CaseResult {
    match variant(&e) {
        "DeviceMismatch" | "OutOfMemory" | "StreamCapture" | "other" => {
            Err(format!("not an input error: {e}"))
        }
        v if e.to_string().is_empty() => Err(format!("{v} without a message")),
        v => Ok(Outcome::Refused(v)),
    }
}

fn edge_extent(rng: &mut StdRng, max: usize, edges: &[usize]) -> usize {
    if rng.random_bool(0.5) {
        edges[rng.random_range(0..edges.len())]
    } else {
        rng.random_range(1..=max)
    }
}

fn layout(rng: &mut StdRng) -> Layout {
    if rng.random_bool(0.5) {
        Layout::RowMajor
    } else {
        Layout::ColumnMajor
    }
}

/// A matrix layout whose leading dimension and batch stride are packed, padded (mostly by whole
/// multiples of the 16-byte alignment, `align` elements), or (rarely) too small.
fn matrix(rng: &mut StdRng, l: Layout, rows: usize, cols: usize, align: usize) -> MatrixLayout {
    let (contiguous, strided) = match l {
        Layout::RowMajor => (cols, rows),
        Layout::ColumnMajor => (rows, cols),
    };
    let ld = match rng.random_range(0..20) {
        0..12 => None,
        12..16 => Some(contiguous.next_multiple_of(align) + align * rng.random_range(0..=2)),
        16..18 => Some(contiguous + rng.random_range(1..=16)),
        18 => Some(contiguous.saturating_sub(1).max(1)),
        _ => Some(contiguous),
    };
    let span = ld.unwrap_or(contiguous) * strided;
    let batch_stride = match rng.random_range(0..20) {
        0..14 => None,
        14..17 => Some(span.next_multiple_of(align) + align * rng.random_range(0..=3)),
        17..19 => Some(span + rng.random_range(0..=24)),
        _ => Some(span.saturating_sub(1)),
    };
    MatrixLayout {
        layout: l,
        ld,
        batch_stride,
    }
}

fn pow2(rng: &mut StdRng, lo: i32, hi: i32) -> f32 {
    2f32.powi(rng.random_range(lo..=hi))
}

/// A problem for `kind`: extents, layouts, strides and scalars.
fn problem(rng: &mut StdRng, kind: Kind) -> GemmProblem {
    const EDGES: [usize; 14] = [1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 65];
    const K_EDGES: [usize; 12] = [1, 2, 8, 9, 15, 16, 17, 127, 128, 129, 256, 257];
    let eight_bit = matches!(kind, Kind::E4m3 | Kind::Blockwise);
    let m = edge_extent(rng, 96, &EDGES);
    let n = edge_extent(rng, 96, &EDGES);
    let k = edge_extent(rng, 300, &K_EDGES);
    // 8-bit operands: k mostly a multiple of their 16-element alignment (the rest is staged).
    let k = if eight_bit && rng.random_bool(0.7) {
        k.next_multiple_of(16)
    } else {
        k
    };
    let (align_in, align_out) = match kind {
        Kind::E4m3 | Kind::Blockwise => (16, 8),
        Kind::Bf16ToF32 => (8, 4),
        _ => (8, 8),
    };
    let batch = if rng.random_bool(0.8) {
        1
    } else {
        rng.random_range(2..=3)
    };
    // 8-bit operands: TN nearly always (Hopper reads them K-major only; other layouts are
    // refused); fused epilogues: TN mostly (the fused kernels' layout).
    let (la, lb) = if (eight_bit && rng.random_bool(0.9))
        || (kind == Kind::FusedBias && rng.random_bool(0.6))
    {
        (Layout::RowMajor, Layout::ColumnMajor)
    } else {
        (layout(rng), layout(rng))
    };
    let ld = layout(rng);
    let lc = if rng.random_bool(0.95) {
        ld
    } else {
        layout(rng)
    };
    let alpha = [1.0f32, -1.0, 2.0, 0.5][rng.random_range(0..4)];
    let beta = [0.0f32, 0.0, 1.0, -1.0, 0.5][rng.random_range(0..5)];
    let mut p = GemmProblem::new(m, n, k)
        .with_batch(batch)
        .with_a(matrix(rng, la, m, k, align_in))
        .with_b(matrix(rng, lb, k, n, align_in))
        .with_c(matrix(rng, lc, m, n, align_out))
        .with_d(matrix(rng, ld, m, n, align_out))
        .with_scalars(alpha, beta);
    if kind == Kind::E4m3 {
        p = p.with_tensor_scales(pow2(rng, -2, 2), pow2(rng, -2, 2));
    }
    p
}

/// Offset (elements) and length of an operand's slice: mostly 16-byte aligned, sometimes not;
/// mostly the exact length, sometimes longer, sometimes one element short.
fn placement<T>(rng: &mut StdRng, required: usize) -> (usize, usize) {
    let per16 = (16 / std::mem::size_of::<T>()).max(1);
    let off = if rng.random_bool(0.9) {
        rng.random_range(0..64) * per16
    } else {
        rng.random_range(0..64 * per16)
    } + MARGIN;
    let len = match rng.random_range(0..40) {
        0 if required > 0 => required - 1,
        1..6 => required + rng.random_range(1..100),
        _ => required,
    };
    (off, len)
}

fn ternary<T: Element>(rng: &mut StdRng, len: usize) -> Vec<T> {
    (0..len)
        .map(|_| T::from_f64(rng.random_range(-1i32..=1) as f64))
        .collect()
}

/// Uploads host values into `arena[off..off + values.len()]`.
fn upload<T: cudarc::driver::DeviceRepr>(
    stream: &Arc<CudaStream>,
    arena: &mut CudaSlice<T>,
    off: usize,
    values: &[T],
) {
    if !values.is_empty() {
        let mut view = arena.slice_mut(off..off + values.len());
        stream.memcpy_htod(values, &mut view).unwrap();
    }
}

/// D's window: the slice with `MARGIN` sentinels on each side.
struct Window {
    start: usize,
    off: usize,
    len: usize,
}

impl Window {
    fn new(off: usize, len: usize) -> Window {
        Window {
            start: off - MARGIN,
            off,
            len,
        }
    }
    fn range(&self) -> std::ops::Range<usize> {
        self.start..self.off + self.len + MARGIN
    }
}

fn fill_window<TD: Sentinel + cudarc::driver::DeviceRepr>(
    stream: &Arc<CudaStream>,
    arena: &mut CudaSlice<TD>,
    w: &Window,
) {
    let r = w.range();
    upload(stream, arena, r.start, &vec![TD::SENTINEL; r.len()]);
}

fn read_window<TD: Sentinel + cudarc::driver::DeviceRepr>(
    stream: &Arc<CudaStream>,
    arena: &CudaSlice<TD>,
    w: &Window,
) -> Vec<TD> {
    stream.clone_dtoh(&arena.slice(w.range())).unwrap()
}

/// A refused case left the window as it was.
fn untouched<TD: Sentinel>(window: &[TD]) -> Result<(), String> {
    match window
        .iter()
        .position(|v| v.to_bits_u64() != TD::SENTINEL.to_bits_u64())
    {
        None => Ok(()),
        Some(i) => Err(format!(
            "refused, yet element {i} of D's window was written"
        )),
    }
}

/// Every element of D equals the reference rounded once; every other element of the window is
/// still a sentinel.
fn check_window<TD: Sentinel>(
    window: &[TD],
    w: &Window,
    gd: &ResolvedMatrix,
    r: &reference::Reference,
) -> Result<(), String> {
    let (m, n, _, batch) = r.shape;
    let base = w.off - w.start;
    let mut is_d = vec![false; window.len()];
    for l in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let at = base + gd.offset(l, i, j);
                is_d[at] = true;
                let want = TD::from_f64(r.value[(l * m + i) * n + j]);
                // Bit for bit, except the sign of a zero: the kernels compute alpha · acc with no
                // C term when beta is 0 (−0 for alpha < 0), the reference adds +0.
                let zeros = window[at].to_f64() == 0.0 && want.to_f64() == 0.0;
                if window[at].to_bits_u64() != want.to_bits_u64() && !zeros {
                    return Err(format!(
                        "D[{l}][{i}][{j}] = {}, the reference gives {}",
                        window[at].to_f64(),
                        want.to_f64()
                    ));
                }
            }
        }
    }
    for (i, v) in window.iter().enumerate() {
        if !is_d[i] && v.to_bits_u64() != TD::SENTINEL.to_bits_u64() {
            return Err(format!(
                "stray write at window element {i} (D starts at {base}): {}",
                v.to_f64()
            ));
        }
    }
    Ok(())
}

/// The arenas a plain case uses: A, B, C and D.
struct Operands<'a, T, TD> {
    a: &'a mut CudaSlice<T>,
    b: &'a mut CudaSlice<T>,
    c: &'a mut CudaSlice<TD>,
    d: &'a mut CudaSlice<TD>,
}

/// The kernel choice: the heuristic's (with PDL on or off), one of `names`, or a split-K schedule.
fn plan<T: Element, TD: Element>(
    rng: &mut StdRng,
    ctx: &Arc<cudarc::driver::CudaContext>,
    p: &GemmProblem,
    names: &[&'static str],
) -> cutlass_gemm::Result<Gemm<T, T, TD>> {
    let g = match rng.random_range(0..10) {
        0..6 => Gemm::<T, T, TD>::new(ctx, p)?,
        6..9 if !names.is_empty() => {
            Gemm::<T, T, TD>::with_kernel(ctx, p, names[rng.random_range(0..names.len())])?
        }
        _ => Gemm::<T, T, TD>::new(ctx, p)?.with_schedule(ScheduleHints {
            splits: rng.random_range(1..=4),
            ..Default::default()
        })?,
    };
    Ok(g.with_programmatic_dependent_launch(rng.random_bool(0.5)))
}

/// The workspace: managed (`None`), or a slice of the workspace arena, sometimes one byte short.
fn workspace_view<'a>(
    rng: &mut StdRng,
    arena: &'a mut CudaSlice<u8>,
    size: usize,
) -> Option<cudarc::driver::CudaViewMut<'a, u8>> {
    if rng.random_bool(0.5) {
        return None;
    }
    let len = if size > 0 && rng.random_bool(0.05) {
        size - 1
    } else {
        size + 16 * rng.random_range(0..4)
    };
    Some(arena.slice_mut(256..256 + len))
}

fn as_workspace<'a>(view: &'a mut Option<cudarc::driver::CudaViewMut<'_, u8>>) -> Workspace<'a> {
    match view {
        Some(v) => Workspace::Buffer(v),
        None => Workspace::Managed,
    }
}

/// A plain (or tensor-wise FP8) case.
fn plain_case<T, TD>(
    rng: &mut StdRng,
    stream: &Arc<CudaStream>,
    ops: Operands<'_, T, TD>,
    ws_arena: &mut CudaSlice<u8>,
    kind: Kind,
    names: &[&'static str],
) -> CaseResult
where
    T: Element + reference::HostValue + cudarc::driver::DeviceRepr,
    TD: Sentinel + reference::HostValue + cudarc::driver::DeviceRepr,
{
    let ctx = stream.context();
    let p = problem(rng, kind);
    let g = match plan::<T, TD>(rng, ctx, &p, names) {
        Ok(g) => g,
        Err(e) => return refused(e),
    };
    let (ga, gb, gc, gd) = (
        g.operand(OperandName::A),
        g.operand(OperandName::B),
        g.operand(OperandName::C),
        g.operand(OperandName::D),
    );
    let (oa, la) = placement::<T>(rng, ga.required_len());
    let (ob, lb) = placement::<T>(rng, gb.required_len());
    let (oc, lc) = placement::<TD>(rng, gc.required_len());
    let (od, ld) = placement::<TD>(rng, gd.required_len());
    let a: Vec<T> = ternary(rng, la);
    let b: Vec<T> = ternary(rng, lb);
    let with_c = p.beta != 0.0 || rng.random_bool(0.2);
    let c: Vec<TD> = if with_c { ternary(rng, lc) } else { vec![] };
    upload(stream, ops.a, oa, &a);
    upload(stream, ops.b, ob, &b);
    upload(stream, ops.c, oc, &c);
    let w = Window::new(od, ld);
    fill_window(stream, ops.d, &w);
    let raw_alias = std::mem::size_of::<T>() == std::mem::size_of::<TD>() && rng.random_bool(0.03);
    let result = if raw_alias {
        // D is A: the raw entry point must refuse the overlap before launching.
        let (pa, _ga) = ops.a.device_ptr(stream);
        let (pb, _gb) = ops.b.device_ptr(stream);
        let esz = std::mem::size_of::<T>() as u64;
        let pa = pa + oa as u64 * esz;
        // SAFETY: the arenas hold every extent; an accepted call would be a failure of the test.
        match unsafe { g.run_raw(pa, pb + ob as u64 * esz, None, pa, 0, 0, stream.cu_stream()) } {
            Ok(()) => return Err("a raw launch whose D is A was accepted".into()),
            Err(e) => return refused(e),
        }
    } else {
        let mut view = workspace_view(rng, ws_arena, g.workspace_size());
        let wsp = as_workspace(&mut view);
        let av = ops.a.slice(oa..oa + la);
        let bv = ops.b.slice(ob..ob + lb);
        let cv = ops.c.slice(oc..oc + lc);
        let mut dv = ops.d.slice_mut(od..od + ld);
        let c_arg: Option<&dyn DevicePtr<TD>> = if with_c { Some(&cv) } else { None };
        g.run(stream, &av, &bv, c_arg, &mut dv, wsp)
    };
    let window = read_window(stream, ops.d, &w);
    if let Err(e) = result {
        untouched(&window)?;
        return refused(e);
    }
    let r = reference::gemm(&p, &a, &b, with_c.then_some(&c[..])).map_err(|e| e.to_string())?;
    check_window(&window, &w, &gd, &r).map_err(|e| format!("{}: {e}", g.kernel_name()))?;
    Ok(Outcome::Checked)
}

/// An FP8 blockwise case: A's scales per row and 128 of k, B's per 128 x 128 block, powers of two.
fn blockwise_case(
    rng: &mut StdRng,
    stream: &Arc<CudaStream>,
    arenas: &mut Arenas,
    names: &[&'static str],
) -> CaseResult {
    let ctx = stream.context();
    let p = problem(rng, Kind::Blockwise);
    let g = match if !names.is_empty() && rng.random_bool(0.3) {
        BlockwiseGemm::<E4M3, E4M3, bf16>::with_kernel(
            ctx,
            &p,
            names[rng.random_range(0..names.len())],
        )
    } else {
        BlockwiseGemm::<E4M3, E4M3, bf16>::new(ctx, &p)
    } {
        Ok(g) => g,
        Err(e) => return refused(e),
    };
    let inner = g.plan_inner();
    let (ga, gb, gc, gd) = (
        inner.operand(OperandName::A),
        inner.operand(OperandName::B),
        inner.operand(OperandName::C),
        inner.operand(OperandName::D),
    );
    let (m, n, k, batch) = (p.m, p.n, p.k, p.batch);
    let (kb, nb) = (k.div_ceil(128), n.div_ceil(128));
    let (oa, la) = placement::<E4M3>(rng, ga.required_len());
    let (ob, lb) = placement::<E4M3>(rng, gb.required_len());
    let (oc, lc) = placement::<bf16>(rng, gc.required_len());
    let (od, ld) = placement::<bf16>(rng, gd.required_len());
    let (lsa, lsb) = g.scale_lens();
    let (osa, nsa) = placement::<f32>(rng, lsa);
    let (osb, nsb) = placement::<f32>(rng, lsb);
    let a: Vec<E4M3> = ternary(rng, la);
    let b: Vec<E4M3> = ternary(rng, lb);
    let sa: Vec<f32> = (0..nsa).map(|_| pow2(rng, -2, 2)).collect();
    let sb: Vec<f32> = (0..nsb).map(|_| pow2(rng, -2, 2)).collect();
    let with_c = p.beta != 0.0 || rng.random_bool(0.2);
    let c: Vec<bf16> = if with_c { ternary(rng, lc) } else { vec![] };
    upload(stream, &mut arenas.e4m3[0], oa, &a);
    upload(stream, &mut arenas.e4m3[1], ob, &b);
    upload(stream, &mut arenas.scales[0], osa, &sa);
    upload(stream, &mut arenas.scales[1], osb, &sb);
    upload(stream, &mut arenas.bf16[2], oc, &c);
    let w = Window::new(od, ld);
    fill_window(stream, &mut arenas.bf16[3], &w);
    let result = {
        let av = arenas.e4m3[0].slice(oa..oa + la);
        let bv = arenas.e4m3[1].slice(ob..ob + lb);
        let sav = arenas.scales[0].slice(osa..osa + nsa);
        let sbv = arenas.scales[1].slice(osb..osb + nsb);
        let [_, _, c_arena, d_arena] = &mut arenas.bf16;
        let ws_arena = &mut arenas.workspace;
        let cv = c_arena.slice(oc..oc + lc);
        let mut dv = d_arena.slice_mut(od..od + ld);
        let c_arg: Option<&dyn DevicePtr<bf16>> = if with_c { Some(&cv) } else { None };
        let mut view = workspace_view(rng, ws_arena, g.workspace_size());
        let wsp = as_workspace(&mut view);
        g.run(stream, &av, &sav, &bv, &sbv, c_arg, &mut dv, wsp)
    };
    let window = read_window(stream, &arenas.bf16[3], &w);
    if let Err(e) = result {
        untouched(&window)?;
        return refused(e);
    }
    if nsa < lsa || nsb < lsb {
        return Err(format!(
            "scales of {nsa} / {nsb} accepted where {lsa} / {lsb} are read"
        ));
    }
    // The reference on dequantized operands (scales in MN order, batch after batch: A's
    // [l][kb][m], B's [l][kb][nb]), element by element through the operands' geometry.
    let mut a_deq = vec![0.0f64; la];
    let mut b_deq = vec![0.0f64; lb];
    for l in 0..batch {
        for q in 0..k {
            for i in 0..m {
                let at = ga.offset(l, i, q);
                a_deq[at] = a[at].to_f64() * sa[l * kb * m + (q / 128) * m + i] as f64;
            }
            for j in 0..n {
                let at = gb.offset(l, q, j);
                b_deq[at] = b[at].to_f64() * sb[l * kb * nb + (q / 128) * nb + j / 128] as f64;
            }
        }
    }
    let r =
        reference::gemm(&p, &a_deq, &b_deq, with_c.then_some(&c[..])).map_err(|e| e.to_string())?;
    check_window(&window, &w, &gd, &r).map_err(|e| format!("{}: {e}", g.kernel_name()))?;
    Ok(Outcome::Checked)
}

/// A bf16 case with a fused bias (per column or per row) and ReLU or none; the bias sometimes one
/// element short.
fn fused_case(rng: &mut StdRng, stream: &Arc<CudaStream>, arenas: &mut Arenas) -> CaseResult {
    let ctx = stream.context();
    let p = problem(rng, Kind::FusedBias);
    let axis = if rng.random_bool(0.7) {
        BiasAxis::PerColumn
    } else {
        BiasAxis::PerRow
    };
    let activation = if rng.random_bool(0.5) {
        Activation::Relu
    } else {
        Activation::Identity
    };
    let e = Epilogue::bias().with_bias(axis).with_activation(activation);
    let g = match Gemm::<bf16, bf16, bf16>::new(ctx, &p).and_then(|g| g.with_epilogue(e)) {
        Ok(g) => g.with_programmatic_dependent_launch(rng.random_bool(0.5)),
        Err(e) => return refused(e),
    };
    let (ga, gb, gc, gd) = (
        g.operand(OperandName::A),
        g.operand(OperandName::B),
        g.operand(OperandName::C),
        g.operand(OperandName::D),
    );
    let (oa, la) = placement::<bf16>(rng, ga.required_len());
    let (ob, lb) = placement::<bf16>(rng, gb.required_len());
    let (oc, lc) = placement::<bf16>(rng, gc.required_len());
    let (od, ld) = placement::<bf16>(rng, gd.required_len());
    let bias_required = match axis {
        BiasAxis::PerColumn => p.n,
        BiasAxis::PerRow => p.m,
    };
    // The bias lies in the C arena, past C's slice.
    let (obias, lbias) = placement::<bf16>(rng, bias_required);
    let obias = obias + oc + lc;
    let a: Vec<bf16> = ternary(rng, la);
    let b: Vec<bf16> = ternary(rng, lb);
    let bias: Vec<bf16> = ternary(rng, lbias);
    let with_c = p.beta != 0.0 || rng.random_bool(0.2);
    let c: Vec<bf16> = if with_c { ternary(rng, lc) } else { vec![] };
    upload(stream, &mut arenas.bf16[0], oa, &a);
    upload(stream, &mut arenas.bf16[1], ob, &b);
    upload(stream, &mut arenas.bf16[2], oc, &c);
    upload(stream, &mut arenas.bf16[2], obias, &bias);
    let w = Window::new(od, ld);
    fill_window(stream, &mut arenas.bf16[3], &w);
    let result = {
        let [a_arena, b_arena, c_arena, d_arena] = &mut arenas.bf16;
        let av = a_arena.slice(oa..oa + la);
        let bv = b_arena.slice(ob..ob + lb);
        let cv = c_arena.slice(oc..oc + lc);
        let biasv = c_arena.slice(obias..obias + lbias);
        let mut dv = d_arena.slice_mut(od..od + ld);
        let c_arg: Option<&dyn DevicePtr<bf16>> = if with_c { Some(&cv) } else { None };
        let mut view = workspace_view(rng, &mut arenas.workspace, g.workspace_size());
        let wsp = as_workspace(&mut view);
        g.run_fused(
            stream,
            &av,
            &bv,
            c_arg,
            &mut dv,
            &EpilogueOperands::bias(&biasv),
            wsp,
        )
    };
    let window = read_window(stream, &arenas.bf16[3], &w);
    if let Err(e) = result {
        untouched(&window)?;
        return refused(e);
    }
    if lbias < bias_required {
        return Err(format!(
            "a bias of {lbias} accepted where {bias_required} are read"
        ));
    }
    let bias64: Vec<f64> = bias.iter().map(|x| x.to_f64()).collect();
    let host = HostEpilogue {
        activation,
        bias: Some((axis, &bias64[..bias_required])),
        row_scales: None,
        col_scales: None,
    };
    let sa = Strided::new(&a, ga, OperandName::A).map_err(|e| e.to_string())?;
    let sb = Strided::new(&b, gb, OperandName::B).map_err(|e| e.to_string())?;
    let c_host;
    let sc = if with_c {
        c_host = c;
        Some(Strided::new(&c_host, gc, OperandName::C).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let r = reference::fused(
        &p,
        &sa,
        &sb,
        sc.as_ref().map(|s| s as &dyn reference::HostMatrix),
        &host,
    )
    .map_err(|e| e.to_string())?;
    check_window(&window, &w, &gd, &r).map_err(|e| format!("{}: {e}", g.kernel_name()))?;
    Ok(Outcome::Checked)
}

/// A grouped launch of a list of one to four bf16 problems of any extents (m from 0, k and n at and
/// off the kernels' 8-element rule), alpha a power of two, A and B at their own places in the
/// arenas and each D in a window of sentinels of its own (aligned or not, exact or one short).
fn grouped_list_case(
    rng: &mut StdRng,
    stream: &Arc<CudaStream>,
    arenas: &mut Arenas,
) -> CaseResult {
    let groups = rng.random_range(1..=4);
    let shapes: Vec<(usize, usize, usize)> = (0..groups)
        .map(|_| {
            (
                edge_extent(rng, 96, &[0, 1, 7, 64, 65]),
                edge_extent(rng, 160, &[8, 16, 100, 128, 136]),
                edge_extent(rng, 300, &[8, 16, 100, 256, 264]),
            )
        })
        .collect();
    let alpha = pow2(rng, -2, 2) * if rng.random_bool(0.2) { -1.0 } else { 1.0 };
    let capacity = groups + rng.random_range(0..=2);
    let plan = match GroupedListGemm::<bf16, bf16>::new(
        stream.context(),
        capacity,
        rng.random_range(1..=256),
    )
    .and_then(|g| g.with_alpha(alpha))
    {
        Ok(g) => g,
        Err(e) => return refused(e),
    };
    // A and B after the previous ones in their arenas; each D in a buffer of its own (its window
    // and the offset before it): (offset, length).
    let mut cursor = [0usize; 2];
    let mut place = |rng: &mut StdRng, which: usize, required: usize| {
        let (off, len) = placement::<bf16>(rng, required);
        let off = cursor[which] + off;
        cursor[which] = off + len + MARGIN;
        (off, len)
    };
    let mut host = Vec::with_capacity(groups);
    let mut windows = Vec::with_capacity(groups);
    let mut d_buffers: Vec<CudaSlice<bf16>> = Vec::with_capacity(groups);
    for &(m, n, k) in &shapes {
        let (oa, la) = place(rng, 0, m * k);
        let (ob, lb) = place(rng, 1, n * k);
        let (od, ld) = placement::<bf16>(rng, m * n);
        let a: Vec<bf16> = ternary(rng, la);
        let b: Vec<bf16> = ternary(rng, lb);
        upload(stream, &mut arenas.bf16[0], oa, &a);
        upload(stream, &mut arenas.bf16[1], ob, &b);
        let w = Window::new(od, ld);
        d_buffers.push(
            stream
                .clone_htod(&vec![bf16::SENTINEL; od + ld + MARGIN])
                .unwrap(),
        );
        host.push(((oa, a), (ob, b)));
        windows.push(w);
    }
    let result = {
        let [a_arena, b_arena, _, _] = &arenas.bf16;
        let views: Vec<_> = host
            .iter()
            .map(|((oa, a), (ob, b))| {
                (
                    a_arena.slice(*oa..*oa + a.len()),
                    b_arena.slice(*ob..*ob + b.len()),
                )
            })
            .collect();
        let problems: Vec<GroupedListProblem<'_, bf16>> = shapes
            .iter()
            .zip(&views)
            .map(|(&(m, n, k), (a, b))| GroupedListProblem { m, n, k, a, b })
            .collect();
        let mut outs: Vec<_> = d_buffers
            .iter_mut()
            .zip(&windows)
            .map(|(buf, w)| buf.slice_mut(w.off..w.off + w.len))
            .collect();
        let mut refs: Vec<&mut dyn cudarc::driver::DevicePtrMut<bf16>> = outs
            .iter_mut()
            .map(|d| d as &mut dyn cudarc::driver::DevicePtrMut<bf16>)
            .collect();
        let mut view = workspace_view(rng, &mut arenas.workspace, plan.workspace_size());
        let wsp = as_workspace(&mut view);
        plan.run(stream, &problems, &mut refs, wsp)
    };
    let read: Vec<Vec<bf16>> = windows
        .iter()
        .zip(&d_buffers)
        .map(|(w, buf)| read_window(stream, buf, w))
        .collect();
    if let Err(e) = result {
        for window in &read {
            untouched(window)?;
        }
        return refused(e);
    }
    for (i, ((&(m, n, k), ((_, a), (_, b))), (w, window))) in shapes
        .iter()
        .zip(&host)
        .zip(windows.iter().zip(&read))
        .enumerate()
    {
        if a.len() < m * k || b.len() < n * k || w.len < m * n {
            return Err(format!("problem {i}: a short operand was accepted"));
        }
        if m == 0 {
            untouched(window).map_err(|e| format!("problem {i} (m = 0): {e}"))?;
            continue;
        }
        let p = GemmProblem::new(m, n, k).with_scalars(alpha, 0.0);
        let r = reference::gemm(&p, &a[..m * k], &b[..n * k], None::<&[bf16]>)
            .map_err(|e| e.to_string())?;
        let gd = p.resolve(OperandName::D).map_err(|e| e.to_string())?;
        check_window(window, w, &gd, &r)
            .map_err(|e| format!("{} problem {i} ({m}x{n}x{k}): {e}", plan.kernel_name()))?;
    }
    Ok(Outcome::Checked)
}

/// The SM90 plain kernels of the build for input type `a` and output `d` (blockwise or not).
fn names(
    a: cutlass_gemm::DataType,
    d: cutlass_gemm::DataType,
    blockwise: bool,
) -> Vec<&'static str> {
    built_kernels()
        .iter()
        .filter(|k| k.spec.arch == Arch::Sm90a && k.spec.a.ty == a && k.spec.b.ty == a)
        .filter(|k| k.spec.d.ty == d && k.spec.blockwise.is_some() == blockwise)
        .map(|k| k.name)
        .collect()
}

fn case_rng(seed: u64, case: u64) -> StdRng {
    StdRng::seed_from_u64(seed ^ case.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17))
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

#[derive(Default)]
struct Tally {
    checked: u64,
    refused: BTreeMap<&'static str, u64>,
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fuzzed_launches_match_the_reference_or_are_refused() {
    let (ctx, _) = gemm_device();
    let seed: u64 = rng().random();
    let cases = env("CUTLASS_RS_GPU_FUZZ_CASES", 20_000);
    let first = env("CUTLASS_RS_GPU_FUZZ_FIRST", 0);
    let threads = env("CUTLASS_RS_GPU_FUZZ_THREADS", 8).max(1);
    println!("GPU fuzz: {cases} cases from case {first}, {threads} threads, case seed {seed}");
    use cutlass_gemm::DataType as D;
    let kernels = Arc::new([
        names(D::Bf16, D::Bf16, false),
        names(D::F16, D::F16, false),
        names(D::Bf16, D::F32, false),
        names(D::E4M3, D::Bf16, false),
        names(D::E4M3, D::Bf16, true),
    ]);
    let stop = AtomicBool::new(false);
    let tallies: Mutex<BTreeMap<Kind, Tally>> = Mutex::new(BTreeMap::new());
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let started = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads {
            let (ctx, kernels, stop, tallies, failures, started) =
                (&ctx, &kernels, &stop, &tallies, &failures, &started);
            scope.spawn(move || {
                let stream = ctx.new_stream().unwrap();
                let mut arenas = Arenas::new(&stream);
                let mut local: BTreeMap<Kind, Tally> = BTreeMap::new();
                let mut case = first + t;
                while case < first + cases && !stop.load(Ordering::Relaxed) {
                    let mut rng = case_rng(seed, case);
                    let kind = Kind::draw(&mut rng);
                    let run = catch_unwind(AssertUnwindSafe(|| match kind {
                        Kind::Bf16 => {
                            let [a, b, c, d] = &mut arenas.bf16;
                            let ops = Operands { a, b, c, d };
                            plain_case::<bf16, bf16>(&mut rng, &stream, ops, &mut arenas.workspace, kind, &kernels[0])
                        }
                        Kind::F16 => {
                            let [a, b, c, d] = &mut arenas.f16;
                            let ops = Operands { a, b, c, d };
                            plain_case::<f16, f16>(&mut rng, &stream, ops, &mut arenas.workspace, kind, &kernels[1])
                        }
                        Kind::Bf16ToF32 => {
                            let [a, b, _, _] = &mut arenas.bf16;
                            let [c, d] = &mut arenas.f32;
                            let ops = Operands { a, b, c, d };
                            plain_case::<bf16, f32>(&mut rng, &stream, ops, &mut arenas.workspace, kind, &kernels[2])
                        }
                        Kind::E4m3 => {
                            let [a, b] = &mut arenas.e4m3;
                            let [_, _, c, d] = &mut arenas.bf16;
                            let ops = Operands { a, b, c, d };
                            plain_case::<E4M3, bf16>(&mut rng, &stream, ops, &mut arenas.workspace, kind, &kernels[3])
                        }
                        Kind::Blockwise => blockwise_case(&mut rng, &stream, &mut arenas, &kernels[4]),
                        Kind::FusedBias => fused_case(&mut rng, &stream, &mut arenas),
                        Kind::GroupedList => grouped_list_case(&mut rng, &stream, &mut arenas),
                    }));
                    let outcome = match run {
                        Ok(r) => r,
                        Err(panic) => Err(format!(
                            "panicked: {}",
                            panic
                                .downcast_ref::<String>()
                                .cloned()
                                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                                .unwrap_or_default()
                        )),
                    };
                    let tally = local.entry(kind).or_default();
                    match outcome {
                        Ok(Outcome::Checked) => tally.checked += 1,
                        Ok(Outcome::Refused(v)) => *tally.refused.entry(v).or_default() += 1,
                        Err(why) => {
                            failures.lock().unwrap().push(format!(
                                "case {case} ({kind:?}; CUTLASS_RS_TEST_SEED replays the seed, CUTLASS_RS_GPU_FUZZ_FIRST={case} CUTLASS_RS_GPU_FUZZ_CASES=1 the case): {why}"
                            ));
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                    case += threads;
                    if t == 0 && (case - first) % (threads * 50_000) < threads {
                        println!(
                            "  ... {} cases, {:.1} s",
                            case - first,
                            started.elapsed().as_secs_f64()
                        );
                    }
                }
                let mut all = tallies.lock().unwrap();
                for (kind, t) in local {
                    let e = all.entry(kind).or_default();
                    e.checked += t.checked;
                    for (v, c) in t.refused {
                        *e.refused.entry(v).or_default() += c;
                    }
                }
            });
        }
    });
    let elapsed = started.elapsed().as_secs_f64();
    let tallies = tallies.into_inner().unwrap();
    let mut total = (0u64, 0u64);
    for (kind, t) in &tallies {
        let refused: u64 = t.refused.values().sum();
        total.0 += t.checked;
        total.1 += refused;
        println!(
            "  {kind:?}: {} launched and exact, {refused} refused {:?}",
            t.checked, t.refused
        );
    }
    let failures = failures.into_inner().unwrap();
    println!(
        "{} cases in {elapsed:.1} s: {} launched, every D exact and no stray write; {} typed errors, nothing launched; {} failures",
        total.0 + total.1,
        total.0,
        total.1,
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(total.0 + total.1, cases, "every case ran");
    // Both outcomes, for every kind, when the run is large enough to expect them.
    if cases >= 10_000 {
        for (kind, t) in &tallies {
            assert!(
                t.checked > 0 && !t.refused.is_empty(),
                "{kind:?}: one outcome only"
            );
        }
    }
}
