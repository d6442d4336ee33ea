#!/usr/bin/env python3
"""Seed corpora for the fuzz targets (Fuzz/), made from streams ffmpeg encodes now: whole Annex B streams, their
parameter sets and SEI payloads, the RTP datagrams FFmpeg's packetizer sends for them, and the same in MPEG-TS; and
written out, STUN and RTCP as a WebRTC port receives them. Usage: fuzz-seeds.py DIR"""
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


def webrtc_seeds():
    """What arrives on a WebRTC port: RFC 5769's STUN samples (with MESSAGE-INTEGRITY and FINGERPRINT), a bare
    Binding request, and compound RTCP (SR + SDES + BYE, an RR with a Generic NACK, a PLI, a REMB)."""
    stun = [bytes.fromhex(text) for text in (
        "000100582112a442b7e7a701bc34d686fa87dfae802200105354554e207465737420636c69656e74002400046e0001ff"
        "80290008932ff9b151263b36000600096576746a3a68367659202020000800149aeaa70cbfd8cb56781ef2b5b2d3f249"
        "c1b571a280280004e57a3bcf",
        "0101003c2112a442b7e7a701bc34d686fa87dfae8022000b7465737420766563746f7220002000080001a147e112a643"
        "000800142b91f599fd9e90c38c7489f92af9ba53f06be7d780280004c07d4c96",
        "010100482112a442b7e7a701bc34d686fa87dfae8022000b7465737420766563746f7220002000140002a1470113a9fa"
        "a5d3f179bc25f4b5bed2b9d900080014a382954e4be67bf11784c97c8292c275bfe3ed4180280004c8fb0b4c",
        "000100002112a442000102030405060708090a0b",
    )]
    receiver_report = bytes([0x80, 201, 0, 1, 1, 2, 3, 4])
    sender_report = bytes([0x81, 200, 0, 12, 0, 0, 0, 42]) + bytes(range(20)) + bytes([0, 0, 0, 9]) + bytes(range(20))
    sdes = bytes([0x81, 202, 0, 3, 0, 0, 0, 42, 1, 3]) + b"abc" + bytes(3)
    bye = bytes([0xA1, 203, 0, 2, 0, 0, 0, 42, 0, 0, 0, 4])
    nack = bytes([0x81, 205, 0, 4, 1, 2, 3, 4, 5, 6, 7, 8, 0xFF, 0xFE, 0x00, 0x07, 0x00, 0x10, 0xFF, 0xFF])
    pli = bytes([0x81, 206, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8])
    remb = bytes([0x8F, 206, 0, 5, 1, 2, 3, 4, 0, 0, 0, 0]) + b"REMB" + bytes([1, 0x0B, 0xD0, 0x90, 5, 6, 7, 8])
    # Transport-wide feedback: base 10, 3 packets (received, lost, received 75 ms later), padded.
    twcc = bytes([0xAF, 205, 0, 6, 1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 0, 3, 0x12, 0x34, 0x56, 7, 0xD2, 0, 4, 1, 0x2C, 0, 0, 3])
    rtcp = [sender_report + sdes + bye, receiver_report + nack, receiver_report + pli, receiver_report + remb, nack,
            receiver_report + twcc]
    return {"FuzzSTUN": stun + rtcp[:1], "FuzzRTCP": rtcp}


