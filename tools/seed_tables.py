#!/usr/bin/env python3
"""Extracts the tile tables (4-13, 16-20) of the seed document into Rust data.

usage: tools/seed_tables.py [SEED] > cutlass-gemm-catalog/src/tile_tables.rs
       tools/seed_tables.py --check [SEED]   (exit 1 when cutlass-gemm-catalog/src/tile_tables.rs differs)

SEED defaults to ../shared/seeds/cutlass-blackwell-sm100-gemms.txt next to the repository. The
seed's tables are laid out one cell per paragraph; this reads them cell by cell. Tables 1-3 (type
rows) are hand-written in cutlass-gemm-catalog/src/tables.rs and checked by tests against the same document.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SEED = os.path.join(ROOT, "..", "shared", "seeds", "cutlass-blackwell-sm100-gemms.txt")
OUT = os.path.join(ROOT, "cutlass-gemm-catalog", "src", "tile_tables.rs")

# The type rows each SM120 table serves (their titles name type families, not rows): dense rows of
# Table 2 (f8f6f4) and Table 3 (block scaled) with the matching families and kinds.
SM120_SERVES = {
    16: [(2, r) for r in range(1, 10)],
    17: [(3, 1)],
    18: [(3, 2)],
    19: [(3, 3)],
    20: [(3, r) for r in range(3, 12)],
}


def cells(lines, table):
    start = next(i for i, l in enumerate(lines) if l.startswith(f"Table {table}:"))
    out = []
    for l in lines[start + 1:]:
        if re.match(r"Table \d+:", l) or l.startswith("MMA_TileShape_K is") or l.startswith("Specialized policies"):
            break
        if l.startswith("Blackwell SM120") or l.startswith("Table 14:"):
            break
        if l:
            out.append(l)
    return lines[start], out


def serves_sm100(title):
    if "All rows of Table 1" in title:
        return [(1, r) for r in range(1, 11)]
    m = re.search(r"\(Rows? ([\d,\sand]+) of Table (\d)\)", title)
    rows = [int(x) for x in re.findall(r"\d+", m.group(1))]
    return [(int(m.group(2)), r) for r in rows]


def tile(shape):
    m = re.fullmatch(r"(\d+)x(\d+)x(.+)", shape)
    mm, nn, k = m.groups()
    if k == "(4*MMA-K)":
        kk = "TileK::MmaK4"
    elif k == "(2/4*MMA-K)":
        kk = "TileK::SparseMmaK"
    else:
        kk = f"TileK::Fixed({int(k)})"
    return mm, nn, kk


def parse(seed):
    lines = [l.strip() for l in open(seed, encoding="utf-8").read().split("\n")]
    tables = []
    for t in list(range(4, 14)) + list(range(16, 21)):
        title, cs = cells(lines, t)
        sm100 = t <= 13
        header = 8 if sm100 else 6
        assert cs[:header][-1] == "Dispatch Policy", (t, cs[:header])
        body = cs[header:]
        width = 8 if sm100 else 6
        rows = []
        i = 0
        while i + width <= len(body) and (body[i] in ("Dense", "Sparse") if sm100 else re.match(r"\d+x\d+x", body[i])):
            r = body[i:i + width]
            if sm100:
                sparse, sm, shape, tn, tt, nt, nn, pol = r
                sparse = sparse == "Sparse"
                sm = int(sm[0])
            else:
                shape, tn, tt, nt, nn, pol = r
                sparse, sm = False, 1
            assert all(x in ("Y", "N") for x in (tn, tt, nt, nn)), (t, r)
            rows.append((sparse, sm, tile(shape), (tn, tt, nt, nn), [p.strip() for p in pol.split(" or ")]))
            i += width
        serves = serves_sm100(title) if sm100 else SM120_SERVES[t]
        tables.append((t, title.split(":", 1)[1].strip(), sm100, serves, rows))
    return tables


def emit(tables):
    o = []
    o.append("// generated, do not edit: tools/seed_tables.py from shared/seeds/cutlass-blackwell-sm100-gemms.txt")
    o.append("//! Tables 4-13 (SM100) and 16-20 (SM120) of CUTLASS's Blackwell GEMM documentation: valid MMA tile shapes, layouts and")
    o.append("//! dispatch policies, and the type rows each table serves.")
    o.append("")
    o.append("use crate::tables::{TileK, TileRow, TileTable};")
    o.append("use crate::types::Arch;")
    o.append("")
    o.append("/// The tile tables, in the documentation's order.")
    o.append("pub const TILE_TABLES: &[TileTable] = &[")
    for t, title, sm100, serves, rows in tables:
        o.append("    TileTable {")
        o.append(f"        table: {t},")
        o.append(f"        arch: Arch::{'Sm100a' if sm100 else 'Sm120a'},")
        o.append(f"        title: {title!r},".replace("'", '"') if '"' not in title else f"        title: {title!r},")
        o.append("        type_rows: &[" + ", ".join(f"({a}, {b})" for a, b in serves) + "],")
        o.append("        rows: &[")
        for sparse, sm, (mm, nn, kk), lay, pols in rows:
            lays = ", ".join("true" if x == "Y" else "false" for x in lay)
            pol = ", ".join(f'"{p}"' for p in pols)
            o.append(f"            TileRow {{ sparse: {str(sparse).lower()}, sm: {sm}, m: {mm}, n: {nn}, k: {kk}, tn_tt_nt_nn: [{lays}], policies: &[{pol}] }},")
        o.append("        ],")
        o.append("    },")
    o.append("];")
    return "\n".join(o) + "\n"


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    seed = args[0] if args else DEFAULT_SEED
    text = emit(parse(seed))
    if check:
        current = open(OUT, encoding="utf-8").read()
        if current != text:
            sys.stderr.write(f"{OUT} differs from what the seed gives; run tools/seed_tables.py > {OUT}\n")
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
