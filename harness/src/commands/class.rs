//! `vaultbench class`: print this machine's class, the directory under `baselines/` its
//! recordings are filed in (`contract::class` makes the name from the fingerprint).

use std::path::{Path, PathBuf};

/// Print this machine's class: the `baselines/<class>/` directory its baselines are filed in.
#[derive(Debug, clap::Args)]
pub struct ClassArgs {
    /// Where the server's data would live (the filesystem is part of the class); the same
    /// default as `record --work-dir`: the system temp dir.
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Print the class and the fingerprint parts it is made of as one JSON document.
    #[arg(long)]
    pub json: bool,
}

/// The class of a live fingerprint.
pub fn of(fp: &calibration::Fingerprint) -> String {
    contract::class::name(|k| fp.identity.get(k).cloned())
}

/// This machine's class for a server data dir under `work_dir`.
pub fn this_machine(work_dir: &Path) -> String {
    of(&calibration::fingerprint(work_dir))
}

/// The recorded class of a provenance sidecar's `machine`, if it holds a fingerprint.
pub fn of_recorded(machine: &contract::machine::Fingerprint) -> Option<String> {
    contract::class::of_machine(machine)
}

pub fn run(args: ClassArgs) -> anyhow::Result<i32> {
    let dir = args.work_dir.unwrap_or_else(std::env::temp_dir);
    let fp = calibration::fingerprint(&dir);
    let class = of(&fp);
    if args.json {
        let parts: serde_json::Map<String, serde_json::Value> = contract::class::PARTS
            .iter()
            .map(|k| {
                let v = fp
                    .identity
                    .get(*k)
                    .cloned()
                    .unwrap_or_else(|| "unknown".into());
                ((*k).to_owned(), serde_json::Value::String(v))
            })
            .collect();
        println!("{}", serde_json::json!({ "class": class, "parts": parts }));
    } else {
        println!("{class}");
    }
    Ok(crate::exit::OK)
}
