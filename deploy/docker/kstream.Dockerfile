# kstream with the audit extra (pyspark; Java 17 from the base) in a virtualenv.
# Built by build-images.sh from wheels it makes with `pip wheel` on the host, so this
# build needs no network: pip installs with --no-index from the context's wheels/.
#
# Run a job whose module is mounted, or baked in with
#     FROM kstream/kstream
#     COPY myjob.py /opt/kstream/jobs/
# e.g.  docker run --rm --network host -v "$PWD/jobs:/opt/kstream/jobs:ro" \
#           -v kstream-state:/var/lib/kstream kstream/kstream run myjob:build ...
ARG BASE=kstream/base:bookworm

# The virtualenv, in a stage of its own: the wheels' layer stays out of the image.
FROM ${BASE} AS venv
ARG KSTREAM_VERSION
COPY wheels/ /tmp/wheels/
RUN python3 -m venv /opt/kstream/venv \
 && /opt/kstream/venv/bin/pip install --no-cache-dir --no-index \
        --find-links /tmp/wheels "kstream[audit]==${KSTREAM_VERSION}"

FROM ${BASE}
ARG KSTREAM_VERSION
LABEL org.opencontainers.image.title="kstream" \
      org.opencontainers.image.version="${KSTREAM_VERSION}"
COPY --from=venv /opt/kstream/venv /opt/kstream/venv
RUN groupadd --gid 10001 kstream \
 && useradd --uid 10001 --gid 10001 --home-dir /var/lib/kstream --no-create-home \
        --shell /usr/sbin/nologin kstream \
 && mkdir -p /opt/kstream/jobs /var/lib/kstream/checkpoints \
 && chown -R kstream:kstream /var/lib/kstream
# The Spark Kafka connector jars `kstream audit` needs, resolved on the host (no mvn here).
COPY cache/ /opt/kstream/cache/
ENV PATH=/opt/kstream/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONPATH=/opt/kstream/jobs \
    PYTHONUNBUFFERED=1 \
    KSTREAM_CACHE_DIR=/opt/kstream/cache \
    HOME=/var/lib/kstream \
    LANG=C.UTF-8
USER 10001:10001
WORKDIR /var/lib/kstream
ENTRYPOINT ["kstream"]
CMD ["--help"]
