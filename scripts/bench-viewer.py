#!/usr/bin/python3
"""The viewer window against what a person would otherwise use to look at a stream, in one run on one X screen:
`streamrecvctl view NAME`, `streamrecvctl cat NAME | ffplay -` (y4m), and
`gst-launch-1.0 streamrecvsrc stream=NAME ! videoconvert ! autovideosink` (the project's own element; with
gstreamer1.0-x installed, as on a desktop: without it autovideosink falls to DirectFB's sink, which dies of SIGSEGV).

The stream carries its frame number as a barcode (16 bits, a row and its inverse, scripts/viewer-probe.c says how);
a side reader records when each numbered frame became readable in the ring (its slot's time_published_ns), and
scripts/viewer-probe.c, polling each viewer's window through the X server every 0.5 ms, when it first showed on
screen. Latency = on screen − readable, per frame, both CLOCK_MONOTONIC. Also: how many of the frames each showed,
and its CPU (utime + stime from /proc, the viewer's processes together) per frame.

    python3 scripts/bench-viewer.py [--frames 300] [--rounds 3] [--size 640x360]

Xvfb has no display refresh: frames are presented when drawn, and OpenGL is Mesa's llvmpipe (software). Needs the
daemon (release if built, else debug), make viewer, make gst-plugin, Xvfb, xdotool, ffplay, libx11-dev and
gstreamer1.0-x (ximagesink: without it autovideosink falls to DirectFB's sink, which dies of SIGSEGV on Xvfb)."""
import argparse
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

import numpy

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
import streamrecv  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
BITS, BLOCK, ROW = 16, 32, 32  # as scripts/viewer-probe.c reads them, in a 640x360 picture


def products():
    release, debug = ROOT / ".build/release", ROOT / ".build/debug"
    return release if (release / "streamrecvd").exists() else debug


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pids):
    total = 0.0
    for pid in pids:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICKS
        except OSError:
            pass
    return total


def make_stream(path, frames, width, height, first=0):
    """x264 (zerolatency, no B-frames) of frames numbered from `first` by a barcode, with a moving bar below it."""
    encoder = subprocess.Popen(["ffmpeg", "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "gray", "-s", f"{width}x{height}",
                                "-r", "30", "-i", "-", "-pix_fmt", "yuv420p", "-c:v", "libx264", "-preset", "veryfast",
                                "-tune", "zerolatency", "-qp", "14", "-g", "60", "-f", "h264", str(path)], stdin=subprocess.PIPE)
    scale_x, scale_y = width / 640, height / 360
    for index in range(first, first + frames):
        picture = numpy.full((height, width), 110, dtype=numpy.uint8)
        for bit in range(BITS):
            on = (index >> (BITS - 1 - bit)) & 1
            left, right = int(bit * BLOCK * scale_x), int((bit + 1) * BLOCK * scale_x)
            picture[0:int(ROW * scale_y), left:right] = 235 if on else 16
            picture[int(ROW * scale_y):int(2 * ROW * scale_y), left:right] = 16 if on else 235
        bar = (index * 8) % width
        picture[int(100 * scale_y):, bar:bar + 16] = 230
        encoder.stdin.write(picture.tobytes())
    encoder.stdin.close()
    encoder.wait()


