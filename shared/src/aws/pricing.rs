//! On-demand prices of the region from the AWS Price List Query API (`pricing:GetProducts`),
//! and [`BundledPrices`], the source for places without that API (moto, local runs).
//!
//! The Query API is served from three endpoints only — `api.pricing.us-east-1`,
//! `api.pricing.eu-central-1` and `api.pricing.ap-south-1` (AWS Billing user guide, "Price
//! List Query API endpoints"); which one answers does not change the answer, the region
//! asked about is a filter. We call the nearest.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_pricing::types::{Filter, FilterType};

use super::errors::{AwsError, api};
use super::ports::OnDemandPriceSource;
use super::price_list::parse_price_list;

/// The Price List service code of EC2.
const EC2_SERVICE_CODE: &str = "AmazonEC2";
/// GetProducts answers at most 100 items a page (its `MaxResults` range is 1..=100).
const PAGE_SIZE: i32 = 100;
/// How long one whole refresh (all pages) may take. A region has at most about 1,400
/// matching products (the bundled us-east-1 table lists 1,367 types), so up to fourteen
/// pages of well under a second each; twenty seconds is generous for that, yet leaves most
/// of a provisioner invocation's fifty-second budget.
pub const PRICE_FETCH_TIMEOUT: Duration = Duration::from_secs(20);

/// The Price List endpoint region nearest to `region`, or `None` where the commercial
/// endpoints cannot help: China (its own endpoint, prices in CNY), GovCloud and the
/// isolated and sovereign partitions (no Price List endpoint; credentials of another
/// partition). There the bundled table stays in use.
pub fn pricing_endpoint_region(region: &str) -> Option<&'static str> {
    const NO_ENDPOINT: &[&str] = &["cn-", "us-gov-", "us-iso", "eusc-"];
    const NEAREST: &[(&str, &str)] = &[
        ("ap-", "ap-south-1"),
        ("eu-", "eu-central-1"),
        ("il-", "eu-central-1"),
        ("me-", "eu-central-1"),
        ("af-", "eu-central-1"),
    ];
    if NO_ENDPOINT.iter().any(|p| region.starts_with(p)) {
        return None;
    }
    Some(
        NEAREST
            .iter()
            .find(|(prefix, _)| region.starts_with(prefix))
            .map_or("us-east-1", |(_, endpoint)| endpoint),
    )
}

/// A Pricing client for the endpoint nearest to `region`, with everything else
/// (credentials, retries, timeouts) from `sdk`; `None` where no endpoint serves the region.
pub fn pricing_client(sdk: &aws_types::SdkConfig, region: &str) -> Option<aws_sdk_pricing::Client> {
    let endpoint = pricing_endpoint_region(region)?;
    let config = aws_sdk_pricing::config::Builder::from(sdk)
        .region(aws_types::region::Region::new(endpoint))
        .build();
    Some(aws_sdk_pricing::Client::from_conf(config))
}

/// The filters of "Linux, shared tenancy, no pre-installed software, no license, capacity
/// actually used (not an unused reservation), on demand" in `region` — the attribute names
/// and values of the EC2 price list, as Karpenter's pricing provider uses them. Bare-metal
/// types are listed under `Dedicated` tenancy there, so this query leaves them out and
/// they keep their bundled price.
fn linux_on_demand_filters(region: &str) -> Result<Vec<Filter>, AwsError> {
    [
        ("regionCode", region),
        ("operatingSystem", "Linux"),
        ("tenancy", "Shared"),
        ("preInstalledSw", "NA"),
        ("licenseModel", "No License required"),
        ("capacitystatus", "Used"),
        ("marketoption", "OnDemand"),
    ]
    .into_iter()
    .map(|(field, value)| {
        Filter::builder()
            .r#type(FilterType::TermMatch)
            .field(field)
            .value(value)
            .build()
            .map_err(|source| AwsError::BuildRequest {
                request: "GetProducts",
                source,
            })
    })
    .collect()
}

/// Asks the Price List Query API for the on-demand prices of one region.
#[derive(Debug, Clone)]
pub struct PricingAdapter {
    /// `None` where no endpoint serves the region: the adapter then knows no prices.
    client: Option<aws_sdk_pricing::Client>,
    region: String,
    timeout: Duration,
}

impl PricingAdapter {
    /// Prices of `region` asked through `client` (whose own region picks the endpoint).
    pub fn new(client: aws_sdk_pricing::Client, region: &str) -> PricingAdapter {
        PricingAdapter {
            client: Some(client),
            region: region.to_string(),
            timeout: PRICE_FETCH_TIMEOUT,
        }
    }

    /// Prices of `region`, asked at the nearest endpoint with `sdk`'s credentials (see
    /// [`pricing_client`]).
    pub fn from_config(sdk: &aws_types::SdkConfig, region: &str) -> PricingAdapter {
        PricingAdapter {
            client: pricing_client(sdk, region),
            region: region.to_string(),
            timeout: PRICE_FETCH_TIMEOUT,
        }
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    async fn fetch(
        &self,
        client: &aws_sdk_pricing::Client,
    ) -> Result<HashMap<String, f64>, AwsError> {
        let mut pages = client
            .get_products()
            .service_code(EC2_SERVICE_CODE)
            .format_version("aws_v1")
            .set_filters(Some(linux_on_demand_filters(&self.region)?))
            .max_results(PAGE_SIZE)
            .into_paginator()
            .send();
        let mut prices = HashMap::new();
        let (mut page_number, mut skipped) = (0usize, 0usize);
        while let Some(page) = pages.next().await {
            let page = page.map_err(api(|source| AwsError::GetProducts {
                region: self.region.clone(),
                source,
            }))?;
            let read = parse_price_list(page.price_list());
            for s in &read.skipped {
                tracing::warn!(
                    region = self.region,
                    page = page_number,
                    item = s.index,
                    reason = %s.reason,
                    "price list item skipped"
                );
            }
            skipped += read.skipped.len();
            for (instance_type, price) in read.prices {
                // The filters leave one product per type; should AWS list a type twice,
                // the first answer stays, so a page order cannot flip a price.
                prices.entry(instance_type).or_insert(price);
            }
            page_number += 1;
        }
        tracing::info!(
            region = self.region,
            priced = prices.len(),
            skipped,
            pages = page_number,
            "on-demand prices from the Price List API"
        );
        Ok(prices)
    }
}

impl OnDemandPriceSource for PricingAdapter {
    async fn on_demand_prices(&self) -> Result<HashMap<String, f64>, AwsError> {
        let Some(client) = &self.client else {
            return Ok(HashMap::new());
        };
        tokio::time::timeout(self.timeout, self.fetch(client))
            .await
            .unwrap_or_else(|_| {
                Err(AwsError::GetProductsTimedOut {
                    region: self.region.clone(),
                    after: self.timeout,
                })
            })
    }
}

/// A price source that knows no regional prices, so every type keeps its bundled price.
/// For worlds without the Price List API: moto has none, and local runs need no AWS.
#[derive(Debug, Clone, Copy, Default)]
pub struct BundledPrices;

impl OnDemandPriceSource for BundledPrices {
    async fn on_demand_prices(&self) -> Result<HashMap<String, f64>, AwsError> {
        Ok(HashMap::new())
    }
}

#[cfg(test)]
mod tests;
