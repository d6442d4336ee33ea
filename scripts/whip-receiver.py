#!/usr/bin/python3
"""A WHIP endpoint (RFC 9725) of another WebRTC stack, for one session: what a person could otherwise put behind
a browser's share to receive a screen. aiortc (its jitter buffer, PyAV's libavcodec decoder) or GStreamer's
webrtcbin (rtpjitterbuffer, avdec_h264), each as it comes, receive-only. Every decoded 1920-wide frame's clock
(scripts/screen-clock.c, drawn on the shared screen) is read when the stack hands the frame out: drawn → decoded
and handed to the application, the counterpart of drawn → readable in streamrecvd's ring.

Takes POST /whip/ANYTHING (any token; CORS for a page of another origin) and DELETE; ends on SIGTERM or after
--seconds, printing one JSON line: {"stack", "frames", "glass_ms": [...]}. Not run by the tests; used by
scripts/real-screen-share.py --receiver aiortc|webrtcbin.

  whip-receiver.py --stack aiortc|webrtcbin --port PORT [--seconds 120]
"""
import argparse
import asyncio
import http.server
import json
import os
import signal
import sys
import threading
import time

import numpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import screen_clock  # noqa: E402


class Frames:
    """Decoded frames as they come out of a stack, and the clock read from each."""

    def __init__(self):
        self.count, self.glass = 0, []
        self.lock = threading.Lock()

    def note(self, luma):
        seen = time.time_ns()
        drawn = screen_clock.read(luma) if luma.shape[1] >= screen_clock.X + screen_clock.BITS * screen_clock.BLOCK else None
        with self.lock:
            self.count += 1
            if drawn is not None:
                self.glass.append(screen_clock.latency_ms(screen_clock.now_units(seen), drawn))


class AiortcStack:
    def __init__(self, frames):
        from aiortc import RTCPeerConnection, RTCSessionDescription  # noqa: F401 (imported where used)
        self.frames = frames
        self.loop = asyncio.new_event_loop()
        self.peer = None
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def answer(self, offer):
        return asyncio.run_coroutine_threadsafe(self._answer(offer), self.loop).result(30)

    async def _answer(self, offer):
        from aiortc import RTCPeerConnection, RTCSessionDescription
        self.peer = RTCPeerConnection()

        @self.peer.on("track")
        def on_track(track):
            if track.kind == "video":
                asyncio.ensure_future(self.consume(track))

        await self.peer.setRemoteDescription(RTCSessionDescription(sdp=offer, type="offer"))
        # Not trickle: setLocalDescription returns once gathering is complete.
        await self.peer.setLocalDescription(await self.peer.createAnswer())
        return self.peer.localDescription.sdp

    async def consume(self, track):
        from aiortc.mediastreams import MediaStreamError
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            plane = frame.planes[0]
            luma = numpy.frombuffer(plane, dtype=numpy.uint8).reshape(frame.height, plane.line_size)[:, :frame.width]
            self.frames.note(luma)

    def close(self):
        if self.peer is not None:
            asyncio.run_coroutine_threadsafe(self.peer.close(), self.loop).result(10)


