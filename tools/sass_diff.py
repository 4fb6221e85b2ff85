#!/usr/bin/env python3
"""Compare the device code of two builds of the kernel library, kernel by kernel.

Usage: tools/sass_diff.py OLD NEW

OLD and NEW are each a static library (`libcutlass_rs_kernels.a` from a build's OUT_DIR), an object
file, or a folder of objects (an object cache, `CUTLASS_RS_CACHE_DIR/objects`). For every device
kernel (every `.text.<symbol>` section of every cubin in the objects' fat binaries) it compares the
SASS bytes, the register count, the shared and constant-bank sizes and the kernel's attributes
(`.nv.info.<symbol>`, without the symbol-table index that `EIATTR_PARAM_CBANK` carries, which
depends on what else the cubin holds). Anonymous namespaces of hand-written sources carry a hash
of the compilation that is dropped from the names. The exit status is 0 when every kernel of NEW
is in OLD with the same device code, 1 otherwise.

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


def elf_sections(data):
    """Section name -> (bytes, sh_info, sh_size) of a 64-bit little-endian ELF image."""
    if data[:4] != b"\x7fELF":
        raise ValueError("not an ELF image")
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
        body = b"" if typ == 8 else data[offset : offset + size]  # SHT_NOBITS has no bytes
        out[data[strtab + name : end].decode()] = (body, info, size)
    return out


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


def attributes(nv_info):
    """The attributes of `.nv.info.<symbol>`, the symbol index of PARAM_CBANK dropped."""
    out, p = [], 0
    while p < len(nv_info):
        fmt, attr = nv_info[p], nv_info[p + 1]
        if fmt == EIFMT_SVAL:
            size = struct.unpack_from("<H", nv_info, p + 2)[0]
            value = nv_info[p + 4 : p + 4 + size]
            if attr == EIATTR_PARAM_CBANK:
                value = value[4:]
            out.append((attr, value))
            p += 4 + size
        else:
            out.append((attr, nv_info[p + 2 : p + 4]))
            p += 4
    return out


def normalized(symbol):
    return re.sub(r"_GLOBAL__N__[0-9a-f]{8}_(\d+_\w+?_cu)_[0-9a-f]{8}", r"_GLOBAL__N__\1", symbol)


def kernels_of_object(data):
    """Normalized symbol -> the kernel's device code, for one relocatable object."""
    sections = elf_sections(data)
    out = {}
    if ".nv_fatbin" not in sections:
        return out
    for cubin in cubins(sections[".nv_fatbin"][0]):
        cs = elf_sections(cubin)
        for name, (text, info, _size) in cs.items():
            if not name.startswith(".text."):
                continue
            symbol = name[len(".text.") :]
            out[normalized(symbol)] = {
                "sass": text,
                "registers": info >> 24,
                "attributes": attributes(cs.get(".nv.info." + symbol, (b"",))[0]),
                "shared bytes": cs.get(".nv.shared." + symbol, (b"", 0, 0))[2],
                "constant bank 0 bytes": cs.get(".nv.constant0." + symbol, (b"", 0, 0))[2],
            }
    return out


def archive_members(data):
    """The members of a System V / GNU `ar` archive."""
    if data[:8] != b"!<arch>\n":
        raise ValueError("not an ar archive")
    pos = 8
    while pos + 60 <= len(data):
        name = data[pos : pos + 16].decode().strip()
        size = int(data[pos + 48 : pos + 58].decode().strip())
        body = data[pos + 60 : pos + 60 + size]
        if name not in ("/", "//", "/SYM64/"):
            yield body
        pos += 60 + size + (size & 1)


def kernels(path):
    path = Path(path)
    if path.is_dir():
        blobs = [p.read_bytes() for p in sorted(path.glob("*.o"))]
    else:
        data = path.read_bytes()
        blobs = list(archive_members(data)) if data[:8] == b"!<arch>\n" else [data]
    out = {}
    for blob in blobs:
        if blob[:4] == b"\x7fELF":
            out.update(kernels_of_object(blob))
    return out


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    old, new = kernels(argv[1]), kernels(argv[2])
    same, different, missing = 0, 0, 0
    for symbol, code in sorted(new.items()):
        if symbol not in old:
            missing += 1
            print(f"only in NEW: {symbol}")
        elif old[symbol] != code:
            different += 1
            fields = [f for f in code if code[f] != old[symbol][f]]
            print(f"differs ({', '.join(fields)}): {symbol}")
        else:
            same += 1
    only_old = len(set(old) - set(new))
    print(
        f"{len(new)} kernels in NEW: {same} with the same device code as in OLD, "
        f"{different} different, {missing} not in OLD; {only_old} kernels only in OLD"
    )
    return 0 if different == 0 and missing == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
