//! Where `load` connects and as whom: the connection flags, the credentials, the registered
//! protocol they name, and the check, before any load request, that the target speaks it
//! (naming the protocol it speaks instead).

use std::path::PathBuf;

use anyhow::{Context, bail};
use contract::protocol::Protocol;
use loadgen::Target;
use loadgen::http::BasicAuth;

use crate::sample::protocols::load::{Check, Conn};
use crate::sample::protocols::{self, Local, ProtocolImpl};

/// Where to connect, which protocol, and as whom.
#[derive(Debug, Clone, clap::Args)]
pub struct ConnArgs {
    /// The server, e.g. http://127.0.0.1:8080 (loopback only unless --allow-remote); a
    /// protocol that keeps the vault in a database names it in the path
    /// (http://HOST:PORT/DB).
    #[arg(help_heading = "Target", long, value_name = "URL")]
    pub url: Option<String>,
    /// Deprecated spelling of --url (`--target` is a server command on `record`, `ab` and
    /// `bisect`).
    #[arg(
        long = "target",
        hide = true,
        value_name = "URL",
        conflicts_with = "url"
    )]
    pub old_target: Option<String>,
    /// The protocol the target speaks, one of the registered protocols (listed below).
    /// Checked before any load request: a target that answers as another protocol fails
    /// with one line naming both (exit 2).
    #[arg(help_heading = "Target", long, value_name = "NAME", default_value = contract::protocol::DEFAULT_NAME, value_parser = crate::prepare::protocol_value_parser())]
    pub protocol: Protocol,
    /// HTTP Basic credentials the target demands, as USER:PASS (default: none).
    #[arg(help_heading = "Target", long, value_name = "USER:PASS")]
    pub auth: Option<String>,
    /// A file whose first line is USER:PASS (keeps the password out of the process list).
    #[arg(
        help_heading = "Target",
        long,
        value_name = "FILE",
        conflicts_with = "auth"
    )]
    pub auth_file: Option<PathBuf>,
    /// Deprecated spelling of --auth-file.
    #[arg(long = "basic-auth-file", hide = true, value_name = "FILE", conflicts_with_all = ["auth", "auth_file"])]
    pub old_basic_auth_file: Option<PathBuf>,
    /// Allow a target outside 127.0.0.0/8 and ::1.
    #[arg(help_heading = "Target", long)]
    pub allow_remote: bool,
    /// File holding the server's setup token (needed only to enrol the first time).
    #[arg(help_heading = "Devices", long, value_name = "FILE")]
    pub setup_token_file: Option<PathBuf>,
    /// Enrolment state (device ids and secrets, written 0600); default
    /// ~/.local/state/vaultbench/load-HOST-PORT.json.
    #[arg(help_heading = "Devices", long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Seed of the request nonces and generated bodies (decimal or 0x hex). (`--seed` is the
    /// vault seed everywhere; `load` has no vault.)
    #[arg(help_heading = "Load", long = "nonce-seed", value_name = "SEED", default_value = "0x5eed", value_parser = contract::parse::seed)]
    pub seed: u64,
    /// Deprecated spelling of --nonce-seed.
    #[arg(long = "seed", hide = true, value_name = "SEED", value_parser = contract::parse::seed, conflicts_with = "seed")]
    pub old_seed: Option<u64>,
}

/// Prints the note that `old` is now `new`.
pub(super) fn note_renamed(old: &str, new: &str) {
    eprintln!("vaultbench: {}", crate::commands::renamed(old, new));
}

impl ConnArgs {
    /// The deprecated spellings: a note each, then their values in the new fields.
    pub(super) fn take_deprecated(&mut self) {
        if let Some(seed) = self.old_seed.take() {
            note_renamed("--seed", "--nonce-seed");
            self.seed = seed;
        }
        if let Some(url) = self.old_target.take() {
            note_renamed("--target", "--url");
            self.url = Some(url);
        }
        if let Some(file) = self.old_basic_auth_file.take() {
            note_renamed("--basic-auth-file", "--auth-file");
            self.auth_file = Some(file);
        }
    }

