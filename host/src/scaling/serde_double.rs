//! Serde for doubles that may be NaN or infinite, as the persisted state holds them.
//!
//! JSON has no NaN or infinity (serde_json would write `null` and then refuse to read it back),
//! so non-finite values are written as the strings `"NaN"`, `"Infinity"`, `"-Infinity"` (Java's
//! spelling); `null` reads back as NaN.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// A double that serializes non-finite values as strings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Double(pub f64);

impl Serialize for Double {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let x = self.0;
        if x.is_nan() {
            serializer.serialize_str("NaN")
        } else if x == f64::INFINITY {
            serializer.serialize_str("Infinity")
        } else if x == f64::NEG_INFINITY {
            serializer.serialize_str("-Infinity")
        } else {
            serializer.serialize_f64(x)
        }
    }
}

struct DoubleVisitor;

impl Visitor<'_> for DoubleVisitor {
    type Value = Double;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number, \"NaN\", \"Infinity\", \"-Infinity\" or null")
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Double, E> {
        Ok(Double(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Double, E> {
        Ok(Double(v as f64))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Double, E> {
        Ok(Double(v as f64))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Double, E> {
        match v {
            "NaN" => Ok(Double(f64::NAN)),
            "Infinity" => Ok(Double(f64::INFINITY)),
            "-Infinity" => Ok(Double(f64::NEG_INFINITY)),
            other => other
                .parse()
                .map(Double)
                .map_err(|_| E::invalid_value(de::Unexpected::Str(other), &self)),
        }
    }
    fn visit_unit<E: de::Error>(self) -> Result<Double, E> {
        Ok(Double(f64::NAN))
    }
    fn visit_none<E: de::Error>(self) -> Result<Double, E> {
        Ok(Double(f64::NAN))
    }
}

impl<'de> Deserialize<'de> for Double {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Double, D::Error> {
        deserializer.deserialize_any(DoubleVisitor)
    }
}

/// `#[serde(with = "serde_double::value")]` for an `f64` field.
pub(crate) mod value {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        Double(*x).serialize(s)
    }
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Double::deserialize(d).map(|v| v.0)
    }
}

/// `#[serde(with = "serde_double::map")]` for a `BTreeMap<K, f64>` field.
pub(crate) mod map {
    use super::*;

    pub(crate) fn serialize<K: Serialize, S: Serializer>(
        m: &BTreeMap<K, f64>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_map(m.iter().map(|(k, v)| (k, Double(*v))))
    }
    pub(crate) fn deserialize<'de, K, D>(d: D) -> Result<BTreeMap<K, f64>, D::Error>
    where
        K: Deserialize<'de> + Ord,
        D: Deserializer<'de>,
    {
        let raw = BTreeMap::<K, Double>::deserialize(d)?;
        Ok(raw.into_iter().map(|(k, v)| (k, v.0)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Holder {
        #[serde(with = "value")]
        x: f64,
        #[serde(with = "map")]
        m: BTreeMap<String, f64>,
    }

    #[test]
    fn non_finite_values_round_trip() {
        let h = Holder {
            x: f64::INFINITY,
            m: [("a".to_string(), f64::NAN), ("b".to_string(), 1.5)]
                .into_iter()
                .collect(),
        };
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(json, r#"{"x":"Infinity","m":{"a":"NaN","b":1.5}}"#);
        let back: Holder = serde_json::from_str(&json).unwrap();
        assert_eq!(back.x, f64::INFINITY);
        assert!(back.m["a"].is_nan());
        assert_eq!(back.m["b"], 1.5);
        let from_null: Holder = serde_json::from_str(r#"{"x":null,"m":{}}"#).unwrap();
        assert!(from_null.x.is_nan());
    }
}
