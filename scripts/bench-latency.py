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

STREAMS = [
    # (label, fps, x264 options)
    ("1080p30 x264 zerolatency", 30, ["-preset", "veryfast", "-tune", "zerolatency", "-b:v", "8M", "-g", "60"]),
    ("1080p60 x264 zerolatency", 60, ["-preset", "veryfast", "-tune", "zerolatency", "-b:v", "12M", "-g", "120"]),
    ("1080p30 x264 B-frames (bf=2)", 30, ["-preset", "veryfast", "-bf", "2", "-b:v", "8M", "-g", "60"]),
]


def run(arguments, **options):
    return subprocess.run(arguments, check=True, capture_output=True, text=True, **options)


def encode(path, fps, seconds, options, size=(WIDTH, HEIGHT)):
    """Encodes testsrc2 to `path` unless it exists; returns its access units (decode order) and, for each frame in
    presentation order, the index of the access unit it came from."""
    if not os.path.exists(path):
        run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=%dx%d:rate=%d" % (size + (fps,)),
             "-t", str(seconds), "-c:v", "libx264"] + options + ["-f", "h264", path])
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


def connect(port, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        try:
            connection = socket.create_connection(("127.0.0.1", port))
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return connection
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def send_paced(units, fps, port):
    """Writes access unit i at start + i/fps, each in one sendall; returns when each one's last byte was written."""
    connection = connect(port)
    time.sleep(0.5)  # the receiver has accepted and settled
    start = time.monotonic_ns() + 10_000_000
    written = []
    for index, unit in enumerate(units):
        target = start + index * 1_000_000_000 // fps
        while True:
            left = target - time.monotonic_ns()
            if left <= 0:
                break
            time.sleep(left / 1e9 if left > 2_000_000 else 0)
        connection.sendall(unit)
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


def streamrecvd(args, units, fps, port):
    name = "latency%d" % os.getpid()
    config = os.path.join(args.work, "latency.toml")
    with open(config, "w") as file:
        file.write('[daemon]\nlog_level = "warning"\n[[stream]]\nname = "%s"\nlisten = "tcp://127.0.0.1:%d"\n'
                   'hwaccel = "none"\nmax_width = 1920\nmax_height = 1088\nslots = 8\nthreads = 1\n' % (name, port))
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
        written = send_paced(units, fps, port)
        rows = collect(probe)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait()
    # The slot's pts is the access unit's index in decode order (the daemon counts them from 0): it names the
    # frame even if this consumer was lapped. Per frame: readable, and (AU complete, decoded, published).
    frames = [(int(row[2]), int(row[1]), (int(row[4]), int(row[5]), int(row[6]))) for row in rows]
    return written, frames


def piped(args, command, units, decode_index, fps, port):
    receiver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=open(os.path.join(args.work, "anchor.log"), "a"))
    probe = subprocess.Popen([args.probe, "pipe", str(FRAME_BYTES), str(len(units))], stdin=receiver.stdout,
                             stdout=subprocess.PIPE)
    receiver.stdout.close()
    try:
        written = send_paced(units, fps, port)
        rows = collect(probe)
    finally:
        receiver.kill()
        receiver.wait()
    # A pipe loses nothing: the p-th frame read is the p-th in presentation order.
    return written, [(decode_index[p], int(row[1]), None) for p, row in enumerate(rows) if p < len(decode_index)]


