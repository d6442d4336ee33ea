#!/usr/bin/python3
"""WebRTC (WHIP) benchmark: the same live x264 stream sent to a `listen = "whip"` stream (GStreamer's webrtcbin,
scripts/whip-client.py: ICE, DTLS, SRTP) and to an rtp:// stream (the same GStreamer encoder and payloader, plain
RTP), in alternating rounds of one run against one release daemon.

Both go through a relay of this script on loopback, which notes when it forwards each RTP packet that carries the
marker bit (the last packet of a frame; the RTP header is not encrypted by SRTP) with its RTP timestamp. A frame's
latency is from that moment to when it became readable in the ring (scripts/latency-probe.c, matched by the RTP
timestamp, which the daemon keeps as the frame's pts). For whip sessions, also POST → first frame readable.
Writes a markdown section to stdout. Called by hand (docs/benchmarks.md has the command); needs the release build.
"""
import argparse
import json
import os
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "bench-webrtc-token-0123456789abcdef"


class MarkerRelay(threading.Thread):
    """client ↔ relay ↔ daemon over UDP, both ways, nothing dropped or delayed; records (forwarded_ns, timestamp)
    of every client→daemon RTP packet of payload type 96 with the marker bit, just before forwarding it."""

    def __init__(self, target_port):
        super().__init__(daemon=True)
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(("127.0.0.1", 0))
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.connect(("127.0.0.1", target_port))
        for sock in (self.front, self.back):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.port = self.front.getsockname()[1]
        self.client = None
        self.markers = {}
        self.running = True

    def run(self):
        while self.running:
            ready, _, _ = select.select([self.front, self.back], [], [], 0.1)
            for sock in ready:
                data, address = sock.recvfrom(65536)
                if sock is self.front:
                    self.client = self.client or address
                    marker = len(data) >= 12 and 128 <= data[0] <= 191 and data[1] == 0x80 | 96
                    if marker:
                        self.markers[int.from_bytes(data[4:8], "big")] = time.monotonic_ns()
                    try:
                        self.back.send(data)
                    except ConnectionRefusedError:  # an ICMP from before the daemon listened
                        pass
                elif self.client:
                    self.front.sendto(data, self.client)

    def stop(self):
        self.running = False
        self.join()
        self.front.close()
        self.back.close()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def encoder(options):
    """whip-client.py's encoder, so that both paths carry the same kind of stream."""
    width, height = options.size.split("x")
    return (f"videotestsrc is-live=true pattern=smpte num-buffers={options.frames} "
            f"! video/x-raw,width={width},height={height},framerate={options.fps}/1,format=I420 "
            f"! x264enc tune=zerolatency speed-preset=ultrafast key-int-max={options.fps} bframes=0 bitrate={options.bitrate} "
            f"! video/x-h264,profile=constrained-baseline,stream-format=byte-stream "
            f"! h264parse config-interval=-1 ! rtph264pay pt=96 config-interval=-1 aggregate-mode=zero-latency")


def probe_frames(options, name, count):
    return subprocess.Popen([options.probe, "shm", name, str(count)], stdout=subprocess.PIPE, text=True)


def latencies(probe, relay, timeout=60):
    """(latency of each frame matched to a marker, ms; frames read; the first frame's readable time)."""
    try:
        output, _ = probe.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        probe.kill()
        output, _ = probe.communicate()
    rows = [line.split() for line in output.splitlines() if line.strip()]
    matched = []
    for row in rows:
        sent = relay.markers.get(int(row[2]) & 0xFFFFFFFF)
        if sent is not None:
            matched.append((int(row[1]) - sent) / 1e6)
    return matched, len(rows), int(rows[0][1]) if rows else None


def whip_round(options, whip_port, media_port, record):
    relay = MarkerRelay(media_port)
    relay.start()
    probe = probe_frames(options, "whipbench", options.frames - 40)
    time.sleep(0.2)
    client = subprocess.run(
        ["/usr/bin/python3", os.path.join(ROOT, "scripts/whip-client.py"), f"http://127.0.0.1:{whip_port}/whip/whipbench",
         "--token", TOKEN, "--record", record, "--frames", str(options.frames), "--size", options.size,
         "--fps", str(options.fps), "--bitrate", str(options.bitrate), "--media-via", str(relay.port)],
        capture_output=True, text=True, timeout=120)
    matched, read, first = latencies(probe, relay)
    relay.stop()
    posted = [int(line.split("CLOCK_MONOTONIC ")[1].split()[0]) for line in client.stderr.splitlines() if "posting (CLOCK_MONOTONIC" in line]
    setup = (first - posted[0]) / 1e6 if first and posted else None
    if not client.stdout.strip().endswith(f"sent {options.frames} frames"):
        print(f"whip round: {client.stdout.strip()[-200:]} {client.stderr[-800:]}", file=sys.stderr)
    return matched, read, setup


