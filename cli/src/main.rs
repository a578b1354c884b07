//! `nodewright`: validate and plan NodePools offline, explain interruption events, preview
//! the sweeper, show a cluster's fleet, print the RBAC for least-privilege mode and mint
//! EKS tokens. Every command follows one convention (docs/cli.md): `-f FILE` (repeatable,
//! `-` for stdin, directories), `-o table|wide|json|yaml`, `--kubeconfig` / `--context`
//! where a cluster is read, and one exit status per situation ([`exit::Exit`]).

mod aws;
mod doctor;
mod eks_token;
mod exit;
mod explain;
mod handback;
mod health;
mod input;
mod load;
mod money;
mod output;
mod plan;
mod prices;
mod rbac;
mod report;
mod reservations;
mod settings;
mod status;
mod status_view;
mod sweep_plan;
mod table;
mod validate;
mod version;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::exit::{EXIT_STATUS_HELP, Exit};

#[derive(Parser)]
#[command(
    name = "nodewright",
    version = nodewright::VERSION,
    about = "Just-in-time worker nodes for Amazon EKS: the command-line tool",
    after_help = EXIT_STATUS_HELP,
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check NodePool / EC2NodeClass / Provisioner / AWSNodeTemplate documents: every
    /// problem, as `error:` and `warning:` lines naming file, document and field.
    #[command(after_help = EXIT_STATUS_HELP)]
    Validate(validate::Args),
    /// Plan the capacity pending workloads need, offline, priced from the bundled catalog.
    #[command(after_help = EXIT_STATUS_HELP)]
    Plan(plan::Args),
    /// What the sweeper would disrupt now, and why the other candidates stay, offline.
    #[command(after_help = EXIT_STATUS_HELP)]
    SweepPlan(sweep_plan::Args),
    /// Explain what the interruption function would do with an EventBridge event or an
    /// SQS batch, without touching anything.
    #[command(after_help = EXIT_STATUS_HELP)]
    ExplainEvent(explain::Args),
    /// The fleet at a glance: per node its NodePool, type, capacity type, zone, age, $/h
    /// (bundled us-east-1 prices) and CPU / memory requested against allocatable; pending
    /// pods and why; totals.
    #[command(after_help = EXIT_STATUS_HELP)]
    Status(status::Args),
    /// Print the ClusterRole, Role and bindings the functions need when the stack maps
    /// them to a Kubernetes group (KubernetesAccess=rbac), for `kubectl apply -f -`.
    #[command(after_help = EXIT_STATUS_HELP)]
    Rbac(rbac::Args),
    /// Check what the install guide asks of the account and the cluster, as the functions
    /// will read it: one PASS or FAIL line per check, with the fix.
    #[command(after_help = EXIT_STATUS_HELP)]
    Doctor(doctor::Args),
    /// Roll back from a takeover: take nodewright's removal marks off the nodes Karpenter
    /// launched, and name nodewright's own nodes to drain (after the stack is deleted).
    #[command(after_help = EXIT_STATUS_HELP)]
    Handback(handback::Args),
    /// Print an ExecCredential with an EKS bearer token, like `aws eks get-token` (JSON
    /// only: kubectl's exec plugin protocol).
    #[command(after_help = EXIT_STATUS_HELP)]
    EksToken(eks_token::EksTokenArgs),
    /// Print the version of this CLI, which the functions also log when they start.
    #[command(after_help = EXIT_STATUS_HELP)]
    Version(version::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let exit = match cli.command {
        Command::Validate(args) => validate::run(&args),
        Command::Plan(args) => plan::run(&args),
        Command::SweepPlan(args) => sweep_plan::run(&args),
        Command::ExplainEvent(args) => explain::run(&args),
        Command::Rbac(args) => rbac::run(&args),
        Command::Version(args) => version::run(&args),
        Command::EksToken(args) => block_on(eks_token::run(args)),
        Command::Status(args) => block_on(status::run(args)),
        Command::Doctor(args) => block_on_exit(doctor::run(args)),
        Command::Handback(args) => block_on(handback::run(args)),
    };
    exit.into()
}

/// Runs a command that talks to AWS or a cluster; its failure is an I/O error.
fn block_on(work: impl std::future::Future<Output = anyhow::Result<()>>) -> Exit {
    block_on_exit(async { work.await.map(|()| Exit::Ok) })
}

/// [`block_on`] for a command that says itself how it ended.
fn block_on_exit(work: impl std::future::Future<Output = anyhow::Result<Exit>>) -> Exit {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return Exit::Usage;
        }
    };
    match runtime.block_on(work) {
        Ok(exit) => exit,
        Err(e) => {
            eprintln!("error: {e:#}");
            Exit::Usage
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent_and_every_help_ends_with_the_exit_status_table() {
        super::Cli::command().debug_assert();
        let mut cli = super::Cli::command();
        for sub in cli.get_subcommands_mut() {
            let help = sub.render_long_help().to_string();
            assert!(
                help.trim_end()
                    .ends_with(super::EXIT_STATUS_HELP.lines().last().unwrap().trim()),
                "{} --help:\n{help}",
                sub.get_name()
            );
        }
    }
}
