#!/usr/bin/env bash
# The Debian package on a clean Debian 12 (part of `make test`): a debootstrap minbase root, with no Swift and no
# FFmpeg, where apt resolves the package's dependencies from the registry. There the installed default
# configuration passes --check-config, the installed daemon runs it as the service account, and a stream sent
# from outside the root reaches the installed `streamrecvctl cat` and the installed GStreamer element
# (gstreamer1.0-streamrecv, run by gst-launch-1.0) bit-exact against FFmpeg's decode.
# The daemon and the sender share a network namespace of their own; the root's /dev/shm is a private tmpfs.
# Skipped, loudly, where debootstrap cannot reach the registry.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /var/tmp/streamrecvd-install.XXXXXX)
say() { echo "deb install test: $*" >&2; }
source scripts/debian-root.sh
cleanup() {
    for mount in "$root/dev/shm" "$root/proc"; do umount "$mount" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
make_debian_root || exit 0
say "clean root: $(du -sh "$root" | cut -f1); Swift there: $(ls -d "$root"/opt/swift "$root"/usr/lib/swift 2>/dev/null | wc -l) folders"
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "./tmp/$(basename "$deb")" \
    >"$work/apt.log" 2>&1 || { tail -30 "$work/apt.log" >&2; exit 1; }
say "installed $(basename "$deb"): $(grep -c '^Setting up' "$work/apt.log") packages set up"
# The GStreamer element's package, with gst-launch-1.0 to run it (its Depends alone must be enough to load it).
gst_deb=$(ls dist/gstreamer1.0-streamrecv_*_"$(dpkg --print-architecture)".deb | head -1)
cp "$gst_deb" "$root/tmp/"
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "./tmp/$(basename "$gst_deb")" gstreamer1.0-tools >"$work/apt-gst.log" 2>&1 ||
    { tail -30 "$work/apt-gst.log" >&2; exit 1; }
if ! in_root gst-inspect-1.0 streamrecvsrc >"$work/inspect.txt" 2>&1; then
    say "FAILED: streamrecvsrc does not load"; cat "$work/inspect.txt" >&2; exit 1
fi
say "installed $(basename "$gst_deb"): gst-inspect-1.0 finds" \
    "$(grep -m1 'Long-name' "$work/inspect.txt" | sed 's/ *Long-name *//')"
# The camera's package: its Depends alone load libpipewire, its modules and client configuration; `streamrecvctl
# camera` finds it in /usr/lib/streamrecvd and, with no PipeWire running in the root, says so (exit status 1).
camera_deb=$(ls dist/streamrecvd-camera_*_"$(dpkg --print-architecture)".deb | head -1)
cp "$camera_deb" "$root/tmp/"
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "./tmp/$(basename "$camera_deb")" >"$work/apt-camera.log" 2>&1 || { tail -30 "$work/apt-camera.log" >&2; exit 1; }
camera_status=0
in_root env XDG_RUNTIME_DIR=/tmp streamrecvctl camera desk >"$work/camera.log" 2>&1 || camera_status=$?
if [ "$camera_status" != 1 ] || ! grep -q 'cannot reach PipeWire' "$work/camera.log"; then
    say "FAILED: streamrecvctl camera without PipeWire: status $camera_status"; cat "$work/camera.log" >&2; exit 1
fi
[ -e "$root/usr/lib/systemd/user/streamrecv-camera@.service" ] || { say "FAILED: no camera user unit"; exit 1; }
say "installed $(basename "$camera_deb"): streamrecvctl camera runs it ($(head -c 120 "$work/camera.log"))"
# The viewer's package: its Depends alone load SDL2, OpenGL and SDL_ttf; `streamrecvctl view` finds it and, with no
# display in the root, says so (exit status 1).
viewer_deb=$(ls dist/streamrecvd-viewer_*_"$(dpkg --print-architecture)".deb | head -1)
cp "$viewer_deb" "$root/tmp/"
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "./tmp/$(basename "$viewer_deb")" >"$work/apt-viewer.log" 2>&1 || { tail -30 "$work/apt-viewer.log" >&2; exit 1; }
viewer_status=0
in_root env -u DISPLAY -u WAYLAND_DISPLAY streamrecvctl view desk >"$work/viewer.log" 2>&1 || viewer_status=$?
if [ "$viewer_status" != 1 ] || ! grep -q 'cannot reach a display' "$work/viewer.log"; then
    say "FAILED: streamrecvctl view without a display: status $viewer_status"; cat "$work/viewer.log" >&2; exit 1
fi
say "installed $(basename "$viewer_deb"): streamrecvctl view runs it ($(grep -m1 'cannot reach' "$work/viewer.log" | head -c 120))"
if in_root ldd /usr/bin/streamrecvd /usr/bin/streamrecvctl | grep -Ei 'swift|foundation|not found'; then
    say "FAILED: the installed binaries need libraries the root does not have"; exit 1
fi
in_root getent passwd streamrecv >/dev/null || { say "FAILED: no service account"; exit 1; }
in_root streamrecvd --check-config /etc/streamrecvd/streamrecvd.toml
# The configuration may hold secrets: not readable by every user (the daemon reads it through its group).
mode=$(in_root stat -c '%a %U:%G' /etc/streamrecvd/streamrecvd.toml)
[ "$mode" = "640 root:streamrecv" ] || { say "FAILED: /etc/streamrecvd/streamrecvd.toml is $mode, not 640 root:streamrecv"; exit 1; }
say "configuration installed $mode"

ffmpeg -v error -f lavfi -i testsrc2=size=640x360:rate=30 -frames:v 60 -c:v libx264 -preset veryfast \
    -x264-params aud=1:bframes=2 -f h264 "$work/clip.h264"
ffmpeg -v error -i "$work/clip.h264" -f framemd5 - | grep -v '^#' | awk -F, '{ print $NF }' >"$work/reference.md5"
ffmpeg -v error -i "$work/clip.h264" -pix_fmt nv12 -f framemd5 - | grep -v '^#' | awk -F, '{ print $NF }' \
    >"$work/reference-nv12.md5"
streamrecvctl=$(pwd)/.build/release/streamrecvctl
unshare --mount --net bash -euo pipefail -c "
    ip link set lo up
    mount -t proc proc '$root/proc'
    mkdir -p '$root/dev/shm' && mount -t tmpfs -o mode=1777 tmpfs '$root/dev/shm'
    chroot --userspec=streamrecv:streamrecv '$root' /usr/bin/streamrecvd --config /etc/streamrecvd/streamrecvd.toml \
        >'$work/daemon.log' 2>&1 &
    daemon=\$!
    chroot '$root' /usr/bin/streamrecvctl cat desk --frames 60 --timeout 30 >'$work/out.y4m' 2>'$work/cat.log' &
    cat=\$!
    timeout 60 chroot '$root' env GST_DEBUG=streamrecvsrc:4 GST_DEBUG_NO_COLOR=1 HOME=/tmp gst-launch-1.0 -q \
        streamrecvsrc stream=desk num-buffers=60 ! filesink location=/tmp/gst.nv12 >'$work/gst.log' 2>&1 &
    gst=\$!
    for _ in \$(seq 100); do
        grep -q 'listening' '$work/daemon.log' && grep -q reading '$work/cat.log' && grep -q 'attached to' '$work/gst.log' &&
            break
        sleep 0.1
    done
    '$streamrecvctl' send '$work/clip.h264' tcp://127.0.0.1:5000 --rate 60 >'$work/send.log' 2>&1
    wait \$cat
    wait \$gst
    kill -TERM \$daemon && wait \$daemon
" || { say "FAILED"; tail -20 "$work/daemon.log" "$work/cat.log" "$work/gst.log" "$work/send.log" >&2; exit 1; }
ffmpeg -v error -i "$work/out.y4m" -f framemd5 - | grep -v '^#' | awk -F, '{ print $NF }' >"$work/ours.md5"
if ! cmp -s "$work/reference.md5" "$work/ours.md5"; then
    say "FAILED: $(wc -l <"$work/ours.md5") frames read, they differ from FFmpeg's decode"
    diff "$work/reference.md5" "$work/ours.md5" | head >&2
    exit 1
fi
ffmpeg -v error -f rawvideo -pix_fmt nv12 -video_size 640x360 -i "$root/tmp/gst.nv12" -f framemd5 - | grep -v '^#' |
    awk -F, '{ print $NF }' >"$work/gst.md5"
if ! cmp -s "$work/reference-nv12.md5" "$work/gst.md5"; then
    say "FAILED: streamrecvsrc: $(wc -l <"$work/gst.md5") frames read, they differ from FFmpeg's decode"
    exit 1
fi
say "passed: 60 frames through the installed daemon to the installed streamrecvctl cat and streamrecvsrc," \
    "bit-exact; daemon exited 0"
