#!/usr/bin/env python3
"""Interleaved A/B of two daemon builds (e.g. before and after a refactor), with the benchmarks' own measures:
bench-throughput's TCP → shared memory frames per second, and bench-latency's last byte → readable, the builds
alternating round by round so that drift on the machine falls on both alike. Release builds of each side:

    scripts/bench-ab.py --base DIR --new DIR     (DIR holds streamrecvd and streamrecvctl)

or one build against itself with a switch on one side: --base DIR --new DIR --base-env NAME=VALUE.
"""
import argparse, importlib.util, os, statistics, subprocess, sys, types

sys.path.insert(0, os.path.dirname(__file__))


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def builds(args, build):
    # The side's environment (`--base-env`, `--new-env`): the same build with a switch set on one side only.
    for side in ("base", "new"):
        for setting in getattr(args, side + "_env") or []:
            name, _, value = setting.partition("=")
            if side == build:
                os.environ[name] = value
            elif not any(other.partition("=")[0] == name for other in getattr(args, build + "_env") or []):
                os.environ.pop(name, None)
    return types.SimpleNamespace(daemon=os.path.join(getattr(args, build), "streamrecvd"),
                                 ctl=os.path.join(getattr(args, build), "streamrecvctl"), probe=args.probe, work=args.work)


def orders(rounds):
    return [("base", "new") if r % 2 == 0 else ("new", "base") for r in range(rounds)]


def throughput(args):
    bt = load("bench_throughput", os.path.join(os.path.dirname(__file__), "bench-throughput.py"))
    data = open(args.stream, "rb").read()
    frames = int(subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                                 "stream=nb_read_frames", "-of", "csv=p=0", args.stream],
                                capture_output=True, text=True, check=True).stdout)
    port = 45000 + os.getpid() % 10000
    print("| threads | base fps (median, min–max) | new fps (median, min–max) | new ÷ base |")
    print("|---|---|---|---|")
    for threads, threading in ((1, "slice"), (2, "frame")):
        results = {"base": [], "new": []}
        for order in orders(args.rounds):
            for build in order:
                port += 1
                results[build].append(frames / bt.streamrecvd(builds(args, build), data, frames, threads, threading, port))
        b, n = results["base"], results["new"]
        print("| %d (%s) | %.0f (%.0f–%.0f) | %.0f (%.0f–%.0f) | %.3f |" % (
            threads, threading, statistics.median(b), min(b), max(b), statistics.median(n), min(n), max(n),
            statistics.median(n) / statistics.median(b)))


def latency(args):
    bl = load("bench_latency", os.path.join(os.path.dirname(__file__), "bench-latency.py"))
    seconds, port = 6, 35000 + os.getpid() % 10000
    print("| stream | base p50 / p99 ms | new p50 / p99 ms | frames each |")
    print("|---|---|---|---|")
    # 4K with 8 slices: a frame's copy into its slot (about 12 MB) is 4 times 1080p's.
    uhd = dict(bl.stream("2160p30 x264 8 slices, 40 Mbit/s", 30, "h264", ["-preset", "ultrafast", "-tune", "zerolatency",
                                                                          "-b:v", "16M", "-g", "60"], 8, 40e6), size=(3840, 2160))
    for row in (bl.STREAMS[1], bl.STREAMS[5]) + ((uhd,) if args.uhd else ()):
        fps, codec, size = row["fps"], row["codec"], row.get("size", (bl.WIDTH, bl.HEIGHT))
        name = "".join(c for c in "%s-%d-%s" % (codec, fps, " ".join(row["options"])) if c.isalnum())
        path = os.path.join(args.work, "ab-latency-%s-%dslices-%dx%d-%ds.%s" % (name, row["slices"], size[0], size[1], seconds, codec))
        units, _ = bl.encode(path, fps, seconds, row["options"], codec, row["slices"], size)
        delimiter, link = bl.AUD[codec] if row["delimited"] else b"", row["link"]
        values = {"base": [], "new": []}
        for order in orders(args.rounds):
            for build in order:
                port += 1
                written, frames = bl.streamrecvd(builds(args, build), units, fps, port, delimiter, link, size)
                kept = [f for f in frames if fps <= f[0] < len(units) - 1]
                values[build] += [(readable - written[unit]) / 1e6 for unit, readable, _, _ in kept]
        b, n = values["base"], values["new"]
        print("| %s | %.2f / %.2f | %.2f / %.2f | %d |" % (row["label"], bl.percentile(b, 0.5), bl.percentile(b, 0.99),
                                                        bl.percentile(n, 0.5), bl.percentile(n, 0.99), len(n)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--new", required=True)
    parser.add_argument("--stream", default=".build/bench/x264-1080p30-zerolatency.h264")
    parser.add_argument("--probe", default=".build/bench/latency-probe")
    parser.add_argument("--work", default=".build/bench")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--uhd", action="store_true", help="a 4K row in the latency table too")
    parser.add_argument("--latency-only", action="store_true")
    parser.add_argument("--throughput-only", action="store_true")
    parser.add_argument("--base-env", action="append", metavar="NAME=VALUE", help="set for the base side's daemon only")
    parser.add_argument("--new-env", action="append", metavar="NAME=VALUE", help="set for the new side's daemon only")
    args = parser.parse_args()
    if not args.latency_only:
        throughput(args)
        print("")
    if not args.throughput_only:
        latency(args)


if __name__ == "__main__":
    sys.exit(main())
