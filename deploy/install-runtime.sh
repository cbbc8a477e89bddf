#!/bin/sh
# install-runtime.sh — the runtime stage of deploy/Dockerfile: install the
# Debian packages of deploy/runtime-packages.txt (the "aac:" ones only when
# AAC=1) and, with CUDA=1, the CUDA runtime libraries the plugin needs
# (deploy/apt-cuda.sh). --simulate resolves the same packages with
# `apt-get -s` and installs nothing (deploy/check-recipe.sh uses it).
#
#   AAC=1 CUDA=0 sh deploy/install-runtime.sh [--simulate]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
simulate=""
[ "${1:-}" = "--simulate" ] && simulate="-s"
aac=${AAC:-1}
packages=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/runtime-packages.txt" |
    while read -r a b; do
        if [ "$a" = "aac:" ]; then [ "$aac" = 1 ] && echo "$b"; else echo "$a"; fi
    done | tr '\n' ' ')
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086 # one word per package
apt-get install $simulate -y -q --no-install-recommends $packages
if [ "${CUDA:-0}" = 1 ] && [ -z "$simulate" ]; then
    sh "$here/apt-cuda.sh" runtime
fi
