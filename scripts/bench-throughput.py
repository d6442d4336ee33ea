#!/usr/bin/env python3
"""Decode throughput: a 1080p x264 stream sent over TCP on loopback as fast as the socket takes it, until the
last frame is out, by streamrecvd (into shared memory) and by both receiving anchors (the FFmpeg CLI and
gst-launch), each once decoding to a null sink and once writing raw frames to a pipe that a consumer process
reads (what handing frames to another program costs them), against `ffmpeg -threads N -i FILE -f null -`
decoding the file; all with the same N, in the same run, best of 3 each. Prints a markdown table. Called by
scripts/bench.sh (`make bench`).
"""
import argparse
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("latency", os.path.join(here, "bench-latency.py"))
latency = importlib.util.module_from_spec(spec)
spec.loader.exec_module(latency)


def send_all(data, port):
    """Connects, writes everything as fast as the receiver takes it, closes; returns when the first byte went."""
    connection = latency.connect(port)
    start = time.monotonic_ns()
    connection.sendall(data)
    connection.close()
    return start


def streamrecvd(args, data, frames, threads, threading, port):
    name = "throughput%d" % os.getpid()
    config = os.path.join(args.work, "throughput.toml")
    with open(config, "w") as file:
        file.write('[daemon]\nlog_level = "warning"\n[[stream]]\nname = "%s"\nlisten = "tcp://127.0.0.1:%d"\n'
                   'hwaccel = "none"\nmax_width = 1920\nmax_height = 1088\nslots = 8\nthreads = %d\n'
                   'threading = "%s"\n' % (name, port, threads, threading))
    # A ring left by an earlier run would be taken over with its counters: start from a fresh one.
    latency.remove_ring(name)
    daemon = subprocess.Popen([args.daemon, "--config", config], stderr=open(os.path.join(args.work, "throughput.log"), "a"))
    try:
        status = lambda: json.loads(subprocess.run([args.ctl, "status", name, "--json"], capture_output=True).stdout or b"{}")
        while status().get("state") != "waiting":
            time.sleep(0.05)
        start = send_all(data, port)
        # Polled slowly (a process every few ms would steal a core); the end time comes from the ring itself.
        while True:
            current = status()
            if current.get("frames_published", 0) >= frames:
                return (current["latest_published_ns"] - start) / 1e9
            time.sleep(0.2)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait()


def receiving_anchor(command, data, port, probe=None, frames=0):
    """Seconds from the first byte sent until the receiver has exited at end of input (and, with `probe`, until the
    consumer reading its stdout has read every frame)."""
    receiver = subprocess.Popen(command, stdout=subprocess.PIPE if probe else subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    consumer = None
    if probe:
        consumer = subprocess.Popen([probe, "pipe", str(latency.FRAME_BYTES), str(frames)], stdin=receiver.stdout,
                                    stdout=subprocess.DEVNULL)
        receiver.stdout.close()
    start = send_all(data, port)
    receiver.wait()
    if consumer:
        consumer.wait()
    return (time.monotonic_ns() - start) / 1e9


def ffmpeg_file(path, threads):
    """Seconds `ffmpeg -threads N -i FILE -f null -` decodes, by its own `-benchmark` clock (rtime): from the end of
    opening the file to the last frame. Not the process's wall time: its start and the probe (about 0.07 s here, 7 %
    of a 600-frame run) are no part of decoding, and the daemon's measure leaves out its own start too."""
    result = subprocess.run(["ffmpeg", "-hide_banner", "-nostats", "-benchmark", "-threads", str(threads), "-i", path,
                             "-f", "null", "-"], check=True, capture_output=True, text=True)
    match = re.search(r"bench: utime=\S+ stime=\S+ rtime=([0-9.]+)s", result.stderr)
    if not match:
        raise RuntimeError("ffmpeg -benchmark printed no rtime: %s" % result.stderr[-500:])
    return float(match.group(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--daemon", default=".build/release/streamrecvd")
    parser.add_argument("--ctl", default=".build/release/streamrecvctl")
    parser.add_argument("--stream", required=True)
    parser.add_argument("--probe", required=True, help="scripts/latency-probe.c, built")
    parser.add_argument("--work", default=".build/bench")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    data = open(args.stream, "rb").read()
    frames = int(subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                                 "stream=nb_read_frames", "-of", "csv=p=0", args.stream],
                                capture_output=True, text=True, check=True).stdout)
    port = 40000 + os.getpid() % 20000
    print("input: %s, %d frames 1920x1080, x264 veryfast zerolatency 8 Mbit/s; frames per second, best of %d"
          % (args.stream, frames, args.runs))
    print("")
    receivers = [
        ("ours", "streamrecvd, TCP → shared memory"),
        ("file", "`ffmpeg -threads N -i FILE -f null -` (file, no network, no output; its `-benchmark` rtime)"),
        ("ffmpeg", "FFmpeg CLI, TCP → null"),
        ("ffmpeg-pipe", "FFmpeg CLI, TCP → rawvideo pipe → consumer"),
        ("gst", "gst-launch, TCP → fakesink"),
        ("gst-pipe", "gst-launch, TCP → fdsink pipe → consumer"),
    ]
    print("| N | receiver | frames per second | streamrecvd ÷ this |")
    print("|---|---|---|---|")
    for threads, threading in ((1, "slice"), (2, "frame")):
        ffmpeg = lambda port, sink: ["ffmpeg", "-v", "error", "-threads", str(threads), "-f", "h264", "-i",
                                     "tcp://127.0.0.1:%d?listen=1" % port] + sink
        gst = lambda port, sink: ["gst-launch-1.0", "-q", "tcpserversrc", "host=127.0.0.1", "port=%d" % port, "!",
                                  "h264parse", "!", "avdec_h264", "max-threads=%d" % threads, "!"] + sink
        results = {}
        for run in range(args.runs):
            port += 8
            for label, measure in (
                ("ours", lambda: streamrecvd(args, data, frames, threads, threading, port)),
                ("file", lambda: ffmpeg_file(args.stream, threads)),
                ("ffmpeg", lambda: receiving_anchor(ffmpeg(port + 1, ["-f", "null", "-"]), data, port + 1)),
                ("ffmpeg-pipe", lambda: receiving_anchor(ffmpeg(port + 2, ["-f", "rawvideo", "pipe:"]), data, port + 2,
                                                         args.probe, frames)),
                ("gst", lambda: receiving_anchor(gst(port + 3, ["fakesink", "sync=false"]), data, port + 3)),
                ("gst-pipe", lambda: receiving_anchor(gst(port + 4, ["fdsink", "fd=1", "sync=false"]), data, port + 4,
                                                      args.probe, frames)),
            ):
                seconds = measure()
                results[label] = min(results.get(label, seconds), seconds)
        fps = {label: frames / seconds for label, seconds in results.items()}
        for label, description in receivers:
            print("| %d (%s threads) | %s | %.0f | %s |" % (
                threads, threading, description, fps[label], "–" if label == "ours" else "%.2f" % (fps["ours"] / fps[label])))


if __name__ == "__main__":
    sys.exit(main())
