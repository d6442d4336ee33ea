#!/usr/bin/python3
"""The PipeWire camera against what a person would otherwise write (which, with Debian 12's GStreamer 1.22 and
PipeWire 0.3.65, crashes: docs/benchmarks.md): `streamrecvctl camera NAME` (streamrecv-camera)
and `gst-launch-1.0 streamrecvsrc ! pipewiresink mode=provide` (the project's own GStreamer element feeding
GStreamer's PipeWire sink), one after the other in one run, on the same 1080p30 stream into a release daemon, each
read by the same libpipewire consumer (scripts/pipewire-camera-consumer.c, no hashing). For each: frames delivered,
the camera process's CPU (utime + stime from /proc over the run: % of one core, ms per frame), and latency from the
frame's publication in the ring (its slot's time_published_ns, recorded by a side reader) to the consumer's process
callback, by the frame's sequence number in the buffer's header metadata (pipewiresink numbers its buffers itself:
when it delivered every frame, by order).

    python3 scripts/bench-camera.py [--stream FILE.h264] [--frames 300]

Needs a release daemon (swift build -c release --product streamrecvd), make camera, make gst-plugin, and PipeWire,
WirePlumber, dbus-daemon and gstreamer1.0-pipewire (what `make test` installs)."""
import argparse
import json
import os
import pathlib
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
import streamrecv  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Session:
    """dbus-daemon, PipeWire and WirePlumber in a runtime directory of their own."""

    def __init__(self, directory):
        self.runtime = pathlib.Path(directory) / "runtime"
        self.runtime.mkdir(mode=0o700)
        self.env = dict(os.environ, XDG_RUNTIME_DIR=str(self.runtime), PIPEWIRE_RUNTIME_DIR=str(self.runtime),
                        DBUS_SESSION_BUS_ADDRESS=f"unix:path={self.runtime}/bus", DISPLAY="", WAYLAND_DISPLAY="")
        log = open(pathlib.Path(directory) / "session.log", "w")
        self.children = [subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--nopidfile",
                                           f"--address=unix:path={self.runtime}/bus"], env=self.env, stdout=log, stderr=log)]
        self.wait_path(self.runtime / "bus")
        self.children.append(subprocess.Popen(["pipewire"], env=self.env, stdout=log, stderr=log))
        self.wait_path(self.runtime / "pipewire-0")
        self.children.append(subprocess.Popen(["wireplumber"], env=self.env, stdout=log, stderr=log))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            out = subprocess.run(["pw-cli", "ls", "Metadata"], env=self.env, capture_output=True, text=True).stdout
            if "default" in out:
                return
            time.sleep(0.05)
        raise RuntimeError("wireplumber did not start")

    @staticmethod
    def wait_path(path):
        deadline = time.monotonic() + 10
        while not path.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{path} did not appear")
            time.sleep(0.02)

    def has_node(self, node):
        out = subprocess.run(["pw-cli", "ls", "Node"], env=self.env, capture_output=True, text=True).stdout
        return f'node.name = "{node}"' in out

    def linked(self, node):
        out = subprocess.run(["pw-link", "-l"], env=self.env, capture_output=True, text=True).stdout
        return f"{node}:" in out and "|->" in out

    def close(self):
        for child in reversed(self.children):
            child.kill()
            child.wait()


def record_publications(name, published, stop):
    """Sequence -> time_published_ns of every frame, from the ring (borrowed reads: metadata only)."""
    ring = streamrecv.FrameRing.wait_for(name, timeout=30)
    for frame in ring.frames(borrow=True, timeout=0.5):
        if stop.is_set():
            break
        published[frame.sequence] = frame.times_ns[3]
    ring.close()


