#!/usr/bin/env python3
"""A scripted RTSP camera that misbehaves on purpose, for the hostile-server tests (RTSPHostileServerTests).

    rtsp-hostile-camera.py --port 8554 --stream clip.h264 --mode MODE [options]

Serves its Annex B H.264 clip (packetized as scripts/bench-rtsp.py does: RFC 6184, SSRC "STRM", the RTP timestamp
names the frame, paced at --fps) to any number of sessions, one connection each, and behaves as MODE says:

  play        a well-behaved camera (the target of a redirect; over UDP or interleaved TCP as asked)
  forge       over UDP: from the camera's own port, --forge's frames with another SSRC, and an RTCP BYE for another
              SSRC; the camera's SETUP answer names source=--source (another host) if given; its own BYE at the end
              (the attacker on another port is scripts/rtsp-udp-attacker.py, run as another user)
  one-frame   sends the first access unit (a keyframe) interleaved, then closes the connection
  no-params   interleaved, the clip without SPS/PPS and an SDP without sprop-parameter-sets, looped
  tcp-461     answers SETUP for interleaved TCP with 461 Unsupported Transport; UDP works
  no-server-port  plays, but its SETUP answer for UDP names neither server_port nor ssrc (interleaved TCP works)
  redirect    answers OPTIONS and DESCRIBE with 302 and Location: --location (SELF: its own URL, a loop)
  auth-digest asks for Digest (MD5, any answer accepted) and plays; auth-basic: Basic only; auth-sha256: Digest SHA-256 and Basic; auth-downgrade: Digest (MD5, any answer
              accepted) for the first session, which plays two seconds and closes, Basic only afterwards
  flood       interleaved: after PLAY, 64 KiB frames on the RTP channel as fast as the socket takes them
              (--flood garbage: random bytes; --flood rtp: RTP headers of one SSRC, random payloads), answering
              the client's requests meanwhile
  burst       interleaved: after the first session's PLAY, the clip --loops times back to back, as fast as the socket
              takes it (sequence numbers and timestamps go on across loops), then closes; later sessions get nothing;
              answers no request after PLAY (a camera busy sending: a client that asks, and reads on for the
              answer, reads everything)

Prints "ready" once it listens, then a line per event: "playing N" (a session's PLAY), "auth basic"/"auth digest"
(the scheme of an Authorization header received), "401" (a challenge sent), "rtcp-rr" (a receiver report on its RTCP port), "diverted-rtcp"
(RTCP on --source's address), "client-port N" (a UDP SETUP's), "keepalive" (a request answered after PLAY), "setup TRANSPORT", "done".
"""
import argparse
import base64
import importlib.util
import os
import socket
import threading
import time

