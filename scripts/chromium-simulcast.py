#!/usr/bin/python3
"""Chromium sending simulcast H.264 over WHIP, as OBS 32 and a browser with `sendEncodings` rids do, for the tests:
headless Chromium's fake camera plays a y4m clip; a script in the daemon's own page (same origin) offers three
layers (rids h, m, l: full size, half, quarter; `a=simulcast:send`, the RID header extensions), posts the offer to
the stream's WHIP URL with the token, applies the answer, and sends for --seconds. Then DELETE.

Prints one JSON object as its last line: whether the offer had simulcast and the answer took it, the layers
Chromium sent (getStats' outbound-rtp: rid, size, bytes), the WHIP POST's status. `failed: REASON` on failure.

  chromium-simulcast.py URL --stream NAME --token-file PATH --clip CLIP.y4m --profile DIR [--seconds 6]
"""
import argparse
import importlib.util
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("chromium_share", os.path.join(ROOT, "scripts/chromium-share.py"))
chromium_share = importlib.util.module_from_spec(spec)
spec.loader.exec_module(chromium_share)

# In the share page's origin: one RTCPeerConnection, three layers of the fake camera, H.264 first; the offer posted
# as a WHIP client does (all candidates in it). Resolves to what the test needs to know, never the token.
SEND = """(async (whip, token) => {
  const media = await navigator.mediaDevices.getUserMedia({ video: { width: 1280, height: 720, frameRate: 30 } });
  const pc = new RTCPeerConnection({ bundlePolicy: 'max-bundle' });
  window.simulcastPeer = pc;
  const transceiver = pc.addTransceiver(media.getVideoTracks()[0], { direction: 'sendonly', sendEncodings: [
    { rid: 'h' }, { rid: 'm', scaleResolutionDownBy: 2 }, { rid: 'l', scaleResolutionDownBy: 4 }] });
  const codecs = RTCRtpSender.getCapabilities('video').codecs.slice()
    .sort((a, b) => (b.mimeType.toLowerCase() === 'video/h264') - (a.mimeType.toLowerCase() === 'video/h264'));
  transceiver.setCodecPreferences(codecs);
  await pc.setLocalDescription(await pc.createOffer());
  await new Promise(resolve => {
    if (pc.iceGatheringState === 'complete') return resolve();
    pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && resolve());
    setTimeout(resolve, 2000);
  });
  const offer = pc.localDescription.sdp;
  const response = await fetch(whip, { method: 'POST', body: offer,
    headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/sdp' } });
  const answer = await response.text();
  window.simulcastLocation = new URL(response.headers.get('Location') || whip, document.baseURI).href;
  if (response.status !== 201) return { status: response.status, body: answer };
  await pc.setRemoteDescription({ type: 'answer', sdp: answer });
  return { status: 201, offerSimulcast: /a=simulcast:send/.test(offer), offerRids: (offer.match(/a=rid:\\S+ send/g) || []).length,
           answerSimulcast: /a=simulcast/.test(answer), answerRid: /rtp-stream-id/.test(answer),
           encodings: transceiver.sender.getParameters().encodings.map(e => e.rid || '') };
})"""

LAYERS = """(async () => {
  const report = await window.simulcastPeer.getStats();
  const layers = [];
  report.forEach(e => { if (e.type === 'outbound-rtp' && e.kind === 'video')
    layers.push({ rid: e.rid || '', width: e.frameWidth, height: e.frameHeight, bytesSent: e.bytesSent, ssrc: e.ssrc }); });
  return { state: window.simulcastPeer.connectionState, layers };
})()"""


def call(page, function, *arguments):
    """`function` (a JavaScript function's text) called in the page with `arguments` passed as values, so that a
    secret among them is never part of the page's text or a DevTools expression; its resolved value."""
    window = page.call("Runtime.evaluate", {"expression": "window"})["result"]["objectId"]
    answer = page.call("Runtime.callFunctionOn", {
        "functionDeclaration": function, "objectId": window, "arguments": [{"value": value} for value in arguments],
        "awaitPromise": True, "returnByValue": True}, timeout=30)
    if "exceptionDetails" in answer:
        raise chromium_share.Failure(f"the page's script failed: {answer['exceptionDetails'].get('exception', {}).get('description', '')[:300]}")
    return answer["result"].get("value")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("--stream", required=True)
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--clip", required=True)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--trust-spki")
    options = parser.parse_args()
    options.window_size, options.display = "1280,900", None
    token = open(options.token_file, encoding="utf-8").read().strip()
    browser = chromium_share.DevTools(chromium_share.chromium_arguments(options), sys.stderr)
    try:
        page = chromium_share.Page(browser, options.url)
        result = call(page, SEND, f"/whip/{options.stream}", token) or {}
        if result.get("status") != 201:
            raise chromium_share.Failure(f"the daemon answered {result.get('status')}: {result.get('body', '')[:300]}")
        page.wait_for("window.simulcastPeer.connectionState === 'connected'", "no connection", timeout=30)
        started = time.monotonic()
        while time.monotonic() - started < options.seconds:
            browser.pump(0.25)
        result["sent"] = page.evaluate(LAYERS)
        result["deleted"] = call(page, """(async token => (await fetch(window.simulcastLocation,
            { method: 'DELETE', headers: { Authorization: 'Bearer ' + token } })).status)""", token)
    except chromium_share.Failure as failure:
        print(f"failed: {failure}", flush=True)
        return 1
    finally:
        browser.close()
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
