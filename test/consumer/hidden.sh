#!/usr/bin/env bash
# Runs a command as on a machine without Debian's Gloo, a compiler, cmake or Python:
#   unshare --mount --propagation private ... bash hidden.sh <empty file> <command...>
# binds the empty file (mode 0644: not executable, too short to load) over libgloo, the libraries only it
# brings (those node does not link), and every cc, gcc, g++, c++, make, cmake, python3 and python on PATH.
# The binds live in the private mount namespace alone and end with it.
set -euo pipefail
empty=$1
shift

libraries() { ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | xargs -r readlink -f | sort -u; }

node_libraries=$(libraries "$(command -v node)")
gloo_libraries=$(/sbin/ldconfig -p | awk '/libgloo\.so/ { print $NF }' | xargs -r readlink -f | sort -u)
hidden=()
for gloo in $gloo_libraries; do
  only_gloo=$(comm -23 <(libraries "$gloo") <(echo "$node_libraries"))
  hidden+=("$gloo" $only_gloo)
done
tools=(cc gcc g++ c++ make cmake python3 python)
for tool in "${tools[@]}"; do
  for path in $(type -ap "$tool"); do hidden+=("$(readlink -f "$path")"); done
done
for path in $(printf '%s\n' "${hidden[@]}" | sort -u); do
  mount --bind "$empty" "$path"
done
for tool in "${tools[@]}"; do
  found=$(type -ap "$tool" || true)
  if [[ -n $found ]]; then
    echo "hidden.sh: $tool is still on PATH at $found" >&2
    exit 1
  fi
done
exec "$@"