def percentile(values, fraction):
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
    args = parser.parse_args()
    port = 30000 + os.getpid() % 20000
    results = []
    for label, fps, options in STREAMS:
        path = os.path.join(args.work, "latency-%s-%ds.h264" % ("".join(c for c in label if c.isalnum()), args.seconds))
        units, decode_index = encode(path, fps, args.seconds, options)
        decode_alone = decode_time_ms(path, len(decode_index))
        anchors = [
            ("streamrecvd (shm consumer)", lambda port: streamrecvd(args, units, fps, port)),
            ("FFmpeg CLI (pipe consumer)", lambda port: piped(args, [
                "ffmpeg", "-v", "error", "-probesize", "32", "-analyzeduration", "0", "-threads", "1", "-f", "h264",
                "-framerate", str(fps), "-i", "tcp://127.0.0.1:%d?listen=1" % port, "-fps_mode", "passthrough",
                "-flush_packets", "1", "-f", "rawvideo", "pipe:"], units, decode_index, fps, port)),
            ("GStreamer gst-launch (pipe consumer)", lambda port: piped(args, [
                "gst-launch-1.0", "-q", "tcpserversrc", "host=127.0.0.1", "port=%d" % port, "!", "h264parse", "!",
                "avdec_h264", "max-threads=1", "!", "fdsink", "fd=1", "sync=false"], units, decode_index, fps, port)),
        ]
        for receiver, measure in anchors:
            port += 1
            written, frames = measure(port)
            # The first second is warm-up (decoder creation); the last access unit of a parser-delimited receiver
            # waits for end of input: both left out for every receiver alike.
            kept = [frame for frame in frames if fps <= frame[0] < len(units) - 1]
            latencies = [(readable - written[unit]) / 1e6 for unit, readable, _ in kept]
            breakdown = decode = None
            if kept and kept[0][2]:
                # sent → AU complete (transport, idle flush), decoding, copy into the slot, consumer wake-up.
                breakdown = [[(stages[0] - written[unit]) / 1e6 for unit, _, stages in kept],
                             [(stages[1] - stages[0]) / 1e6 for _, _, stages in kept],
                             [(stages[2] - stages[1]) / 1e6 for _, _, stages in kept],
                             [(readable - stages[2]) / 1e6 for _, readable, stages in kept]]
                decode = breakdown[1]
            results.append({"stream": label, "receiver": receiver, "frames": len(frames), "expected": len(decode_index),
                            "latencies": latencies, "decode_alone": decode_alone, "breakdown": breakdown,
                            "daemon_decode": decode})
    print("| stream | receiver | frames | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) | p50 − decode (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    for result in results:
        values = result["latencies"]
        p50, p90, p99 = (percentile(values, f) for f in (0.5, 0.9, 0.99))
        print("| %s | %s | %d/%d | %.1f | %.1f | %.1f | %.1f | %+.1f |" % (
            result["stream"], result["receiver"], result["frames"], result["expected"], p50, p90, p99, max(values),
            p50 - result["decode_alone"]))
    print("")
    print("| stream | decode alone, ffmpeg -threads 1 -benchmark (ms/frame) | streamrecvd decode p50 / p99 (ms) | "
          "streamrecvd p50 − decode (goal ≤ 1 ms) | p99 − decode (goal ≤ 3 ms) | added by streamrecvd, p50 / p99 (ms) "
          "| FFmpeg CLI p50 ÷ streamrecvd p50 | GStreamer p50 ÷ streamrecvd p50 |")
    print("|---|---|---|---|---|---|---|---|")
    for label, _, _ in STREAMS:
        ours, ffmpeg, gst = [r for r in results if r["stream"] == label]
        decode = ours["decode_alone"]
        p50 = percentile(ours["latencies"], 0.5)
        # Each frame's latency less its own decoding time in the daemon: what streamrecvd adds, whatever the frame.
        added = [latency - decoding for latency, decoding in zip(ours["latencies"], ours["daemon_decode"])]
        print("| %s | %.2f | %.2f / %.2f | %+.2f ms | %+.2f ms | %.2f / %.2f | %.2f× | %.2f× |" % (
            label, decode, percentile(ours["daemon_decode"], 0.5), percentile(ours["daemon_decode"], 0.99),
            p50 - decode, percentile(ours["latencies"], 0.99) - decode, percentile(added, 0.5), percentile(added, 0.99),
            percentile(ffmpeg["latencies"], 0.5) / p50, percentile(gst["latencies"], 0.5) / p50))
    print("")
    for label, _, options in STREAMS:
        if "-bf" in options:
            continue  # reordering delay is the stream's, not the receiver's
        ours = next(r for r in results if r["stream"] == label and r["receiver"].startswith("streamrecvd"))
        p50 = percentile(ours["latencies"], 0.5) - ours["decode_alone"]
        p99 = percentile(ours["latencies"], 0.99) - ours["decode_alone"]
        verdict = lambda value, goal: "met" if value <= goal else "missed by %.2f ms" % (value - goal)
        print("- %s: p50 ≤ decode + 1 ms %s (%+.2f ms); p99 ≤ decode + 3 ms %s (%+.2f ms)." % (
            label, verdict(p50, 1), p50, verdict(p99, 3), p99))
    print("")
    print("Where streamrecvd's time goes (medians, ms): last byte written → access unit complete (loopback, event "
          "loop, idle flush), decoding, copy into the slot, published → readable to the consumer (futex wake-up).")
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
    script = ["set terminal pngcairo size 1400,480 font 'sans,10'", "set output '%s'" % args.plot,
              "set multiplot layout 1,%d title 'Last byte written -> frame readable to a consumer (CDF; dashed: decoding alone)'" % len(STREAMS),
              "set logscale x", "set xlabel 'latency (ms, log scale)'", "set ylabel 'fraction of frames'",
              "set key bottom right", "set grid", "set yrange [0:1]", "set xrange [1:1000]"]
    for label, _, _ in STREAMS:
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
