//! Property-based fuzzing of the plans added beside `Gemm` and of their host-side checks, on any
//! machine (no GPU): `tests/fuzz.rs`'s property extended to
//!
//! 1. FP8 blockwise plans (`BlockwiseGemm::plan`): random problems (odd and huge extents, batches,
//!    wrong layouts, leading dimensions and batch strides), element types, devices and named
//!    kernels. A refusal is the problem's own (`GemmProblem::check`) or names the operand whose
//!    layout blockwise kernels do not read; a plan's operands reach what 128-bit arithmetic says
//!    and its length check accepts exactly that; its scale counts are `m · ⌈k/128⌉ · batch` and
//!    `⌈n/128⌉ · ⌈k/128⌉ · batch`. Then, on the plans made, random scale and operand lengths
//!    (exact, short, long, zero, anything): the checks refuse exactly the short ones, naming the
//!    first (`ScalesA` before `ScalesB`; A, B, C, D) with its length and the count; a longer
//!    buffer is accepted (as for A-D: the kernels read the count from its start).
//! 2. Fused epilogues (`Gemm::with_epilogue`, `BlockwiseGemm::with_epilogue`): random epilogues
//!    (bias per row or column, every activation, row and column scales) on random plans, named
//!    kernels too, then tile-scheduler hints (`Gemm::with_schedule`), another epilogue and none.
//!    A plan keeps the epilogue asked for on a fused kernel, keeps a named kernel, its operands'
//!    geometry and lengths (and a blockwise plan its scale counts), and goes back to no epilogue
//!    on the same kernel; hints out of range or split-K off stream-K are refused with their rule.
//!    The vectors' length check takes device buffers (`Gemm::run_fused`): not reachable without
//!    a GPU, it is not fuzzed here.
//! 3. Grouped GEMMs (`GroupedGemm::plan`, `GroupedBlockwiseGemm::plan` with its scale counts,
//!    contiguous and masked `GroupedProblem`s,
//!    `GroupedListGemm::plan`): random group counts (0, 1, many, past `i32::MAX`), rows or
//!    capacities, n, k, expected rows, scalars, types and named kernels. `GroupedProblem::check`
//!    refuses exactly what the rules say, with that rule, and a plan the same; a plan's element
//!    counts are the 128-bit ones. Then, on the plans made, random host lists of rows per group
//!    (valid, entries off, wrong length): `check_group_rows` refuses exactly the bad ones, naming
//!    the entry and the rule. (`GroupedListGemm::run`'s checks of each problem take device
//!    buffers.)
//! 4. Weight-only GEMMs (`WeightOnlyGemm::plan`, `WeightOnlyProblem`, `with_splits`) and the host
//!    checks of `QuantizedWeight`'s constructors (`check_weight_extents`, `check_group_index`;
//!    the constructors themselves take device buffers): random rows, columns and group sizes (0,
//!    1, odd, off 16, 64 or 128, huge), formats, types, split-K factors and GPTQ `g_idx` lists;
//!    every refusal names its rule (`ProblemRule::Weight { rule: WeightRule::... }`, ...).
//!
//! Devices are described ones: an H100 mostly, B200, RTX 5090, a future 13.0, and H100s
//! described with odd SM counts (0, negative, huge). Every case ends in a plan (or an accepted
//! list) or a typed input error with a message, never a panic or a CUDA, CUTLASS or I/O error
//! (nothing here reaches a kernel). Where the build has the kernels for a request the plans
//! come: a packed TN problem up to 65536 on an H100 gets a blockwise plan and any epilogue, a
//! grouped problem within the rules is refused only for an extent off the kernel's alignment, a
//! weight-only one never; each property must make plans (more than 1% of its cases) and refuse
//! some, so it cannot pass vacuously. A build without kernels (`CUTLASS_RS_KERNELS=none`) only
//! refuses, and the properties over plans made have none to check.
//!
//! 108 500 cases per run (`CUTLASS_RS_FUZZ_CASES` sets the total, shared among the properties in
//! the same proportions); a plan property runs a tenth of its share where the build has no kernel
//! of its kind (each plan is then refused the same way, after a search of the catalog), so a
//! default build (no weight-only kernels) runs 101 300. Each test prints its seed and its counts;
//! `CUTLASS_RS_TEST_SEED` replays them.

use std::cell::{Cell, RefCell};
use std::sync::OnceLock;

use cutlass_gemm::numeric::{E4M3, E5M2};
use cutlass_gemm::plans::weight_only::{check_group_index, check_weight_extents};
use cutlass_gemm::{
    Activation, BiasAxis, BlockwiseGemm, DeviceInfo, Element, Epilogue, Error, Extent, Fp8, Gemm,
    GemmProblem, GroupRowsRule, GroupedBlockwiseGemm, GroupedGemm, GroupedLayout, GroupedListGemm,
    GroupedProblem, KernelRule, Layout, LayoutRule, MatrixLayout, OperandName, ProblemRule,
    Quantity, Scalar, ScheduleHints, TileScheduler, WeightFormat, WeightOnlyGemm, WeightOnlyInput,
    WeightOnlyProblem, WeightRule,
};
use half::{bf16, f16};
use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

mod fuzz_support;
use fuzz_support::*;

const H100: DeviceInfo = DEVICES[0];

/// `i32::MAX`: the largest extent CUTLASS's `int` problem shapes hold.
const MAX_EXTENT: usize = i32::MAX as usize;

/// Default cases of each property; `CUTLASS_RS_FUZZ_CASES` scales them to its total.
const BLOCKWISE_PLANS: u32 = 1_500;
const BLOCKWISE_LENGTHS: u32 = 30_000;
const EPILOGUES: u32 = 1_000;
const GROUPED_PLANS: u32 = 8_000;
const GROUPED_ROWS: u32 = 25_000;
const WEIGHT_ONLY_PLANS: u32 = 8_000;
const WEIGHT_HOST_CHECKS: u32 = 35_000;
const DEFAULT_TOTAL: u32 = BLOCKWISE_PLANS
    + BLOCKWISE_LENGTHS
    + EPILOGUES
    + GROUPED_PLANS
    + GROUPED_ROWS
    + WEIGHT_ONLY_PLANS
    + WEIGHT_HOST_CHECKS;

/// Plans kept for the properties over plans made (each property's first ones).
const POOL: usize = 2_000;

// ---------------------------------------------------------------------------------------------
// Running: seed, case counts, counts of outcomes.

/// This property's share of `CUTLASS_RS_FUZZ_CASES` (default: its default count), a tenth of it
/// when `planned` is false (a build without the kernels of its kind).
fn cases(default: u32, planned: bool) -> u32 {
    let total: u64 = std::env::var("CUTLASS_RS_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_TOTAL as u64);
    let share = (total * default as u64)
        .div_ceil(DEFAULT_TOTAL as u64)
        .max(1);
    let share = if planned { share } else { share.div_ceil(10) };
    share.min(u32::MAX as u64) as u32
}

/// A runner for property `index` of the test seeded `seed` (each property its own stream).
fn runner(seed: u64, index: u8, cases: u32) -> TestRunner {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8] = index;
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}

/// Counts of a property's outcomes: plans (or accepted inputs) and typed errors.
#[derive(Default)]
struct Counts {
    ok: Cell<u64>,
    err: Cell<u64>,
}

impl Counts {
    fn add(&self, ok: bool) {
        let c = if ok { &self.ok } else { &self.err };
        c.set(c.get() + 1);
    }

    /// Prints them and checks that the property reached both outcomes (plans only where
    /// `planned`, the build having the kernels; then more than 1% of the cases).
    fn report(&self, what: &str, cases: u32, planned: bool) {
        let (ok, err) = (self.ok.get(), self.err.get());
        println!("{what}: {cases} cases: {ok} plans or accepted, {err} typed errors");
        assert!(err > 0, "{what}: {ok} plans, no error");
        if planned {
            assert!(ok > cases as u64 / 100, "{what}: {ok} plans, {err} errors");
        }
    }
}

/// The property: a typed input error with a message, not one from past the input checks.
fn typed(e: &Error) -> Result<(), TestCaseError> {
    prop_assert!(
        !matches!(
            e,
            Error::Cutlass { .. }
                | Error::Cuda(_)
                | Error::Io { .. }
                | Error::DeviceMismatch { .. }
        ),
        "planning reached past the input checks: {e:?}"
    );
    prop_assert!(!e.to_string().is_empty());
    Ok(())
}

/// The rule of an [`Error::InvalidProblem`].
fn rule_of(e: &Error) -> Option<&ProblemRule> {
    match e {
        Error::InvalidProblem { reason } => Some(reason),
        _ => None,
    }
}

