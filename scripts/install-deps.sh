#!/bin/sh
# install-deps.sh — install the Debian packages gepard.c needs to build and test.
#
# Called by `make test`, `make demo` and `make deps`. Installs only what is
# missing; as root it runs apt-get, otherwise it names the packages and how to
# install them, and fails.
set -eu

PACKAGES="gcc make pkg-config libc6-dev \
libcjson-dev libpcre2-dev libutf8proc-dev libarchive-dev libyaml-dev \
libcurl4-openssl-dev libmicrohttpd-dev libsndfile1-dev libopusenc-dev \
libmp3lame-dev libsoxr-dev libopenblas-dev libflac-dev libpulse-dev"

if [ "${GEPARD_TEST_EXTRAS:-0}" = "1" ]; then
    # The browser the playground test drives (headless).
    PACKAGES="$PACKAGES chromium"
fi

missing=""
for pkg in $PACKAGES; do
    status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
    case "$status" in
        ii*) ;;
        *) missing="$missing $pkg" ;;
    esac
done

if [ -z "$missing" ]; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "gepard: these Debian packages are missing:$missing" >&2
    echo "gepard: install them with: sudo apt-get install -y$missing" >&2
    exit 1
fi

echo "gepard: installing missing packages:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q --no-install-recommends $missing >/dev/null 2>&1; then
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends $missing
fi
