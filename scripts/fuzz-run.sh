#!/bin/sh
# fuzz-run.sh DIR SECONDS TARGET... — run each libFuzzer harness DIR/fuzz_TARGET
# for SECONDS on one core at low priority (nice 15), over its corpus
# DIR/corpus/TARGET (new inputs are kept there), the seeds DIR/seeds/TARGET
# and fuzz/seeds/TARGET. Prints one summary line per target (executions,
# cov, ft) and exits 1 after the last target when any of them crashed, hung,
# leaked or ran out of memory; the reproducer is DIR/crash/TARGET/.
dir=$1
secs=$2
shift 2
fail=0
export GEPARD_FIXTURES=${GEPARD_FIXTURES:-../shared/fixtures}
for t in "$@"; do
    bin="$dir/fuzz_$t"
    mkdir -p "$dir/corpus/$t" "$dir/crash/$t" "$dir/logs"
    log="$dir/logs/$t.log"
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
        echo "fuzz $t: ${secs}s, ${runs:-?} runs, cov ${cov:-?}, ft ${ft:-?}"
    else
        echo "fuzz $t: FAILED (exit $rc) — see $log and $dir/crash/$t/"
        grep -aE 'ERROR: |SUMMARY: ' "$log" | head -3
        fail=1
    fi
done
exit $fail
