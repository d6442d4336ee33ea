#!/usr/bin/python3
"""Drives streamrecvd's share page in Debian's headless Chromium, for the tests: Chromium's fake camera plays a
y4m clip, the page is told the stream and the token, "Share camera" is clicked with the mouse, and the page sends
the clip over WHIP as a person's browser would.

Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON messages ended by NUL on
file descriptors 3 and 4), so that nothing but Chromium and Python's standard library is needed: no driver
binary, no WebDriver package, no debugging port that another local user could reach.

Once the page says it is sharing, the script prints `sharing` on stdout and waits until --proceed-file exists (the
test reads the stream's frames meanwhile); then it waits for the page's live picture (the daemon's decoded frame),
takes a screenshot, clicks Stop (the page DELETEs the WHIP session) and prints one JSON object as its last line:
what the page showed, the WHIP requests it made with their CLOCK_MONOTONIC times, the screenshot's path.
Progress and Chromium's own output go to stderr. Exits 1 with `failed: REASON` as the last line on failure.

  chromium-share.py URL --stream NAME --token-file PATH --clip CLIP.y4m --screenshot shot.png --profile DIR \
      --proceed-file PATH
"""
import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time


def say(text):
    print(f"chromium-share: {text}", file=sys.stderr, flush=True)


class Failure(Exception):
    pass


class DevTools:
    """One Chromium process and its DevTools pipe; events are kept until someone waits for them."""

    def __init__(self, arguments, log):
        # Chromium reads commands on fd 3 and writes answers on fd 4. The pipe ends are moved above 10 first, so
        # that placing them on 3 and 4 in the child cannot overwrite one with the other.
        to_browser_read, to_browser_write = os.pipe()
        from_browser_read, from_browser_write = os.pipe()
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser_read, from_browser_write)]
        for fd in (to_browser_read, from_browser_write):
            os.close(fd)

        def place_pipes():
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.process = subprocess.Popen(arguments, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                        close_fds=False, preexec_fn=place_pipes, start_new_session=True)
        for fd in high:
            os.close(fd)
        self.writer = to_browser_write
        self.reader = from_browser_read
        self.buffer = b""
        self.events = []
        self.next_id = 0

    def _receive(self, deadline):
        """One message from Chromium, or None once the deadline has passed."""
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.reader], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.reader, 1 << 20)
            if not chunk:
                raise Failure(f"Chromium closed its DevTools pipe (exit status {self.process.poll()})")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        request = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            request["sessionId"] = session
        data = json.dumps(request).encode() + b"\0"
        while data:
            data = data[os.write(self.writer, data):]
        deadline = time.monotonic() + timeout
        while True:
            message = self._receive(deadline)
            if message is None:
                raise Failure(f"no answer to {method} in {timeout} s")
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise Failure(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def pump(self, seconds):
        """Keeps what Chromium says for `seconds` (so that its side of the pipe never fills while we wait)."""
        deadline = time.monotonic() + seconds
        while (message := self._receive(deadline)) is not None:
            if "method" in message:
                self.events.append(message)

    def wait_event(self, method, matches=lambda params: True, timeout=30):
        """The first kept or coming event `method` whose parameters match; it is taken from the kept ones."""
        deadline = time.monotonic() + timeout
        while True:
            for index, event in enumerate(self.events):
                if event["method"] == method and matches(event.get("params", {})):
                    return self.events.pop(index)["params"]
            message = self._receive(deadline)
            if message is None:
                raise Failure(f"no {method} in {timeout} s")
            if "method" in message:
                self.events.append(message)

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Failure:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, 9)
            self.process.wait()
        os.close(self.writer)
        os.close(self.reader)


