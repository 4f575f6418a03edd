#!/usr/bin/env bash
# Installs PyPI wheels of native libraries that tensorlane's packages load at run time into a
# project-local folder, with --no-deps (none of their Python side is needed), and checks that the
# files the loaders look for are there. Idempotent: when every wheel's dist-info and every required
# file exist, nothing is done. Each addon package's scripts/install-wheel.sh calls it with its own
# wheels, finding it through node's resolution of @tensorlane/core/native-kit/install-wheel.sh.
#   bash install-wheel.sh <target folder> <name==version>... -- <required file, relative to target>...
set -euo pipefail
target="$1"
shift
wheels=()
while [[ $# -gt 0 && "$1" != "--" ]]; do
  wheels+=("$1")
  shift
done
[[ $# -gt 0 ]] && shift
required=("$@")

present() {
  local wheel name version file
  for wheel in "${wheels[@]}"; do
    name="${wheel%%==*}"
    version="${wheel##*==}"
    [[ -d "$target/${name//-/_}-$version.dist-info" ]] || return 1
  done
  for file in "${required[@]}"; do
    [[ -f "$target/$file" ]] || return 1
  done
}

if present; then
  echo "${wheels[*]} already installed in $target"
  exit 0
fi
python3 -m pip install --quiet --no-deps --upgrade --target "$target" "${wheels[@]}"
for file in "${required[@]}"; do
  [[ -f "$target/$file" ]] || { echo "${wheels[*]} installed, but $target/$file is missing: the wheel's layout changed" >&2; exit 1; }
done
echo "${wheels[*]} installed in $target"
