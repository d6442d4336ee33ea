#!/usr/bin/env python3
"""Throughput with a reader of every frame, copied or borrowed: a 1080p x264 stream sent over TCP on loopback as fast
as the daemon takes it (two frame threads), once with no reader and once with each reader attached from the start;
the daemon's frames per second (first byte sent → last frame published, from the ring) against
`ffmpeg -threads 2 -i FILE -f null -` of the same file, and each reader's own CPU time per frame it read (the C and
Python readers time their loop from attaching on; cat, its whole process by rusage), all in one run, best of RUNS
(the run with the daemon's best fps). Readers:

  C copy / C borrow      scripts/bench-reader.c: streamrecv_shm_copy, or streamrecv_shm_borrow + _held; both look
                         at one byte of every luma row, so the difference is the copy
  Python copy / borrow   streamrecv.FrameRing.frames(), or frames(borrow=True); numpy_planes() and still_valid()
  cat (BASE) / cat       `streamrecvctl cat NAME > /dev/null` (y4m: NV12 de-interleaved) of the baseline build and of
                         this one (which builds y4m from the slot where the frame lies instead of copying it first)

Prints a markdown table. Usage:
  python3 scripts/bench-readers.py --stream FILE --base-ctl /tmp/base/bin/streamrecvctl [--runs 3]
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
spec = importlib.util.spec_from_file_location("throughput", os.path.join(here, "bench-throughput.py"))
throughput = importlib.util.module_from_spec(spec)
spec.loader.exec_module(throughput)
latency = throughput.latency

PYTHON_READER = """
import sys, numpy, streamrecv
name, frames, borrow = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "borrow"
ring = streamrecv.FrameRing(shm_name=name)
print("attached", file=sys.stderr, flush=True)
import time
start = time.process_time()
read = held = 0
for frame in ring.frames(timeout=3, borrow=borrow):
    planes = frame.numpy_planes()
    held += frame.still_valid()
    read += 1
    if read + ring.lapped >= frames:
        break
print("read %d lapped %d overtaken %d cpu %.4f" % (held, ring.lapped, read - held, time.process_time() - start))
"""


def run_with_reader(args, data, frames, port, reader):
    """(daemon fps, reader CPU seconds, reader's last line) with `reader` (argv with NAME for the ring) attached."""
    name = "readers%d" % os.getpid()
    shm = "streamrecv-" + name
    config = os.path.join(args.work, "readers.toml")
    with open(config, "w") as file:
        file.write('[daemon]\nlog_level = "warning"\n[[stream]]\nname = "%s"\nlisten = "tcp://127.0.0.1:%d"\n'
                   'hwaccel = "none"\nmax_width = 1920\nmax_height = 1088\nslots = 8\nthreads = 2\n'
                   'threading = "frame"\n' % (name, port))
    latency.remove_ring(name)
    daemon = subprocess.Popen([args.daemon, "--config", config], stderr=open(os.path.join(args.work, "readers.log"), "a"))
    process = None
    try:
        status = lambda: json.loads(subprocess.run([args.ctl, "status", name, "--json"], capture_output=True).stdout or b"{}")
        while status().get("state") != "waiting":
            time.sleep(0.05)
        if reader:
            # Attached before the first frame: the ring grows for it (a new object), which every reader follows.
            command = [part.replace("NAME", shm).replace("STREAM", name) for part in reader]
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       env=dict(os.environ, PYTHONPATH=os.path.join(root, "python")))
            attached = process.stderr.readline()
            if not attached:
                raise RuntimeError("reader %s did not attach" % command)
        start = throughput.send_all(data, port)
        while True:
            current = status()
            if current.get("frames_published", 0) >= frames:
                fps = frames / ((current["latest_published_ns"] - start) / 1e9)
                break
            time.sleep(0.2)
        if not process:
            return fps, 0.0, ""
        _, _, usage = os.wait4(process.pid, 0)
        said = process.stdout.read().strip().splitlines()
        return fps, usage.ru_utime + usage.ru_stime, said[-1] if said else process.stderr.read()
    finally:
        if process and process.poll() is None:
            process.kill()
        daemon.terminate()
        daemon.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--daemon", default=".build/release/streamrecvd")
    parser.add_argument("--ctl", default=".build/release/streamrecvctl")
    parser.add_argument("--base-ctl", required=True, help="streamrecvctl of the baseline build")
    parser.add_argument("--stream", required=True)
    parser.add_argument("--work", default=".build/bench")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    reader_binary = os.path.join(args.work, "bench-reader")
    subprocess.run(["cc", "-std=gnu11", "-O2", "-I", os.path.join(root, "Sources/CFrameRing/include"),
                    os.path.join(here, "bench-reader.c"), "-o", reader_binary], check=True)
    data = open(args.stream, "rb").read()
    frames = int(subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                                 "stream=nb_read_frames", "-of", "csv=p=0", args.stream],
                                capture_output=True, text=True, check=True).stdout)
    count = str(frames)
    # The C and Python readers stop once every frame was read or lapped; cat has no such count (lapped frames are
    # not written): it ends 3 s after the last frame.
    readers = [
        ("no reader", None),
        ("C copy", [reader_binary, "copy", "NAME", count]),
        ("C borrow", [reader_binary, "borrow", "NAME", count]),
        ("Python copy (numpy_planes)", ["/usr/bin/python3", "-c", PYTHON_READER, "NAME", count, "copy"]),
        ("Python borrow (numpy_planes, still_valid)", ["/usr/bin/python3", "-c", PYTHON_READER, "NAME", count, "borrow"]),
        ("`streamrecvctl cat` of the baseline", ["sh", "-c", "%s cat STREAM --timeout 3 > /dev/null; echo done" % args.base_ctl]),
        ("`streamrecvctl cat`", ["sh", "-c", "%s cat STREAM --timeout 3 > /dev/null; echo done" % args.ctl]),
    ]
    port = 41000 + os.getpid() % 20000
    best = {}
    for run in range(args.runs):
        seconds = throughput.ffmpeg_file(args.stream, 2)
        best["ffmpeg"] = max(best.get("ffmpeg", 0), frames / seconds)
        for label, reader in readers:
            port += 1
            fps, cpu, said = run_with_reader(args, data, frames, port, reader)
            if fps > best.get(label, (0,))[0]:
                best[label] = (fps, cpu, said)
    print("input: %s, %d frames 1920x1080; threads = 2 (frame), slots = 8; best of %d; `ffmpeg -threads 2 -i FILE "
          "-f null -`: %.0f fps (its -benchmark rtime)" % (args.stream, frames, args.runs, best["ffmpeg"]))
    print("")
    print("| reader of every frame | daemon fps | ÷ ffmpeg -f null | reader CPU per frame read (ms) | reader said (cpu: its loop's seconds) |")
    print("|---|---|---|---|---|")
    for label, _ in readers:
        fps, cpu, said = best[label]
        read = int(said.split()[1]) if said.startswith("read ") else frames
        # The C and Python readers measure their own loop (no start-up: interpreter, numpy import); cat's is the
        # whole process (rusage).
        if " cpu " in said:
            cpu = float(said.split(" cpu ")[1].split()[0])
        print("| %s | %.0f | %.2f | %s | %s |" % (label, fps, fps / best["ffmpeg"],
                                                  "–" if not cpu else "%.3f" % (cpu * 1000 / max(read, 1)), said or "–"))


if __name__ == "__main__":
    sys.exit(main())
