#!/usr/bin/env python3
"""Compare the device code of two builds of the kernel library, kernel by kernel.

Usage: tools/sass_diff.py [--subset] OLD NEW

OLD and NEW are each a static library (`libcutlass_rs_kernels.a` from a build's OUT_DIR), an object
file, or a folder of objects of one build. For every device function of every cubin in the
objects' fat binaries (every `.text.<symbol>` section, keyed by the cubin's architecture flags and
the symbol) it compares the SASS bytes, the register count, the kernel's attributes
(`.nv.info.<symbol>`, and the cubin-wide `.nv.info` entries that name the symbol, such as its
frame and stack sizes), and every other `<section>.<symbol>` (shared memory by size, constant
banks by contents). Symbol-table indices, which depend on what else the cubin holds, are left out.
Anonymous namespaces of hand-written sources carry a hash of the compilation that is dropped from
the names.

The exit status is 0 when both sides hold the same functions with the same device code, and 1 on
any difference, on a function found on one side only (with `--subset`, NEW may lack some of OLD's),
when NEW holds no function at all, or when one side holds two different copies of one function
(a folder mixing builds, such as an object cache, does).

What it is for: a change that should not change device code (how sources are grouped into nvcc
compilations, host-side code, renamed namespaces) is checked without a GPU. Needs Python's
standard library only; reads uncompressed fat binaries (nvcc's default for these objects).
"""

import re
import struct
import sys
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
KIND_CUBIN = 2
EIFMT_SVAL = 4
EIATTR_PARAM_CBANK = 10


SHT_SYMTAB = 2
SHT_NOBITS = 8


