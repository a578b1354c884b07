//! `nodewright version`: the version of the CLI, the same the functions log at cold start.

use serde_json::json;

use crate::exit::Exit;
use crate::output::{Output, print_data};

#[derive(clap::Args)]
pub struct Args {
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

pub fn run(args: &Args) -> Exit {
    if args.output.is_data() {
        if !print_data(&json!({"version": nodewright::VERSION}), args.output) {
            return Exit::Usage;
        }
    } else {
        println!("nodewright {}", nodewright::VERSION);
    }
    Exit::Ok
}
