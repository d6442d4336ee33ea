#!/usr/bin/env bash
# The self-contained tarball on a system without FFmpeg (part of `make test`, after `make bundle`): unpacked into
# /opt/streamrecvd of a clean Debian 12 minbase root, where no FFmpeg library exists. Every library its binaries
# load resolves inside /opt/streamrecvd except glibc's; the shipped configuration passes --check-config; the
# daemon runs it plus an RTP H.265 stream; the bundled `streamrecvctl send` (the minimal libavformat: MP4 demuxer,
# Annex B filter, raw and RTP muxers) sends an H.264 MP4 over TCP and raw H.265 as RTP; the bundled `cat` reads
# both, bit-exact against FFmpeg's decode of the same files; the VA-API and NVDEC hwaccels are there to try.
# Skipped, loudly, where debootstrap cannot reach the registry.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /var/tmp/streamrecvd-bundle.XXXXXX)
say() { echo "bundle test: $*" >&2; }
source scripts/debian-root.sh
cleanup() {
    for mount in "$root/dev/shm" "$root/proc"; do umount "$mount" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
tarball=$(ls dist/streamrecvd-"$(cat VERSION)"-linux-"$(uname -m)".tar.xz)
make_debian_root || exit 0
mkdir -p "$root/opt/streamrecvd"
tar -xJf "$tarball" -C "$root/opt/streamrecvd" --strip-components=1
libraries=$(find "$root" -name 'libav*.so*' -not -path "$root/opt/streamrecvd/*" | wc -l)
say "$(basename "$tarball") unpacked in a clean root; FFmpeg libraries outside it there: $libraries"
[ "$libraries" = 0 ] || { say "FAILED: the root is not free of FFmpeg"; exit 1; }

# Each library resolved: from the bundle, or glibc's from the system (the one thing the bundle does not carry).
in_root ldd /opt/streamrecvd/bin/streamrecvd /opt/streamrecvd/bin/streamrecvctl >"$work/ldd.txt"
outside=$(awk '$2 == "=>" { print $1, $3 }' "$work/ldd.txt" |
    grep -Ev ' /opt/streamrecvd/bin/\.\./lib/|^(libc|libm|libpthread|libdl|librt)\.so' || true)
if [ -n "$outside" ] || grep -q 'not found' "$work/ldd.txt"; then
    say "FAILED: libraries resolved outside the bundle:"
    echo "$outside" >&2; grep 'not found' "$work/ldd.txt" >&2; exit 1
fi
in_root /opt/streamrecvd/bin/streamrecvd --check-config /opt/streamrecvd/etc/streamrecvd/streamrecvd.toml

ffmpeg -v error -f lavfi -i testsrc2=size=640x360:rate=30 -frames:v 60 -c:v libx264 -preset veryfast -bf 2 \
    -movflags +faststart "$root/tmp/desk.mp4"
ffmpeg -v error -f lavfi -i testsrc2=size=480x270:rate=30 -frames:v 45 -c:v libx265 -preset veryfast \
    -x265-params log-level=error:bframes=0 -f hevc "$root/tmp/cam.h265"
for clip in desk.mp4 cam.h265; do
    ffmpeg -v error -i "$root/tmp/$clip" -f framemd5 - | grep -v '^#' | awk -F, '{ print $NF }' \
        >"$work/${clip%.*}.reference"
done
{ cat "$root/opt/streamrecvd/etc/streamrecvd/streamrecvd.toml"
  printf '\n[[stream]]\nname = "cam"\nlisten = "rtp://127.0.0.1:5002"\ncodec = "h265"\n'
} >"$root/tmp/bundle.toml"
chmod 0644 "$root/tmp/bundle.toml" "$root/tmp/desk.mp4" "$root/tmp/cam.h265"

bin=/opt/streamrecvd/bin
unshare --mount --net bash -euo pipefail -c "
    ip link set lo up
    mount -t proc proc '$root/proc'
    mkdir -p '$root/dev/shm' && mount -t tmpfs -o mode=1777 tmpfs '$root/dev/shm'
    chroot --userspec=nobody:nogroup '$root' $bin/streamrecvd --config /tmp/bundle.toml >'$work/daemon.log' 2>&1 &
    daemon=\$!
    chroot --userspec=nobody:nogroup '$root' $bin/streamrecvctl cat desk --frames 60 --timeout 30 \
        >'$work/desk.y4m' 2>'$work/cat-desk.log' &
    desk=\$!
    chroot --userspec=nobody:nogroup '$root' $bin/streamrecvctl cat cam --frames 45 --timeout 30 \
        >'$work/cam.y4m' 2>'$work/cat-cam.log' &
    cam=\$!
    for _ in \$(seq 100); do
        [ \$(grep -c 'listening' '$work/daemon.log') -ge 2 ] && grep -q reading '$work/cat-desk.log' &&
            grep -q reading '$work/cat-cam.log' && break
        sleep 0.1
    done
    chroot --userspec=nobody:nogroup '$root' $bin/streamrecvctl send /tmp/desk.mp4 tcp://127.0.0.1:5000 --rate 60 \
        >'$work/send-desk.log' 2>&1
    chroot --userspec=nobody:nogroup '$root' $bin/streamrecvctl send /tmp/cam.h265 rtp://127.0.0.1:5002 --rate 60 \
        >'$work/send-cam.log' 2>&1
    wait \$desk
    wait \$cam
    kill -TERM \$daemon && wait \$daemon
" || { say "FAILED"; tail -20 "$work"/daemon.log "$work"/cat-*.log "$work"/send-*.log >&2; exit 1; }
# The minimal libavcodec carries the VA-API and NVDEC hwaccels: hwaccel = "auto" tries both (and finds no device
# here) rather than finding them absent from the decoder.
if ! grep -q 'software decoding (hwaccel = auto)' "$work/daemon.log" ||
    grep -Eq "(vaapi|cuda): libavcodec's decoder has no" "$work/daemon.log"; then
    say "FAILED: the bundle's libavcodec lacks a hwaccel"; grep 'hwaccel' "$work/daemon.log" >&2; exit 1
fi
for clip in desk cam; do
    ffmpeg -v error -i "$work/$clip.y4m" -f framemd5 - | grep -v '^#' | awk -F, '{ print $NF }' >"$work/$clip.ours"
    if ! cmp -s "$work/$clip.reference" "$work/$clip.ours"; then
        say "FAILED: $clip: $(wc -l <"$work/$clip.ours") frames read, they differ from FFmpeg's decode"
        diff "$work/$clip.reference" "$work/$clip.ours" | head >&2
        exit 1
    fi
done
say "passed: no FFmpeg in the root; H.264 from MP4 over TCP (60 frames) and H.265 over RTP (45 frames), sent and" \
    "read by the bundle's own streamrecvctl, bit-exact; daemon exited 0"
