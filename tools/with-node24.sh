#!/usr/bin/env bash
# Runs a command, in the repository root, with Node 24 first on the PATH: the binary that
# tools/gpu/fetch-node.sh pins and keeps xz-compressed in .tools/node, unpacked into a temporary folder
# removed when the command ends. npm, npx and every process the command starts run on it.
#   bash tools/with-node24.sh npm test
set -euo pipefail
cd "$(dirname "$0")/.."
cached=$(bash tools/gpu/fetch-node.sh)
bin=$(mktemp -d)
# Readable by all: tests run some processes as a throwaway unprivileged user, on this same Node.
chmod 755 "$bin"
trap 'rm -rf "$bin"' EXIT
xz -dc "$cached" >"$bin/node"
chmod +x "$bin/node"
PATH="$bin:$PATH" "$@"
