#!/usr/bin/env python3
"""RTSP pull over UDP against rtp:// (part of `make bench`): last RTP packet of a frame sent → frame readable.

The same 1080p30 H.264 stream, packetized once (RFC 6184: single NAL unit packets and FU-A, 1400-byte payloads,
the marker bit on each access unit's last packet), is sent paced at its frame rate from one UDP socket in two ways,
alternating runs: to a stream that listens on rtp:// (the existing path), and, as an RTSP camera would, to the
port pair a `source = "rtsp://…"` stream with rtsp_transport = "udp" asked for in its SETUP (this script answers
OPTIONS, DESCRIBE with the SDP, SETUP and PLAY itself, so that it knows when each packet left). A consumer process
(scripts/latency-probe.c shm) records when each frame became readable; sender and consumer share CLOCK_MONOTONIC.
Prints a Markdown section.
"""
import argparse
import base64
import os
import signal
import socket
import subprocess
import sys
import threading
import time

PAYLOAD = 1400


def access_units(stream):
    """Annex B bytes to access units (lists of NAL units without start codes), one picture each."""
    units, start, index = [], None, 0
    while True:
        found = stream.find(b"\x00\x00\x01", index)
        if start is not None:
            end = len(stream) if found < 0 else found
            units.append(stream[start:end].rstrip(b"\x00"))
        if found < 0:
            break
        start = index = found + 3
    frames, current, has_picture = [], [], False
    for unit in units:
        kind = unit[0] & 0x1F
        first_slice = kind in (1, 5) and unit[1] & 0x80  # first_mb_in_slice == 0
        if has_picture and (kind in (6, 7, 8, 9) or first_slice):
            frames.append(current)
            current, has_picture = [], False
        current.append(unit)
        has_picture = has_picture or kind in (1, 5)
    if current:
        frames.append(current)
    return frames


def packetize(frames, fps):
    """RTP packets per frame: timestamp = index × 90000 / fps, so the ring's pts names the frame."""
    sequence, packets = 0, []
    for index, frame in enumerate(frames):
        timestamp = index * 90000 // fps
        payloads = []
        for unit in frame:
            if len(unit) <= PAYLOAD:
                payloads.append(unit)
                continue
            header, body = unit[0], unit[1:]
            for offset in range(0, len(body), PAYLOAD):
                piece = body[offset:offset + PAYLOAD]
                fu_header = header & 0x1F | (0x80 if offset == 0 else 0) | (0x40 if offset + PAYLOAD >= len(body) else 0)
                payloads.append(bytes([header & 0xE0 | 28, fu_header]) + piece)
        frame_packets = []
        for number, payload in enumerate(payloads):
            marker = 0x80 if number == len(payloads) - 1 else 0
            frame_packets.append(bytes([0x80, marker | 96]) + (sequence & 0xFFFF).to_bytes(2, "big")
                                 + (timestamp & 0xFFFFFFFF).to_bytes(4, "big") + (0x5354524D).to_bytes(4, "big") + payload)
            sequence += 1
        packets.append(frame_packets)
    return packets


def send(sender, destination, packets, fps):
    """Frame i's packets at start + i/fps, back to back; returns when each frame's last packet left."""
    start = time.monotonic_ns() + 10_000_000
    written = []
    for index, frame in enumerate(packets):
        target = start + index * 1_000_000_000 // fps
        while time.monotonic_ns() < target:
            left = target - time.monotonic_ns()
            time.sleep(left / 1e9 if left > 2_000_000 else 0)
        for packet in frame:
            sender.sendto(packet, destination)
        written.append(time.monotonic_ns())
    return written


