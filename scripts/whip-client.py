#!/usr/bin/python3
"""A WHIP client (RFC 9725) on GStreamer's webrtcbin, for the tests: it encodes a test pattern with x264, keeps
the exact H.264 it sends in --record (Annex B) for the reference, and pushes it to a WHIP endpoint.

The encoder is held behind a valve until the peer connection is up: every frame recorded is a frame sent, and the
first is an IDR. Ends after --frames frames (then DELETE), or on SIGTERM. Prints one line per step to stderr; the
last line on stdout is `sent N frames` or `failed: REASON` (among them the server's DTLS close_notify: it ended the
session).

  whip-client.py URL --token TOKEN --record sent.h264 [--frames 150] [--size 640x360] [--fps 30]

--change-ssrc-at N gives the RTP stream a new SSRC once N frames are encoded (as a restarted encoder does; here
the pictures go on without a keyframe, the sequence numbers continue, and webrtcbin's RTX picks a new repair SSRC):
the payloader takes the collision event an RTP session sends when another source has its SSRC.

--wrong-fingerprint posts an offer whose a=fingerprint is not that of the certificate webrtcbin then presents (a
man in the middle's offer, as the receiver sees it): the receiver must refuse the DTLS handshake.
"""
import argparse
import signal
import sys
import time

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstWebRTC", "1.0")
gi.require_version("GstSdp", "1.0")
from gi.repository import GLib, Gst, GstSdp, GstWebRTC  # noqa: E402

import whip_http  # scripts/whip_http.py, beside this file


def say(text):
    print(f"whip-client: {text}", file=sys.stderr, flush=True)


