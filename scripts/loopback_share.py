"""Browser to browser in one page of Chromium, the yardstick the benchmarks measure the daemon against: the page
captures a camera (Chromium's fake one, at once) or the screen (after a click on its button, a user gesture) and
sends it from one RTCPeerConnection to a second one in the same page (Chromium's own receiver and transport-cc),
H.264 first, with up to `max_bitrate` for the encoder. Once a second it keeps getStats' figures in
window.shareHistory, in the fields the share page keeps (`STATISTICS_FUNCTION`, which chromium-share.py uses too).
With `clock`, the receiving side reads scripts/screen_clock.py's clock from every frame it presents
(requestVideoFrameCallback): the time drawn, and when the frame is expected on the display and was presented.
Imported by bench-share-bitrate.py and real-screen-share.py; not a command.
"""
import argparse
import http.server
import json
import importlib.util
import os
import socket
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("chromium_share", os.path.join(ROOT, "scripts/chromium-share.py"))
chromium_share = importlib.util.module_from_spec(spec)
spec.loader.exec_module(chromium_share)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import screen_clock  # noqa: E402

PAGE = """<!doctype html><meta charset="utf-8"><title>browser to browser</title>
<p id="status"></p><button id="share" style="font-size:24px;margin:40px">Share</button><video id="seen" autoplay muted width="320"></video>
<script>
STATISTICS_FUNCTION
CLOCK_FUNCTION
window.shareHistory = [];
window.glass = [];
function watchClock(video) {
  const step = (now, frame) => {
    const drawn = readClock(video);
    if (drawn !== null) window.glass.push([drawn, clockUnits(performance.timeOrigin + frame.expectedDisplayTime),
                                           clockUnits(performance.timeOrigin + frame.presentationTime)]);
    if (window.glass.length < 20000) video.requestVideoFrameCallback(step);
  };
  video.requestVideoFrameCallback(step);
}
async function share() {
  const media = SCREEN
    ? await navigator.mediaDevices.getDisplayMedia({ video: { frameRate: 30 }, audio: false })
    : await navigator.mediaDevices.getUserMedia({ video: { frameRate: 30, width: { ideal: 1280 }, height: { ideal: 720 } } });
  const track = media.getVideoTracks()[0];
  track.contentHint = SCREEN ? 'detail' : 'motion';
  const sender = new RTCPeerConnection();
  const transceiver = sender.addTransceiver(track, { direction: 'sendonly', sendEncodings: [{ maxBitrate: MAX_BITRATE }] });
  const codecs = RTCRtpSender.getCapabilities('video').codecs.slice()
    .sort((a, b) => (b.mimeType.toLowerCase() === 'video/h264') - (a.mimeType.toLowerCase() === 'video/h264'));
  transceiver.setCodecPreferences(codecs);
  if (WHIP_URL) {
    // Another stack's WHIP endpoint (scripts/whip-receiver.py): the offer once it holds every candidate.
    await sender.setLocalDescription(await sender.createOffer());
    await new Promise(done => {
      if (sender.iceGatheringState === 'complete') return done();
      sender.addEventListener('icegatheringstatechange', () => sender.iceGatheringState === 'complete' && done());
    });
    const response = await fetch(WHIP_URL, { method: 'POST', headers: { 'Content-Type': 'application/sdp' }, body: sender.localDescription.sdp });
    await sender.setRemoteDescription({ type: 'answer', sdp: await response.text() });
  } else {
    const receiver = new RTCPeerConnection();
    sender.onicecandidate = e => e.candidate && receiver.addIceCandidate(e.candidate);
    receiver.onicecandidate = e => e.candidate && sender.addIceCandidate(e.candidate);
    receiver.ontrack = e => {
      const seen = document.getElementById('seen');
      seen.srcObject = new MediaStream([e.track]);
      if (typeof readClock === 'function') watchClock(seen);
    };
    await sender.setLocalDescription(await sender.createOffer());
    await receiver.setRemoteDescription(sender.localDescription);
    await receiver.setLocalDescription(await receiver.createAnswer());
    await sender.setRemoteDescription(receiver.localDescription);
  }
  const state = {};
  setInterval(async () => {
    const entry = await shareStatistics(sender, state);
    if (entry) window.shareHistory.push(entry);
  }, 1000);
}
if (SCREEN) document.getElementById('share').onclick = share; else share();
</script>
"""


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve(text):
    """An HTTP server on loopback answering every GET with `text` (HTML), on a thread; (server, URL)."""
    body = text.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *arguments):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def share(chromium, profile, log, seconds, max_bitrate, clip=None, display=None, window_size="1280,900", clock=False,
          whip_url=None):
    """Shares the fake camera playing `clip` (headless), or the screen of X `display` (clicked through xdotool),
    for `seconds` from the first statistics; {"clicked_ns": … or None, "history": the page's seconds}, and with
    `clock` "glass": [[drawn, expected on the display, presented], …] in clock units for every frame presented.
    With `whip_url`, the page sends to that WHIP endpoint (another stack) instead of a receiver of its own."""
    screen = display is not None
    page_text = (PAGE.replace("STATISTICS_FUNCTION", chromium_share.STATISTICS_FUNCTION)
                 .replace("CLOCK_FUNCTION", screen_clock.READ_FUNCTION if clock else "")
                 .replace("WHIP_URL", json.dumps(whip_url or ""))
                 .replace("SCREEN", "true" if screen else "false").replace("MAX_BITRATE", str(max_bitrate)))
    server, url = serve(page_text)
    if screen:
        os.environ["DISPLAY"] = display
    arguments = argparse.Namespace(chromium=chromium, profile=profile, window_size=window_size, clip=clip,
                                   display=display, trust_spki=None)
    browser = chromium_share.DevTools(chromium_share.chromium_arguments(arguments), log)
    try:
        page = chromium_share.Page(browser, url, display=display)
        clicked = page.click("share") if screen else None
        page.wait_for("window.shareHistory.length > 0", "no statistics", timeout=30)
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            browser.pump(0.25)
        result = {"clicked_ns": clicked, "history": page.evaluate("window.shareHistory")}
        if clock:
            result["glass"] = page.evaluate("window.glass")
        return result
    finally:
        browser.close()
        server.shutdown()
