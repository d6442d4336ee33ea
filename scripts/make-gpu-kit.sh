#!/usr/bin/env bash
# `make gpu-kit`: dist/streamrecvd-gpu-kit-VERSION-ARCH.tar.xz, everything a lent GPU machine needs to check the
# hardware path in one or two calls, and nothing it must install (docs/gpu-kit.md):
#   the bundle (make bundle: the release binaries and the minimal FFmpeg with the NVDEC and VA-API hwaccels),
#   the ffmpeg program of that same FFmpeg build (the reference and the anchor: -hwaccel cuda -f null),
#   glibc's loader and libraries from this machine (used only where the device's glibc is older),
#   test media made here (H.264/H.265, 8/10-bit, 1080p/4K, B-frames, 16 references, a size change, a bit-depth
#   change, a codec switch) with the software decode's framemd5 of each by that ffmpeg,
#   and run.sh, the runner (bash and coreutils only).
# Fails above 60 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "gpu kit: $*" >&2; }
version=$(cat VERSION)
arch=$(uname -m)
name=streamrecvd-gpu-kit-$version-$arch
kit=.build/gpu-kit/$name
limit=$((60 * 1024 * 1024))
bundle=dist/streamrecvd-$version-linux-$arch.tar.xz
[ -e "$bundle" ] || { say "no $bundle: run make bundle first"; exit 1; }
ffmpeg=$(scripts/build-ffmpeg-minimal.sh)

rm -rf "$kit"
mkdir -p "$kit"/{media,reference,glibc} dist
tar -xJf "$bundle" -C "$kit" --strip-components=1
install -m 0755 "$ffmpeg/bin/ffmpeg" "$kit/bin/ffmpeg"
cp -P "$ffmpeg"/lib/lib{avfilter,swresample}.so.* "$kit/lib/"
for library in "$kit"/lib/lib{avfilter,swresample}.so.*; do
    [ -L "$library" ] && continue
    chmod u+w "$library"
    strip --strip-unneeded "$library"
    patchelf --set-rpath '$ORIGIN' "$library"
done
strip --strip-unneeded "$kit/bin/ffmpeg"
patchelf --set-rpath '$ORIGIN/../lib' "$kit/bin/ffmpeg"
# grep -c, not -q: see make-bundle.sh (pipefail and SIGPIPE).
if LD_LIBRARY_PATH= ldd "$kit/bin/ffmpeg" | grep -c 'not found' >/dev/null; then say "FAILED: the kit's ffmpeg misses libraries"; exit 1; fi
# glibc's loader and libraries: the bundle needs glibc 2.36; a device with an older one runs everything through
# this loader (run.sh decides).
loader=$(readlink -f /lib64/ld-linux-x86-64.so.2)
cp -L "$loader" "$kit/glibc/ld-linux-x86-64.so.2"
for soname in libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libresolv.so.2; do
    path=$(ldconfig -p | awk -v n="$soname" '$1 == n && /x86-64/ && !found { print $NF; found = 1 }')
    [ -n "$path" ] && cp -L "$path" "$kit/glibc/$soname"
done

