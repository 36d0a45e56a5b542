#!/usr/bin/env bash
# Build the CPU variant of Dockerfile.train on a machine without a Docker daemon or Docker Hub, as
# tests/test_docker.py does: buildah (vfs storage, chroot isolation) builds it FROM a local base
# image made with debootstrap (Debian bookworm, what debian:bookworm would give; the Dockerfile installs
# its python3, 3.11), imported as localhost/deepspeech-base:bookworm. Prints the built image's name as
# the LAST line on stdout; logs and step timings go to stderr.
#
# What this machine already has is reused (doc/DOCKER.rst): its bin/setup.sh wheel cache (the compiled
# Horovod wheel, kept for its environment's key, and KenLM's tools; DS_WHEEL_CACHE) and apt's downloaded
# packages (/var/cache/apt/archives, hard-linked) are mounted into the build's RUN steps (buildah -v); the
# Dockerfile's DS_WHEEL_CACHE build arg names the mounted wheel cache. A plain `docker build` leaves that
# arg empty and downloads and compiles everything itself.
#
# Usage: bin/build_docker_cpu_local.sh [IMAGE_NAME]   (default localhost/deepspeech-train:cpu)
# Environment: DS_DOCKER_CACHE (default ~/.cache/deepspeech-training/docker) holds the base rootfs;
#   DS_DOCKER_LAYERS=1 builds with buildah's --layers (a cached layer per instruction; slower cold).
# An image of that name built from the same Dockerfile, context, build args and base (its
# deepspeech.context label) is reused as it is.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="${1:-localhost/deepspeech-train:cpu}"
BASE_IMAGE=localhost/deepspeech-base:bookworm
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

# A debian:bookworm-like base.
make_base_rootfs() {
    local rootfs="$CACHE/rootfs-bookworm-v4"
    if [ ! -f "$rootfs.complete" ]; then
        rm -rf "$rootfs"; mkdir -p "$rootfs"
        debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >&2
        # As Debian's official images (debian:bookworm) have it: the updates and security
        # suites, and dpkg without a sync per file. Not their docker-clean (it would empty the mounted
        # /var/cache/apt/archives after each install).
        printf 'deb http://deb.debian.org/debian %s main\n' bookworm bookworm-updates >"$rootfs/etc/apt/sources.list"
        echo 'deb http://deb.debian.org/debian-security bookworm-security main' >>"$rootfs/etc/apt/sources.list"
        echo force-unsafe-io >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
        echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
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
# The host's environment with Horovod and KenLM's tools, which leaves the compiled Horovod wheel and the tools
# in the wheel cache. The image's setup computes the same key: the same Python version (Debian 12's
# python3), the same pins, MPI, no GPU operations.
HOST_PY="$("$ROOT/bin/setup.sh" --horovod --kenlm | tail -n 1)"
WHEELS="${DS_WHEEL_CACHE:-$(dirname "$(dirname "$(dirname "$HOST_PY")")")/wheels}"
mkdir -p "$WHEELS"
MOUNTS=(-v "$WHEELS:/var/cache/deepspeech-wheels" --build-arg DS_WHEEL_CACHE=/var/cache/deepspeech-wheels)
# apt inside the build finds the packages this machine downloaded: a hard-linked copy of its
# /var/cache/apt/archives (instant on the same filesystem), so that the build's apt has a lock of its own
# (an apt-get on the machine at the same time would otherwise fail the build); what the build downloads
# is linked back for the next one.
APT_DEBS=""
cleanup() { [ -z "$APT_DEBS" ] || rm -rf "$APT_DEBS"; }
trap cleanup EXIT
if ls /var/cache/apt/archives/*.deb >/dev/null 2>&1; then
    APT_DEBS="$(mktemp -d "$CACHE/apt-archives.XXXXXX")"
    if mkdir "$APT_DEBS/partial" && cp -al /var/cache/apt/archives/*.deb "$APT_DEBS/" 2>/dev/null; then
        MOUNTS+=(-v "$APT_DEBS:/var/cache/apt/archives")
    else
        log "not reusing /var/cache/apt/archives (no hard links from $CACHE)"
    fi
fi
timed make_base_rootfs

# What the image is made of: the Dockerfile, the build context (the files `COPY . .` takes, i.e. less
# .dockerignore's patterns), the build args and the base image. An image of the same name carrying the
# same hash is up to date, and the build is skipped.
context_hash() {
    local prune=() pattern
    while read -r pattern; do
        case "$pattern" in ''|'#'*) continue ;; '**/'*) prune+=(-name "${pattern#'**/'}" -o) ;;
                           *) prune+=(-path "./$pattern" -o) ;; esac
    done <"$ROOT/.dockerignore"
    {
        (cd "$ROOT" && find . \( "${prune[@]}" -false \) -prune -o -type f -print0 | LC_ALL=C sort -z \
            | xargs -0 sha256sum)
        echo "$*"
        "${BUILDAH[@]}" inspect --type image --format '{{.FromImageID}}' "$BASE_IMAGE"
    } | sha256sum | cut -c1-16
}
BUILD_ARGS=(--build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg HOROVOD_GPU_OPERATIONS=)
HASH="$(context_hash "${BUILD_ARGS[@]}")"
if [ "$("${BUILDAH[@]}" inspect --type image --format '{{index .OCIv1.Config.Labels "deepspeech.context"}}' \
        "$IMAGE" 2>/dev/null)" = "$HASH" ]; then
    log "$IMAGE is up to date (context $HASH)"
    echo "$IMAGE"
    exit 0
fi
# One layer on top of the base, not one per instruction (--layers): vfs storage copies the whole tree
# for every layer and for every step's container, which cost ~6 min of a 15 min cold build here; and
# the skip above already covers an unchanged context. DS_DOCKER_LAYERS=1 keeps buildah's layer cache
# (worth it when iterating on the Dockerfile itself).
LAYERS=()
[ "${DS_DOCKER_LAYERS:-0}" = 1 ] && LAYERS=(--layers)
timed "${BUILDAH[@]}" bud --isolation chroot ${LAYERS[@]+"${LAYERS[@]}"} "${MOUNTS[@]}" "${BUILD_ARGS[@]}" \
    --label deepspeech.context="$HASH" -f "$ROOT/Dockerfile.train" -t "$IMAGE" "$ROOT" >&2
[ -z "$APT_DEBS" ] || [ ! -w /var/cache/apt/archives ] || cp -aln "$APT_DEBS"/*.deb /var/cache/apt/archives/ 2>/dev/null || true
# vfs keeps a full copy of the tree per layer: drop the images that the new tag left dangling.
"${BUILDAH[@]}" rmi --prune >/dev/null 2>&1 || true
echo "$IMAGE"
