//! Independent cross-checks of the narrow-precision formats and the scale-factor layout, in CI.
//!
//! Two small host programs (`tests/oracle/*.cu`) are built with the bootstrapped nvcc against the
//! bootstrapped CUDA and CUTLASS headers, then compared with this crate:
//! - every code point of every format of 8 bits or less, decoded by CUDA's `__nv_cvt_*_to_*raw`
//!   (CUTLASS's `float_ue4m3_t` for ue4m3, which CUDA lacks);
//! - over a million f32 inputs (ties, subnormals, overflow, infinities, NaNs, random bit patterns)
//!   encoded by `__nv_cvt_float_to_fp8/fp6/fp4/e8m0` in each saturation and rounding mode, and by
//!   CUTLASS for ue4m3 and tf32;
//! - the packing of FP4 and FP6 tensors in global memory (cute's `subbyte_iterator`);
//! - `Sm1xxBlockScaledConfig<16|32|64>::tile_atom_to_shape_SFA` offsets for 150 (M, K, L) shapes.
//!
//! Set `CUDA_HOME` / `CUTLASS_DIR` as for the build, or run `scripts/bootstrap.sh` first.

use std::path::{Path, PathBuf};
use std::process::Command;

use cutlass_gemm::formats::packed::PackedVec;
use cutlass_gemm::formats::scale_layout::ScaleFactorLayout;
use cutlass_gemm::numeric::{
    PowerOfTwoRounding, Saturation, Tf32, E2M1, E2M3, E3M2, E4M3, E5M2, UE4M3, UE8M0,
};

/// The crate's directory, and the CUDA compiler and CUTLASS headers the kernels were built with
/// (what `cutlass-gemm-sys`'s build script discovered).
fn toolchain() -> (PathBuf, PathBuf, PathBuf) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    assert!(
        !cutlass_gemm::sys::NVCC.is_empty(),
        "this build used no CUDA toolchain (CUTLASS_RS_KERNELS=none or no kernel family): the \
         oracles need nvcc"
    );
    (
        root,
        PathBuf::from(cutlass_gemm::sys::NVCC),
        PathBuf::from(cutlass_gemm::sys::CUTLASS_INCLUDE_DIR),
    )
}