class Camera(threading.Thread):
    """Just enough of an RTSP server for one session over UDP: OPTIONS, DESCRIBE, SETUP, PLAY, keep-alives."""

    def __init__(self, sdp, port=0):
        super().__init__(daemon=True)
        self.listener = socket.create_server(("127.0.0.1", port))
        self.connection = None
        self.port = self.listener.getsockname()[1]
        self.rtp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.rtp.bind(("127.0.0.1", 0))
        self.sdp = sdp
        self.client = None
        self.silent = False
        self.playing = threading.Event()

    def close(self, silent=False):
        """The camera goes away: its port closed, and its connection closed too, or (`silent`: power lost, or hung)
        left open and answering nothing."""
        self.silent = silent
        for sock in (self.listener, self.rtp) if silent else (self.connection, self.listener, self.rtp):
            if sock:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def run(self):
        try:
            connection, _ = self.listener.accept()
        except OSError:
            return
        self.connection = connection
        buffer = b""
        while True:
            try:
                data = connection.recv(65536)
            except OSError:
                return
            if not data:
                return
            if self.silent:
                continue
            buffer += data
            while b"\r\n\r\n" in buffer:
                head, buffer = buffer.split(b"\r\n\r\n", 1)
                lines = head.decode().split("\r\n")
                method = lines[0].split()[0]
                headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
                reply = "RTSP/1.0 200 OK\r\nCSeq: %s\r\n" % headers.get("CSeq", "0")
                body = ""
                if method == "OPTIONS":
                    reply += "Public: OPTIONS, DESCRIBE, SETUP, PLAY, GET_PARAMETER, TEARDOWN\r\n"
                elif method == "DESCRIBE":
                    body = self.sdp
                    reply += "Content-Type: application/sdp\r\nContent-Length: %d\r\n" % len(body)
                elif method == "SETUP":
                    port = int(headers["Transport"].split("client_port=")[1].split("-")[0])
                    self.client = ("127.0.0.1", port)
                    own = self.rtp.getsockname()[1]
                    reply += "Session: 4242;timeout=60\r\nTransport: RTP/AVP;unicast;client_port=%d-%d;server_port=%d-%d\r\n" \
                        % (port, port + 1, own, own + 1)
                elif method == "PLAY":
                    reply += "Session: 4242\r\n"
                    self.playing.set()
                connection.sendall((reply + "\r\n" + body).encode())


def run_once(args, kind, packets, sdp, frames):
    name = "benchrtsp%d%s" % (os.getpid(), kind)
    config = os.path.join(args.work, "rtsp-%s.toml" % kind)
    settings = 'hwaccel = "none"\nmax_width = 1920\nmax_height = 1088\nslots = 8\nthreads = 1\n'
    camera = None
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    if kind == "rtp":
        port = 44000 + os.getpid() % 10000
        endpoint = 'listen = "rtp://127.0.0.1:%d"\ncodec = "h264"\n' % port
        destination = ("127.0.0.1", port)
    else:
        camera = Camera(sdp)
        camera.start()
        sender = camera.rtp
        sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
        endpoint = 'source = "rtsp://127.0.0.1:%d/cam"\nrtsp_transport = "udp"\n' % camera.port
    with open(config, "w") as file:
        file.write('[daemon]\nlog_level = "warning"\n[[stream]]\nname = "%s"\n%s%s' % (name, endpoint, settings))
    remove_ring(name)
    daemon = subprocess.Popen([args.daemon, "--config", config], stderr=open(os.path.join(args.work, "rtsp.log"), "a"))
    try:
        while not os.path.exists("/dev/shm/streamrecv-" + name):
            time.sleep(0.05)
        probe = subprocess.Popen([args.probe, "shm", name, str(frames)], stdout=subprocess.PIPE, text=True)
        if camera:
            if not camera.playing.wait(20):
                raise RuntimeError("the daemon did not PLAY; see %s/rtsp.log" % args.work)
            destination = camera.client
        time.sleep(0.5)
        written = send(sender, destination, packets[:frames], args.fps)
        rows = [line.split() for line in probe.communicate(timeout=60)[0].splitlines()]
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait()
        remove_ring(name)
    latencies = []
    for row in rows:
        index = int(row[2]) * args.fps // 90000
        # The first second (decoder start-up) and the last frame are left out, as in the other latency tables.
        if args.fps <= index < frames - 1:
            latencies.append((int(row[1]) - written[index]) / 1e6)
    return latencies


def reconnections(args, packets, sdp, trials, silent):
    """The camera goes away (port closed; its connection closed, or left open and silent) for a while and comes back
    on the same port: seconds from its listening again to the daemon's PLAY, and to the first new frame readable."""
    name = "benchrtspre%d" % os.getpid()
    camera = Camera(sdp)
    port = camera.port
    camera.start()
    config = os.path.join(args.work, "rtsp-reconnect.toml")
    with open(config, "w") as file:
        file.write('[daemon]\nlog_level = "warning"\n[[stream]]\nname = "%s"\nsource = "rtsp://127.0.0.1:%d/cam"\n'
                   'rtsp_transport = "udp"\nhwaccel = "none"\nmax_width = 1920\nmax_height = 1088\nslots = 8\n' % (name, port))
    daemon = subprocess.Popen([args.daemon, "--config", config], stderr=open(os.path.join(args.work, "rtsp.log"), "a"))
    rows = []
    try:
        for trial in range(trials):
            if not camera.playing.wait(20):
                raise RuntimeError("the daemon did not PLAY; see %s/rtsp.log" % args.work)
            send(camera.rtp, camera.client, packets[:30], args.fps)
            previous = camera
            camera.close(silent)
            time.sleep(2 + trial)  # outages of 2, 3, 4 … s: the backoff is at its cap by then
            camera = Camera(sdp, port)
            back = time.monotonic_ns()
            camera.start()
            probe = subprocess.Popen([args.probe, "shm", name, "1"], stdout=subprocess.PIPE, text=True)
            if not camera.playing.wait(20):
                raise RuntimeError("the daemon did not come back; see %s/rtsp.log" % args.work)
            played = time.monotonic_ns()
            time.sleep(0.2)
            sender = threading.Thread(target=send, args=(camera.rtp, camera.client, packets[:30], args.fps))
            sender.start()
            line = probe.communicate(timeout=30)[0].split()
            sender.join()
            rows.append(((played - back) / 1e9, (int(line[1]) - back) / 1e9 if line else float("nan")))
            if silent:
                previous.connection.close()
    finally:
        camera.close()
        daemon.send_signal(signal.SIGTERM)
        daemon.wait()
        remove_ring(name)
    return rows


