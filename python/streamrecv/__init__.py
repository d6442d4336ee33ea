"""Read decoded frames from a running streamrecvd: pure Python, no build step.

    import streamrecv
    with streamrecv.FrameRing("desk") as ring:
        for frame in ring.frames(timeout=10):
            print(frame.sequence, frame.width, frame.height, frame.pixel_format)
            y = frame.plane(0)             # bytes of the luma plane, rows without padding
            array = frame.numpy_planes()   # numpy views (when numpy is installed)

The ring lives in /dev/shm/streamrecv-NAME (layout: docs/shm-abi.md, C header streamrecv_shm.h). A reader never
slows the daemon down: it copies each frame out under the slot's seqlock and retries a copy the writer tore;
a reader that falls more than `slot_count` frames behind is lapped (`ring.lapped` counts the frames it missed).
Waiting uses the header's futex (through ctypes), so an idle reader costs nothing.

Nothing in the object is trusted (anyone can create one under /dev/shm): the header's geometry is checked once
against the object's size and only the checked values are used, every slot is checked before its planes are, and
anything inconsistent raises RingError. Copies are read with pread(2), never through a mapping, so an object
truncated under the reader cannot kill it with SIGBUS (only the futex word is mapped: a futex on a vanished page
fails harmlessly). When the daemon moves the stream to a new object (a larger format, damage, a restart with
other settings), the reader opens the name again and goes on.

Borrowed frames: `ring.frames(borrow=True)` (or `ring.read(n, borrow=True)`) yields frames whose planes are read
where they lie in the ring, no copy: `numpy_planes()` are views of the slot. The writer never waits, so it may reuse
the slot at any moment: a result computed from a borrowed frame counts only if `frame.still_valid()` says so
afterwards (copy what you keep). Borrowing maps the whole object, so it is allowed only when nobody else can
truncate it under the mapping (which would kill the reader with SIGBUS): an owner that is trusted (the daemon's
`streamrecv`, root, yourself, or `trusted_uids`), no write permission for group or others, one name, all of it
there. The owner (the daemon's user) or root can still truncate it, which the daemon never does and an operator's
`truncate` would: a borrowing reader then dies of SIGBUS where a copying one gets a RingError. It relies on x86-64
keeping loads in order.

Command line: `python -m streamrecv NAME [--frames N] > frames.yuv` writes tightly packed planes, as the C example;
it waits for a ring that is not there yet (`FrameRing.wait_for`). `streamrecv.to_rgb` / `to_bgr` convert a frame
for OpenCV and numpy users (numpy needed; OpenCV used when installed).
"""

import ctypes
import errno
import mmap
import os
import platform
import pwd
import stat
import struct
import time

from .layout import (  # noqa: F401  (the layout is part of this package's interface)
    ABI_VERSION, FLAG_CORRUPT, FLAG_DISCONTINUITY, FLAG_HFLIP, FLAG_KEYFRAME, FLAG_VFLIP, HEADER, HEADER_FIELDS_END,
    HEADER_SIZE, MAGIC, MAX_PLANES, PIXEL_FORMATS, PIXEL_LAYOUTS, SLOT, SLOT_SIZE, STATE_REPLACED, STATE_STOPPED, STATES,
    _check_header, _check_slot, _unpack, _unpack_all, expected_planes,
)
from .frames import BorrowedFrame, Frame


__version__ = "0.1.0"


class RingError(Exception):
    """The object is missing, not a ring, of another ABI version, or inconsistent (damaged or forged)."""


class RingMissing(RingError):
    """No object of that name (yet): the daemon has not made the ring, or has removed it."""


class _Shrunk(Exception):
    """The object became smaller than what was read from it."""