class Page:
    """The share page in one tab, attached in flat mode (commands carry the session id)."""

    def __init__(self, browser, url, display=None):
        self.browser = browser
        self.display = display
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Network"):
            self.call(f"{domain}.enable")
        self.call("Page.navigate", {"url": url})
        browser.wait_event("Page.loadEventFired", lambda params: True)

    def call(self, method, params=None, timeout=30):
        return self.browser.call(method, params, session=self.session, timeout=timeout)

    def evaluate(self, expression):
        answer = self.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True})
        if "exceptionDetails" in answer:
            raise Failure(f"{expression[:80]}: {answer['exceptionDetails'].get('text')} "
                          f"{answer['exceptionDetails'].get('exception', {}).get('description', '')}")
        return answer["result"].get("value")

    def wait_for(self, expression, what, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            self.browser.pump(0.1)
        raise Failure(f"{what} within {timeout} s; the page says: {self.evaluate(TEXT_OF % 'status')!r}")

    def click(self, element_id):
        """A real mouse click at the button's centre (a user gesture, as a person's click is): on a real X screen
        through the X server (xdotool), otherwise as DevTools input. Returns CLOCK_MONOTONIC nanoseconds of the
        click."""
        x, y = self.evaluate(f"""(() => {{ const box = document.getElementById('{element_id}').getBoundingClientRect();
            return [box.x + box.width / 2, box.y + box.height / 2]; }})()""")
        if self.display:
            # Page coordinates to the screen's: the window's place, its frame's side borders and the toolbars above.
            left, top = self.evaluate("""[window.screenX + (window.outerWidth - window.innerWidth) / 2,
                                          window.screenY + window.outerHeight - window.innerHeight]""")
            subprocess.run(["xdotool", "mousemove", str(round(left + x)), str(round(top + y))], check=True, env=self.display_env())
            clicked = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            subprocess.run(["xdotool", "click", "1"], check=True, env=self.display_env())
            return clicked
        clicked = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})
        return clicked

    def type_file(self, path):
        """Types a file's text into the focused field: on a real X screen as key presses through the X server (the
        text never on a command line), otherwise as DevTools text input."""
        if self.display:
            subprocess.run(["xdotool", "type", "--delay", "2", "--file", path], check=True, env=self.display_env())
        else:
            self.call("Input.insertText", {"text": open(path, encoding="utf-8").read().strip()})

    def display_env(self):
        return dict(os.environ, DISPLAY=self.display)


TEXT_OF = "document.getElementById('%s').textContent"
# One second of a connection's statistics, in the fields of the share page's window.shareHistory: what the browser
# sends and allows itself (availableOutgoingBitrate of the selected pair), the encoder's frame rate and size, its
# mean QP over the second, what it says limits its quality, and the keyframes it encoded so far.
# `state` keeps the previous report, for the bitrate. Shared with scripts/loopback_share.py's page.
STATISTICS_FUNCTION = """async function shareStatistics(pc, state) {
  const report = await pc.getStats();
  let out, pair;
  report.forEach(entry => {
    if (entry.type === 'outbound-rtp' && entry.kind === 'video') out = entry;
    if (entry.type === 'transport' && entry.selectedCandidatePairId) pair = report.get(entry.selectedCandidatePairId);
  });
  if (!out) return null;
  const last = state.last;
  state.last = out;
  const allowed = pair && pair.availableOutgoingBitrate;
  return { time: out.timestamp, sentKbps: last && out.timestamp > last.timestamp
             ? Math.round((out.bytesSent - last.bytesSent) * 8 / (out.timestamp - last.timestamp)) : undefined,
           allowedKbps: allowed && Math.round(allowed / 1000), fps: out.framesPerSecond, width: out.frameWidth,
           height: out.frameHeight, framesEncoded: out.framesEncoded, limit: out.qualityLimitationReason,
           qp: last && out.framesEncoded > last.framesEncoded
             ? Math.round((out.qpSum - last.qpSum) / (out.framesEncoded - last.framesEncoded)) : undefined,
           keyFrames: out.keyFramesEncoded, encoder: out.encoderImplementation };
}"""
# The share page's connection (its top-level `session.pc`) read that way, so that a page of another build (a
# benchmark's baseline) is measured as this one is.
STATISTICS = "(async () => { " + STATISTICS_FUNCTION + """
  const pc = typeof session !== 'undefined' && session.pc;
  window.benchmarkState = window.benchmarkState || {};
  return pc ? await shareStatistics(pc, window.benchmarkState) : null;
})()"""
FIELDS = ["status", "sendState", "sendCodec", "sendRate", "sendFps", "sendSize", "sendLimit",
          "recvFps", "recvSize", "recvAge", "recvSequence", "recvFlags", "pictureNote"]


