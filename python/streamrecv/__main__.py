"""python -m streamrecv NAME [--frames N] [--timeout S] [--borrow] > frames.yuv: a stream's frames as tightly packed
planes.

Waits for the ring when it is not there yet (the daemon may start only at the first connection).
Exit status: 0 after --frames frames (or when the stream stopped, without --frames), 1 when the object is not a
ring, 2 when the ring did not appear or no frame came within --timeout.
"""

import os
import sys

if __package__ in (None, ""):
    # Run as `python3 python/streamrecv` (a folder with __main__.py): the package is the folder itself.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import streamrecv  # noqa: E402


def main(arguments):
    import argparse
    parser = argparse.ArgumentParser(prog="python -m streamrecv",
                                     description="Write a stream's frames as packed planes to standard output.")
    parser.add_argument("name", help="the stream's name (its ring is /dev/shm/streamrecv-NAME)")
    parser.add_argument("--frames", type=int, help="stop after this many frames")
    parser.add_argument("--timeout", type=float, default=None,
                        help="give up when the ring does not appear, or no frame arrives, for this many seconds")
    parser.add_argument("--borrow", action="store_true",
                        help="pack each frame from the slot where it lies instead of copying it out first (half the "
                             "work); the ring's owner or root truncating it would then kill this reader (SIGBUS)")
    options = parser.parse_args(arguments)
    try:
        ring = streamrecv.FrameRing.wait_for(options.name, timeout=options.timeout, waiting=lambda: print(
            "streamrecv: waiting for /dev/shm/streamrecv-%s (the daemon has not made the ring yet)" % options.name,
            file=sys.stderr, flush=True))
    except TimeoutError as error:
        print("streamrecv: %s" % error, file=sys.stderr)
        return 2
    except streamrecv.RingError as error:
        print("streamrecv: %s" % error, file=sys.stderr)
        return 1
    try:
        return _write_frames(ring, options)
    except streamrecv.RingError as error:
        print("streamrecv: %s" % error, file=sys.stderr)
        return 1
    finally:
        ring.close()


def _write_frames(ring, options):
    # Copied out of the ring by default: a truncation, even by the ring's owner, is then an error and never SIGBUS.
    # With --borrow, packed from the slot where the frame lies and written only once the frame held; copied where
    # the ring may not be borrowed from (an object others could shrink).
    refused = ring.borrowable() if options.borrow else "not asked for"
    # Taken before saying "attached": every frame published after that line is written, none is skipped.
    first = ring.latest_sequence + 1
    print("streamrecv: attached to %s%s" % (ring.shm_name, " (copying: %s)" % refused if options.borrow and refused else ""),
          file=sys.stderr, flush=True)
    written = overtaken = 0
    for frame in ring.frames(timeout=options.timeout, start=first, borrow=refused is None):
        packed = frame.packed()
        if not frame.still_valid():
            overtaken += 1  # the writer reused the slot while it was packed: lost, as a lapped frame is
            continue
        sys.stdout.buffer.write(packed)
        written += 1
        if options.frames is not None and written >= options.frames:
            break
    sys.stdout.flush()
    if ring.lapped or overtaken:
        print("streamrecv: lapped: %d frame(s) skipped" % (ring.lapped + overtaken), file=sys.stderr)
    return 0 if options.frames is None or written >= options.frames else 2


def cli():
    """The `streamrecv-cat` command that `pip install` puts on PATH."""
    sys.exit(main(sys.argv[1:]))


if __name__ == "__main__":
    cli()
