#!/bin/sh
# Run by both recipes on the Debian root filesystem (argument: its path; "/" in the Dockerfile):
# the unprivileged user the image runs as — uid/gid 65532, "nonroot", as distroless images
# name it — with an empty home, and nothing left of apt's downloads.
set -eu
root="${1:?usage: rootfs-setup.sh ROOT}"
grep -q '^nonroot:' "$root/etc/group" || echo 'nonroot:x:65532:' >> "$root/etc/group"
grep -q '^nonroot:' "$root/etc/passwd" \
  || echo 'nonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin' >> "$root/etc/passwd"
mkdir -p "$root/home/nonroot"
chown 65532:65532 "$root/home/nonroot"
chmod 0750 "$root/home/nonroot"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
       "$root"/var/log/apt/* "$root"/var/log/dpkg.log "$root"/var/log/alternatives.log
