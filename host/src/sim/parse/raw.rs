//! The job file's schema as serde reads it: raw tables whose values remember where in the text
//! they came from (`toml::Spanned`), so that validation can point at them. Nothing here is
//! checked beyond its TOML type; `deny_unknown_fields` makes a typo an error rather than a
//! silently ignored key.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use crate::config::{parse_duration, parse_memory_size};

/// A duration written either in Flink's syntax (`"30s"`, `"5 min"`) or as a number of
/// milliseconds.
#[derive(Debug, Clone, Copy)]
pub(super) struct RawDuration(Result<i64, ()>, f64);

impl<'de> Deserialize<'de> for RawDuration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = RawDuration;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "a duration such as \"30s\", \"5 min\", \"1h\", or a number of milliseconds",
                )
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RawDuration, E> {
                if v < 0 {
                    return Err(E::custom("a duration cannot be negative"));
                }
                Ok(RawDuration(Ok(v), v as f64 / 1000.0))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawDuration, E> {
                let d = parse_duration(v).map_err(E::custom)?;
                Ok(RawDuration(
                    i64::try_from(d.as_millis()).map_err(|_| ()),
                    d.as_secs_f64(),
                ))
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl RawDuration {
    /// Whole milliseconds; `Err` when they do not fit an `i64`.
    pub(super) fn millis(&self) -> Result<i64, ()> {
        self.0
    }

    /// Seconds, with the fraction.
    pub(super) fn secs(&self) -> f64 {
        self.1
    }
}

/// A memory size written in Flink's syntax (`"4 gb"`, `"1536m"`) or as a number of bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct RawMemory(pub(super) u64);

impl<'de> Deserialize<'de> for RawMemory {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = RawMemory;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a memory size such as \"4 gb\", \"1536m\", or a number of bytes")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RawMemory, E> {
                u64::try_from(v)
                    .map(RawMemory)
                    .map_err(|_| E::custom("a memory size cannot be negative"))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawMemory, E> {
                parse_memory_size(v).map(RawMemory).map_err(E::custom)
            }
        }
        d.deserialize_any(Visitor)
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawJob {
    #[serde(default)]
    pub(super) job: RawHeader,
    pub(super) keys: Option<Spanned<RawDist>>,
    #[serde(default)]
    pub(super) vertices: Vec<Spanned<RawVertex>>,
    #[serde(default)]
    pub(super) edges: Vec<Spanned<RawEdge>>,
    #[serde(default)]
    pub(super) feedback: Vec<Spanned<RawFeedback>>,
    #[serde(default)]
    pub(super) workload: BTreeMap<String, Spanned<RawWorkload>>,
    pub(super) restart: Option<RawRestart>,
    pub(super) taskmanager: Option<Spanned<RawTaskManager>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHeader {
    pub(super) name: Option<String>,
    pub(super) seed: Option<u64>,
    pub(super) tick: Option<Spanned<RawDuration>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawVertex {
    pub(super) id: Spanned<String>,
    pub(super) name: Option<String>,
    pub(super) kind: Spanned<String>,
    pub(super) parallelism: Spanned<i64>,
    pub(super) max_parallelism: Option<Spanned<i64>>,
    pub(super) capacity: Option<Spanned<f64>>,
    pub(super) cost_per_record: Option<Spanned<RawDuration>>,
    pub(super) selectivity: Option<Spanned<f64>>,
    pub(super) partitions: Option<Spanned<i64>>,
    pub(super) buffer: Option<Spanned<i64>>,
    pub(super) state_bytes: Option<Spanned<f64>>,
    pub(super) state_bytes_per_record: Option<Spanned<f64>>,
    pub(super) slot_sharing_group: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEdge {
    pub(super) from: Spanned<String>,
    pub(super) to: Spanned<String>,
    pub(super) ship: Spanned<String>,
    pub(super) buckets: Option<Spanned<i64>>,
    pub(super) keys: Option<Spanned<RawDist>>,
    pub(super) drift: Option<Spanned<RawDuration>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFeedback {
    pub(super) from: Spanned<String>,
    pub(super) to: Spanned<String>,
    pub(super) fraction: Spanned<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWorkload {
    #[serde(default)]
    pub(super) rate: Vec<Spanned<RawRate>>,
    pub(super) partition_skew: Option<Spanned<RawDist>>,
    pub(super) total_records: Option<Spanned<i64>>,
    pub(super) noise: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRate {
    pub(super) kind: Spanned<String>,
    pub(super) rate: Option<f64>,
    pub(super) from: Option<f64>,
    pub(super) to: Option<f64>,
    pub(super) at: Option<RawDuration>,
    pub(super) start: Option<RawDuration>,
    pub(super) end: Option<RawDuration>,
    pub(super) mean: Option<f64>,
    pub(super) amplitude: Option<f64>,
    pub(super) period: Option<RawDuration>,
    pub(super) phase: Option<RawDuration>,
    pub(super) low: Option<f64>,
    pub(super) high: Option<f64>,
    pub(super) peak_at: Option<RawDuration>,
    pub(super) extra: Option<f64>,
    pub(super) duration: Option<RawDuration>,
    pub(super) path: Option<String>,
    pub(super) interpolate: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDist {
    pub(super) kind: Spanned<String>,
    pub(super) exponent: Option<f64>,
    pub(super) weights: Option<Vec<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRestart {
    pub(super) downtime: Option<Spanned<RawDuration>>,
    pub(super) per_gib: Option<Spanned<RawDuration>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTaskManager {
    pub(super) cpu: Option<Spanned<f64>>,
    pub(super) memory: Option<Spanned<RawMemory>>,
    pub(super) slots: Option<Spanned<i64>>,
}