def read_barcode(luma):
    value = 0
    for bit in range(BITS):
        x = int((bit * BLOCK + BLOCK // 2) * luma.shape[1] / 640)
        top = int(luma[int(ROW // 2 * luma.shape[0] / 360), x])
        bottom = int(luma[int((ROW + ROW // 2) * luma.shape[0] / 360), x])
        if (top > 128) == (bottom > 128):
            return None
        value = value << 1 | (top > 128)
    return value


def record_ring(name, published, stop):
    """Every frame's number and when it became readable, until `stop` (after a pause in the frames)."""
    ring = streamrecv.FrameRing.wait_for(name, timeout=30)
    while not stop.is_set():
        for frame in ring.frames(timeout=0.5):
            index = read_barcode(frame.numpy_planes()[0])
            if index is not None:
                published[index] = frame.times_ns[3]
    ring.close()


def visible_windows(display, title="."):
    return subprocess.run(["xdotool", "search", "--onlyvisible", "--name", title], env=dict(os.environ, DISPLAY=display),
                          capture_output=True, text=True).stdout.split()


def window_of(display, title, before, timeout=20):
    """The viewer's window: by its title, or (title None: GStreamer's sinks name theirs nothing) the one new window."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [w for w in visible_windows(display, title or "") if w not in before]
        if found:
            return found[-1]
        time.sleep(0.1)
    raise RuntimeError(f"no window titled {title!r}")


def run_viewer(kind, name, port, stream, warm_up, frames, work, display):
    env = dict(os.environ, DISPLAY=display, GST_PLUGIN_PATH=str(ROOT / ".build/gstreamer"))
    ctl = str(products() / "streamrecvctl")
    log = open(work / f"{kind}.log", "w")
    before = visible_windows(display, "")
    if kind == "streamrecv-view":
        processes = [subprocess.Popen([ctl, "view", name, "--title", "bench-view"], env=env, stdout=log, stderr=log)]
        title = "^bench-view$"
    elif kind == "ffplay":
        cat = subprocess.Popen([ctl, "cat", name], env=env, stdout=subprocess.PIPE, stderr=log)
        processes = [cat, subprocess.Popen(["ffplay", "-hide_banner", "-loglevel", "error", "-window_title", "bench-ffplay",
                                            "-f", "yuv4mpegpipe", "-i", "-"], env=env, stdin=cat.stdout, stdout=log, stderr=log)]
        cat.stdout.close()
        title = "^bench-ffplay$"
    else:
        processes = [subprocess.Popen(["gst-launch-1.0", "-q", "streamrecvsrc", f"stream={name}", "!", "videoconvert", "!",
                                       "autovideosink"], env=env, stdout=log, stderr=log)]
        title = None
    published, stop = {}, threading.Event()
    recorder = threading.Thread(target=record_ring, args=(name, published, stop))
    recorder.start()
    # Frames give the y4m and GStreamer viewers a format, so that their windows open before the run (sent until
    # one does: a pipeline still starting misses them).
    window = None
    for _ in range(20):
        subprocess.run([ctl, "send", str(warm_up), f"tcp://127.0.0.1:{port}", "--rate", "30"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            window = window_of(display, title, before, timeout=1)
            break
        except RuntimeError:
            pass
    if window is None:
        raise RuntimeError(f"{kind} opened no window: {(work / f'{kind}.log').read_text()[-2000:]}")
    probe = subprocess.Popen([str(work / "viewer-probe"), window, str(frames / 30 + 6)], env=env, stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    cpu_before = cpu_seconds([p.pid for p in processes])
    subprocess.run([ctl, "send", str(stream), f"tcp://127.0.0.1:{port}", "--rate", "30"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cpu = cpu_seconds([p.pid for p in processes]) - cpu_before
    time.sleep(1)
    probe.send_signal(signal.SIGTERM)
    seen_lines = probe.communicate()[0].split("\n")
    stop.set()
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
    recorder.join(timeout=10)
    seen = {}
    for line in seen_lines:
        if line.strip():
            index, at = line.split()
            seen.setdefault(int(index), []).append(int(at))
    latencies = []
    for index, at in published.items():
        if index >= frames:
            continue  # the warm-up's
        later = [t for t in seen.get(index, []) if t >= at]
        if later:
            latencies.append((min(later) - at) / 1e6)
    return latencies, cpu


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", default="640x360")
    parser.add_argument("--viewers", default="streamrecv-view,ffplay,autovideosink")
    options = parser.parse_args()
    width, height = map(int, options.size.split("x"))
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-viewer-"))
    subprocess.run(["cc", "-O2", "-o", str(work / "viewer-probe"), str(ROOT / "scripts/viewer-probe.c"), "-lX11"], check=True)
    stream = work / "numbered.h264"
    make_stream(stream, options.frames, width, height)
    warm_up = work / "warm-up.h264"
    make_stream(warm_up, 15, width, height, first=40000)
    display = f":{400 + os.getpid() % 100}"
    xvfb = subprocess.Popen(["Xvfb", display, "-screen", "0", "1920x1080x24", "-nolisten", "tcp", "-noreset"], stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    port, name = free_port(), f"benchview{os.getpid()}"
    (work / "d.toml").write_text(f'[daemon]\n[[stream]]\nname = "{name}"\nlisten = "tcp://127.0.0.1:{port}"\nslots = 8\n'
                                 f'hwaccel = "none"\n')
    daemon = subprocess.Popen([str(products() / "streamrecvd"), "--config", str(work / "d.toml")],
                              stdout=open(work / "daemon.log", "w"), stderr=subprocess.STDOUT)
    time.sleep(1.5)
    print(f"{options.frames} frames of {width}x{height} at 30 fps, daemon {products().name}, Xvfb {display} (llvmpipe)")
    print(f"{'round':>5} {'viewer':<16} {'shown':>7} {'p50 ms':>8} {'p95 ms':>8} {'CPU ms/frame':>13}")
    results = {}
    try:
        for round_number in range(1, options.rounds + 1):
            order = options.viewers.split(",")
            if round_number % 2 == 0:
                order.reverse()
            for kind in order:
                latencies, cpu = run_viewer(kind, name, port, stream, warm_up, options.frames, work, display)
                p50 = statistics.median(latencies) if latencies else float("nan")
                p95 = sorted(latencies)[int(len(latencies) * 0.95)] if latencies else float("nan")
                results.setdefault(kind, []).append(p50)
                print(f"{round_number:>5} {kind:<16} {len(latencies):>4}/{options.frames} {p50:>8.2f} {p95:>8.2f} "
                      f"{cpu * 1000 / options.frames:>13.3f}", flush=True)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait()
        xvfb.kill()
        # The daemon leaves a stopped stream's ring readable: this one was the benchmark's alone.
        pathlib.Path(f"/dev/shm/streamrecv-{name}").unlink(missing_ok=True)
    ours = results.get("streamrecv-view", [])
    for kind in ("ffplay", "autovideosink"):
        theirs = results.get(kind, [])
        ratios = [a / b for a, b in zip(ours, theirs) if b > 0]
        if ratios:
            print(f"streamrecv-view / {kind} p50 latency: {min(ratios):.2f}-{max(ratios):.2f}")


if __name__ == "__main__":
    main()