/// Builds `tests/oracle/NAME.cu` (once per change of it or of the files in `deps`, relative to
/// this crate's directory) and returns the executable.
fn oracle(name: &str, deps: &[&str]) -> PathBuf {
    let (root, nvcc, cutlass_include) = toolchain();
    let cuda_root = nvcc
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("/"));
    let src = root.join(format!("tests/oracle/{name}.cu"));
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("oracle-{name}"));
    let fresh = |p: &Path| p.metadata().and_then(|m| m.modified()).ok();
    let newest_input = std::iter::once(src.clone())
        .chain(deps.iter().map(|d| root.join(d)))
        .map(|p| fresh(&p))
        .max()
        .flatten();
    if fresh(&exe).is_some() && fresh(&exe) >= newest_input {
        return exe;
    }
    let status = Command::new(&nvcc)
        .args(["-std=c++17", "-O1"])
        .arg("-I")
        .arg(&cutlass_include)
        .arg("-L")
        .arg(cuda_root.join("lib"))
        .arg("-L")
        .arg(cuda_root.join("lib64"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("run nvcc");
    assert!(status.success(), "building the {name} oracle failed");
    exe
}

/// Inputs: every representable value of each format, the midpoints between neighbours (ties) and
/// their f32 neighbours, values around each format's overflow threshold, f32 subnormals, zeros,
/// infinities, NaNs with several payloads, and random bit patterns: over a million in all.
fn inputs() -> Vec<f32> {
    let mut v: Vec<f32> = vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::MIN,
        f32::MIN_POSITIVE,
    ];
    for payload in [
        0x7fc0_0000u32,
        0x7f80_0001,
        0x7fff_ffff,
        0xffc0_0000,
        0xff80_0001,
    ] {
        v.push(f32::from_bits(payload));
    }
    let formats = [
        E4M3::FORMAT,
        E5M2::FORMAT,
        E2M3::FORMAT,
        E3M2::FORMAT,
        E2M1::FORMAT,
        UE4M3::FORMAT,
    ];
    for f in formats {
        let mut vals: Vec<f64> = (0..(1u32 << f.bits))
            .map(|c| f.decode(c))
            .filter(|x| x.is_finite())
            .collect();
        vals.sort_by(|a, b| a.partial_cmp(b).unwrap());
        vals.dedup();
        for w in vals.windows(2) {
            let mid = ((w[0] + w[1]) / 2.0) as f32;
            for x in [
                w[0] as f32,
                mid,
                f32::from_bits(mid.to_bits().wrapping_add(1)),
                f32::from_bits(mid.to_bits().wrapping_sub(1)),
            ] {
                v.push(x);
                v.push(-x);
            }
        }
        let max = f.max_finite() as f32;
        for k in 0..2000u32 {
            let x = f32::from_bits(max.to_bits() + k * 977);
            v.push(x);
            v.push(-x);
        }
    }
    // Powers of two across the f32 range (ue8m0) and their neighbours.
    for e in -149..=127 {
        let p = 2f32.powi(e);
        for x in [
            p,
            f32::from_bits(p.to_bits() + 1),
            f32::from_bits(p.to_bits().saturating_sub(1)),
        ] {
            v.push(x);
            v.push(-x);
        }
    }
    // f32 subnormals.
    for i in 0..20_000u32 {
        v.push(f32::from_bits(i * 419));
    }
    // Random bit patterns (xorshift; fixed seed so failures reproduce) and random values in the
    // formats' ranges.
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    while v.len() < 1_100_000 {
        let r = next();
        v.push(f32::from_bits(r as u32));
        let scale = [1.0f32, 8.0, 30.0, 500.0, 60000.0][(r >> 40) as usize % 5];
        v.push(((r >> 32) as u32 as f32 / u32::MAX as f32 * 2.0 - 1.0) * scale);
    }
    v
}

struct Tally {
    name: &'static str,
    compared: usize,
    differ: usize,
    first: Option<String>,
}

impl Tally {
    fn new(name: &'static str) -> Tally {
        Tally {
            name,
            compared: 0,
            differ: 0,
            first: None,
        }
    }
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        self.compared += 1;
        if !ok {
            self.differ += 1;
            if self.first.is_none() {
                self.first = Some(what());
            }
        }
    }
}

/// Builds the oracle `name` (see [`oracle`]; it reads its command line with
/// `tests/oracle/oracle_io.h`), runs it on `xs` (`ORACLE INPUT.f32 OUTPUT.bin`) and returns its
/// output.
fn run_on_inputs(name: &str, deps: &[&str], xs: &[f32]) -> Vec<u8> {
    let deps: Vec<&str> = deps
        .iter()
        .copied()
        .chain(["tests/oracle/oracle_io.h"])
        .collect();
    let exe = oracle(name, &deps);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let input = dir.join(format!("{name}-inputs.f32"));
    let output = dir.join(format!("{name}-outputs.bin"));
    let bytes: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(&input, bytes).unwrap();
    let status = Command::new(&exe)
        .arg(&input)
        .arg(&output)
        .status()
        .unwrap();
    assert!(status.success(), "oracle {name} failed");
    std::fs::read(&output).unwrap()
}

