#!/usr/bin/python3
"""What Chromium allows itself when it shares into streamrecvd, against what it allows itself when it shares to
another browser: one run, the same fake camera clip, one share after another, alternating.

Receivers (each `--rounds` times, in turn):
  daemon-tcc   this build, transport-cc answered (the default)
  daemon-remb  this build, `transport_cc = false`: REMB only
  baseline     `--baseline` (another build's streamrecvd, e.g. the last release's), its defaults
  browser      a second RTCPeerConnection in the same page (Chromium's own receiver: transport-cc)
  aiortc       with --screen: aiortc behind a WHIP endpoint of its own (scripts/whip-receiver.py), as it comes
  webrtcbin    with --screen: GStreamer's webrtcbin the same way

For each share, once a second from getStats: `availableOutgoingBitrate` of the connection (what the sender's
congestion control allows), the encoder's bitrate, frame rate and size. Writes a markdown section to stdout and
the raw seconds as JSON to --json. Needs Debian's chromium; called by hand (docs/benchmarks.md has the command).

With --screen, each share is of a real X screen instead of the fake camera (scripts/real-screen-share.py: Xvfb,
Chromium not headless, a document of small text and a moving picture), and for the daemons also the click to
the first frame readable, the frames per second in the ring and the document's luma PSNR against x11grab. The
screen then shows a clock (scripts/screen-clock.c) that every receiver reads back from what it gets: glass to glass,
drawn → readable in the ring (daemons) against drawn → on the receiving browser's display (browser), each frame.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "bench-share-bitrate-Xq7v2KpL9wZr4mTn8sYb"
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import loopback_share  # noqa: E402

def browser_share(options, work, clip, max_bitrate):
    """Chromium to Chromium in one page (scripts/loopback_share.py); the page's seconds."""
    profile = tempfile.mkdtemp(prefix="profile.", dir=work)
    with open(os.path.join(work, "chromium-browser.log"), "a") as log:
        return loopback_share.share(options.chromium, profile, log, options.seconds + 1, max_bitrate, clip=clip)["history"]


def daemon_share(options, work, clip, port, stream):
    """The share page of the daemon at `port` into `stream`; the page's seconds."""
    profile = tempfile.mkdtemp(prefix="profile.", dir=work)
    proceed = os.path.join(work, "proceed")
    open(proceed, "w").close()
    result = subprocess.run(
        ["/usr/bin/python3", os.path.join(ROOT, "scripts/chromium-share.py"), f"http://127.0.0.1:{port}/",
         "--stream", stream, "--token-file", os.path.join(work, "token"), "--clip", clip,
         "--screenshot", os.path.join(work, f"{stream}.png"), "--profile", profile, "--proceed-file", proceed,
         "--sample-seconds", str(options.seconds + 1), "--chromium", options.chromium, "--skip-picture"],
        capture_output=True, text=True, timeout=options.seconds + 120)
    try:
        return json.loads(result.stdout.strip().splitlines()[-1])["history"]
    except (IndexError, KeyError, ValueError):
        print(f"share into {stream} failed: {result.stdout[-300:]} {result.stderr[-800:]}", file=sys.stderr)
        return None


