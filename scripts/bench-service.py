#!/usr/bin/env python3
"""Service figures of a release streamrecvd: start to READY=1 (a real NOTIFY_SOCKET listener), decoder recreation
on parameter-set changes (software, from the daemon's own measurement in its log) with every frame accounted for,
and 8 paced 720p30 streams at once (frames, latency, the daemon's CPU time against decoding alone). Prints
markdown. Called by scripts/bench.sh (`make bench`).
"""
import argparse
import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("latency", os.path.join(here, "bench-latency.py"))
latency = importlib.util.module_from_spec(spec)
spec.loader.exec_module(latency)


def write_config(path, streams, log_level="warning", metrics=None):
    """streams: [(name, port, max_width, max_height)]"""
    with open(path, "w") as file:
        file.write('[daemon]\nlog_level = "%s"\n' % log_level)
        if metrics:
            file.write('metrics = "127.0.0.1:%d"\n' % metrics)
        for name, port, width, height in streams:
            file.write('[[stream]]\nname = "%s"\nlisten = "tcp://127.0.0.1:%d"\nhwaccel = "none"\nmax_width = %d\n'
                       'max_height = %d\nslots = 8\nthreads = 1\n' % (name, port, width, height))


def start_to_ready(args, streams, runs=5):
    """Seconds from spawning the daemon to READY=1 on its notify socket."""
    config = os.path.join(args.work, "ready.toml")
    write_config(config, streams)
    times = []
    for run in range(runs + 1):
        path = os.path.abspath(os.path.join(args.work, "notify-%d.sock" % os.getpid()))  # sd_notify wants it absolute
        if os.path.exists(path):
            os.remove(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        listener.bind(path)
        listener.settimeout(10)
        start = time.monotonic()
        daemon = subprocess.Popen([args.daemon, "--config", config], env=dict(os.environ, NOTIFY_SOCKET=path),
                                  stderr=open(os.path.join(args.work, "ready.log"), "a"))
        try:
            while b"READY=1" not in listener.recv(4096):
                pass
            if run > 0:  # the first run loads the binary and its libraries from disk: left out
                times.append(time.monotonic() - start)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait()
            listener.close()
            os.remove(path)
    return sorted(times)


def recreation(args, port):
    """A stream changing size at every keyframe, paced at 30 fps: the daemon's creation times and frame count."""
    segments = [(1280, 720), (1920, 1080), (640, 360), (1280, 720), (1920, 1080), (854, 480)] * 2
    data = b""
    for index, (width, height) in enumerate(segments):
        path = os.path.join(args.work, "segment-%dx%d.h264" % (width, height))
        if not os.path.exists(path):
            subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                            "testsrc2=size=%dx%d:rate=30" % (width, height), "-frames:v", "15", "-c:v", "libx264",
                            "-preset", "veryfast", "-tune", "zerolatency", "-f", "h264", path], check=True)
        data += open(path, "rb").read()
    path = os.path.join(args.work, "recreation.h264")
    with open(path, "wb") as file:
        file.write(data)
    units, order = latency.encode(path, 30, 0, [])
    name = "recreate%d" % os.getpid()
    config = os.path.join(args.work, "recreation.toml")
    write_config(config, [(name, port, 1920, 1088)], log_level="info", metrics=port + 1)
    log = os.path.join(args.work, "recreation.log")
    daemon = subprocess.Popen([args.daemon, "--config", config], stderr=open(log, "w"))
    try:
        while b'"state":"waiting"' not in subprocess.run([args.ctl, "status", name, "--json"], capture_output=True).stdout:
            time.sleep(0.05)
        latency.send_paced(units, 30, port)
        time.sleep(0.5)
        status = subprocess.run([args.ctl, "status", name, "--json"], capture_output=True).stdout
        published = int(re.search(rb'"frames_published":(\d+)', status).group(1))
        recreations = int(re.search(rb'"decoder_recreations":(\d+)', status).group(1))
        # The log says "decoder recreated" at most once per interval: the histogram has every creation.
        metrics = subprocess.run(["curl", "-s", "http://127.0.0.1:%d/metrics" % (port + 1)], capture_output=True,
                                 text=True).stdout
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait()
    first = re.search(r"decoder created [^\n]*?creation_ms[ =]([0-9.]+)", open(log).read())
    total = sum(float(value) for value in re.findall(r"streamrecvd_decoder_creation_seconds_sum\{[^}]*\} ([0-9.e-]+)", metrics))
    count = sum(int(float(value)) for value in re.findall(r"streamrecvd_decoder_creation_seconds_count\{[^}]*\} ([0-9.e+]+)", metrics))
    return (float(first.group(1)) if first else None), recreations, total * 1000, count, published, len(order), \
        len(segments) - 1