class Client:
    def __init__(self, options):
        self.options = options
        self.loop = GLib.MainLoop()
        self.location = None
        self.result = "failed: did not finish"
        self.frames = 0
        # Buffers the recording's filesink has been handed: the tee gives it each frame counted in `frames`.
        self.recorded = 0
        self.stopped = False
        width, height = options.size.split("x")
        # key-int-max: a keyframe each second, as a screen-share encoder has; no B-frames: WebRTC senders have none.
        if options.codec == "h265":
            # RFC 7798 over WebRTC, as Chromium 136+ and Safari send it where they have a hardware encoder.
            encoder = (f"x265enc name=encoder tune=zerolatency speed-preset=ultrafast key-int-max={options.fps} bitrate={options.bitrate} "
                       f"option-string=bframes=0 ! video/x-h265,stream-format=byte-stream")
            payloader = "h265parse config-interval=-1 ! rtph265pay name=payloader pt=96 config-interval=-1"
        else:
            encoder = (f"x264enc name=encoder tune=zerolatency speed-preset=ultrafast key-int-max={options.fps} bframes=0 "
                       f"bitrate={options.bitrate} ! video/x-h264,profile=constrained-baseline,stream-format=byte-stream")
            payloader = "h264parse config-interval=-1 ! rtph264pay name=payloader pt=96 config-interval=-1 aggregate-mode=zero-latency"
        description = (
            f"videotestsrc is-live=true pattern={options.pattern} ! video/x-raw,width={width},height={height},framerate={options.fps}/1,format=I420 "
            f"! valve name=gate drop=true ! {encoder} "
            f"! identity name=counter ! tee name=split "
            f"split. ! queue ! filesink name=recording location={options.record} sync=false "
            f"split. ! queue ! {payloader} "
            f"! application/x-rtp,media=video,encoding-name={options.codec.upper()},payload=96,clock-rate=90000 "
            f"! webrtcbin name=peer bundle-policy=max-bundle"
        )
        self.pipeline = Gst.parse_launch(description)
        self.peer = self.pipeline.get_by_name("peer")
        self.gate = self.pipeline.get_by_name("gate")
        # libnice leaves loopback out of its host candidates (and pairs none with a loopback remote): name the
        # local address to gather on, as a client on the receiving machine itself would use.
        # (The wrapper is kept: pygobject drops the property's reference with it, and webrtcbin's agent with that.)
        self.ice = self.peer.get_property("ice-agent")
        if options.local_address:
            self.ice.emit("add-local-ip-address", options.local_address)
        self.peer.connect("notify::ice-gathering-state", self.on_gathering)
        self.peer.connect("notify::connection-state", self.on_connection)
        self.pipeline.get_by_name("counter").connect("handoff", self.on_frame)
        self.pipeline.get_by_name("recording").get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, self.on_recorded)
        self.payloader = self.pipeline.get_by_name("payloader")
        bus = self.pipeline.get_bus()
        bus.add_signal_watch()
        bus.connect("message::error", self.on_error)

    def run(self):
        self.pipeline.set_state(Gst.State.PLAYING)
        GLib.idle_add(self.create_offer)
        GLib.timeout_add_seconds(self.options.timeout, self.on_timeout)
        self.loop.run()
        self.pipeline.set_state(Gst.State.NULL)
        self.delete()
        print(self.result, flush=True)
        return 0 if self.result.startswith("sent") else 1

    def stop(self, result):
        if self.stopped:
            return False
        self.stopped = True
        self.result = result
        self.loop.quit()

    def on_error(self, _bus, message):
        error, debug = message.parse_error()
        self.stop(" ".join(f"failed: {error.message} ({debug})".split()))  # one line: the last line is the result

    def on_timeout(self):
        self.stop(f"failed: timed out after {self.frames} frames")
        return False

    def create_offer(self):
        # The valve holds every buffer and event back until the connection is up, so the caps come from the
        # transceiver's codec preferences, not from the stream.
        transceiver = self.peer.emit("get-transceiver", 0)
        transceiver.set_property("direction", GstWebRTC.WebRTCRTPTransceiverDirection.SENDONLY)
        # NACK with RTX (RFC 4588): webrtcbin resends lost packets only through an RTX stream.
        transceiver.set_property("do-nack", not self.options.no_nack)
        transceiver.set_property("codec-preferences", Gst.Caps.from_string(
            f"application/x-rtp,media=video,encoding-name={self.options.codec.upper()},payload=96,clock-rate=90000"))
        promise = Gst.Promise.new_with_change_func(self.on_offer_created, None)
        self.peer.emit("create-offer", None, promise)
        return False

    def on_offer_created(self, promise, _data):
        reply = promise.get_reply()
        offer = reply.get_value("offer") if reply is not None and reply.has_field("offer") else None
        if offer is None:
            GLib.idle_add(self.stop, f"failed: no offer ({reply.to_string() if reply is not None else 'no reply'})")
            return
        self.peer.emit("set-local-description", offer, Gst.Promise.new())

    def on_gathering(self, element, _spec):
        # Not trickle: the offer goes out once it holds every candidate.
        if element.get_property("ice-gathering-state") == GstWebRTC.WebRTCICEGatheringState.COMPLETE:
            GLib.idle_add(self.post_offer)

    def post_offer(self):
        offer = self.peer.get_property("local-description").sdp.as_text()
        if self.options.wrong_fingerprint:
            offer = wrong_fingerprint(offer)
        try:
            answer, self.location = whip_http.post_offer(self.options.url, self.options.token, offer, say)
        except whip_http.WHIPFailure as failure:
            self.stop(f"failed: {failure}")
            return False
        if self.options.media_via:
            # Media through a relay in front of the daemon (a lossy path in the tests): its port in place of the
            # answer's.
            port = self.options.media_via
            lines = []
            for line in answer.split("\r\n"):
                if line.startswith("a=candidate:"):
                    fields = line.split(" ")
                    fields[5] = port
                    line = " ".join(fields)
                elif line.startswith("m=video "):
                    fields = line.split(" ")
                    fields[1] = port
                    line = " ".join(fields)
                lines.append(line)
            answer = "\r\n".join(lines)
        if self.options.verbose:
            say("offer:\n" + offer + "\nanswer:\n" + answer)
        _, message = GstSdp.SDPMessage.new_from_text(answer)
        description = GstWebRTC.WebRTCSessionDescription.new(GstWebRTC.WebRTCSDPType.ANSWER, message)
        self.peer.emit("set-remote-description", description, Gst.Promise.new())
        return False

    def on_connection(self, element, _spec):
        state = element.get_property("connection-state")
        say(f"connection {state.value_nick}")
        if state == GstWebRTC.WebRTCPeerConnectionState.CONNECTED:
            self.gate.set_property("drop", False)
            # The peer connection's state ignores a DTLS close_notify; the DTLS transport's shows it.
            transport = self.peer.emit("get-transceiver", 0).get_property("sender").get_property("transport")
            transport.connect("notify::state", self.on_dtls_state)
        elif state == GstWebRTC.WebRTCPeerConnectionState.FAILED:
            GLib.idle_add(self.stop, "failed: the peer connection failed")

    def on_dtls_state(self, transport, _spec):
        # Closed while running: the server's close_notify (it ended the session). Stopping closes it too.
        if transport.get_property("state") == GstWebRTC.WebRTCDTLSTransportState.CLOSED and not self.stopped:
            say("the server closed the DTLS association")
            GLib.idle_add(self.stop, f"failed: the server closed the DTLS association after {self.frames} frames")

    def on_frame(self, _identity, _buffer):
        self.frames += 1
        if self.frames == self.options.change_ssrc_at:
            self.change_ssrc()
        if self.options.frames and self.frames == self.options.frames:
            GLib.timeout_add(self.options.linger_ms, self.close_gate, f"sent {self.frames} frames")

    def on_recorded(self, _pad, _info):
        self.recorded += 1
        return Gst.PadProbeReturn.OK

    def close_gate(self, result):
        # No frame enters the encoder any more; the pipeline stops once the recording has every frame the tee
        # passed on (stopping at once could leave the last frame sent but not recorded: a frame the receiver got
        # that the reference lacks). A recording still behind after 10 s is a failure, not a shorter reference.
        self.gate.set_property("drop", True)
        deadline = time.monotonic() + 10

        def drained():
            if self.recorded >= self.frames:
                self.stop(result)
            elif time.monotonic() > deadline:
                self.stop(f"failed: {self.recorded} of {self.frames} frames recorded 10 s after the last")
            else:
                return True
            return False
        GLib.timeout_add(20, drained)
        return False

    def change_ssrc(self):
        _, ssrc = self.payloader.get_property("stats").get_uint("ssrc")
        collision = Gst.Structure.new_from_string(f"GstRTPCollision, ssrc=(uint){ssrc}")
        self.payloader.get_static_pad("src").send_event(Gst.Event.new_custom(Gst.EventType.CUSTOM_UPSTREAM, collision))
        _, new = self.payloader.get_property("stats").get_uint("ssrc")
        say(f"SSRC changed from {ssrc} to {new} at frame {self.frames}")

    def delete(self):
        if self.location and not self.options.keep:
            whip_http.delete_session(self.options.url, self.options.token, self.location, say)