    /// The registered protocol of `--protocol`.
    pub(super) fn protocol(&self) -> anyhow::Result<&'static dyn ProtocolImpl> {
        protocols::lookup(self.protocol.name()).map_err(|e| anyhow::anyhow!("--protocol: {e}"))
    }

    /// The credentials of `--auth` or `--auth-file` (USER:PASS on the file's first line).
    pub(super) fn credentials(&self) -> anyhow::Result<Option<BasicAuth>> {
        if let Some(s) = &self.auth {
            return Ok(Some(
                loadgen::launch::parse_auth(s).map_err(|e| anyhow::anyhow!("--auth: {e}"))?,
            ));
        }
        let Some(p) = &self.auth_file else {
            return Ok(None);
        };
        crate::prepare::auth_from_file(p).map(Some)
    }

    /// The target of `--url` (its address only).
    pub(super) fn target(&self) -> anyhow::Result<Target> {
        let url = self
            .url
            .as_deref()
            .context("--url is required (e.g. --url http://127.0.0.1:8080)")?;
        Ok(Target::parse(url, self.allow_remote)?)
    }

    /// The seam's view of these flags, with `auth` and `check` made by the caller.
    pub(super) fn conn<'a>(
        &'a self,
        auth: Option<&'a BasicAuth>,
        check: &'a dyn Check,
    ) -> Conn<'a> {
        Conn {
            url: self.url.as_deref(),
            allow_remote: self.allow_remote,
            seed: self.seed,
            state: self.state.as_deref(),
            setup_token_file: self.setup_token_file.as_deref(),
            auth,
            check,
        }
    }
}

pub(super) fn parse_shard(s: &str) -> Result<loadgen::Shard, String> {
    s.parse()
}

/// Checks, before any load request, that the target speaks `imp`'s protocol; when it does
/// not and another registered protocol's probe answers, the one line names both.
pub(super) async fn check_speaks(
    imp: &'static dyn ProtocolImpl,
    a: &ConnArgs,
    auth: Option<&BasicAuth>,
) -> anyhow::Result<()> {
    let target = a.target()?;
    let Err(e) = imp.load_probe(&target, auth).await else {
        return Ok(());
    };
    let name = imp.spec().name;
    for other in protocols::REGISTRY.iter().filter(|p| p.spec().name != name) {
        let Some(shows) = other.load_probe_shows() else {
            continue;
        };
        if other.load_probe(&target, auth).await.is_ok() {
            let speaks = other.spec().name;
            let fix = if speaks == contract::protocol::DEFAULT_NAME {
                format!("drop --protocol {name}")
            } else {
                format!("pass --protocol {speaks}")
            };
            bail!(
                "protocol mismatch: --protocol {name} but target {} speaks {speaks} ({shows}): {fix}",
                target.base()
            );
        }
    }
    Err(e)
}

/// The seam's protocol check for a protocol over `a`'s target and credentials.
pub(super) struct Checker<'a> {
    pub imp: &'static dyn ProtocolImpl,
    pub a: &'a ConnArgs,
    pub auth: Option<BasicAuth>,
}

impl<'a> Checker<'a> {
    /// The check of `a`'s target for `imp`, with `a`'s credentials read.
    pub(super) fn of(
        imp: &'static dyn ProtocolImpl,
        a: &'a ConnArgs,
    ) -> anyhow::Result<Checker<'a>> {
        Ok(Checker {
            imp,
            a,
            auth: a.credentials()?,
        })
    }

    /// The connection a load command hands its protocol, checked by this.
    pub(super) fn conn(&self) -> Conn<'_> {
        self.a.conn(self.auth.as_ref(), self)
    }
}

impl Check for Checker<'_> {
    fn check(&self) -> Local<'_, ()> {
        Box::pin(check_speaks(self.imp, self.a, self.auth.as_ref()))
    }
}
