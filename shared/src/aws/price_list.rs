//! Reading the Price List service's answer: each `GetProducts` item is one JSON document
//! (a string inside the JSON response) holding a product and its terms. We read two paths
//! of it: `product.attributes.instanceType` and
//! `terms.OnDemand.<offer>.priceDimensions.<rate>.pricePerUnit.USD` (an hourly price
//! written as a decimal string, e.g. `"0.1150000000"`).
//!
//! Pure: a document that lacks what we need, or whose price is not a positive number, is
//! skipped with the reason; the caller logs it. One bad item never costs the others.

use std::collections::BTreeMap;

use serde::Deserialize;

/// Why one price list item gave no price.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkipReason {
    #[error("not a price list document: {0}")]
    Malformed(String),
    #[error("product.attributes.instanceType is missing or empty")]
    NoInstanceType,
    #[error("terms.OnDemand has no hourly priceDimensions with a pricePerUnit.USD")]
    NoUsdPrice,
    #[error(
        "terms.OnDemand pricePerUnit.USD is {0:?}; a price must be a positive number of USD per hour"
    )]
    UnusablePrice(String),
}

/// An item skipped, by its index in the page's `PriceList`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedItem {
    pub index: usize,
    pub reason: SkipReason,
}

/// One page read: the prices found (in item order) and the items skipped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceListPage {
    pub prices: Vec<(String, f64)>,
    pub skipped: Vec<SkippedItem>,
}

/// Reads every item of one `GetProducts` page.
pub fn parse_price_list(items: &[String]) -> PriceListPage {
    let mut page = PriceListPage::default();
    for (index, item) in items.iter().enumerate() {
        match parse_price_item(item) {
            Ok(price) => page.prices.push(price),
            Err(reason) => page.skipped.push(SkippedItem { index, reason }),
        }
    }
    page
}

/// The instance type and its on-demand USD price per hour in one price list item.
///
/// Only dimensions priced per hour (`unit` `Hrs`, or no unit given) count. A Linux, shared,
/// capacity-status-`Used` product has one on-demand offer with one dimension; should there
/// be several usable ones, the first in key order wins so the answer is deterministic.
pub fn parse_price_item(item: &str) -> Result<(String, f64), SkipReason> {
    let doc: Item = serde_json::from_str(item).map_err(|e| SkipReason::Malformed(e.to_string()))?;
    let instance_type = doc
        .product
        .and_then(|p| p.attributes)
        .and_then(|a| a.instance_type)
        .filter(|t| !t.trim().is_empty())
        .ok_or(SkipReason::NoInstanceType)?;
    let quoted: Vec<String> = doc
        .terms
        .and_then(|t| t.on_demand)
        .unwrap_or_default()
        .into_values()
        .flat_map(|term| term.price_dimensions.unwrap_or_default().into_values())
        .filter(|d| d.unit.as_deref().is_none_or(|u| u == HOURLY_UNIT))
        .filter_map(|d| d.price_per_unit?.remove(CURRENCY))
        .collect();
    let Some(first) = quoted.first() else {
        return Err(SkipReason::NoUsdPrice);
    };
    quoted
        .iter()
        .find_map(|raw| usable_price(raw))
        .map(|price| (instance_type, price))
        .ok_or_else(|| SkipReason::UnusablePrice(first.clone()))
}

/// The unit of an hourly rate in price list documents.
const HOURLY_UNIT: &str = "Hrs";
/// The currency of every commercial-partition price list (China's are in CNY; nodewright
/// does not ask the China endpoint, see [`super::pricing::pricing_endpoint_region`]).
const CURRENCY: &str = "USD";

/// A price we can use: a finite number above zero. Zero is how the price list writes
/// "included in a reservation", never a real on-demand rate.
fn usable_price(raw: &str) -> Option<f64> {
    raw.trim()
        .parse::<f64>()
        .ok()
        .filter(|p| p.is_finite() && *p > 0.0)
}

// Only the paths we read; every other field of the document is ignored.
#[derive(Deserialize)]
struct Item {
    product: Option<Product>,
    terms: Option<Terms>,
}

#[derive(Deserialize)]
struct Product {
    attributes: Option<Attributes>,
}

#[derive(Deserialize)]
struct Attributes {
    #[serde(rename = "instanceType")]
    instance_type: Option<String>,
}

#[derive(Deserialize)]
struct Terms {
    #[serde(rename = "OnDemand")]
    on_demand: Option<BTreeMap<String, Term>>,
}

#[derive(Deserialize)]
struct Term {
    #[serde(rename = "priceDimensions")]
    price_dimensions: Option<BTreeMap<String, Dimension>>,
}

#[derive(Deserialize)]
struct Dimension {
    unit: Option<String>,
    #[serde(rename = "pricePerUnit")]
    price_per_unit: Option<BTreeMap<String, String>>,
}

#[cfg(test)]
mod tests;