def cpu_seconds(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def many_streams(args, port, count=8, seconds=10):
    path = os.path.join(args.work, "x264-720p30-zerolatency.h264")
    units, order = latency.encode(path, 30, seconds, ["-preset", "veryfast", "-tune", "zerolatency", "-b:v", "4M",
                                                      "-g", "60"], size=(1280, 720))
    decode_ms = latency.decode_time_ms(path, len(order))
    names = ["many%d-%d" % (os.getpid() % 10000, index) for index in range(count)]
    config = os.path.join(args.work, "many.toml")
    write_config(config, [(name, port + index, 1280, 720) for index, name in enumerate(names)])
    daemon = subprocess.Popen([args.daemon, "--config", config], stderr=open(os.path.join(args.work, "many.log"), "w"))
    results = {}
    try:
        for name in names:
            while b'"state":"waiting"' not in subprocess.run([args.ctl, "status", name, "--json"], capture_output=True).stdout:
                time.sleep(0.05)
        probes = [subprocess.Popen([args.probe, "shm", name, str(len(units))], stdout=subprocess.PIPE) for name in names]
        time.sleep(0.2)
        cpu_before = cpu_seconds(daemon.pid)

        def send(index):
            time.sleep(index / 30 / count)  # staggered like independent cameras
            results[index] = latency.send_paced(units, 30, port + index)
        senders = [threading.Thread(target=send, args=(index,)) for index in range(count)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join()
        rows = [latency.collect(probe, timeout=15) for probe in probes]
        cpu = cpu_seconds(daemon.pid) - cpu_before
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait()
    latencies, frames = [], []
    for index, stream_rows in enumerate(rows):
        frames.append(len(stream_rows))
        written = results[index]
        # The slot's pts is the access unit's index in decode order (see bench-latency.py).
        latencies += [(int(row[1]) - written[int(row[2])]) / 1e6 for row in stream_rows if 30 <= int(row[2]) < len(units) - 1]
    return frames, len(order), latencies, cpu, decode_ms * len(order) * count / 1000


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--daemon", default=".build/release/streamrecvd")
    parser.add_argument("--ctl", default=".build/release/streamrecvctl")
    parser.add_argument("--probe", required=True)
    parser.add_argument("--work", default=".build/bench")
    args = parser.parse_args()
    port = 45000 + os.getpid() % 10000
    one = start_to_ready(args, [("ready1", port, 1920, 1088)])
    eight = start_to_ready(args, [("ready8-%d" % index, port + 1 + index, 1280, 720) for index in range(8)])
    print("| start → READY=1 (5 runs after one left out) | median | max |")
    print("|---|---|---|")
    print("| 1 stream (1080p ring) | %.0f ms | %.0f ms |" % (one[2] * 1000, one[-1] * 1000))
    print("| 8 streams (720p rings) | %.0f ms | %.0f ms |" % (eight[2] * 1000, eight[-1] * 1000))
    first, recreations, total_ms, count, published, frames, changes = recreation(args, port + 20)
    if first is None or count != recreations + 1:
        sys.exit("decoder creations: %s in the log, %d in the histogram, %d recreations in the ring: did a format "
                 "change?" % (first, count, recreations))
    print("")
    print("Decoder creation, measured by the daemon (`creation_ms` in its log, the histogram "
          "`streamrecvd_decoder_creation_seconds`, the ring's `decoder_recreations`): first creation %.2f ms; "
          "%d recreations at %d size changes (720p ↔ 1080p ↔ 360p ↔ 480p, 15 frames each, paced at 30 fps), "
          "%.2f ms each on average; frames published %d of %d."
          % (first, recreations, changes, (total_ms - first) / max(recreations, 1), published, frames))
    frames, expected, latencies, cpu, decode_cpu = many_streams(args, port + 40)
    print("")
    print("8 × 720p30 x264 zerolatency (4 Mbit/s) streams into one daemon at once, %d s each, each paced by its own "
          "sender thread, each read by its own consumer process:" % (expected // 30))
    print("")
    print("| frames published per stream | latency p50 / p99 / max (all streams) | daemon CPU time | "
          "decoding alone (ffmpeg -threads 1 -benchmark × 8) | daemon ÷ decoding |")
    print("|---|---|---|---|---|")
    print("| %s of %d | %.1f / %.1f / %.1f ms | %.2f s | %.2f s | %.2f |" % (
        ", ".join(str(value) for value in frames), expected, latency.percentile(latencies, 0.5),
        latency.percentile(latencies, 0.99), max(latencies), cpu, decode_cpu, cpu / decode_cpu))


if __name__ == "__main__":
    sys.exit(main())
