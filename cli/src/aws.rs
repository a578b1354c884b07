//! The AWS configuration every command that calls AWS starts from.

use anyhow::Context as _;

/// The AWS configuration of the default chain in `region` (else the chain's), and the
/// region; no region at all is an error that says how to give one.
pub async fn aws_config(region: Option<&str>) -> anyhow::Result<(aws_config::SdkConfig, String)> {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
    if let Some(region) = region {
        loader = loader.region(aws_config::Region::new(region.to_string()));
    }
    let aws = loader.load().await;
    let region = aws
        .region()
        .map(|r| r.to_string())
        .context("no AWS region: pass --region or set AWS_REGION")?;
    Ok((aws, region))
}