# Test media, encoded here (x264/x265 are not in the minimal FFmpeg); each part of a clip that changes format is
# referenced on its own and the references concatenated.
work=$(mktemp -d /var/tmp/streamrecvd-gpu-kit.XXXXXX)
trap 'rm -rf "$work"' EXIT
encode() {  # encode OUTPUT CODEC SIZE FRAMES PIXFMT PARAMS
    local output=$1 codec=$2 size=$3 frames=$4 pixfmt=$5 params=$6 encoder
    if [ "$codec" = h264 ]; then
        encoder=(-c:v libx264 -preset veryfast -x264-params "$params" -f h264)
    else
        encoder=(-c:v libx265 -preset ultrafast -x265-params "log-level=error:$params" -f hevc)
    fi
    ffmpeg -v error -y -f lavfi -i "testsrc2=size=$size:rate=30" -frames:v "$frames" -pix_fmt "$pixfmt" "${encoder[@]}" "$output"
}
reference() {  # reference FILE: the software decode's md5 per frame, by the kit's own ffmpeg
    LD_LIBRARY_PATH=$kit/lib "$kit/bin/ffmpeg" -v error -i "$1" -f framemd5 - | grep -v '^#' | awk -F, '{ print $NF }' | tr -d ' '
}
# NAME CODEC TRANSPORTS DELIVERY PARTS... (PART: CODEC:SIZE:FRAMES:PIXFMT:PARAMS). DELIVERY: "one" connection
# for the whole clip (a format change in band), or "connections": each part by its own sender (the daemon
# recognises the codec from a connection's first parameter set: a codec switch is a new sender).
clips=(
    "h264-1080p h264 tcp,rtp one h264:1920x1080:120:yuv420p:keyint=60:bframes=3:ref=4"
    "h265-1080p h265 tcp,rtp one h265:1920x1080:120:yuv420p:keyint=60:bframes=3"
    "h264-1080p-lowdelay h264 tcp one h264:1920x1080:60:yuv420p:keyint=60:bframes=0"
    "h264-4k h264 tcp,rtp one h264:3840x2160:40:yuv420p:keyint=20:bframes=2"
    "h265-4k-10bit h265 tcp,rtp one h265:3840x2160:40:yuv420p10le:keyint=20:bframes=3"
    "h264-1080p-refs16 h264 tcp,rtp one h264:1920x1080:60:yuv420p:keyint=60:bframes=3:ref=16:b-pyramid=normal"
    "h264-720p-10bit h264 tcp one h264:1280x720:30:yuv420p10le:keyint=30:bframes=2"
    "h264-size-change h264 tcp one h264:1920x1080:30:yuv420p:keyint=30:bframes=2 h264:1280x720:30:yuv420p:keyint=30:bframes=2"
    "h265-depth-change h265 tcp one h265:1280x720:30:yuv420p:keyint=30:bframes=2 h265:1280x720:30:yuv420p10le:keyint=30:bframes=2"
    "codec-switch mixed tcp connections h264:1280x720:30:yuv420p:keyint=30:bframes=2 h265:1280x720:30:yuv420p:keyint=30:bframes=2"
)
: >"$kit/media/clips.txt"
for entry in "${clips[@]}"; do
    read -r clip codec transports delivery parts <<<"$entry"
    # Named as libavformat's raw demuxers know them (send probes the file); a codec switch is sent raw.
    case $codec in h264) output=$kit/media/$clip.h264 ;; h265) output=$kit/media/$clip.h265 ;; *) output=$kit/media/$clip.es ;; esac
    : >"$output"
    : >"$kit/reference/$clip.md5"
    index=0
    for part in $parts; do
        IFS=: read -r pcodec size frames pixfmt params <<<"$part"
        encode "$work/$clip-$index.es" "$pcodec" "$size" "$frames" "$pixfmt" "$params"
        reference "$work/$clip-$index.es" >>"$kit/reference/$clip.md5"
        if [ "$delivery" = connections ]; then
            cp "$work/$clip-$index.es" "$kit/media/$clip.part$index.$([ "$pcodec" = h264 ] && echo h264 || echo h265)"
        else
            cat "$work/$clip-$index.es" >>"$output"
        fi
        index=$((index + 1))
    done
    first=${parts%% *}
    IFS=: read -r _ size _ _ _ <<<"$first"
    [ "$delivery" = connections ] && rm -f "$output"
    echo "$clip $codec $transports ${size%x*} ${size#*x} $(wc -l <"$kit/reference/$clip.md5") $index $delivery" >>"$kit/media/clips.txt"
    say "$clip: $(wc -l <"$kit/reference/$clip.md5") frames in $index part(s), $(cat "$kit/media/$clip".* | wc -c | awk '{ print int($1 / 1024) }') KiB"
done
install -m 0755 scripts/gpu-kit/run.sh "$kit/run.sh"
install -m 0644 docs/gpu-kit.md "$kit/README.md"
tar -C .build/gpu-kit --owner=0 --group=0 --sort=name -cJf "dist/$name.tar.xz.part" "$name"
mv "dist/$name.tar.xz.part" "dist/$name.tar.xz"
size=$(stat -c %s "dist/$name.tar.xz")
say "dist/$name.tar.xz: $((size / 1024 / 1024)) MiB ($size bytes); $(wc -l <"$kit/media/clips.txt") clips"
if [ "$size" -gt "$limit" ]; then say "FAILED: larger than 60 MiB"; exit 1; fi