/// A problem's own refusal and the plan's are the same error.
fn same_error(check: &Error, plan: &Error) -> Result<(), TestCaseError> {
    prop_assert_eq!(format!("{check:?}"), format!("{plan:?}"));
    Ok(())
}

/// A small deterministic generator for lists derived from one drawn seed (drawing each entry
/// through proptest would cost more than the checks under test).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..=max`.
    fn upto(&mut self, max: u64) -> u64 {
        match max.checked_add(1) {
            Some(n) => self.next() % n,
            None => self.next(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Strategies shared by the GEMM-shaped plans: tests/fuzz.rs's, with fewer huge extents (those are
// its subject; here they would mostly end in the problem's own check).

fn extent() -> impl Strategy<Value = usize> {
    extent_weighted(10)
}

/// Mostly `usual` (packed, in its layout), sometimes anything.
fn layout_or(usual: MatrixLayout) -> impl Strategy<Value = MatrixLayout> {
    prop_oneof![10 => Just(usual), 1 => matrix_layout()]
}

fn batch() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => Just(1usize),
        2 => 2..5usize,
        1 => select(&[0usize, 65535, 70001, (1 << 31) - 1, 1 << 31][..]),
    ]
}

/// A GEMM problem whose layouts are mostly TN with a row-major D (what blockwise kernels and
/// fused epilogues read), sometimes anything.
fn problem() -> impl Strategy<Value = GemmProblem> {
    (
        (extent(), extent(), extent()),
        batch(),
        (
            layout_or(MatrixLayout::row_major()),
            layout_or(MatrixLayout::col_major()),
            layout_or(MatrixLayout::row_major()),
            prop_oneof![
                6 => Just(MatrixLayout::row_major()),
                1 => Just(MatrixLayout::col_major()),
                1 => matrix_layout(),
            ],
        ),
        (scalar(), scalar()),
        prop::bool::weighted(0.9),
    )
        .prop_map(|(extents, batch, layouts, scalars, c_like_d)| {
            assemble(extents, batch, layouts, scalars, c_like_d)
        })
}

/// Mostly an H100, sometimes another architecture (`DEVICES`), or an H100 described with an odd
/// SM count (the kernel choice and the kernels count fewer than 1 as 1).
fn device_weighted(h100: u32) -> impl Strategy<Value = DeviceInfo> {
    prop_oneof![
        h100 => Just(H100),
        1 => select(&DEVICES[1..]),
        1 => select(&[0, -1, 1, 2, i32::MIN, i32::MAX][..]).prop_map(|sms| described((9, 0), sms)),
    ]
}

fn device() -> impl Strategy<Value = DeviceInfo> {
    device_weighted(6)
}

fn epilogue() -> impl Strategy<Value = Epilogue> {
    (
        select(&[None, Some(BiasAxis::PerColumn), Some(BiasAxis::PerRow)][..]),
        select(&Activation::ALL[..]),
        any::<bool>(),
        any::<bool>(),
        prop_oneof![3 => Just(false), 1 => Just(true)],
    )
        .prop_map(|(bias, activation, rows, cols, f32_bias)| {
            // Through the constructors a caller uses.
            let mut e = match (rows, cols, bias) {
                (true, true, _) => Epilogue::rowwise(),
                (false, false, Some(BiasAxis::PerColumn)) => Epilogue::bias(),
                _ => Epilogue {
                    row_scales: rows,
                    col_scales: cols,
                    ..Epilogue::NONE
                },
            };
            if let Some(axis) = bias {
                e = e.with_bias(axis);
                if f32_bias {
                    e = e.with_f32_bias();
                }
            }
            e.with_activation(activation)
        })
}

/// Names a plan may be given: every built kernel (of any registry), a catalog entry of another
/// architecture, and one the catalog does not have.
fn kernel_names() -> &'static [&'static str] {
    static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names: Vec<&'static str> = cutlass_gemm::built_kernels()
            .iter()
            .map(|k| k.name)
            .chain(cutlass_gemm::built_grouped_kernels().iter().map(|k| k.name))
            .chain(
                cutlass_gemm::built_weight_only_kernels()
                    .iter()
                    .map(|k| k.name),
            )
            .collect();
        let blackwell = cutlass_gemm_catalog::catalog::all()
            .into_iter()
            .find(|s| s.arch != cutlass_gemm::Arch::Sm90a)
            .expect("the catalog has Blackwell entries");
        names.push(Box::leak(blackwell.name().into_boxed_str()));
        names.push("cutlass3x_sm90_not_a_kernel");
        names
    })
}

/// Mostly no name (the library's choice), sometimes any of [`kernel_names`].
fn kernel_name() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![14 => Just(None), 1 => any::<Index>().prop_map(|i| {
        let names = kernel_names();
        Some(names[i.index(names.len())])
    })]
}

const OPERANDS: [OperandName; 4] = [
    OperandName::A,
    OperandName::B,
    OperandName::C,
    OperandName::D,
];

/// `tests/fuzz.rs`'s property of a plan's operands: each reaches what 128-bit arithmetic says,
/// the length check accepts exactly those lengths and names a buffer one element short.
fn check_operand_lengths<TA: Element, TB: Element, TD: Element>(
    g: &Gemm<TA, TB, TD>,
    short: usize,
) -> Result<(), TestCaseError> {
    let mut lens = [0usize; 4];
    for (i, op) in OPERANDS.into_iter().enumerate() {
        let geometry = g.operand(op);
        let want = reach(&geometry);
        prop_assert!(want <= usize::MAX as u128, "{op} reaches {want}");
        prop_assert_eq!(geometry.required_len() as u128, want, "{}", op);
        lens[i] = want as usize;
    }
    prop_assert!(g
        .check_lengths(lens[0], lens[1], Some(lens[2]), lens[3])
        .is_ok());
    let i = short % 4;
    if lens[i] == 0 {
        return Ok(());
    }
    let mut l = lens;
    l[i] -= 1;
    match g.check_lengths(l[0], l[1], Some(l[2]), l[3]) {
        Err(Error::BufferTooSmall {
            operand,
            len,
            required,
        }) => {
            prop_assert_eq!(operand, OPERANDS[i]);
            prop_assert_eq!((len, required), (l[i], lens[i]));
        }
        other => prop_assert!(false, "{:?} one short: {:?}", OPERANDS[i], other),
    }
    Ok(())
}

/// Whether a problem is one every build with the kernels serves: packed, one to four batches,
/// TN with a row-major D, extents up to 65536 and finite scalars (staging covers any extent).
fn plain_tn(p: &GemmProblem) -> bool {
    let packed = |m: &MatrixLayout| m.ld.is_none() && m.batch_stride.is_none();
    [p.a, p.b, p.c, p.d].iter().all(packed)
        && (p.a.layout, p.b.layout, p.c.layout, p.d.layout)
            == (
                Layout::RowMajor,
                Layout::ColumnMajor,
                Layout::RowMajor,
                Layout::RowMajor,
            )
        && (1..=4).contains(&p.batch)
        && [p.m, p.n, p.k].iter().all(|&x| (1..=65536).contains(&x))
        && p.alpha.is_finite()
        && p.beta.is_finite()
}

/// The fused kernels' epilogue for `e` with a D of type TD: a bias of its type (D's or f32).
fn fused_for<TD: Element>(e: &Epilogue) -> cutlass_gemm_catalog::Fusion {
    cutlass_gemm_catalog::Fusion::ScaleBiasActivation {
        bias: e.bias_type(TD::DATA_TYPE).unwrap_or(TD::DATA_TYPE),
    }
}

/// Whether this build has an SM90 kernel for these types (A, B, D) with the property `what`.
fn built<TA: Element, TB: Element, TD: Element>(
    what: impl Fn(&cutlass_gemm::KernelSpec) -> bool,
) -> bool {
    cutlass_gemm::built_kernels().iter().any(|k| {
        (k.spec.a.ty, k.spec.b.ty, k.spec.d.ty) == (TA::DATA_TYPE, TB::DATA_TYPE, TD::DATA_TYPE)
            && k.spec.arch.runs_on(H100.compute_capability)
            && what(&k.spec)
    })
}

// ---------------------------------------------------------------------------------------------
// 1. FP8 blockwise plans and their scale and operand lengths.

/// A blockwise plan's length checks, whatever its types.
trait BlockwiseLengths {
    fn scale_lens(&self) -> (usize, usize);
    fn check_scales(&self, a: usize, b: usize) -> cutlass_gemm::Result<()>;
    fn operand_lens(&self) -> [usize; 4];
    fn check_operands(&self, lens: [usize; 4], with_c: bool) -> cutlass_gemm::Result<()>;
}

