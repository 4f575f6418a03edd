#!/usr/bin/env bash
# Fills a platform package (packages/platforms/<dir>) with a built addon and the shared libraries it
# needs that not every glibc system has, taken from the Debian packages installed here: the addon at
# the package's root with RUNPATH $ORIGIN/lib, the libraries in lib/ with RUNPATH $ORIGIN (so that
# they find each other there too), and THIRD_PARTY_LICENSES with the Debian copyright file of each
# library, the common licence texts those files refer to, and the licence of the node-addon-api the
# addon was built with (resolved from the addon's folder; its headers are compiled into every addon).
# Checks at the end that the copy resolves every bundled library from its own lib/ with
# LD_LIBRARY_PATH empty.
#   bash bundle-addon.sh <built addon .node> <platform package folder>
set -euo pipefail
addon="$1"

for tool in patchelf strip dpkg-query ldd node; do
  command -v "$tool" >/dev/null || {
    echo "bundle-addon.sh needs $tool: sudo apt-get install patchelf binutils (or bash tools/setup.sh in the repository)" >&2
    exit 1
  }
done
[[ -f "$addon" ]] || {
  echo "no built addon at $addon: build it first (npm run build:native -w <its package>)" >&2
  exit 1
}
# Absolute, as ldd prints the libraries that $ORIGIN finds.
package=$(readlink -f "$2")

# The C and C++ runtimes: on every glibc system, and loaded by Node itself before any addon (a
# bundled copy of one of them would never be used).
system='^(linux-vdso\.so\.1|ld-linux-[a-z0-9_-]+\.so\.[0-9]+|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libresolv\.so\.2|libgcc_s\.so\.1|libstdc\+\+\.so\.6)$'

name=$(basename "$addon")
lib="$package/lib"
licences="$package/THIRD_PARTY_LICENSES"
rm -rf "$lib" "${package:?}/$name" "$licences"
mkdir -p "$lib"

{
  echo "Third-party software in this package, with its licences."
  echo
  echo "$name is built from tensorlane's sources (Apache-2.0) with node-addon-api's headers:"
  echo
  cat "$(cd "$(dirname "$addon")" && node -p "require('path').join(require('path').dirname(require.resolve('node-addon-api/package.json')), 'LICENSE.md')")"
} >"$licences"

bundled=()
copyrights=()
while read -r soname path; do
  [[ "$soname" =~ $system ]] && continue
  [[ "$path" == /* ]] || {
    echo "$addon needs $soname, which is not installed here ($path)" >&2
    exit 1
  }
  real=$(readlink -f "$path")
  # The Debian package that installed it (dpkg knows a file under /usr/lib or /lib, whichever it unpacked to).
  debian=$(dpkg-query -S "*/$(basename "$real")" | head -1 | cut -d: -f1)
  copyright="/usr/share/doc/$debian/copyright"
  [[ -f "$copyright" ]] || {
    echo "$soname comes from the Debian package $debian, which has no $copyright: cannot bundle it without its licence" >&2
    exit 1
  }
  cp "$real" "$lib/$soname"
  chmod 0755 "$lib/$soname"
  patchelf --set-rpath '$ORIGIN' "$lib/$soname"
  bundled+=("$soname")
  copyrights+=("$copyright")
  {
    echo
    echo "================================================================================"
    echo "lib/$soname: Debian package $debian $(dpkg-query -W -f='${Version}' "$debian"), $copyright"
    echo "================================================================================"
    cat "$copyright"
  } >>"$licences"
done < <(LD_LIBRARY_PATH='' ldd "$addon" | awk '$2 == "=>" { print $1, $3 }')

# The licence texts the copyright files name instead of quoting (LGPL-2.1 for libnl, GPL-2 for rdma-core's alternatives).
if ((${#copyrights[@]} > 0)); then
  for common in $(grep -ho '/usr/share/common-licenses/[A-Za-z0-9.+_-]*[A-Za-z0-9+_-]' "${copyrights[@]}" | sort -u); do
    [[ -f "$common" ]] || continue
    {
      echo
      echo "================================================================================"
      echo "$common (named by the copyright files above)"
      echo "================================================================================"
      cat "$common"
    } >>"$licences"
  done
fi

cp "$addon" "$package/$name"
strip --strip-unneeded "$package/$name"
patchelf --set-rpath '$ORIGIN/lib' "$package/$name"
((${#bundled[@]} > 0)) || rmdir "$lib"

# The package must not depend on the libraries of the machine that built it.
resolved=$(LD_LIBRARY_PATH='' ldd "$package/$name")
for soname in "${bundled[@]}"; do
  grep -q "^[[:space:]]*$soname => $lib/$soname " <<<"$resolved" || {
    echo "$package/$name does not load $soname from its lib/:" >&2
    echo "$resolved" >&2
    exit 1
  }
done
echo "$package: $name${bundled[*]:+ with lib/${bundled[*]}}"
