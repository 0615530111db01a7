//! Which subtask metrics of a vertex the autoscaler needs (the Flink
//! autoscaler's `FlinkMetric` predicates) and how many source partitions the metric names reveal.

/// A metric the autoscaler reads, recognised by a predicate on Flink's metric name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum FlinkMetric {
    /// `busyTimeMsPerSecond` (required, all vertices).
    BusyTimePerSec,
    /// `backPressuredTimeMsPerSecond` (required, sources).
    BackpressureTimePerSec,
    /// `Source__*.numRecordsInPerSecond` (required, sources).
    SourceTaskNumRecordsInPerSec,
    /// `Source__*.numRecordsIn` (required, sources).
    SourceTaskNumRecordsIn,
    /// `*.pendingRecords` (optional, sources; every match is kept).
    PendingRecords,
    /// `Source__*.numRecordsOut` (optional, sources; the first match).
    SourceTaskNumRecordsOut,
    /// `numRecordsInPerSecond` (optional, non-sources).
    NumRecordsInPerSec,
}

impl FlinkMetric {
    /// The metrics queried for a source vertex, in the Flink autoscaler's order.
    pub(crate) const SOURCE: [FlinkMetric; 6] = [
        FlinkMetric::BusyTimePerSec,
        FlinkMetric::BackpressureTimePerSec,
        FlinkMetric::SourceTaskNumRecordsInPerSec,
        FlinkMetric::SourceTaskNumRecordsIn,
        FlinkMetric::PendingRecords,
        FlinkMetric::SourceTaskNumRecordsOut,
    ];

    /// The metrics queried for any other vertex.
    pub(crate) const NON_SOURCE: [FlinkMetric; 2] =
        [FlinkMetric::BusyTimePerSec, FlinkMetric::NumRecordsInPerSec];

    /// Whether `name` is this metric.
    pub(crate) fn matches(self, name: &str) -> bool {
        match self {
            FlinkMetric::BusyTimePerSec => name == "busyTimeMsPerSecond",
            FlinkMetric::BackpressureTimePerSec => name == "backPressuredTimeMsPerSecond",
            FlinkMetric::SourceTaskNumRecordsInPerSec => {
                name.starts_with("Source__") && name.ends_with(".numRecordsInPerSecond")
            }
            FlinkMetric::SourceTaskNumRecordsIn => {
                name.starts_with("Source__") && name.ends_with(".numRecordsIn")
            }
            FlinkMetric::PendingRecords => name.ends_with(".pendingRecords"),
            FlinkMetric::SourceTaskNumRecordsOut => {
                name.starts_with("Source__") && name.ends_with(".numRecordsOut")
            }
            FlinkMetric::NumRecordsInPerSec => name == "numRecordsInPerSecond",
        }
    }

    /// Whether every matching name is queried (and later merged) rather than the first one.
    fn takes_all_matches(self) -> bool {
        self == FlinkMetric::PendingRecords
    }
}

/// The names to query for a vertex, chosen from the names the vertex reports. Missing metrics
/// are simply absent: the decision degrades (the Flink autoscaler waits, or treats lag as 0), it never
/// fails here. Among several matches of a single-valued metric the first in `available` wins.
pub(crate) fn select_metric_names(available: &[String], is_source: bool) -> Vec<String> {
    let wanted: &[FlinkMetric] = if is_source {
        &FlinkMetric::SOURCE
    } else {
        &FlinkMetric::NON_SOURCE
    };
    let mut selected: Vec<String> = Vec::new();
    for metric in wanted {
        let mut matches = available.iter().filter(|name| metric.matches(name));
        if metric.takes_all_matches() {
            selected.extend(matches.cloned());
        } else if let Some(first) = matches.next() {
            selected.push(first.clone());
        }
    }
    selected.dedup();
    selected
}

/// The number of distinct source partitions the metric names reveal (Kafka `currentOffset`
/// gauges and Pulsar `numMsgsReceived` counters), 0 when none is recognised. Topics and clusters
/// are counted together, as the Flink autoscaler does.
pub(crate) fn count_source_partitions<'a>(names: impl IntoIterator<Item = &'a str>) -> u32 {
    let mut keys = std::collections::BTreeSet::new();
    for name in names {
        if let Some(key) = kafka_partition(name).or_else(|| pulsar_partition(name)) {
            keys.insert(key);
        }
    }
    u32::try_from(keys.len()).unwrap_or(u32::MAX)
}

/// `^.*?(\.kafkaCluster\.(?<cluster>.+))?\.KafkaSourceReader\.topic\.(?<topic>.+)\.partition\.(?<id>\d+)\.currentOffset$`
/// -> `"<cluster or null>-<topic>-<id>"`, matched with the same leftmost/greedy choices.
fn kafka_partition(name: &str) -> Option<String> {
    const CLUSTER: &str = ".kafkaCluster.";
    const READER: &str = ".KafkaSourceReader.topic.";
    let head = name.strip_suffix(".currentOffset")?;
    let (head, id) = head.rsplit_once('.')?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let head = head.strip_suffix(".partition")?;
    // The lazy prefix tries every start from the left; at each start the optional cluster group
    // is tried first, and its greedy `.+` takes up to the last reader marker that leaves a topic.
    // Both alternatives begin with a dot, so only dots are candidate starts.
    for (start, _) in head.match_indices('.') {
        let rest = &head[start..];
        if let Some(after) = rest.strip_prefix(CLUSTER) {
            let last_reader = after
                .match_indices(READER)
                .filter(|(at, _)| *at > 0 && at + READER.len() < after.len())
                .map(|(at, _)| at)
                .last();
            if let Some(at) = last_reader {
                let cluster = &after[..at];
                let topic = &after[at + READER.len()..];
                return Some(format!("{cluster}-{topic}-{id}"));
            }
        }
        if let Some(topic) = rest.strip_prefix(READER)
            && !topic.is_empty()
        {
            return Some(format!("null-{topic}-{id}"));
        }
    }
    None
}

