#!/usr/bin/python3
"""A real desktop shared as a person shares it: an X screen (Xvfb, 1920x1080) with a document of small text and a
moving picture on it (two ffplay windows), Debian's Chromium not headless on that screen, the daemon's share page typed into and clicked through the X server
(xdotool), the whole screen picked as a person picks it (--auto-select-desktop-capture-source), and the stream's
ring read as any reader reads it (python/streamrecv) while ffmpeg's x11grab records the same screen.

Prints one JSON object: the click's and the POST's times, every frame's size, flags and publication time, the
frames per second of the ring, the longest time without a frame, the luma PSNR of sampled frames against the
screen as x11grab saw it (each frame against the grabbed frame it is closest to, from 1.5 s before its publication
to its publication): over the document (still, text of 7 and 10 pt) and over the whole screen; and what Chromium
sent and was allowed each second (the share page's getStats). The caller judges.

With --receiver browser, the same screen is shared to a second RTCPeerConnection in a page of Chromium's own
(browser to browser, the yardstick): only the seconds of getStats are printed.

With --receiver aiortc or webrtcbin, the same page sends to that stack's WHIP endpoint instead
(scripts/whip-receiver.py): the seconds of getStats, and with --clock drawn → decoded and handed out by the stack.

With --clock, a clock is drawn on the screen (scripts/screen-clock.c) and read back from what arrives: for the
daemon, from every frame of the ring at its publication (readable by any reader); for the browser, from every frame
its receiving <video> presents (requestVideoFrameCallback). "glass_ms" lists drawn → readable (daemon) or drawn →
expected on the display (browser; "glass_presented_ms": drawn → handed to the compositor) for each frame.

  real-screen-share.py URL --stream NAME --token-file PATH --shm-name NAME --work DIR [--seconds 20]
  real-screen-share.py --receiver browser --work DIR [--seconds 20]
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

import numpy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import streamrecv  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "scripts"))
import loopback_share  # noqa: E402
import screen_clock  # noqa: E402

WIDTH, HEIGHT = 1920, 1080
GRAB_FPS = 5
# Where things are on the screen: the browser top left, a moving picture top right, the document below.
BROWSER_SIZE = "1100,700"
DOCUMENT_TOP = 710
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
# The document region compared (inside its window, clear of the edges).
DOCUMENT_REGION = (slice(DOCUMENT_TOP + 10, HEIGHT - 10), slice(10, WIDTH - 10))

def say(text):
    print(f"real-screen-share: {text}", file=sys.stderr, flush=True)


def monotonic_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def start_x_server(work):
    """Xvfb on the first free display it finds; its name (":N") once it takes connections."""
    read_end, write_end = os.pipe()
    log = open(os.path.join(work, "xvfb.log"), "w")
    # -noreset: a server that resets as its last client leaves cuts off one that is connecting just then.
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write_end), "-screen", "0", f"{WIDTH}x{HEIGHT}x24", "-nolisten", "tcp",
                               "-noreset"],
                              pass_fds=[write_end], stdout=log, stderr=log, start_new_session=True)
    os.close(write_end)
    number = b""
    while not number.endswith(b"\n"):
        chunk = os.read(read_end, 16)
        if not chunk:
            raise SystemExit(f"Xvfb did not start: {open(log.name).read()[-500:]}")
        number += chunk
    os.close(read_end)
    return server, ":" + number.decode().strip()


class RingRecorder(threading.Thread):
    """Every frame of the ring: (sequence, width, height, flags, published ns); the luma of one frame in
    `keep_every` (at most `keep` of them) for the comparison."""

    def __init__(self, shm_name, keep_every=15, keep=24, clock=False):
        super().__init__(daemon=True)
        self.shm_name, self.keep_every, self.keep, self.clock = shm_name, keep_every, keep, clock
        self.frames, self.kept, self.glass = [], [], []
        self.last_drawn, self.backwards, self.stages = None, 0, []
        # Publication times are CLOCK_MONOTONIC, the drawn clock CLOCK_REALTIME.
        self.realtime_offset = time.time_ns() - monotonic_ns()
        self.stop = threading.Event()

    def run(self):
        try:
            ring = streamrecv.FrameRing.wait_for(shm_name=self.shm_name, timeout=120)
        except streamrecv.RingError:
            return
        with ring:
            start = None
            while not self.stop.is_set():
                before = len(self.frames)
                for frame in ring.frames(timeout=0.5, start=start):
                    self.note(frame)
                    start = frame.sequence + 1
                    if self.stop.is_set():
                        return
                if len(self.frames) == before:
                    time.sleep(0.05)

    def note(self, frame):
        self.frames.append((frame.sequence, frame.width, frame.height, frame.flags, frame.times_ns[3]))
        if self.clock and frame.width == WIDTH:
            luma = numpy.frombuffer(frame.plane(0), dtype=numpy.uint8).reshape(frame.plane_height[0], frame.plane_width[0])
            drawn = screen_clock.read(luma)
            if drawn is not None:
                published = screen_clock.now_units(frame.times_ns[3] + self.realtime_offset)
                self.glass.append(screen_clock.latency_ms(published, drawn))
                # The daemon's own part: first byte in → AU complete → decoded → published.
                self.stages.append([(frame.times_ns[i + 1] - frame.times_ns[i]) / 1e6 for i in range(3)])
                # A frame showing an older screen than the frame before it.
                if self.last_drawn is not None and 0 < (self.last_drawn - drawn) % screen_clock.MODULUS < screen_clock.MODULUS // 2:
                    self.backwards += 1
                self.last_drawn = drawn
        if len(self.frames) % self.keep_every == 1 and len(self.kept) < self.keep and frame.width == WIDTH:
            luma = numpy.frombuffer(frame.plane(0), dtype=numpy.uint8).reshape(frame.plane_height[0], frame.plane_width[0])
            self.kept.append((frame.times_ns[3], luma[:HEIGHT, :WIDTH].copy()))


def grab_screen(display, seconds, work):
    """x11grab of the whole screen at GRAB_FPS, converted as the browser converts (limited-range BT.601 4:2:0), its
    luma kept, each frame stamped with CLOCK_MONOTONIC when it was read."""
    process = subprocess.Popen(["ffmpeg", "-v", "error", "-f", "x11grab", "-framerate", str(GRAB_FPS), "-video_size", f"{WIDTH}x{HEIGHT}",
                                "-i", display, "-t", str(seconds), "-pix_fmt", "yuv420p", "-f", "rawvideo", "-"],
                               stdout=subprocess.PIPE, stderr=open(os.path.join(work, "x11grab.log"), "w"))
    grabbed = []
    size = WIDTH * HEIGHT * 3 // 2
    while True:
        data = process.stdout.read(size)
        if len(data) < size:
            break
        grabbed.append((monotonic_ns(), numpy.frombuffer(data, dtype=numpy.uint8, count=WIDTH * HEIGHT).reshape(HEIGHT, WIDTH)))
    process.wait()
    return grabbed


def start_desktop(display, work):
    """What a person's screen shows besides the browser: a still document of small text (7 pt and 10 pt at 96 dpi:
    9 and 13 pixels) across the bottom, and a moving picture top right. Each in an ffplay window of its own."""
    environment = dict(os.environ, DISPLAY=display)
    text = os.path.join(work, "document.txt")
    with open(text, "w") as out:
        for line in range(40):
            out.write(f"{line:3d}  The quick brown fox jumps over the lazy dog; 0123456789 (){{}}[] <=> +-*/ #$& "
                      f"streamrecvd shares this screen, line {line}, and every glyph must stay legible at 7 pt.\n")
    document = os.path.join(work, "document.png")
    height = HEIGHT - DOCUMENT_TOP
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"color=white:size={WIDTH}x{height}", "-frames:v", "1",
                    "-vf", f"drawtext=fontfile={FONT}:textfile={text}:fontsize=9:fontcolor=black:x=6:y=4:line_spacing=1,"
                           f"drawtext=fontfile={FONT}:text='Thirteen pixels\\: 10 pt text beside the 7 pt lines':fontsize=13:"
                           f"fontcolor=0x203080:x=1500:y=8", document], check=True)
    log = open(os.path.join(work, "ffplay.log"), "w")
    return [
        # One picture: ffplay shows it and keeps its window (looped, it would decode it again and again).
        subprocess.Popen(["ffplay", "-v", "error", "-noborder", "-left", "0", "-top", str(DOCUMENT_TOP), document],
                         env=environment, stdout=subprocess.DEVNULL, stderr=log),
        subprocess.Popen(["ffplay", "-v", "error", "-noborder", "-left", "1300", "-top", "120", "-an",
                          "-f", "lavfi", "testsrc2=size=480x360:rate=30"], env=environment, stdout=subprocess.DEVNULL, stderr=log),
    ]


def share_to_stack(options, display):
    """The screen shared from the loopback page to another stack's WHIP endpoint (scripts/whip-receiver.py): the
    page's seconds, and the stack's frames and clock readings."""
    port = loopback_share.free_port()
    receiver = subprocess.Popen(["/usr/bin/python3", os.path.join(ROOT, "scripts/whip-receiver.py"), "--stack", options.receiver,
                                 "--port", str(port), "--seconds", str(options.seconds + 120)],
                                stdout=subprocess.PIPE, stderr=open(os.path.join(options.work, "receiver.log"), "w"), text=True)
    try:
        if receiver.stdout.readline().strip() != "listening":
            raise SystemExit(f"whip-receiver.py did not start: {open(os.path.join(options.work, 'receiver.log')).read()[-800:]}")
        profile = os.path.join(options.work, "chromium-profile-stack")
        os.makedirs(profile, exist_ok=True)
        with open(os.path.join(options.work, "chromium-stack.log"), "w") as log:
            result = loopback_share.share(options.chromium, profile, log, options.seconds, 20_000_000, display=display,
                                          window_size=BROWSER_SIZE, whip_url=f"http://127.0.0.1:{port}/whip/screen")
    finally:
        receiver.terminate()
        output, _ = receiver.communicate(timeout=60)
    received = json.loads(output.strip().splitlines()[-1])
    result.update({"stack_frames": received["frames"], "glass_ms": received["glass_ms"]})
    return result


def share_to_browser(options, display):
    """The screen shared from one RTCPeerConnection to another in a page of this Chromium
    (scripts/loopback_share.py): the click's time and getStats' seconds."""
    profile = os.path.join(options.work, "chromium-profile-browser")
    os.makedirs(profile, exist_ok=True)
    with open(os.path.join(options.work, "chromium-browser.log"), "w") as log:
        result = loopback_share.share(options.chromium, profile, log, options.seconds, 20_000_000, display=display,
                                      window_size=BROWSER_SIZE, clock=options.clock)
    glass = result.pop("glass", [])
    if options.clock:
        result["glass_ms"] = [screen_clock.latency_ms(displayed, drawn) for drawn, displayed, _ in glass]
        result["glass_presented_ms"] = [screen_clock.latency_ms(presented, drawn) for drawn, _, presented in glass]
    return result


def without_clock(luma):
    """The screen with the clock's window blanked: it changes every millisecond, x11grab samples 5 times a second."""
    blanked = luma.copy()
    blanked[screen_clock.Y:screen_clock.Y + 2 * screen_clock.ROW, screen_clock.X:screen_clock.X + screen_clock.BITS * screen_clock.BLOCK] = 0
    return blanked