impl<TA: Fp8, TB: Fp8, TD: Element> BlockwiseLengths for BlockwiseGemm<TA, TB, TD> {
    fn scale_lens(&self) -> (usize, usize) {
        BlockwiseGemm::scale_lens(self)
    }

    fn check_scales(&self, a: usize, b: usize) -> cutlass_gemm::Result<()> {
        self.check_scale_lengths(a, b)
    }

    fn operand_lens(&self) -> [usize; 4] {
        OPERANDS.map(|op| self.plan_inner().operand(op).required_len())
    }

    fn check_operands(&self, [a, b, c, d]: [usize; 4], with_c: bool) -> cutlass_gemm::Result<()> {
        self.plan_inner()
            .check_lengths(a, b, with_c.then_some(c), d)
    }
}

/// The scale counts of a blockwise plan, in 128-bit arithmetic: A's `m/bm · ⌈k/bk⌉ · batch`,
/// B's `⌈n/bn⌉ · ⌈k/bk⌉ · batch`.
fn scale_counts(p: &GemmProblem, bw: cutlass_gemm_catalog::Blockwise) -> (u128, u128) {
    let up = |x: usize, b: u32| (x as u128).div_ceil(b as u128);
    let kb = up(p.k, bw.k);
    let batch = p.batch as u128;
    (up(p.m, bw.m) * kb * batch, up(p.n, bw.n) * kb * batch)
}

/// The plans made, for the length property.
type BlockwisePool = RefCell<Vec<Box<dyn BlockwiseLengths>>>;

/// [`check_blockwise`] for some types.
type BlockwiseCheck = fn(
    DeviceInfo,
    &GemmProblem,
    Option<&str>,
    Option<Epilogue>,
    usize,
    &BlockwisePool,
) -> Result<bool, TestCaseError>;

/// A blockwise plan, or a typed error (the problem's own, then the layouts', the same as
/// `GemmProblem::check` and the layout rules say); a plan's operand and scale lengths, and an
/// epilogue on it. Plans go to `pool`.
fn check_blockwise<TA: Fp8, TB: Fp8, TD: Element>(
    device: DeviceInfo,
    p: &GemmProblem,
    name: Option<&str>,
    epilogue: Option<Epilogue>,
    short: usize,
    pool: &BlockwisePool,
) -> Result<bool, TestCaseError> {
    let g = match BlockwiseGemm::<TA, TB, TD>::plan(device, p, name) {
        Ok(g) => g,
        Err(e) => {
            typed(&e)?;
            // The problem's own rules first, then the layouts blockwise kernels read.
            if let Err(own) = p.check() {
                same_error(&own, &e)?;
            } else if let Some((operand, rule)) = [
                (
                    OperandName::D,
                    p.d.layout != Layout::RowMajor,
                    LayoutRule::BlockwiseRowMajorD,
                ),
                (
                    OperandName::A,
                    p.a.layout != Layout::RowMajor,
                    LayoutRule::BlockwiseRowMajorA,
                ),
                (
                    OperandName::B,
                    p.b.layout != Layout::ColumnMajor,
                    LayoutRule::BlockwiseColumnMajorB,
                ),
            ]
            .into_iter()
            .find_map(|(op, wrong, rule)| wrong.then_some((op, rule)))
            {
                match &e {
                    Error::UnsupportedLayout {
                        operand: o,
                        rule: r,
                    } => prop_assert_eq!((*o, r), (operand, &rule)),
                    other => prop_assert!(false, "{operand} {rule:?}: {other:?}"),
                }
            } else if name.is_none()
                && device == H100
                && plain_tn(p)
                && built::<TA, TB, TD>(|s| s.blockwise.is_some())
            {
                // A blockwise kernel for the types serves any extents (staging the rest).
                prop_assert!(false, "{:?}: {}", p, e);
            }
            return Ok(false);
        }
    };
    let inner = g.plan_inner();
    prop_assert_eq!(inner.problem(), p);
    let bw = inner.kernel_spec().blockwise;
    prop_assert!(bw.is_some(), "{} is not blockwise", g.kernel_name());
    if let Some(name) = name {
        prop_assert_eq!(g.kernel_name(), name);
    }
    check_operand_lengths(inner, short)?;
    // Scale counts, and their check: exact and longer accepted, one short or none refused with
    // the scales named (A's first).
    let (wa, wb) = scale_counts(p, bw.unwrap());
    let (ra, rb) = g.scale_lens();
    prop_assert_eq!((ra as u128, rb as u128), (wa, wb), "{:?}", p);
    prop_assert!(ra > 0 && rb > 0);
    prop_assert!(g.check_scale_lengths(ra, rb).is_ok());
    prop_assert!(g
        .check_scale_lengths(ra.saturating_add(1), rb.saturating_add(1))
        .is_ok());
    for (a, b, named, len, required) in [
        (ra - 1, rb, OperandName::ScalesA, ra - 1, ra),
        (ra, rb - 1, OperandName::ScalesB, rb - 1, rb),
        (0, 0, OperandName::ScalesA, 0, ra),
        (ra, 0, OperandName::ScalesB, 0, rb),
        (ra - 1, rb - 1, OperandName::ScalesA, ra - 1, ra),
    ] {
        match g.check_scale_lengths(a, b) {
            Err(Error::BufferTooSmall {
                operand,
                len: l,
                required: r,
            }) => prop_assert_eq!((operand, l, r), (named, len, required)),
            other => prop_assert!(false, "scales {a}, {b} of {ra}, {rb}: {other:?}"),
        }
    }
    // A fused epilogue on the blockwise plan: the same kernel family, scales and operands.
    let Some(e) = epilogue else {
        if pool.borrow().len() < POOL {
            pool.borrow_mut().push(Box::new(g));
        }
        return Ok(true);
    };
    let operands = OPERANDS.map(|op| inner.operand(op));
    let kernel = g.kernel_name();
    match g.with_epilogue(e) {
        Ok(f) => {
            let inner = f.plan_inner();
            prop_assert_eq!(inner.epilogue(), e);
            prop_assert!(e.is_none() || inner.kernel_spec().fusion.is_fused());
            prop_assert!(inner.kernel_spec().blockwise.is_some());
            prop_assert_eq!(f.scale_lens(), (ra, rb));
            prop_assert_eq!(OPERANDS.map(|op| inner.operand(op)), operands);
            if name.is_some() {
                prop_assert_eq!(f.kernel_name(), kernel);
            }
            if pool.borrow().len() < POOL {
                pool.borrow_mut().push(Box::new(f));
            }
        }
        Err(err) => {
            typed(&err)?;
            // A fused blockwise kernel for the types (and the bias's) takes any epilogue of a
            // plain TN problem.
            let fused =
                built::<TA, TB, TD>(|s| s.blockwise.is_some() && s.fusion == fused_for::<TD>(&e));
            prop_assert!(
                !(fused && name.is_none() && device == H100 && plain_tn(p)),
                "{:?} with {}: {}",
                p,
                e.describe(),
                err
            );
        }
    }
    Ok(true)
}

/// A length relative to the one required.
#[derive(Clone, Copy, Debug)]
enum Len {
    Exact,
    Short(usize),
    Long(usize),
    Zero,
    Any(usize),
}

impl Len {
    fn of(self, required: usize) -> usize {
        match self {
            Len::Exact => required,
            Len::Short(d) => required.saturating_sub(d),
            Len::Long(d) => required.saturating_add(d),
            Len::Zero => 0,
            Len::Any(x) => x,
        }
    }
}

fn len() -> impl Strategy<Value = Len> {
    prop_oneof![
        8 => Just(Len::Exact),
        3 => prop_oneof![3 => Just(1usize), 1 => 2..300usize].prop_map(Len::Short),
        2 => prop_oneof![3 => Just(1usize), 1 => any::<usize>()].prop_map(Len::Long),
        1 => Just(Len::Zero),
        1 => any::<usize>().prop_map(Len::Any),
    ]
}

/// The first of `(operand, len, required)` that is short, as the checks name it.
fn first_short(checks: &[(OperandName, usize, usize)]) -> Option<(OperandName, usize, usize)> {
    checks.iter().copied().find(|&(_, len, req)| len < req)
}

fn expect_lengths(
    got: cutlass_gemm::Result<()>,
    want: Option<(OperandName, usize, usize)>,
) -> Result<bool, TestCaseError> {
    match (got, want) {
        (Ok(()), None) => Ok(true),
        (
            Err(Error::BufferTooSmall {
                operand,
                len,
                required,
            }),
            Some(w),
        ) => {
            prop_assert_eq!((operand, len, required), w);
            Ok(false)
        }
        (got, want) => {
            prop_assert!(false, "{:?}, expected {:?}", got, want);
            Ok(false)
        }
    }
}

