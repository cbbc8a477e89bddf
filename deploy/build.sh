#!/bin/sh
# build.sh — the build stage of deploy/Dockerfile: build the release `gepard`
# (and, with CUDA=1, the plugin libgepard-cuda.so) with the project's
# Makefile and install them under PREFIX as bin/gepard and
# lib/gepard/libgepard-cuda.so (where gepard looks for the plugin:
# ../lib/gepard/ from the executable). deploy/check-recipe.sh --full runs
# this same script into a temporary prefix.
#
#   [CUDA=0|1] [BUILD=build] [JOBS=N] sh deploy/build.sh PREFIX
set -eu
prefix=${1:?usage: deploy/build.sh PREFIX}
build=${BUILD:-build}
cuda=${CUDA:-0}
jobs=${JOBS:-$(nproc)}
targets="$build/release/gepard"
nvcc=""
if [ "$cuda" = 1 ]; then
    targets="$targets $build/release/libgepard-cuda.so"
    nvcc=$(ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -n 1)
    [ -n "$nvcc" ] || { echo "build.sh: CUDA=1 but no nvcc under /usr/local/cuda*/bin" >&2; exit 1; }
fi
# shellcheck disable=SC2086 # targets is a list
make -j"$jobs" BUILD="$build" CUDA="$cuda" ${nvcc:+NVCC="$nvcc"} $targets
install -D -m 0755 "$build/release/gepard" "$prefix/bin/gepard"
if [ "$cuda" = 1 ]; then
    install -D -m 0644 "$build/release/libgepard-cuda.so" "$prefix/lib/gepard/libgepard-cuda.so"
fi
"$prefix/bin/gepard" --version
