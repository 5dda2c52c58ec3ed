package dev.sp.testjob;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.util.Collector;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Small, unbounded, stateful streaming job used to produce real Flink snapshots for the sp
 * tests. It compiles unchanged against Flink 1.20.x and 2.x: it only uses APIs present in both
 * (new Source API via DataGeneratorSource, OpenContext, Sink V2 DiscardingSink, Duration based
 * windows) and configures checkpointing through plain {@link Configuration} keys.
 *
 * <p>Topology (every operator has an explicit uid):
 *
 * <pre>
 * source-uid        DataGeneratorSource, rate limited; split state (operator state)
 * counting-map-uid  map with ListState + union ListState via CheckpointedFunction (operator state)
 * keyed-process-uid KeyedProcessFunction: ValueState, ListState, MapState, event-time timers
 * window-uid        10 s tumbling event-time window with a reduce   (dropped by removed-operator)
 * sink-uid          DiscardingSink
 * </pre>
 *
 * <p>Options (all "--name value"): --backend hashmap|rocksdb, --incremental true|false,
 * --parallelism N, --max-parallelism N, --checkpoint-interval MS, --retain true|false,
 * --variant normal|changed-uid|removed-operator, --checkpoint-dir URI, --rate EVENTS_PER_S,
 * --keys N, --job-name NAME.
 */
public class StatefulTestJob {

    /**
     * Prefix of the TaskManager log lines written when a subtask starts from restored state:
     * {@code SP-TEST-RESTORED job=<job id> operator=counting-map subtask=<i> count=<n>} (operator
     * state: the restored event count) and {@code SP-TEST-RESTORED job=<job id>
     * operator=keyed-process subtask=<i> key=<k> stored=<n> seen=<m>} (keyed state: the first key
     * whose stored count n exceeds the m events this run has seen for it, i.e. the count continued
     * from restored state). scripts/flink and tests/flink grep for it.
     */
    public static final String RESTORED_TAG = "SP-TEST-RESTORED";

    private static final Logger LOG = LoggerFactory.getLogger(StatefulTestJob.class);

    public static final String SOURCE_UID = "source-uid";
    public static final String MAP_UID = "counting-map-uid";
    public static final String PROCESS_UID = "keyed-process-uid";
    public static final String PROCESS_UID_CHANGED = "keyed-process-uid-changed";
    public static final String WINDOW_UID = "window-uid";
    public static final String SINK_UID = "sink-uid";

