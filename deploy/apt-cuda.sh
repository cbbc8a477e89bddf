#!/bin/sh
# apt-cuda.sh — the CUDA variant of deploy/Dockerfile (build arg CUDA=1):
# adds NVIDIA's CUDA apt repository for Debian 12 and installs, for the
# build stage, nvcc, cuBLAS and the static CUDA runtime the plugin
# libgepard-cuda.so is built with, or, for the runtime stage, only the cuBLAS
# libraries it opens (the driver's libcuda comes from the host through the
# NVIDIA container toolkit). CUDA_VERSION is the package suffix (13-0 for
# CUDA 13.0, the version the plugin is measured with in docs/NOTES.md).
#
#   CUDA_VERSION=13-0 sh deploy/apt-cuda.sh build|runtime
set -eu
stage=${1:?usage: apt-cuda.sh build|runtime}
ver=${CUDA_VERSION:-13-0}
dotted=$(echo "$ver" | tr - .)
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends ca-certificates curl
keyring=/tmp/cuda-keyring.deb
curl -fsSL -o "$keyring" \
    https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb
dpkg -i "$keyring"
rm -f "$keyring"
apt-get update -q
case "$stage" in
build)
    apt-get install -y -q --no-install-recommends "cuda-nvcc-$ver" "cuda-cudart-dev-$ver" \
        "libcublas-dev-$ver"
    ;;
runtime)
    apt-get install -y -q --no-install-recommends "libcublas-$ver"
    ;;
*)
    echo "apt-cuda.sh: the stage must be build or runtime, got \"$stage\"" >&2
    exit 2
    ;;
esac
# the plugin is linked with an rpath of $CUDA_HOME/lib64; make the packages'
# library directory known to the dynamic linker whatever symlinks they create
echo "/usr/local/cuda-$dotted/targets/x86_64-linux/lib" > /etc/ld.so.conf.d/gepard-cuda.conf
ldconfig