def whip_offer_seeds():
    """WHIP offers (RFC 9725) as senders write them: webrtcbin's one H.264 section, libdatachannel's (OBS) session-level
    transport with audio first, and a browser's bundle with VP8, H.264 modes 0 and 1, RTX, an FID group, extmaps."""
    fingerprint = ":".join("%02X" % (index * 37 % 256) for index in range(32))
    webrtcbin = ("v=0\r\no=- 1406163566592421573 0 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\na=ice-options:trickle\r\n"
                 "a=group:BUNDLE video0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\nc=IN IP4 0.0.0.0\r\na=setup:actpass\r\n"
                 "a=ice-ufrag:WdFyYDJ8WnTn1pkwOTmqz8kQhM1A+Yvl\r\na=ice-pwd:5dm6JDWyNhC5Fq8X9xqiEDZk/wD5bRfa\r\n"
                 "a=rtcp-mux\r\na=rtcp-rsize\r\na=sendrecv\r\na=rtpmap:96 H264/90000\r\na=rtcp-fb:96 nack\r\n"
                 "a=rtcp-fb:96 nack pli\r\na=rtcp-fb:96 ccm fir\r\na=rtcp-fb:96 goog-remb\r\n"
                 "a=fmtp:96 packetization-mode=1;profile-level-id=42c01f;level-asymmetry-allowed=1\r\n"
                 "a=ssrc:3484078950 cname:user1266519624@host-e7a6d0fa\r\na=mid:video0\r\n"
                 "a=fingerprint:sha-256 %s\r\na=candidate:1 1 UDP 2015363327 192.168.1.20 46789 typ host\r\n" % fingerprint)
    obs = ("v=0\r\no=rtc 2514409745 0 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0 1\r\na=setup:actpass\r\n"
           "a=ice-ufrag:kZB3\r\na=ice-pwd:+3tA7S8XazuKs+j2mu4rfU\r\na=ice-options:ice2,trickle\r\n"
           "a=fingerprint:sha-256 %s\r\nm=audio 58125 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 192.168.1.50\r\na=mid:0\r\n"
           "a=sendonly\r\na=rtcp-mux\r\na=rtpmap:111 opus/48000/2\r\na=end-of-candidates\r\n"
           "m=video 58125 UDP/TLS/RTP/SAVPF 96\r\nc=IN IP4 192.168.1.50\r\na=mid:1\r\na=sendonly\r\n"
           "a=ssrc:3339016935 cname:pTqIZQnYKkI8i1lY\r\na=rtcp-mux\r\na=rtpmap:96 H264/90000\r\na=rtcp-fb:96 nack\r\n"
           "a=rtcp-fb:96 nack pli\r\na=fmtp:96 profile-level-id=42e01f;packetization-mode=1\r\n" % fingerprint)
    browser = ("v=0\r\no=- 4611731400430051336 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0 1\r\n"
               "m=video 9 UDP/TLS/RTP/SAVPF 96 97 104 102 103 45 116 118\r\nc=IN IP4 0.0.0.0\r\n"
               "a=candidate:2999745851 1 udp 2122260223 192.168.1.20 56143 typ host generation 0\r\n"
               "a=ice-ufrag:Gx4j\r\na=ice-pwd:9JzVQ0QyR4wB5nQ2s3mC7LkE\r\na=fingerprint:sha-256 %s\r\n"
               "a=setup:actpass\r\na=mid:0\r\na=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time\r\n"
               "a=extmap:4 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01\r\n"
               "a=extmap:9/sendonly urn:ietf:params:rtp-hdrext:sdes:mid\r\na=sendonly\r\na=rtcp-mux\r\na=rtcp-rsize\r\n"
               # Simulcast as OBS 32 and a browser with sendEncodings rids offer it (RFC 8853).
               "a=rid:h send\r\na=rid:m send\r\na=rid:l send\r\na=simulcast:send h;~m,x;l\r\n"
               "a=rtpmap:96 VP8/90000\r\na=rtcp-fb:* nack\r\na=rtpmap:97 rtx/90000\r\na=fmtp:97 apt=96\r\n"
               "a=rtpmap:104 H264/90000\r\na=fmtp:104 packetization-mode=0;profile-level-id=42001f\r\n"
               "a=rtpmap:102 H264/90000\r\na=rtcp-fb:102 transport-cc\r\na=rtcp-fb:102 ccm fir\r\n"
               "a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f\r\n"
               "a=rtpmap:103 rtx/90000\r\na=fmtp:103 apt=102\r\na=rtpmap:45 AV1/90000\r\na=rtpmap:116 red/90000\r\n"
               "a=rtpmap:118 ulpfec/90000\r\na=ssrc-group:FID 2231627014 632943048\r\n"
               "a=ssrc:2231627014 cname:4TOk42mSjXCkVIa6\r\na=ssrc:632943048 cname:4TOk42mSjXCkVIa6\r\n"
               "m=audio 0 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=mid:1\r\na=bundle-only\r\na=sendonly\r\n"
               "a=rtcp-mux\r\na=rtpmap:111 opus/48000/2\r\n" % fingerprint)
    return {"FuzzWebRTCOffer": [text.encode() for text in (webrtcbin, obs, browser)]}


def with_transport_sequence(packet, number):
    """An RTP packet (no CSRCs, no extension) given a one-byte header extension (RFC 8285) with element id 5 holding
    `number`, as a browser numbers its packets for transport-cc."""
    if len(packet) < 12 or packet[0] & 0x1F:
        return packet
    return bytes([packet[0] | 0x10]) + packet[1:12] + bytes([0xBE, 0xDE, 0, 1, 0x51, number >> 8 & 0xFF, number & 0xFF, 0]) + packet[12:]


def main(directory):
    seeds = {name: [] for name in ("FuzzAnnexB", "FuzzH264ParameterSets", "FuzzH265ParameterSets", "FuzzSEI", "FuzzRTP", "FuzzTransportStream", "FuzzRTSP")}
    seeds.update(webrtc_seeds())
    seeds.update(whip_offer_seeds())
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
            # The same packets with a transport-wide sequence number (one-byte extension, id 5: control byte 8).
            numbered = [with_transport_sequence(packet, index) for index, packet in enumerate(packets[:60])]
            framed = b"".join(len(packet).to_bytes(2, "big") + packet for packet in numbered)
            seeds["FuzzRTP"].append(bytes([8 if codec == "h264" else 9]) + framed)
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
