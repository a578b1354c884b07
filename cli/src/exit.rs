//! One exit status for one situation, in every command.

use std::process::ExitCode;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Done, and nothing wrong was found.
    Ok,
    /// The input was read and something is wrong with it: invalid documents or events,
    /// (with `plan --fail-on-unschedulable`) pods no NodePool can place, or a failed
    /// `doctor` check.
    Problems,
    /// The command could not do its job: a bad flag, a file or stdin that cannot be read, a
    /// cluster or AWS that cannot be reached, output that cannot be written.
    Usage,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        match e {
            Exit::Ok => ExitCode::SUCCESS,
            Exit::Problems => ExitCode::from(1),
            // clap's own status for a usage error, so a mistyped flag and an unreadable file
            // end alike.
            Exit::Usage => ExitCode::from(2),
        }
    }
}

/// The table `--help` ends with, and docs/cli.md repeats (a test compares them).
pub const EXIT_STATUS_HELP: &str = "\
Exit status:
  0  success: nothing wrong was found
  1  problems found: invalid documents or events, unschedulable pods with
     `plan --fail-on-unschedulable`, or a failed `doctor` check
  2  usage or I/O error: a bad flag, a file or stdin that cannot be read, a cluster or
     AWS that cannot be reached";
