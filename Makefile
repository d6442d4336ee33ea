# streamrecvd — build, test and run targets. `make test` and `make run` install what they need on a fresh
# Debian 12 machine (apt packages below; Swift 6.1 or newer must already be installed, e.g. /opt/swift).
SHELL := /bin/bash
export PATH := $(PATH):/opt/swift/usr/bin

# libavcodec/libavutil headers for the decoder, libavformat for `streamrecvctl send`, libswscale for snapshots; libsystemd for
# sd_notify and socket activation, libsrt for srt:// listeners, systemd for
# systemd-analyze and systemd-socket-activate in the tests; pkg-config to find them; ffmpeg (ffmpeg, ffprobe, libx264,
# libx265) is the tests' reference decoder and stream generator, and the sender in the README; gcc/g++ compile
# the shared-memory ABI header standalone in a test; GStreamer (x264enc, x265enc, the RTP payloaders, udpsink,
# tcpclientsink) is a real sender in the tests; passwd (useradd) and util-linux (setpriv, prlimit) make the
# throwaway users and descriptor limits of the local-user and resource tests. libssl (DTLS) and libsrtp2 (SRTP) for
# WebRTC ingest; webrtcbin (plugins-bad, gstreamer1.0-nice, its introspection data, python3-gi) is the tests' WHIP client.
APT_PACKAGES := libavcodec-dev libavutil-dev libavformat-dev libswscale-dev libsystemd-dev libsrt-gnutls-dev systemd pkg-config \
	libssl-dev libsrtp2-dev openssl curl \
	ffmpeg gcc g++ bc python3 python3-numpy python3-venv passwd util-linux \
	gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad \
	gstreamer1.0-plugins-ugly gstreamer1.0-nice gir1.2-gst-plugins-bad-1.0 python3-gi
# What `make bundle` needs besides: nasm for FFmpeg's assembly (without it the decoders are several times slower);
# libva-dev and libffmpeg-nvenc-dev for the VA-API and NVDEC hwaccels; dpkg-dev for apt-get source; patchelf for the
# relative RUNPATH.
BUNDLE_PACKAGES := nasm libva-dev libffmpeg-nvenc-dev dpkg-dev patchelf xz-utils
# The GStreamer element (make gst-plugin) and what it is built with.
GST_PLUGIN := .build/gstreamer/libgststreamrecv.so
GST_PACKAGES := libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev
# The PipeWire camera (make camera): streamrecv-camera, which `streamrecvctl camera` runs; C, against libpipewire.
CAMERA := .build/pipewire/streamrecv-camera
CAMERA_PACKAGES := libpipewire-0.3-dev
# The viewer window (make viewer): streamrecv-view, which `streamrecvctl view` runs; C, SDL2 (X11 and Wayland) and
# OpenGL 3.3 through libglvnd, its overlay's text through SDL_ttf in DejaVu Sans Mono.
VIEWER := .build/viewer/streamrecv-view
VIEWER_PACKAGES := libsdl2-dev libsdl2-ttf-dev libgl-dev fonts-dejavu-core
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
CONFIG := etc/streamrecvd/streamrecvd.toml

# Install layout (make install PREFIX=/usr DESTDIR=/tmp/pkg); CONFIGURATION=debug installs a debug build, and
# NO_BUILD=1 installs what is already built.
PREFIX ?= /usr/local
SYSCONFDIR ?= /etc
CONFIGURATION ?= release
BUILD_DIR = .build/$(CONFIGURATION)
# Where the systemd units go (Debian's package puts them in /lib/systemd/system).
UNITDIR ?= $(PREFIX)/lib/systemd/system
# Release binaries carry the Swift runtime (linked statically): they run where Swift is not installed.
SWIFT_BUILD = swift build -c $(CONFIGURATION) $(if $(filter release,$(CONFIGURATION)),--static-swift-stdlib -Xlinker -z -Xlinker now)

.PHONY: deps test check run bench clean install build soak fuzz deb bundle gpu-kit test-systemd gst-plugin camera viewer

## deps: install missing apt packages (idempotent: does nothing when all are present)
deps:
	@command -v swift >/dev/null || { echo "error: swift not found; install Swift 6.1+ and put it on PATH" >&2; exit 1; }
	@missing=""; for package in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$package 2>/dev/null | grep -q "ok installed" || missing="$$missing $$package"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