/// `^.*\.PulsarConsumer\.(?<topic>.+)-partition-(?<id>\d+)\..*\.numMsgsReceived$` ->
/// `"<topic>-<id>"`, preferring (like the greedy regex) the last consumer marker and then the
/// last partition marker that fit.
fn pulsar_partition(name: &str) -> Option<String> {
    const CONSUMER: &str = ".PulsarConsumer.";
    const PARTITION: &str = "-partition-";
    let body = name.strip_suffix(".numMsgsReceived")?;
    let consumers: Vec<usize> = body.match_indices(CONSUMER).map(|(at, _)| at).collect();
    for &consumer in consumers.iter().rev() {
        let after = &body[consumer + CONSUMER.len()..];
        let partitions: Vec<usize> = after.match_indices(PARTITION).map(|(at, _)| at).collect();
        for &at in partitions.iter().rev() {
            if at == 0 {
                continue;
            }
            let tail = &after[at + PARTITION.len()..];
            let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 && tail[digits..].starts_with('.') {
                return Some(format!("{}-{}", &after[..at], &tail[..digits]));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn sources_get_the_source_metrics_and_all_pending_records() {
        let available = names(&[
            "numRecordsInPerSecond",
            "Source__kafka.numRecordsInPerSecond",
            "busyTimeMsPerSecond",
            "Source__kafka.numRecordsIn",
            "a.pendingRecords",
            "b.pendingRecords",
            "Source__kafka.numRecordsOut",
            "backPressuredTimeMsPerSecond",
            "Source__kafka.numRecordsInErrors",
        ]);
        assert_eq!(
            select_metric_names(&available, true),
            names(&[
                "busyTimeMsPerSecond",
                "backPressuredTimeMsPerSecond",
                "Source__kafka.numRecordsInPerSecond",
                "Source__kafka.numRecordsIn",
                "a.pendingRecords",
                "b.pendingRecords",
                "Source__kafka.numRecordsOut",
            ])
        );
        assert_eq!(
            select_metric_names(&available, false),
            names(&["busyTimeMsPerSecond", "numRecordsInPerSecond"])
        );
    }

    #[test]
    fn missing_metrics_are_left_out_not_invented() {
        assert!(select_metric_names(&names(&["numBytesIn"]), true).is_empty());
        assert_eq!(
            select_metric_names(&names(&["busyTimeMsPerSecond"]), false),
            names(&["busyTimeMsPerSecond"])
        );
    }

    #[test]
    fn kafka_partitions_with_and_without_cluster() {
        assert_eq!(
            kafka_partition("1.Source__k.KafkaSourceReader.topic.orders.partition.3.currentOffset"),
            Some("null-orders-3".into())
        );
        assert_eq!(
            kafka_partition(
                "1.Source__k.kafkaCluster.east.KafkaSourceReader.topic.a.b.partition.12.currentOffset"
            ),
            Some("east-a.b-12".into())
        );
        // The greedy topic ends at the last partition marker.
        assert_eq!(
            kafka_partition("x.KafkaSourceReader.topic.t.partition.1.partition.2.currentOffset"),
            Some("null-t.partition.1-2".into())
        );
        assert_eq!(
            kafka_partition("x.KafkaSourceReader.topic.t.partition.x.currentOffset"),
            None
        );
        assert_eq!(
            kafka_partition("x.KafkaSourceReader.topic.t.partition.1.committedOffset"),
            None
        );
    }

    #[test]
    fn pulsar_partitions() {
        assert_eq!(
            pulsar_partition(
                "0.Source__p.PulsarConsumer.persistent://public/default/t-partition-2.c1.numMsgsReceived"
            ),
            Some("persistent://public/default/t-2".into())
        );
        assert_eq!(
            pulsar_partition("0.PulsarConsumer.t-partition-2.numMsgsReceived"),
            None,
            "the id must be followed by a dot and something before the suffix"
        );
        assert_eq!(
            pulsar_partition("0.PulsarConsumer.t-partition-2..numMsgsReceived"),
            Some("t-2".into())
        );
    }

    #[test]
    fn partitions_are_counted_across_topics_clusters_and_subtasks() {
        let list = [
            "0.S.KafkaSourceReader.topic.a.partition.0.currentOffset",
            "1.S.KafkaSourceReader.topic.a.partition.1.currentOffset",
            "1.S.KafkaSourceReader.topic.a.partition.1.currentOffset",
            "0.S.kafkaCluster.c.KafkaSourceReader.topic.a.partition.0.currentOffset",
            "0.S.PulsarConsumer.p-partition-0.x.numMsgsReceived",
            "0.S.PulsarConsumer.p-partition-1.y.numMsgsReceived",
            "busyTimeMsPerSecond",
        ];
        assert_eq!(count_source_partitions(list), 5);
        assert_eq!(count_source_partitions(["numRecordsIn"]), 0);
    }
}
