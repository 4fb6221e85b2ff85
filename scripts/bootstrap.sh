#!/usr/bin/env bash
# Installs what building the kernels needs, into the gitignored third_party/ of this checkout:
#   - the CUDA 13.0 compiler, runtime and CCCL headers, from PyPI wheels (no system CUDA needed);
#   - the CUTLASS 4.2.0 C++ headers, from the nvidia-cutlass wheel;
#   - libclang for bindgen, from Debian (needs root; skipped when libclang is already present).
# Versions are pinned in scripts/toolchain-requirements.txt and nowhere else.
# Idempotent: a second run with the same pins does nothing. Overrides: CUDA_HOME/CUDA_PATH and
# CUTLASS_DIR make the build use another toolchain, and this script then installs nothing for it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
req="$root/scripts/toolchain-requirements.txt"
dest="$root/third_party/toolchain"
stamp="$dest/.installed-from"

have_libclang() {
  [ -n "${LIBCLANG_PATH:-}" ] && return 0
  # libclang itself (libclang.so*, libclang-N.so*), not libclang-cpp, which bindgen cannot load.
  ldconfig -p 2>/dev/null | grep -qE 'libclang(-[0-9.]+)?\.so' && return 0
  compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null || compgen -G '/usr/lib/llvm-*/lib/libclang-[0-9]*.so*' >/dev/null
}

if ! have_libclang; then
  echo "bootstrap: installing libclang-dev (for bindgen) with apt-get"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev >/dev/null
  else
    echo "bootstrap: libclang not found; run as root: apt-get update && apt-get install -y libclang-dev" >&2
    exit 1
  fi
fi

if [ -n "${CUDA_HOME:-${CUDA_PATH:-}}" ] && [ -n "${CUTLASS_DIR:-}" ]; then
  echo "bootstrap: CUDA_HOME/CUDA_PATH and CUTLASS_DIR are set; nothing to install"
  exit 0
fi

if [ -f "$stamp" ] && cmp -s "$stamp" "$req" && [ -x "$dest/nvidia/cu13/bin/nvcc" ]; then
  exit 0
fi

echo "bootstrap: installing the CUDA 13.0 compiler and CUTLASS 4.2.0 headers into third_party/toolchain"
rm -rf "$dest"
mkdir -p "$dest"
python3 -m pip install --quiet --disable-pip-version-check --no-deps --no-warn-script-location \
  --target "$dest" -r "$req" 2>&1 | grep -v "Running pip as the 'root' user" || true
[ -x "$dest/nvidia/cu13/bin/nvcc" ] || { echo "bootstrap: nvcc missing after pip install" >&2; exit 1; }
[ -f "$dest/cutlass_library/source/include/cutlass/cutlass.h" ] || { echo "bootstrap: CUTLASS headers missing" >&2; exit 1; }
cp "$req" "$stamp"
echo "bootstrap: done ($("$dest/nvidia/cu13/bin/nvcc" --version | tail -n 1))"
