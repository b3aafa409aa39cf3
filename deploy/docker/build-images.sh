#!/usr/bin/env sh
# Build kstream's container images on this machine, without any image registry:
#
#     deploy/docker/build-images.sh          # prints the images it built or found
#
# Three images:
#
#   kstream/base:bookworm-<h>   Debian bookworm (minbase) with openjdk-17-jre-headless,
#                               python3 (3.11) and python3-venv, debootstrapped from a
#                               Debian mirror and `docker import`ed; also tagged
#                               kstream/base:bookworm
#   kstream/kafka:<version>     the KRaft broker on that base: the jars kstream resolves
#                               with mvn (kstream.infra.broker.resolve_jars) and
#                               deploy/kafka's configs
#   kstream/kstream:<version>   kstream with the audit extra (pyspark) in a virtualenv on
#                               that base, installed from wheels built here with
#                               `pip wheel` (no network inside `docker build`), and
#                               the Spark Kafka connector jars; also tagged :latest
#
# Cached: each image carries the hash of its inputs in the label org.kstream.inputs
# and is rebuilt only when that hash changes (the base: its package list; the broker:
# Dockerfile, entrypoint, configs, jars, base; kstream: Dockerfile, pyproject.toml,
# the package's sources, connector jars, base). An unchanged tree takes seconds.
# KSTREAM_IMAGES_REBUILD=1 rebuilds all three.
#
# Needs: a running Docker engine; for the base image root and debootstrap; a
# Python with kstream's dependencies (the checkout's .venv when there is one,
# else python3, or PYTHON=...), and mvn when the jars are not resolved yet.
# KSTREAM_DEBIAN_MIRROR names another Debian mirror (default: deb.debian.org).
# Every failure names its step and exits 2.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${PYTHON:-python3}
[ -x "$root/.venv/bin/python" ] && [ -z "${PYTHON:-}" ] && python=$root/.venv/bin/python
mirror=${KSTREAM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
rebuild=${KSTREAM_IMAGES_REBUILD:-0}
packages=openjdk-17-jre-headless,python3,python3-venv

say() { printf '%s\n' "build-images: $*" >&2; }
die() { say "step '$step' failed: $*"; exit 2; }
step=checks
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

command -v docker >/dev/null || die "docker is not on PATH (apt-get install docker.io)"
docker info >/dev/null 2>&1 || die "no Docker engine answers (start dockerd)"

# hash FILE... : one sha256 over the files' names and contents, in the given order.
hash_files() { for f in "$@"; do printf '%s\n' "${f#"$root"/}"; cat "$f"; done | sha256sum | cut -c 1-16; }
# built IMAGE HASH : whether IMAGE exists and was built from inputs hashing to HASH.
built() {
    [ "$rebuild" = 1 ] && return 1
    [ "$(docker image inspect -f '{{index .Config.Labels "org.kstream.inputs"}}' "$1" 2>/dev/null)" = "$2" ]
}
# docker_build NAME ARGS... : a build whose log is shown (its tail) when it fails.
docker_build() {
    name=$1; shift
    docker build "$@" >"$work/$name.log" 2>&1 || {
        tail -n 30 "$work/$name.log" >&2
        die "docker build of $name failed (its last lines above)"
    }
}

step=base
base_hash=$(printf 'bookworm minbase %s v1\n' "$packages" | sha256sum | cut -c 1-16)
base=kstream/base:bookworm-$base_hash
if [ "$rebuild" != 1 ] && docker image inspect "$base" >/dev/null 2>&1; then
    say "$base exists"
else
    [ "$(id -u)" = 0 ] || die "building $base needs root (debootstrap)"
    command -v debootstrap >/dev/null || die "debootstrap is not on PATH (apt-get install debootstrap)"
    rootfs=$work/rootfs
    say "debootstrapping Debian bookworm with $packages from $mirror (a few minutes)"
    debootstrap --variant=minbase --include="$packages" \
        bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
        tail -n 20 "$work/debootstrap.log" >&2
        die "debootstrap (its last lines above)"
    }
    # Package caches and docs are dead weight in an image.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/*
    tar -C "$rootfs" -c . | docker import \
        --change 'ENV LANG=C.UTF-8' \
        --change "LABEL org.kstream.inputs=$base_hash" \
        --message "Debian bookworm minbase + $packages (debootstrap)" \
        - "$base" >/dev/null || die "docker import of the root file system"
    rm -rf "$rootfs"
    say "built $base"
