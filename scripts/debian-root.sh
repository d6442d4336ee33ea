# Sourced by scripts/test-deb-install.sh, scripts/test-bundle.sh and scripts/test-systemd-vm.sh, which set `work`
# (a temporary folder) and `say` first. Makes "$work/root": a clean Debian 12 minbase root, with the package this
# tree built (if any) copied to its /tmp ("$deb"); in_root runs a command in it with a /proc, as on any real system
# (a static Swift binary reads its arguments there). A minbase root is kept as a tarball in .build for the next run
# on this machine; CI's fresh clone makes its own. Returns 1 (after a loud SKIPPED banner) where debootstrap cannot
# reach the registry.
deb=$(ls dist/streamrecvd_*_"$(dpkg --print-architecture)".deb 2>/dev/null | head -1 || true)
root=$work/root

make_debian_root() {
    # The registry this machine's apt uses (its bookworm main), so that nothing names a host here.
    local mirror base=.build/test-roots/bookworm-minbase.tar
    mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' "Identifier: Packages" | awk '$2 == "bookworm" { print $1; exit }')
    mkdir -p "$root" "$(dirname "$base")"
    if [ -s "$base" ]; then
        tar -xf "$base" -C "$root"
    elif [ -n "$mirror" ] && debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1; then
        tar -cf "$base.part" -C "$root" . && mv "$base.part" "$base"
    else
        tail -5 "$work/debootstrap.log" >&2 2>/dev/null || true
        echo "################################################################################" >&2
        echo "SKIPPED: $(say "debootstrap could not reach the registry" 2>&1)" >&2
        echo "################################################################################" >&2
        return 1
    fi
    if [ -n "$deb" ]; then cp "$deb" "$root/tmp/"; fi
}

in_root() { unshare --mount bash -c "mount -t proc proc '$root/proc' && chroot '$root' \"\$@\"" in_root "$@"; }
