//! Reads CloudWatch Embedded Metric Format documents out of a function's stdout, checking
//! each against the specification as CloudWatch Logs would before extracting metrics
//! (the `_aws` metadata, namespace, dimension sets and metric definitions, and a
//! top-level member for every dimension and metric named), so a test asserts on what
//! CloudWatch would record rather than on text.
//!
//! Specification: CloudWatch User Guide, "Specification: Embedded metric format".

use std::collections::BTreeMap;

use anyhow::{Context as _, bail};
use serde_json::Value;

/// One metric value set as CloudWatch would extract it from one document.
#[derive(Debug, Clone, PartialEq)]
pub struct Datum {
    pub namespace: String,
    /// The dimension set, with the document's value of each dimension.
    pub dimensions: BTreeMap<String, String>,
    pub name: String,
    pub unit: Option<String>,
    /// One value, or the values of a histogram.
    pub values: Vec<f64>,
}

impl Datum {
    /// The dimension names of this datum, sorted.
    pub fn dimension_names(&self) -> Vec<&str> {
        self.dimensions.keys().map(String::as_str).collect()
    }

    pub fn sum(&self) -> f64 {
        self.values.iter().sum()
    }
}

/// Every datum of every EMF document in `log`; lines without an `_aws` member (the
/// function's own JSON logs, the test harness's text) are not documents. A line that
/// claims to be one and breaks the specification is an error naming its line number.
pub fn read(log: &str) -> anyhow::Result<Vec<Datum>> {
    let mut data = Vec::new();
    for (n, line) in log.lines().enumerate() {
        let Ok(Value::Object(doc)) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if !doc.contains_key("_aws") {
            continue;
        }
        data.extend(document(&doc).with_context(|| format!("log line {}: {line}", n + 1))?);
    }
    Ok(data)
}

fn document(doc: &serde_json::Map<String, Value>) -> anyhow::Result<Vec<Datum>> {
    let aws = doc["_aws"].as_object().context("_aws is not an object")?;
    if !aws.get("Timestamp").is_some_and(Value::is_u64) {
        bail!("_aws.Timestamp is not a number of milliseconds");
    }
    let directives = aws
        .get("CloudWatchMetrics")
        .and_then(Value::as_array)
        .context("_aws.CloudWatchMetrics is not an array")?;
    let mut data = Vec::new();
    for (i, directive) in directives.iter().enumerate() {
        let at = format!("_aws.CloudWatchMetrics[{i}]");
        let namespace = directive["Namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .with_context(|| format!("{at}.Namespace is not a non-empty string"))?;
        let sets = directive["Dimensions"]
            .as_array()
            .with_context(|| format!("{at}.Dimensions is not an array"))?;
        let metrics = directive["Metrics"]
            .as_array()
            .with_context(|| format!("{at}.Metrics is not an array"))?;
        for set in sets {
            let names = set
                .as_array()
                .with_context(|| format!("{at}.Dimensions holds a non-array"))?;
            let mut dimensions = BTreeMap::new();
            for name in names {
                let name = name
                    .as_str()
                    .with_context(|| format!("{at}.Dimensions holds a non-string name"))?;
                let value = doc
                    .get(name)
                    .and_then(Value::as_str)
                    .with_context(|| format!("dimension {name} has no string member"))?;
                dimensions.insert(name.to_string(), value.to_string());
            }
            for metric in metrics {
                let name = metric["Name"]
                    .as_str()
                    .with_context(|| format!("{at}.Metrics holds a metric without a Name"))?;
                let values = match doc.get(name) {
                    Some(Value::Number(v)) => vec![v.as_f64().unwrap_or(f64::NAN)],
                    Some(Value::Array(vs)) => vs
                        .iter()
                        .map(|v| {
                            v.as_f64()
                                .with_context(|| format!("{name}: {v} is not a number"))
                        })
                        .collect::<anyhow::Result<_>>()?,
                    other => bail!("metric {name} has no numeric member: {other:?}"),
                };
                data.push(Datum {
                    namespace: namespace.to_string(),
                    dimensions: dimensions.clone(),
                    name: name.to_string(),
                    unit: metric["Unit"].as_str().map(str::to_string),
                    values,
                });
            }
        }
    }
    Ok(data)
}

/// The data named `name` whose dimension set is exactly `dims` (names and values).
pub fn find<'a>(data: &'a [Datum], name: &str, dims: &[(&str, &str)]) -> Vec<&'a Datum> {
    let want: BTreeMap<String, String> = dims
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    data.iter()
        .filter(|d| d.name == name && d.dimensions == want)
        .collect()
}