def run_variant(label, command, node, session, daemon_name, port, stream, frames, consumer, directory):
    env = dict(session.env, GST_PLUGIN_PATH=str(ROOT / ".build/gstreamer"))
    camera = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                              stderr=open(pathlib.Path(directory) / f"{label}.err", "w"))
    deadline = time.monotonic() + 30  # the node appears once the ring's format is known (the warm-up pass made it)
    while not session.has_node(node) and time.monotonic() < deadline:
        time.sleep(0.05)
    output = open(pathlib.Path(directory) / f"{label}.jsonl", "w+")
    reader = subprocess.Popen([consumer, node, str(frames), "120", "nohash"], env=session.env, stdout=output,
                              stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not session.linked(node) and time.monotonic() < deadline:
        time.sleep(0.05)
    published, stop = {}, threading.Event()
    recorder = threading.Thread(target=record_publications, args=(daemon_name, published, stop))
    recorder.start()
    time.sleep(0.3)
    cpu_before, wall_before = cpu_seconds(camera.pid), time.monotonic()
    subprocess.run([str(ROOT / ".build/release/streamrecvctl"), "send", stream, f"tcp://127.0.0.1:{port}",
                    "--rate", "30"], check=True, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    cpu_after, wall_after = cpu_seconds(camera.pid), time.monotonic()
    stop.set()
    reader.send_signal(signal.SIGINT)
    try:
        reader.wait(timeout=5)
    except subprocess.TimeoutExpired:
        reader.kill()
    camera.send_signal(signal.SIGINT)
    try:
        camera.wait(timeout=5)
    except subprocess.TimeoutExpired:
        camera.kill()
    recorder.join(timeout=5)
    output.seek(0)
    got = [json.loads(line) for line in output if line.startswith("{")]
    errors = open(pathlib.Path(directory) / f"{label}.err").read()
    if not got:
        print(f"{label}: nothing delivered; its stderr:\n" + errors[-1500:], file=sys.stderr)
    latencies = [(g["arrived_ns"] - published[g["seq"]]) / 1e6 for g in got if g["seq"] in published]
    if not latencies and len(got) == frames and len(published) >= frames:
        # pipewiresink numbers its buffers itself: with every frame delivered, the i-th buffer is the i-th frame
        # the paced pass published.
        paced = sorted(published)[-frames:]
        latencies = [(g["arrived_ns"] - published[sequence]) / 1e6 for g, sequence in zip(got, paced)]
    cpu = cpu_after - cpu_before
    wall = wall_after - wall_before
    summary = [line for line in errors.splitlines() if line.startswith("streamrecv-camera: sent")]
    return {"label": label, "summary": summary[-1] if summary else "", "delivered": len(got), "matched": len(latencies), "crashed": "SIGSEGV" in errors,
            "cpu_percent": 100 * cpu / wall, "cpu_ms_per_frame": 1000 * cpu / max(len(got), 1),
            "p50": statistics.median(latencies) if latencies else float("nan"),
            "p95": sorted(latencies)[int(0.95 * (len(latencies) - 1))] if latencies else float("nan")}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stream", default=str(ROOT / ".build/bench/x264-1080p30-zerolatency.h264"))
    parser.add_argument("--frames", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        consumer = str(pathlib.Path(directory) / "consumer")
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libpipewire-0.3"], capture_output=True,
                               text=True, check=True).stdout.split()
        subprocess.run(["cc", "-O2", str(ROOT / "scripts/pipewire-camera-consumer.c"), "-o", consumer, *flags,
                        "-lcrypto"], check=True)
        clip = pathlib.Path(directory) / "clip.h264"
        subprocess.run(["ffmpeg", "-v", "error", "-i", args.stream, "-frames:v", str(args.frames), "-c", "copy",
                        "-f", "h264", str(clip)], check=True)
        session = Session(directory)
        port, name = free_port(), f"benchcam{os.getpid()}"
        config = pathlib.Path(directory) / "streamrecvd.toml"
        config.write_text(f'[daemon]\n[[stream]]\nname = "{name}"\nlisten = "tcp://127.0.0.1:{port}"\n'
                          'hwaccel = "none"\nmax_width = 1920\nmax_height = 1080\n')
        daemon = subprocess.Popen([str(ROOT / ".build/release/streamrecvd"), "--config", str(config)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(1)
            subprocess.run([str(ROOT / ".build/release/streamrecvctl"), "send", str(clip), f"tcp://127.0.0.1:{port}",
                            "--rate", "max"], check=True, stderr=subprocess.DEVNULL)
            results = [
                run_variant("streamrecvctl camera", [str(ROOT / ".build/pipewire/streamrecv-camera"), name],
                            f"streamrecv-{name}", session, name, port, str(clip), args.frames, consumer, directory),
                run_variant("streamrecvsrc ! pipewiresink",
                            ["gst-launch-1.0", "-q", "streamrecvsrc", f"stream={name}", "mode=newest", "!", "pipewiresink",
                             "mode=provide", "stream-properties=p,media.class=Video/Source,node.name=gstcam"],
                            "gstcam", session, name, port, str(clip), args.frames, consumer, directory),
            ]
        finally:
            daemon.send_signal(signal.SIGINT)
            daemon.wait(timeout=10)
            session.close()
    ours, theirs = results
    print(f"1080p30, {args.frames} frames sent at 30/s; consumer: scripts/pipewire-camera-consumer.c\n")
    print("| camera | frames delivered | latency p50 | p95 | CPU (% of a core) | CPU per frame |")
    print("|---|---|---|---|---|---|")
    for r in results:
        if r["crashed"]:
            print(f"| {r['label']} | 0: crashed (SIGSEGV) | – | – | – | – |")
            continue
        print(f"| {r['label']} | {r['delivered']} ({r['matched']} timed) | {r['p50']:.2f} ms | {r['p95']:.2f} ms | "
              f"{r['cpu_percent']:.2f} % | {r['cpu_ms_per_frame']:.3f} ms |")
    if ours["summary"]:
        print(f"\n{ours['summary']}")
    if theirs["delivered"] and theirs["matched"]:
        print(f"\nratios (ours / GStreamer's): latency p50 {ours['p50'] / theirs['p50']:.2f}, CPU per frame "
              f"{ours['cpu_ms_per_frame'] / theirs['cpu_ms_per_frame']:.2f}")


if __name__ == "__main__":
    main()