#[test]
fn blockwise_plans_and_scale_lengths() {
    let seed = seed();
    let built = cutlass_gemm::built_kernels()
        .iter()
        .any(|k| k.spec.blockwise.is_some());
    let pool = BlockwisePool::default();

    let n = cases(BLOCKWISE_PLANS, built);
    let counts = Counts::default();
    runner(seed, 1, n)
        .run(
            &(
                problem(),
                device(),
                prop_oneof![8 => Just(0usize), 1 => 1..5usize],
                kernel_name(),
                prop_oneof![1 => Just(None), 1 => epilogue().prop_map(Some)],
                any::<usize>(),
            ),
            |(p, device, ty, name, epilogue, short)| {
                let check: BlockwiseCheck = match ty {
                    0 => check_blockwise::<E4M3, E4M3, bf16>,
                    1 => check_blockwise::<E4M3, E4M3, f16>,
                    2 => check_blockwise::<E4M3, E4M3, f32>,
                    3 => check_blockwise::<E5M2, E4M3, bf16>,
                    _ => check_blockwise::<E4M3, E5M2, bf16>,
                };
                let planned = check(device, &p, name, epilogue, short, &pool)?;
                counts.add(planned);
                Ok(())
            },
        )
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    counts.report("blockwise plans", n, built);

    // Random lengths on the plans made.
    let pool = pool.into_inner();
    if pool.is_empty() {
        println!("blockwise lengths: no plans to check (a build without kernels)");
        return;
    }
    let n = cases(BLOCKWISE_LENGTHS, true);
    let counts = Counts::default();
    runner(seed, 2, n)
        .run(
            &(
                any::<Index>(),
                (len(), len()),
                (len(), len(), len(), len()),
                prop::bool::weighted(0.8),
            ),
            |(i, (sa, sb), (a, b, c, d), with_c)| {
                let g = &pool[i.index(pool.len())];
                let (ra, rb) = g.scale_lens();
                let (la, lb) = (sa.of(ra), sb.of(rb));
                let scales_ok = expect_lengths(
                    g.check_scales(la, lb),
                    first_short(&[
                        (OperandName::ScalesA, la, ra),
                        (OperandName::ScalesB, lb, rb),
                    ]),
                )?;
                let req = g.operand_lens();
                let lens = [a.of(req[0]), b.of(req[1]), c.of(req[2]), d.of(req[3])];
                let mut want = vec![
                    (OperandName::A, lens[0], req[0]),
                    (OperandName::B, lens[1], req[1]),
                ];
                if with_c {
                    want.push((OperandName::C, lens[2], req[2]));
                }
                want.push((OperandName::D, lens[3], req[3]));
                let operands_ok =
                    expect_lengths(g.check_operands(lens, with_c), first_short(&want))?;
                counts.add(scales_ok && operands_ok);
                Ok(())
            },
        )
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    counts.report(
        &format!("blockwise lengths ({} plans)", pool.len()),
        n,
        true,
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Fused epilogues on random plans.

#[derive(Clone, Copy)]
enum EpilogueOutcome {
    /// The plan itself was refused.
    NoPlan,
    /// The epilogue was refused.
    Refused,
    /// A plan with the epilogue.
    Fused,
}

/// [`check_epilogue`] for some types.
type EpilogueCheck = fn(
    DeviceInfo,
    &GemmProblem,
    Option<&str>,
    (Epilogue, Epilogue),
    ScheduleHints,
    usize,
) -> Result<EpilogueOutcome, TestCaseError>;

/// A plan, then an epilogue on it (`first`), or typed errors; on the plan with the epilogue,
/// operand lengths, schedule hints, another epilogue (`second`) and none again.
fn check_epilogue<TA: Element, TB: Element, TD: Element>(
    device: DeviceInfo,
    p: &GemmProblem,
    name: Option<&str>,
    (first, second): (Epilogue, Epilogue),
    hints: ScheduleHints,
    short: usize,
) -> Result<EpilogueOutcome, TestCaseError> {
    let g = match Gemm::<TA, TB, TD>::plan(device, p, name) {
        Ok(g) => g,
        Err(e) => {
            typed(&e)?;
            return Ok(EpilogueOutcome::NoPlan);
        }
    };
    let f = match g.clone().with_epilogue(first) {
        Ok(f) => f,
        Err(e) => {
            typed(&e)?;
            // Where the build has a fused kernel for the types (with the epilogue's bias type), a
            // plain TN problem on an H100 gets any epilogue.
            let fused = built::<TA, TB, TD>(|s| s.fusion == fused_for::<TD>(&first));
            prop_assert!(
                !(fused && name.is_none() && device == H100 && plain_tn(p)),
                "{:?} with {}: {}",
                p,
                first.describe(),
                e
            );
            return Ok(EpilogueOutcome::Refused);
        }
    };
    prop_assert_eq!(f.epilogue(), first);
    // (The 16-bit decode GEMV computes the epilogue itself, on whichever kernel is behind it.)
    prop_assert!(
        first.is_none()
            || f.kernel_spec().fusion.is_fused()
            || f.epilogue_is_separate()
            || f.is_gemv(),
        "{} for {}",
        f.kernel_name(),
        first.describe()
    );
    // A fused kernel reads the epilogue's bias type.
    if f.kernel_spec().fusion.is_fused() && !f.epilogue_is_separate() && first.bias.is_some() {
        prop_assert_eq!(f.kernel_spec().fusion, fused_for::<TD>(&first));
    }
    // A separate pass: a bias per column (or none) and an activation over a row-major 16-bit D
    // of one batch, after the plain plan's own kernel.
    if f.epilogue_is_separate() {
        prop_assert!(
            !first.row_scales
                && !first.col_scales
                && first.bias != Some(BiasAxis::PerRow)
                && p.batch == 1
                && f.operand(OperandName::D).layout == Layout::RowMajor
                && TD::DATA_TYPE.bits() == 16
                && !f.kernel_spec().fusion.is_fused(),
            "{:?} {}",
            p,
            first.describe()
        );
    }
    if name.is_some() {
        prop_assert_eq!(f.kernel_name(), g.kernel_name(), "a named kernel stays");
    }
    prop_assert_eq!(f.problem(), p);
    for op in OPERANDS {
        prop_assert_eq!(f.operand(op), g.operand(op));
    }
    check_operand_lengths(&f, short)?;
    // Tile-scheduler hints on it: in range, and split-K on stream-K kernels, or with a reduction
    // on a plain kernel's f32 twin (one GEMM, no fused epilogue, equal slices of K).
    let in_range = matches!(hints.swizzle, 0 | 1 | 2 | 4 | 8) && hints.raster <= 2;
    let stream_k = f.kernel_spec().tile_scheduler == TileScheduler::StreamK;
    match f.clone().with_schedule(hints) {
        Ok(s) => {
            let reduced = s.split_k_kernel().is_some();
            prop_assert!(
                in_range && (hints.splits <= 1 || stream_k || reduced),
                "{:?}",
                hints
            );
            prop_assert!(
                !reduced
                    || (!stream_k
                        && (first.is_none() || f.epilogue_is_separate())
                        && p.batch == 1
                        && p.k % hints.splits as usize == 0),
                "{:?} {:?}",
                hints,
                p
            );
            prop_assert_eq!(s.schedule(), hints);
            prop_assert_eq!(s.epilogue(), first);
            prop_assert_eq!(s.kernel_name(), f.kernel_name());
        }
        Err(e) => {
            typed(&e)?;
            if !in_range {
                prop_assert_eq!(rule_of(&e), Some(&ProblemRule::ScheduleOutOfRange(hints)));
            } else {
                let split_k = match e {
                    Error::KernelMismatch {
                        reason: KernelRule::SplitKNeedsStreamK { splits },
                        ..
                    } => splits == hints.splits && f.is_gemv(),
                    Error::KernelMismatch {
                        reason: KernelRule::SplitK { splits, .. },
                        ..
                    } => splits == hints.splits && !stream_k,
                    Error::KernelNotBuilt { .. } => !stream_k,
                    _ => false,
                };
                prop_assert!(split_k, "{:?}: {}", hints, e);
            }
        }
    }
    // Another epilogue on it, then none: the plain epilogue keeps the kernel.
    match f.clone().with_epilogue(second) {
        Ok(s) => {
            prop_assert_eq!(s.epilogue(), second);
            prop_assert!(
                second.is_none()
                    || s.kernel_spec().fusion.is_fused()
                    || s.epilogue_is_separate()
                    || s.is_gemv()
            );
            prop_assert!(!s.epilogue_is_separate() || !s.kernel_spec().fusion.is_fused());
        }
        Err(e) => typed(&e)?,
    }
    let plain = f.clone().with_epilogue(Epilogue::NONE);
    prop_assert!(plain.is_ok(), "{:?}", plain.err());
    let plain = plain.unwrap();
    prop_assert_eq!(plain.kernel_name(), f.kernel_name());
    prop_assert!(plain.epilogue().is_none());
    Ok(EpilogueOutcome::Fused)
}

/// Tile-scheduler hints: mostly in range, sometimes not.
fn hints() -> impl Strategy<Value = ScheduleHints> {
    (
        select(&[0u8, 1, 2, 4, 8, 0, 1, 2, 4, 8, 3, 16, 255][..]),
        select(&[0u8, 1, 2, 0, 1, 2, 3, 255][..]),
        prop_oneof![
            4 => Just(0u16),
            1 => Just(1u16),
            2 => 2..9u16,
            1 => select(&[16u16, 255, u16::MAX][..]),
        ],
    )
        .prop_map(|(swizzle, raster, splits)| ScheduleHints {
            swizzle,
            raster,
            splits,
        })
}

#[test]
fn epilogues_on_random_plans() {
    let seed = seed();
    let built = cutlass_gemm::built_kernels()
        .iter()
        .any(|k| k.spec.fusion.is_fused());
    let n = cases(EPILOGUES, built);
    let outcomes = Cell::new([0u64; 3]);
    runner(seed, 3, n)
        .run(
            &(
                problem(),
                device(),
                // Mostly the types with fused kernels (bf16, f16, e4m3 -> bf16).
                select(&[0usize, 0, 0, 1, 1, 1, 2, 3, 3, 3, 4][..]),
                kernel_name(),
                (epilogue(), epilogue()),
                hints(),
                any::<usize>(),
            ),
            |(p, device, ty, name, epilogues, hints, short)| {
                let check: EpilogueCheck = match ty {
                    0 => check_epilogue::<bf16, bf16, bf16>,
                    1 => check_epilogue::<f16, f16, f16>,
                    2 => check_epilogue::<bf16, bf16, f32>,
                    3 => check_epilogue::<E4M3, E4M3, bf16>,
                    _ => check_epilogue::<E4M3, E4M3, f16>,
                };
                let outcome = check(device, &p, name, epilogues, hints, short)?;
                let mut o = outcomes.get();
                o[outcome as usize] += 1;
                outcomes.set(o);
                Ok(())
            },
        )
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let [no_plan, refused, fused] = outcomes.get();
    println!(
        "epilogues: {n} cases: {fused} plans with an epilogue, {refused} epilogues refused, \
         {no_plan} problems refused (typed errors)"
    );
    assert!(no_plan + refused > 0, "no error");
    if built {
        assert!(fused > n as u64 / 100, "{fused} plans with an epilogue");
        // (Types without a fused kernel, named kernels without the fusion: a few percent.)
        assert!(refused > 0 || n < EPILOGUES, "no epilogue refused");
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Grouped GEMMs and their host lists of rows per group.

fn groups() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => 1..17usize,
        2 => 17..300usize,
        1 => select(&[0usize, 1, 4096, 65535, MAX_EXTENT, MAX_EXTENT + 1, 1 << 40, usize::MAX][..]),
    ]
}

/// Extents of grouped problems: mostly multiples of 8 (16 bytes of the 16-bit types), sometimes
/// anything.
fn grouped_extent() -> impl Strategy<Value = usize> {
    prop_oneof![4 => (1..600usize).prop_map(|x| x * 8), 2 => extent()]
}

fn grouped_problem() -> impl Strategy<Value = GroupedProblem> {
    (
        groups(),
        prop_oneof![3 => 1..3000usize, 1 => extent()],
        (grouped_extent(), grouped_extent()),
        any::<bool>(),
        prop_oneof![6 => Just(0usize), 1 => extent()],
        (scalar(), scalar()),
    )
        .prop_map(|(groups, rows, (n, k), masked, expected, (alpha, beta))| {
            let p = if masked {
                GroupedProblem::masked(groups, rows, n, k)
            } else {
                GroupedProblem::contiguous(groups, rows, n, k)
            };
            p.with_scalars(alpha, beta).with_expected_rows(expected)
        })
}

/// What `GroupedProblem::check` refuses, by the rules: extents 1 to `i32::MAX` (groups, rows, n,
/// k), finite scalars, A, B and D counts within `usize` (in 128-bit arithmetic).
fn grouped_rule(p: &GroupedProblem) -> Option<ProblemRule> {
    for (extent, v) in [
        (Extent::Groups, p.groups),
        (Extent::M, p.rows()),
        (Extent::N, p.n),
        (Extent::K, p.k),
    ] {
        if v == 0 {
            return Some(ProblemRule::ZeroExtent(extent));
        }
        if v > MAX_EXTENT {
            return Some(ProblemRule::ExtentTooLarge { extent, value: v });
        }
    }
    if !p.alpha.is_finite() || !p.beta.is_finite() {
        return Some(ProblemRule::NonFiniteScalars {
            alpha: Scalar(p.alpha),
            beta: Scalar(p.beta),
        });
    }
    let slots = match p.layout {
        GroupedLayout::Contiguous { .. } => 1,
        GroupedLayout::Masked { .. } => p.groups as u128,
    };
    let rows = p.rows() as u128;
    for (operand, count) in [
        (OperandName::A, slots * rows * p.k as u128),
        (OperandName::B, p.groups as u128 * p.n as u128 * p.k as u128),
        (OperandName::D, slots * rows * p.n as u128),
    ] {
        if count > usize::MAX as u128 {
            return Some(ProblemRule::OperandReachOverflows { operand });
        }
    }
    None
}

/// A grouped plan, whatever its types and scales: what the properties read of it.
trait GroupRows {
    fn problem(&self) -> GroupedProblem;
    fn check(&self, rows: &[i32]) -> cutlass_gemm::Result<()>;
    fn kernel_name(&self) -> &'static str;
    fn workspace_size(&self) -> usize;
    /// The scale counts of a blockwise plan.
    fn scale_lens(&self) -> Option<(usize, usize)>;
}

impl<T: Element, TD: Element> GroupRows for GroupedGemm<T, TD> {
    fn problem(&self) -> GroupedProblem {
        *GroupedGemm::problem(self)
    }

    fn check(&self, rows: &[i32]) -> cutlass_gemm::Result<()> {
        self.check_group_rows(rows)
    }

    fn kernel_name(&self) -> &'static str {
        GroupedGemm::kernel_name(self)
    }

    fn workspace_size(&self) -> usize {
        GroupedGemm::workspace_size(self)
    }

    fn scale_lens(&self) -> Option<(usize, usize)> {
        None
    }
}

impl<TD: Element> GroupRows for GroupedBlockwiseGemm<TD> {
    fn problem(&self) -> GroupedProblem {
        *GroupedBlockwiseGemm::problem(self)
    }

    fn check(&self, rows: &[i32]) -> cutlass_gemm::Result<()> {
        self.check_group_rows(rows)
    }

    fn kernel_name(&self) -> &'static str {
        GroupedBlockwiseGemm::kernel_name(self)
    }

    fn workspace_size(&self) -> usize {
        GroupedBlockwiseGemm::workspace_size(self)
    }

    fn scale_lens(&self) -> Option<(usize, usize)> {
        Some(GroupedBlockwiseGemm::scale_lens(self))
    }
}

