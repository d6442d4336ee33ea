#!/usr/bin/env python3
"""Seed corpora for the fuzz targets (Fuzz/), made from streams ffmpeg encodes now: whole Annex B streams, their
parameter sets and SEI payloads, the RTP datagrams FFmpeg's packetizer sends for them, and the same in MPEG-TS. Usage: fuzz-seeds.py DIR"""
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading


def encode(path, codec, extra):
    # The H.264 streams carry a display orientation SEI too (the h264_metadata filter inserts one).
    encoder = ["-c:v", "libx264", "-x264-params", extra, "-bsf:v", "h264_metadata=display_orientation=insert:rotate=90"] \
        if codec == "h264" else ["-c:v", "libx265", "-x265-params", "log-level=error:" + extra]
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=176x144:rate=25", "-frames:v", "12"]
                   + encoder + ["-f", codec if codec == "h264" else "hevc", path], check=True)
    with open(path, "rb") as handle:
        return handle.read()


def encode_ts(path, codec, extra):
    encoder = ["-c:v", "libx264", "-x264-params", extra] if codec == "h264" \
        else ["-c:v", "libx265", "-x265-params", "log-level=error:" + extra]
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=176x144:rate=25", "-frames:v", "12"]
                   + encoder + ["-f", "mpegts", path], check=True)
    with open(path, "rb") as handle:
        return handle.read()


def nal_units(stream):
    starts = [match.end() for match in re.finditer(b"\x00\x00\x01", stream)]
    for index, start in enumerate(starts):
        end = starts[index + 1] - 3 if index + 1 < len(starts) else len(stream)
        yield stream[start:end].rstrip(b"\x00")


def capture_rtp(path, codec):
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(2)
    port = receiver.getsockname()[1]
    packets = []

    def receive():
        try:
            while True:
                packets.append(receiver.recv(65536))
        except socket.timeout:
            pass
    thread = threading.Thread(target=receive)
    thread.start()
    subprocess.run(["ffmpeg", "-v", "error", "-f", codec if codec == "h264" else "hevc", "-i", path, "-c", "copy",
                    "-f", "rtp", "rtp://127.0.0.1:%d?pkt_size=400" % port], check=True, stdout=subprocess.DEVNULL)
    thread.join()
    return packets


def rtsp_conversation(codec, packets):
    name, fmtp = ("H264", "packetization-mode=1;sprop-parameter-sets=Z2QAHqzZQUH7ARAAAAMAEAAAAwMg8WLZYA==,aOvjyyLA") \
        if codec == "h264" else ("H265", "sprop-vps=QAEMAf//;sprop-sps=QgEB;sprop-pps=RAHA")
    sdp = ("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=cam\r\na=control:*\r\nm=video 0 RTP/AVP 96\r\n"
           "a=rtpmap:96 %s/90000\r\na=fmtp:96 %s\r\na=control:stream=0\r\n" % (name, fmtp)).encode()
    replies = [
        b"RTSP/1.0 200 OK\r\nCSeq: 1\r\nPublic: OPTIONS, DESCRIBE, SETUP, PLAY, GET_PARAMETER, TEARDOWN\r\n\r\n",
        b'RTSP/1.0 401 Unauthorized\r\nCSeq: 2\r\nWWW-Authenticate: Basic realm="cam"\r\n'
        b'WWW-Authenticate: Digest realm="cam", nonce="0123abcd", qop="auth", opaque="x\\"y"\r\n\r\n',
        b"RTSP/1.0 200 OK\r\nCSeq: 3\r\nContent-Base: rtsp://127.0.0.1:8554/cam/\r\nContent-Type: application/sdp\r\n"
        b"Content-Length: %d\r\n\r\n" % len(sdp) + sdp,
        b"RTSP/1.0 200 OK\r\nCSeq: 4\r\nTransport: RTP/AVP/TCP;unicast;interleaved=0-1;ssrc=1234\r\n"
        b"Session: 5A3B;timeout=60\r\n\r\n",
        b"RTSP/1.0 200 OK\r\nCSeq: 5\r\nSession: 5A3B\r\nRTP-Info: url=rtsp://127.0.0.1:8554/cam/stream=0;seq=1\r\n\r\n",
        b"GET_PARAMETER rtsp://127.0.0.1:8554/cam RTSP/1.0\r\nCSeq: 9\r\n\r\n",
    ]
    sender_report = bytes([0x80, 200, 0, 6]) + bytes(range(24))
    goodbye = bytes([0x81, 203, 0, 1, 1, 2, 3, 4])
    frames = b"".join(b"$\x00" + len(packet).to_bytes(2, "big") + packet for packet in packets)
    rtcp = b"".join(b"$\x01" + len(packet).to_bytes(2, "big") + packet for packet in (sender_report, goodbye))
    return b"".join(replies) + frames[:2000] + rtcp


