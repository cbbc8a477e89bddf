#!/bin/sh
# check-recipe.sh — check the deployment recipe (deploy/) on this machine,
# without Docker or a cluster. tests/test_deploy.c runs the quick checks in
# CI; `make check-deploy` runs them, `make check-deploy-full` adds --full.
#
#   sh deploy/check-recipe.sh [--full] [GEPARD_BINARY]
#
# Quick (seconds):
#   scripts    every deploy/*.sh parses (sh -n)
#   dockerfile COPY sources exist and the ignore file keeps them; Debian 12
#              base; numeric non-root USER; EXPOSE, HEALTHCHECK on /health,
#              ENTRYPOINT gepard serve
#   build-deps the build stage's package step (scripts/install-deps.sh) finds
#              everything installed (or installs it, as root)
#   runtime    the runtime stage's apt-get step resolves (install-runtime.sh
#              --simulate, AAC=1), and its list covers every library the
#              binary links (readelf NEEDED -> dpkg -S) and the FFmpeg
#              libraries it opens for AAC
#   k8s        deploy/k8s/validate/validate.js (schema, field names, gepard
#              consistency), and it must reject a copy with a misspelt field
#   nginx      nginx -t on deploy/nginx/gepard.conf (Debian's nginx binary,
#              unpacked into build/deploy-tools, not installed)
#   systemd    systemd-analyze verify on deploy/systemd/gepard@.service
# --full (minutes): runs deploy/build.sh, the build stage's build step, into
#   a temporary prefix (a whole release build), then starts that binary on the
#   tiny fixtures as the image would, runs the HEALTHCHECK's command, waits for
#   /ready, reads /metrics for the autoscaler's metric and streams 8 requests
#   with `gepard loadtest`.
#
# Each check prints "ok", "skipped: why" or "FAIL: why"; the last line is
# "check-recipe: ok" or "check-recipe: N failed"; exit status 1 on failure.
set -u
cd "$(dirname "$0")/.." || exit 1
repo=$(pwd)
full=0
bin=""
for a in "$@"; do
    case "$a" in
    --full) full=1 ;;
    *) bin=$a ;;
    esac
done
[ -n "$bin" ] || bin=${GEPARD_BIN:-}
[ -n "$bin" ] || for b in build/release/gepard build/asan/gepard; do [ -x "$b" ] && bin=$b && break; done
failed=0
tmp=$(mktemp -d)
# owner PATH: the Debian package of a library file, from $tmp/owners (one
# dpkg -S over every candidate path: dpkg knows /lib or /usr/lib)
candidates() {
    for f in "$1" "$(readlink -f "$1")"; do echo "$f"; echo "${f#/usr}"; echo "/usr$f"; done
}
owner() {
    for g in $(candidates "$1"); do
        p=$(grep -m1 ": $g\$" "$tmp/owners" | cut -d: -f1)
        [ -n "$p" ] && echo "$p" && return
    done
}
trap 'rm -rf "$tmp"' EXIT

ok() { echo "ok       $1"; }
skip() { echo "skipped  $1: $2"; }
bad() { echo "FAIL     $1: $2"; failed=$((failed + 1)); }

# ---- scripts ----
s_ok=1
for f in deploy/*.sh; do sh -n "$f" || { bad scripts "$f does not parse"; s_ok=0; }; done
[ $s_ok = 1 ] && ok "scripts (sh -n deploy/*.sh)"

# ---- dockerfile ----
df=deploy/Dockerfile
d_ok=1
copies=$(sed -n 's/^COPY \(--chown=[^ ]* \)\{0,1\}\([^-].*\)$/\2/p' "$df")
echo "$copies" | while read -r line; do
    set -- $line
    while [ $# -gt 1 ]; do
        [ -e "$1" ] || echo "$1"
        shift
    done
done > "$tmp/missing"
[ -s "$tmp/missing" ] && { bad dockerfile "COPY sources missing: $(tr '\n' ' ' < "$tmp/missing")"; d_ok=0; }
for p in src include Makefile scripts deploy; do
    if grep -qE "^/?$p/?\$" deploy/Dockerfile.dockerignore; then
        bad dockerfile "Dockerfile.dockerignore drops $p, which the Dockerfile copies"
        d_ok=0
    fi
done
grep -q '^ARG DEBIAN_IMAGE=debian:12' "$df" || { bad dockerfile "the base is not debian:12"; d_ok=0; }
user=$(sed -n 's/^USER \([0-9]*\).*/\1/p' "$df")
{ [ -n "$user" ] && [ "$user" != 0 ]; } || { bad dockerfile "USER must be a numeric non-root uid"; d_ok=0; }
port=$(sed -n 's/^EXPOSE \([0-9]*\).*/\1/p' "$df")
grep -q "^ENTRYPOINT \[\"gepard\", \"serve\", .*\"--port\", \"$port\"\]" "$df" ||
    { bad dockerfile "ENTRYPOINT must be gepard serve on the EXPOSEd port $port"; d_ok=0; }
