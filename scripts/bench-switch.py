#!/usr/bin/env python3
"""One daemon build against itself with an environment switch set on one side (e.g. STREAMRECVD_TRACK_BANDS=0):
TCP → shared memory of the first 600 frames of a file, the two sides alternating round by round, each run's frames
per second (first byte sent → last frame published) and the daemon's CPU time per frame (all its threads, from
/proc). Comparing one binary leaves out what two builds' code layout alone changes; CPU time per frame is steadier
than the rate on a VM whose speed drifts during a run.

    scripts/bench-switch.py --build DIR --switch NAME=VALUE [--rounds N] [--threads N]
"""
import argparse, importlib.util, json, os, signal, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(__file__))


def run_once(args, bt, data, frames, port, switched):
    env = dict(os.environ)
    name, _, value = args.switch.partition("=")
    env.pop(name, None)
    if switched:
        env[name] = value
    stream = "switch%d" % os.getpid()
    config = os.path.join(args.work, "switch.toml")
    with open(config, "w") as file:
        file.write('[daemon]\nlog_level = "warning"\n[[stream]]\nname = "%s"\nlisten = "tcp://127.0.0.1:%d"\n'
                   'hwaccel = "none"\nmax_width = 1920\nmax_height = 1088\nslots = 8\nthreads = %d\n'
                   % (stream, port, args.threads))
    subprocess.run(["rm", "-f", "/dev/shm/streamrecv-" + stream], check=True)
    daemon = subprocess.Popen([os.path.join(args.build, "streamrecvd"), "--config", config], env=env,
                              stderr=subprocess.DEVNULL)
    ctl = os.path.join(args.build, "streamrecvctl")
    status = lambda: json.loads(subprocess.run([ctl, "status", stream, "--json"], capture_output=True).stdout or b"{}")
    tick = os.sysconf("SC_CLK_TCK")

    def cpu_seconds():
        fields = open("/proc/%d/stat" % daemon.pid).read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick
    try:
        while status().get("state") != "waiting":
            time.sleep(0.05)
        before = cpu_seconds()
        start = bt.send_all(data, port)
        while True:
            current = status()
            if current.get("frames_published", 0) >= frames:
                break
            time.sleep(0.2)
        used = cpu_seconds() - before
        return frames / ((current["latest_published_ns"] - start) / 1e9), used * 1000 / frames
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True, help="the folder holding streamrecvd and streamrecvctl")
    parser.add_argument("--switch", required=True, metavar="NAME=VALUE")
    parser.add_argument("--stream", default=".build/bench/x264-1080p30-zerolatency.h264")
    parser.add_argument("--work", default=".build/bench")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("bench_throughput", os.path.join(os.path.dirname(__file__), "bench-throughput.py"))
    bt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bt)
    data = open(args.stream, "rb").read()
    frames = 600
    # The file's first 600 access units (its length in frames, as the throughput benchmark counts them, is 600 × k).
    total = int(subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                                "stream=nb_read_frames", "-of", "csv=p=0", args.stream], capture_output=True, text=True,
                               check=True).stdout)
    if total > frames:
        data = data[:len(data) * frames // total]
    results = {False: [], True: []}
    port = 41000 + os.getpid() % 8000
    for round in range(args.rounds):
        for switched in ((False, True) if round % 2 == 0 else (True, False)):
            port += 1
            results[switched].append(run_once(args, bt, data, frames, port, switched))
    print("| side | fps median (each run) | CPU ms per frame, median (each run) |")
    print("|---|---|---|")
    for switched, label in ((False, "as built"), (True, args.switch)):
        rates = [rate for rate, _ in results[switched]]
        costs = [cost for _, cost in results[switched]]
        print("| %s | %.0f (%s) | %.2f (%s) |" % (label, statistics.median(rates), " ".join("%.0f" % v for v in rates),
                                                 statistics.median(costs), " ".join("%.2f" % v for v in costs)))


if __name__ == "__main__":
    sys.exit(main())
