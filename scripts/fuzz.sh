#!/usr/bin/env bash
# Builds the libFuzzer targets in Fuzz/ (AddressSanitizer + libFuzzer), makes seed corpora from freshly encoded
# streams, replays every saved regression input (Fuzz/Regressions/TARGET/), then fuzzes each target for RUNS
# executions (default 20000: the CI run; `make fuzz FUZZ_RUNS=10000000` for the long run in docs/reliability.md).
# Prints one line per target: executions, time, exec/s. Exit status 1 on the first crash (the input is kept).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-${FUZZ_RUNS:-20000}}
TARGETS=${FUZZ_TARGETS:-"FuzzAnnexB FuzzH264ParameterSets FuzzH265ParameterSets FuzzSEI FuzzRTP FuzzTransportStream FuzzRTSP FuzzSTUN FuzzRTCP FuzzWebRTCOffer"}
WORK=${FUZZ_WORK:-.build/fuzz}
mkdir -p "$WORK"
(cd Fuzz && swift build -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library 2>&1 | grep -E "error|warning: |Compiling|Build complete" | tail -3)
BIN=Fuzz/.build/release
# Made again when they predate the newest seeds (simulcast in FuzzWebRTCOffer).
[ -e "$WORK/seeds/simulcast" ] || { python3 scripts/fuzz-seeds.py "$WORK/seeds" > /dev/null && touch "$WORK/seeds/simulcast"; }
# Input size limits per target: enough for several NAL units / packets, small enough to stay fast.
max_len() { case $1 in FuzzAnnexB) echo 4096;; FuzzRTP) echo 8192;; FuzzTransportStream) echo 8192;; FuzzRTSP) echo 8192;; FuzzWebRTCOffer) echo 8192;; FuzzSTUN) echo 512;; *) echo 1024;; esac; }
for target in $TARGETS; do
    corpus="$WORK/corpus/$target"
    mkdir -p "$corpus" "Fuzz/Regressions/$target"
    cp -n "$WORK/seeds/$target"/* "$corpus/" 2>/dev/null || true
    # Saved crashes and hangs first, each replayed alone: they must all pass now.
    if compgen -G "Fuzz/Regressions/$target/*" > /dev/null; then
        "$BIN/$target" -runs=0 Fuzz/Regressions/"$target"/* > "$WORK/$target.replay.log" 2>&1 \
            || { echo "$target: a saved regression input fails again"; tail -30 "$WORK/$target.replay.log"; exit 1; }
    fi
    start=$(date +%s.%N)
    if ! "$BIN/$target" -runs="$RUNS" -max_len="$(max_len "$target")" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$WORK/$target-" "$corpus" > "$WORK/$target.log" 2>&1; then
        echo "$target: CRASH after $(grep -c . "$WORK/$target.log") log lines; input saved as $(ls -t "$WORK/$target-"* | head -1)"
        grep -E "ERROR|Fatal|precondition|SUMMARY" "$WORK/$target.log" | head -5
        exit 1
    fi
    seconds=$(echo "$(date +%s.%N) - $start" | bc)
    executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$WORK/$target.log" | grep -o '[0-9]*$')
    coverage=$(grep -o 'cov: [0-9]*' "$WORK/$target.log" | tail -1 | grep -o '[0-9]*')
    printf '%s: %s executions in %.0f s (%.0f/s), coverage %s edges, corpus %s inputs, no crash\n' \
        "$target" "$executions" "$seconds" "$(echo "$executions / $seconds" | bc -l)" "$coverage" "$(ls "$corpus" | wc -l)"
done
