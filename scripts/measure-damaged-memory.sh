#!/usr/bin/env bash
# The daemon's anonymous memory (RssAnon) while N TCP streams receive damaged H.264 in a loop, then idle
# (docs/reliability.md, "Round three"). Not part of `make test`: a measurement to repeat when a report says memory
# grows. Needs the release build (make build) and ffmpeg with libx264.
#   scripts/measure-damaged-memory.sh [FLIP_EVERY_BYTES (0: clean)] [SECONDS] [STREAMS] [SIZE]
set -euo pipefail
cd "$(dirname "$0")/.."
flip=${1:-300} seconds=${2:-40} streams=${3:-4} size=${4:-1920x1080}
work=$(mktemp -d /tmp/streamrecvd-memory.XXXXXX)
daemon=
senders=()
cleanup() {
    set +e
    [ ${#senders[@]} -gt 0 ] && kill "${senders[@]}" 2>/dev/null
    pkill -f "streamrecvctl send $work/" 2>/dev/null
    [ -n "$daemon" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
    for i in $(seq "$streams"); do rm -f "/dev/shm/streamrecv-memory$i-$$"; done
    rm -rf "$work"
}
trap cleanup EXIT
ffmpeg -v error -y -f lavfi -i "testsrc2=size=$size:rate=30" -frames:v 150 -c:v libx264 -preset veryfast \
    -x264-params keyint=30:bframes=3 -f h264 "$work/clean.h264"
python3 - "$work/clean.h264" "$work/sent.h264" "$flip" <<'PY'
import random, sys
data = bytearray(open(sys.argv[1], "rb").read())
every = int(sys.argv[3])
generator = random.Random(1)
position = generator.randrange(every) if every else len(data)
while position < len(data):
    data[position] ^= 1 << generator.randrange(8)
    position += generator.randrange(1, 2 * every)
open(sys.argv[2], "wb").write(data)
PY
base=$((20000 + RANDOM % 20000))
{
    printf '[daemon]\nlog_level = "info"\n'
    for i in $(seq "$streams"); do
        printf '\n[[stream]]\nname = "memory%d-%d"\nlisten = "tcp://127.0.0.1:%d"\nhwaccel = "none"\n' "$i" $$ $((base + i))
    done
} >"$work/daemon.toml"
.build/release/streamrecvd --config "$work/daemon.toml" >"$work/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do grep -q "ready:" "$work/daemon.log" && break; sleep 0.1; done
grep -q "ready:" "$work/daemon.log" || { echo "the daemon did not start: $(tail -3 "$work/daemon.log")" >&2; exit 1; }
anon() { awk '/^RssAnon:/ { print $2 " kB" }' "/proc/$daemon/status"; }
echo "start: $(anon)"
for i in $(seq "$streams"); do
    ( end=$((SECONDS + seconds)); while [ $SECONDS -lt $end ]; do
        .build/release/streamrecvctl send "$work/sent.h264" "tcp://127.0.0.1:$((base + i))" >/dev/null 2>&1 || sleep 0.2
    done ) &
    senders+=($!)
done
for t in $(seq 5 5 "$seconds"); do sleep 5; echo "t=$t s: $(anon)"; done
wait "${senders[@]}"
sleep 5
echo "idle 5 s after: $(anon) (decoders still open until decoder_linger, 30 s by default)"
sleep 30
echo "idle 35 s after: $(anon)"
