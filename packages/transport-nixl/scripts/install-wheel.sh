#!/usr/bin/env bash
# Installs NIXL's C API (libnixl_capi.so, its plugins and a bundled UCX) from the PyPI wheel
# nixl-cu12 into <repo>/.tools/nixl, where the transport's loader looks first. The wheel ships no
# headers and the transport needs none: the addon dlopens the library at run time.
# --no-deps: the Python side (torch, ...) is not needed for the C API. Idempotent: an installed
# matching version is left alone. tools/setup.sh calls this script.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
target="${NIXL_INSTALL_DIR:-$repo/.tools/nixl}"
version="1.5.1"
lib="$target/.nixl_cu12.mesonpy.libs/libnixl_capi.so"

if [[ -f "$lib" && -d "$target/nixl_cu12-$version.dist-info" ]]; then
  echo "nixl-cu12 $version already installed in $target"
  exit 0
fi
python3 -m pip install --quiet --no-deps --upgrade --target "$target" "nixl-cu12==$version"
[[ -f "$lib" ]] || { echo "nixl-cu12 installed, but $lib is missing: the wheel's layout changed" >&2; exit 1; }
echo "nixl-cu12 $version installed in $target"