/// Whether this build has a grouped kernel for these types (with blockwise scales or without)
/// that the device runs.
fn grouped_kernel_for<T: Element, TD: Element>(device: DeviceInfo, blockwise: bool) -> bool {
    cutlass_gemm::built_grouped_kernels().iter().any(|k| {
        (k.spec.a.ty, k.spec.d.ty) == (T::DATA_TYPE, TD::DATA_TYPE)
            && k.spec.blockwise.is_some() == blockwise
            && k.spec.arch.runs_on(device.compute_capability)
    })
}

/// The plans made, for the property of rows per group.
type GroupedPool = RefCell<Vec<Box<dyn GroupRows>>>;

/// [`check_grouped`] for some types.
type GroupedCheck =
    fn(DeviceInfo, &GroupedProblem, Option<&str>, &GroupedPool) -> Result<bool, TestCaseError>;

/// [`check_grouped_list`] for some types.
type GroupedListCheck =
    fn(DeviceInfo, usize, usize, Option<&str>, f32) -> Result<bool, TestCaseError>;

/// `GroupedProblem::check` against the rules, then a plan or a typed error (the problem's own,
/// or with a kernel for the types an extent off its alignment); a plan's element counts. Plans
/// go to `pool`.
fn check_grouped<T: Element, TD: Element>(
    device: DeviceInfo,
    p: &GroupedProblem,
    name: Option<&str>,
    pool: &GroupedPool,
) -> Result<bool, TestCaseError> {
    check_grouped_plan::<T, TD, _>(device, p, name, pool, GroupedGemm::<T, TD>::plan, false)
}

