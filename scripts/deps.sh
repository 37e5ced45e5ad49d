#!/usr/bin/env bash
# Installs the Debian packages that tests need, only if missing.
#
#   scripts/deps.sh kcat            (the default when no argument is given)
#   scripts/deps.sh kcat chromium
#
# An argument is "command" or "command=package" (when the two differ, e.g.
# "convert=imagemagick"). Quiet when everything is present; runs
# `apt-get update` once, and only when something must be installed.
set -euo pipefail

[[ $# -gt 0 ]] || set -- kcat

missing=()
for want in "$@"; do
  cmd=${want%%=*}
  pkg=${want#*=}
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "deps.sh: missing ${missing[*]} and no apt-get here; install them by hand" >&2
  exit 1
fi
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || { echo "deps.sh: need root (or sudo) to install ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi

echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq >/dev/null
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

for want in "$@"; do
  cmd=${want%%=*}
  command -v "$cmd" >/dev/null 2>&1 || { echo "deps.sh: $cmd still missing after installing" >&2; exit 1; }
done
