//! `nodewright validate -f FILE...`: every problem of NodePools, EC2NodeClasses, Provisioners
//! and AWSNodeTemplates (and of the workloads beside them), one `error:` or `warning:` line
//! each naming the file, the document and the field; exit 1 when any is an error.

use serde_json::json;

use crate::exit::Exit;
use crate::input::Files;
use crate::output::{Output, print_data};
use crate::{load, report};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub files: Files,
    /// table and wide print the problems as lines on stderr and a summary on stdout;
    /// json and yaml print both on stdout.
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// `1 object`, `3 objects`.
fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

pub fn run(args: &Args) -> Exit {
    let sources = match args.files.read() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {}", nodewright::error_chain(&e));
            return Exit::Usage;
        }
    };
    let (inputs, problems) = load::load(&sources);
    let errors = problems.iter().filter(|p| p.is_error()).count();
    let warnings = problems.len() - errors;
    if args.output.is_data() {
        let value = json!({
            "documents": inputs.documents,
            "objects": inputs.objects,
            "errors": errors,
            "warnings": warnings,
            "problems": problems.iter().map(report::to_json).collect::<Vec<_>>(),
        });
        if !print_data(&value, args.output) {
            return Exit::Usage;
        }
    } else {
        report::print(&problems);
        if errors == 0 {
            let noted = match warnings {
                0 => String::new(),
                n => format!(", {}", count(n, "warning")),
            };
            println!(
                "ok: {} in {}{noted}",
                count(inputs.objects, "object"),
                count(inputs.documents, "document")
            );
        }
    }
    if errors > 0 { Exit::Problems } else { Exit::Ok }
}
