//! The `[client]` table of a scenario: the user's own sync client as the devices (client
//! mode). The harness runs these command lines for device A and device B in place of its
//! own protocol client; this module holds the table, its checks and which phases a client
//! can run. Pure: no process is started here.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A user's own sync client: the command lines a device runs, with placeholders
/// ([`CLIENT_PLACEHOLDERS`]) filled in per device and run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientOptions {
    /// The sync command of a two-way tool, run in both directions (when `push` or `pull` is
    /// absent, this runs in its place).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The command that sends the device's folder to the server (a one-way tool's upload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<String>,
    /// The command that brings the server's vault into the device's folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull: Option<String>,
    /// Run once per device before anything is timed (a config file, an enrolment, a login).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<String>,
    /// The client's start-up alone (`rclone version`): run once per phase, timed as a run
    /// is, to give each phase's start-up share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<String>,
    /// The deadline of each run (`30s`, `10m`; above zero, at most a day);
    /// [`DEFAULT_CLIENT_TIMEOUT`] when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Whether the client talks to the server through the recording proxy (`{url}` is the
    /// proxy's); `true` when absent, `false` for `--no-proxy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<bool>,
    /// Named routes of the proxy's counts, `NAME=METHOD REGEX` each (`--route-pattern`),
    /// tried before the route templates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route_patterns: Vec<String>,
    /// The name of a `[[count]]` rule that counts one line per request in the server's log
    /// (an access log): in every phase its count must equal the requests the proxy counted,
    /// or the sample fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_requests: Option<String>,
    /// Whether the cold push runs the client once per checkpoint slice (`true`): device A's
    /// folder starts with the vault's folders only, and before each run the next
    /// `checkpoint_every` files (in the vault's byte-sorted order) are copied in, so the
    /// server's costs are cut into checkpoint windows and fitted against n as a built-in
    /// push's are. For a client that uploads only what the server lacks; `false` (one run
    /// over the whole vault) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<bool>,
}

/// The placeholders a client command line may hold: the server's URL (its root included),
/// the device's folder, its index (0 for A, 1 for B), a folder of its own for the client's
/// state (also the run's working directory), a folder both devices' clients see, the
/// server's data dir, and the target's credentials (empty without).
pub const CLIENT_PLACEHOLDERS: &[&str] = &[
    "url",
    "dir",
    "device",
    "state",
    "shared",
    "data",
    "auth_user",
    "auth_pass",
];

/// The deadline of one client run when the table gives none: 10 minutes, the bound on a
/// client that hangs. It is not sized from a measurement: a cold push of a large vault by a
/// slow client may need more, and `timeout` raises it (each phase stays bounded by the
/// run's phase timeout as well).
pub const DEFAULT_CLIENT_TIMEOUT: Duration = Duration::from_secs(600);

/// The longest command line the table takes, in bytes.
pub const MAX_CLIENT_COMMAND_BYTES: usize = 4096;

/// The phase kinds a client can run (by their key names); the others need the harness's
/// own protocol client and are refused in client mode.
pub const CLIENT_PHASES: &[&str] = &contract::key::SYNC_PHASES;

/// The phases that need a pull direction (B brings the server's copy into its folder).
pub const PULL_PHASES: &[&str] = &["cold_pull", "edit", "folder_rename"];

impl ClientOptions {
    /// The command that uploads: `push`, else `command`.
    pub fn push_command(&self) -> Option<&str> {
        self.push.as_deref().or(self.command.as_deref())
    }

    /// The command that downloads: `pull`, else `command`.
    pub fn pull_command(&self) -> Option<&str> {
        self.pull.as_deref().or(self.command.as_deref())
    }

    /// Whether the cold push runs the client once per checkpoint slice of the vault.
    pub fn pushes_in_slices(&self) -> bool {
        self.checkpoints == Some(true)
    }

    /// Whether the recording proxy stands between the client and the server.
    pub fn proxied(&self) -> bool {
        self.proxy != Some(false)
    }

    /// Each run's deadline (checked by [`ClientOptions::check`]; the default when absent).
    pub fn deadline(&self) -> Duration {
        self.timeout
            .as_deref()
            .and_then(|t| contract::parse::duration(t).ok())
            .unwrap_or(DEFAULT_CLIENT_TIMEOUT)
    }

    /// Every command line given, with the field that gave it.
    pub fn commands(&self) -> Vec<(&'static str, &str)> {
        [
            ("command", &self.command),
            ("push", &self.push),
            ("pull", &self.pull),
            ("setup", &self.setup),
            ("startup", &self.startup),
        ]
        .into_iter()
        .filter_map(|(f, v)| v.as_deref().map(|v| (f, v)))
        .collect()
    }

