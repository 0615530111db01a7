//! Maps keyed by shared vertex ids (`Arc<str>`, the topology's), (de)serialized exactly as the
//! same maps keyed by `String`: a state keeps the graph's ids instead of a copy of each, and
//! state files read and write as before.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Serializes a map keyed by shared ids as the same map keyed by `String` is.
pub(crate) fn serialize<S: Serializer, V: Serialize>(
    map: &BTreeMap<Arc<str>, V>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(map.iter().map(|(id, value)| (&**id, value)))
}

/// Reads a map keyed by `String` into one keyed by ids of its own (a loaded state shares
/// nothing with a graph yet).
pub(crate) fn deserialize<'de, D: Deserializer<'de>, V: Deserialize<'de>>(
    deserializer: D,
) -> Result<BTreeMap<Arc<str>, V>, D::Error> {
    let map = BTreeMap::<String, V>::deserialize(deserializer)?;
    Ok(map.into_iter().map(|(id, v)| (Arc::from(id), v)).collect())
}
