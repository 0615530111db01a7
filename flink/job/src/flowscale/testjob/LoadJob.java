package flowscale.testjob;

import java.util.concurrent.locks.LockSupport;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

/**
 * A synthetic load for exercising an autoscaler against a real cluster.
 *
 * <p>source (rate-limited generator) -> cost (a map that spends a fixed wall time per record) ->
 * keyBy -> count (keyed state, optionally with its own wall time per record) -> sink (discarding). Chaining is disabled so every operator is its
 * own job vertex with its own metrics and parallelism. The per-record cost is wall time (a sleep),
 * not CPU work, so adding subtasks raises throughput even on a machine with few cores.
 *
 * <p>Arguments (all optional): {@code --rate <records/s>} (default 1000), {@code --cost-ms <ms per
 * record>} (default 2.0), {@code --parallelism <initial parallelism of every vertex>} (default 1),
 * {@code --max-parallelism <key groups>} (default 128), {@code --keys <distinct keys>} (default 1000),
 * {@code --keyed-cost-ms <ms per record in count>} (default 0). The keyed cost makes the vertex behind
 * the HASH edge the bottleneck: that is the vertex whose parallelism key-group alignment applies to.
 *
 * <p>Skewed keys: {@code --hot-key-groups <g,g,...>} with {@code --hot-share <fraction>} sends that
 * fraction of the records to keys of the listed key groups (round robin over them) and the rest to
 * one key per key group, round robin over all key groups, instead of {@code --keys}. Every key group's
 * share of the load is then known exactly: {@code (1 - share) / maxParallelism}, plus {@code share /
 * count} for a listed one, which is what a test of load-aware alignment needs.
 */
public final class LoadJob {

    private LoadJob() {}

