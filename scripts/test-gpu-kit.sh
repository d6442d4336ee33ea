#!/usr/bin/env bash
# The GPU kit proven before a GPU sees it (part of `make test`, after `make gpu-kit`): unpacked into an empty
# folder, nothing from the checkout used, its runner in software mode (hwaccel = "none") against the kit's own
# references: every clip over TCP and RTP bit-exact, and every measurement path run once (--quick). A kit that
# failed on the device because of its own bug would waste the one chance.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "gpu kit test: $*" >&2; }
kit=$(ls dist/streamrecvd-gpu-kit-"$(cat VERSION)"-"$(uname -m)".tar.xz)
work=$(mktemp -d /var/tmp/streamrecvd-kit-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
tar -xJf "$kit" -C "$work"
runner=$(ls "$work"/*/run.sh)
say "$(basename "$kit"): $(( $(stat -c %s "$kit") / 1024 / 1024 )) MiB; running $runner --software --quick"
status=0
(cd / && env -i PATH=/usr/bin:/bin HOME=/tmp bash "$runner" --software --quick "$work/out") || status=$?
cat "$work/out/report.md" >&2
if [ "$status" != 0 ]; then
    say "FAILED (status $status); the daemon's log:"
    tar -xzf "$work/out/logs.tar.gz" -C "$work/out" 2>/dev/null || true
    tail -n 30 "$work"/out/logs/daemon-*.log >&2 || true
    exit 1
fi
# The report must hold every section with figures, not only headings.
for section in "Bit-exact" "Decode only" "End to end" "Last byte" "How many"; do
    grep -q "## $section" "$work/out/report.md" || { say "FAILED: no '$section' section"; exit 1; }
done
exact=$(awk -F'\t' '$1 == "exact" && $5 == "exact"' "$work/out/results.tsv" | wc -l)
runs=$(awk -F'\t' '$1 == "exact"' "$work/out/results.tsv" | wc -l)
[ "$exact" = "$runs" ] && [ "$runs" -ge 15 ] || { say "FAILED: $exact of $runs runs bit-exact"; exit 1; }
grep -qP '^capacity\t.*\t[1-9][0-9]*\tstreams' "$work/out/results.tsv" || { say "FAILED: no stream sustained"; exit 1; }
# The listing is read whole first: `grep -q` stopping early would kill tar with SIGPIPE, which pipefail reports.
packed=$(tar -tzf "$work/out/logs.tar.gz" 2>/dev/null || true)
grep -q 'logs/daemon-exact-none.log' <<<"$packed" || { say "FAILED: no logs.tar.gz with the daemon's logs"; exit 1; }
say "ok: $exact of $runs runs bit-exact; measurements ran"
echo "gpu-kit: 1 passed, 0 failed"