## check: the unit tests only (no daemon process, no packaging): did I break it? In about 15 s after a build.
## Needs what `make test` installs.
UNIT_TEST_MODULES = BitstreamTests|DecodingTests|SharedFramesTests|PipelineTests|StreamrecvctlTests|MediaSecurityTests|FrameFormatsTests
check:
	swift build --build-tests
	swift test --skip-build --disable-xctest --filter "$(UNIT_TEST_MODULES)"

## test: install dependencies, build, and run every test, then build the Debian package and the tarball and run each
## on a clean Debian 12 root (debootstrap; skipped with a loud message where the registry cannot be reached)
# gst-rtsp-server, through python3-gi, is the tests' RTSP camera (scripts/rtsp-camera.py).
# VLC 3.0 is a second, real RTSP server (it refuses interleaved TCP: RTSPFromVLCTests).
# aiortc is a second WebRTC stack beside webrtcbin (scripts/aiortc-whip-client.py: AiortcPeerTests). libx11-dev
# builds the clock drawn on the shared screen (scripts/screen-clock.c: RealScreenShareTests, make bench). PipeWire,
# WirePlumber and a D-Bus session bus (which WirePlumber needs) are the camera's session in PipeWireCameraTests, with
# pipewiresrc (gstreamer1.0-pipewire) and scripts/pipewire-camera-consumer.c (libpipewire, libssl's md5) reading it.
# The viewer (ViewerTests) runs on Xvfb with Openbox as its window manager (fullscreen is a window manager's to grant).
test: APT_PACKAGES += debhelper dpkg-dev lintian debootstrap $(BUNDLE_PACKAGES) $(GST_PACKAGES) python3-gi gir1.2-gst-rtsp-server-1.0 \
	vlc-bin vlc-plugin-base chromium python3-aiortc python3-opencv xvfb xdotool fonts-dejavu-core python3-numpy libx11-dev \
	$(CAMERA_PACKAGES) pipewire pipewire-bin wireplumber dbus-daemon gstreamer1.0-pipewire $(VIEWER_PACKAGES) openbox
test: deps
	$(MAKE) gst-plugin
	$(MAKE) camera
	$(MAKE) viewer
	swift build --build-tests
	swift test --disable-xctest
	# The system's Python: the one the apt packages (numpy, OpenCV) are for, whatever else is first on PATH.
	cd python && /usr/bin/python3 -m unittest -v test_streamrecv
	scripts/fuzz.sh 20000
	LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/lsan-suppressions.txt \
		swift test --disable-xctest --sanitize=address --scratch-path .build-asan --filter "BitstreamTests|SharedFramesTests|MediaSecurityTests"
	swift test --disable-xctest --sanitize=thread --scratch-path .build-tsan --filter "BitstreamTests|SharedFramesTests|PipelineTests"
	$(MAKE) deb
	scripts/test-deb-install.sh
	$(MAKE) bundle
	scripts/test-bundle.sh
	scripts/make-gpu-kit.sh
	scripts/test-gpu-kit.sh

## test-systemd: the packaged units under a real systemd (PID 1) in a qemu VM; not part of `make test`
test-systemd: APT_PACKAGES += debhelper dpkg-dev lintian debootstrap qemu-system-x86 e2fsprogs
test-systemd: deb
	scripts/test-systemd-vm.sh

## fuzz: the libFuzzer targets for FUZZ_RUNS executions each (docs/reliability.md has the long run's figures)
fuzz: deps
	scripts/fuzz.sh $(or $(FUZZ_RUNS),10000000)

## run: build and run the daemon on the default configuration (stream "desk" on tcp://127.0.0.1:5000)
run: deps
	$(SWIFT_BUILD) --product streamrecvd
	$(SWIFT_BUILD) --product streamrecvctl
	.build/release/streamrecvd --config $(CONFIG)

## bench: release benchmarks; rewrites docs/benchmarks.md and docs/latency.png
# Also needed by the benchmarks only: gnuplot (the latency plot) and gst-libav (avdec_h264, the GStreamer anchor).
bench: APT_PACKAGES += gnuplot-nox gstreamer1.0-libav $(GST_PACKAGES) libx11-dev gstreamer1.0-x $(VIEWER_PACKAGES)
bench: deps
	swift build -c release --product BitstreamBenchmark
	$(SWIFT_BUILD) --product streamrecvd
	$(SWIFT_BUILD) --product streamrecvctl
	scripts/bench.sh

## soak: one hour of paced 1080p60 into a release daemon (SOAK_SECONDS to change); not part of CI
soak: build
	scripts/soak.sh

