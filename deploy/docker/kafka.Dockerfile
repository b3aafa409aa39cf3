# Apache Kafka in KRaft mode (broker and controller in one JVM), as the local
# broker runs it, for the test suite's Docker branch. Built by build-images.sh
# from kstream's Maven-resolved jars; no registry involved.
#
# Run with the host's network so the advertised address 127.0.0.1:$KAFKA_PORT is
# the one clients reach:
#     docker run --rm --network host -e KAFKA_PORT=23192 kstream/kafka:4.1.1
ARG BASE=kstream/base:bookworm
FROM ${BASE}
ARG KAFKA_VERSION
LABEL org.opencontainers.image.title="kstream-kafka" \
      org.opencontainers.image.version="${KAFKA_VERSION}"
COPY libs/ /opt/kafka/libs/
COPY server.properties log4j2.properties /opt/kafka/config/
COPY kafka-entrypoint.sh /opt/kafka/bin/
RUN mkdir -p /var/lib/kafka && chown nobody:nogroup /var/lib/kafka
USER nobody
ENV KAFKA_PORT=9092 KAFKA_HEAP=1g
ENTRYPOINT ["/opt/kafka/bin/kafka-entrypoint.sh"]
