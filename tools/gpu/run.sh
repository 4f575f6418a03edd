#!/usr/bin/env bash
# The GPU check bundle's one command (bundle.ts builds the bundle beside this file): unpacks Node and
# the app into a temporary folder, runs the checks (runner.ts; arguments go to it), and removes the
# folder again. The report and the log go to $OUT, else ./gpu-check-out.
#   bash <bundle>/run.sh [--dry] [--only name,name] [--limit-s seconds]
set -euo pipefail
bundle=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "${OUT:-gpu-check-out}" && cd "${OUT:-gpu-check-out}" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tensorlane-gpu-bundle.XXXXXX")
trap 'rm -rf "$work"' EXIT

# xz where it is installed, else Python's lzma.
unxz_to_stdout() {
  if command -v xz >/dev/null; then
    xz -dc "$1"
  else
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$1"
  fi
}
unxz_to_stdout "$bundle/node.xz" >"$work/node"
chmod +x "$work/node"
unxz_to_stdout "$bundle/app.tar.xz" | tar -x -C "$work"
echo "node $("$work/node" -v) from the bundle ($(du -sh "$bundle" | cut -f1)), unpacked in $work"
cd "$work/app"
"$work/node" tools/gpu/runner.js --out "$out" "$@"