spec = importlib.util.spec_from_file_location("bench_rtsp", os.path.join(os.path.dirname(__file__), "bench-rtsp.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def say(text):
    print(text, flush=True)


def port_pair(host="127.0.0.1"):
    """An even RTP port and the RTCP port above it."""
    for _ in range(64):
        rtp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rtp.bind((host, 0))
        own = rtp.getsockname()[1]
        if own % 2 == 0:
            rtcp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                rtcp.bind((host, own + 1))
                return rtp, rtcp
            except OSError:
                rtcp.close()
        rtp.close()
    raise RuntimeError("no even/odd port pair")


def watch_rtcp(sock, label):
    while True:
        try:
            data = sock.recv(2048)
        except OSError:
            return
        if len(data) >= 2 and data[1] == 201:
            say(label)


def with_ssrc(packet, ssrc):
    return packet[:8] + ssrc.to_bytes(4, "big") + packet[12:]


def bye(ssrc):
    return bytes([0x81, 203, 0, 1]) + ssrc.to_bytes(4, "big")


class Session(threading.Thread):
    def __init__(self, server, connection, number):
        super().__init__(daemon=True)
        self.server, self.connection, self.number = server, connection, number
        self.lock = threading.Lock()
        self.client = None
        self.udp = None
        self.playing = False

    def write(self, data):
        with self.lock:
            self.connection.sendall(data)

    def interleave(self, packet, channel=0):
        self.write(b"$" + bytes([channel]) + len(packet).to_bytes(2, "big") + packet)

    def run(self):
        buffer = b""
        try:
            while True:
                data = self.connection.recv(65536)
                if not data:
                    return
                buffer += data
                while b"\r\n\r\n" in buffer:
                    head, buffer = buffer.split(b"\r\n\r\n", 1)
                    self.answer(head.decode(errors="replace"))
        except OSError:
            return

    def answer(self, head):
        args, mode = self.server.args, self.server.args.mode
        lines = head.split("\r\n")
        method = lines[0].split()[0]
        headers = {}
        for line in lines[1:]:
            if ": " in line:
                name, value = line.split(": ", 1)
                headers[name.lower()] = value
        cseq = headers.get("cseq", "0")
        if "authorization" in headers:
            say("auth " + headers["authorization"].split()[0].lower())
        if self.playing:
            say("keepalive")
            if mode == "burst":
                return None
        if mode == "redirect" and method in ("OPTIONS", "DESCRIBE"):
            location = "rtsp://127.0.0.1:%d/cam" % args.port if args.location == "SELF" else args.location
            return self.reply(cseq, "302 Moved Temporarily", "Location: %s\r\n" % location)
        if mode.startswith("auth-") and not self.authorized(headers.get("authorization", "")):
            say("401")
            return self.reply(cseq, "401 Unauthorized", "".join("WWW-Authenticate: %s\r\n" % c for c in self.challenges()))
        if method == "OPTIONS":
            return self.reply(cseq, "200 OK", "Public: OPTIONS, DESCRIBE, SETUP, PLAY, GET_PARAMETER, TEARDOWN\r\n")
        if method == "DESCRIBE":
            body = self.server.sdp
            return self.reply(cseq, "200 OK", "Content-Type: application/sdp\r\nContent-Length: %d\r\n" % len(body), body)
        if method == "SETUP":
            transport = headers.get("transport", "")
            say("setup " + ("tcp" if "TCP" in transport.upper() else "udp"))
            if "TCP" in transport.upper():
                if mode == "tcp-461":
                    return self.reply(cseq, "461 Unsupported Transport", "")
                return self.reply(cseq, "200 OK", "Session: 4242;timeout=%d\r\nTransport: RTP/AVP/TCP;unicast;interleaved=0-1\r\n"
                                  % args.session_timeout)
            port = int(transport.split("client_port=")[1].split("-")[0].split(";")[0])
            self.client = ("127.0.0.1", port)
            say("client-port %d" % port)
            self.udp = self.server.pair()
            own = self.udp[0].getsockname()[1]
            source = ";source=%s" % args.source if args.source else ""
            if mode == "no-server-port":
                return self.reply(cseq, "200 OK", "Session: 4242;timeout=60\r\nTransport: RTP/AVP;unicast;client_port=%d-%d\r\n"
                                  % (port, port + 1))
            return self.reply(cseq, "200 OK", "Session: 4242;timeout=60\r\nTransport: RTP/AVP;unicast;client_port=%d-%d;server_port=%d-%d%s\r\n"
                              % (port, port + 1, own, own + 1, source))
        if method == "PLAY":
            self.reply(cseq, "200 OK", "Session: 4242\r\n")
            self.playing = True
            say("playing %d" % self.number)
            threading.Thread(target=self.stream, daemon=True).start()
            return None
        return self.reply(cseq, "200 OK", "Session: 4242\r\n")

    def reply(self, cseq, status, headers, body=""):
        self.write(("RTSP/1.0 %s\r\nCSeq: %s\r\n%s\r\n%s" % (status, cseq, headers, body)).encode())

    def challenges(self):
        mode = self.server.args.mode
        digest = 'Digest realm="cam", nonce="%s"' % os.urandom(8).hex()
        if mode == "auth-basic" or (mode == "auth-downgrade" and self.number > 1):
            return ['Basic realm="cam"']
        if mode == "auth-sha256":
            return [digest + ", algorithm=SHA-256", 'Basic realm="cam"']
        return [digest]

    def authorized(self, header):
        wanted = "basic" if "Basic realm=\"cam\"" in self.challenges() and self.server.args.mode != "auth-sha256" else "digest"
        return header.lower().startswith(wanted)

    def stream(self):
        args, mode = self.server.args, self.server.args.mode
        time.sleep(0.2)
        try:
            if mode == "one-frame":
                for packet in self.server.packets[0]:
                    self.interleave(packet)
                time.sleep(0.05)
                self.connection.shutdown(socket.SHUT_RDWR)
                self.connection.close()
            elif mode == "flood":
                self.flood()
            elif mode == "burst":
                if self.number == 1:
                    self.burst()
                return
            elif mode == "forge":
                self.forge()
            elif self.udp:
                frames = self.server.packets if mode != "auth-downgrade" else self.server.packets[:50]
                bench.send(self.udp[0], self.client, frames, args.fps)
                if mode == "auth-downgrade":
                    self.connection.shutdown(socket.SHUT_RDWR)
            else:
                loops = 1000 if mode == "no-params" else 1
                start = time.monotonic()
                for index in range(len(self.server.packets) * loops):
                    target = start + index / args.fps
                    time.sleep(max(0, target - time.monotonic()))
                    for packet in self.server.packets[index % len(self.server.packets)]:
                        self.interleave(packet)
                    if mode == "auth-downgrade" and index == 50:
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
        except OSError:
            return
        say("done")

    def burst(self):
        """The clip --loops times, unpaced; each loop's sequence numbers and timestamps follow the last one's."""
        frames, sequence = self.server.packets, 0
        for loop in range(self.server.args.loops):
            shift = loop * len(frames) * 90000 // self.server.args.fps
            for frame in frames:
                for packet in frame:
                    timestamp = (int.from_bytes(packet[4:8], "big") + shift) & 0xFFFFFFFF
                    self.interleave(packet[:2] + (sequence & 0xFFFF).to_bytes(2, "big") + timestamp.to_bytes(4, "big") + packet[8:])
                    sequence += 1
        say("burst sent %d" % sequence)
        time.sleep(0.5)
        self.connection.shutdown(socket.SHUT_RDWR)
        self.connection.close()

    def flood(self):
        """Sixteen random 64 KiB frames, prepared once: the flood is as fast as the socket, not as os.urandom."""
        garbage = [os.urandom(65000) for _ in range(16)]
        sequence = 0
        while True:
            payload = garbage[sequence % 16]
            if self.server.args.flood == "rtp":
                payload = bytes([0x80, 96]) + (sequence & 0xFFFF).to_bytes(2, "big") \
                    + (sequence * 3000 & 0xFFFFFFFF).to_bytes(4, "big") + b"FLUD" + payload[12:]
            sequence += 1
            self.interleave(payload)

    def forge(self):
        """The camera's frames; from the camera's own port, once its SSRC is known, --forge's frame before each with
        another SSRC; a BYE for another SSRC from its RTCP port a second in; its own BYE at the end. (The attacker on
        another port, as another user, is scripts/rtsp-udp-attacker.py.)"""
        args = self.server.args
        own_rtp, own_rtcp = self.udp
        rtcp_client = (self.client[0], self.client[1] + 1)
        start = time.monotonic()
        for index, frame in enumerate(self.server.packets):
            time.sleep(max(0, start + index / args.fps - time.monotonic()))
            for packet in self.server.forged[index] if 0 < index < len(self.server.forged) else []:
                own_rtp.sendto(with_ssrc(packet, 0x4556494D), self.client)
            if index == 25:
                own_rtcp.sendto(bye(0x4556494C), rtcp_client)
            for packet in frame:
                own_rtp.sendto(packet, self.client)
        time.sleep(1.5)
        own_rtcp.sendto(bye(0x5354524D), rtcp_client)


class Server:
    def __init__(self, args):
        self.args = args
        frames = bench.access_units(open(args.stream, "rb").read())
        if args.mode == "no-params":
            frames = [[unit for unit in frame if unit[0] & 0x1F not in (7, 8)] for frame in frames]
        self.packets = bench.packetize(frames, args.fps)
        self.forged = bench.packetize(bench.access_units(open(args.forge, "rb").read()), args.fps) if args.forge else []
        self.sdp = ("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=hostile\r\nt=0 0\r\na=control:*\r\nm=video 0 RTP/AVP 96\r\n"
                    "a=rtpmap:96 H264/90000\r\na=fmtp:96 packetization-mode=1\r\na=control:video\r\n")
        self.listener = socket.create_server(("127.0.0.1", args.port))
        self.sessions = 0

    def pair(self):
        rtp, rtcp = port_pair()
        threading.Thread(target=watch_rtcp, args=(rtcp, "rtcp-rr"), daemon=True).start()
        if self.args.source:
            try:
                diverted = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                diverted.bind((self.args.source, rtp.getsockname()[1] + 1))
                threading.Thread(target=watch_rtcp, args=(diverted, "diverted-rtcp"), daemon=True).start()
            except OSError:
                say("cannot bind %s" % self.args.source)
        return rtp, rtcp

    def serve(self):
        say("ready")
        while True:
            connection, _ = self.listener.accept()
            self.sessions += 1
            Session(self, connection, self.sessions).start()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--stream", required=True, help="Annex B H.264")
    parser.add_argument("--mode", required=True)
    parser.add_argument("--fps", type=int, default=25)
    parser.add_argument("--forge", help="forge mode: the attacker's Annex B H.264")
    parser.add_argument("--source", help="forge mode: the source= the SETUP answer names")
    parser.add_argument("--location", help="redirect mode: where to")
    parser.add_argument("--flood", choices=["garbage", "rtp"], default="garbage")
    parser.add_argument("--loops", type=int, default=8, help="burst mode: times the clip is sent")
    parser.add_argument("--session-timeout", type=int, default=60, help="the Session header's timeout (keep-alives at half)")
    Server(parser.parse_args()).serve()


if __name__ == "__main__":
    main()
