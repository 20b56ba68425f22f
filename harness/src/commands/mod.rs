//! One file per subcommand: argument structs and flows. The pipeline pieces they call live
//! in `prepare`, `sample`, `gate` and `recording`.

pub mod ab;
pub mod bisect;
pub mod calibrate;
pub mod class;
pub mod history;
pub mod hlog;
pub mod load;
pub mod probe;
pub mod record;
pub mod report;
pub mod sample;
pub mod scenario_list;
pub mod trend;
pub mod vault;
pub mod verify;

/// The positional scenario's help: the built-ins (`scenarios::scenario::BUILTIN`) grouped by
/// the registered protocol each speaks.
pub fn scenario_help() -> String {
    let builtins: Vec<scenarios::scenario::Scenario> = scenarios::scenario::builtin_names()
        .into_iter()
        .filter_map(|n| scenarios::scenario::builtin(n).ok())
        .collect();
    let groups: Vec<String> = crate::sample::protocols::REGISTRY
        .iter()
        .filter_map(|imp| {
            let spec = imp.spec();
            let names: Vec<&str> = builtins
                .iter()
                .filter(|s| {
                    crate::sample::protocols::lookup(s.protocol.name())
                        .is_ok_and(|p| p.spec().name == spec.name)
                })
                .map(|s| s.name.as_str())
                .collect();
            (!names.is_empty())
                .then(|| format!("{} ({}): {}", spec.name, spec.about, names.join(", ")))
        })
        .collect();
    format!(
        "A built-in scenario, by protocol (the target must speak it): {}. Or --scenario-file",
        groups.join("; ")
    )
}

/// A target flag's help: what `what` may be, with the presets from `loadgen::launch`.
pub fn target_help(what: &str) -> String {
    format!(
        "{what}: `ref` (the reference server), `ref FLAGS`, an executable (it gets `--listen {{addr}} \
         --data {{data}}`), a command line using {{addr}}, {{host}}, {{port}} and {{data}}, a target \
         file (TOML), or a preset: {}",
        loadgen::protocols::preset_names().join(", ")
    )
}

/// The note for a flag given under its deprecated name.
pub fn renamed(old: &str, new: &str) -> String {
    format!("note: {old} is deprecated and will be removed in the next release: write {new}")
}

/// The scenario, given the same way to `record` and `ab`: positional, or `--scenario`.
#[derive(Debug, Clone, clap::Args)]
pub struct ScenarioArg {
    #[arg(
        value_name = "SCENARIO",
        help = scenario_help(),
        required_unless_present_any = ["scenario_file", "scenario_flag"]
    )]
    pub scenario: Option<String>,
    /// The scenario, as a flag (the same as the positional SCENARIO).
    #[arg(
        long = "scenario",
        id = "scenario_flag",
        value_name = "SCENARIO",
        conflicts_with = "scenario"
    )]
    pub scenario_flag: Option<String>,
}

impl ScenarioArg {
    /// The built-in scenario named, however it was given.
    pub fn name(&self) -> Option<&str> {
        self.scenario.as_deref().or(self.scenario_flag.as_deref())
    }
}

/// Writes `value` as JSON to `out` and `doc` beside it as Markdown and HTML (`.md`, `.html`),
/// each atomically, and says so on stderr.
pub fn write_json_md_html(
    out: &std::path::Path,
    value: &impl serde::Serialize,
    doc: &reports::render::Document,
) -> anyhow::Result<()> {
    use reports::render::{Format, render};
    crate::atomic::write_atomic(out, &serde_json::to_vec_pretty(value)?)?;
    let md = out.with_extension("md");
    let html = out.with_extension("html");
    crate::atomic::write_atomic(&md, render(doc, Format::Md)?.as_bytes())?;
    crate::atomic::write_atomic(&html, render(doc, Format::Html)?.as_bytes())?;
    eprintln!(
        "wrote {}, {} and {}",
        out.display(),
        md.display(),
        html.display()
    );
    Ok(())
}