def rtp_round(options, rtp_port):
    relay = MarkerRelay(rtp_port)
    relay.start()
    probe = probe_frames(options, "rtpbench", options.frames - 40)
    time.sleep(0.2)
    subprocess.run(["gst-launch-1.0", "-q"] + (encoder(options) + f" ! udpsink host=127.0.0.1 port={relay.port} sync=false").split(),
                   check=True, capture_output=True, timeout=120)
    matched, read, _ = latencies(probe, relay)
    relay.stop()
    return matched, read


def chromium_rates(options, work, whip_port, stream, share, clip):
    """The send bitrate the share page shows (Chromium's getStats, once a second) over the first 6 s of a share."""
    profile = tempfile.mkdtemp(prefix="profile.", dir=work)
    proceed = os.path.join(work, "proceed")
    open(proceed, "w").close()  # no waiting once sampled
    probe = probe_frames(options, stream, 30)
    result = subprocess.run(
        ["/usr/bin/python3", os.path.join(ROOT, "scripts/chromium-share.py"), f"http://127.0.0.1:{whip_port}/",
         "--stream", stream, "--token-file", os.path.join(work, "token"), "--clip", clip,
         "--screenshot", os.path.join(work, f"{stream}-{share}.png"), "--profile", profile, "--proceed-file", proceed,
         "--share", share, "--window-size", "1920,1080", "--sample-seconds", "6.2"],
        capture_output=True, text=True, timeout=180)
    try:
        output = json.loads(result.stdout.strip().splitlines()[-1])
        samples = output["samples"]
        posted = next(request["sent_ns"] for request in output["requests"] if request["method"] == "POST")
    except (IndexError, KeyError, ValueError, StopIteration):
        print(f"chromium {stream} {share}: {result.stdout[-300:]} {result.stderr[-800:]}", file=sys.stderr)
        probe.kill()
        return None
    try:
        lines, _ = probe.communicate(timeout=15)
        first = int(lines.split()[1])
    except (subprocess.TimeoutExpired, IndexError, ValueError):
        probe.kill()
        first = None
    by_second = {}
    for elapsed, rate, size, _limit in samples:
        if rate.endswith("kbit/s"):
            by_second[int(elapsed)] = (int(rate.split()[0]), size)
    by_second["setup_ms"] = (first - posted) / 1e6 if first else None
    return by_second


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--probe", required=True, help="latency-probe built from scripts/latency-probe.c")
    parser.add_argument("--daemon", default=os.path.join(ROOT, ".build/release/streamrecvd"))
    parser.add_argument("--rounds", type=int, default=4, help="rounds of each path, alternating")
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--bitrate", type=int, default=4000, help="kbit/s")
    parser.add_argument("--chromium", action="store_true", help="also Chromium's bitrate with and without REMB")
    options = parser.parse_args()

    work = tempfile.mkdtemp(prefix="streamrecvd-bench-webrtc.")
    with open(os.path.join(work, "token"), "w") as token:
        token.write(TOKEN + "\n")
    os.chmod(os.path.join(work, "token"), 0o600)
    whip_port, media_port, rtp_port = free_port(), free_port(), free_port()
    with open(os.path.join(work, "bench.toml"), "w") as configuration:
        configuration.write(f"""[daemon]
log_level = "notice"
[webrtc]
listen = "127.0.0.1:{whip_port}"
media = "127.0.0.1:{media_port}"
[[stream]]
name = "whipbench"
listen = "whip"
token_file = "token"
hwaccel = "none"
[[stream]]
name = "chromeremb"
listen = "whip"
token_file = "token"
hwaccel = "none"
max_width = 1920
max_height = 1080
[[stream]]
name = "chromenoremb"
listen = "whip"
token_file = "token"
remb = false
hwaccel = "none"
max_width = 1920
max_height = 1080
[[stream]]
name = "rtpbench"
listen = "rtp://127.0.0.1:{rtp_port}"
codec = "h264"
hwaccel = "none"
""")
    log = open(os.path.join(work, "daemon.log"), "w")
    daemon = subprocess.Popen([options.daemon, "--config", os.path.join(work, "bench.toml")], stderr=log, stdout=log)
    time.sleep(1.0)
    results = {"whip": [], "rtp": []}
    reads = {"whip": 0, "rtp": 0}
    setups = []
    rates = {}
    try:
        for index in range(options.rounds):
            matched, read, setup = whip_round(options, whip_port, media_port, os.path.join(work, f"sent{index}.h264"))
            results["whip"] += matched
            reads["whip"] += read
            if setup is not None:
                setups.append(setup)
            matched, read = rtp_round(options, rtp_port)
            results["rtp"] += matched
            reads["rtp"] += read
        if options.chromium:
            clip = os.path.join(work, "clip.y4m")
            subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30", "-frames:v", "60",
                            "-pix_fmt", "yuv420p", clip], check=True)
            for share in ("camera", "screen"):
                for stream in ("chromeremb", "chromenoremb"):
                    rates[(share, stream)] = chromium_rates(options, work, whip_port, stream, share, clip)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=20)

    version = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h"], capture_output=True, text=True).stdout.strip()
    print(f"{options.rounds} rounds of each path, alternating, {options.frames} frames of {options.size} at {options.fps} fps, "
          f"x264 ultrafast zerolatency {options.bitrate} kbit/s (constrained baseline, a keyframe each second), commit {version}, "
          f"release build, hwaccel none, {os.cpu_count()} CPUs.\n")
    print("| path | frames matched / read | p50 | p90 | p99 | max |")
    print("|---|---|---|---|---|---|")
    for path, label in (("whip", "whip (webrtcbin: ICE, DTLS, SRTP, NACK/RTX offered)"), ("rtp", "rtp:// (plain RTP)")):
        values = results[path]
        print(f"| {label} | {len(values)} / {reads[path]} | {percentile(values, 0.5):.2f} ms | {percentile(values, 0.9):.2f} ms | "
              f"{percentile(values, 0.99):.2f} ms | {max(values, default=float('nan')):.2f} ms |")
    if results["whip"] and results["rtp"]:
        difference = percentile(results["whip"], 0.5) - percentile(results["rtp"], 0.5)
        print(f"\np50 whip − p50 rtp:// = {difference:+.3f} ms.")
    if rates:
        print("\nChromium 156 (headless, OpenH264) through the share page: the send bitrate its getStats gives, second by "
              "second from the first report, with the daemon's REMB (`remb = true`, the default) and without (`remb = false`: "
              "no goog-remb in the answer, so Chromium has only its loss-based estimate; transport-cc is never answered).\n")
        print("| source | feedback | " + " | ".join(f"{second} s" for second in range(1, 7)) + " | size |")
        print("|---|---|" + "---|" * 7)
        for (share, stream), by_second in rates.items():
            source = "camera (fake, 1280×720 clip)" if share == "camera" else "screen (Chromium's headless fake screen)"
            feedback = "REMB" if stream == "chromeremb" else "none"
            if by_second is None:
                print(f"| {source} | {feedback} | failed |" + " |" * 6)
                continue
            cells = [f"{by_second[second][0]} kbit/s" if second in by_second else "–" for second in range(1, 7)]
            size = next((by_second[second][1] for second in range(1, 7) if second in by_second), "?")
            print(f"| {source} | {feedback} | " + " | ".join(cells) + f" | {size} |")
        browser = [value["setup_ms"] for value in rates.values() if value and value.get("setup_ms") is not None]
        if browser:
            print(f"\nChromium POST → first frame readable, {len(browser)} sessions (the page's POST as DevTools stamps it, the "
                  f"ring's frame as latency-probe reads it): median {statistics.median(browser):.0f} ms, min {min(browser):.0f} ms, "
                  f"max {max(browser):.0f} ms.")
    if setups:
        print(f"\nwebrtcbin POST → first frame readable, {len(setups)} sessions: median {statistics.median(setups):.0f} ms, "
              f"min {min(setups):.0f} ms, max {max(setups):.0f} ms (ICE, DTLS, the valve opening the encoder, its first "
              "keyframe and its decode).")


if __name__ == "__main__":
    main()
