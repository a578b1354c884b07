//! The Price List Query API (`pricing:GetProducts`), which moto lacks, answered on the
//! front for the on-demand prices a test sets per region ([`crate::aws_front::AwsFront::list_prices`]).
//! Emulated: each item carries only what a reader of EC2's price list uses (the instance
//! type, the region, one on-demand offer priced per hour in USD); the request's
//! `regionCode` filter picks the region, `MaxResults` and `NextToken` page as AWS pages.
//! With no prices set, requests go on to moto, which knows no such service.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::{Value, json};

/// GetProducts's largest page.
const MAX_PAGE: usize = 100;

#[derive(Default)]
pub struct PriceList {
    /// region -> instance type -> USD an hour.
    prices: Mutex<BTreeMap<String, BTreeMap<String, f64>>>,
}

impl PriceList {
    pub fn set(&self, region: &str, prices: impl IntoIterator<Item = (String, f64)>) {
        if let Ok(mut p) = self.prices.lock() {
            p.entry(region.to_string()).or_default().extend(prices);
        }
    }

    /// The answer to `action` with JSON `body`, when it is a GetProducts and prices are set.
    pub fn answer(&self, action: &str, body: &[u8]) -> Option<Value> {
        if action != "GetProducts" {
            return None;
        }
        let prices = self.prices.lock().ok()?;
        if prices.is_empty() {
            return None;
        }
        let request: Value = serde_json::from_slice(body).unwrap_or_default();
        let region = request["Filters"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|f| f["Field"] == "regionCode")
            .and_then(|f| f["Value"].as_str())
            .unwrap_or_default();
        let listed: Vec<(&String, &f64)> = prices.get(region).into_iter().flatten().collect();
        let page = request["MaxResults"]
            .as_u64()
            .map_or(MAX_PAGE, |n| (n as usize).clamp(1, MAX_PAGE));
        let from: usize = request["NextToken"]
            .as_str()
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        let items: Vec<String> = listed
            .iter()
            .skip(from)
            .take(page)
            .map(|(t, p)| item(t, region, **p).to_string())
            .collect();
        let mut answer = json!({"FormatVersion": "aws_v1", "PriceList": items});
        if from + page < listed.len() {
            answer["NextToken"] = json!((from + page).to_string());
        }
        Some(answer)
    }
}

/// One price list item as EC2's price list writes it, cut to what readers use.
fn item(instance_type: &str, region: &str, price: f64) -> Value {
    json!({
        "product": {"attributes": {"instanceType": instance_type, "regionCode": region,
            "operatingSystem": "Linux", "tenancy": "Shared", "capacitystatus": "Used"}},
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {"WORLD.JRTCKXETXF": {"priceDimensions": {
            "WORLD.JRTCKXETXF.6YS6EN2CT7": {"unit": "Hrs",
                "pricePerUnit": {"USD": format!("{price:.10}")}}}}}}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_is_answered_its_own_prices_a_page_at_a_time() {
        let list = PriceList::default();
        assert!(list.answer("GetProducts", b"{}").is_none(), "unset: moto's");
        list.set(
            "eu-west-1",
            [("m5.large".into(), 0.107), ("c5.large".into(), 0.096)],
        );
        list.set("us-east-1", [("m5.large".into(), 0.096)]);
        let ask = |body: Value| {
            list.answer("GetProducts", body.to_string().as_bytes())
                .unwrap()
        };
        let filter = json!([{"Type": "TERM_MATCH", "Field": "regionCode", "Value": "eu-west-1"}]);
        let first = ask(json!({"Filters": filter, "MaxResults": 1}));
        assert_eq!(first["PriceList"].as_array().unwrap().len(), 1);
        assert_eq!(first["NextToken"], "1");
        let second = ask(json!({"Filters": filter, "MaxResults": 1, "NextToken": "1"}));
        assert!(second.get("NextToken").is_none());
        let read: Vec<(String, f64)> = [&first, &second]
            .iter()
            .flat_map(|a| a["PriceList"].as_array().unwrap().clone())
            .map(|i| nodewright::aws::price_list::parse_price_item(i.as_str().unwrap()).unwrap())
            .collect();
        assert_eq!(
            read,
            [("c5.large".into(), 0.096), ("m5.large".into(), 0.107)]
        );
        assert!(list.answer("DescribeInstances", b"{}").is_none());
    }
}