class WebRTCBinStack:
    def __init__(self, frames):
        import gi
        gi.require_version("Gst", "1.0")
        gi.require_version("GstWebRTC", "1.0")
        gi.require_version("GstSdp", "1.0")
        from gi.repository import GLib, Gst, GstSdp, GstWebRTC
        Gst.init(None)
        self.Gst, self.GstSdp, self.GstWebRTC, self.GLib = Gst, GstSdp, GstWebRTC, GLib
        self.frames = frames
        self.pipeline = Gst.Pipeline.new("receiver")
        self.peer = Gst.ElementFactory.make("webrtcbin", "peer")
        self.peer.set_property("bundle-policy", GstWebRTC.WebRTCBundlePolicy.MAX_BUNDLE)
        self.pipeline.add(self.peer)
        self.peer.connect("pad-added", self.on_pad)
        self.peer.connect("notify::ice-gathering-state", self.on_gathering)
        self.answered = threading.Event()
        self.loop = GLib.MainLoop()
        self.pipeline.set_state(Gst.State.PLAYING)
        threading.Thread(target=self.loop.run, daemon=True).start()

    def answer(self, offer):
        _, message = self.GstSdp.SDPMessage.new_from_text(offer)
        description = self.GstWebRTC.WebRTCSessionDescription.new(self.GstWebRTC.WebRTCSDPType.OFFER, message)
        self.GLib.idle_add(self.set_offer, description)
        if not self.answered.wait(30):
            raise RuntimeError("webrtcbin made no answer")
        return self.peer.get_property("local-description").sdp.as_text()

    def set_offer(self, description):
        promise = self.Gst.Promise.new_with_change_func(self.on_offer_set, None)
        self.peer.emit("set-remote-description", description, promise)
        return False

    def on_offer_set(self, _promise, _data):
        self.create_answer(1)

    def on_answer_created(self, promise, attempt):
        reply = promise.get_reply()
        answer = reply.get_value("answer") if reply is not None and reply.has_field("answer") else None
        if answer is None:
            # webrtcbin 1.22 now and then makes no answer right after taking an offer: said, and asked again.
            print(f"whip-receiver: no answer ({reply.to_string() if reply is not None else 'no reply'}), attempt {attempt}",
                  file=sys.stderr, flush=True)
            if attempt < 5:
                self.GLib.timeout_add(200, self.create_answer, attempt + 1)
            return
        self.peer.emit("set-local-description", answer, self.Gst.Promise.new())

    def create_answer(self, attempt):
        self.peer.emit("create-answer", None, self.Gst.Promise.new_with_change_func(self.on_answer_created, attempt))
        return False

    def on_gathering(self, element, _spec):
        if element.get_property("ice-gathering-state") == self.GstWebRTC.WebRTCICEGatheringState.COMPLETE:
            self.answered.set()

    def on_pad(self, _element, pad):
        if pad.get_direction() != self.Gst.PadDirection.SRC:
            return
        Gst = self.Gst
        chain = Gst.parse_bin_from_description(
            "rtph264depay ! h264parse ! avdec_h264 ! videoconvert ! video/x-raw,format=I420 "
            "! appsink name=sink emit-signals=true sync=false max-buffers=2 drop=true", True)
        self.pipeline.add(chain)
        chain.sync_state_with_parent()
        pad.link(chain.get_static_pad("sink"))
        chain.get_by_name("sink").connect("new-sample", self.on_sample)

    def on_sample(self, sink):
        sample = sink.emit("pull-sample")
        structure = sample.get_caps().get_structure(0)
        width, height = structure.get_value("width"), structure.get_value("height")
        buffer = sample.get_buffer()
        ok, mapped = buffer.map(self.Gst.MapFlags.READ)
        if ok:
            try:
                # I420 with GStreamer's default stride: rows rounded up to 4 bytes.
                stride = (width + 3) // 4 * 4
                luma = numpy.frombuffer(mapped.data, dtype=numpy.uint8, count=stride * height).reshape(height, stride)[:, :width]
                self.frames.note(luma)
            finally:
                buffer.unmap(mapped)
        return self.Gst.FlowReturn.OK

    def close(self):
        self.pipeline.set_state(self.Gst.State.NULL)
        self.loop.quit()


def serve(stack, port):
    class Handler(http.server.BaseHTTPRequestHandler):
        def cors(self):
            self.send_header("Access-Control-Allow-Origin", "*")
            self.send_header("Access-Control-Allow-Headers", "content-type, authorization")
            self.send_header("Access-Control-Allow-Methods", "POST, DELETE, OPTIONS")
            self.send_header("Access-Control-Expose-Headers", "location")

        def do_OPTIONS(self):
            self.send_response(204)
            self.cors()
            self.end_headers()

        def do_POST(self):
            offer = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
            body = stack.answer(offer).encode()
            self.send_response(201)
            self.cors()
            self.send_header("Content-Type", "application/sdp")
            self.send_header("Location", "/session/1")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_DELETE(self):
            self.send_response(200)
            self.cors()
            self.end_headers()

        def log_message(self, *arguments):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", choices=["aiortc", "webrtcbin"], required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--seconds", type=float, default=120)
    options = parser.parse_args()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # a parent's blocked mask is inherited
    frames = Frames()
    stack = AiortcStack(frames) if options.stack == "aiortc" else WebRTCBinStack(frames)
    server = serve(stack, options.port)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    print("listening", flush=True)
    done.wait(options.seconds)
    server.shutdown()
    stack.close()
    with frames.lock:
        print(json.dumps({"stack": options.stack, "frames": frames.count, "glass_ms": frames.glass}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