/// [`check_grouped`] for [`GroupedBlockwiseGemm`] (e4m3 in), with its scale counts.
fn check_grouped_blockwise<TD: Element>(
    device: DeviceInfo,
    p: &GroupedProblem,
    name: Option<&str>,
    pool: &GroupedPool,
) -> Result<bool, TestCaseError> {
    check_grouped_plan::<E4M3, TD, _>(
        device,
        p,
        name,
        pool,
        GroupedBlockwiseGemm::<TD>::plan,
        true,
    )
}

/// [`check_grouped`] over a planner of either kind (`blockwise` says which kernels it takes).
fn check_grouped_plan<T: Element, TD: Element, P: GroupRows + 'static>(
    device: DeviceInfo,
    p: &GroupedProblem,
    name: Option<&str>,
    pool: &GroupedPool,
    planner: fn(DeviceInfo, &GroupedProblem, Option<&str>) -> cutlass_gemm::Result<P>,
    blockwise: bool,
) -> Result<bool, TestCaseError> {
    let rule = grouped_rule(p);
    let own = p.check();
    prop_assert_eq!(
        own.as_ref().err().and_then(rule_of),
        rule.as_ref(),
        "{:?}",
        p
    );
    prop_assert_eq!(own.is_ok(), rule.is_none());
    let g = match planner(device, p, name) {
        Ok(g) => g,
        Err(e) => {
            typed(&e)?;
            if let Err(own) = &own {
                same_error(own, &e)?;
            } else if name.is_none() && grouped_kernel_for::<T, TD>(device, blockwise) {
                // With a kernel for the types, only an extent off its alignment is refused.
                prop_assert!(
                    matches!(
                        e,
                        Error::Misaligned {
                            operand: OperandName::A,
                            what: Quantity::Extent(Extent::K),
                            ..
                        } | Error::Misaligned {
                            operand: OperandName::D,
                            what: Quantity::Extent(Extent::N),
                            ..
                        }
                    ),
                    "{:?}: {}",
                    p,
                    e
                );
            }
            return Ok(false);
        }
    };
    prop_assert!(own.is_ok());
    prop_assert_eq!(g.problem(), *p);
    let kernel = cutlass_gemm::built_grouped_kernels()
        .iter()
        .find(|k| k.name == g.kernel_name());
    prop_assert!(
        kernel.is_some(),
        "{} is not a grouped kernel",
        g.kernel_name()
    );
    let spec = kernel.unwrap().spec;
    prop_assert!(spec.arch.runs_on(device.compute_capability));
    prop_assert_eq!((spec.a.ty, spec.d.ty), (T::DATA_TYPE, TD::DATA_TYPE));
    // Blockwise plans run blockwise kernels, and read ceil(k / 128) scales per row of A and
    // ceil(n / 128) * ceil(k / 128) per group.
    prop_assert_eq!(spec.blockwise.is_some(), blockwise);
    prop_assert_eq!(g.scale_lens().is_some(), blockwise);
    if let Some((sa, sb)) = g.scale_lens() {
        let (kb, nb) = (p.k.div_ceil(128), p.n.div_ceil(128));
        prop_assert_eq!((sa, sb), (p.a_len() / p.k * kb, p.groups * nb * kb));
    }
    prop_assert!(p.k % spec.a.align as usize == 0 && p.n % spec.d.align as usize == 0);
    if let Some(name) = name {
        prop_assert_eq!(g.kernel_name(), name);
    }
    prop_assert!(g.workspace_size() > 0);
    // Element counts, in 128-bit arithmetic.
    let slots = match p.layout {
        GroupedLayout::Contiguous { .. } => 1u128,
        GroupedLayout::Masked { .. } => p.groups as u128,
    };
    let rows = p.rows() as u128;
    prop_assert_eq!(p.a_len() as u128, slots * rows * p.k as u128);
    prop_assert_eq!(
        p.b_len() as u128,
        p.groups as u128 * p.n as u128 * p.k as u128
    );
    prop_assert_eq!(p.d_len() as u128, slots * rows * p.n as u128);
    let contiguous = matches!(p.layout, GroupedLayout::Contiguous { .. });
    prop_assert_eq!(p.group_rows_len(), p.groups + usize::from(contiguous));
    if pool.borrow().len() < POOL {
        pool.borrow_mut().push(Box::new(g));
    }
    Ok(true)
}

/// A list plan or a typed error (the group count's rule, or none where a kernel serves), its
/// workspace (at least one table entry per problem) and alpha.
fn check_grouped_list<T: Element, TD: Element>(
    device: DeviceInfo,
    groups: usize,
    expected_rows: usize,
    name: Option<&str>,
    alpha: f32,
) -> Result<bool, TestCaseError> {
    let g = match GroupedListGemm::<T, TD>::plan(device, groups, expected_rows, name) {
        Ok(g) => g,
        Err(e) => {
            typed(&e)?;
            let rule = match groups {
                0 => Some(ProblemRule::ZeroExtent(Extent::Groups)),
                g if g > MAX_EXTENT => Some(ProblemRule::ExtentTooLarge {
                    extent: Extent::Groups,
                    value: g,
                }),
                _ => None,
            };
            if rule.is_some() {
                prop_assert_eq!(rule_of(&e), rule.as_ref());
            } else if name.is_none() && grouped_kernel_for::<T, TD>(device, false) {
                prop_assert!(false, "{groups} groups: {e}");
            }
            return Ok(false);
        }
    };
    prop_assert!((1..=MAX_EXTENT).contains(&groups));
    // The kernel's workspace, then one entry per problem.
    let table = groups as u128
        * std::mem::size_of::<cutlass_gemm::sys::cutlass_rs_grouped_problem>() as u128;
    prop_assert!(g.workspace_size() as u128 >= table);
    match g.with_alpha(alpha) {
        Ok(_) => prop_assert!(alpha.is_finite()),
        Err(e) => {
            typed(&e)?;
            prop_assert!(!alpha.is_finite());
            let non_finite = matches!(rule_of(&e), Some(ProblemRule::NonFiniteScalars { .. }));
            prop_assert!(non_finite, "{}", e);
        }
    }
    Ok(true)
}

/// What `check_group_rows` refuses, by its rules: the number of entries (`groups + 1` offsets,
/// `groups` counts), then the first entry that is negative, past the rows (or capacity), or (an
/// offset) below the one before it.
fn rows_rule(p: &GroupedProblem, list: &[i32]) -> Option<ProblemRule> {
    let (required, offsets) = match p.layout {
        GroupedLayout::Contiguous { .. } => (p.groups + 1, true),
        GroupedLayout::Masked { .. } => (p.groups, false),
    };
    if list.len() != required {
        return Some(ProblemRule::GroupRowsLength {
            found: list.len(),
            required,
        });
    }
    let limit = p.rows();
    let mut previous = 0i64;
    for (index, &v) in list.iter().enumerate() {
        let value = i64::from(v);
        let rule = if value < 0 {
            Some(GroupRowsRule::Negative)
        } else if value as u64 > limit as u64 {
            Some(GroupRowsRule::PastEnd { limit })
        } else if offsets && index > 0 && value < previous {
            Some(GroupRowsRule::Decreasing { previous })
        } else {
            None
        };
        if let Some(rule) = rule {
            return Some(ProblemRule::GroupRows { index, value, rule });
        }
        previous = value;
    }
    None
}