def screen_share(options, work, receiver, port=None, stream=None):
    """A real screen shared into `stream` of the daemon at `port`, or browser to browser; (seconds, figures)."""
    folder = tempfile.mkdtemp(prefix="screen.", dir=work)
    command = ["/usr/bin/python3", os.path.join(ROOT, "scripts/real-screen-share.py"), "--work", folder,
               "--seconds", str(options.seconds), "--chromium", options.chromium, "--clock"]
    if receiver in ("browser", "aiortc", "webrtcbin"):
        command += ["--receiver", receiver]
    else:
        command += [f"http://127.0.0.1:{port}/", "--stream", stream, "--token-file", os.path.join(work, "token"),
                    "--shm-name", "streamrecv-" + stream]
    result = subprocess.run(command, capture_output=True, text=True, timeout=options.seconds + 240)
    try:
        output = json.loads(result.stdout.strip().splitlines()[-1])
        history = output["history"]
    except (IndexError, KeyError, ValueError):
        print(f"screen share ({receiver} {stream}) failed: {result.stdout[-300:]} {result.stderr[-800:]}", file=sys.stderr)
        return None
    figures = {"glass_ms": output.get("glass_ms", []), "glass_presented_ms": output.get("glass_presented_ms", [])}
    if output.get("first_frame_ns") and output.get("clicked_ns"):
        figures["click_to_frame_ms"] = round((output["first_frame_ns"] - output["clicked_ns"]) / 1e6)
        per_second = output.get("frames_per_second", [])[1:-1]
        figures["ring_fps_min"] = min(per_second) if per_second else None
        document = sorted(output.get("psnr_y_document", []))
        figures["document_psnr_y"] = round(document[len(document) // 2], 1) if document else None
        figures["longest_gap_ms"] = round(output.get("longest_gap_ms") or 0)
    return history, figures


def start_daemon(binary, work, name, streams):
    http_port, media_port = loopback_share.free_port(), loopback_share.free_port()
    path = os.path.join(work, f"{name}.toml")
    with open(path, "w") as configuration:
        configuration.write(f'[daemon]\nlog_level = "notice"\n[webrtc]\nlisten = "127.0.0.1:{http_port}"\nmedia = "127.0.0.1:{media_port}"\n')
        for stream, extra in streams:
            configuration.write(f'[[stream]]\nname = "{stream}"\nlisten = "whip"\ntoken_file = "token"\nhwaccel = "none"\n{extra}')
    log = open(os.path.join(work, f"{name}.log"), "w")
    process = subprocess.Popen([binary, "--config", path], stdout=log, stderr=log)
    time.sleep(1.5)
    if process.poll() is not None:
        sys.exit(f"{binary} did not start: see {log.name}")
    return process, http_port


def summary(seconds, skip):
    """Median, 10th and 90th percentile of the allowed bitrate from `skip` seconds on, and of what was sent."""
    later = [entry for entry in seconds[skip:] if entry.get("allowedKbps")]
    allowed = [entry["allowedKbps"] for entry in later]
    sent = [entry["sentKbps"] for entry in later if entry.get("sentKbps") is not None]
    sizes = sorted({f"{entry['width']}x{entry['height']}" for entry in later if entry.get("width")})
    return {"allowed_p50": percentile(allowed, 0.5), "allowed_p10": percentile(allowed, 0.1), "allowed_p90": percentile(allowed, 0.9),
            "sent_p50": percentile(sent, 0.5), "sizes": sizes, "seconds": len(later)}


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else None


def print_glass(receivers, figures, seconds):
    """Glass to glass from the clock on the screen: every frame of every round of each receiver together."""
    print("\nGlass to glass (the clock drawn on the screen, read back from each frame; ms): the daemons drawn → readable "
          "in the ring, the browser drawn → expected on its display (and → handed to its compositor), aiortc and "
          "webrtcbin drawn → decoded and handed to the application:\n")
    print("| receiver | frames read | frames read a second | p10 | p50 | p90 | p99 |")
    print("|---|---|---|---|---|---|---|")
    medians = {}
    for name, _ in receivers:
        for key, label in [("glass_ms", name), ("glass_presented_ms", f"{name} (presented)")]:
            values = [value for figure in figures[name] for value in figure.get(key, [])]
            if not values:
                continue
            medians[label] = percentile(values, 0.5)
            rate = len(values) / max(1, len(figures[name]) * seconds)
            print(f"| {label} | {len(values)} | {rate:.1f} | {percentile(values, 0.1):.1f} | {medians[label]:.1f} | {percentile(values, 0.9):.1f} | "
                  f"{percentile(values, 0.99):.1f} |")
    for name in ("browser", "browser (presented)"):
        if medians.get(name):
            print(f"\np50 against {name}'s: " + ", ".join(f"{label} {value / medians[name]:.2f}x" for label, value in medians.items()
                                                        if not label.startswith("browser")))
    print("\n(Frames read a second: frames whose clock could be read, over the rounds' seconds. A receiver that holds the "
          "sender's bitrate down gets fewer, smaller frames, which also travel faster.)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--daemon", default=os.path.join(ROOT, ".build/release/streamrecvd"))
    parser.add_argument("--baseline", help="another build's streamrecvd, run with its defaults")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=20, help="of each share")
    parser.add_argument("--max-bitrate", type=int, default=20_000_000, help="the loopback page's encoder ceiling (the share page's default)")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--json", help="write every share's seconds here")
    parser.add_argument("--screen", action="store_true", help="share a real X screen instead of the fake camera")
    options = parser.parse_args()

    work = tempfile.mkdtemp(prefix="streamrecvd-bench-share.")
    with open(os.path.join(work, "token"), "w") as token:
        token.write(TOKEN + "\n")
    os.chmod(os.path.join(work, "token"), 0o600)
    clip = os.path.join(work, "clip.y4m")
    # A moving test picture with film grain: an encoder that wants more than Chromium's start rate.
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30", "-vf", "noise=alls=12:allf=t",
                    "-frames:v", "60", "-pix_fmt", "yuv420p", clip], check=True)
    # No max_bitrate: the share page asks the encoder for 20 Mbit/s as the loopback page does, and nothing in the
    # answer caps the estimate (with b=AS, Chromium reports the ceiling as its available bitrate from the start).
    daemons = {"daemon": start_daemon(options.daemon, work, "daemon", [("tcc", ""), ("remb", "transport_cc = false\n")])}
    if options.baseline:
        daemons["baseline"] = start_daemon(options.baseline, work, "baseline", [("base", "")])
    if options.screen:
        receivers = [("daemon-tcc", lambda: screen_share(options, work, "daemon", daemons["daemon"][1], "tcc")),
                     ("daemon-remb", lambda: screen_share(options, work, "daemon", daemons["daemon"][1], "remb"))]
        if options.baseline:
            receivers.append(("baseline", lambda: screen_share(options, work, "daemon", daemons["baseline"][1], "base")))
        receivers.append(("browser", lambda: screen_share(options, work, "browser")))
        receivers.append(("aiortc", lambda: screen_share(options, work, "aiortc")))
        receivers.append(("webrtcbin", lambda: screen_share(options, work, "webrtcbin")))
    else:
        receivers = [("daemon-tcc", lambda: (daemon_share(options, work, clip, daemons["daemon"][1], "tcc"), {})),
                     ("daemon-remb", lambda: (daemon_share(options, work, clip, daemons["daemon"][1], "remb"), {}))]
        if options.baseline:
            receivers.append(("baseline", lambda: (daemon_share(options, work, clip, daemons["baseline"][1], "base"), {})))
        receivers.append(("browser", lambda: (browser_share(options, work, clip, options.max_bitrate), {})))
    results = {name: [] for name, _ in receivers}
    figures = {name: [] for name, _ in receivers}
    try:
        for _ in range(options.rounds):
            for name, share in receivers:
                outcome = share()
                if outcome and outcome[0]:
                    results[name].append(outcome[0])
                    figures[name].append(outcome[1])
    finally:
        for process, _ in daemons.values():
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=20)
    if options.json:
        with open(options.json, "w") as out:
            json.dump({"seconds": results, "figures": figures}, out)

    version = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h"], capture_output=True, text=True).stdout.strip()
    source = ("a real X screen (Xvfb 1920x1080: Chromium's window, a document of 7 pt text, a 480x360 moving picture)" if options.screen
              else "Chromium's fake camera (1280x720 testsrc2 with grain, 30 fps)")
    print(f"{options.rounds} rounds, {options.seconds} s per share, {source}, "
          f"encoder ceiling {options.max_bitrate // 1000} kbit/s, commit {version}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}.\n")
    print("| receiver | allowed from 5 s: p10 / p50 / p90 (kbit/s) | sent p50 | sizes | each round's allowed p50 |")
    print("|---|---|---|---|---|")
    browser_p50 = None
    for name, _ in receivers:
        flat = [entry for share in results[name] for entry in share[5:]]
        total = summary(flat, 0)
        rounds = [summary(share, 5)["allowed_p50"] for share in results[name]]
        if name == "browser":
            browser_p50 = total["allowed_p50"]
        print(f"| {name} | {total['allowed_p10']} / {total['allowed_p50']} / {total['allowed_p90']} | {total['sent_p50']} | "
              f"{', '.join(total['sizes'])} | {rounds} |")
    if browser_p50:
        print("\nAllowed p50 against the browser's:", ", ".join(
            f"{name} {summary([e for s in results[name] for e in s[5:]], 0)['allowed_p50'] / browser_p50:.2f}x"
            for name, _ in receivers if name != "browser" and results[name]))
    if options.screen:
        print("\nThe daemons' rings, each round: click → first frame readable (ms), fewest frames in a second, longest gap (ms), "
              "document PSNR-Y (dB):")
        for name, _ in receivers:
            if name.startswith("daemon") or name == "baseline":
                print(f"- {name}: " + "; ".join(f"{f.get('click_to_frame_ms')} ms, {f.get('ring_fps_min')} fps, "
                                                 f"{f.get('longest_gap_ms')} ms, {f.get('document_psnr_y')} dB" for f in figures[name]))
    if options.screen:
        print_glass(receivers, figures, options.seconds)
    print("\nEach share's seconds (allowed kbit/s):")
    for name, _ in receivers:
        for share in results[name]:
            print(f"- {name}: " + " ".join(str(entry.get("allowedKbps", "-")) for entry in share))


if __name__ == "__main__":
    main()
