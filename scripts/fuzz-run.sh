#!/bin/sh
# fuzz-run.sh DIR SECONDS TARGET... — run each libFuzzer harness DIR/fuzz_TARGET
# for SECONDS at low priority (nice 15), over its corpus DIR/corpus/TARGET (new
# inputs are kept there), the seeds DIR/seeds/TARGET and fuzz/seeds/TARGET.
# FUZZ_JOBS harnesses run at once (default 1: one core), each on one core.
# Prints one summary line per target (executions, cov, ft) in the order given
# and exits 1 after the last target when any of them crashed, hung, leaked or
# ran out of memory; the reproducer is DIR/crash/TARGET/.
dir=$1
secs=$2
shift 2
jobs=${FUZZ_JOBS:-1}
case $jobs in '' | *[!0-9]* | 0) jobs=1 ;; esac
export GEPARD_FIXTURES=${GEPARD_FIXTURES:-../shared/fixtures}
mkdir -p "$dir/logs"

# One harness: its summary line goes to $dir/logs/TARGET.summary, and
# $dir/logs/TARGET.failed exists when it failed.
run_one() {
    t=$1
    bin="$dir/fuzz_$t"
    mkdir -p "$dir/corpus/$t" "$dir/crash/$t"
    log="$dir/logs/$t.log"
    rm -f "$dir/logs/$t.failed" "$dir/logs/$t.summary"
    seeds=""
    for s in "$dir/seeds/$t" "fuzz/seeds/$t"; do
        [ -d "$s" ] && seeds="$seeds $s"
    done
    dict=""
    [ -f "fuzz/dict/$t.dict" ] && dict="-dict=fuzz/dict/$t.dict"
    # -rss_limit_mb and -malloc_limit_mb: a parser that allocates what a
    # header claims is a finding, not a reason to swap.
    nice -n 15 "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
        -max_len=65536 -print_final_stats=1 $dict -artifact_prefix="$dir/crash/$t/" \
        "$dir/corpus/$t" $seeds >"$log" 2>&1
    rc=$?
    runs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
    last=$(grep -aE '^#[0-9]+' "$log" | tail -1)
    cov=$(echo "$last" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*')
    ft=$(echo "$last" | grep -o 'ft: [0-9]*' | grep -o '[0-9]*')
    if [ $rc -eq 0 ]; then
        echo "fuzz $t: ${secs}s, ${runs:-?} runs, cov ${cov:-?}, ft ${ft:-?}" >"$dir/logs/$t.summary"
    else
        {
            echo "fuzz $t: FAILED (exit $rc) — see $log and $dir/crash/$t/"
            grep -aE 'ERROR: |SUMMARY: ' "$log" | head -3
        } >"$dir/logs/$t.summary"
        : >"$dir/logs/$t.failed"
    fi
}

# Lane k of `jobs` takes targets k, k + jobs, k + 2·jobs, ... in turn.
lane=0
while [ $lane -lt $jobs ]; do
    (
        i=0
        for t in "$@"; do
            [ $((i % jobs)) -eq $lane ] && run_one "$t"
            i=$((i + 1))
        done
    ) &
    lane=$((lane + 1))
done
wait

fail=0
for t in "$@"; do
    cat "$dir/logs/$t.summary" 2>/dev/null || { echo "fuzz $t: FAILED (no summary)"; fail=1; }
    [ -f "$dir/logs/$t.failed" ] && fail=1
done
exit $fail
