//! Family, category, generation and size from an instance type name, parsed the way
//! Karpenter does so the `karpenter.k8s.aws/instance-*` labels carry the same values.

/// Splits `c6i.2xlarge` into `("c6i", "c", 6, "2xlarge")`.
///
/// Family and size are the two halves around the one `.`. Category and generation follow
/// karpenter-provider-aws `pkg/providers/instancetype/types.go`, whose `instanceTypeScheme`
/// is `(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.`: the leading letters are the category, an
/// optional `-<n>tb` (the old high-memory names, `u-6tb1`) is skipped, and the digits that
/// follow are the generation. So `m7i-flex` is category `m`, generation 7; `u-6tb1` is `u`,
/// 1; `u7i-12tb` is `u`, 7; `inf2` is `inf`, 2; `p6-b200` is `p`, 6.
///
/// Returns `None` for names Karpenter could not label either (no `.`, no generation digits).
pub fn parse_name(name: &str) -> Option<(String, String, u32, String)> {
    let (family, size) = name.split_once('.')?;
    if family.is_empty() || size.is_empty() || size.contains('.') {
        return None;
    }
    let category_len = family.bytes().take_while(u8::is_ascii_lowercase).count();
    if category_len == 0 {
        return None;
    }
    let category = &family[..category_len];
    let mut rest = &family[category_len..];
    if let Some(after_tb) = skip_terabytes(rest) {
        rest = after_tb;
    }
    let digits_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits_len == 0 {
        return None;
    }
    let generation: u32 = rest[..digits_len].parse().ok()?;
    Some((
        family.to_string(),
        category.to_string(),
        generation,
        size.to_string(),
    ))
}

/// `-6tb1` -> `1`: skips the `-<digits>tb` of names like `u-6tb1` when generation digits
/// follow it (the regex would otherwise backtrack and fail, so requiring them is the same).
fn skip_terabytes(s: &str) -> Option<&str> {
    let after_dash = s.strip_prefix('-')?;
    let digits = after_dash.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let after_tb = after_dash[digits..].strip_prefix("tb")?;
    after_tb
        .starts_with(|c: char| c.is_ascii_digit())
        .then_some(after_tb)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_into_family_category_generation_and_size_as_karpenter_does() {
        // name -> (family, category, generation, size)
        type Case<'a> = (&'a str, (&'a str, &'a str, u32, &'a str));
        let cases: &[Case] = &[
            ("c6i.2xlarge", ("c6i", "c", 6, "2xlarge")),
            ("m5.large", ("m5", "m", 5, "large")),
            ("m7i-flex.large", ("m7i-flex", "m", 7, "large")),
            ("c5n.metal", ("c5n", "c", 5, "metal")),
            ("m7g.metal-48xl", ("m7g", "m", 7, "metal-48xl")),
            ("u-6tb1.metal", ("u-6tb1", "u", 1, "metal")),
            ("u-3tb1.56xlarge", ("u-3tb1", "u", 1, "56xlarge")),
            ("u7i-12tb.224xlarge", ("u7i-12tb", "u", 7, "224xlarge")),
            ("p4d.24xlarge", ("p4d", "p", 4, "24xlarge")),
            ("p6-b200.48xlarge", ("p6-b200", "p", 6, "48xlarge")),
            ("inf2.xlarge", ("inf2", "inf", 2, "xlarge")),
            ("trn1.32xlarge", ("trn1", "trn", 1, "32xlarge")),
            ("trn1n.32xlarge", ("trn1n", "trn", 1, "32xlarge")),
            ("c7gn.16xlarge", ("c7gn", "c", 7, "16xlarge")),
            ("x2iedn.32xlarge", ("x2iedn", "x", 2, "32xlarge")),
            ("g5.xlarge", ("g5", "g", 5, "xlarge")),
            ("t4g.nano", ("t4g", "t", 4, "nano")),
            ("z1d.metal", ("z1d", "z", 1, "metal")),
            ("hpc7g.16xlarge", ("hpc7g", "hpc", 7, "16xlarge")),
            ("mac2-m2pro.metal", ("mac2-m2pro", "mac", 2, "metal")),
        ];
        for (name, (family, category, generation, size)) in cases {
            let want = Some((
                family.to_string(),
                category.to_string(),
                *generation,
                size.to_string(),
            ));
            assert_eq!(parse_name(name), want, "{name}");
        }
    }

    #[test]
    fn names_without_a_generation_or_a_single_dot_do_not_parse() {
        for bad in [
            "",
            "c6i",
            ".large",
            "c6i.",
            "mac.metal",
            "C6i.large",
            "a.b.c",
            "u-6tb.metal",
        ] {
            assert_eq!(parse_name(bad), None, "{bad}");
        }
    }
}
