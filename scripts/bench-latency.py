#!/usr/bin/env python3
"""Latency benchmark: last byte of a frame written by a paced sender -> frame readable to a consumer process.

Three receivers take the same paced stream in turn, in the same run, each in its best low-latency setting:
streamrecvd (a consumer reading the shared-memory ring), the FFmpeg CLI and gst-launch (each read from its
stdout pipe by a consumer process). Sender and consumers timestamp with CLOCK_MONOTONIC (time.monotonic_ns and
clock_gettime), so the two ends share a clock. Writes a markdown section to stdout, the samples and a gnuplot
plot (PNG) to the paths given. Called by scripts/bench.sh (`make bench`).
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

WIDTH, HEIGHT = 1920, 1080
FRAME_BYTES = WIDTH * HEIGHT * 3 // 2  # yuv420p / I420 from the anchors' pipes

ZEROLATENCY = ["-preset", "veryfast", "-tune", "zerolatency", "-b:v", "8M", "-g", "60"]
# The delimiter a sender writes right after each access unit (the next one's AUD, as `streamrecvctl send` does):
# without it an Annex B receiver learns that a frame ended only from the next frame's first bytes.
AUD = {"h264": bytes([0, 0, 0, 1, 0x09, 0xF0]), "h265": bytes([0, 0, 0, 1, 0x46, 0x01, 0x50])}


def stream(label, fps, codec, options, slices=1, link=None, delimited=True):
    """One row: `link` paces each frame's bytes at that many bits per second in 1448-byte writes (None: one
    write per access unit); `delimited` sends the next access unit's delimiter right after each one."""
    return {"label": label, "fps": fps, "codec": codec, "options": options, "slices": slices, "link": link,
            "delimited": delimited}


STREAMS = [
    stream("1080p30 x264 zerolatency, burst, no delimiter", 30, "h264", ZEROLATENCY, delimited=False),
    stream("1080p30 x264 zerolatency, burst", 30, "h264", ZEROLATENCY),
    stream("1080p60 x264 zerolatency, burst", 60, "h264", ["-preset", "veryfast", "-tune", "zerolatency", "-b:v", "12M", "-g", "120"]),
    stream("1080p30 x264 B-frames (bf=2), burst", 30, "h264", ["-preset", "veryfast", "-bf", "2", "-b:v", "8M", "-g", "60"]),
    stream("1080p30 x264 1 slice, 20 Mbit/s", 30, "h264", ZEROLATENCY, 1, 20e6),
    stream("1080p30 x264 8 slices, 20 Mbit/s", 30, "h264", ZEROLATENCY, 8, 20e6),
    stream("1080p30 x264 4 slices, 100 Mbit/s", 30, "h264", ZEROLATENCY, 4, 100e6),
    stream("1080p60 x264 8 slices, 100 Mbit/s", 60, "h264", ["-preset", "veryfast", "-tune", "zerolatency", "-b:v", "12M", "-g", "120"], 8, 100e6),
    stream("1080p30 x265 1 slice, 20 Mbit/s", 30, "h265", ["-preset", "ultrafast", "-tune", "zerolatency", "-b:v", "8M", "-g", "60"], 1, 20e6),
    stream("1080p30 x265 8 slices, 20 Mbit/s", 30, "h265", ["-preset", "ultrafast", "-tune", "zerolatency", "-b:v", "8M", "-g", "60"], 8, 20e6),
]


def run(arguments, **options):
    return subprocess.run(arguments, check=True, capture_output=True, text=True, **options)


def encode(path, fps, seconds, options, codec="h264", slices=1, size=(WIDTH, HEIGHT)):
    """Encodes testsrc2 to `path` unless it exists; returns its access units (decode order) and, for each frame in
    presentation order, the index of the access unit it came from."""
    if not os.path.exists(path):
        # x264's zerolatency tune slices by thread (as many slices as encoder threads): sliced-threads=0 keeps
        # the slice count asked for.
        encoder = ["-c:v", "libx264", "-x264-params", "slices=%d:sliced-threads=0" % slices] if codec == "h264" else \
            ["-c:v", "libx265", "-x265-params", "log-level=error:slices=%d" % slices]
        run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=%dx%d:rate=%d" % (size + (fps,)),
             "-t", str(seconds)] + encoder + options + ["-f", "h264" if codec == "h264" else "hevc", path])
    data = open(path, "rb").read()
    packets = json.loads(run(["ffprobe", "-v", "error", "-show_packets", "-show_entries", "packet=pos",
                              "-of", "json", path]).stdout)["packets"]
    starts = [int(packet["pos"]) for packet in packets]
    units = [data[start:end] for start, end in zip(starts, starts[1:] + [len(data)])]
    frames = json.loads(run(["ffprobe", "-v", "error", "-show_frames", "-show_entries", "frame=pkt_pos",
                             "-of", "json", path]).stdout)["frames"]
    index_of = {start: index for index, start in enumerate(starts)}
    # Frames come out in presentation order; the access unit each came from is its decode-order index.
    decode_index = [index_of[int(frame["pkt_pos"])] for frame in frames]
    return units, decode_index


