package kstream.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Nexmark queries q0-q3 in Kafka Streams, for the benchmark suite's {@code kafka-streams-eos}
 * contender (benchmarks/nexmark/kafka_streams.py).
 *
 * <p>Arguments: bootstrap input output q0|q1|q2|q3 application-id state-dir threads
 * commit-interval-ms. The input is the generator's topic (benchmarks/nexmark/generator.py): one
 * JSON event per record, {@code event_type} 0, 1, 2 saying which of person, auction, bid is set
 * (3: the end marker, which every query ignores). Each output value is one JSON result in the
 * reference's shape (benchmarks/nexmark/reference.py), so the suite's checker reads it as it
 * reads kstream's. Exactly-once v2, the input read from its earliest offset, record caches off
 * (every update is forwarded at once). Runs until SIGTERM; a record that is not a JSON event
 * stops it with one line on stderr and exit code 1, its open transaction aborted.
 *
 * <ul>
 *   <li>q0: every bid as it came.
 *   <li>q1: every bid with its price in euros: {@code round(0.908 * price, 3)} as Python rounds a
 *       double (the exact binary value, ties to even), written as a plain decimal.
 *   <li>q2: {@code {auction, price}} of the bids whose auction id is a multiple of 123.
 *   <li>q3: an unbounded inner join of the persons of OR, ID, CA and the auctions of category 10
 *       on seller = person id, whichever arrives first: a foreign-key KTable-KTable join (auctions
 *       by id, persons by id), each pair once as {@code {name, city, state, id}}.
 * </ul>
 */
public final class NexmarkBench {
  /** q1's dollars-to-euros factor (benchmarks/nexmark/model.py EURO_RATE). */
  private static final double EURO_RATE = 0.908;
  /** q2's modulus (model.py Q2_MODULUS). */
  private static final long Q2_MODULUS = 123;
  /** q3's seller states and auction category (model.py Q3_STATES, Q3_CATEGORY). */
  private static final Set<String> Q3_STATES = Set.of("OR", "ID", "CA");

  private static final long Q3_CATEGORY = 10;
  private static final int PERSON = 0, AUCTION = 1, BID = 2;
  private static final ObjectMapper JSON = new ObjectMapper();

  private NexmarkBench() {}

  static JsonNode parse(String value) {
    try {
      return JSON.readTree(value);
    } catch (IOException e) {
      throw new UncheckedIOException("not a Nexmark JSON event: " + e.getMessage(), e);
    }
  }

