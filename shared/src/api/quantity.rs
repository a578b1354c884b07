use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::resources::{QuantityError, parse_milli};

/// A Kubernetes quantity as written by the user. YAML lets people write `cpu: 1000` as a
/// number, which the API server accepts, so numbers are taken as well as strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Quantity(pub String);

impl Quantity {
    pub fn milli(&self) -> Result<i64, QuantityError> {
        parse_milli(&self.0)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            S(String),
            I(i64),
            F(f64),
        }
        Ok(Quantity(match Raw::deserialize(d)? {
            Raw::S(s) => s,
            Raw::I(i) => i.to_string(),
            Raw::F(f) => f.to_string(),
        }))
    }
}
