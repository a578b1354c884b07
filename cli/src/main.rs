//! `nodewright`: plan and validate NodePools offline, mint EKS tokens, and more.

mod plan;
mod table;
mod validate;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "nodewright", version, about = "Just-in-time worker nodes for Amazon EKS")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check NodePool / EC2NodeClass / Provisioner / AWSNodeTemplate files.
    Validate(validate::Args),
    /// Plan the capacity pending workloads need, offline, from the bundled catalog.
    Plan(plan::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Validate(args) => validate::run(&args),
        Command::Plan(args) => plan::run(&args),
    }
}