/// A list of rows per group for `p`: valid (sorted offsets from 0 to the rows, or counts up to
/// the capacity), then `edits` entries replaced by values near the limits, or its length changed.
fn rows_list(p: &GroupedProblem, seed: u64, edits: usize, resize: Option<isize>) -> Vec<i32> {
    let mut rng = SplitMix(seed);
    let limit = p.rows().min(i32::MAX as usize) as u64;
    let required = p.group_rows_len();
    let mut list: Vec<i32> = if required > 4097 {
        // Too many groups to write out: a short list.
        (0..rng.upto(8)).map(|_| rng.upto(limit) as i32).collect()
    } else {
        let mut v: Vec<i32> = (0..required).map(|_| rng.upto(limit) as i32).collect();
        if let GroupedLayout::Contiguous { .. } = p.layout {
            v.sort_unstable();
            if rng.upto(1) == 0 {
                // The usual form: from 0 to all the rows.
                if let Some(first) = v.first_mut() {
                    *first = 0;
                }
                if let Some(last) = v.last_mut() {
                    *last = limit as i32;
                }
            }
        }
        v
    };
    for _ in 0..edits {
        if list.is_empty() {
            break;
        }
        let i = rng.upto(list.len() as u64 - 1) as usize;
        let previous = if i > 0 { list[i - 1] } else { 0 };
        let near = [
            -1,
            i32::MIN,
            i32::MAX,
            (limit as i32).saturating_add(1),
            limit as i32,
            0,
            previous.saturating_sub(1),
            previous,
            rng.next() as i32,
        ];
        list[i] = near[rng.upto(near.len() as u64 - 1) as usize];
    }
    if let Some(d) = resize {
        let len = (list.len() as isize + d).max(0) as usize;
        list.resize(len, 0);
    }
    list
}

#[test]
fn grouped_plans_and_group_rows() {
    let seed = seed();
    let built = !cutlass_gemm::built_grouped_kernels().is_empty();
    let pool = GroupedPool::default();
    let n = cases(GROUPED_PLANS, built);
    let counts = Counts::default();
    runner(seed, 4, n)
        .run(
            &(
                grouped_problem(),
                device_weighted(30),
                prop_oneof![8 => 0..3usize, 2 => Just(5usize), 1 => 3..5usize],
                kernel_name(),
                prop::bool::weighted(0.2),
                (groups(), extent(), scalar()),
            ),
            |(p, device, ty, name, list, (groups, expected, alpha))| {
                // bf16, f16, e4m3 -> bf16 (the grouped kernels' types), two without kernels, and
                // e4m3 -> bf16 with blockwise scales.
                let (plan, list_plan): (GroupedCheck, GroupedListCheck) = match ty {
                    0 => (
                        check_grouped::<bf16, bf16>,
                        check_grouped_list::<bf16, bf16>,
                    ),
                    1 => (check_grouped::<f16, f16>, check_grouped_list::<f16, f16>),
                    2 => (
                        check_grouped::<E4M3, bf16>,
                        check_grouped_list::<E4M3, bf16>,
                    ),
                    3 => (check_grouped::<bf16, f32>, check_grouped_list::<bf16, f32>),
                    4 => (check_grouped::<f16, bf16>, check_grouped_list::<f16, bf16>),
                    // e4m3 with blockwise scales (its list plans are the plain ones).
                    _ => (
                        check_grouped_blockwise::<bf16>,
                        check_grouped_list::<E4M3, bf16>,
                    ),
                };
                let planned = if list {
                    list_plan(device, groups, expected, name, alpha)
                } else {
                    plan(device, &p, name, &pool)
                }?;
                counts.add(planned);
                Ok(())
            },
        )
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    counts.report("grouped plans", n, built);

    // Random host lists of rows per group on the plans made.
    let pool = pool.into_inner();
    if pool.is_empty() {
        println!("grouped rows: no plans to check (a build without grouped kernels)");
        return;
    }
    let n = cases(GROUPED_ROWS, true);
    let counts = Counts::default();
    runner(seed, 5, n)
        .run(
            &(
                any::<Index>(),
                any::<u64>(),
                prop_oneof![4 => Just(0usize), 2 => Just(1usize), 1 => 2..4usize],
                prop_oneof![
                    8 => Just(None),
                    1 => prop_oneof![Just(-1isize), Just(1), -3..4isize, Just(-100_000)]
                        .prop_map(Some),
                ],
            ),
            |(i, list_seed, edits, resize)| {
                let g = &pool[i.index(pool.len())];
                let p = g.problem();
                let list = rows_list(&p, list_seed, edits, resize);
                let want = rows_rule(&p, &list);
                let got = g.check(&list);
                match (&got, &want) {
                    (Ok(()), None) => {}
                    (Err(e), Some(rule)) => {
                        typed(e)?;
                        prop_assert_eq!(rule_of(e), Some(rule), "{:?}", p);
                    }
                    _ => prop_assert!(false, "{:?} {:?}: {:?}, expected {:?}", p, list, got, want),
                }
                counts.add(got.is_ok());
                Ok(())
            },
        )
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    counts.report(&format!("grouped rows ({} plans)", pool.len()), n, true);
}

// ---------------------------------------------------------------------------------------------
// 4. Weight-only plans and the host checks of quantized weights.

fn weight_rows() -> impl Strategy<Value = usize> {
    prop_oneof![4 => (1..600usize).prop_map(|x| x * 16), 1 => extent()]
}

fn weight_columns() -> impl Strategy<Value = usize> {
    prop_oneof![4 => (1..200usize).prop_map(|x| x * 64), 1 => extent()]
}

/// A group size: usual, odd, off 64, the whole k (`usize::MAX` stands for k), or anything.
fn group_size() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => select(&[64usize, 128, 256][..]),
        1 => Just(usize::MAX),
        2 => select(&[0usize, 1, 7, 8, 32, 63, 65, 100, 127, 129, 192, 4096, 1 << 31][..]),
        1 => any::<usize>(),
    ]
}

/// What `check_weight_extents` refuses, by the rules: n and k 1 to `i32::MAX`, n a multiple of
/// 16, k of 64, the group size a multiple of 64 that divides k.
fn weight_extents_rule(n: usize, k: usize, g: usize) -> Option<ProblemRule> {
    for (extent, v) in [(Extent::N, n), (Extent::K, k)] {
        if v == 0 {
            return Some(ProblemRule::ZeroExtent(extent));
        }
        if v > MAX_EXTENT {
            return Some(ProblemRule::ExtentTooLarge { extent, value: v });
        }
    }
    let rule = if n % 16 != 0 {
        WeightRule::Rows { n, multiple: 16 }
    } else if k % 64 != 0 {
        WeightRule::Columns { k, multiple: 64 }
    } else if g == 0 || g % 64 != 0 || k % g != 0 {
        WeightRule::GroupSize { group_size: g, k }
    } else if n as u128 * k as u128 > MAX_EXTENT as u128 {
        WeightRule::Values {
            values: n.saturating_mul(k),
            max: MAX_EXTENT,
        }
    } else {
        return None;
    };
    Some(ProblemRule::Weight { rule })
}

/// What `WeightOnlyProblem::check` refuses: m 1 to `i32::MAX`, finite scalars, the weight's
/// extents, `m · k` and `m · n` within `usize`.
fn weight_problem_rule(p: &WeightOnlyProblem) -> Option<ProblemRule> {
    if p.m == 0 {
        return Some(ProblemRule::ZeroExtent(Extent::M));
    }
    if p.m > MAX_EXTENT {
        return Some(ProblemRule::ExtentTooLarge {
            extent: Extent::M,
            value: p.m,
        });
    }
    if !p.alpha.is_finite() || !p.beta.is_finite() {
        return Some(ProblemRule::NonFiniteScalars {
            alpha: Scalar(p.alpha),
            beta: Scalar(p.beta),
        });
    }
    if let Some(rule) = weight_extents_rule(p.n, p.k, p.group_size) {
        return Some(rule);
    }
    for (operand, x) in [(OperandName::A, p.k), (OperandName::D, p.n)] {
        if p.m as u128 * x as u128 > usize::MAX as u128 {
            return Some(ProblemRule::OperandReachOverflows { operand });
        }
    }
    None
}

/// Whether this build has a weight-only kernel for `T` and the problem's format that the device
/// runs and that reads the weight in the problem's order (and group size, where it fixes one).
fn weight_kernel_for<T: WeightOnlyInput>(device: DeviceInfo, p: &WeightOnlyProblem) -> bool {
    let (weight, mode) = p.format.catalog();
    cutlass_gemm::built_weight_only_kernels().iter().any(|k| {
        let group = k.spec.mixed_input.map_or(0, |x| x.group as usize);
        k.spec.b.ty == T::DATA_TYPE
            && k.spec.a.ty == weight
            && k.spec.mixed_input.map(|x| x.mode) == Some(mode)
            && k.spec.arch.runs_on(device.compute_capability)
            && cutlass_gemm::WeightOrder::of_kernel(&k.spec) == p.order
            && (group == 0 || group == p.group_size)
    })
}