health=$(sed -n 's/^ *CMD \(curl .*\/health\).*/\1/p' "$df")
[ -n "$health" ] || { bad dockerfile "no HEALTHCHECK command on /health"; d_ok=0; }
[ $d_ok = 1 ] && ok "dockerfile (COPY sources, ignore file, base, USER $user, EXPOSE $port, HEALTHCHECK, ENTRYPOINT)"

# ---- build-deps: the build stage's package step ----
if out=$(sh scripts/install-deps.sh 2>&1); then
    ok "build-deps (scripts/install-deps.sh: every build package installed)"
else
    bad build-deps "scripts/install-deps.sh: $out"
fi

# ---- runtime packages ----
if ! apt-cache policy libcjson1 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    skip "runtime apt" "no apt package lists here (run apt-get update)"
elif out=$(AAC=1 sh deploy/install-runtime.sh --simulate 2>&1); then
    ok "runtime apt (install-runtime.sh --simulate resolves $(echo "$out" | grep -c '^Inst') new, the rest installed)"
else
    bad "runtime apt" "$(echo "$out" | tail -n 3)"
fi
pkgs=$(sed -e 's/#.*//' -e 's/^aac: *//' -e '/^[[:space:]]*$/d' deploy/runtime-packages.txt)
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
    skip runtime-libs "no built gepard (build/release/gepard or build/asan/gepard)"
else
    missing=""
    opened=""
    libs=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    for h in libavcodec/version_major.h libavutil/version.h; do
        hdr=$(ls /usr/include/*/"$h" /usr/include/"$h" 2>/dev/null | head -n 1)
        [ -n "$hdr" ] || continue
        name=$(dirname "$h")
        up=$(echo "$name" | tr a-z A-Z)
        major=$(sed -n "s/^#define ${up}_VERSION_MAJOR *\([0-9]*\).*/\1/p" "$hdr")
        opened="$opened $name.so.$major"
    done
    for lib in $libs $opened; do
        path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')
        [ -n "$path" ] && candidates "$path"
    done | sort -u | xargs dpkg -S > "$tmp/owners" 2>/dev/null
    # compiler runtimes of an ASan build and libc come with any Debian image
    for lib in $libs; do
        path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')
        [ -n "$path" ] || { missing="$missing $lib(not-found)"; continue; }
        pkg=$(owner "$path")
        case "$pkg" in libc6 | libasan* | libubsan* | libgcc-s1) continue ;; esac
        echo "$pkgs" | grep -qx "$pkg" || missing="$missing $lib($pkg)"
    done
    for lib in $opened; do
        path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')
        pkg=$(owner "$path")
        echo "$pkgs" | grep -qx "$pkg" || missing="$missing $lib(${pkg:-not-found})"
    done
    if [ -n "$missing" ]; then
        bad runtime-libs "deploy/runtime-packages.txt lacks the packages of:$missing"
    else
        ok "runtime-libs (runtime-packages.txt covers every library $bin links or opens)"
    fi
fi

# ---- k8s ----
val=deploy/k8s/validate
if ! command -v node >/dev/null 2>&1; then
    skip k8s "node not found (apt-get install nodejs npm)"
elif [ ! -d "$val/node_modules/kubernetes-models" ]; then
    skip k8s "no $val/node_modules (GEPARD_TEST_EXTRAS=1 make deps installs them)"
elif ! out=$(node "$val/validate.js" 2>&1); then
    bad k8s "$out"
