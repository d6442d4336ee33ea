#!/usr/bin/env bash
# Decode throughput: 1080p x264 streams sent over TCP at full speed into streamrecvd (release build), until every
# frame is published in shared memory, against `ffmpeg -threads N -i FILE -f null -` in the same run, same N.
# Prints a markdown table. Called by scripts/bench.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
work=.build/bench
mkdir -p "$work"
stream="$work/x264-1080p30-zerolatency.h264"
if [ ! -s "$stream" ]; then
    # 20 s of 1080p30 at 8 Mbit/s, x264 zerolatency: the kind of stream a screen sharer sends.
    ffmpeg -v error -y -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 20 -c:v libx264 -preset veryfast \
        -tune zerolatency -b:v 8M -g 60 -f h264 "$stream"
fi
frames=$(ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames -of csv=p=0 "$stream")
port=$((20000 + RANDOM % 20000))
name="bench$$"

now() { date +%s.%N; }

run_daemon() { # threads threading -> seconds from the first byte sent to the last frame published (CLOCK_MONOTONIC)
    local threads=$1 threading=$2
    cat > "$work/bench.toml" <<TOML
[daemon]
log_level = "warning"
[[stream]]
name = "$name"
listen = "tcp://127.0.0.1:$port"
hwaccel = "none"
max_width = 1920
max_height = 1088
slots = 8
threads = $threads
threading = "$threading"
output = "${OUTPUT:-auto}"
TOML
    rm -f "/dev/shm/streamrecv-$name"
    .build/release/streamrecvd --config "$work/bench.toml" 2>"$work/bench.log" &
    local daemon=$!
    until .build/release/streamrecvctl status "$name" --json 2>/dev/null | grep -q '"state":"waiting"'; do sleep 0.05; done
    local start
    start=$(python3 - "$stream" "$port" <<'PY'
import socket, sys, time
data = open(sys.argv[1], 'rb').read()
s = socket.create_connection(('127.0.0.1', int(sys.argv[2])))
start = time.monotonic_ns()
s.sendall(data)
s.close()
print(start)
PY
)
    # Poll slowly (a process every 2 ms would steal a core); the end time comes from the ring itself.
    local status
    until status=$(.build/release/streamrecvctl status "$name" --json) && echo "$status" | grep -q "\"frames_published\":$frames,"; do sleep 0.2; done
    local end; end=$(echo "$status" | sed 's/.*"latest_published_ns":\([0-9]*\).*/\1/')
    kill $daemon; wait $daemon 2>/dev/null || true
    rm -f "/dev/shm/streamrecv-$name"
    echo "($end - $start) / 1000000000" | bc -l
}

run_ffmpeg() { # threads -> seconds
    local start; start=$(now)
    ffmpeg -v error -threads "$1" -i "$stream" -f null -
    local end; end=$(now)
    echo "$end - $start" | bc -l
}

best() { sort -g | head -1; }

echo "input: $stream, $frames frames 1920x1080, x264 veryfast zerolatency 8 Mbit/s"
echo ""
echo "| N | streamrecvd over TCP into shm (fps) | ffmpeg -threads N -f null (fps) | ratio |"
echo "|---|---|---|---|"
for spec in "1 slice" "2 frame"; do
    set -- $spec
    ours=$(for i in 1 2 3; do run_daemon "$1" "$2"; done | best)
    theirs=$(for i in 1 2 3; do run_ffmpeg "$1"; done | best)
    printf "| %s (%s threads) | %.0f | %.0f | %.2f |\n" "$1" "$2" "$(echo "$frames / $ours" | bc -l)" \
        "$(echo "$frames / $theirs" | bc -l)" "$(echo "$theirs / $ours" | bc -l)"
done