/// `WeightOnlyProblem::check` against the rules, then a plan or a typed error (the problem's
/// own; with a kernel for the type and format, none); a plan's kernel and split-K factors.
fn check_weight_only<T: WeightOnlyInput>(
    device: DeviceInfo,
    p: &WeightOnlyProblem,
    name: Option<&str>,
    splits: u16,
) -> Result<bool, TestCaseError> {
    let rule = weight_problem_rule(p);
    let own = p.check();
    prop_assert_eq!(
        own.as_ref().err().and_then(rule_of),
        rule.as_ref(),
        "{:?}",
        p
    );
    prop_assert_eq!(own.is_ok(), rule.is_none());
    let g = match WeightOnlyGemm::<T>::plan(device, p, name) {
        Ok(g) => g,
        Err(e) => {
            typed(&e)?;
            if let Err(own) = &own {
                same_error(own, &e)?;
            } else if name.is_none() {
                // A kernel for the type and format serves every problem that passes the rules.
                prop_assert!(!weight_kernel_for::<T>(device, p), "{:?}: {}", p, e);
            }
            return Ok(false);
        }
    };
    prop_assert!(own.is_ok());
    prop_assert_eq!(g.problem(), p);
    if g.is_gemv() {
        // The decode GEMV: a few tokens, no workspace, no split-K.
        prop_assert_eq!(g.kernel_name(), cutlass_gemm::WEIGHT_ONLY_GEMV);
        prop_assert!(
            p.m <= cutlass_gemm::plans::weight_only::GEMV_TOKENS
                || name == Some(cutlass_gemm::WEIGHT_ONLY_GEMV)
        );
        prop_assert_eq!((g.splits(), g.workspace_size()), (0, 0));
        match g.with_splits(splits) {
            Ok(s) => prop_assert!(splits <= 1 && s.splits() == splits),
            Err(e) => {
                typed(&e)?;
                prop_assert!(
                    splits > 1
                        && matches!(
                            e,
                            Error::KernelMismatch {
                                reason: KernelRule::SplitKNeedsStreamK { .. },
                                ..
                            }
                        ),
                    "{splits} splits: {e}"
                );
            }
        }
        return Ok(true);
    }
    let kernel = cutlass_gemm::built_weight_only_kernels()
        .iter()
        .find(|k| k.name == g.kernel_name());
    prop_assert!(kernel.is_some(), "{} is not weight-only", g.kernel_name());
    let spec = kernel.unwrap().spec;
    prop_assert_eq!(spec.b.ty, T::DATA_TYPE);
    prop_assert_eq!(spec.a.ty, p.format.catalog().0);
    let stream_k = spec.tile_scheduler == TileScheduler::StreamK;
    if let Some(name) = name {
        prop_assert_eq!(g.kernel_name(), name);
        prop_assert_eq!(g.splits(), 0);
    } else {
        prop_assert!(g.splits() == 0 || (g.splits() == 4 && stream_k));
    }
    // A split-K factor: stream-K kernels take any, others none past 1.
    match g.with_splits(splits) {
        Ok(s) => {
            prop_assert!(splits <= 1 || stream_k);
            prop_assert_eq!(s.splits(), splits);
        }
        Err(e) => {
            typed(&e)?;
            prop_assert!(splits > 1 && !stream_k, "{splits} splits: {e}");
            prop_assert!(
                matches!(
                    e,
                    Error::KernelMismatch {
                        reason: KernelRule::SplitKNeedsStreamK { .. },
                        ..
                    }
                ),
                "{e}"
            );
        }
    }
    Ok(true)
}

#[test]
fn weight_only_plans() {
    let seed = seed();
    let built = !cutlass_gemm::built_weight_only_kernels().is_empty();
    let n = cases(WEIGHT_ONLY_PLANS, built);
    let counts = Counts::default();
    runner(seed, 6, n)
        .run(
            &(
                (
                    extent(),
                    weight_rows(),
                    weight_columns(),
                    group_size(),
                    any::<bool>(),
                    (scalar(), scalar()),
                ),
                device_weighted(30),
                any::<bool>(),
                kernel_name(),
                prop_oneof![
                    4 => Just(0u16),
                    2 => 1..9u16,
                    1 => select(&[16u16, 255, 256, u16::MAX][..]),
                ],
            ),
            |((m, wn, wk, g, zeros, (alpha, beta)), device, f16_input, name, splits)| {
                let format = if zeros {
                    WeightFormat::ZeroPoint
                } else {
                    WeightFormat::Symmetric
                };
                let g = if g == usize::MAX { wk } else { g };
                let p = WeightOnlyProblem::new(m, wn, wk, g, format).with_scalars(alpha, beta);
                let planned = if f16_input {
                    check_weight_only::<f16>(device, &p, name, splits)
                } else {
                    check_weight_only::<bf16>(device, &p, name, splits)
                }?;
                counts.add(planned);
                Ok(())
            },
        )
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    counts.report("weight-only plans", n, built);
}

/// A GPTQ `g_idx` for `k` columns in groups of `group_size` (each column's group, `i / g`; all 0
/// for a group size of 0), then `edits` entries moved to another group and its length changed by
/// `resize`.
fn group_index(k: usize, group_size: usize, seed: u64, edits: usize, resize: isize) -> Vec<i32> {
    let mut rng = SplitMix(seed);
    let mut g: Vec<i32> = (0..k)
        .map(|i| i.checked_div(group_size).unwrap_or(0) as i32)
        .collect();
    for _ in 0..edits {
        if g.is_empty() {
            break;
        }
        let i = rng.upto(g.len() as u64 - 1) as usize;
        let other = [
            -1,
            g[i].wrapping_add(1),
            g[i].wrapping_sub(1),
            i32::MAX,
            i32::MIN,
            rng.next() as i32,
        ];
        g[i] = other[rng.upto(other.len() as u64 - 1) as usize];
    }
    let len = (g.len() as isize + resize).max(0) as usize;
    g.resize(len, 0);
    g
}

/// What `check_group_index` refuses: a group size of 0, then a length other than k, then the
/// first column whose group is not `column / group_size`.
fn group_index_rule(g_idx: &[i32], k: usize, group_size: usize) -> Option<Error> {
    if group_size == 0 {
        return Some(Error::InvalidProblem {
            reason: ProblemRule::Weight {
                rule: WeightRule::GroupSize { group_size, k },
            },
        });
    }
    if g_idx.len() != k {
        return Some(Error::BufferTooSmall {
            operand: OperandName::GroupIndex,
            len: g_idx.len(),
            required: k,
        });
    }
    g_idx.iter().enumerate().find_map(|(column, &group)| {
        (i64::from(group) != (column / group_size) as i64).then_some(Error::InvalidProblem {
            reason: ProblemRule::Weight {
                rule: WeightRule::ActOrder {
                    column,
                    group: i64::from(group),
                },
            },
        })
    })
}

#[test]
fn weight_host_checks() {
    let seed = seed();
    let n = cases(WEIGHT_HOST_CHECKS, true);
    let counts = Counts::default();
    runner(seed, 7, n)
        .run(
            &(
                (weight_rows(), weight_columns(), group_size()),
                (
                    prop_oneof![
                        4 => (0..64usize).prop_map(|x| x * 64),
                        1 => 0..4200usize,
                    ],
                    group_size(),
                    any::<u64>(),
                    prop_oneof![6 => Just(0usize), 2 => Just(1usize), 1 => 2..5usize],
                    prop_oneof![8 => Just(0isize), 1 => -3..4isize, 1 => Just(-1isize)],
                ),
            ),
            |((wn, wk, g), (k, group, list_seed, edits, resize))| {
                // The extents of a weight.
                let g = if g == usize::MAX { wk } else { g };
                let want = weight_extents_rule(wn, wk, g);
                let got = check_weight_extents(wn, wk, g);
                match &got {
                    Ok(()) => prop_assert!(want.is_none(), "{wn} x {wk} / {g}: {want:?}"),
                    Err(e) => {
                        typed(e)?;
                        prop_assert_eq!(rule_of(e), want.as_ref(), "{} x {} / {}", wn, wk, g);
                    }
                }
                // A GPTQ g_idx.
                let group = if group == usize::MAX { k } else { group };
                let g_idx = group_index(k, group, list_seed, edits, resize);
                let want_index = group_index_rule(&g_idx, k, group);
                let got_index = check_group_index(&g_idx, k, group);
                match (&got_index, &want_index) {
                    (Ok(()), None) => {}
                    (Err(e), Some(w)) => {
                        typed(e)?;
                        prop_assert_eq!(format!("{e:?}"), format!("{w:?}"));
                    }
                    _ => prop_assert!(
                        false,
                        "k {k}, group size {group}: {got_index:?}, expected {want_index:?}"
                    ),
                }
                counts.add(got.is_ok());
                counts.add(got_index.is_ok());
                Ok(())
            },
        )
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    counts.report("weight host checks (two per case)", n, true);
}
