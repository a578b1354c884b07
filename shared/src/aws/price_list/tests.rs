use serde_json::{Value, json};

use super::*;

/// A GetProducts item for m5.large in eu-central-1, in the shape AWS returns (every
/// product attribute, an on-demand term and a reserved term beside it); the SKU and offer
/// codes are placeholders, the price is the region's published Linux rate.
const M5_LARGE_EU_CENTRAL_1: &str =
    include_str!("../testdata/price-list-item-m5.large-eu-central-1.json");

/// The sample with one edit applied, as the JSON string GetProducts would carry.
fn sample_with(edit: impl FnOnce(&mut Value)) -> String {
    let mut doc: Value = match serde_json::from_str(M5_LARGE_EU_CENTRAL_1) {
        Ok(v) => v,
        Err(e) => panic!("the sample document parses: {e}"),
    };
    edit(&mut doc);
    doc.to_string()
}

const OFFER: &str = "TESTSKUM5LARGE01.JRTCKXETXF";
const RATE: &str = "TESTSKUM5LARGE01.JRTCKXETXF.6YS6EN2CT7";

fn set_usd(doc: &mut Value, usd: Value) {
    doc["terms"]["OnDemand"][OFFER]["priceDimensions"][RATE]["pricePerUnit"]["USD"] = usd;
}

fn remove(doc: &mut Value, path: &[&str], key: &str) {
    let mut at = doc;
    for p in path {
        at = &mut at[*p];
    }
    if let Some(map) = at.as_object_mut() {
        map.remove(key);
    }
}

#[test]
fn price_list_items_give_a_type_and_its_hourly_usd_price_or_say_what_is_missing() {
    let rate_path = ["terms", "OnDemand", OFFER, "priceDimensions", RATE];
    type Case = (&'static str, String, Result<(String, f64), SkipReason>);
    let cases: Vec<Case> = vec![
        (
            "the published document: on-demand price read, reserved terms ignored",
            M5_LARGE_EU_CENTRAL_1.to_string(),
            Ok(("m5.large".into(), 0.115)),
        ),
        (
            "no instanceType attribute",
            sample_with(|d| remove(d, &["product", "attributes"], "instanceType")),
            Err(SkipReason::NoInstanceType),
        ),
        (
            "an empty instanceType",
            sample_with(|d| d["product"]["attributes"]["instanceType"] = json!("")),
            Err(SkipReason::NoInstanceType),
        ),
        (
            "no product at all",
            sample_with(|d| remove(d, &[], "product")),
            Err(SkipReason::NoInstanceType),
        ),
        (
            "only reserved terms",
            sample_with(|d| remove(d, &["terms"], "OnDemand")),
            Err(SkipReason::NoUsdPrice),
        ),
        (
            "a price in another currency only",
            sample_with(|d| {
                d["terms"]["OnDemand"][OFFER]["priceDimensions"][RATE]["pricePerUnit"] =
                    json!({"CNY": "0.8"})
            }),
            Err(SkipReason::NoUsdPrice),
        ),
        (
            "a USD price per something other than an hour",
            sample_with(|d| {
                d["terms"]["OnDemand"][OFFER]["priceDimensions"][RATE]["unit"] = json!("Quantity")
            }),
            Err(SkipReason::NoUsdPrice),
        ),
        (
            "no unit given: taken as hourly",
            sample_with(|d| remove(d, &rate_path, "unit")),
            Ok(("m5.large".into(), 0.115)),
        ),
        (
            "a zero price (how the list writes 'included')",
            sample_with(|d| set_usd(d, json!("0.0000000000"))),
            Err(SkipReason::UnusablePrice("0.0000000000".into())),
        ),
        (
            "a price that is not a number",
            sample_with(|d| set_usd(d, json!("call us"))),
            Err(SkipReason::UnusablePrice("call us".into())),
        ),
        (
            "a negative price",
            sample_with(|d| set_usd(d, json!("-0.1"))),
            Err(SkipReason::UnusablePrice("-0.1".into())),
        ),
        (
            "an infinite price",
            sample_with(|d| set_usd(d, json!("inf"))),
            Err(SkipReason::UnusablePrice("inf".into())),
        ),
    ];
    for (name, doc, want) in cases {
        assert_eq!(parse_price_item(&doc), want, "{name}");
    }
}

#[test]
fn a_document_that_is_not_a_price_list_item_is_malformed_not_a_panic() {
    let cases = [
        "",
        "not json",
        "[1, 2]",
        r#"{"product": {"attributes": {"instanceType": 5}}}"#,
        r#"{"product": {"attributes": {"instanceType": "m5.large"}}, "terms": {"OnDemand": []}}"#,
    ];
    for doc in cases {
        assert!(
            matches!(parse_price_item(doc), Err(SkipReason::Malformed(_))),
            "{doc:?} -> {:?}",
            parse_price_item(doc)
        );
    }
}

#[test]
fn a_page_keeps_the_good_items_and_names_the_index_of_each_skipped_one() {
    let c5 = sample_with(|d| {
        d["product"]["attributes"]["instanceType"] = json!("c5.large");
        set_usd(d, json!("0.0970000000"));
    });
    let no_price = sample_with(|d| remove(d, &["terms"], "OnDemand"));
    let items = vec![
        M5_LARGE_EU_CENTRAL_1.to_string(),
        "{".to_string(),
        c5,
        no_price,
    ];

    let page = parse_price_list(&items);

    assert_eq!(
        page.prices,
        [
            ("m5.large".to_string(), 0.115),
            ("c5.large".to_string(), 0.097)
        ]
    );
    let skipped: Vec<(usize, bool)> = page
        .skipped
        .iter()
        .map(|s| (s.index, matches!(s.reason, SkipReason::Malformed(_))))
        .collect();
    assert_eq!(skipped, [(1, true), (3, false)]);
    assert_eq!(page.skipped[1].reason, SkipReason::NoUsdPrice);
}
