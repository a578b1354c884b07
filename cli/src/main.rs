//! `nodewright`: plan and validate NodePools offline, mint EKS tokens, print the RBAC for
//! least-privilege mode, and more.

mod eks_token;
mod explain;
mod plan;
mod rbac;
mod status;
mod status_view;
mod sweep_plan;
mod table;
mod validate;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "nodewright",
    version,
    about = "Just-in-time worker nodes for Amazon EKS"
)]
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
    /// Print an ExecCredential with an EKS bearer token, like `aws eks get-token`.
    EksToken(eks_token::EksTokenArgs),
    /// Explain what the interruption function would do with an EventBridge event or an
    /// SQS batch, without touching anything.
    ExplainEvent(explain::Args),
    /// Print the ClusterRole, Role and bindings the functions need when the stack maps
    /// them to a Kubernetes group (KubernetesAccess=rbac), for `kubectl apply -f -`.
    Rbac(rbac::Args),
    /// What the sweeper would disrupt now, and why the other candidates stay, offline.
    SweepPlan(sweep_plan::Args),
    /// The fleet at a glance: per node its NodePool, type, capacity type, zone, age, $/h
    /// (bundled us-east-1 prices) and CPU / memory requested against allocatable; pending
    /// pods and why; totals.
    Status(status::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Validate(args) => validate::run(&args),
        Command::Plan(args) => plan::run(&args),
        Command::ExplainEvent(args) => explain::run(&args),
        Command::Rbac(args) => rbac::run(&args),
        Command::SweepPlan(args) => sweep_plan::run(&args),
        Command::EksToken(args) => block_on(eks_token::run(args)),
        Command::Status(args) => block_on(status::run(args)),
    }
}

fn block_on(work: impl std::future::Future<Output = anyhow::Result<()>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(work) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