fi
docker tag "$base" kstream/base:bookworm || die "docker tag $base"
base_id=$(docker image inspect -f '{{.Id}}' "$base")

# The versions and the jars come from kstream itself, so images and local broker agree.
step=resolve
resolved=$(PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "$python" -c '
from importlib.metadata import version
from kstream.infra.broker import KAFKA_VERSION, resolve_jars
from kstream.audit.jars import connector_jars
print(KAFKA_VERSION, version("kstream"), resolve_jars(), connector_jars()[0].parent)') \
    || die "kstream could not resolve the Kafka and Spark connector jars"
set -- $resolved
kafka_version=$1 kstream_version=$2 kafka_libs=$3 spark_libs=$4

step=kafka
image=kstream/kafka:$kafka_version
kafka_hash=$( { hash_files "$here/kafka.Dockerfile" "$here/kafka-entrypoint.sh" \
    "$root/deploy/kafka/server.properties" "$root/deploy/kafka/log4j2.properties"
    ls -l "$kafka_libs"; echo "$base_id"; } | sha256sum | cut -c 1-16)
if built "$image" "$kafka_hash"; then
    say "$image is up to date"
else
    context=$work/kafka
    mkdir -p "$context/libs"
    # Hard links when the cache shares the file system: no 70 MB copy.
    cp -l "$kafka_libs"/*.jar "$context/libs/" 2>/dev/null || cp "$kafka_libs"/*.jar "$context/libs/"
    cp "$root/deploy/kafka/server.properties" "$root/deploy/kafka/log4j2.properties" \
        "$here/kafka-entrypoint.sh" "$context/"
    docker_build kafka -f "$here/kafka.Dockerfile" --build-arg "BASE=$base" \
        --build-arg "KAFKA_VERSION=$kafka_version" --label "org.kstream.inputs=$kafka_hash" \
        -t "$image" "$context"
    say "built $image"
fi
echo "$image"

step=kstream
image=kstream/kstream:$kstream_version
sources=$(cd "$root" && find kstream/ connectors/ deploy/kafka deploy/spark -type f \
    ! -name '*.pyc' ! -path '*/__pycache__/*' | LC_ALL=C sort | sed "s|^|$root/|")
# shellcheck disable=SC2086 # one path per line, none with spaces
kstream_hash=$( { hash_files "$here/kstream.Dockerfile" "$root/pyproject.toml" $sources
    ls -l "$spark_libs"; echo "$base_id"; } | sha256sum | cut -c 1-16)
if built "$image" "$kstream_hash"; then
    say "$image is up to date"
else
    context=$work/kstream
    # The audit's connector jars, where kstream's cache dir in the image expects them.
    jars=$context/cache/$(basename "$(dirname "$spark_libs")")/libs
    mkdir -p "$context/wheels" "$jars"
    say "building wheels of kstream[audit] and its dependencies (pip's cache serves repeats)"
    "$python" -m pip wheel -q --wheel-dir "$context/wheels" "$root[audit]" \
        >"$work/wheels.log" 2>&1 || {
        tail -n 20 "$work/wheels.log" >&2
        die "pip wheel (its last lines above)"
    }
    cp -l "$spark_libs"/*.jar "$jars/" 2>/dev/null || cp "$spark_libs"/*.jar "$jars/"
    touch "$jars/.complete"
    docker_build kstream -f "$here/kstream.Dockerfile" --build-arg "BASE=$base" \
        --build-arg "KSTREAM_VERSION=$kstream_version" \
        --label "org.kstream.inputs=$kstream_hash" -t "$image" "$context"
    say "built $image"
fi
docker tag "$image" kstream/kstream:latest || die "docker tag $image kstream/kstream:latest"
echo "$image"