    /// Whether `phase` (a key name) is skipped for want of a direction, and why.
    pub fn skips(&self, phase: &str) -> Option<&'static str> {
        (self.pull_command().is_none() && PULL_PHASES.contains(&phase))
            .then_some("the client has no pull command")
    }

    /// The table's own checks: an upload direction, no empty or over-long command line, only
    /// known placeholders, a timeout that parses.
    pub fn check(&self) -> Result<(), String> {
        if self.push_command().is_none() {
            return Err(
                "[client] needs `command` or `push` (without a way to upload, no phase can run)"
                    .into(),
            );
        }
        for (field, line) in self.commands() {
            if line.trim().is_empty() {
                return Err(format!("[client] {field} is empty"));
            }
            if line.len() > MAX_CLIENT_COMMAND_BYTES {
                return Err(format!(
                    "[client] {field} is longer than {MAX_CLIENT_COMMAND_BYTES} bytes"
                ));
            }
            if let Some(bad) = unknown_placeholders(line).first() {
                return Err(format!(
                    "[client] {field}: unknown placeholder {{{bad}}} (known: {})",
                    CLIENT_PLACEHOLDERS
                        .iter()
                        .map(|p| format!("{{{p}}}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        if let Some(t) = &self.timeout {
            // The one duration parser: a unit, above zero, at most a day.
            contract::parse::duration(t).map_err(|e| format!("[client] timeout: {e}"))?;
        }
        Ok(())
    }
}

/// The `{name}` placeholders of `s` that are not [`CLIENT_PLACEHOLDERS`].
pub fn unknown_placeholders(s: &str) -> Vec<&str> {
    contract::parse::unknown_placeholders(s, CLIENT_PLACEHOLDERS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(command: Option<&str>, push: Option<&str>, pull: Option<&str>) -> ClientOptions {
        ClientOptions {
            command: command.map(str::to_owned),
            push: push.map(str::to_owned),
            pull: pull.map(str::to_owned),
            ..ClientOptions::default()
        }
    }

    #[test]
    fn directions_fall_back_to_the_two_way_command() {
        let two_way = opts(Some("sync {dir}"), None, None);
        assert_eq!(two_way.push_command(), Some("sync {dir}"));
        assert_eq!(two_way.pull_command(), Some("sync {dir}"));
        assert_eq!(two_way.skips("cold_pull"), None);
        let one_way = opts(None, Some("up {dir}"), Some("down {dir}"));
        assert_eq!(one_way.push_command(), Some("up {dir}"));
        assert_eq!(one_way.pull_command(), Some("down {dir}"));
        let push_only = opts(None, Some("up {dir}"), None);
        for p in PULL_PHASES {
            assert_eq!(
                push_only.skips(p),
                Some("the client has no pull command"),
                "{p}"
            );
        }
        assert_eq!(push_only.skips("idle_resync"), None);
        assert_eq!(push_only.skips("cold_push"), None);
    }

    #[test]
    fn the_checks_name_the_field_and_the_fault() {
        assert!(
            opts(Some("sync {url} {dir} {state} {device}"), None, None)
                .check()
                .is_ok()
        );
        let e = opts(None, None, Some("down")).check().unwrap_err();
        assert!(e.contains("needs `command` or `push`"), "{e}");
        let e = opts(Some("  "), None, None).check().unwrap_err();
        assert_eq!(e, "[client] command is empty");
        let e = opts(Some("sync {dir}"), Some("up {folder}"), None)
            .check()
            .unwrap_err();
        assert!(
            e.starts_with("[client] push: unknown placeholder {folder}"),
            "{e}"
        );
        let mut t = opts(Some("sync"), None, None);
        t.timeout = Some("30".into());
        assert!(t.check().unwrap_err().starts_with("[client] timeout"));
        t.timeout = Some("0s".into());
        assert!(t.check().unwrap_err().contains("must be more than 0"));
        t.timeout = Some("45s".into());
        assert!(t.check().is_ok());
        assert_eq!(t.deadline(), Duration::from_secs(45));
        assert_eq!(
            opts(Some("x"), None, None).deadline(),
            DEFAULT_CLIENT_TIMEOUT
        );
        // JSON-looking braces are not placeholders.
        assert!(unknown_placeholders("--header '{\"A\": 1}' {Dir}").is_empty());
    }
}
