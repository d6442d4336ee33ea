#!/usr/bin/env python3
"""What streamrecvsrc adds over reading the ring directly (part of `make bench`).

One daemon, one paced 1080p30 stream, two readers of the same ring at once: scripts/latency-probe.c (`shm`: the
frame's metadata read under the seqlock, the pixels read in place) and `gst-launch-1.0 streamrecvsrc ! fakesink`
(the frame copied into a GstBuffer of GStreamer's layout and pushed; the element logs when, at GST_LEVEL_LOG). Both
are measured from the slot's publication time (CLOCK_MONOTONIC, written by the daemon). Prints a Markdown table.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--daemon", default=".build/release/streamrecvd")
    parser.add_argument("--ctl", default=".build/release/streamrecvctl")
    parser.add_argument("--probe", required=True, help="scripts/latency-probe.c, built")
    parser.add_argument("--plugin", default=".build/gstreamer")
    parser.add_argument("--stream", required=True, help="an Annex B 1080p H.264 file")
    parser.add_argument("--frames", type=int, default=300)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="streamrecvd-bench-gst.")
    name = "benchgst%d" % os.getpid()
    port = 43000 + os.getpid() % 10000
    config = os.path.join(work, "d.toml")
    with open(config, "w") as file:
        file.write('[daemon]\nlog_level = "warning"\n[[stream]]\nname = "%s"\nlisten = "tcp://127.0.0.1:%d"\n'
                   'hwaccel = "none"\nmax_width = 1920\nmax_height = 1088\nslots = 8\nthreads = 1\n' % (name, port))
    daemon = subprocess.Popen([args.daemon, "--config", config], stderr=open(os.path.join(work, "daemon.log"), "w"))
    try:
        while not os.path.exists("/dev/shm/streamrecv-" + name):
            time.sleep(0.05)
        time.sleep(0.2)
        probe = subprocess.Popen([args.probe, "shm", name, str(args.frames)], stdout=subprocess.PIPE, text=True)
        log = os.path.join(work, "gst.log")
        environment = dict(os.environ, GST_PLUGIN_PATH=args.plugin, GST_DEBUG="streamrecvsrc:6", GST_DEBUG_FILE=log,
                           GST_REGISTRY=os.path.join(work, "registry.bin"))
        gst = subprocess.Popen(["gst-launch-1.0", "-q", "streamrecvsrc", "stream=" + name,
                                "num-buffers=%d" % args.frames, "!", "fakesink", "sync=false"], env=environment)
        deadline = time.time() + 20
        while time.time() < deadline and not (os.path.exists(log) and "attached to" in open(log).read()):
            time.sleep(0.05)
        subprocess.run([args.ctl, "send", args.stream, "tcp://127.0.0.1:%d" % port, "--rate", "30"],
                       check=True, capture_output=True)
        direct = []
        for line in probe.communicate(timeout=60)[0].splitlines():
            fields = line.split()
            direct.append((int(fields[1]) - int(fields[6])) / 1e6)
        gst.wait(timeout=60)
        element = [(int(pushed) - int(published)) / 1e6 for published, pushed in
                   re.findall(r"published (\d+) pushed (\d+)", open(log).read())]
    finally:
        daemon.terminate()
        daemon.wait()
        # A stopped daemon keeps its ring for late readers; this one has none.
        if os.path.exists("/dev/shm/streamrecv-" + name):
            os.unlink("/dev/shm/streamrecv-" + name)
    if not direct or not element:
        sys.exit("no frames measured (direct %d, element %d)" % (len(direct), len(element)))
    print("%d frames of %s at 30 fps; milliseconds from the daemon's publication" % (len(element), args.stream))
    print("")
    print("| reader | p50 | p90 | max |")
    print("|---|---|---|---|")
    for label, values in (("latency-probe shm (metadata read, pixels in place)", direct),
                          ("streamrecvsrc: frame copied into a GstBuffer, pushed", element)):
        print("| %s | %.2f | %.2f | %.2f |" % (label, statistics.median(values), percentile(values, 0.9), max(values)))
    print("")
    print("streamrecvsrc adds %.2f ms at p50 (goal: at most 1 ms)" % (statistics.median(element) - statistics.median(direct)))


if __name__ == "__main__":
    main()
