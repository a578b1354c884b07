//! `-f FILE` as kubectl reads it: repeatable, `-` for stdin, and a directory for the YAML
//! and JSON files in it (`-R` for those below it too), in name order.

use std::io::Read;
use std::path::{Path, PathBuf};

/// The name stdin goes by in messages.
pub const STDIN: &str = "stdin";

/// The extensions read from a directory, as kubectl's `-f DIR` reads them.
const EXTENSIONS: &[&str] = &["yaml", "yml", "json"];

#[derive(Debug, Clone, clap::Args)]
pub struct Files {
    /// A YAML (several documents, or a `List`) or JSON file; `-` reads stdin; a directory
    /// reads its .yaml, .yml and .json files. Repeat for several.
    #[arg(
        short = 'f',
        long = "filename",
        visible_alias = "file",
        value_name = "FILE",
        required = true
    )]
    pub files: Vec<PathBuf>,
    /// Read the files of a directory's subdirectories too.
    #[arg(short = 'R', long)]
    pub recursive: bool,
}

/// One input's name (its path, or `stdin`) and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub name: String,
    pub text: String,
}

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{name}: cannot be read")]
    Read {
        name: String,
        #[source]
        source: std::io::Error,
    },
    #[error("-f -: stdin can be read only once")]
    StdinTwice,
    #[error("{name}: no .yaml, .yml or .json file in this directory")]
    EmptyDirectory { name: String },
}

impl Files {
    /// Every input's text, stdin read from the process's own.
    pub fn read(&self) -> Result<Vec<Source>, InputError> {
        self.read_from(std::io::stdin().lock())
    }

    /// Every input's text, `-` read from `stdin`.
    pub fn read_from(&self, mut stdin: impl Read) -> Result<Vec<Source>, InputError> {
        let mut sources = Vec::new();
        let mut stdin_read = false;
        for path in &self.files {
            if path.as_os_str() == "-" {
                if stdin_read {
                    return Err(InputError::StdinTwice);
                }
                stdin_read = true;
                let mut text = String::new();
                stdin
                    .read_to_string(&mut text)
                    .map_err(|source| InputError::Read {
                        name: STDIN.into(),
                        source,
                    })?;
                sources.push(Source {
                    name: STDIN.into(),
                    text,
                });
            } else if path.is_dir() {
                let mut files = Vec::new();
                collect(path, self.recursive, &mut files)?;
                if files.is_empty() {
                    return Err(InputError::EmptyDirectory {
                        name: path.display().to_string(),
                    });
                }
                for file in files {
                    sources.push(read_file(&file)?);
                }
            } else {
                sources.push(read_file(path)?);
            }
        }
        Ok(sources)
    }
}

fn read_file(path: &Path) -> Result<Source, InputError> {
    let name = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Source { name, text }),
        Err(source) => Err(InputError::Read { name, source }),
    }
}

/// The readable files of `dir`, sorted by path, descending when `recursive`.
fn collect(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>) -> Result<(), InputError> {
    let read_error = |source| InputError::Read {
        name: dir.display().to_string(),
        source,
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_error)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(read_error)?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if recursive {
                collect(&path, recursive, out)?;
            }
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| EXTENSIONS.contains(&e))
        {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(paths: &[&Path], recursive: bool) -> Files {
        Files {
            files: paths.iter().map(|p| p.to_path_buf()).collect(),
            recursive,
        }
    }

    fn names(sources: &[Source]) -> Vec<String> {
        sources
            .iter()
            .map(|s| {
                Path::new(&s.name)
                    .file_name()
                    .map_or(s.name.clone(), |n| n.to_string_lossy().into_owned())
            })
            .collect()
    }

    #[test]
    fn a_directory_gives_its_yaml_and_json_files_in_name_order_and_r_descends() {
        let dir = std::env::temp_dir().join(format!("nodewright-input-{}", std::process::id()));
        let sub = dir.join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        for (name, text) in [
            ("b.yaml", "b"),
            ("a.json", "a"),
            ("c.yml", "c"),
            ("notes.txt", "x"),
        ] {
            std::fs::write(dir.join(name), text).unwrap();
        }
        std::fs::write(sub.join("d.yaml"), "d").unwrap();

        let flat = files(&[&dir], false).read_from(&b""[..]).unwrap();
        assert_eq!(names(&flat), ["a.json", "b.yaml", "c.yml"]);
        let deep = files(&[&dir], true).read_from(&b""[..]).unwrap();
        assert_eq!(names(&deep), ["a.json", "b.yaml", "c.yml", "d.yaml"]);
        let empty = files(&[&dir.join("sub").join("..").join("sub")], false)
            .read_from(&b""[..])
            .unwrap();
        assert_eq!(names(&empty), ["d.yaml"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_dash_reads_stdin_once_and_a_missing_file_is_named() {
        let sources = files(&[Path::new("-")], false)
            .read_from(&b"kind: NodePool"[..])
            .unwrap();
        assert_eq!(
            sources,
            [Source {
                name: STDIN.into(),
                text: "kind: NodePool".into()
            }]
        );
        let twice = files(&[Path::new("-"), Path::new("-")], false).read_from(&b""[..]);
        assert!(matches!(twice, Err(InputError::StdinTwice)));
        let missing = files(&[Path::new("no/such.yaml")], false)
            .read_from(&b""[..])
            .unwrap_err();
        assert!(
            nodewright::error_chain(&missing).starts_with("no/such.yaml: cannot be read: "),
            "{missing}"
        );
    }
}
