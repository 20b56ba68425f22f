//! `vaultbench vault measure DIR --out shape.toml`: walks a vault (read only, symlinks never
//! followed) into its measured shape (`scenarios::shape`), and reads a shape file back into
//! the profile of its twin for `vault gen --profile-file`.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use scenarios::shape::{FileClass, classify};
use scenarios::{Measure, Profile, Shape};

use crate::exit;

#[derive(Debug, clap::Args)]
pub struct MeasureArgs {
    /// The vault directory to measure (read, never written).
    pub dir: PathBuf,
    /// Where to write the shape file (TOML; written atomically).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

pub fn run(a: MeasureArgs) -> anyhow::Result<i32> {
    let shape = measure_dir(&a.dir)?;
    crate::atomic::write_atomic(&a.out, shape.to_toml().as_bytes())
        .with_context(|| format!("cannot write shape file {}", a.out.display()))?;
    println!(
        "measured {}: {} notes in {} folders, {} attachments, {} config files; shape written to {}",
        a.dir.display(),
        shape.notes.count,
        shape.folders.count,
        shape.attachments.count,
        shape.config.files,
        a.out.display()
    );
    Ok(exit::OK)
}

/// The shape of the vault at `dir`. Symbolic links and special files are counted as skipped,
/// never followed or read.
pub fn measure_dir(dir: &Path) -> anyhow::Result<Shape> {
    let meta = fs::metadata(dir)
        .with_context(|| format!("vault directory {} cannot be read", dir.display()))?;
    if !meta.is_dir() {
        bail!("vault directory {} is not a directory", dir.display());
    }
    let mut m = Measure::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((path, rel)) = stack.pop() {
        let mut entries: Vec<_> = fs::read_dir(&path)
            .with_context(|| format!("vault directory {} cannot be read", path.display()))?
            .collect::<Result<_, _>>()
            .with_context(|| format!("vault directory {} cannot be read", path.display()))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name();
            let name = match name.to_str() {
                Some(n) => n.to_owned(),
                None => {
                    m.non_utf8_name();
                    name.to_string_lossy().into_owned()
                }
            };
            let child_rel = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            // `symlink_metadata`: a link is looked at, never followed.
            let ft = e
                .file_type()
                .with_context(|| format!("cannot inspect {}", e.path().display()))?;
            if ft.is_dir() {
                stack.push((e.path(), child_rel));
            } else if ft.is_file() {
                let size = fs::symlink_metadata(e.path())
                    .with_context(|| format!("cannot inspect {}", e.path().display()))?
                    .len();
                match classify(&child_rel) {
                    FileClass::Config => m.config(size),
                    FileClass::Attachment => m.attachment(&child_rel, size),
                    FileClass::Note => {
                        let bytes = fs::read(e.path()).with_context(|| {
                            format!("note {} cannot be read", e.path().display())
                        })?;
                        m.note(&child_rel, &bytes);
                    }
                }
            } else {
                m.skipped();
            }
        }
    }
    Ok(m.finish())
}

pub use crate::prepare::vault::profile_from_file;

/// The profile of a scenario: its built-in `profile`, or the twin of its `profile_file` read
/// relative to `scenario_file` (a built-in scenario has none).
pub fn scenario_profile(
    s: &scenarios::scenario::Scenario,
    scenario_file: Option<&Path>,
) -> anyhow::Result<Profile> {
    match (s.profile_file.as_deref(), scenario_file) {
        (None, _) => super::profile::lookup_profile(&s.profile),
        (Some(_), Some(file)) => profile_from_file(&s.profile_file_in(file).unwrap_or_default()),
        (Some(f), None) => bail!(
            "scenario {}: profile_file {f:?} needs the scenario's own file to be found from",
            s.name
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenario_profile_file_is_read_beside_the_scenario() {
        let d = tempfile::tempdir().unwrap();
        let p = scenarios::profile("small").unwrap();
        let mut m = Measure::new();
        for f in scenarios::generate(&p, 1) {
            m.note(&f.path, &f.to_vec());
        }
        fs::write(d.path().join("shape.toml"), m.finish().to_toml()).unwrap();
        let s = scenarios::scenario::parse(
            "name='t'\ndoc='d'\nprofile_file='shape.toml'\n[[phase]]\nkind='cold_start'\n",
            "t.toml",
        )
        .unwrap();
        let twin = scenario_profile(&s, Some(&d.path().join("t.toml"))).unwrap();
        assert_eq!((twin.name, twin.notes), (scenarios::TWIN_NAME, 100));
        let e = scenario_profile(&s, Some(Path::new("/nowhere/t.toml")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nowhere/shape.toml"), "{e}");
        assert!(scenario_profile(&s, None).is_err());
    }
}