class _Futex:
    """FUTEX_WAIT on a shared word, through libc's syscall(2) (Python has no futex binding)."""

    SYS_FUTEX = {"x86_64": 202, "aarch64": 98, "armv7l": 240, "riscv64": 98}.get(platform.machine())

    def __init__(self):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.syscall.restype = ctypes.c_long

    def wait(self, address, expected, timeout):
        """Sleeps while the 32-bit word at `address` equals `expected`, at most `timeout` seconds."""
        if self.SYS_FUTEX is None:
            time.sleep(min(timeout, 0.005))  # unknown architecture: poll
            return
        seconds = int(timeout)
        spec = (ctypes.c_long * 2)(seconds, int((timeout - seconds) * 1e9))
        # FUTEX_WAIT (0), not FUTEX_PRIVATE: the word lives in memory shared with another process.
        self.libc.syscall(ctypes.c_long(self.SYS_FUTEX), ctypes.c_void_p(address), ctypes.c_int(0),
                          ctypes.c_uint32(expected), spec, None, ctypes.c_int(0))


def _trusted_owners(extra):
    """Who may own an object this reader maps whole (which nobody else may write: see _map_whole)."""
    owners = {os.geteuid(), 0} | set(extra or ())
    try:
        owners.add(pwd.getpwnam("streamrecv").pw_uid)
    except KeyError:
        pass
    return owners


