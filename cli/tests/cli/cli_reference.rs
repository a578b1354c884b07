//! docs/cli.md is the CLI's reference: it names every command and every flag `--help` shows,
//! and repeats the exit-status table `--help` ends with, word for word.

use std::process::Command;

use crate::common::markdown::root;

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .arg("--help")
        .output()
        .expect("the binary runs");
    assert!(out.status.success(), "{args:?} --help");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The commands `nodewright --help` lists.
fn commands() -> Vec<String> {
    help(&[])
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// The long flags of one command's `--help`, without `--help` and `--version`.
fn flags(command: &str) -> Vec<String> {
    help(&[command])
        .lines()
        .filter(|l| l.trim_start().starts_with('-'))
        // The flags, not the description after them (which may name aliases).
        .filter_map(|l| l.trim_start().split("  ").next())
        .flat_map(|l| {
            l.split([' ', ','])
                .filter(|w| w.starts_with("--") && w.len() > 2)
                .map(|w| w.split(['=', '<']).next().unwrap_or(w).to_string())
                .collect::<Vec<_>>()
        })
        .filter(|f| f != "--help" && f != "--version")
        .collect()
}

/// The text of the `## <command>` section of docs/cli.md.
fn section<'a>(page: &'a str, command: &str) -> Option<&'a str> {
    let start = page.find(&format!("\n## {command}\n"))?;
    let rest = &page[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    Some(&rest[..end])
}

#[test]
fn every_command_and_flag_has_its_place_in_docs_cli_md() {
    let page = std::fs::read_to_string(root().join("docs/cli.md")).expect("docs/cli.md");
    let commands = commands();
    assert!(commands.len() >= 8, "{commands:?}");
    let mut missing = Vec::new();
    for command in &commands {
        let Some(text) = section(&page, command) else {
            missing.push(format!("no section `## {command}`"));
            continue;
        };
        for flag in flags(command) {
            if !text.contains(&format!("`{flag}`")) && !text.contains(&format!("/`{flag}`")) {
                missing.push(format!("{command}: {flag} is not described"));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn the_exit_status_table_of_the_docs_is_the_one_help_prints() {
    let page = std::fs::read_to_string(root().join("docs/cli.md")).expect("docs/cli.md");
    let help = help(&[]);
    let table = &help[help.find("Exit status:").expect("--help has the table")..];
    assert!(
        page.contains(table.trim_end()),
        "docs/cli.md lacks, word for word:\n{table}"
    );
}
