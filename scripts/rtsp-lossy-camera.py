#!/usr/bin/env python3
"""An RTSP camera for the tests that loses a packet on purpose and reports the RTCP it gets back.

    rtsp-lossy-camera.py --port 8554 --stream clip.h264 --fps 25 --drop-frame 10

Serves one session over UDP (the minimal server of scripts/bench-rtsp.py, with an RTCP port this time): the clip's
frames packetized as that benchmark does (RFC 6184, the RTP timestamp names the frame), paced at --fps, with the
first packet of frame --drop-frame never sent. Prints "ready" once it listens, "playing" at PLAY, then one line per
RTCP packet type received on its RTCP port ("rtcp-rr", "rtcp-pli SSRC", "rtcp-fir SSRC", with the media SSRC asked
for), and "done" a few seconds after its last packet.
"""
import argparse
import importlib.util
import os
import socket
import threading
import time

spec = importlib.util.spec_from_file_location("bench_rtsp", os.path.join(os.path.dirname(__file__), "bench-rtsp.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


class Camera(bench.Camera):
    """The benchmark's camera with an RTCP socket on the port after its RTP port."""

    def __init__(self, sdp, port):
        super().__init__(sdp, port)
        for _ in range(64):
            self.rtp.close()
            self.rtp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.rtp.bind(("127.0.0.1", 0))
            own = self.rtp.getsockname()[1]
            if own % 2:
                continue
            self.rtcp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                self.rtcp.bind(("127.0.0.1", own + 1))
                return
            except OSError:
                self.rtcp.close()
        raise RuntimeError("no even/odd port pair")


def report_rtcp(sock):
    while True:
        try:
            data = sock.recv(2048)
        except OSError:
            return
        index = 0
        while len(data) - index >= 4:
            kind, fmt = data[index + 1], data[index] & 0x1F
            length = (int.from_bytes(data[index + 2:index + 4], "big") + 1) * 4
            if kind == 201:
                print("rtcp-rr", flush=True)
            elif kind == 206 and fmt == 1 and len(data) >= index + 12:
                print("rtcp-pli %d" % int.from_bytes(data[index + 8:index + 12], "big"), flush=True)
            elif kind == 206 and fmt == 4 and len(data) >= index + 16:
                print("rtcp-fir %d" % int.from_bytes(data[index + 12:index + 16], "big"), flush=True)
            index += length


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--stream", required=True, help="Annex B H.264")
    parser.add_argument("--fps", type=int, default=25)
    parser.add_argument("--drop-frame", type=int, required=True)
    args = parser.parse_args()
    frames = bench.access_units(open(args.stream, "rb").read())
    packets = bench.packetize(frames, args.fps)
    packets[args.drop_frame] = packets[args.drop_frame][1:]
    sdp = ("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=lossy\r\nt=0 0\r\na=control:*\r\nm=video 0 RTP/AVP 96\r\n"
           "a=rtpmap:96 H264/90000\r\na=fmtp:96 packetization-mode=1\r\na=control:video\r\n")
    camera = Camera(sdp, args.port)
    threading.Thread(target=report_rtcp, args=(camera.rtcp,), daemon=True).start()
    camera.start()
    print("ready", flush=True)
    if not camera.playing.wait(60):
        return 1
    print("playing", flush=True)
    time.sleep(0.3)
    bench.send(camera.rtp, camera.client, packets, args.fps)
    time.sleep(3)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
