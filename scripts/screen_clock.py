"""The clock drawn on a shared X screen (scripts/screen-clock.c) and its reading, for glass-to-glass measurements:
started on a display by `start`, read back from a frame's luma by `read` (Python, for frames of streamrecvd's ring)
or by READ_FUNCTION (JavaScript, for frames a receiving browser presents). Times are CLOCK_REALTIME in units of
100 microseconds modulo 2^24, as the clock draws them; `latency_ms` takes the difference. Not a command.
"""
import os
import subprocess

import numpy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BITS, BLOCK, ROW = 24, 24, 40
MODULUS = 1 << BITS
# Where it is drawn: right of the browser, below the moving picture, above the document (real-screen-share.py).
X, Y = 1320, 540


def start(display, work):
    """Compiles the clock and shows it on `display`; the process (SIGKILL it at the end)."""
    binary = os.path.join(work, "screen-clock")
    subprocess.run(["cc", "-O2", "-o", binary, os.path.join(ROOT, "scripts/screen-clock.c"), "-lX11"], check=True)
    return subprocess.Popen([binary, str(X), str(Y)], env=dict(os.environ, DISPLAY=display), start_new_session=True)


def now_units(realtime_ns):
    return (realtime_ns // 100_000) % MODULUS


def read(luma):
    """The time drawn in a frame (its luma plane, the screen unscaled), or None where the rows disagree (a capture
    of the window half redrawn) or the frame is not the screen."""
    if luma.shape[0] < Y + 2 * ROW or luma.shape[1] < X + BITS * BLOCK:
        return None
    value = 0
    for bit in range(BITS):
        left = X + bit * BLOCK + BLOCK // 2 - 4
        top = float(luma[Y + ROW // 2 - 4:Y + ROW // 2 + 4, left:left + 8].mean())
        bottom = float(luma[Y + ROW + ROW // 2 - 4:Y + ROW + ROW // 2 + 4, left:left + 8].mean())
        if (top > 128) == (bottom > 128) or abs(top - bottom) < 80:
            return None
        value = value << 1 | (1 if top > 128 else 0)
    return value


def latency_ms(seen_units, drawn_units):
    """Milliseconds from drawn to seen, both in clock units (modulo 2^24)."""
    return ((seen_units - drawn_units) % MODULUS) / 10.0


# For a page: readClock(video) draws the clock's region of a video frame into a canvas and returns the time drawn
# (clock units) or null; clockUnits(epochMs) converts a page time (performance.timeOrigin + a DOMHighResTimeStamp).
READ_FUNCTION = """
const CLOCK = { bits: %d, block: %d, row: %d, x: %d, y: %d };
const clockCanvas = document.createElement('canvas');
clockCanvas.width = CLOCK.bits * CLOCK.block; clockCanvas.height = 2 * CLOCK.row;
const clockContext = clockCanvas.getContext('2d', { willReadFrequently: true });
function clockUnits(epochMs) { return Math.floor(epochMs * 10) %% (1 << CLOCK.bits); }
function readClock(video) {
  if (video.videoWidth < CLOCK.x + clockCanvas.width || video.videoHeight < CLOCK.y + clockCanvas.height) return null;
  clockContext.drawImage(video, CLOCK.x, CLOCK.y, clockCanvas.width, clockCanvas.height, 0, 0, clockCanvas.width, clockCanvas.height);
  const pixels = clockContext.getImageData(0, 0, clockCanvas.width, clockCanvas.height).data;
  const luma = (x, y) => { const i = 4 * (y * clockCanvas.width + x); return (pixels[i] + pixels[i + 1] + pixels[i + 2]) / 3; };
  let value = 0;
  for (let bit = 0; bit < CLOCK.bits; bit++) {
    const x = bit * CLOCK.block + CLOCK.block / 2;
    const top = luma(x, CLOCK.row / 2), bottom = luma(x, CLOCK.row + CLOCK.row / 2);
    if ((top > 128) === (bottom > 128) || Math.abs(top - bottom) < 80) return null;
    value = value * 2 + (top > 128 ? 1 : 0);
  }
  return value;
}
""" % (BITS, BLOCK, ROW, X, Y)
