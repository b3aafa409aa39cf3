#!/usr/bin/env sh
# Build the Kafka broker image the test suite runs when a Docker engine answers,
# without any image registry:
#
#     deploy/docker/build-images.sh
#
# Two images, built on this machine:
#
#   kstream/java:17-bookworm    Debian bookworm (minbase) with openjdk-17-jre-headless,
#                               debootstrapped from a Debian mirror and `docker import`ed
#   kstream/kafka:<version>     the broker on that base: the jars kstream resolves with
#                               mvn (kstream.infra.broker.resolve_jars) and deploy/kafka's configs
#
# Idempotent: the base image is made once (delete it to rebuild it); the Kafka
# image is rebuilt every run from Docker's layer cache, so it always matches the
# current jars and configs and an unchanged one takes seconds.
#
# Needs: a running Docker engine; for the base image root and debootstrap; a
# Python with kstream's dependencies (the checkout's .venv when there is one,
# else python3, or PYTHON=...), and mvn when the jars are not resolved yet.
# KSTREAM_DEBIAN_MIRROR names another Debian mirror (default: deb.debian.org).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${PYTHON:-python3}
[ -x "$root/.venv/bin/python" ] && [ -z "${PYTHON:-}" ] && python=$root/.venv/bin/python
mirror=${KSTREAM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
base=kstream/java:17-bookworm

say() { printf '%s\n' "build-images: $*" >&2; }
die() { say "$*"; exit 2; }

command -v docker >/dev/null || die "docker is not on PATH (apt-get install docker.io)"
docker info >/dev/null 2>&1 || die "no Docker engine answers (start dockerd)"

# The version and the jars come from kstream itself, so image and local broker agree.
resolved=$(PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "$python" -c '
from kstream.infra.broker import KAFKA_VERSION, resolve_jars
print(KAFKA_VERSION, resolve_jars())') || die "kstream could not resolve the Kafka jars"
version=${resolved%% *}
libs=${resolved#* }
image=kstream/kafka:$version

if docker image inspect "$base" >/dev/null 2>&1; then
    say "$base exists"
else
    [ "$(id -u)" = 0 ] || die "building $base needs root (debootstrap)"
    command -v debootstrap >/dev/null || die "debootstrap is not on PATH (apt-get install debootstrap)"
    rootfs=$(mktemp -d)
    trap 'rm -rf "$rootfs"' EXIT
    say "debootstrapping Debian bookworm with Java 17 from $mirror (a few minutes)"
    debootstrap --variant=minbase --include=openjdk-17-jre-headless \
        bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 \
        || die "debootstrap failed; see $rootfs.log"
    rm -f "$rootfs.log"
    # Package caches are dead weight in an image.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import \
        --change 'ENV LANG=C.UTF-8' \
        --message "Debian bookworm minbase + openjdk-17-jre-headless (debootstrap)" \
        - "$base" >/dev/null
    rm -rf "$rootfs"
    trap - EXIT
    say "built $base"
fi

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
mkdir "$context/libs"
# Hard links when the cache shares the file system: no 70 MB copy.
cp -l "$libs"/*.jar "$context/libs/" 2>/dev/null || cp "$libs"/*.jar "$context/libs/"
cp "$root/deploy/kafka/server.properties" "$root/deploy/kafka/log4j2.properties" \
    "$here/kafka-entrypoint.sh" "$context/"
docker build -q -f "$here/kafka.Dockerfile" --build-arg "BASE=$base" \
    --build-arg "KAFKA_VERSION=$version" -t "$image" "$context" >/dev/null
say "built $image"
echo "$image"