else
    mkdir -p "$tmp/k8s"
    cp deploy/k8s/*.yaml "$tmp/k8s/"
    sed -i 's/livenessProbe:/livenesProbe:/' "$tmp/k8s/deployment.yaml"
    if GEPARD_K8S_DIR="$tmp/k8s" node "$val/validate.js" 2>&1 | grep -q "livenesProbe"; then
        ok "k8s ($(echo "$out" | tail -n 1); a misspelt field is caught)"
    else
        bad k8s "validate.js did not reject a misspelt livenessProbe"
    fi
fi

# ---- nginx ----
nginx=$(command -v nginx || true)
tools=build/deploy-tools
if [ -z "$nginx" ] && [ -x "$tools/usr/sbin/nginx" ]; then nginx=$tools/usr/sbin/nginx; fi
if [ -z "$nginx" ]; then
    mkdir -p "$tools"
    if (cd "$tools" && apt-get download nginx >/dev/null 2>&1 && dpkg -x nginx_*.deb . && rm -f nginx_*.deb); then
        nginx=$tools/usr/sbin/nginx
    fi
fi
if [ -z "$nginx" ] || [ ! -x "$nginx" ]; then
    skip nginx "no nginx binary (apt-get download nginx failed)"
else
    mkdir -p "$tmp/nginx/logs"
    t=$tmp/nginx
    cat > "$t/nginx.conf" <<CONF
pid $t/nginx.pid;
error_log stderr;
events {}
http {
    access_log off;
    client_body_temp_path $t/body;
    proxy_temp_path $t/proxy;
    fastcgi_temp_path $t/fastcgi;
    uwsgi_temp_path $t/uwsgi;
    scgi_temp_path $t/scgi;
    include $repo/deploy/nginx/gepard.conf;
}
CONF
    if out=$("$nginx" -t -q -e stderr -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" 2>&1); then
        ok "nginx (nginx -t: deploy/nginx/gepard.conf)"
    else
        bad nginx "$out"
    fi
fi

# ---- systemd ----
if ! command -v systemd-analyze >/dev/null 2>&1; then
    skip systemd "systemd-analyze not found"
else
    # verify an instance; the binary path is swapped for one that exists here
    sed "s|/opt/gepard/bin/gepard|$(command -v true)|; /^User=/d; /^Group=/d" \
        deploy/systemd/gepard@.service > "$tmp/gepard@.service"
    cp "$tmp/gepard@.service" "$tmp/gepard@0.service"
    if out=$(SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no "$tmp/gepard@0.service" 2>&1) &&
        [ -z "$(echo "$out" | grep -v 'network-online.target\|Failed to prepare filename\|Unit .* not found')" ]; then
        ok "systemd (systemd-analyze verify gepard@0.service)"
    else
        bad systemd "$out"
    fi
fi

# ---- full: the build stage's build step, and the result served ----
if [ $full = 1 ]; then
    prefix=$tmp/prefix
    if ! JOBS=${JOBS:-2} BUILD="$tmp/build" nice sh deploy/build.sh "$prefix" > "$tmp/build.log" 2>&1; then
        bad build "deploy/build.sh failed: $(tail -n 5 "$tmp/build.log")"
    elif ldd "$prefix/bin/gepard" | grep -q "not found"; then
        bad build "$(ldd "$prefix/bin/gepard" | grep 'not found')"
    else
        ok "build (deploy/build.sh into $prefix: $(tail -n 1 "$tmp/build.log"))"
        fx=${GEPARD_FIXTURES:-../shared/fixtures}
        p=18790
        "$prefix/bin/gepard" serve --host 127.0.0.1 --port $p --model "$fx/model-tiny/model" \
            --codec "$fx/codec-tiny/nano-tiny.nemo" --threads 1 > "$tmp/serve.log" 2>&1 &
        pid=$!
        i=0
        until curl -fsS -o /dev/null "http://127.0.0.1:$p/ready" 2>/dev/null || [ $i -ge 120 ]; do
            sleep 0.5
            i=$((i + 1))
        done
        hc=$(echo "$health" | sed "s/:$port\//:$p\//")
        if ! sh -c "$hc"; then
            bad serve "the HEALTHCHECK command failed: $hc"
        elif ! curl -fsS "http://127.0.0.1:$p/metrics" | grep -q '^gepard_queued_streams '; then
            bad serve "/metrics has no gepard_queued_streams (the autoscaler's metric)"
        elif ! "$prefix/bin/gepard" loadtest --url "http://127.0.0.1:$p" -c 8 -n 8 \
            --body '{"max_frames":8,"stop_threshold":2}' > "$tmp/lt.json" ||
            ! grep -q '"ok": 8,' "$tmp/lt.json"; then
            bad serve "loadtest: $(cat "$tmp/lt.json")"
        else
            ok "serve (HEALTHCHECK, /ready, /metrics, 8 streams through loadtest)"
        fi
        kill -TERM $pid
        wait $pid || bad serve "gepard serve did not exit 0 on SIGTERM: $(tail -n 3 "$tmp/serve.log")"
    fi
fi

if [ $failed -gt 0 ]; then
    echo "check-recipe: $failed failed"
    exit 1
fi
echo "check-recipe: ok"
