//! `nodewright validate -f FILE...`: exit 0 with `ok: N documents`, or 1 with one line per
//! problem naming the file, the document and the field.

use std::path::PathBuf;
use std::process::ExitCode;

use nodewright::api::{Inputs, Problem, validate};

#[derive(clap::Args)]
pub struct Args {
    /// A YAML (multi-document) or JSON file; repeat for several.
    #[arg(short = 'f', long = "file", required = true)]
    pub files: Vec<PathBuf>,
}

/// Loads and validates; returns the inputs and every problem, errors and warnings.
pub fn load(files: &[PathBuf]) -> (Inputs, Vec<Problem>) {
    let (inputs, mut problems) = Inputs::load_files(files);
    problems.extend(validate(&inputs));
    (inputs, problems)
}

pub fn run(args: &Args) -> ExitCode {
    let (inputs, problems) = load(&args.files);
    for p in &problems {
        eprintln!("{p}");
    }
    if problems.iter().any(Problem::is_error) {
        return ExitCode::from(1);
    }
    println!("ok: {} documents", inputs.documents);
    ExitCode::SUCCESS
}
