#!/usr/bin/env bash
# Runs every benchmark on release builds and rewrites docs/benchmarks.md (tables, with the commands that made
# them) and docs/latency.png (the latency distributions). Called by `make bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
work=.build/bench
mkdir -p "$work"
# The consumer side of the latency benchmark (built against the product's shm header) and the per-thread
# allocation counter, preloaded into an unmodified daemon.
gcc -O2 -std=c11 -Wall -I Sources/CFrameRing/include scripts/latency-probe.c -o "$work/latency-probe"
gcc -O2 -Wall -shared -fPIC scripts/malloc-count.c -o "$work/malloc-count.so" -lpthread -ldl

split_stream="$work/x264-1080p30-20mbps.h264"
if [ ! -s "$split_stream" ]; then
    # Real stream bytes: 10 s of 1080p30 x264 at 20 Mbit/s with B-frames.
    ffmpeg -v error -y -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 10 -c:v libx264 -preset veryfast \
        -b:v 20M -bf 2 -f h264 "$split_stream"
fi
stream="$work/x264-1080p30-zerolatency.h264"
if [ ! -s "$stream" ]; then
    # 20 s of 1080p30 at 8 Mbit/s, x264 zerolatency: the kind of stream a screen sharer sends.
    ffmpeg -v error -y -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 20 -c:v libx264 -preset veryfast \
        -tune zerolatency -b:v 8M -g 60 -f h264 "$stream"
fi

echo "latency…" >&2
latency_tables=$(python3 scripts/bench-latency.py --probe "$work/latency-probe" --plot docs/latency.png --seconds 8)
echo "throughput…" >&2
throughput_table=$(python3 scripts/bench-throughput.py --stream "$stream" --probe "$work/latency-probe")
echo "allocations…" >&2
allocation_table=$(python3 scripts/bench-allocations.py --preload "$work/malloc-count.so" --stream "$stream")
echo "service…" >&2
service_tables=$(python3 scripts/bench-service.py --probe "$work/latency-probe")
echo "GStreamer element…" >&2
make gst-plugin >/dev/null
gstreamer_table=$(python3 scripts/bench-gstreamer.py --probe "$work/latency-probe" --stream "$stream")
echo "RTSP…" >&2
rtsp_table=$(python3 scripts/bench-rtsp.py --probe "$work/latency-probe" --stream "$stream")
rtsp_silent_table=$(python3 scripts/bench-rtsp.py --probe "$work/latency-probe" --stream "$stream" --runs 0 --outage silent)
echo "splitting…" >&2
split_table=$(.build/release/BitstreamBenchmark "$split_stream" 256)
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
versions="$(ffmpeg -version | sed -n 1p | cut -d' ' -f1-3), $(gst-launch-1.0 --version | sed -n 's/^GStreamer //p' | head -1 | sed 's/^/GStreamer /')"

# Sections written by other means (the GPU kit's report, A/B runs, scripts/bench-webrtc.py) follow a marker line
# and are kept as they are.
marker='<!-- Below: sections not written by make bench (kept by scripts/bench.sh) -->'
kept=$(awk -v marker="$marker" 'found || $0 == marker { found = 1; print }' docs/benchmarks.md)

cat > docs/benchmarks.md <<DOC
# Benchmarks