def chromium_arguments(options):
    arguments = [options.chromium, "--remote-debugging-pipe", f"--user-data-dir={options.profile}",
                 "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--mute-audio", f"--window-size={options.window_size}"]
    if getattr(options, "display", None):
        # A real X screen, as a person's: Chromium's own X11 capturer, the whole screen picked as a person would
        # in the picker. (The fake UI flag would make that capturer fail: "screen:0:0".)
        arguments += ["--window-position=0,0", "--auto-select-desktop-capture-source=Entire screen"]
    else:
        # The camera: a y4m file behind a fake device, granted without a prompt.
        arguments += ["--headless=new", "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                      f"--use-file-for-fake-video-capture={options.clip}"]
    arguments += [
                 # Chromium gathers no loopback ICE candidates unless told to. The tests' media port is on loopback:
                 # without this it is reached only from another interface's address (a machine with eth0), and a
                 # machine or namespace with nothing but lo never connects.
                 "--allow-loopback-in-peer-connection"]
    if options.trust_spki:
        # Trust exactly this certificate's key (a test's self-signed one), as a person's browser trusts a real CA.
        arguments.append(f"--ignore-certificate-errors-spki-list={options.trust_spki}")
    if os.geteuid() == 0:
        arguments.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    return arguments


def share(options, browser):
    token = open(options.token_file, encoding="utf-8").read().strip()
    page = Page(browser, options.url, display=options.display)
    # The stream list comes from /streams.json after the load.
    page.wait_for(f"[...document.getElementById('stream').options].some(o => o.textContent === {json.dumps(options.stream)})",
                  f"stream {options.stream} in the list")
    page.evaluate(f"""(() => {{ const select = document.getElementById('stream');
        select.value = [...select.options].find(o => o.textContent === {json.dumps(options.stream)}).value;
        select.dispatchEvent(new Event('change')); }})()""")
    page.click("token")
    page.wait_for("document.activeElement && document.activeElement.id === 'token'", "the token field did not take the focus")
    # The token file as it is, less its line break: a line break typed would be an Enter.
    typed = os.path.join(options.profile, "typed-token")
    with open(os.open(typed, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as file:
        file.write(token)
    # Keys typed through the X server reach the page a while after xdotool returns (seconds on a busy machine), and
    # a key can be lost there: after 8 s the field is cleared and typed again, three times at most.
    matches = f"document.getElementById('token').value === {json.dumps(token)}"
    try:
        for attempt in range(3):
            page.type_file(typed)
            try:
                page.wait_for(matches, "the token field did not take the typed token", timeout=8)
                break
            except Failure:
                length = page.evaluate("document.getElementById('token').value.length")
                say(f"the token field holds {length} characters of {len(token)} after typing; typing again")
                if attempt == 2:
                    raise
                page.evaluate("(() => { const field = document.getElementById('token'); field.value = ''; field.focus(); })()")
    finally:
        os.unlink(typed)
    clicked = page.click(options.share)
    page.wait_for("document.getElementById('status').textContent.startsWith('Sharing to')", "no connection", timeout=30)
    say("sharing")
    print("sharing", flush=True)
    # The encoder's bitrate as the page shows it (once a second, from getStats), for the benchmark.
    samples, statistics = [], []
    started = time.monotonic()
    while time.monotonic() - started < options.sample_seconds:
        browser.pump(0.25)
        samples.append([round(time.monotonic() - started, 2), page.evaluate(TEXT_OF % "sendRate"),
                        page.evaluate(TEXT_OF % "sendSize"), page.evaluate(TEXT_OF % "sendLimit")])
        # Once a second, the connection's statistics read here rather than by the page, so that a page of
        # another build (a benchmark's baseline) is measured the same way.
        if len(samples) % 4 == 0:
            entry = page.evaluate(STATISTICS)
            if entry:
                statistics.append(entry)
    if options.skip_picture:  # for a benchmark: the seconds only, then Stop
        page.click("stop")
        return {"requests": whip_requests(browser, options.stream), "samples": samples, "clicked_ns": clicked, "history": statistics}
    deadline = time.monotonic() + options.wait
    while not os.path.exists(options.proceed_file):  # the test reads the stream's frames meanwhile
        if time.monotonic() > deadline:
            raise Failure(f"{options.proceed_file} did not appear in {options.wait} s")
        browser.pump(0.05)

    # The live picture: the daemon's frame.png, shown by the page from a blob: URL.
    picture = page.wait_for("""(() => { const picture = document.getElementById('picture');
        return picture.complete && picture.naturalWidth > 0 ? [picture.naturalWidth, picture.naturalHeight] : null; })()""",
                            "no live picture")
    shown = page.evaluate("({" + ", ".join(f"{field}: {TEXT_OF % field}" for field in FIELDS) + "})")
    # The page's seconds: sent and allowed bitrate, frame rate and size, as getStats told them.
    history = page.evaluate("window.shareHistory || []")
    shot = page.call("Page.captureScreenshot", {"format": "png"})
    with open(options.screenshot, "wb") as file:
        file.write(base64.b64decode(shot["data"]))

    page.click("stop")
    page.wait_for("document.getElementById('status').textContent.startsWith('Stopped')", "the page did not stop")
    stopped = page.evaluate(TEXT_OF % "status")
    return {"picture": picture, "page": shown, "stopped": stopped, "screenshot": options.screenshot,
            "requests": whip_requests(browser, options.stream), "samples": samples, "clicked_ns": clicked,
            "history": history}


def whip_requests(browser, stream):
    """The page's WHIP POST and DELETE, each with its answer: DevTools stamps them with wall-clock seconds; they
    are returned as CLOCK_MONOTONIC nanoseconds, the clock of the ring's timestamps."""
    offset = time.time() - time.monotonic()
    sent = {}
    requests = []
    for event in browser.events:
        params = event.get("params", {})
        if event["method"] == "Network.requestWillBeSent":
            request = params["request"]
            if request["method"] in ("POST", "DELETE") and f"/whip/{stream}" in request["url"]:
                sent[params["requestId"]] = {"method": request["method"], "url": request["url"],
                                             "sent_ns": int((params["wallTime"] - offset) * 1e9),
                                             "sent_timestamp": params["timestamp"]}
        elif event["method"] == "Network.responseReceived" and params["requestId"] in sent:
            entry = sent.pop(params["requestId"])
            # The answer's time from the same monotonic clock DevTools stamps events with.
            entry["status"] = params["response"]["status"]
            entry["answered_ns"] = entry["sent_ns"] + int((params["timestamp"] - entry.pop("sent_timestamp")) * 1e9)
            requests.append(entry)
    return requests


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("--stream", required=True)
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--clip", help="a y4m file for Chromium's fake camera (not with --display)")
    parser.add_argument("--screenshot", required=True)
    parser.add_argument("--profile", required=True, help="an empty folder for Chromium's profile")
    parser.add_argument("--proceed-file", required=True,
                        help="once sharing, wait until this file exists, then check the page and stop")
    parser.add_argument("--wait", type=float, default=120, help="seconds to wait for --proceed-file")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--window-size", default="1280,900", help="the headless screen too, for --share screen")
    parser.add_argument("--share", choices=["camera", "screen"], default="camera",
                        help="which button; screen: Chromium picks its own (headless) screen without asking")
    parser.add_argument("--sample-seconds", type=float, default=0, help="after sharing starts, read the page's bitrate this long")
    parser.add_argument("--skip-picture", action="store_true", help="after --sample-seconds, stop without waiting for "
                        "--proceed-file, the live picture or a screenshot")
    parser.add_argument("--display", help="an X display (e.g. :99): Chromium not headless on it, clicks and keys through "
                        "xdotool, and --share screen shares that whole screen")
    parser.add_argument("--trust-spki", help="base64 SHA-256 of a certificate's public key, for an https:// page")
    options = parser.parse_args()
    # A test that gives up sends SIGTERM: close Chromium on the way out all the same.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(143))

    if options.display:
        os.environ["DISPLAY"] = options.display
    browser = DevTools(chromium_arguments(options), sys.stderr)
    try:
        result = share(options, browser)
    except Failure as failure:
        for event in browser.events:  # what the page said on its console, for the reason
            if event["method"] in ("Runtime.consoleAPICalled", "Runtime.exceptionThrown"):
                say(f"page: {json.dumps(event['params'])[:500]}")
        print(f"failed: {failure}", flush=True)
        return 1
    finally:
        browser.close()
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
