# streamrecvd — build, test and run targets. `make test` and `make run` install what they need on a fresh
# Debian 12 machine (apt packages below; Swift 6.1 or newer must already be installed, e.g. /opt/swift).
SHELL := /bin/bash
export PATH := $(PATH):/opt/swift/usr/bin

# ffmpeg brings ffmpeg/ffprobe with libx264 and libx265: the tests' reference decoder and stream generator.
APT_PACKAGES := ffmpeg
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SAMPLE := .build/sample/desk.h264

.PHONY: deps test run bench clean

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

## test: install dependencies, build, and run every test
test: deps
	swift build --build-tests
	swift test --disable-xctest

## run: build streamrecvctl and inspect a generated 1080p sample stream (the daemon arrives with issue 3)
run: deps
	swift build -c release --product streamrecvctl
	@mkdir -p $(dir $(SAMPLE))
	@[ -s $(SAMPLE) ] || ffmpeg -v error -y -f lavfi -i testsrc2=size=1920x1080:rate=30 -frames:v 60 \
		-c:v libx264 -preset veryfast -tune zerolatency -g 30 -f h264 $(SAMPLE)
	.build/release/streamrecvctl inspect $(SAMPLE)

## bench: release benchmarks; rewrites docs/benchmarks.md
bench: deps
	swift build -c release --product BitstreamBenchmark
	scripts/bench.sh

clean:
	rm -rf .build
