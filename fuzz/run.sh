#!/usr/bin/env bash
# Runs the fuzz targets (cargo-fuzz, nightly Rust), each from its working corpus
# (fuzz/corpus/<target>, not kept), the seeds kept in the repository (fuzz/seeds/<target>) and
# every regression input (fuzz/regressions/<target>).
#
#   fuzz/run.sh [-t SECONDS | -n RUNS] [-j JOBS] [TARGET...]
#       (default: 60 seconds each, every target, one at a time; -j runs JOBS targets at once)
#
# Built without a sanitizer (-s none): the decoders are safe Rust, and the fuzzer runs about
# three times faster. A crash, a timeout (10 s) or an input needing more than 2 GiB stops the
# target with its input under fuzz/artifacts/<target>/; copy it to fuzz/regressions/<target>/
# once fixed. Logs go to fuzz/artifacts/logs/<target>.log. A timed run (-t) is killed two minutes
# past its time: libFuzzer's timeout handler allocates inside a signal handler and can
# deadlock on an input slower than its 10 s (the input is then lost; the log says so).
set -euo pipefail
cd "$(dirname "$0")"
limit=(-max_total_time=60)
wall=180
jobs=1
while getopts "t:n:j:" opt; do
    case $opt in
        t) limit=(-max_total_time="$OPTARG") wall=$((OPTARG + 120)) ;;
        n) limit=(-runs="$OPTARG") wall=0 ;;
        j) jobs=$OPTARG ;;
        *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(logset walk_from changes reader_state supplemental class_and_row payload)
fi
cargo +nightly fuzz build -O -s none
mkdir -p artifacts/logs

# One target, from its corpus, seeds and regressions; says how it went (0: no finding).
fuzz_one() {
    local t=$1
    mkdir -p "corpus/$t" "seeds/$t" "regressions/$t" "artifacts/$t"
    if timeout --signal=KILL "$wall" cargo +nightly fuzz run -O -s none "$t" "corpus/$t" "seeds/$t" "regressions/$t" -- \
        "${limit[@]}" -dict=log.dict -max_len=131072 -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 -artifact_prefix="artifacts/$t/" >"artifacts/logs/$t.log" 2>&1; then
        echo "== fuzz $t (${limit[*]}): $(grep -E "^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)" "artifacts/logs/$t.log" | tr '\n' ' ')"
    else
        {
            echo "fuzz target $t failed (or hung past ${wall} s: an input slower than 10 s); see fuzz/artifacts/logs/$t.log"
            grep -E "panicked|ERROR|SUMMARY|Test unit written" "artifacts/logs/$t.log" | head -5 || true
        } >&2
        return 1
    fi
}

status=0
running=()
for t in "${targets[@]}"; do
    fuzz_one "$t" &
    running+=($!)
    if [ ${#running[@]} -ge "$jobs" ]; then
        wait "${running[0]}" || status=1
        running=("${running[@]:1}")
    fi
done
for pid in "${running[@]}"; do
    wait "$pid" || status=1
done
exit $status
