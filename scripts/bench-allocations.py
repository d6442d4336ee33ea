#!/usr/bin/env python3
"""Heap allocations per frame in steady state, per thread of a real release streamrecvd.

The daemon runs unmodified under LD_PRELOAD=malloc-count.so (scripts/malloc-count.c), which counts allocations
per thread. A 1080p stream goes over TCP on loopback: the first WARM access units warm everything up (decoder
creation, buffer pools, the ring's first use), then the counts are read, MEASURED more access units are sent,
every frame is awaited, and the counts are read again. The difference, per published frame and per thread, is
the steady-state cost. Prints a markdown table. Called by scripts/bench.sh (`make bench`).
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time



def counts(path):
    """{(thread name, calling library): allocations}, threads of the same name summed (NIO's event loops)."""
    for _ in range(100):
        try:
            table = {}
            for line in open(path):
                tid, count, rest = line.rstrip("\n").split(" ", 2)
                name, library = rest.split("\t")
                key = (name, library)
                table[key] = table.get(key, 0) + int(count)
            return table
        except (FileNotFoundError, ValueError):
            time.sleep(0.05)
    raise RuntimeError("no counts in %s" % path)


def published(ctl, name):
    status = json.loads(subprocess.run([ctl, "status", name, "--json"], capture_output=True, check=True).stdout)
    return status["frames_published"]


def settle(ctl, name, frames):
    while published(ctl, name) < frames:
        time.sleep(0.02)
    time.sleep(0.3)  # the counts file is rewritten every 50 ms


def ffmpeg_per_frame(args, warm, measured):
    """Steady-state allocations per frame of the FFmpeg CLI decoding the same file, by calling library."""
    totals = []
    for frames in (warm, warm + measured):
        table = os.path.join(args.work, "allocations-ffmpeg.counts")
        environment = dict(os.environ, LD_PRELOAD=os.path.abspath(args.preload), MALLOC_COUNT_FILE=table)
        subprocess.run(["ffmpeg", "-v", "error", "-threads", "1", "-i", args.stream, "-frames:v", str(frames),
                        "-f", "null", "-"], env=environment, check=True)
        by_library = {}
        for (name, library), count in counts(table).items():
            by_library[library] = by_library.get(library, 0) + count
        totals.append(by_library)
        os.remove(table)
    return {library: (totals[1].get(library, 0) - totals[0].get(library, 0)) / measured
            for library in totals[1] if totals[1].get(library, 0) > totals[0].get(library, 0)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--daemon", default=".build/release/streamrecvd")
    parser.add_argument("--ctl", default=".build/release/streamrecvctl")
    parser.add_argument("--preload", required=True)
    parser.add_argument("--stream", required=True, help="Annex B file")
    parser.add_argument("--work", default=".build/bench")
    parser.add_argument("--warm", type=int, default=60)
    parser.add_argument("--measured", type=int, default=240)
    parser.add_argument("--output", default="auto", help="the stream's output setting")
    args = parser.parse_args()
    import importlib.util
    spec = importlib.util.spec_from_file_location("latency", os.path.join(os.path.dirname(__file__), "bench-latency.py"))
    latency = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(latency)
    units, _ = latency.encode(args.stream, 30, 0, [])
    assert len(units) >= args.warm + args.measured, "stream too short"
    name = "alloc%d" % os.getpid()
    port = 30000 + os.getpid() % 20000
    config = os.path.join(args.work, "allocations.toml")
    with open(config, "w") as file:
        file.write('[daemon]\nlog_level = "warning"\n[[stream]]\nname = "%s"\nlisten = "tcp://127.0.0.1:%d"\n'
                   'hwaccel = "none"\nmax_width = 1920\nmax_height = 1088\nslots = 8\nthreads = 1\noutput = "%s"\n'
                   % (name, port, args.output))
    table = os.path.join(args.work, "allocations.counts")
    environment = dict(os.environ, LD_PRELOAD=os.path.abspath(args.preload), MALLOC_COUNT_FILE=table)
    # A ring left by an earlier run would be taken over with its counters: start from a fresh one.
    latency.remove_ring(name)
    daemon = subprocess.Popen([args.daemon, "--config", config], env=environment,
                              stderr=open(os.path.join(args.work, "allocations.log"), "w"))
    try:
        while b'"state":"waiting"' not in subprocess.run([args.ctl, "status", name, "--json"], capture_output=True).stdout:
            time.sleep(0.05)
        connection = latency.connect(port)
        for unit in units[:args.warm]:
            connection.sendall(unit)
            time.sleep(1 / 30)
        settle(args.ctl, name, args.warm - 1)
        before, frames_before = counts(table), published(args.ctl, name)
        for unit in units[args.warm:args.warm + args.measured]:
            connection.sendall(unit)
            time.sleep(1 / 30)
        settle(args.ctl, name, args.warm + args.measured - 1)
        after, frames_after = counts(table), published(args.ctl, name)
        connection.close()
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait()
    anchor = ffmpeg_per_frame(args, args.warm, args.measured)
    frames = frames_after - frames_before
    print("%d frames measured (after %d to warm up), 1920x1080, output = \"%s\", paced at 30 fps over TCP"
          % (frames, args.warm, args.output))
    print("")
    print("| thread | allocator called from | heap allocations | per frame |")
    print("|---|---|---|---|")
    for key in sorted(after, key=lambda key: -(after[key] - before.get(key, 0))):
        delta = after[key] - before.get(key, 0)
        if key[0] == "(exited)" or delta == 0:
            continue
        print("| %s | %s | %d | %.2f |" % (key[0], key[1], delta, delta / frames))
    print("")
    print("The same frames through `ffmpeg -threads 1 -i FILE -f null -` (the difference between runs of %d and %d "
          "frames, whole process, per frame): %s." % (args.warm, args.warm + args.measured, ", ".join(
              "%s %.2f" % (library, count) for library, count in sorted(anchor.items(), key=lambda item: -item[1]))))


if __name__ == "__main__":
    sys.exit(main())
