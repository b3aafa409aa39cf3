#!/bin/sh
# Start the broker of the kstream/kafka image on 127.0.0.1:$KAFKA_PORT (controller
# on $KAFKA_PORT+1), from empty storage: a container is one disposable cluster.
# Mirrors kstream.infra.broker.LocalBroker.start (same server.properties template).
set -eu
port=$KAFKA_PORT
controller_port=$((port + 1))
data=/var/lib/kafka/data
config=/var/lib/kafka/server.properties
sed -e "s|\${port}|$port|g" \
    -e "s|\${controller_port}|$controller_port|g" \
    -e "s|\${log_dirs}|$data|g" \
    -e "s|\${listener}|PLAINTEXT|g" \
    -e "s|\${host}|127.0.0.1|g" \
    /opt/kafka/config/server.properties >"$config"
cp="/opt/kafka/libs/*"
logging=-Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties
if [ ! -f "$data/meta.properties" ]; then
    # A cluster id is 16 random bytes in URL-safe base64 (what `StorageTool
    # random-uuid` prints), made here to spare a JVM start. Like Kafka's own, it
    # never starts with '-': the tool's argument parser would take it for an option.
    cluster_id=-
    while [ "${cluster_id#-}" != "$cluster_id" ]; do
        cluster_id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | cut -c 1-22)
    done
    java "$logging" -cp "$cp" kafka.tools.StorageTool \
        format --standalone -t "$cluster_id" -c "$config" >/dev/null
fi
exec java -Xms256m "-Xmx$KAFKA_HEAP" -XX:+UseG1GC -Djava.awt.headless=true "$logging" \
    -cp "$cp" kafka.Kafka "$config"