def main(directory):
    seeds = {name: [] for name in ("FuzzAnnexB", "FuzzH264ParameterSets", "FuzzH265ParameterSets", "FuzzSEI", "FuzzRTP", "FuzzTransportStream", "FuzzRTSP")}
    with tempfile.TemporaryDirectory() as work:
        for codec, extra, selector in (("h264", "bframes=2:slices=2", 1), ("h264", "bframes=0:cabac=0", 1),
                                       ("h265", "bframes=2", 2), ("h265", "bframes=0:slices=2", 2)):
            path = os.path.join(work, "s." + codec)
            stream = encode(path, codec, extra)
            # The start of each stream (parameter sets, the first pictures): the target's inputs are at most 4 KiB.
            seeds["FuzzAnnexB"] += [bytes([0]) + stream[:4000], bytes([selector | 0x10]) + stream[:4000]]
            for nal in nal_units(stream):
                if codec == "h264":
                    kind = nal[0] & 0x1F
                    if kind in (7, 8):
                        seeds["FuzzH264ParameterSets"].append(bytes([kind - 7]) + nal[1:])
                    elif kind in (1, 5) and len(seeds["FuzzH264ParameterSets"]) < 40:
                        seeds["FuzzH264ParameterSets"].append(bytes([2]) + nal[1:64])
                    elif kind == 6:
                        seeds["FuzzSEI"].append(bytes([0]) + nal[1:])
                else:
                    kind = (nal[0] >> 1) & 0x3F
                    if kind in (32, 33, 34):
                        seeds["FuzzH265ParameterSets"].append(bytes([kind - 32]) + nal[2:])
                    elif kind in (39, 40):
                        seeds["FuzzSEI"].append(bytes([1]) + nal[2:])
            packets = capture_rtp(path, codec)
            framed = b"".join(len(packet).to_bytes(2, "big") + packet for packet in packets[:60])
            seeds["FuzzRTP"].append(bytes([0 if codec == "h264" else 1]) + framed)
            # The same pictures in MPEG-TS, as `ffmpeg -f mpegts srt://` sends them; read in 188- and 1316-byte chunks.
            ts = encode_ts(os.path.join(work, "s.ts"), codec, extra)
            seeds["FuzzTransportStream"] += [bytes([187]) + ts[:8000], bytes([255]) + ts[:8000]]
            # What an RTSP server says to the client: a challenge, the SDP, SETUP and PLAY, then interleaved RTP and
            # RTCP (a sender report, a BYE); read in 1-byte and 200-byte appends.
            conversation = rtsp_conversation(codec, packets[:20])
            seeds["FuzzRTSP"] += [bytes([0]) + conversation[:3000], bytes([199]) + conversation[:8000]]
    for name, inputs in seeds.items():
        os.makedirs(os.path.join(directory, name), exist_ok=True)
        for index, data in enumerate(inputs):
            with open(os.path.join(directory, name, "seed-%03d" % index), "wb") as handle:
                handle.write(data)
        print("%s: %d seeds" % (name, len(inputs)))


if __name__ == "__main__":
    main(sys.argv[1])