  static String write(JsonNode node) {
    try {
      return JSON.writeValueAsString(node);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The event's {@code kind} object (person, auction, bid) when it is of that type. */
  static KStream<String, JsonNode> ofType(KStream<String, JsonNode> events, int type, String kind) {
    return events
        .filter((k, e) -> e.path("event_type").asInt(-1) == type)
        .mapValues(e -> e.get(kind));
  }

  /** q1's price: {@code round(EURO_RATE * price, 3)} as Python computes it, as a decimal. */
  static BigDecimal euros(long price) {
    return new BigDecimal(EURO_RATE * price).setScale(3, RoundingMode.HALF_EVEN);
  }

  static void build(StreamsBuilder builder, String input, String output, String query) {
    KStream<String, JsonNode> events =
        builder
            .stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .mapValues(NexmarkBench::parse);
    KStream<String, JsonNode> bids = ofType(events, BID, "bid");
    KStream<String, JsonNode> results;
    switch (query) {
      case "q0":
        results = bids;
        break;
      case "q1":
        results =
            bids.mapValues(
                b -> {
                  ObjectNode row = JSON.createObjectNode();
                  row.set("auction", b.get("auction"));
                  row.set("bidder", b.get("bidder"));
                  row.put("price", euros(b.get("price").asLong()));
                  row.set("dateTime", b.get("dateTime"));
                  row.set("extra", b.get("extra"));
                  return (JsonNode) row;
                });
        break;
      case "q2":
        results =
            bids.filter((k, b) -> b.get("auction").asLong() % Q2_MODULUS == 0)
                .mapValues(
                    b -> {
                      ObjectNode row = JSON.createObjectNode();
                      row.set("auction", b.get("auction"));
                      row.set("price", b.get("price"));
                      return (JsonNode) row;
                    });
        break;
      case "q3":
        results = q3(events);
        break;
      default:
        throw new IllegalArgumentException("no Kafka Streams job for " + query + " (q0-q3)");
    }
    results.mapValues(NexmarkBench::write).to(output, Produced.with(Serdes.String(), Serdes.String()));
  }

  static KStream<String, JsonNode> q3(KStream<String, JsonNode> events) {
    JsonSerde json = new JsonSerde();
    KTable<String, JsonNode> persons =
        ofType(events, PERSON, "person")
            .filter((k, p) -> Q3_STATES.contains(p.get("state").asText()))
            .selectKey((k, p) -> p.get("id").asText())
            .toTable(Materialized.with(Serdes.String(), json));
    KTable<String, JsonNode> auctions =
        ofType(events, AUCTION, "auction")
            .filter((k, a) -> a.get("category").asLong() == Q3_CATEGORY)
            .selectKey((k, a) -> a.get("id").asText())
            .toTable(Materialized.with(Serdes.String(), json));
    return auctions
        .join(
            persons,
            a -> a.get("seller").asText(),
            (a, p) -> {
              ObjectNode row = JSON.createObjectNode();
              row.set("name", p.get("name"));
              row.set("city", p.get("city"));
              row.set("state", p.get("state"));
              row.set("id", a.get("id"));
              return (JsonNode) row;
            },
            Materialized.with(Serdes.String(), json))
        .toStream()
        // An inner foreign-key join forwards a tombstone where an auction's person is absent.
        .filter((k, row) -> row != null);
  }

  /** JSON values in state stores and repartition topics. */
  static final class JsonSerde extends Serdes.WrapperSerde<JsonNode> {
    JsonSerde() {
      super(
          (topic, node) -> node == null ? null : write(node).getBytes(StandardCharsets.UTF_8),
          (topic, bytes) -> bytes == null ? null : parse(new String(bytes, StandardCharsets.UTF_8)));
    }
  }

  public static void main(String[] args) throws InterruptedException {
    if (args.length != 8) {
      System.err.println(
          "usage: NexmarkBench bootstrap input output q0|q1|q2|q3 application-id state-dir"
              + " threads commit-interval-ms");
      System.exit(2);
    }
    String bootstrap = args[0], input = args[1], output = args[2], query = args[3];
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[4]);
    props.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(args[6]));
    // Exactly-once v2 commits a transaction per commit interval: kstream's checkpoint interval.
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Long.parseLong(args[7]));
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
    props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

    StreamsBuilder builder = new StreamsBuilder();
    try {
      build(builder, input, output, query);
    } catch (IllegalArgumentException e) {
      System.err.println(e.getMessage());
      System.exit(2);
    }
    KafkaStreams streams = new KafkaStreams(builder.build(), props);
    CountDownLatch stopped = new CountDownLatch(1);
    AtomicInteger exitCode = new AtomicInteger();
    // A failed record (not a JSON event) stops the program in one line, its transaction
    // aborted, rather than leaving a JVM without stream threads for the suite to wait on.
    streams.setUncaughtExceptionHandler(
        e -> {
          Throwable cause = e.getCause() != null ? e.getCause() : e;
          System.err.println(
              "NexmarkBench " + query + " failed: " + cause.toString().lines().findFirst().orElse(""));
          exitCode.set(1);
          stopped.countDown();
          return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  streams.close();
                  stopped.countDown();
                }));
    streams.start();
    stopped.await();
    if (exitCode.get() != 0) {
      System.exit(exitCode.get());
    }
  }
}