def elf_sections(data):
    """Section name -> (bytes, sh_info, sh_size, sh_type) of a 64-bit little-endian ELF image."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF image")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = []
    for i in range(shnum):
        name, typ, _flags, _addr, offset, size, _link, info = struct.unpack_from(
            "<IIQQQQII", data, shoff + i * shentsize
        )
        headers.append((name, typ, offset, size, info))
    strtab = headers[shstrndx][2]
    out = {}
    for name, typ, offset, size, info in headers:
        end = data.index(b"\0", strtab + name)
        body = b"" if typ == SHT_NOBITS else data[offset : offset + size]
        out[data[strtab + name : end].decode()] = (body, info, size, typ)
    return out


def symbol_names(cubin, sections):
    """Symbol-table index -> name of a cubin."""
    symtab = sections.get(".symtab")
    strtab = sections.get(".strtab")
    if symtab is None or strtab is None:
        return {}
    names = {}
    for i in range(len(symtab[0]) // 24):
        name = struct.unpack_from("<I", symtab[0], 24 * i)[0]
        end = strtab[0].index(b"\0", name)
        names[i] = strtab[0][name:end].decode()
    return names


def cubins(fatbin):
    """The cubin payloads of a fat binary (every fat binary concatenated in the section)."""
    pos = 0
    while pos + 16 <= len(fatbin):
        magic, _version, header_size, size = struct.unpack_from("<IHHQ", fatbin, pos)
        if magic != FATBIN_MAGIC:
            break
        entry, end = pos + header_size, pos + header_size + size
        while entry < end:
            kind, _v, entry_header, payload = struct.unpack_from("<HHIQ", fatbin, entry)
            body = fatbin[entry + entry_header : entry + entry_header + payload]
            if kind == KIND_CUBIN:
                if body[:4] != b"\x7fELF":
                    raise ValueError("compressed cubin: rebuild without fatbin compression")
                yield body
            entry += entry_header + payload
        pos = end


def attribute_entries(nv_info):
    """(format, attribute, value) of each entry of an `.nv.info` section."""
    p = 0
    while p + 4 <= len(nv_info):
        fmt, attr = nv_info[p], nv_info[p + 1]
        if fmt == EIFMT_SVAL:
            size = struct.unpack_from("<H", nv_info, p + 2)[0]
            yield fmt, attr, nv_info[p + 4 : p + 4 + size]
            p += 4 + size
        else:
            yield fmt, attr, nv_info[p + 2 : p + 4]
            p += 4


def attributes(nv_info):
    """The attributes of `.nv.info.<symbol>`, the symbol index of PARAM_CBANK dropped."""
    out = []
    for fmt, attr, value in attribute_entries(nv_info):
        if fmt == EIFMT_SVAL and attr == EIATTR_PARAM_CBANK:
            value = value[4:]
        out.append((attr, value))
    return out


def module_attributes(nv_info, names):
    """Symbol name -> the cubin-wide `.nv.info` entries that name it (by their first word, a
    symbol index), with the index dropped."""
    out = {}
    for fmt, attr, value in attribute_entries(nv_info):
        if fmt == EIFMT_SVAL and len(value) >= 4:
            index = struct.unpack_from("<I", value)[0]
            if index in names:
                out.setdefault(names[index], []).append((attr, value[4:]))
    return out


def normalized(symbol):
    return re.sub(r"_GLOBAL__N__[0-9a-f]{8}_(\d+_\w+?_cu)_[0-9a-f]{8}", r"_GLOBAL__N__\1", symbol)


def kernels_of_object(data):
    """[((architecture flags, normalized symbol), device code)] of one relocatable object."""
    sections = elf_sections(data)
    out = []
    if ".nv_fatbin" not in sections:
        return out
    for cubin in cubins(sections[".nv_fatbin"][0]):
        arch = hex(struct.unpack_from("<I", cubin, 0x30)[0])  # e_flags
        cs = elf_sections(cubin)
        names = symbol_names(cubin, cs)
        module = module_attributes(cs.get(".nv.info", (b"",))[0], names)
        for name, (text, info, _size, _typ) in cs.items():
            if not name.startswith(".text."):
                continue
            symbol = name[len(".text.") :]
            code = {
                "sass": text,
                "registers": info >> 24,
                "attributes": attributes(cs.get(".nv.info." + symbol, (b"",))[0]),
                "cubin-wide attributes": module.get(symbol, []),
            }
            for other, (body, _info, size, typ) in cs.items():
                if other.endswith("." + symbol) and not other.startswith(
                    (".text.", ".nv.info.", ".rel")
                ):
                    prefix = other[: -len(symbol) - 1]
                    code[prefix] = size if typ == SHT_NOBITS else body
            out.append(((arch, normalized(symbol)), code))
    return out


def archive_members(data):
    """The members of an `ar` archive (System V / GNU, or BSD long names); not thin archives."""
    if data[:8] == b"!<thin>\n":
        raise ValueError("a thin archive holds no members: pass its objects' folder")
    if data[:8] != b"!<arch>\n":
        raise ValueError("not an ar archive")
    pos = 8
    while pos + 60 <= len(data):
        name = data[pos : pos + 16].decode().strip()
        size = int(data[pos + 48 : pos + 58].decode().strip())
        body = data[pos + 60 : pos + 60 + size]
        if name.startswith("#1/"):  # BSD: the name precedes the body
            body = body[int(name[3:]) :]
        if name not in ("/", "//", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED"):
            yield body
        pos += 60 + size + (size & 1)


def kernels(path, side):
    """(architecture flags, symbol) -> device code of every object under `path`; a function with
    two different copies is reported and counted."""
    path = Path(path)
    if path.is_dir():
        blobs = [p.read_bytes() for p in sorted(path.glob("*.o"))]
    else:
        data = path.read_bytes()
        blobs = list(archive_members(data)) if data[:8] in (b"!<arch>\n", b"!<thin>\n") else [data]
    out, conflicts = {}, 0
    for blob in blobs:
        if blob[:4] != b"\x7fELF":
            continue
        for key, code in kernels_of_object(blob):
            if key in out and out[key] != code:
                conflicts += 1
                print(f"two different copies in {side}: {key[1]} ({key[0]})")
            out.setdefault(key, code)
    return out, conflicts


def main(argv):
    subset = "--subset" in argv[1:3]
    args = [a for a in argv[1:] if a != "--subset"]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    (old, old_conflicts), (new, new_conflicts) = kernels(args[0], "OLD"), kernels(args[1], "NEW")
    same, different, missing = 0, 0, 0
    for key, code in sorted(new.items()):
        arch, symbol = key
        if key not in old:
            missing += 1
            print(f"only in NEW: {symbol} ({arch})")
        elif old[key] != code:
            different += 1
            fields = [f for f in sorted(set(code) | set(old[key])) if code.get(f) != old[key].get(f)]
            print(f"differs ({', '.join(fields)}): {symbol} ({arch})")
        else:
            same += 1
    only_old = sorted(set(old) - set(new))
    if not subset:
        for arch, symbol in only_old:
            print(f"only in OLD: {symbol} ({arch})")
    print(
        f"{len(new)} functions in NEW: {same} with the same device code as in OLD, "
        f"{different} different, {missing} not in OLD; {len(only_old)} only in OLD; "
        f"{old_conflicts + new_conflicts} functions with two different copies on one side"
    )
    ok = (
        len(new) > 0
        and different == 0
        and missing == 0
        and old_conflicts + new_conflicts == 0
        and (subset or not only_old)
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