/// Prints the tallies as a table under `heading` and fails naming every one with differences.
fn report(heading: &str, tallies: &[Tally]) {
    println!("{heading:<26} {:>10} {:>8}", "compared", "differ");
    for t in tallies {
        println!("{:<26} {:>10} {:>8}", t.name, t.compared, t.differ);
    }
    let bad: Vec<String> = tallies
        .iter()
        .filter(|t| t.differ > 0)
        .map(|t| {
            format!(
                "{}: {} of {} differ; first: {}",
                t.name,
                t.differ,
                t.compared,
                t.first.as_deref().unwrap_or("")
            )
        })
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn conversions_match_cuda_and_cutlass() {
    let xs = inputs();
    let out = run_on_inputs("conversions", &[], &xs);
    let mut pos = 0;
    let f32_at = |pos: &mut usize| {
        let v = f32::from_le_bytes(out[*pos..*pos + 4].try_into().unwrap());
        *pos += 4;
        v
    };

    // Decode tables.
    let mut tallies = Vec::new();
    let same = |a: f32, b: f32| (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits();
    type Decoder = fn(u8) -> f32;
    let decoders: [(&'static str, u32, Decoder); 7] = [
        ("e4m3 decode", 256, |c| E4M3::from_bits(c).to_f32()),
        ("e5m2 decode", 256, |c| E5M2::from_bits(c).to_f32()),
        ("e2m3 decode", 64, |c| E2M3::from_bits(c).to_f32()),
        ("e3m2 decode", 64, |c| E3M2::from_bits(c).to_f32()),
        ("e2m1 decode", 16, |c| E2M1::from_bits(c).to_f32()),
        ("ue8m0 decode", 256, |c| UE8M0::from_bits(c).to_f32()),
        ("ue4m3 decode", 128, |c| UE4M3::from_bits(c).to_f32()),
    ];
    for (name, n, dec) in decoders {
        let mut t = Tally::new(name);
        for c in 0..n {
            let theirs = f32_at(&mut pos);
            let ours = dec(c as u8);
            t.check(same(ours, theirs), || {
                format!("code {c:#04x}: ours {ours:e}, theirs {theirs:e}")
            });
        }
        tallies.push(t);
    }

    // Encodings.
    type Encoder = fn(f32) -> u8;
    let encoders: [(&'static str, Encoder); 12] = [
        ("e4m3 satfinite", |x| {
            E4M3::from_f32_with(x, Saturation::SatFinite).to_bits()
        }),
        ("e4m3 nosat", |x| {
            E4M3::from_f32_with(x, Saturation::NoSat).to_bits()
        }),
        ("e5m2 satfinite", |x| {
            E5M2::from_f32_with(x, Saturation::SatFinite).to_bits()
        }),
        ("e5m2 nosat", |x| {
            E5M2::from_f32_with(x, Saturation::NoSat).to_bits()
        }),
        ("e2m3", |x| E2M3::from_f32(x).to_bits()),
        ("e3m2", |x| E3M2::from_f32(x).to_bits()),
        ("e2m1", |x| E2M1::from_f32(x).to_bits()),
        ("ue8m0 rz satfinite", |x| {
            UE8M0::from_f32_with(x, PowerOfTwoRounding::TowardZero, Saturation::SatFinite).to_bits()
        }),
        ("ue8m0 rp satfinite", |x| {
            UE8M0::from_f32_with(x, PowerOfTwoRounding::Up, Saturation::SatFinite).to_bits()
        }),
        ("ue8m0 rz nosat", |x| {
            UE8M0::from_f32_with(x, PowerOfTwoRounding::TowardZero, Saturation::NoSat).to_bits()
        }),
        ("ue8m0 rp nosat", |x| {
            UE8M0::from_f32_with(x, PowerOfTwoRounding::Up, Saturation::NoSat).to_bits()
        }),
        ("ue4m3 (CUTLASS)", |x| UE4M3::from_f32(x).to_bits()),
    ];
    let mut enc_tallies: Vec<Tally> = encoders.iter().map(|(n, _)| Tally::new(n)).collect();
    let mut tf32 = Tally::new("tf32 (CUTLASS)");
    for &x in &xs {
        for (i, (_, enc)) in encoders.iter().enumerate() {
            let theirs = out[pos + i];
            let ours = enc(x);
            enc_tallies[i].check(ours == theirs, || {
                format!(
                    "x = {x:e} ({:#010x}): ours {ours:#04x}, theirs {theirs:#04x}",
                    x.to_bits()
                )
            });
        }
        pos += 12;
        let theirs = u32::from_le_bytes(out[pos..pos + 4].try_into().unwrap());
        pos += 4;
        // CUTLASS stores `bits + 0x1000` and treats the low 13 bits as don't-care (its `operator
        // float` clears them); compare the value a tensor core reads.
        let ours = Tf32::from_f32(x).to_bits() & !0x1fff;
        let theirs = theirs & !0x1fff;
        tf32.check(ours == theirs, || {
            format!("x = {x:e}: ours {ours:#010x}, theirs {theirs:#010x}")
        });
    }
    tallies.extend(enc_tallies);
    tallies.push(tf32);

    // Packing.
    let mut packing = Tally::new("packing (cute subbyte)");
    let codes = |bits: u32| (0..64u32).map(move |i| ((7 * i + 3) % (1 << bits)) as u8);
    let p4 = PackedVec::from_values(&codes(4).map(E2M1::from_bits).collect::<Vec<_>>());
    let p6a = PackedVec::from_values(&codes(6).map(E2M3::from_bits).collect::<Vec<_>>());
    let p6b = PackedVec::from_values(&codes(6).map(E3M2::from_bits).collect::<Vec<_>>());
    for (ours, n) in [
        (p4.as_bytes(), 32),
        (p6a.as_bytes(), 48),
        (p6b.as_bytes(), 48),
    ] {
        let theirs = &out[pos..pos + n];
        pos += n;
        for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
            packing.check(a == b, || {
                format!("byte {i}: ours {a:#04x}, theirs {b:#04x}")
            });
        }
    }
    tallies.push(packing);
    assert_eq!(pos, out.len(), "oracle output has unread bytes");

    report("format / mode", &tallies);
    assert!(xs.len() >= 1_000_000);
}

#[test]
fn scale_factor_layout_matches_cutlass() {
    let exe = oracle("sf_layout", &[]);
    let output = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sf-layout.bin");
    assert!(Command::new(&exe).arg(&output).status().unwrap().success());
    let out = std::fs::read(&output).unwrap();
    let words: Vec<u32> = out
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let mut pos = 0;
    let (mut cases, mut compared, mut differ) = (0, 0usize, 0usize);
    let mut first = None;
    for vec in [16usize, 32, 64] {
        for m in [1usize, 100, 128, 129, 300] {
            for k in [16usize, 48, 96, 200, 544] {
                for l in [1usize, 2] {
                    let layout = ScaleFactorLayout::new(m, k, l, vec);
                    // CUTLASS's cosize is one past the largest offset; our size is the whole padded
                    // buffer, which ends at the same place.
                    let cosize = words[pos] as usize;
                    pos += 1;
                    compared += 1;
                    if cosize != layout.size() {
                        differ += 1;
                        first.get_or_insert(format!(
                            "size vec {vec} m {m} k {k} l {l}: ours {} theirs {cosize}",
                            layout.size()
                        ));
                    }
                    for li in 0..l {
                        for mi in 0..m {
                            for ki in 0..k {
                                let theirs = words[pos] as usize;
                                pos += 1;
                                compared += 1;
                                if layout.offset(mi, ki, li) != theirs {
                                    differ += 1;
                                    first.get_or_insert(format!(
                                        "vec {vec} M {m} K {k} L {l} at ({mi},{ki},{li}): ours {} theirs {theirs}",
                                        layout.offset(mi, ki, li)
                                    ));
                                }
                            }
                        }
                    }
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(pos, words.len());
    println!("scale-factor layout: {cases} shapes, {compared} offsets and sizes compared, {differ} differ");
    assert_eq!(differ, 0, "first difference: {}", first.unwrap_or_default());
}

/// The quantization kernels' FP6/FP4 encoders (`cutlass-gemm-sys/csrc/narrow_encode.cuh`), built for the
/// host, against this crate's codec: the f32 encoder on the million inputs above, the two-lane
/// bf16x2/f16x2 encoder on every finite 16-bit value of each lane, and the packers.
#[test]
fn device_encoders_match_host_codec() {
    let xs = inputs();
    let out = run_on_inputs(
        "encoders",
        &["../cutlass-gemm-sys/csrc/narrow_encode.cuh"],
        &xs,
    );
    let mut pos = 0;

    type Encoder = fn(f32) -> u8;
    let encoders: [(&'static str, Encoder); 3] = [
        ("e2m3", |x| E2M3::from_f32(x).to_bits()),
        ("e3m2", |x| E3M2::from_f32(x).to_bits()),
        ("e2m1", |x| E2M1::from_f32(x).to_bits()),
    ];
    let mut tallies = Vec::new();
    let mut f32_tallies: Vec<Tally> = ["f32 e2m3", "f32 e3m2", "f32 e2m1"]
        .into_iter()
        .map(Tally::new)
        .collect();
    for &x in &xs {
        for (i, (_, enc)) in encoders.iter().enumerate() {
            let (ours, theirs) = (enc(x), out[pos + i]);
            f32_tallies[i].check(ours == theirs, || {
                format!(
                    "x = {x:e} ({:#010x}): host {ours:#04x}, device encoder {theirs:#04x}",
                    x.to_bits()
                )
            });
        }
        pos += 3;
    }
    tallies.extend(f32_tallies);

    let lanes: [fn(u16) -> f32; 2] = [
        |u| half::bf16::from_bits(u).to_f32(),
        |u| half::f16::from_bits(u).to_f32(),
    ];
    const NAMES: [[&str; 3]; 2] = [
        ["bf16x2 e2m3", "bf16x2 e3m2", "bf16x2 e2m1"],
        ["f16x2 e2m3", "f16x2 e3m2", "f16x2 e2m1"],
    ];
    for (l, to_f32) in lanes.iter().enumerate() {
        for (f, (_, enc)) in encoders.iter().enumerate() {
            let mut t = Tally::new(NAMES[l][f]);
            for u in 0..=u16::MAX {
                let hi = (u as u32 * 40503) as u16;
                for (lane, bits) in [(0, u), (1, hi)] {
                    let x = to_f32(bits);
                    // The two-lane encoder's contract excludes NaN (blocks with NaN are encoded
                    // separately); infinities saturate like any large value.
                    if x.is_nan() {
                        continue;
                    }
                    let (ours, theirs) = (enc(x), out[pos + 2 * u as usize + lane]);
                    t.check(ours == theirs, || {
                        format!("lane {lane} = {x:e} ({bits:#06x}): host {ours:#04x}, device encoder {theirs:#04x}")
                    });
                }
            }
            pos += 2 * 65536;
            tallies.push(t);
        }
    }

    let mut odd: Vec<Tally> = [
        "f32 pairs via f16 odd e2m3",
        "f32 pairs via f16 odd e3m2",
        "f32 pairs via f16 odd e2m1",
    ]
    .into_iter()
    .map(Tally::new)
    .collect();
    for pair in xs.chunks_exact(2) {
        for (f, (_, enc)) in encoders.iter().enumerate() {
            for (lane, &x) in pair.iter().enumerate() {
                // NaN is routed to the f32 encoder by the kernels.
                if x.is_nan() {
                    continue;
                }
                let (ours, theirs) = (enc(x), out[pos + 2 * f + lane]);
                odd[f].check(ours == theirs, || {
                    format!("lane {lane} = {x:e} ({:#010x}): host {ours:#04x}, device encoder {theirs:#04x}", x.to_bits())
                });
            }
        }
        pos += 6;
    }
    tallies.extend(odd);

    let mut packing = Tally::new("pack fp4/fp6 (3 packers)");
    for g in xs.chunks_exact(8) {
        let p4 = PackedVec::from_values(&g.iter().map(|&x| E2M1::from_f32(x)).collect::<Vec<_>>());
        let p6 = PackedVec::from_values(&g.iter().map(|&x| E2M3::from_f32(x)).collect::<Vec<_>>());
        for (ours, n) in [(p4.as_bytes(), 4), (p6.as_bytes(), 6), (p4.as_bytes(), 4)] {
            let theirs = &out[pos..pos + n];
            pos += n;
            packing.check(ours == theirs, || {
                format!("group {g:?}: host {ours:02x?}, device packer {theirs:02x?}")
            });
        }
    }
    tallies.push(packing);
    assert_eq!(pos, out.len(), "oracle output has unread bytes");

    report("encoder", &tallies);
}
