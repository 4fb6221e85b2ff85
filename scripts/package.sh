#!/usr/bin/env bash
# Packages the three published crates (cutlass-gemm-catalog, cutlass-gemm-sys, cutlass-gemm).
#
# cutlass-gemm-sys ships the CUTLASS 4.2 headers, so that a user with only a CUDA compiler can
# build it: they are copied here, at packaging time, from the pinned nvidia-cutlass wheel
# (third_party/, scripts/bootstrap.sh) or CUTLASS_DIR into cutlass-gemm-sys/cutlass/ (gitignored,
# never committed, removed again afterwards), with CUTLASS's license. Then:
#   scripts/package.sh                      cargo package (builds each packaged crate)
#   scripts/package.sh --no-verify          cargo package without the verifying build
#   scripts/package.sh publish --dry-run    cargo publish --dry-run
# Extra arguments go to cargo.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=${CUTLASS_DIR:-$root/third_party/toolchain/cutlass_library/source}
dest=$root/cutlass-gemm-sys/cutlass
[ -f "$src/include/cutlass/version.h" ] || {
  echo "package: no CUTLASS headers at $src (run scripts/bootstrap.sh or set CUTLASS_DIR)" >&2
  exit 1
}
license=""
for l in "$src/LICENSE.txt" "$src/../LICENSE.txt" "$root"/third_party/toolchain/nvidia_cutlass-*.dist-info/licenses/LICENSE.txt; do
  [ -f "$l" ] && { license=$l; break; }
done
[ -n "$license" ] || { echo "package: CUTLASS's LICENSE.txt not found beside $src" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest/tools/util"
cp -r "$src/include" "$dest/include"
cp -r "$src/tools/util/include" "$dest/tools/util/include"
cp "$license" "$dest/LICENSE.txt"
cd "$root"
# cargo verifies each package by building it outside this repository, where discovery does not
# look in third_party/: name the bootstrapped compiler unless a toolchain is already set.
if [ -z "${NVCC:-}${CUDA_HOME:-}${CUDA_PATH:-}${CUDA_ROOT:-}" ] && [ -x "$root/third_party/toolchain/nvidia/cu13/bin/nvcc" ]; then
  export NVCC="$root/third_party/toolchain/nvidia/cu13/bin/nvcc"
fi
cmd=package
if [ "${1:-}" = publish ]; then cmd=publish; shift; fi
rc=0
cargo "$cmd" -p cutlass-gemm-catalog -p cutlass-gemm-sys -p cutlass-gemm "$@" || rc=$?
# The copy served the package; the checkout keeps using third_party/ (or what discovery finds).
rm -rf "$dest"
exit $rc