    public static void main(String[] args) throws Exception {
        Map<String, String> opt = parse(args);
        String backend = opt.getOrDefault("backend", "hashmap");
        boolean incremental = Boolean.parseBoolean(opt.getOrDefault("incremental", "false"));
        int parallelism = Integer.parseInt(opt.getOrDefault("parallelism", "2"));
        int maxParallelism = Integer.parseInt(opt.getOrDefault("max-parallelism", "128"));
        long interval = Long.parseLong(opt.getOrDefault("checkpoint-interval", "2000"));
        boolean retain = Boolean.parseBoolean(opt.getOrDefault("retain", "false"));
        String variant = opt.getOrDefault("variant", "normal");
        String checkpointDir = opt.get("checkpoint-dir");
        long rate = Long.parseLong(opt.getOrDefault("rate", "200"));
        long keys = Long.parseLong(opt.getOrDefault("keys", "1000"));
        String jobName = opt.getOrDefault("job-name", "sp-test-job-" + backend + "-" + variant);

        if (!backend.equals("hashmap") && !backend.equals("rocksdb")) {
            throw new IllegalArgumentException("--backend must be hashmap or rocksdb");
        }
        if (!variant.equals("normal") && !variant.equals("changed-uid")
                && !variant.equals("removed-operator")) {
            throw new IllegalArgumentException(
                    "--variant must be normal, changed-uid or removed-operator");
        }

        // Configuration keys only (no StateBackend / CheckpointConfig classes, which differ
        // between 1.20 and 2.x). The 1.20+ key names are set, plus their pre-1.20 aliases.
        Map<String, String> c = new HashMap<>();
        c.put("state.backend.type", backend);
        c.put("execution.checkpointing.incremental", Boolean.toString(incremental));
        c.put("state.backend.incremental", Boolean.toString(incremental));
        c.put("execution.checkpointing.interval", interval + " ms");
        c.put("execution.checkpointing.mode", "EXACTLY_ONCE");
        c.put("execution.checkpointing.timeout", "60 s");
        c.put("execution.checkpointing.externalized-checkpoint-retention",
                retain ? "RETAIN_ON_CANCELLATION" : "DELETE_ON_CANCELLATION");
        if (checkpointDir != null) {
            c.put("execution.checkpointing.dir", checkpointDir);
            c.put("state.checkpoints.dir", checkpointDir);
        }
        c.put("parallelism.default", Integer.toString(parallelism));
        c.put("pipeline.max-parallelism", Integer.toString(maxParallelism));
        c.put("restart-strategy.type", "none");
        c.put("pipeline.name", jobName);
        Configuration conf = Configuration.fromMap(c);

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.configure(conf, StatefulTestJob.class.getClassLoader());
        env.setParallelism(parallelism);
        env.setMaxParallelism(maxParallelism);

        final long numKeys = keys;
        // Event time = wall-clock time at generation. (The generator's index range is split
        // between the parallel splits, e.g. the second one starts near 2^62, so it cannot be
        // scaled into a timestamp.)
        GeneratorFunction<Long, Event> generator =
                index -> new Event(index % numKeys, index, System.currentTimeMillis(), 1L);
        DataGeneratorSource<Event> source =
                new DataGeneratorSource<>(
                        generator,
                        Long.MAX_VALUE,
                        RateLimiterStrategy.perSecond(rate),
                        TypeInformation.of(Event.class));

        WatermarkStrategy<Event> watermarks =
                WatermarkStrategy.<Event>forBoundedOutOfOrderness(Duration.ofMillis(500))
                        .withTimestampAssigner((e, previous) -> e.ts);

        DataStream<Event> events =
                env.fromSource(source, watermarks, "source").uid(SOURCE_UID).name("source");

        DataStream<Event> counted =
                events.map(new CountingMap()).uid(MAP_UID).name("counting-map");

        DataStream<Event> processed =
                counted.keyBy(e -> e.key, Types.LONG)
                        .process(new StatefulProcess())
                        .uid(variant.equals("changed-uid") ? PROCESS_UID_CHANGED : PROCESS_UID)
                        .name("keyed-process");

        DataStream<Event> out = processed;
        if (!variant.equals("removed-operator")) {
            out =
                    processed
                            .keyBy(e -> e.key, Types.LONG)
                            .window(TumblingEventTimeWindows.of(Duration.ofSeconds(10)))
                            .reduce(
                                    (a, b) ->
                                            new Event(
                                                    a.key,
                                                    Math.max(a.seq, b.seq),
                                                    Math.max(a.ts, b.ts),
                                                    a.count + b.count))
                            .uid(WINDOW_UID)
                            .name("window");
        }

        out.sinkTo(new DiscardingSink<>()).uid(SINK_UID).name("sink");

        env.execute(jobName);
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument: " + a);
            }
            String k = a.substring(2);
            String v;
            int eq = k.indexOf('=');
            if (eq >= 0) {
                v = k.substring(eq + 1);
                k = k.substring(0, eq);
            } else if (i + 1 < args.length && !args[i + 1].startsWith("--")) {
                v = args[++i];
            } else {
                v = "true";
            }
            m.put(k, v);
        }
        return m;
    }

    /** Pass-through map keeping operator state: a split ListState and a union ListState. */
    public static class CountingMap extends RichMapFunction<Event, Event>
            implements CheckpointedFunction {
        private transient ListState<Long> countState;
        private transient ListState<Long> unionState;
        private long count;

        @Override
        public Event map(Event e) {
            count++;
            return e;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            countState.update(java.util.Collections.singletonList(count));
            unionState.update(
                    java.util.Arrays.asList(
                            ctx.getCheckpointId(),
                            (long) getRuntimeContext().getTaskInfo().getIndexOfThisSubtask()));
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            countState =
                    ctx.getOperatorStateStore()
                            .getListState(new ListStateDescriptor<>("count", Types.LONG));
            unionState =
                    ctx.getOperatorStateStore()
                            .getUnionListState(new ListStateDescriptor<>("union", Types.LONG));
            count = 0;
            if (ctx.isRestored()) {
                for (Long v : countState.get()) {
                    count += v;
                }
                LOG.info(
                        "{} job={} operator=counting-map subtask={} count={}",
                        RESTORED_TAG,
                        getRuntimeContext().getJobInfo().getJobId(),
                        getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(),
                        count);
            }
        }
    }

    /**
     * Keyed state of every kind plus event-time timers. After a restore it logs (once per
     * subtask) the first key whose stored count is larger than the number of events this run has
     * processed for it: proof that the keyed count continued from restored state.
     */
    public static class StatefulProcess extends KeyedProcessFunction<Long, Event, Event>
            implements CheckpointedFunction {
        private transient ValueState<Long> count;
        private transient ListState<Long> recent;
        private transient MapState<Long, Long> buckets;
        private transient ValueState<Long> timer;
        /** Events per key seen by this run; only kept until the restored-state line is logged. */
        private transient Map<Long, Long> seenThisRun;

        @Override
        public void initializeState(FunctionInitializationContext ctx) {
            seenThisRun = ctx.isRestored() ? new HashMap<>() : null;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) {}

        @Override
        public void open(OpenContext openContext) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
            recent = getRuntimeContext().getListState(new ListStateDescriptor<>("recent", Types.LONG));
            buckets =
                    getRuntimeContext()
                            .getMapState(new MapStateDescriptor<>("buckets", Types.LONG, Types.LONG));
            timer = getRuntimeContext().getState(new ValueStateDescriptor<>("timer", Types.LONG));
        }

        @Override
        public void processElement(Event e, Context ctx, Collector<Event> out) throws Exception {
            Long c = count.value();
            long n = c == null ? 1 : c + 1;
            count.update(n);
            if (seenThisRun != null) {
                long seen = seenThisRun.merge(e.key, 1L, Long::sum);
                if (n > seen) {
                    LOG.info(
                            "{} job={} operator=keyed-process subtask={} key={} stored={} seen={}",
                            RESTORED_TAG,
                            getRuntimeContext().getJobInfo().getJobId(),
                            getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(),
                            e.key,
                            n,
                            seen);
                    seenThisRun = null;
                }
            }

            List<Long> keep = new ArrayList<>();
            for (Long v : recent.get()) {
                keep.add(v);
            }
            keep.add(e.seq);
            while (keep.size() > 8) {
                keep.remove(0);
            }
            recent.update(keep);

            long bucket = e.seq % 16;
            Long b = buckets.get(bucket);
            buckets.put(bucket, b == null ? 1 : b + 1);

            if (timer.value() == null) {
                long t = e.ts + 5000;
                ctx.timerService().registerEventTimeTimer(t);
                timer.update(t);
            }
            out.collect(new Event(e.key, e.seq, e.ts, n));
        }

        @Override
        public void onTimer(long timestamp, OnTimerContext ctx, Collector<Event> out)
                throws Exception {
            timer.clear();
            Long c = count.value();
            out.collect(new Event(ctx.getCurrentKey(), -1, timestamp, c == null ? 0 : c));
        }
    }
}
