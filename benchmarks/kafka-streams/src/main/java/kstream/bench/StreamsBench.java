package kstream.bench;

import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * The benchmark suite's Kafka Streams contender: the same jobs as every other contender.
 *
 * <p>Arguments: bootstrap input output wordcount|mapfilter|windowed application-id state-dir
 * threads window-ms grace-ms. Exactly-once v2, record cache off (statestore.cache.max.bytes=0)
 * so the count emits one output per word occurrence. The windowed count (event time: the record
 * timestamp) emits each window's final count once, when stream time passes its end and the
 * grace (suppress until the window closes). Runs until SIGTERM.
 */
public final class StreamsBench {
  /** Words ending in one of these are dropped by mapfilter (benchmarks/workloads.py). */
  private static final String DROPPED_LAST_CHARS = "13579";

  public static void main(String[] args) throws InterruptedException {
    String bootstrap = args[0], input = args[1], output = args[2], workload = args[3];
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[4]);
    props.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(args[6]));
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
    props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

    StreamsBuilder builder = new StreamsBuilder();
    KStream<byte[], String> lines =
        builder.stream(input, Consumed.with(Serdes.ByteArray(), Serdes.String()));
    KStream<byte[], String> words =
        lines.flatMapValues(line -> Arrays.asList(line.trim().split("\\s+")))
            .filter((k, w) -> !w.isEmpty());
    if (workload.equals("windowed")) {
      long size = Long.parseLong(args[7]), grace = Long.parseLong(args[8]);
      words
          .groupBy((k, w) -> w, Grouped.with(Serdes.String(), Serdes.String()))
          .windowedBy(
              TimeWindows.ofSizeAndGrace(Duration.ofMillis(size), Duration.ofMillis(grace)))
          .count()
          .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
          .toStream()
          .map((w, n) -> KeyValue.pair(w.key(), w.window().start() + " " + n))
          .to(output, Produced.with(Serdes.String(), Serdes.String()));
    } else if (workload.equals("wordcount")) {
      words
          .groupBy((k, w) -> w, Grouped.with(Serdes.String(), Serdes.String()))
          .count()
          .toStream()
          .mapValues(n -> Long.toString(n))
          .to(output, Produced.with(Serdes.String(), Serdes.String()));
    } else {
      words
          .filter((k, w) -> DROPPED_LAST_CHARS.indexOf(w.charAt(w.length() - 1)) < 0)
          .map((k, w) -> KeyValue.pair(w, w.toUpperCase()))
          .to(output, Produced.with(Serdes.String(), Serdes.String()));
    }

    KafkaStreams streams = new KafkaStreams(builder.build(), props);
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  streams.close();
                  stopped.countDown();
                }));
    streams.start();
    stopped.await();
  }
}