Written by \`make bench\` (scripts/bench.sh) on $(date -u +%Y-%m-%d), $(nproc) cores, ${cpu}; ${versions}.
Release builds, software decoding (no GPU here), every anchor run side by side with streamrecvd in the same run.
Hardware decoding (NVDEC) is measured by the GPU kit on a lent device (docs/gpu-kit.md): its runs are in the
sections at the end, which \`make bench\` keeps as they are.
Only ratios carry over to other machines; on this 2-core VM repeated runs vary by about ±10 %. Tests never
assert timings.

## Latency: last byte written → frame readable to a consumer

\`scripts/bench-latency.py\`: a paced sender (TCP_NODELAY, loopback) starts each access unit at its frame time and
records when its last byte was written (CLOCK_MONOTONIC); a consumer process records when the frame became readable
to it, on the same clock. "burst": each access unit in one \`sendall\`; "N Mbit/s": each frame's bytes paced at
that link rate in 1448-byte writes (a frame larger than the link carries in a frame interval delays the next). Every
row but the first sends the next access unit's delimiter (AUD) right after each one, in its last write, as
\`streamrecvctl send\` does: Annex B has no other way to say that a frame ended, and all three receivers get the same
bytes. The first row sends no delimiter: every receiver then learns that a frame ended from the next frame's first
bytes (docs/latency.md). Three receivers take the same stream in turn, each in its best low-latency setting,
single-threaded decoding:

- streamrecvd: \`threads = 1\`; consumer \`scripts/latency-probe.c shm\` waits on the ring's futex; a frame is
  readable once its slot's metadata has been read under the seqlock (pixels are read in place). H.264 pictures
  other than IDR are decoded slice by slice as the slices arrive.
- FFmpeg CLI: \`ffmpeg -probesize 32 -analyzeduration 0 -threads 1 -f h264|hevc -framerate FPS -i tcp://…?listen=1
  -fps_mode passthrough -flush_packets 1 -f rawvideo pipe:\` (\`-fflags nobuffer\` is left out: it stalls and
  drops frames here); consumer \`latency-probe pipe\` reads whole frames from its stdout.
- GStreamer: \`gst-launch-1.0 -q tcpserversrc ! h264parse|h265parse ! avdec_h264|avdec_h265 max-threads=1 ! fdsink fd=1
  sync=false\`; same pipe consumer.

The first second (decoder start-up) and the last frame (a receiver may wait for end of input) are left out for
every receiver alike. "damaged": frames streamrecvd flagged corrupt (the anchors do not say). "Decode alone" is
\`ffmpeg -benchmark -threads 1 -i FILE -f null -\` user time per frame; "streamrecvd decode after the last byte" is
the daemon's own AU-complete → decoded time per frame (from the slots): for a picture decoded slice by slice, the
decoding of its last slice.

${latency_tables}

![Latency distributions](latency.png)

With B-frames every receiver must hold frames back until later ones arrive (presentation order); streamrecvd's
p50 is that reordering delay plus decoding.

The time above decoding is, per frame: the loopback and event-loop hop ("written → AU complete"), one copy of the
picture into the slot (about 0.6 ms for 3 MB of NV12 at this VM's memory bandwidth; streaming stores were tried and
made no difference, see docs/architecture.md on \`get_buffer2\`), and the consumer's futex wake-up; "added by
streamrecvd" subtracts each frame's own decode time.

## Throughput over TCP into shared memory

\`scripts/bench-throughput.py\`: the stream is sent over TCP on loopback as fast as the receiver takes it; time from
the first byte sent to the last frame out (streamrecvd: the CLOCK_MONOTONIC publish time of the last frame, read
from the ring; the anchors: their exit at end of input, and with a pipe, the consumer having read every frame).
\`ffmpeg -threads N -i FILE -f null -\` decodes the file itself (no network, no output), timed by its own
\`-benchmark\` clock (rtime: its process start and probe left out, as streamrecvd's start is). N = 1 is streamrecvd's
default (slice threads: no added delay); N = 2 frame threads trade a frame of latency per thread for throughput.

${throughput_table}

Decoding to a null sink is an upper bound no receiver reaches once it hands frames to another program: the
anchors' pipe rows are what that costs them (two more copies of every frame through the kernel). streamrecvd's
one copy into the slot runs on its decode thread; on two cores it is not hidden behind decoding, which is why it
trails the null sinks by roughly that copy's share of a frame (about 0.6 ms of 4–5 ms). With frame threads it costs
more than its share: it holds up the next packet of a frame thread that has finished (measured in "Issue 35:
FFmpeg's anchor without its start, and where the frame-thread gap is").

## Heap allocations per frame

\`scripts/bench-allocations.py\`: the release daemon runs unmodified under \`LD_PRELOAD=malloc-count.so\`
(\`scripts/malloc-count.c\`), which counts every malloc/calloc/realloc/memalign per thread and per calling library.
After a warm-up, the counts are read, more access units are sent (paced), every frame awaited, and the counts read
again. Rows from libswiftCore are allocations of streamrecvd's own code (Swift objects and arrays); libavutil rows
are libavcodec's internal ones (\`av_malloc\`: reference-counted frame and picture buffers, side data), which any
libavcodec user pays. The "default-qos" threads are Swift's concurrency pool (status and watchdog tasks, once a
second, not per frame).

${allocation_table}

Copies of pixel data per frame: one (decoder output → shared-memory slot; for \`output = "auto"\` the chroma is
interleaved into NV12 on the way).

## Service

\`scripts/bench-service.py\`.

${service_tables}

## streamrecvsrc (GStreamer) against reading the ring directly

\`scripts/bench-gstreamer.py\`: one paced 1080p30 stream, read at once by \`latency-probe shm\` and by
\`gst-launch-1.0 streamrecvsrc ! fakesink\` (the element logs when each frame leaves it, at GST_LEVEL_LOG).

${gstreamer_table}

## RTSP pull over UDP against rtp://

\`scripts/bench-rtsp.py\`: the same RTP packets (RFC 6184, 1400-byte payloads, marker on each frame's last packet),
paced at 30 fps, sent once to a \`listen = "rtp://…"\` stream and once, by a minimal RTSP server in the script (so
that it knows when each packet left), to the port pair a \`source = "rtsp://…"\` stream with \`rtsp_transport = "udp"\`
asked for, alternating runs; then the camera goes away (connection closed, port closed) and comes back.

${rtsp_table}

\`--runs 0 --outage silent\`: the camera's connection is left open and answers nothing, as when it loses power or
hangs; the daemon notices a session without a packet for a second by asking the server (2 s to answer).

${rtsp_silent_table}

## Annex B splitting

\`.build/release/BitstreamBenchmark $split_stream 256\`: the stream is repeated in memory to at least 256 MiB,
then split by \`AnnexBSplitter\` fed in chunks of 1 MiB, 64 KiB and 1500 bytes (a datagram), each the best of 5
runs, against a C \`memchr\`-based start-code scan (memchr for the \`01\` byte, then a look at the two bytes before
it) over the same buffer. Heap allocations are counted by interposing malloc (\`CAllocationCounter\`) around one
whole split.

${split_table}
DOC
if [ -n "$kept" ]; then printf '\n%s\n' "$kept" >> docs/benchmarks.md; fi
echo "wrote docs/benchmarks.md and docs/latency.png"
