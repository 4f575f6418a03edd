#!/usr/bin/env bash
# Installs NIXL's C API (libnixl_capi.so, its plugins and a bundled UCX) from the PyPI wheel
# nixl-cu12 into <repo>/.tools/nixl, where the transport's loader looks first. The wheel ships no
# headers and the transport needs none: the addon dlopens the library at run time.
# tools/setup.sh calls this script; it is idempotent.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
# The installer ships with @tensorlane/core (its native kit), a peer dependency of this package.
installer="$(cd "$here" && node -p "require.resolve('@tensorlane/core/native-kit/install-wheel.sh')")"
exec bash "$installer" "${NIXL_INSTALL_DIR:-$repo/.tools/nixl}" nixl-cu12==1.5.1 \
  -- .nixl_cu12.mesonpy.libs/libnixl_capi.so