def remove_ring(name):
    """A daemon stopped by SIGTERM leaves its ring (with its last frames) by design; the benchmark's go."""
    try:
        os.remove("/dev/shm/streamrecv-" + name)
    except FileNotFoundError:
        pass


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))] if ordered else float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--daemon", default=".build/release/streamrecvd")
    parser.add_argument("--probe", required=True, help="scripts/latency-probe.c, built")
    parser.add_argument("--stream", required=True, help="an Annex B 1080p H.264 file (x264 zerolatency, one slice)")
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--work", default=".build/bench")
    parser.add_argument("--reconnections", type=int, default=5)
    parser.add_argument("--outage", choices=["closed", "silent"], default="closed",
                        help="closed: the camera's connection closes (a process that died); silent: it stays open and "
                             "answers nothing (power lost, or hung)")
    args = parser.parse_args()
    frames = access_units(open(args.stream, "rb").read())
    packets = packetize(frames, args.fps)
    count = min(args.frames, len(packets))
    sps = next(unit for frame in frames for unit in frame if unit[0] & 0x1F == 7)
    pps = next(unit for frame in frames for unit in frame if unit[0] & 0x1F == 8)
    sdp = ("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=bench\r\nt=0 0\r\na=control:*\r\nm=video 0 RTP/AVP 96\r\n"
           "a=rtpmap:96 H264/90000\r\na=fmtp:96 packetization-mode=1;sprop-parameter-sets=%s,%s\r\na=control:video\r\n"
           % (base64.b64encode(sps).decode(), base64.b64encode(pps).decode()))
    results = {"rtp": [], "rtsp": []}
    for _ in range(args.runs):
        for kind in ("rtp", "rtsp"):
            results[kind].append(run_once(args, kind, packets, sdp, count))
    if args.runs > 0:
        print("%d frames of %s at %d fps, %d runs of each alternating; milliseconds from the frame's last RTP packet sent"
              % (count, args.stream, args.fps, args.runs))
        print("to the frame readable (`latency-probe shm`)\n")
        print("| path | run | frames | p50 | p90 | p99 |")
        print("|---|---|---|---|---|---|")
        for kind, label in (("rtp", 'listen = "rtp://…" (the sender pushes)'), ("rtsp", 'source = "rtsp://…", rtsp_transport = "udp"')):
            for run, values in enumerate(results[kind]):
                print("| %s | %d | %d | %.2f | %.2f | %.2f |" % (label, run + 1, len(values), percentile(values, 0.5),
                                                                percentile(values, 0.9), percentile(values, 0.99)))
        pooled = {kind: [value for values in results[kind] for value in values] for kind in results}
        difference = percentile(pooled["rtsp"], 0.5) - percentile(pooled["rtp"], 0.5)
        print("\nAll runs pooled: rtp:// p50 %.2f ms, RTSP over UDP p50 %.2f ms: RTSP minus rtp:// %+.2f ms (goal: within 1 ms)"
              % (percentile(pooled["rtp"], 0.5), percentile(pooled["rtsp"], 0.5), difference))
    rows = reconnections(args, packets, sdp, args.reconnections, args.outage == "silent")
    print("\nReconnection (outage: %s): the camera goes away for 2, 3, … s (its port closed; its connection %s) and"
          % (args.outage, "left open and silent, as when it lost power or hung" if args.outage == "silent" else "closed"))
    print("listens again on the same port; seconds from its listening again to the daemon's PLAY, and to the first new")
    print("frame readable (the camera sends its next frame, an IDR, 0.2 s after PLAY)\n")
    print("| outage | PLAY after | first frame after |")
    print("|---|---|---|")
    for trial, (played, frame) in enumerate(rows):
        print("| %d s | %.2f s | %.2f s |" % (2 + trial, played, frame))
    print("\nslowest PLAY: %.2f s after the camera was back (goal: within 2 s)" % max(row[0] for row in rows))


if __name__ == "__main__":
    sys.exit(main())
