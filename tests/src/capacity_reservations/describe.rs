//! DescribeCapacityReservations answered from the table, in EC2's query-protocol XML (the
//! element names of the service model's `CapacityReservation`, which the SDK reads).
//! Filters as the API reference lists them for this action; values within a filter are
//! alternatives, filters all apply, `*` and `?` are wildcards as in every EC2 filter.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::Reservation;
use crate::fleet_faults::escape;

pub const DESCRIBE: &str = "DescribeCapacityReservations";

/// The API reference's range for `MaxResults`.
const MAX_RESULTS: usize = 1000;

/// The platform every reservation here is for (nodewright launches Linux nodes).
const PLATFORM: &str = "Linux/UNIX";

/// An error EC2 answers the whole call with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Ec2Error {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
}

fn bad(code: &'static str, message: String) -> Ec2Error {
    Ec2Error {
        status: 400,
        code,
        message,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Filter {
    name: String,
    values: Vec<String>,
}

/// The request's `Filter.N.Name` / `Filter.N.Value.M`, in order.
fn filters(params: &BTreeMap<String, String>) -> Vec<Filter> {
    let mut by_index: BTreeMap<u32, Filter> = BTreeMap::new();
    for (key, value) in params {
        let Some((index, field)) = key.strip_prefix("Filter.").and_then(|r| r.split_once('.'))
        else {
            continue;
        };
        let Ok(index) = index.parse() else {
            continue;
        };
        let filter = by_index.entry(index).or_insert(Filter {
            name: String::new(),
            values: Vec::new(),
        });
        if field == "Name" {
            filter.name = value.clone();
        } else if field.starts_with("Value.") {
            filter.values.push(value.clone());
        }
    }
    by_index.into_values().collect()
}

/// What `name` filters on in `r`; `None` for a filter this action does not have.
fn field(name: &str, r: &Reservation) -> Option<Vec<String>> {
    let one = |s: &str| Some(vec![s.to_string()]);
    if let Some(key) = name.strip_prefix("tag:") {
        return Some(r.tags.get(key).cloned().into_iter().collect());
    }
    match name {
        "state" => one(&r.state),
        "owner-id" => one(&r.owner_id),
        "instance-type" => one(&r.instance_type),
        "availability-zone" => one(&r.zone),
        "instance-match-criteria" => one(r.match_criteria.as_str()),
        "instance-platform" => one(PLATFORM),
        "tenancy" => one("default"),
        "end-date-type" => one(end_date_type(r)),
        "tag-key" => Some(r.tags.keys().cloned().collect()),
        _ => None,
    }
}

fn end_date_type(r: &Reservation) -> &'static str {
    if r.end.is_some() {
        "limited"
    } else {
        "unlimited"
    }
}

/// EC2's filter wildcards: `*` any run of characters, `?` any one.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            (star, mark, pi) = (Some(pi), ti, pi + 1);
        } else if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            (pi, ti) = (pi + 1, ti + 1);
        } else if let Some(s) = star {
            (pi, mark) = (s + 1, mark + 1);
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

fn passes(filters: &[Filter], r: &Reservation) -> bool {
    filters.iter().all(|f| {
        let have = field(&f.name, r).unwrap_or_default();
        f.values.iter().any(|v| have.iter().any(|h| glob(v, h)))
    })
}

/// The reservations the request names (all when it names none), or EC2's error for an id
/// it does not have.
fn named<'a>(
    table: &'a BTreeMap<String, Reservation>,
    params: &BTreeMap<String, String>,
) -> Result<Vec<&'a Reservation>, Ec2Error> {
    let ids: Vec<&String> = params
        .iter()
        .filter(|(k, _)| k.starts_with("CapacityReservationId."))
        .map(|(_, v)| v)
        .collect();
    if ids.is_empty() {
        return Ok(table.values().collect());
    }
    if let Some(id) = ids.iter().find(|id| !id.starts_with("cr-")) {
        let message = format!("Invalid id: \"{id}\" (expecting \"cr-...\")");
        return Err(bad("InvalidCapacityReservationId.Malformed", message));
    }
    let unknown: Vec<&str> = ids
        .iter()
        .filter(|id| !table.contains_key(id.as_str()))
        .map(|id| id.as_str())
        .collect();
    if !unknown.is_empty() {
        let message = format!(
            "The capacity reservation ID '{}' does not exist",
            unknown.join(", ")
        );
        return Err(bad("InvalidCapacityReservationId.NotFound", message));
    }
    Ok(ids.iter().filter_map(|id| table.get(id.as_str())).collect())
}