## build: the daemon and the CLI (CONFIGURATION=release by default)
build: deps
	$(SWIFT_BUILD) --product streamrecvd
	$(SWIFT_BUILD) --product streamrecvctl

## deb: dist/streamrecvd_VERSION_ARCH.deb, plus streamrecvd-dev, python3-streamrecv, gstreamer1.0-streamrecv and
## streamrecvd-camera (debhelper, lintian)
deb: APT_PACKAGES += debhelper dpkg-dev lintian $(GST_PACKAGES) $(CAMERA_PACKAGES) $(VIEWER_PACKAGES)
deb: build gst-plugin camera viewer
	scripts/make-deb.sh

## bundle: dist/streamrecvd-VERSION-linux-ARCH.tar.xz, self-contained (a minimal FFmpeg built from Debian's source,
## relative RUNPATH); runs on any Linux with glibc 2.36 or newer
bundle: APT_PACKAGES += $(BUNDLE_PACKAGES)
bundle: build
	scripts/make-bundle.sh

## gpu-kit: dist/streamrecvd-gpu-kit-VERSION-ARCH.tar.xz, the bundle plus test media, references and a runner that
## checks the hardware path on a lent GPU machine in one or two calls (docs/gpu-kit.md); ≤ 60 MiB
gpu-kit: APT_PACKAGES += $(BUNDLE_PACKAGES)
gpu-kit: bundle
	scripts/make-gpu-kit.sh

## gst-plugin: .build/gstreamer/libgststreamrecv.so, the streamrecvsrc element (C, from streamrecv_shm.h alone)
gst-plugin: APT_PACKAGES += $(GST_PACKAGES)
gst-plugin: deps
	mkdir -p .build/gstreamer
	cc -std=gnu11 -O2 -g -fPIC -shared -Wall -Wextra -Werror -fvisibility=hidden -Wl,-z,now -Wl,-z,relro \
		-DSTREAMRECV_VERSION='"$(shell cat VERSION)"' -I Sources/CFrameRing/include \
		$$(pkg-config --cflags gstreamer-1.0 gstreamer-base-1.0 gstreamer-video-1.0) \
		gstreamer/gststreamrecvsrc.c gstreamer/ring-reader.c gstreamer/slot-video.c \
		-o $(GST_PLUGIN) \
		$$(pkg-config --libs gstreamer-1.0 gstreamer-base-1.0 gstreamer-video-1.0)

## camera: .build/pipewire/streamrecv-camera, the PipeWire camera `streamrecvctl camera` runs (C: libpipewire and
## streamrecv_shm.h, reading the ring as the GStreamer element does)
camera: APT_PACKAGES += $(CAMERA_PACKAGES)
camera: deps
	mkdir -p .build/pipewire
	cc -std=gnu11 -O2 -g -Wall -Wextra -Werror -D_FORTIFY_SOURCE=2 -Wl,-z,now -Wl,-z,relro \
		-I Sources/CFrameRing/include -I gstreamer $$(pkg-config --cflags libpipewire-0.3) \
		pipewire/streamrecv-camera.c pipewire/camera-format.c pipewire/camera-node.c pipewire/camera-send.c pipewire/camera-follow.c gstreamer/ring-reader.c \
		-o $(CAMERA) $$(pkg-config --libs libpipewire-0.3)

## viewer: .build/viewer/streamrecv-view, the window `streamrecvctl view` runs (C: SDL2, OpenGL 3.3, SDL_ttf, and
## streamrecv_shm.h, reading the ring as the GStreamer element does)
viewer: APT_PACKAGES += $(VIEWER_PACKAGES)
viewer: deps
	mkdir -p .build/viewer
	cc -std=gnu11 -O2 -g -Wall -Wextra -Werror -D_FORTIFY_SOURCE=2 -Wl,-z,now -Wl,-z,relro \
		-I Sources/CFrameRing/include -I gstreamer $$(pkg-config --cflags sdl2 SDL2_ttf) \
		viewer/streamrecv-view.c viewer/view-source.c viewer/view-render.c viewer/view-picture.c viewer/view-overlay.c \
		gstreamer/ring-reader.c -o $(VIEWER) $$(pkg-config --libs sdl2 SDL2_ttf) -lGL -lm -lpthread

