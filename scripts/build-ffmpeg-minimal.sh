#!/usr/bin/env bash
# The FFmpeg libraries `make bundle` ships: Debian's own FFmpeg source (the version whose headers the binaries were
# compiled against, so the sonames and the ABI are the ones they link), with Debian's patches, configured with only
# what streamrecvd and streamrecvctl use. Debian's libavcodec59 links about 100 libraries (every codec, X11,
# cairo, …); this one links libva and nothing else outside glibc.
#
# What is kept, and why:
#   decoders h264, hevc and their parsers     the daemon; `send` and `inspect` probing raw files
#   hwaccels vaapi and nvdec (h264, hevc)     hwaccel = "vaapi" | "cuda"; nvdec loads libcuda at run time
#   demuxers h264, hevc, mov, matroska,       `streamrecvctl send` reads these files
#            mpegts
#   bsfs h264_mp4toannexb, hevc_mp4toannexb   `send` converts MP4/MKV packets to Annex B
#   muxers h264, hevc, rtp                    `send` writes raw Annex B or RTP
#   protocols file, pipe, tcp, udp, rtp       `send`'s destinations
#   swscale                                   snapshots
# and, for the GPU kit only (make gpu-kit; the bundle does not ship them), the ffmpeg program with what it needs
# to be the kit's reference and anchor on the device: `-hwaccel cuda -f null` (wrapped_avframe), `-f framemd5`
# (rawvideo), reading `streamrecvctl cat`'s y4m (yuv4mpegpipe demuxer, rawvideo decoder); libavfilter and
# libswresample, which the program links. Same sources and decoders: its decode is the bundle's.
#
# Prints the folder holding lib/ and include/. Cached in .build/bundle/ffmpeg-VERSION-KEY (KEY: a digest of this
# script), so a second `make bundle` does not rebuild.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "ffmpeg (minimal): $*" >&2; }

version=$(dpkg-query -W -f '${Version}' libavcodec-dev)
upstream=${version#*:}
upstream=${upstream%-*}
key=$(sha256sum "$0" | cut -c1-12)
prefix=$(pwd)/.build/bundle/ffmpeg-$upstream-$key
if [ -e "$prefix/.complete" ]; then echo "$prefix"; exit 0; fi

work=$(pwd)/.build/bundle/ffmpeg-work
rm -rf "$work" "$prefix"
mkdir -p "$work/apt/lists/partial"
# A private source list: this machine's own registry (read from apt), its deb-src indexes kept in .build, the
# system's apt configuration untouched. apt checks the signatures as for any source package.
apt-get indextargets --format '$(REPO_URI) $(RELEASE)' "Identifier: Packages" | sort -u |
    awk '{ print "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] " $1 " " $2 " main" }' \
    >"$work/apt/sources.list"
apt_options=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$work/apt/lists" -o APT::Sandbox::User=root)
say "fetching ffmpeg $version from $(awk '{ print $3 }' "$work/apt/sources.list" | sort -u | paste -sd ' ')"
apt-get "${apt_options[@]}" update -qq
(cd "$work" && apt-get "${apt_options[@]}" source --download-only -qq "ffmpeg=$version")
# dpkg-source applies Debian's patches: the libraries decode as Debian's do.
(cd "$work" && dpkg-source --no-check -x ffmpeg_*.dsc source >/dev/null)

cd "$work/source"
say "configuring"
./configure --prefix="$prefix" --libdir="$prefix/lib" --shlibdir="$prefix/lib" \
    --enable-shared --disable-static --enable-pic --disable-ffplay --disable-ffprobe --enable-ffmpeg --disable-doc \
    --disable-autodetect --disable-everything \
    --disable-avdevice --disable-postproc --enable-avfilter --enable-swresample \
    --enable-avcodec --enable-avformat --enable-avutil --enable-swscale \
    --enable-decoder=h264,hevc,rawvideo --enable-parser=h264,hevc \
    --enable-encoder=rawvideo,wrapped_avframe --enable-filter=null,format,scale \
    --enable-vaapi --enable-ffnvcodec --enable-nvdec \
    --enable-hwaccel=h264_vaapi,hevc_vaapi,h264_nvdec,hevc_nvdec \
    --enable-demuxer=h264,hevc,mov,matroska,mpegts,yuv4mpegpipe \
    --enable-bsf=h264_mp4toannexb,hevc_mp4toannexb \
    --enable-muxer=h264,hevc,rtp,framemd5,null \
    --enable-network --enable-protocol=file,pipe,tcp,udp,rtp \
    --extra-version="streamrecvd-minimal" >"$work/configure.log" 2>&1 ||
    { tail -20 "$work/configure.log" >&2; exit 1; }
say "building ($(nproc) jobs)"
make -j"$(nproc)" >"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; exit 1; }
make install >>"$work/build.log" 2>&1
# LGPL 2.1 (no --enable-gpl): the licence travels with the libraries.
cp COPYING.LGPLv2.1 "$prefix/"
rm -rf "$prefix/share" "$work"
touch "$prefix/.complete"
say "built in $prefix"
echo "$prefix"