/// The page the request asks for: (first index, size).
fn page(params: &BTreeMap<String, String>) -> Result<(usize, usize), Ec2Error> {
    let size = match params.get("MaxResults") {
        None => MAX_RESULTS,
        Some(n) => n
            .parse()
            .ok()
            .filter(|n| (1..=MAX_RESULTS).contains(n))
            .ok_or_else(|| {
                let message = format!("MaxResults {n} is not between 1 and {MAX_RESULTS}");
                bad("InvalidParameterValue", message)
            })?,
    };
    let from = match params.get("NextToken") {
        None => 0,
        Some(t) => t
            .parse()
            .map_err(|_| bad("InvalidNextToken", format!("The token '{t}' is invalid.")))?,
    };
    Ok((from, size))
}

/// EC2's answer to a DescribeCapacityReservations with these form parameters.
pub(super) fn answer(
    table: &BTreeMap<String, Reservation>,
    params: &BTreeMap<String, String>,
) -> Result<String, Ec2Error> {
    if params.get("DryRun").is_some_and(|v| v == "true") {
        let message = "Request would have succeeded, but DryRun flag is set.".to_string();
        return Err(Ec2Error {
            status: 412,
            code: "DryRunOperation",
            message,
        });
    }
    let filters = filters(params);
    let probe = Reservation::open("cr-probe", "", "", 0);
    if let Some(f) = filters.iter().find(|f| field(&f.name, &probe).is_none()) {
        let message = format!("The filter '{}' is invalid", f.name);
        return Err(bad("InvalidParameterValue", message));
    }
    let (from, size) = page(params)?;
    let listed: Vec<&Reservation> = named(table, params)?
        .into_iter()
        .filter(|r| passes(&filters, r))
        .collect();
    let items: String = listed
        .iter()
        .skip(from)
        .take(size)
        .map(|r| item(r))
        .collect();
    let next = if from + size < listed.len() {
        format!("<nextToken>{}</nextToken>", from + size)
    } else {
        String::new()
    };
    Ok(format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <DescribeCapacityReservationsResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\
         <requestId>00000000-0000-0000-0000-0000000000c7</requestId>\
         <capacityReservationSet>{items}</capacityReservationSet>{next}\
         </DescribeCapacityReservationsResponse>"
    ))
}

/// A date as EC2 writes one.
fn date(t: Timestamp) -> String {
    format!("{t:.3}")
}

/// One `capacityReservationSet` item.
fn item(r: &Reservation) -> String {
    let id = escape(&r.id);
    let arn = format!(
        "arn:aws:ec2:{}:{}:capacity-reservation/{id}",
        crate::moto::REGION,
        escape(&r.owner_id)
    );
    let end = r
        .end
        .map(|e| format!("<endDate>{}</endDate>", date(e)))
        .unwrap_or_default();
    let tags: String = r
        .tags
        .iter()
        .map(|(k, v)| {
            format!(
                "<item><key>{}</key><value>{}</value></item>",
                escape(k),
                escape(v)
            )
        })
        .collect();
    format!(
        "<item><capacityReservationId>{id}</capacityReservationId><ownerId>{owner}</ownerId>\
         <capacityReservationArn>{arn}</capacityReservationArn>\
         <instanceType>{instance_type}</instanceType><instancePlatform>{PLATFORM}</instancePlatform>\
         <availabilityZone>{zone}</availabilityZone><tenancy>default</tenancy>\
         <totalInstanceCount>{total}</totalInstanceCount>\
         <availableInstanceCount>{available}</availableInstanceCount>\
         <ebsOptimized>true</ebsOptimized><ephemeralStorage>false</ephemeralStorage>\
         <state>{state}</state><startDate>{start}</startDate>{end}\
         <endDateType>{end_type}</endDateType><instanceMatchCriteria>{criteria}</instanceMatchCriteria>\
         <createDate>{start}</createDate><tagSet>{tags}</tagSet>\
         <reservationType>{kind}</reservationType></item>",
        owner = escape(&r.owner_id),
        instance_type = escape(&r.instance_type),
        zone = escape(&r.zone),
        total = r.total,
        available = r.available,
        state = escape(&r.state),
        start = date(r.start),
        end_type = end_date_type(r),
        criteria = r.match_criteria.as_str(),
        kind = r.kind.as_str(),
    )
}

