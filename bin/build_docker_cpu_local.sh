#!/usr/bin/env bash
# Build the CPU variant of Dockerfile.train on a machine without a Docker daemon or Docker Hub, as
# tests/test_docker.py does: buildah (vfs storage, chroot isolation) builds it FROM a local base
# image made with debootstrap (Debian bookworm) plus this machine's Python 3.9 (what python:3.9
# would give), imported as localhost/deepspeech-base:bookworm-py39. Prints the built image's name as
# the LAST line on stdout; logs and step timings go to stderr.
#
# Usage: bin/build_docker_cpu_local.sh [IMAGE_NAME]   (default localhost/deepspeech-train:cpu)
# Environment: DS_DOCKER_CACHE (default ~/.cache/deepspeech-training/docker) holds the base rootfs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="${1:-localhost/deepspeech-train:cpu}"
BASE_IMAGE=localhost/deepspeech-base:bookworm-py39
CACHE="${DS_DOCKER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deepspeech-training/docker}"
BUILDAH=(buildah --storage-driver vfs)
log() { echo "[build_docker] $*" >&2; }
timed() { local s; s=$(date +%s); "$@"; log "step '$1 ${2:-}' took $(( $(date +%s) - s )) s"; }

install_tools() {
    command -v buildah >/dev/null && command -v debootstrap >/dev/null && return 0
    log "installing buildah and debootstrap"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends buildah debootstrap >&2
}

# A python:3.9-like base: Debian bookworm has no Python 3.9, so the interpreter bin/setup.sh finds
# here is copied in at the same path and linked as /usr/local/bin/python3.9.
make_base_rootfs() {
    local rootfs="$CACHE/rootfs-bookworm-v2" prefix
    prefix="$("$("$ROOT/bin/setup.sh" | tail -n 1)" -c 'import sys; print(sys.base_prefix)')"
    if [ ! -f "$rootfs.complete" ]; then
        rm -rf "$rootfs"; mkdir -p "$rootfs"
        debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >&2
        mkdir -p "$rootfs$prefix"
        cp -a "$prefix/." "$rootfs$prefix/"
        ln -sf "$prefix/bin/python3.9" "$rootfs/usr/local/bin/python3.9"
        # This machine's extra CAs (its HTTPS to PyPI is re-signed), as a site's own base image has.
        cp -a /usr/local/share/ca-certificates/. "$rootfs/usr/local/share/ca-certificates/" 2>/dev/null || true
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb
        touch "$rootfs.complete"
    fi
    if ! "${BUILDAH[@]}" inspect --type image "$BASE_IMAGE" >/dev/null 2>&1; then
        local ctr
        ctr=$("${BUILDAH[@]}" from scratch)
        "${BUILDAH[@]}" copy "$ctr" "$rootfs" / >/dev/null
        "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            --env PIP_CERT=/etc/ssl/certs/ca-certificates.crt "$ctr"
        "${BUILDAH[@]}" commit --rm "$ctr" "$BASE_IMAGE" >&2
    fi
}

install_tools
mkdir -p "$CACHE"
timed make_base_rootfs
timed "${BUILDAH[@]}" bud --isolation chroot --layers \
    --build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg HOROVOD_GPU_OPERATIONS= \
    -f "$ROOT/Dockerfile.train" -t "$IMAGE" "$ROOT" >&2
# vfs keeps a full copy of the tree per layer: drop the images that the new tag left dangling.
"${BUILDAH[@]}" rmi --prune >/dev/null 2>&1 || true
echo "$IMAGE"