    public static void main(String[] args) throws Exception {
        long rate = 1000;
        double costMs = 2.0;
        int parallelism = 1;
        int maxParallelism = 128;
        long keys = 1000;
        double keyedCostMs = 0.0;
        int[] hotKeyGroups = new int[0];
        double hotShare = 0.0;
        for (int i = 0; i + 1 < args.length; i += 2) {
            String value = args[i + 1];
            switch (args[i]) {
                case "--rate": rate = Long.parseLong(value); break;
                case "--cost-ms": costMs = Double.parseDouble(value); break;
                case "--parallelism": parallelism = Integer.parseInt(value); break;
                case "--max-parallelism": maxParallelism = Integer.parseInt(value); break;
                case "--keys": keys = Long.parseLong(value); break;
                case "--keyed-cost-ms": keyedCostMs = Double.parseDouble(value); break;
                case "--hot-key-groups":
                    hotKeyGroups =
                            java.util.Arrays.stream(value.split(",")).mapToInt(Integer::parseInt).toArray();
                    break;
                case "--hot-share": hotShare = Double.parseDouble(value); break;
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        final long keyCount = Math.max(1, keys);
        final Keys keyOf =
                hotKeyGroups.length > 0
                        ? new SkewedKeys(maxParallelism, hotKeyGroups, hotShare)
                        : index -> index % keyCount;
        final long costNanos = (long) (costMs * 1_000_000.0);
        final long keyedCostNanos = (long) (keyedCostMs * 1_000_000.0);

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(parallelism);
        env.setMaxParallelism(maxParallelism);
        env.disableOperatorChaining();

        DataGeneratorSource<Long> source =
                new DataGeneratorSource<>(
                        index -> index, Long.MAX_VALUE, RateLimiterStrategy.perSecond(rate), Types.LONG);

        env.fromSource(source, WatermarkStrategy.noWatermarks(), "source")
                .uid("source")
                .map(new Cost(costNanos))
                .uid("cost")
                .name("cost")
                .keyBy(keyOf::of, Types.LONG)
                .process(new Count(keyedCostNanos))
                .uid("count")
                .name("count")
                .sinkTo(new DiscardingSink<>())
                .uid("sink")
                .name("sink");

        env.execute("flowscale-load");
    }

    /** The key of the record with generator index {@code index}. */
    interface Keys extends java.io.Serializable {
        long of(long index);
    }

    /**
     * A fraction {@code share} of the records goes to the hot key groups (round robin over them), the
     * rest to every key group in turn. The split is exact in every block of {@value #BLOCK} records
     * (the share is rounded to {@code 1/BLOCK}) and spread evenly within a block: record {@code r} of
     * a block is hot when {@code (r + 1) * k / BLOCK} exceeds {@code r * k / BLOCK} (integer division,
     * {@code k} hot records per block). Integer arithmetic: the generator's indices of a parallel
     * source reach beyond what a double represents exactly.
     */
    static final class SkewedKeys implements Keys {
        static final long BLOCK = 1000;
        /** A key of each key group: {@code keyOfGroup[g]} lands in key group {@code g}. */
        private final long[] keyOfGroup;
        private final int[] hot;
        /** Hot records per block. */
        private final long hotPerBlock;

        SkewedKeys(int maxParallelism, int[] hot, double share) {
            if (!(share >= 0.0 && share <= 1.0)) {
                throw new IllegalArgumentException("--hot-share must be in [0, 1], got " + share);
            }
            for (int g : hot) {
                if (g < 0 || g >= maxParallelism) {
                    throw new IllegalArgumentException(
                            "hot key group " + g + " outside [0, " + maxParallelism + ")");
                }
            }
            this.keyOfGroup = new long[maxParallelism];
            java.util.Arrays.fill(keyOfGroup, -1);
            int found = 0;
            for (long key = 0; found < maxParallelism; key++) {
                int group = KeyGroupRangeAssignment.assignToKeyGroup(key, maxParallelism);
                if (keyOfGroup[group] < 0) {
                    keyOfGroup[group] = key;
                    found++;
                }
            }
            this.hot = hot.clone();
            this.hotPerBlock = Math.round(share * BLOCK);
        }

        @Override
        public long of(long index) {
            long block = index / BLOCK;
            long r = index % BLOCK;
            long hotBefore = r * hotPerBlock / BLOCK;
            if ((r + 1) * hotPerBlock / BLOCK > hotBefore) {
                long hotIndex = block * hotPerBlock + hotBefore;
                return keyOfGroup[hot[(int) (hotIndex % hot.length)]];
            }
            long coldIndex = block * (BLOCK - hotPerBlock) + (r - hotBefore);
            return keyOfGroup[(int) (coldIndex % keyOfGroup.length)];
        }
    }

    /**
     * Spends a fixed wall time per record on average, sleeping only once at least 1 ms is owed (a
     * shorter park is not honoured precisely); an overshoot is paid back by the next records.
     */
    static final class Delay implements java.io.Serializable {
        private final long costNanos;
        private transient long debtNanos;

        Delay(long costNanos) {
            this.costNanos = costNanos;
        }

        void spend() {
            if (costNanos <= 0) {
                return;
            }
            debtNanos += costNanos;
            if (debtNanos >= 1_000_000L) {
                long start = System.nanoTime();
                LockSupport.parkNanos(debtNanos);
                debtNanos -= System.nanoTime() - start;
            }
        }
    }

    /** Spends {@code costNanos} of wall time per record. */
    static final class Cost extends RichMapFunction<Long, Long> {
        private final Delay delay;

        Cost(long costNanos) {
            this.delay = new Delay(costNanos);
        }

        @Override
        public Long map(Long value) {
            delay.spend();
            return value;
        }
    }

    /** Counts records per key in keyed state, spending {@code costNanos} per record first. */
    static final class Count extends KeyedProcessFunction<Long, Long, Long> {
        private final Delay delay;
        private transient ValueState<Long> count;

        Count(long costNanos) {
            this.delay = new Delay(costNanos);
        }

        @Override
        public void open(OpenContext context) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override
        public void processElement(Long value, Context ctx, Collector<Long> out) throws Exception {
            delay.spend();
            Long current = count.value();
            long next = current == null ? 1 : current + 1;
            count.update(next);
            out.collect(next);
        }
    }
}