/// The fields of every `counted` log line for `name` in `log` (see
/// `nodewright::telemetry::counted`): what Logs Insights reads with
/// `filter fields.message = "counted" and fields.counted = "<name>"`.
pub fn counted(log: &str, name: &str) -> Vec<serde_json::Map<String, Value>> {
    use nodewright::telemetry::counted::MESSAGE;
    log.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|line| match line.get("fields") {
            Some(Value::Object(fields)) => Some(fields.clone()),
            _ => None,
        })
        .filter(|f| f.get("message").and_then(Value::as_str) == Some(MESSAGE))
        .filter(|f| f.get("counted").and_then(Value::as_str) == Some(name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_yields_one_datum_per_metric_with_its_dimension_values() {
        let log = concat!(
            "{\"level\":\"INFO\",\"fields\":{\"message\":\"poll\"}}\n",
            "{\"_aws\":{\"Timestamp\":1,\"CloudWatchMetrics\":[{\"Namespace\":\"nodewright\",",
            "\"Dimensions\":[[\"Cluster\",\"Zone\"]],\"Metrics\":[{\"Name\":\"Launches\",\"Unit\":\"Count\"},",
            "{\"Name\":\"DecisionLatency\"}]}]},\"Cluster\":\"c\",\"Zone\":\"z\",\"Launches\":2,",
            "\"DecisionLatency\":[1.5,2.5]}\n",
        );
        let data = read(log).unwrap();
        assert_eq!(data.len(), 2);
        assert_eq!(data[0].name, "Launches");
        assert_eq!(data[0].dimension_names(), ["Cluster", "Zone"]);
        assert_eq!(data[0].unit.as_deref(), Some("Count"));
        assert_eq!(data[0].values, [2.0]);
        assert_eq!(data[1].values, [1.5, 2.5]);
        assert_eq!(
            find(&data, "Launches", &[("Cluster", "c"), ("Zone", "z")]).len(),
            1
        );
        assert!(find(&data, "Launches", &[("Cluster", "c")]).is_empty());
    }

    #[test]
    fn a_document_naming_a_dimension_or_metric_it_lacks_is_refused_with_its_line() {
        let missing_dimension = "x\n{\"_aws\":{\"Timestamp\":1,\"CloudWatchMetrics\":[{\"Namespace\":\"n\",\"Dimensions\":[[\"Zone\"]],\"Metrics\":[{\"Name\":\"M\"}]}]},\"M\":1}";
        let err = format!("{:#}", read(missing_dimension).unwrap_err());
        assert!(
            err.contains("log line 2") && err.contains("dimension Zone"),
            "{err}"
        );
        let missing_value = "{\"_aws\":{\"Timestamp\":1,\"CloudWatchMetrics\":[{\"Namespace\":\"n\",\"Dimensions\":[[]],\"Metrics\":[{\"Name\":\"M\"}]}]}}";
        let err = format!("{:#}", read(missing_value).unwrap_err());
        assert!(err.contains("metric M has no numeric member"), "{err}");
        let no_timestamp = "{\"_aws\":{\"CloudWatchMetrics\":[]}}";
        assert!(read(no_timestamp).is_err());
    }
}
