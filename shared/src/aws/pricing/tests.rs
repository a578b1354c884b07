//! The endpoint table, and the adapter against canned Price List answers
//! (`aws-smithy-mocks`; moto has no Pricing API): pages, throttling, unusable items.

use aws_sdk_pricing::operation::get_products::GetProductsOutput;
use aws_smithy_mocks::{MockResponseInterceptor, Rule, RuleMode, mock};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;

use super::*;
use crate::aws::ErrorClass;

#[test]
fn each_region_asks_the_nearest_price_list_endpoint_or_none_outside_the_commercial_partition() {
    let cases = [
        ("us-east-1", Some("us-east-1")),
        ("us-west-2", Some("us-east-1")),
        ("ca-central-1", Some("us-east-1")),
        ("sa-east-1", Some("us-east-1")),
        ("mx-central-1", Some("us-east-1")),
        ("eu-west-1", Some("eu-central-1")),
        ("eu-central-1", Some("eu-central-1")),
        ("eu-south-2", Some("eu-central-1")),
        ("me-central-1", Some("eu-central-1")),
        ("il-central-1", Some("eu-central-1")),
        ("af-south-1", Some("eu-central-1")),
        ("ap-south-1", Some("ap-south-1")),
        ("ap-northeast-1", Some("ap-south-1")),
        ("ap-southeast-2", Some("ap-south-1")),
        ("cn-north-1", None),
        ("cn-northwest-1", None),
        ("us-gov-west-1", None),
        ("us-iso-east-1", None),
        ("us-isob-east-1", None),
        ("eusc-de-east-1", None),
    ];
    for (region, want) in cases {
        assert_eq!(pricing_endpoint_region(region), want, "{region}");
    }
}

fn sdk_config(region: &str) -> aws_types::SdkConfig {
    aws_types::SdkConfig::builder()
        .region(aws_types::region::Region::new(region.to_string()))
        .behavior_version(aws_config::BehaviorVersion::latest())
        .build()
}

#[test]
fn the_pricing_client_keeps_the_sdk_config_but_talks_to_the_nearest_endpoint() {
    let client = pricing_client(&sdk_config("eu-west-1"), "eu-west-1");
    let region = client.and_then(|c| c.config().region().map(|r| r.to_string()));
    assert_eq!(region.as_deref(), Some("eu-central-1"));
}

#[tokio::test]
async fn where_no_endpoint_serves_the_region_the_adapter_knows_no_prices_and_calls_nothing() {
    let adapter = PricingAdapter::from_config(&sdk_config("cn-north-1"), "cn-north-1");
    let prices = adapter.on_demand_prices().await;
    assert_eq!(prices.ok(), Some(HashMap::new()));
}

/// A Pricing client whose every call is answered by the rules; retries are off so one
/// rule answer is one call.
fn pricing(rules: &[&Rule]) -> aws_sdk_pricing::Client {
    let mut interceptor = MockResponseInterceptor::new().rule_mode(RuleMode::MatchAny);
    for rule in rules {
        interceptor = interceptor.with_rule(rule);
    }
    let config = aws_sdk_pricing::Config::builder()
        .behavior_version(aws_sdk_pricing::config::BehaviorVersion::latest())
        .region(aws_sdk_pricing::config::Region::new("eu-central-1"))
        .credentials_provider(aws_credential_types::Credentials::new(
            "AKIDTEST", "secret", None, None, "test",
        ))
        .retry_config(aws_sdk_pricing::config::retry::RetryConfig::disabled())
        .http_client(aws_smithy_mocks::create_mock_http_client())
        .interceptor(interceptor)
        .build();
    aws_sdk_pricing::Client::from_conf(config)
}

/// A price list item in the shape GetProducts returns, for `instance_type` at `usd`.
fn item(instance_type: &str, usd: &str) -> String {
    serde_json::json!({
        "product": {
            "productFamily": "Compute Instance",
            "attributes": {
                "instanceType": instance_type,
                "operatingSystem": "Linux",
                "tenancy": "Shared",
                "regionCode": "eu-west-1",
                "capacitystatus": "Used",
                "preInstalledSw": "NA",
                "licenseModel": "No License required",
            },
            "sku": "SKU",
        },
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {"SKU.JRTCKXETXF": {"priceDimensions": {
            "SKU.JRTCKXETXF.6YS6EN2CT7": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}
        }}}},
    })
    .to_string()
}

