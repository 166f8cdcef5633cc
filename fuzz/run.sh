#!/usr/bin/env bash
# Runs the fuzz targets (cargo-fuzz, nightly Rust), each from its working corpus
# (fuzz/corpus/<target>, not kept), the seeds kept in the repository (fuzz/seeds/<target>) and
# every regression input (fuzz/regressions/<target>).
#
#   fuzz/run.sh [-t SECONDS | -n RUNS] [TARGET...]     (default: 60 seconds each, every target)
#
# Built without a sanitizer (-s none): the decoders are safe Rust, and the fuzzer runs about
# three times faster. A crash, a timeout (10 s) or an input needing more than 2 GiB stops the
# target with its input under fuzz/artifacts/<target>/; copy it to fuzz/regressions/<target>/
# once fixed. Logs go to fuzz/artifacts/logs/<target>.log.
set -euo pipefail
cd "$(dirname "$0")"
limit=(-max_total_time=60)
while getopts "t:n:" opt; do
    case $opt in
        t) limit=(-max_total_time="$OPTARG") ;;
        n) limit=(-runs="$OPTARG") ;;
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
status=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "seeds/$t" "regressions/$t" "artifacts/$t"
    echo "== fuzz $t (${limit[*]})"
    if cargo +nightly fuzz run -O -s none "$t" "corpus/$t" "seeds/$t" "regressions/$t" -- \
        "${limit[@]}" -dict=log.dict -max_len=131072 -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 -artifact_prefix="artifacts/$t/" >"artifacts/logs/$t.log" 2>&1; then
        grep -E "^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)" "artifacts/logs/$t.log" | tr '\n' ' '
        grep -E "DONE" "artifacts/logs/$t.log" | tail -1 | sed 's/^/  /'
    else
        echo "fuzz target $t failed; see fuzz/artifacts/logs/$t.log" >&2
        grep -E "panicked|ERROR|SUMMARY|Test unit written" "artifacts/logs/$t.log" | head -5 >&2 || true
        status=1
    fi
done
exit $status