def wrong_fingerprint(offer):
    """The offer with every sha-256 fingerprint's bytes inverted: well-formed, never the certificate's."""
    lines = []
    for line in offer.split("\r\n"):
        if line.startswith("a=fingerprint:sha-256 "):
            digest = line.split(" ", 1)[1].split(":")
            line = "a=fingerprint:sha-256 " + ":".join(f"{0xff ^ int(byte, 16):02X}" for byte in digest)
        lines.append(line)
    return "\r\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--token", default="")
    parser.add_argument("--record", required=True)
    parser.add_argument("--frames", type=int, default=150)
    parser.add_argument("--size", default="640x360")
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--codec", choices=["h264", "h265"], default="h264", help="x264 and RFC 6184, or x265 and RFC 7798")
    parser.add_argument("--bitrate", type=int, default=2000, help="kbit/s")
    parser.add_argument("--pattern", default="smpte")
    parser.add_argument("--timeout", type=int, default=60)
    parser.add_argument("--linger-ms", type=int, default=500, help="after the last frame, before DELETE")
    parser.add_argument("--local-address", default="127.0.0.1", help="the address ICE gathers on ('' for every interface)")
    parser.add_argument("--media-via", help="send media to this port of the answer's address instead (a relay)")
    parser.add_argument("--no-nack", action="store_true", help="offer no NACK/RTX")
    parser.add_argument("--change-ssrc-at", type=int, default=0, metavar="FRAME", help="switch to a new SSRC at this frame")
    parser.add_argument("--verbose", action="store_true", help="print the offer and the answer")
    parser.add_argument("--keep", action="store_true", help="leave without DELETE (a client that vanishes)")
    parser.add_argument("--wrong-fingerprint", action="store_true", help="post an offer whose fingerprint is not our certificate's")
    options = parser.parse_args()
    Gst.init(None)
    client = Client(options)
    signal.signal(signal.SIGTERM, lambda *_: GLib.idle_add(client.stop, f"sent {client.frames} frames"))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # a parent's blocked mask is inherited
    sys.exit(client.run())


if __name__ == "__main__":
    main()
