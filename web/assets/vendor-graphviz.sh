#!/usr/bin/env bash
# Refreshes the vendored @hpcc-js/wasm-graphviz bundle (graphviz.js, the
# WebAssembly build of Graphviz inlined in one ES module) and its license.
# The web view embeds both (web/server.go); nothing is fetched at run time.
# Usage: web/assets/vendor-graphviz.sh [VERSION]   (needs npm and network)
set -euo pipefail
VERSION="${1:-1.29.2}"
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
npm pack --silent "@hpcc-js/wasm-graphviz@${VERSION}" >/dev/null
tar xzf "hpcc-js-wasm-graphviz-${VERSION}.tgz"
{
  echo "/* @hpcc-js/wasm-graphviz ${VERSION} (dist/index.js) — Apache-2.0, see LICENSE.graphviz; vendored by vendor-graphviz.sh */"
  grep -v '^//# sourceMappingURL=' package/dist/index.js
} > "$here/graphviz.js"
cp package/LICENSE "$here/LICENSE.graphviz"
echo "vendored @hpcc-js/wasm-graphviz ${VERSION}: $(wc -c < "$here/graphviz.js") bytes"
