#!/usr/bin/env bash
# Sets up a fresh machine for tensorlane: system packages, npm dependencies, native addons, the build, and the
# NIXL, NCCL and NVSHMEM run-time libraries.
#   bash tools/setup.sh          set up and build
#   bash tools/setup.sh --demo   then run the main demo
set -euo pipefail
cd "$(dirname "$0")/.."

need_node() {
  local version
  version=$(node -p 'process.versions.node' 2>/dev/null || echo 0)
  # The packages' engines: ^20.19.0 || >=22.12.0.
  node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>22||(a===22&&b>=12)||(a===20&&b>=19)?0:1)' 2>/dev/null || {
    echo "tensorlane needs Node.js 22.12 or later, or 24 (20.19 still works; found ${version}); install it from your distribution or nodejs.org" >&2
    exit 1
  }
}
need_node

# System libraries of the native transports and the tools that build and bundle them (Debian packages;
# root or sudo): patchelf gives the platform packages their $ORIGIN RUNPATH.
system_packages=(libgloo-dev cmake g++ make patchelf)
missing=()
for package in "${system_packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if ((${#missing[@]} > 0)); then
  sudo_cmd=""
  [[ $(id -u) -eq 0 ]] || sudo_cmd="sudo"
  echo "installing ${missing[*]} from Debian's packages"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Node 24 for the GPU check bundle (tools/gpu) and `npm run test:node24`, from the npm registry,
# xz-compressed into .tools/node.
bash tools/gpu/fetch-node.sh >/dev/null

# Installs what the lockfile pins. Not `npm ci`: npm 11 leaves the other platforms' optional packages
# (rollup's native builds) out of the lockfile it writes, and `npm ci` then refuses that very lockfile.
npm install --no-audit --no-fund
NX_DAEMON=false npx nx run-many -t build --outputStyle=static
# npm links a workspace's bin only when its target exists, and the cli's dist/main.js did not exist at
# install time: link it now so that `npx tensorlane` works.
npm rebuild @tensorlane/cli --ignore-scripts
# NIXL, NCCL with the CUDA runtime, and NVSHMEM's host library, from the PyPI wheels the packages pin, unpacked
# by the command users run into the checkout's .tools/libraries (no Python, no change outside the checkout).
npx tensorlane install nixl nccl nvshmem --into .tools/libraries

if [[ "${1:-}" == "--demo" ]]; then
  npm run demo
fi