/// Whether the request asks for `field` = `value` by exact term match.
fn asks(
    r: &aws_sdk_pricing::operation::get_products::GetProductsInput,
    field: &str,
    value: &str,
) -> bool {
    r.filters()
        .iter()
        .any(|f| f.field() == field && f.value() == value && *f.r#type() == FilterType::TermMatch)
}

#[tokio::test]
async fn prices_of_every_page_are_read_for_linux_shared_on_demand_in_the_region() {
    let first = mock!(aws_sdk_pricing::Client::get_products)
        .match_requests(|r| {
            r.next_token().is_none()
                && r.service_code() == Some("AmazonEC2")
                && asks(r, "regionCode", "eu-west-1")
                && asks(r, "operatingSystem", "Linux")
                && asks(r, "tenancy", "Shared")
                && asks(r, "preInstalledSw", "NA")
                && asks(r, "capacitystatus", "Used")
                && asks(r, "licenseModel", "No License required")
        })
        .then_output(|| {
            GetProductsOutput::builder()
                .format_version("aws_v1")
                .price_list(item("m5.large", "0.1070000000"))
                .price_list(item("c5.large", "0.0960000000"))
                .next_token("page-2")
                .build()
        });
    let second = mock!(aws_sdk_pricing::Client::get_products)
        .match_requests(|r| r.next_token() == Some("page-2"))
        .then_output(|| {
            GetProductsOutput::builder()
                .format_version("aws_v1")
                .price_list(item("m7g.large", "0.0892000000"))
                .build()
        });
    let adapter = PricingAdapter::new(pricing(&[&first, &second]), "eu-west-1");

    let prices = adapter.on_demand_prices().await.expect("answered");

    let mut got: Vec<(&str, f64)> = prices.iter().map(|(t, p)| (t.as_str(), *p)).collect();
    got.sort_by(|a, b| a.0.cmp(b.0));
    assert_eq!(
        got,
        [
            ("c5.large", 0.096),
            ("m5.large", 0.107),
            ("m7g.large", 0.0892)
        ]
    );
    assert_eq!((first.num_calls(), second.num_calls()), (1, 1));
}

#[tokio::test]
async fn a_throttled_get_products_is_an_error_classified_as_throttled_naming_the_region() {
    // The wire answer of the Price List service (JSON 1.1 protocol), so the error code is
    // read the way the SDK reads it from AWS.
    let rule = mock!(aws_sdk_pricing::Client::get_products).then_http_response(|| {
        let status = StatusCode::try_from(400).unwrap_or_else(|e| panic!("status: {e}"));
        HttpResponse::new(
            status,
            SdkBody::from(
                r#"{"__type":"com.amazonaws.awspricelistservice#ThrottlingException","Message":"Rate exceeded"}"#,
            ),
        )
    });
    let adapter = PricingAdapter::new(pricing(&[&rule]), "eu-west-1");

    let err = adapter.on_demand_prices().await.unwrap_err();

    assert_eq!(err.class(), ErrorClass::Throttled, "{err:?}");
    assert!(matches!(err, AwsError::GetProducts { .. }), "{err:?}");
    assert!(err.to_string().contains("eu-west-1"), "{err}");
}

#[tokio::test]
async fn an_item_without_a_usd_price_is_skipped_and_the_others_are_kept() {
    let no_usd = serde_json::json!({
        "product": {"attributes": {"instanceType": "x2gd.medium"}},
        "terms": {"OnDemand": {"SKU.JRTCKXETXF": {"priceDimensions": {
            "SKU.JRTCKXETXF.6YS6EN2CT7": {"unit": "Hrs", "pricePerUnit": {}}
        }}}},
    })
    .to_string();
    let rule = mock!(aws_sdk_pricing::Client::get_products).then_output(move || {
        GetProductsOutput::builder()
            .price_list(no_usd.clone())
            .price_list(item("m5.large", "0.1070000000"))
            .price_list(item("t3.nano", "0.0000000000"))
            .build()
    });
    let adapter = PricingAdapter::new(pricing(&[&rule]), "eu-west-1");

    let prices = adapter.on_demand_prices().await.expect("answered");

    assert_eq!(prices, HashMap::from([("m5.large".to_string(), 0.107)]));
}
