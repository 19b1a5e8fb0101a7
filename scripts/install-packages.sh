#!/usr/bin/env bash
# `npm ci` for the project in the current directory (make node_modules runs it in the checkout).
# Only the install scripts that package.json's allowScripts approves run, and any other one fails
# the install (--strict-allow-scripts): a new dependency's script is reviewed before it runs,
# rather than run unasked (npm before 11.16 runs every one) or skipped with a warning and exit 0
# (npm 12), which would leave the project without the Node.js 24 the `node` package installs.
# npm older than 11.16 knows neither allowScripts nor the flag: the install then runs with the
# npm of scripts/versions.sh, through npx. Extra arguments go to npm ci.
set -euo pipefail
source "$(dirname "$0")/versions.sh"

version=$(npm --version)
IFS=. read -r major minor _ <<<"$version"
if (( major > 11 || (major == 11 && minor >= 16) )); then
  npm=(npm)
else
  echo "npm $version does not enforce package.json's allowScripts (npm 11.16 and later do): installing with npm $NPM_VERSION, through npx" >&2
  npm=(npx --yes "npm@$NPM_VERSION")
fi
# The packages need the Node.js of package.json's engines; the machine's may be older (Node.js 20.17
# installs them): npm then warns EBADENGINE for each of them, which says nothing wrong here.
engines=$(node -p 'require("./package.json").engines?.node ?? ""' 2>/dev/null || true)
if [[ $engines =~ ^\>=([0-9]+)\.([0-9]+) ]]; then
  IFS=. read -r node_major node_minor _ <<<"$(node --version | tr -d v)"
  if (( node_major < BASH_REMATCH[1] || (node_major == BASH_REMATCH[1] && node_minor < BASH_REMATCH[2]) )); then
    echo "Node.js $(node --version) installs the packages; npm's EBADENGINE warnings below (engines: node $engines) are expected: the project runs on the Node.js 24 this install adds (node_modules/.bin/node)" >&2
  fi
fi
exec "${npm[@]}" ci --strict-allow-scripts --no-audit --no-fund "$@"
