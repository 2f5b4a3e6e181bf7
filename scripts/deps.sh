#!/usr/bin/env bash
# Install every missing Debian package named in scripts/deps.txt.
# Sourced or run by scripts/serve.sh and scripts/test.sh. As root it uses apt-get;
# otherwise it prints the exact command to run and fails.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mapfile -t pkgs < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/deps.txt")
missing=()
for p in "${pkgs[@]}"; do
  # nodejs/npm may come from elsewhere (nvm, NodeSource); a working binary is enough.
  case "$p" in
    nodejs) command -v node >/dev/null 2>&1 && continue ;;
    npm)    command -v npm  >/dev/null 2>&1 && continue ;;
  esac
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "longctx: missing Debian packages: ${missing[*]}" >&2
  echo "longctx: run as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "longctx: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