/// EC2's error document.
pub(super) fn error_xml(code: &str, message: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error>\
         <Code>{}</Code><Message>{}</Message></Error></Errors>\
         <RequestID>00000000-0000-0000-0000-0000000000c7</RequestID></Response>",
        escape(code),
        escape(message)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> BTreeMap<String, Reservation> {
        let end = "2030-01-01T00:00:00Z".parse().unwrap();
        [
            Reservation::open("cr-0aa", "m5.large", "us-east-1a", 2).tagged("team", "ml"),
            Reservation::open("cr-0bb", "c5.large", "us-east-1b", 1).targeted(),
            Reservation::capacity_block("cr-0cc", "p5.48xlarge", "us-east-1a", 4, end)
                .tagged("team", "research"),
            Reservation {
                owner_id: "210987654321".into(),
                state: "expired".into(),
                ..Reservation::open("cr-0dd", "m5.large", "us-east-1c", 1)
            },
        ]
        .into_iter()
        .map(|r| (r.id.clone(), r))
        .collect()
    }

    /// A request's form parameters.
    type Pairs<'a> = Vec<(&'a str, &'a str)>;

    fn ask(pairs: &[(&str, &str)]) -> Result<String, Ec2Error> {
        let params = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        answer(&table(), &params)
    }

    fn ids(xml: &str) -> Vec<&str> {
        xml.split("<item><capacityReservationId>")
            .skip(1)
            .filter_map(|s| s.split('<').next())
            .collect()
    }

    #[test]
    fn filters_pick_reservations_by_each_field_with_values_as_alternatives() {
        let cases: Vec<(Pairs, Vec<&str>)> = vec![
            (vec![], vec!["cr-0aa", "cr-0bb", "cr-0cc", "cr-0dd"]),
            (vec![("CapacityReservationId.1", "cr-0bb")], vec!["cr-0bb"]),
            (
                vec![("Filter.1.Name", "tag:team"), ("Filter.1.Value.1", "ml")],
                vec!["cr-0aa"],
            ),
            (
                vec![("Filter.1.Name", "tag-key"), ("Filter.1.Value.1", "team")],
                vec!["cr-0aa", "cr-0cc"],
            ),
            (
                vec![
                    ("Filter.1.Name", "owner-id"),
                    ("Filter.1.Value.1", "210987654321"),
                ],
                vec!["cr-0dd"],
            ),
            (
                vec![("Filter.1.Name", "state"), ("Filter.1.Value.1", "active")],
                vec!["cr-0aa", "cr-0bb", "cr-0cc"],
            ),
            (
                vec![
                    ("Filter.1.Name", "instance-match-criteria"),
                    ("Filter.1.Value.1", "targeted"),
                ],
                vec!["cr-0bb", "cr-0cc"],
            ),
            (
                vec![
                    ("Filter.1.Name", "instance-type"),
                    ("Filter.1.Value.1", "c5.large"),
                    ("Filter.1.Value.2", "p5.48xlarge"),
                ],
                vec!["cr-0bb", "cr-0cc"],
            ),
            (
                vec![
                    ("Filter.1.Name", "instance-type"),
                    ("Filter.1.Value.1", "m5.*"),
                ],
                vec!["cr-0aa", "cr-0dd"],
            ),
            (
                vec![
                    ("Filter.1.Name", "availability-zone"),
                    ("Filter.1.Value.1", "us-east-1?"),
                ],
                vec!["cr-0aa", "cr-0bb", "cr-0cc", "cr-0dd"],
            ),
            (
                vec![
                    ("Filter.1.Name", "end-date-type"),
                    ("Filter.1.Value.1", "limited"),
                ],
                vec!["cr-0cc"],
            ),
            (
                vec![
                    ("Filter.1.Name", "availability-zone"),
                    ("Filter.1.Value.1", "us-east-1a"),
                    ("Filter.2.Name", "state"),
                    ("Filter.2.Value.1", "active"),
                    ("Filter.3.Name", "instance-type"),
                    ("Filter.3.Value.1", "m5.large"),
                ],
                vec!["cr-0aa"],
            ),
        ];
        for (request, want) in cases {
            let xml = ask(&request).unwrap();
            assert_eq!(ids(&xml), want, "{request:?}");
        }
    }

    #[test]
    fn an_unknown_id_a_malformed_id_an_unknown_filter_or_a_bad_page_is_an_error() {
        let cases: Vec<(Pairs, &str)> = vec![
            (
                vec![
                    ("CapacityReservationId.1", "cr-0aa"),
                    ("CapacityReservationId.2", "cr-0ff"),
                ],
                "InvalidCapacityReservationId.NotFound",
            ),
            (
                vec![("CapacityReservationId.1", "i-0aa")],
                "InvalidCapacityReservationId.Malformed",
            ),
            (
                vec![
                    ("Filter.1.Name", "instance-family"),
                    ("Filter.1.Value.1", "m5"),
                ],
                "InvalidParameterValue",
            ),
            (vec![("MaxResults", "0")], "InvalidParameterValue"),
            (vec![("MaxResults", "1001")], "InvalidParameterValue"),
            (vec![("NextToken", "not-a-token")], "InvalidNextToken"),
        ];
        for (request, code) in cases {
            let e = ask(&request).unwrap_err();
            assert_eq!((e.status, e.code), (400, code), "{request:?}: {e:?}");
        }
        let e = ask(&[("CapacityReservationId.1", "cr-0ff")]).unwrap_err();
        assert!(e.message.contains("'cr-0ff'"), "{e:?}");
    }

    #[test]
    fn a_small_max_results_pages_through_every_match_once() {
        let mut token: Option<String> = None;
        let mut seen = Vec::new();
        for _ in 0..4 {
            let mut request = vec![("MaxResults", "2".to_string())];
            request.extend(token.clone().map(|t| ("NextToken", t)));
            let pairs: Vec<(&str, &str)> = request.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let xml = ask(&pairs).unwrap();
            seen.extend(ids(&xml).into_iter().map(str::to_string));
            token = xml
                .split_once("<nextToken>")
                .and_then(|(_, rest)| rest.split('<').next())
                .map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        assert_eq!(seen, ["cr-0aa", "cr-0bb", "cr-0cc", "cr-0dd"]);
        assert!(token.is_none(), "the last page has no token");
    }

    #[test]
    fn an_item_carries_what_ec2_describes_with_dates_and_tags_escaped() {
        let mut r = table()["cr-0cc"].clone();
        r.start = "2029-12-31T00:00:00Z".parse().unwrap();
        r.available = 3;
        let xml = item(&r.tagged("a&b", "<c>"));
        for part in [
            "<capacityReservationId>cr-0cc</capacityReservationId><ownerId>123456789012</ownerId>",
            "<capacityReservationArn>arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-0cc</capacityReservationArn>",
            "<instanceType>p5.48xlarge</instanceType><instancePlatform>Linux/UNIX</instancePlatform>",
            "<availabilityZone>us-east-1a</availabilityZone><tenancy>default</tenancy>",
            "<totalInstanceCount>4</totalInstanceCount><availableInstanceCount>3</availableInstanceCount>",
            "<state>active</state><startDate>2029-12-31T00:00:00.000Z</startDate><endDate>2030-01-01T00:00:00.000Z</endDate>",
            "<endDateType>limited</endDateType><instanceMatchCriteria>targeted</instanceMatchCriteria>",
            "<createDate>2029-12-31T00:00:00.000Z</createDate>",
            "<item><key>a&amp;b</key><value>&lt;c&gt;</value></item>",
            "<reservationType>capacity-block</reservationType>",
        ] {
            assert!(xml.contains(part), "{part} in {xml}");
        }
        let odcr = item(&table()["cr-0aa"]);
        assert!(
            odcr.contains("<endDateType>unlimited</endDateType>"),
            "{odcr}"
        );
        assert!(!odcr.contains("<endDate>"), "{odcr}");
        assert!(
            odcr.contains("<reservationType>default</reservationType>"),
            "{odcr}"
        );
    }

    #[test]
    fn wildcards_match_any_run_and_any_one_character() {
        let cases = [
            ("m5.*", "m5.large", true),
            ("m5.*", "c5.large", false),
            ("*", "", true),
            ("us-east-1?", "us-east-1a", true),
            ("us-east-1?", "us-east-1", false),
            ("*large", "m5.xlarge", true),
            ("a*b*c", "aXbYbZc", true),
            ("exact", "exact", true),
            ("exact", "exactly", false),
        ];
        for (pattern, text, want) in cases {
            assert_eq!(glob(pattern, text), want, "{pattern} ~ {text}");
        }
    }
}
