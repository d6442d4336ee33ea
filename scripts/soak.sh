#!/usr/bin/env bash
# make soak: a paced 1080p60 x264 stream into a release daemon over TCP for SOAK_SECONDS (default 3600). Samples
# the daemon's RSS and open file descriptors every 10 s and checks at the end that every access unit sent was
# published. Prints a summary line for docs/reliability.md; exit status 1 when a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${SOAK_SECONDS:-3600}
WORK=$(mktemp -d)
trap 'kill $DAEMON 2>/dev/null || true; rm -rf "$WORK"' EXIT
BIN=.build/release
NAME="soak$$"
PORT=${SOAK_PORT:-5099}

cat > "$WORK/soak.toml" <<TOML
[[stream]]
name = "$NAME"
listen = "tcp://127.0.0.1:$PORT"
hwaccel = "none"
max_width = 1920
max_height = 1088
slots = 16
TOML

# 10 s of 1080p60, GOP 2 s, x264 zerolatency (as a live encoder), sent in a loop.
ffmpeg -v error -y -f lavfi -i testsrc2=size=1920x1080:rate=60 -t 10 -c:v libx264 -preset veryfast -tune zerolatency \
    -g 120 -f h264 "$WORK/clip.h264"

$BIN/streamrecvd --config "$WORK/soak.toml" > "$WORK/daemon.log" 2>&1 &
DAEMON=$!
$BIN/streamrecvctl wait "$NAME" --timeout 0.1 >/dev/null 2>&1 || true
for _ in $(seq 100); do [ -e "/dev/shm/streamrecv-$NAME" ] && break; sleep 0.1; done
sleep 1

sample() { echo "$(awk '/VmRSS/ {print $2}' /proc/$DAEMON/status) $(ls /proc/$DAEMON/fd | wc -l)"; }
read -r RSS_START FD_START < <(sample)
$BIN/streamrecvctl send "$WORK/clip.h264" "tcp://127.0.0.1:$PORT" --loop --rate 60 --duration "$SECONDS_TO_RUN" 2> "$WORK/send.log" &
SENDER=$!
echo "time_s rss_kb fds" > "$WORK/samples.txt"
START=$(date +%s)
while kill -0 $SENDER 2>/dev/null; do
    sleep 10
    kill -0 $DAEMON || { echo "soak: the daemon died"; cat "$WORK/daemon.log"; exit 1; }
    echo "$(( $(date +%s) - START )) $(sample)" >> "$WORK/samples.txt"
done
wait $SENDER
sleep 2
SENT=$(grep -o 'sent [0-9]* ' "$WORK/send.log" | awk '{print $2}')
PUBLISHED=$($BIN/streamrecvctl status "$NAME" --json | grep -o '"frames_published":[0-9]*' | cut -d: -f2)
DROPPED=$($BIN/streamrecvctl status "$NAME" --json | grep -o '"frames_dropped":[0-9]*' | cut -d: -f2)
read -r RSS_END FD_END < <(sample)
# Growth measured from the first sample after a minute of streaming (the ring and decoder are warm by then).
RSS_WARM=$(awk 'NR>1 && $1>=60 {print $2; exit}' "$WORK/samples.txt")
RSS_MAX=$(awk 'NR>1 {if ($2>m) m=$2} END {print m}' "$WORK/samples.txt")
cp "$WORK/samples.txt" "${SOAK_SAMPLES:-/tmp/streamrecvd-soak-samples.txt}"
echo "soak: ${SECONDS_TO_RUN} s of 1080p60: sent ${SENT} access units, published ${PUBLISHED}, dropped ${DROPPED};" \
     "RSS ${RSS_START} kB at start, ${RSS_WARM:-?} kB after 60 s, ${RSS_END} kB at the end (max ${RSS_MAX});" \
     "fds ${FD_START} -> ${FD_END}"
STATUS=0
[ "$SENT" = "$PUBLISHED" ] || { echo "soak: FAIL: $SENT sent, $PUBLISHED published"; STATUS=1; }
[ "$FD_START" = "$FD_END" ] || { echo "soak: FAIL: fd count changed"; STATUS=1; }
if [ -n "${RSS_WARM:-}" ] && [ $(( RSS_END - RSS_WARM )) -ge 1024 ]; then echo "soak: FAIL: RSS grew by $(( RSS_END - RSS_WARM )) kB"; STATUS=1; fi
exit $STATUS