class FrameRing:
    """A read-only attachment to one stream's ring."""

    def __init__(self, name=None, shm_name=None, trusted_uids=None):
        self.shm_name = shm_name or "streamrecv-" + name
        # A name under /dev/shm, never a path: O_NOFOLLOW guards only the last part, so a '/' could pass through a
        # directory link another user planted there, and '..' out of it.
        if not self.shm_name or "/" in self.shm_name or "\0" in self.shm_name or self.shm_name in (".", ".."):
            raise RingError("%r is not a plain name under /dev/shm" % self.shm_name)
        self._trusted_uids = trusted_uids
        self._mapping = None
        self.path = "/dev/shm/" + self.shm_name
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.mmap.restype = ctypes.c_void_p
        self._libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                    ctypes.c_long]
        self._libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self._fd = None
        self._address = None
        self.lapped = 0
        self._futex = _Futex()
        self._attach()

    @classmethod
    def wait_for(cls, name=None, shm_name=None, timeout=None, waiting=None, trusted_uids=None):
        """Attaches once the ring exists. Consumers often start before the daemon has made it: socket activation
        starts the daemon at the first connection, and a restart with other settings makes a new object. Looks
        every 50 ms and calls `waiting()` (if given) once, when the first look finds nothing. Raises RingError at
        once for an object that is not a ring, TimeoutError when `timeout` seconds pass without one (None: wait
        for ever)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        told = False
        while True:
            try:
                return cls(name=name, shm_name=shm_name, trusted_uids=trusted_uids)
            except RingMissing:
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError("%s did not appear within %g s" % (
                        "/dev/shm/" + (shm_name or "streamrecv-" + name), timeout)) from None
                if not told and waiting is not None:
                    waiting()
                told = True
                time.sleep(0.05)

    def _attach(self):
        """Opens the object behind the name and checks it; raises RingError (nothing is kept) when it is no ring."""
        try:
            # O_NONBLOCK: a FIFO planted under the name must not hang open(2).
            descriptor = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as error:
            kind = RingMissing if error.errno == errno.ENOENT else RingError
            raise kind("%s: %s" % (self.path, error.strerror)) from None
        try:
            status = os.fstat(descriptor)
            if not stat.S_ISREG(status.st_mode) or status.st_size < HEADER_SIZE:
                raise RingError("%s: not a plain object as large as a ring header" % self.path)
            # The writer reserves every page: a sparse object claiming terabytes is a forgery.
            if status.st_blocks * 512 < status.st_size:
                raise RingError("%s: not a ring (a sparse object)" % self.path)
            raw = os.pread(descriptor, HEADER_FIELDS_END, 0)
            if len(raw) < HEADER_FIELDS_END:
                raise RingError("%s: shrank while being read" % self.path)
            geometry, problem = _check_header(self._parse_header(raw), status.st_size)
            if problem:
                raise RingError("%s: not a streamrecv ring of ABI %d: %s" % (self.path, ABI_VERSION, problem))
            # Only the header page is mapped, for the futex word; nothing is read through the mapping.
            address = self._libc.mmap(None, HEADER_SIZE, mmap.PROT_READ, mmap.MAP_SHARED, descriptor, 0)
            if address in (None, ctypes.c_void_p(-1).value):
                raise RingError("%s: mmap: %s" % (self.path, os.strerror(ctypes.get_errno())))
        except BaseException:
            os.close(descriptor)
            raise
        self.close()
        self._fd, self._address, self._inode, self._geometry = descriptor, address, status.st_ino, geometry
        self._owner = status.st_uid
        self.slot_count = geometry["slot_count"]
        self._wake_address = address + HEADER["wake_word"][0]

    def close(self):
        # Borrowed frames still alive keep their mapping (they hold it); this reader lets go of it.
        self._mapping = None
        if getattr(self, "_address", None) is not None:
            self._libc.munmap(self._address, HEADER_SIZE)
            self._address = None
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _pread(self, size, offset):
        data = os.pread(self._fd, size, offset)
        if len(data) < size:
            raise _Shrunk()
        return data

    @staticmethod
    def _parse_header(raw):
        values = _unpack_all(HEADER, raw, 0)
        for key in ("stream_name", "codec", "source_status"):
            values[key] = values[key].split(b"\0", 1)[0].decode("utf-8", "replace")
        values["state"] = STATES.get(values["stream_state"], "unknown")
        return values

    def header(self):
        """The header's fields as a dict (its first HEADER_FIELDS_END bytes, read in one go). `source_status`: where
        a pulled (rtsp://) stream's source stands, "" otherwise."""
        try:
            return self._parse_header(self._pread(HEADER_FIELDS_END, 0))
        except _Shrunk:
            raise RingError("%s: the object shrank (truncated by someone)" % self.path) from None

    @property
    def latest_sequence(self):
        return self.header()["latest_sequence"]

    def replaced(self):
        """Whether the name now leads to another object (the daemon moved the stream on)."""
        try:
            return os.stat(self.path).st_ino != self._inode
        except OSError:
            return False

    def read(self, sequence, borrow=False):
        """Frame `sequence` if the ring still holds it: a Frame (with `borrow`, a BorrowedFrame: no copy), None when
        not published yet (or torn 64 times in a row, which only a forged ring does: try again later), or the int
        sequence of the oldest frame still held when it was overwritten (lapped). Raises RingError on a damaged
        slot, and on borrowing from an object no trusted user owns."""
        if borrow:
            return self._borrow(sequence)
        geometry = self._geometry
        count = geometry["slot_count"]
        index = (sequence - 1) % count
        slot_base = geometry["slot_table_offset"] + index * SLOT_SIZE
        data_base = geometry["slot_data_offset"] + index * geometry["slot_data_stride"]
        try:
            for _ in range(64):
                latest = self.header()["latest_sequence"]
                if sequence > latest:
                    return None
                if latest - sequence >= count:
                    return latest - count + 1
                begin = struct.unpack("<Q", self._pread(8, slot_base))[0]
                if begin == 0:
                    return latest + 1  # never written, though latest says the frame exists: this object began after it
                if begin & 1:
                    # Being written, which the writer only ever does with frame latest + 1: a frame before latest is
                    # being overwritten (lost; the next one is whole). Frame `latest` itself: wait for the futex
                    # (one slot, or a writer that died mid-write).
                    return sequence + 1 if sequence < latest else None
                raw = self._pread(SLOT_SIZE, slot_base)
                slot = _unpack_all(SLOT, raw, 0)
                problem = _check_slot(slot, geometry) if slot["sequence"] == sequence else None
                data = None
                if slot["sequence"] == sequence and problem is None:
                    data = bytearray(slot["data_size"])
                    if os.preadv(self._fd, [data], data_base) < len(data):
                        raise _Shrunk()
                if struct.unpack("<Q", self._pread(8, slot_base))[0] != begin:
                    continue  # torn: the writer was here meanwhile
                if slot["sequence"] == sequence:
                    if problem:
                        raise RingError("%s: frame %d is not a valid frame: %s" % (self.path, sequence, problem))
                    return Frame(slot, data)
                return self._moved_on(index, slot["sequence"], sequence, self.header()["latest_sequence"])
            return None
        except _Shrunk:
            raise RingError("%s: the object shrank (truncated by someone)" % self.path) from None

    def _moved_on(self, index, held, sequence, latest):
        """Where to read next when slot `index` holds frame `held` instead of `sequence`; `latest` read after the
        slot. Newer: lapped, to the oldest frame the slot's own frame leaves held (the frame that overwrote this one
        is `count` later). Older: this object began after that frame. A real writer publishes latest = H - 1
        before it writes frame H, so a slot ahead of latest + 1, or a newer frame that cannot be in this slot, is a
        damaged or forged ring, which would otherwise send the reader back and round for ever."""
        count = self._geometry["slot_count"]
        if held > latest + 1 or (held > sequence and held - count + 1 <= sequence):
            raise RingError("%s: slot %d claims frame %d while the ring's latest is %d: not a valid ring"
                            % (self.path, index, held, latest))
        return held - count + 1 if held > sequence else latest + 1

    def _map_whole(self):
        """The whole object mapped read-only, for borrowing. Refused unless nobody but a trusted owner can shrink it
        under the mapping (SIGBUS): a trusted owner, no write permission for group or others, one name (a hard link
        made by someone who can write a trusted object is theirs to truncate), and all of it there."""
        if self._mapping is None:
            if platform.machine() not in ("x86_64", "AMD64"):
                raise RingError("%s: borrowing frames needs x86-64 (its loads stay in order, which the seqlock check "
                                "relies on from Python); read copies instead" % self.path)
            status = os.fstat(self._fd)
            if status.st_uid not in _trusted_owners(self._trusted_uids):
                problem = "owned by uid %d, not a trusted user" % status.st_uid
            elif status.st_mode & 0o022:
                problem = "writable by its group or others (mode %04o)" % (status.st_mode & 0o7777)
            elif status.st_nlink != 1:
                problem = "it has %d names (hard links)" % status.st_nlink
            elif status.st_size < self._geometry["total_size"]:
                problem = "it shrank"
            else:
                problem = None
            if problem:
                raise RingError("%s: %s: borrowing maps the whole object, which could be truncated under the reader "
                                "(SIGBUS); read copies, or pass trusted_uids for an owner you trust" % (self.path, problem))
            try:
                self._mapping = mmap.mmap(self._fd, self._geometry["total_size"], mmap.MAP_SHARED, mmap.PROT_READ)
            except (ValueError, OSError) as error:
                raise RingError("%s: cannot map it for borrowing: %s" % (self.path, error)) from None
        return self._mapping

    def borrowable(self):
        """None when frames can be borrowed from this ring (see `frames(borrow=True)`), else why not."""
        try:
            self._map_whole()
            return None
        except RingError as error:
            return str(error)

    def _header_word(self, name):
        """One header field, through the mapping when there is one (no system call)."""
        if self._mapping is None:
            return self.header()[name]
        return _unpack(HEADER, self._mapping, 0, name)

    def _borrow(self, sequence):
        """read(), but the frame's planes stay where they are: a BorrowedFrame over the slot."""
        mapping = self._map_whole()
        geometry = self._geometry
        count = geometry["slot_count"]
        index = (sequence - 1) % count
        slot_base = geometry["slot_table_offset"] + index * SLOT_SIZE
        data_base = geometry["slot_data_offset"] + index * geometry["slot_data_stride"]
        for _ in range(64):
            latest = _unpack(HEADER, mapping, 0, "latest_sequence")
            if sequence > latest:
                return None
            if latest - sequence >= count:
                return latest - count + 1
            begin = struct.unpack_from("<Q", mapping, slot_base)[0]
            if begin == 0:
                return latest + 1
            if begin & 1:
                return sequence + 1 if sequence < latest else None
            slot = _unpack_all(SLOT, mapping, slot_base)
            if struct.unpack_from("<Q", mapping, slot_base)[0] != begin:
                continue  # torn: the writer was here meanwhile
            if slot["sequence"] != sequence:
                return self._moved_on(index, slot["sequence"], sequence, _unpack(HEADER, mapping, 0, "latest_sequence"))
            problem = _check_slot(slot, geometry)
            if problem:
                raise RingError("%s: frame %d is not a valid frame: %s" % (self.path, sequence, problem))
            data = memoryview(mapping)[data_base:data_base + slot["data_size"]]
            return BorrowedFrame(slot, data, mapping, slot_base, begin)
        return None

    def _follow(self, patience=2.0):
        """Opens the name again once it leads to a new object; False if none came within `patience` seconds."""
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            if self.replaced():
                try:
                    self._attach()
                    return True
                except RingError:
                    pass
            time.sleep(0.01)
        return False

    @staticmethod
    def _patience(deadline):
        """How long to wait for a replacement object: 2 s, and never past the reader's deadline."""
        return 2.0 if deadline is None else max(0.0, min(2.0, deadline - time.monotonic()))

    def frames(self, timeout=None, start=None, borrow=False):
        """Yields frames from `start` (default: the next one published) on; ends when the daemon stops the
        stream or no frame arrives for `timeout` seconds. Follows the stream to a new object when the daemon
        moves it (or the object is truncated and re-created). With `borrow`, BorrowedFrames: check
        `still_valid()` after using one."""
        if borrow:
            self._map_whole()  # refused at once, not after waiting for a replacement
        wanted = start if start is not None else self.latest_sequence + 1
        deadline = None if timeout is None else time.monotonic() + timeout
        laps = 0
        waits = 0
        looked_at = 0.0
        while True:
            try:
                seen = self._header_word("wake_word")
                result = self.read(wanted, borrow)
                state = self._header_word("stream_state") if result is None else None
            except RingError:
                # The deadline holds across moves too: an object replaced again and again (by someone who owns the
                # name) must not keep the reader for ever.
                if self._follow(self._patience(deadline)):
                    if deadline is not None and time.monotonic() >= deadline:
                        return
                    continue
                raise
            if isinstance(result, Frame):
                yield result
                laps = waits = 0
                wanted += 1
                deadline = None if timeout is None else time.monotonic() + timeout
                continue
            if isinstance(result, int):
                self.lapped += max(0, result - wanted)
                wanted = result
                # A real writer laps a reader a few times in a row at most; a forged ring (every slot "being
                # written", its latest moving on) can do it for ever: from the 64th lap, back off and keep the deadline.
                laps += 1
                if laps > 64:
                    time.sleep(0.001)
                    if deadline is not None and time.monotonic() >= deadline:
                        return
                continue
            # The name is looked up at most every 50 ms (a stat(2) a wait would be most of a borrowing reader's
            # cost): a header that says nothing is what a truncated object's looks like.
            now = time.monotonic()
            looked = state == STATE_REPLACED or now - looked_at >= 0.05
            looked_at = now if looked else looked_at
            if looked and (state == STATE_REPLACED or self.replaced()) and self._follow(self._patience(deadline)):
                if deadline is not None and time.monotonic() >= deadline:
                    return
                continue
            if state == STATE_STOPPED:
                return
            remaining = 1.0 if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                return
            # A real writer wakes readers once a frame; a forger can change the wake word for ever, which would make
            # this loop spin: from the 64th wait in a row without a frame, each one starts with a short sleep.
            waits += 1
            if waits > 64:
                time.sleep(0.001)
            # In short waits: the waiters of a truncated object are never woken, so the name is checked between.
            self._futex.wait(self._wake_address, seen, min(remaining, 0.2))


from .color import to_bgr, to_rgb  # noqa: E402  (needs Frame above)

__all__ = ["FrameRing", "Frame", "BorrowedFrame", "RingError", "RingMissing", "to_rgb", "to_bgr", "PIXEL_FORMATS"]
