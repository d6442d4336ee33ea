#!/usr/bin/env bash
# Runs the release benchmarks and rewrites docs/benchmarks.md with their tables. Called by `make bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
work=.build/bench
mkdir -p "$work"
stream="$work/x264-1080p30-20mbps.h264"
if [ ! -s "$stream" ]; then
    # Real stream bytes: 10 s of 1080p30 x264 at 20 Mbit/s with B-frames.
    ffmpeg -v error -y -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 10 -c:v libx264 -preset veryfast \
        -b:v 20M -bf 2 -f h264 "$stream"
fi
split_table=$(.build/release/BitstreamBenchmark "$stream" 256)
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
cat > docs/benchmarks.md <<DOC
# Benchmarks

Written by \`make bench\` (scripts/bench.sh) on $(date -u +%Y-%m-%d), $(nproc) cores, ${cpu}.
Benchmarks are release builds run side by side with their reference in the same process and run; only
ratios are meaningful across machines. Tests never assert timings.

## Annex B splitting

\`.build/release/BitstreamBenchmark $stream 256\`: the stream is repeated in memory to at least
256 MiB, then split by \`AnnexBSplitter\` fed in chunks of 1 MiB, 64 KiB and 1500 bytes (a datagram), each the
best of 5 runs, against a C \`memchr\`-based start-code scan (memchr for the \`01\` byte, then a look at the two
bytes before it) over the same buffer. Heap allocations are counted by interposing malloc
(\`CAllocationCounter\`) around one whole split; the few that remain are the carry buffer growing to the
largest NAL unit, i.e. none per NAL unit in steady state.

${split_table}
DOC
echo "wrote docs/benchmarks.md"
cat docs/benchmarks.md