## install: binaries, systemd units, default configuration (kept if present), C header, man pages, Python reader,
## the GStreamer element (into GStreamer's plugin folder for PREFIX), the PipeWire camera with its user unit and the
## viewer (with NO_BUILD=1 those three only when they were built)
GST_PLUGIN_DIR ?= $(PREFIX)/lib/$(shell gcc -print-multiarch)/gstreamer-1.0
install: $(if $(NO_BUILD),,build gst-plugin camera viewer)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(UNITDIR) $(DESTDIR)$(PREFIX)/lib/sysusers.d \
		$(DESTDIR)$(SYSCONFDIR)/streamrecvd $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man8 \
		$(DESTDIR)$(PREFIX)/lib/python3/dist-packages $(DESTDIR)$(PREFIX)/share/doc/streamrecvd/examples
	install -m 0755 $(BUILD_DIR)/streamrecvd $(BUILD_DIR)/streamrecvctl $(DESTDIR)$(PREFIX)/bin/
	for unit in streamrecvd.service streamrecvd@.service streamrecvd.socket streamrecvd-whip.socket streamrecvd-whip-media.socket; do \
		sed -e 's|/usr/bin/streamrecvd|$(PREFIX)/bin/streamrecvd|g' -e 's|/etc/streamrecvd|$(SYSCONFDIR)/streamrecvd|g' \
			systemd/$$unit > $(DESTDIR)$(UNITDIR)/$$unit; \
	done
	install -m 0644 systemd/streamrecvd.sysusers $(DESTDIR)$(PREFIX)/lib/sysusers.d/streamrecvd.conf
	# The configuration may hold passwords and passphrases: 0640, readable by the service's group (its owner stays
	# root). Installed for this system (no DESTDIR), the account is made now so that the group exists; a package
	# sets the group in its postinst.
	if [ ! -e $(DESTDIR)$(SYSCONFDIR)/streamrecvd/streamrecvd.toml ]; then \
		install -m 0640 etc/streamrecvd/streamrecvd.toml $(DESTDIR)$(SYSCONFDIR)/streamrecvd/streamrecvd.toml; \
		if [ -z "$(DESTDIR)" ]; then \
			getent group streamrecv >/dev/null || systemd-sysusers $(PREFIX)/lib/sysusers.d/streamrecvd.conf || true; \
			chgrp streamrecv $(SYSCONFDIR)/streamrecvd/streamrecvd.toml || \
				echo "note: no streamrecv group yet: chgrp streamrecv $(SYSCONFDIR)/streamrecvd/streamrecvd.toml once it exists" >&2; \
		fi; \
	fi
	install -m 0644 Sources/CFrameRing/include/streamrecv_shm.h $(DESTDIR)$(PREFIX)/include/
	install -m 0644 man/streamrecvctl.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 man/streamrecvd.toml.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	install -m 0644 man/streamrecvd.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	install -d $(DESTDIR)$(PREFIX)/lib/python3/dist-packages/streamrecv
	install -m 0644 python/streamrecv/*.py $(DESTDIR)$(PREFIX)/lib/python3/dist-packages/streamrecv/
	install -m 0644 docs/examples/consumer.c $(DESTDIR)$(PREFIX)/share/doc/streamrecvd/examples/
	install -m 0644 etc/streamrecvd/examples/whip.toml $(DESTDIR)$(PREFIX)/share/doc/streamrecvd/examples/
	# The demo token (the daemon warns that every user can read it: it is a demo; docs/senders.md says to write one).
	install -m 0644 etc/streamrecvd/examples/whip.token $(DESTDIR)$(PREFIX)/share/doc/streamrecvd/examples/
	if [ -e $(GST_PLUGIN) ]; then \
		install -d $(DESTDIR)$(GST_PLUGIN_DIR) && install -m 0644 $(GST_PLUGIN) $(DESTDIR)$(GST_PLUGIN_DIR)/; \
	fi
	if [ -e $(CAMERA) ]; then \
		install -d $(DESTDIR)$(PREFIX)/lib/streamrecvd $(DESTDIR)$(PREFIX)/lib/systemd/user && \
		install -m 0755 $(CAMERA) $(DESTDIR)$(PREFIX)/lib/streamrecvd/ && \
		sed -e 's|/usr/bin/streamrecvctl|$(PREFIX)/bin/streamrecvctl|g' systemd/user/streamrecv-camera@.service \
			> $(DESTDIR)$(PREFIX)/lib/systemd/user/streamrecv-camera@.service; \
	fi
	if [ -e $(VIEWER) ]; then \
		install -d $(DESTDIR)$(PREFIX)/lib/streamrecvd && install -m 0755 $(VIEWER) $(DESTDIR)$(PREFIX)/lib/streamrecvd/; \
	fi

clean:
	rm -rf .build .build-asan .build-tsan Fuzz/.build dist