def decode_time_ms(path, frames):
    """Single-threaded libavcodec decode time per frame: `ffmpeg -benchmark` user time over the whole file."""
    result = subprocess.run(["ffmpeg", "-hide_banner", "-nostats", "-benchmark", "-threads", "1", "-i", path, "-f", "null", "-"],
                            capture_output=True, text=True, check=True)
    for line in (result.stdout + result.stderr).splitlines():
        if line.startswith("bench: utime="):
            return float(line.split("utime=")[1].split("s")[0]) * 1000 / frames
    raise RuntimeError("no -benchmark line from ffmpeg")


def connect(port, timeout=20, receiver=None):
    """A connection to the receiver listening on `port`; an error at once if `receiver` (a process) has exited (a
    missing GStreamer plugin, say), instead of waiting out the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            connection = socket.create_connection(("127.0.0.1", port))
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return connection
        except OSError:
            if receiver is not None and receiver.poll() is not None:
                raise RuntimeError("%s exited with status %d before listening (its stderr: .build/bench/anchor.log)"
                                   % (receiver.args[0], receiver.returncode)) from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def sleep_until(target):
    while True:
        left = target - time.monotonic_ns()
        if left <= 0:
            return
        time.sleep(left / 1e9 if left > 2_000_000 else 0)


def send_paced(units, fps, port, delimiter=b"", link=None, receiver=None):
    """Access unit i starts at start + i/fps (or when the previous one is out), in one sendall, or with `link` in
    1448-byte writes at that many bits per second; the delimiter goes with its last write. Returns when each
    one's last byte was written."""
    connection = connect(port, receiver=receiver)
    time.sleep(0.5)  # the receiver has accepted and settled
    start = time.monotonic_ns() + 10_000_000
    written = []
    clock = start
    for index, unit in enumerate(units):
        clock = max(clock, start + index * 1_000_000_000 // fps)
        data = unit + delimiter
        if link is None:
            sleep_until(clock)
            connection.sendall(data)
        else:
            for offset in range(0, len(data), 1448):
                piece = data[offset:offset + 1448]
                sleep_until(clock)
                connection.sendall(piece)
                clock += int(len(piece) * 8 * 1e9 / link)
        written.append(time.monotonic_ns())
    time.sleep(0.5)
    connection.close()
    return written


def collect(probe, timeout=60):
    """The probe's lines; a probe still waiting after `timeout` s is stopped and what it printed kept."""
    try:
        output, _ = probe.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        probe.kill()
        output, _ = probe.communicate()
    return [line.split() for line in output.decode().splitlines()]


def streamrecvd(args, units, fps, port, delimiter, link, size=(WIDTH, HEIGHT)):
    name = "latency%d" % os.getpid()
    config = os.path.join(args.work, "latency.toml")
    with open(config, "w") as file:
        file.write('[daemon]\nlog_level = "warning"\n[[stream]]\nname = "%s"\nlisten = "tcp://127.0.0.1:%d"\n'
                   'hwaccel = "none"\nmax_width = %d\nmax_height = %d\nslots = 8\nthreads = 1\n'
                   % (name, port, size[0], (size[1] + 15) // 16 * 16))
    # A ring left by an earlier run would be taken over with its counters: start from a fresh one.
    remove_ring(name)
    daemon = subprocess.Popen([args.daemon, "--config", config], stderr=open(os.path.join(args.work, "latency.log"), "a"))
    try:
        while b'"state":"waiting"' not in subprocess.run([args.ctl, "status", name, "--json"], capture_output=True).stdout:
            if daemon.poll() is not None:
                raise RuntimeError("streamrecvd exited; see %s/latency.log" % args.work)
            time.sleep(0.05)
        probe = subprocess.Popen([args.probe, "shm", name, str(len(units))], stdout=subprocess.PIPE)
        time.sleep(0.2)
        written = send_paced(units, fps, port, delimiter, link)
        rows = collect(probe)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait()
    # The slot's pts is the access unit's index in decode order (the daemon counts them from 0): it names the
    # frame even if this consumer was lapped. Per frame: readable, and (AU complete, decoded, published).
    frames = [(int(row[2]), int(row[1]), (int(row[4]), int(row[5]), int(row[6])), int(row[7])) for row in rows]
    return written, frames


def piped(args, command, units, decode_index, fps, port, delimiter, link):
    receiver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=open(os.path.join(args.work, "anchor.log"), "a"))
    probe = subprocess.Popen([args.probe, "pipe", str(FRAME_BYTES), str(len(units))], stdin=receiver.stdout,
                             stdout=subprocess.PIPE)
    receiver.stdout.close()
    try:
        written = send_paced(units, fps, port, delimiter, link, receiver)
        rows = collect(probe)
    finally:
        receiver.kill()
        receiver.wait()
    # A pipe loses nothing: the p-th frame read is the p-th in presentation order.
    return written, [(decode_index[p], int(row[1]), None, 0) for p, row in enumerate(rows) if p < len(decode_index)]


def percentile(values, fraction):
    """NaN when there is nothing to rank (a receiver that delivered no frame: the table says so)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def remove_ring(name):
    try:
        os.remove("/dev/shm/streamrecv-" + name)
    except FileNotFoundError:
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--daemon", default=".build/release/streamrecvd")
    parser.add_argument("--ctl", default=".build/release/streamrecvctl")
    parser.add_argument("--probe", required=True)
    parser.add_argument("--work", default=".build/bench")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--plot", required=True, help="PNG to write")
    parser.add_argument("--only", help="the rows whose label contains this text (all when not given)")
    args = parser.parse_args()
    streams = [row for row in STREAMS if args.only is None or args.only in row["label"]]
    port = 30000 + os.getpid() % 20000
    results = []
    for row in streams:
        label, fps, codec = row["label"], row["fps"], row["codec"]
        name = "".join(c for c in "%s-%d-%s" % (codec, fps, " ".join(row["options"])) if c.isalnum())
        path = os.path.join(args.work, "latency-%s-%dslices-%ds-v2.%s" % (name, row["slices"], args.seconds, codec))
        units, decode_index = encode(path, fps, args.seconds, row["options"], codec, row["slices"])
        decode_alone = decode_time_ms(path, len(decode_index))
        delimiter, link = AUD[codec] if row["delimited"] else b"", row["link"]
        parse, libav = ("h264parse", "avdec_h264") if codec == "h264" else ("h265parse", "avdec_h265")
        anchors = [
            ("streamrecvd (shm consumer)", lambda port: streamrecvd(args, units, fps, port, delimiter, link)),
            ("FFmpeg CLI (pipe consumer)", lambda port: piped(args, [
                "ffmpeg", "-v", "error", "-probesize", "32", "-analyzeduration", "0", "-threads", "1",
                "-f", "h264" if codec == "h264" else "hevc",
                "-framerate", str(fps), "-i", "tcp://127.0.0.1:%d?listen=1" % port, "-fps_mode", "passthrough",
                "-flush_packets", "1", "-f", "rawvideo", "pipe:"], units, decode_index, fps, port, delimiter, link)),
            ("GStreamer gst-launch (pipe consumer)", lambda port: piped(args, [
                "gst-launch-1.0", "-q", "tcpserversrc", "host=127.0.0.1", "port=%d" % port, "!", parse, "!",
                libav, "max-threads=1", "!", "fdsink", "fd=1", "sync=false"], units, decode_index, fps, port, delimiter, link)),
        ]
        for receiver, measure in anchors:
            port += 1
            written, frames = measure(port)
            # The first second is warm-up (decoder creation); the last access unit of a parser-delimited receiver
            # waits for end of input: both left out for every receiver alike.
            kept = [frame for frame in frames if fps <= frame[0] < len(units) - 1]
            latencies = [(readable - written[unit]) / 1e6 for unit, readable, _, _ in kept]
            breakdown = decode = None
            if kept and kept[0][2]:
                # sent → AU complete (transport, the end known), decoding (of the last slice, when the picture was
                # decoded slice by slice), copy into the slot, consumer wake-up.
                breakdown = [[(stages[0] - written[unit]) / 1e6 for unit, _, stages, _ in kept],
                             [(stages[1] - stages[0]) / 1e6 for _, _, stages, _ in kept],
                             [(stages[2] - stages[1]) / 1e6 for _, _, stages, _ in kept],
                             [(readable - stages[2]) / 1e6 for _, readable, stages, _ in kept]]
                decode = breakdown[1]
            # Flag bit 1 (STREAMRECV_FLAG_CORRUPT): frames the daemon flagged damaged; the anchors do not say.
            damaged = sum(1 for frame in frames if frame[3] & 2) if receiver.startswith("streamrecvd") else None
            if not latencies:
                print("bench-latency: %s, %s: no frame came out" % (label, receiver), file=sys.stderr)
            results.append({"stream": label, "receiver": receiver, "frames": len(frames), "expected": len(decode_index),
                            "latencies": latencies, "decode_alone": decode_alone, "breakdown": breakdown,
                            "daemon_decode": decode, "damaged": damaged})
    print("| stream | receiver | frames | damaged | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) | p50 − decode (ms) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for result in results:
        values = result["latencies"]
        p50, p90, p99 = (percentile(values, f) for f in (0.5, 0.9, 0.99))
        print("| %s | %s | %d/%d | %s | %.1f | %.1f | %.1f | %.1f | %+.1f |" % (
            result["stream"], result["receiver"], result["frames"], result["expected"],
            "–" if result["damaged"] is None else result["damaged"], p50, p90, p99, max(values),
            p50 - result["decode_alone"]) if values else "| %s | %s | 0/%d | – | – | – | – | – | – |" % (
            result["stream"], result["receiver"], result["expected"]))
    print("")
    print("| stream | decode alone, ffmpeg -threads 1 -benchmark (ms/frame) | streamrecvd decode after the last byte, p50 / p99 (ms) | "
          "streamrecvd p50 − decode | p99 − decode | added by streamrecvd, p50 / p99 (ms) "
          "| FFmpeg CLI p50 ÷ streamrecvd p50 | streamrecvd p50 ÷ GStreamer p50 |")
    print("|---|---|---|---|---|---|---|---|")
    for row in streams:
        ours, ffmpeg, gst = [r for r in results if r["stream"] == row["label"]]
        decode = ours["decode_alone"]
        p50 = percentile(ours["latencies"], 0.5)
        # Each frame's latency less its own decoding time in the daemon: what streamrecvd adds, whatever the frame.
        added = [latency - decoding for latency, decoding in zip(ours["latencies"], ours["daemon_decode"] or [])]
        print("| %s | %.2f | %.2f / %.2f | %+.2f ms | %+.2f ms | %.2f / %.2f | %.2f× | %.3f |" % (
            row["label"], decode, percentile(ours["daemon_decode"], 0.5), percentile(ours["daemon_decode"], 0.99),
            p50 - decode, percentile(ours["latencies"], 0.99) - decode, percentile(added, 0.5), percentile(added, 0.99),
            percentile(ffmpeg["latencies"], 0.5) / p50, p50 / percentile(gst["latencies"], 0.5)))
    print("")
    print("Where streamrecvd's time goes (medians, ms): last byte written → access unit complete (loopback, event "
          "loop, the end known), decoding after that (the last slice's, for pictures decoded slice by slice), copy "
          "into the slot, published → readable to the consumer (futex wake-up).")
    print("")
    print("| stream | written → AU complete | decode | copy into slot | wake-up |")
    print("|---|---|---|---|---|")
    for result in results:
        if result["breakdown"]:
            print("| %s | %s |" % (result["stream"], " | ".join(
                "%.2f" % percentile(values, 0.5) for values in result["breakdown"])))
    plot(args, results)


def plot(args, results):
    """Cumulative distributions, one panel per stream, one line per receiver (gnuplot, pngcairo)."""
    labels = [row["label"] for row in STREAMS if any(r["stream"] == row["label"] for r in results)]
    script = ["set terminal pngcairo size 2000,900 font 'sans,9'", "set output '%s'" % args.plot,
              "set multiplot layout 2,%d title 'Last byte written -> frame readable to a consumer (CDF; dashed: decoding alone)'" % max(1, (len(labels) + 1) // 2),
              "set logscale x", "set xlabel 'latency (ms, log scale)'", "set ylabel 'fraction of frames'",
              "set key bottom right", "set grid", "set yrange [0:1]", "set xrange [1:1000]"]
    for label in labels:
        lines = []
        for index, result in enumerate(r for r in results if r["stream"] == label):
            data = os.path.join(args.work, "latency-%s-%d.dat" % ("".join(c for c in label if c.isalnum()), index))
            values = sorted(result["latencies"])
            with open(data, "w") as file:
                for rank, value in enumerate(values):
                    file.write("%.4f %.5f\n" % (value, (rank + 1) / len(values)))
            lines.append("'%s' using 1:2 with steps linewidth 2 title '%s'" % (data, result["receiver"]))
        decode = next(r for r in results if r["stream"] == label)["decode_alone"]
        script.append("set title '%s'" % label)
        script.append("set arrow 1 from %.3f,0 to %.3f,1 nohead dashtype 2 linecolor 'gray'" % (decode, decode))
        script.append("plot " + ", ".join(lines))
    script.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(script), text=True, check=True)


if __name__ == "__main__":
    sys.exit(main())