def psnr(a, b):
    error = numpy.mean((a.astype(numpy.int32) - b.astype(numpy.int32)) ** 2)
    return 100.0 if error == 0 else float(10 * numpy.log10(255 * 255 / error))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="?")
    parser.add_argument("--stream")
    parser.add_argument("--token-file")
    parser.add_argument("--shm-name")
    parser.add_argument("--work", required=True)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--receiver", choices=["daemon", "browser", "aiortc", "webrtcbin"], default="daemon")
    parser.add_argument("--clock", action="store_true", help="draw a clock on the screen and read it back from what arrives")
    options = parser.parse_args()

    server, display = start_x_server(options.work)
    helpers = []
    try:
        helpers = start_desktop(display, options.work)
        if options.clock:
            helpers.append(screen_clock.start(display, options.work))
        if options.receiver == "browser":
            print(json.dumps({"display": display, **share_to_browser(options, display)}))
            return 0
        if options.receiver in ("aiortc", "webrtcbin"):
            print(json.dumps({"display": display, **share_to_stack(options, display)}))
            return 0
        recorder = RingRecorder(options.shm_name, clock=options.clock)
        recorder.start()
        profile = os.path.join(options.work, "chromium-profile")
        os.makedirs(profile, exist_ok=True)
        proceed = os.path.join(options.work, "proceed")
        open(proceed, "w").close()
        share = subprocess.Popen(["/usr/bin/python3", os.path.join(ROOT, "scripts/chromium-share.py"), options.url,
                                  "--stream", options.stream, "--token-file", options.token_file, "--profile", profile,
                                  "--screenshot", os.path.join(options.work, "page.png"), "--proceed-file", proceed,
                                  "--display", display, "--share", "screen", "--window-size", BROWSER_SIZE,
                                  "--sample-seconds", str(options.seconds), "--skip-picture", "--chromium", options.chromium],
                                 stdout=subprocess.PIPE, stderr=open(os.path.join(options.work, "chromium.log"), "w"), text=True)
        # The screen as x11grab sees it, from about when sharing starts to the end.
        grabbed = []
        grabber = threading.Thread(target=lambda: grabbed.extend(grab_screen(display, options.seconds + 8, options.work)), daemon=True)
        grabber.start()
        output, _ = share.communicate(timeout=options.seconds + 120)
        recorder.stop.set()
        recorder.join(timeout=5)
        grabber.join(timeout=options.seconds + 30)
    finally:
        # SIGKILL: SDL turns ffplay's SIGTERM into a quit event it may never read, and Xvfb waits on its clients.
        for process in helpers + [server]:
            process.kill()
            process.wait()

    last = output.strip().splitlines()[-1] if output.strip() else ""
    try:
        shared = json.loads(last)
    except ValueError:
        print(json.dumps({"failed": last or "chromium-share.py printed nothing"}))
        return 1
    document, whole = [], []
    for published, luma in recorder.kept:
        candidates = [frame for stamp, frame in grabbed if published - 1_500_000_000 <= stamp <= published + 100_000_000]
        if candidates and luma.shape == (HEIGHT, WIDTH):
            document.append(max(psnr(luma[DOCUMENT_REGION], frame[DOCUMENT_REGION]) for frame in candidates))
            whole.append(max(psnr(without_clock(luma), without_clock(frame)) for frame in candidates))
    posted = next((request["sent_ns"] for request in shared.get("requests", []) if request["method"] == "POST"), None)
    frames = recorder.frames
    times = [frame[4] for frame in frames]
    gaps = [b - a for a, b in zip(times, times[1:])]
    per_second = {}
    for stamp in times:
        per_second[(stamp - times[0]) // 1_000_000_000] = per_second.get((stamp - times[0]) // 1_000_000_000, 0) + 1
    print(json.dumps({
        "display": display,
        "clicked_ns": shared.get("clicked_ns"), "posted_ns": posted,
        "first_frame_ns": times[0] if times else None,
        "frames": len(frames), "sizes": sorted({f"{w}x{h}" for _, w, h, _, _ in frames}),
        "corrupt": sum(1 for frame in frames if frame[3] & streamrecv.FLAG_CORRUPT),
        # Flagged frames published 2 s or more after the first: past the start, where a keyframe lost to a loaded
        # machine is asked for again (PLI) and the frames until it come flagged.
        "corrupt_after_start": sum(1 for frame in frames if frame[3] & streamrecv.FLAG_CORRUPT and frame[4] - times[0] >= 2_000_000_000),
        "longest_gap_ms": max(gaps) / 1e6 if gaps else None,
        "frames_per_second": [per_second.get(second, 0) for second in range(int(max(per_second, default=-1)) + 1)],
        "psnr_y_document": document, "psnr_y_screen": whole, "grabbed": len(grabbed),
        "history": shared.get("history", []),
        **({"glass_ms": recorder.glass, "clock_backwards": recorder.backwards, "stages_ms": recorder.stages} if options.clock else {}),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
