//! Where `load` connects: the connection flags, the target, the credentials, the check that
//! the target speaks `--protocol`, and device enrolment with its state file.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use loadgen::couch::CouchClient;
use loadgen::webdav::{BasicAuth, DavClient};
use loadgen::{Device, StateFile, Target, enroll, pair, probe};

/// Where to connect and how devices are enrolled.
#[derive(Debug, Clone, clap::Args)]
pub struct ConnArgs {
    /// The obsync-v1 server, e.g. http://127.0.0.1:8080 (loopback only unless --allow-remote).
    #[arg(long)]
    pub target: Option<String>,
    /// File holding the server's setup token (needed only to enrol the first time).
    #[arg(long, value_name = "FILE")]
    pub setup_token_file: Option<PathBuf>,
    /// Enrolment state (device ids and secrets, written 0600); default
    /// ~/.local/state/vaultbench/load-HOST-PORT.json.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Allow a target outside 127.0.0.0/8 and ::1.
    #[arg(long)]
    pub allow_remote: bool,
    /// Seed of the request nonces and generated bodies (decimal or 0x hex). (`--seed` is the
    /// vault seed everywhere; `load` has no vault.)
    #[arg(long = "nonce-seed", value_name = "SEED", default_value = "0x5eed", value_parser = contract::parse::seed)]
    pub seed: u64,
    /// Deprecated spelling of --nonce-seed.
    #[arg(long = "seed", hide = true, value_name = "SEED", value_parser = contract::parse::seed, conflicts_with = "seed")]
    pub old_seed: Option<u64>,
    /// The protocol the target speaks: `obsync` (signed obsync-v1, enrolled devices),
    /// `webdav`, or `couchdb` (Self-hosted LiveSync's replication; `--target
    /// http://HOST:PORT/DB`). Checked before any load request: a target that answers as the other
    /// protocol fails with one line naming both (exit 2).
    #[arg(long, value_name = "NAME", default_value = contract::protocol::DEFAULT_NAME, value_parser = crate::prepare::protocol_value_parser())]
    pub protocol: Protocol,
    /// WebDAV and CouchDB: a file holding `user:password` for basic auth (none when absent).
    #[arg(long, value_name = "FILE")]
    pub basic_auth_file: Option<PathBuf>,
}

pub(super) fn parse_shard(s: &str) -> Result<loadgen::Shard, String> {
    s.parse()
}

use contract::protocol::Protocol;

/// The registered protocols `load` drives by name (the default needs no name).
pub(super) const WEBDAV: Protocol = Protocol::named("webdav");
pub(super) const COUCHDB: Protocol = Protocol::named("couchdb");

pub(super) fn target_of(conn: &ConnArgs) -> anyhow::Result<Target> {
    let url = conn
        .target
        .as_deref()
        .context("--target is required (e.g. --target http://127.0.0.1:8080)")?;
    Ok(Target::parse(url, conn.allow_remote)?)
}

/// so that at least `k` exist. The state is saved before any load request is sent; the
/// target's protocol is checked before either (`check_target_protocol`).
pub(super) async fn ensure_devices(
    target: &Target,
    conn: &ConnArgs,
    k: usize,
) -> anyhow::Result<Vec<Device>> {
    let path = conn
        .state
        .clone()
        .unwrap_or_else(|| StateFile::default_path(target));
    let mut devices;
    let mut state = match StateFile::begin_session(&path)? {
        Some(s) => {
            // The readiness probe, and the other protocol named when it fails.
            check_target_protocol(target, conn).await?;
            devices = s.devices(target, &path)?;
            s
        }
        None => {
            let token_path = token_file(target, conn, &path)?;
            check_target_protocol(target, conn).await?;
            let token = setup_token(token_path)?;
            devices = enroll(target, &token, k, conn.seed).await?;
            eprintln!(
                "vaultbench: enrolled {} device(s) on {}; state in {}",
                devices.len(),
                target.base(),
                path.display()
            );
            let s = StateFile::from_devices(target, conn.seed, &devices);
            s.save(&path)?;
            s
        }
    };
    if devices.len() < k {
        let first = devices[0].clone();
        for i in devices.len()..k {
            let d = pair(&first, i, state.seed, state.session)
                .await
                .with_context(|| format!("pairing device {i} (state file {})", path.display()))?;
            devices.push(d);
        }
        let session = state.session;
        state = StateFile::from_devices(target, state.seed, &devices);
        state.session = session;
        state.save(&path)?;
    }
    Ok(devices)
}

/// The setup token file enrolment needs when there is no state file at `path` yet.
fn token_file<'a>(target: &Target, conn: &'a ConnArgs, path: &Path) -> anyhow::Result<&'a Path> {
    conn.setup_token_file.as_deref().with_context(|| {
        format!(
            "--setup-token-file is required to enrol devices on {} (no state file at {})",
            target.base(),
            path.display()
        )
    })
}

/// The setup token in `token_path`, trimmed; an empty file is an error.
fn setup_token(token_path: &Path) -> anyhow::Result<String> {
    let token = std::fs::read_to_string(token_path)
        .with_context(|| format!("setup token file {}", token_path.display()))?;
    if token.trim().is_empty() {
        bail!("setup token file {} is empty", token_path.display());
    }
    Ok(token.trim().to_owned())
}

/// The devices of one shard (`shard.devices(per_shard)` of the state file). Under the state
/// file's lock from loading it to saving it: the first generator to get the lock sets the
/// account up (with --setup-token-file) and pairs every device below its range's end; the
/// others find them there. Each gets its own session number and nonce streams tagged with
/// its index.
pub(super) async fn ensure_shard_devices(
    target: &Target,
    conn: &ConnArgs,
    per_shard: usize,
    shard: loadgen::Shard,
) -> anyhow::Result<Vec<Device>> {
    let range = shard
        .devices(per_shard)
        .with_context(|| format!("--shard {shard} with --devices {per_shard}: too many devices"))?;
    let path = conn
        .state
        .clone()
        .unwrap_or_else(|| StateFile::default_path(target));
    let lock = StateFile::lock(&path)?;
    check_target_protocol(target, conn).await?;
    let (mut devices, seed, session) = match StateFile::begin_session_locked(&path)? {
        Some(mut s) if s.devices.len() >= range.end => {
            // Every device of this shard is enrolled: build only this shard's.
            s.stream_tag = shard.index;
            let devices = s.devices_in(target, &path, range)?;
            drop(lock);
            return Ok(devices);
        }
        Some(mut s) => {
            s.stream_tag = shard.index;
            (s.devices(target, &path)?, s.seed, s.session)
        }
        None => {
            let token = setup_token(token_file(target, conn, &path)?)?;
            let devices = enroll(target, &token, 1, conn.seed).await?;
            (devices, conn.seed, 0)
        }
    };
    let had = devices.len();
    for i in devices.len()..range.end {
        let d = pair(&devices[0], i, seed, session)
            .await
            .with_context(|| format!("pairing device {i} (state file {})", path.display()))?;
        devices.push(d);
    }
    if devices.len() != had || session == 0 {
        let mut state = StateFile::from_devices(target, seed, &devices);
        state.session = session;
        state.save(&path)?;
        eprintln!(
            "vaultbench: shard {shard}: {} device(s) enrolled on {} now; state in {}",
            devices.len(),
            target.base(),
            path.display()
        );
    }
    drop(lock);
    Ok(devices.drain(range).collect())
}

/// The basic-auth credentials of `--basic-auth-file` (`user:password` on its first line).
fn basic_auth(conn: &ConnArgs) -> anyhow::Result<Option<BasicAuth>> {
    let Some(p) = &conn.basic_auth_file else {
        return Ok(None);
    };
    let text =
        std::fs::read_to_string(p).with_context(|| format!("--basic-auth-file {}", p.display()))?;
    let line = text.lines().next().unwrap_or("");
    let Some((user, password)) = line.split_once(':') else {
        bail!(
            "--basic-auth-file {}: the first line must be user:password",
            p.display()
        );
    };
    Ok(Some(BasicAuth::new(user, password)))
}

/// Whether the target answers an OPTIONS with a `DAV` header (with the credentials given).
async fn speaks_webdav(target: &Target, auth: Option<&BasicAuth>) -> bool {
    let (addr, auth) = (target.addr(), auth.cloned());
    tokio::task::spawn_blocking(move || loadgen::webdav::probe_ready(addr, auth.as_ref()))
        .await
        .unwrap_or(false)
}

/// Checks, before any load request, that the target speaks `--protocol`: an obsync-v1
/// server answers the readiness probe, a WebDAV server answers OPTIONS with a `DAV` header.
async fn check_target_protocol(target: &Target, conn: &ConnArgs) -> anyhow::Result<()> {
    let auth = basic_auth(conn)?;
    match conn.protocol.name() {
        contract::protocol::DEFAULT_NAME => {
            let Err(e) = probe(target).await else {
                return Ok(());
            };
            if speaks_webdav(target, auth.as_ref()).await {
                bail!(
                    "protocol mismatch: --protocol obsync but target {} speaks webdav (OPTIONS answers with a DAV header): pass --protocol webdav",
                    target.base()
                );
            }
            Err(e.into())
        }
        "couchdb" => bail!(
            "--protocol couchdb: the target is checked by LiveSync's set-up (GET / must answer as CouchDB)"
        ),
        _ => {
            if speaks_webdav(target, auth.as_ref()).await {
                return Ok(());
            }
            if probe(target).await.is_ok() {
                bail!(
                    "protocol mismatch: --protocol webdav but target {} speaks obsync-v1 (its readiness probe answers): drop --protocol webdav",
                    target.base()
                );
            }
            bail!(
                "target {} does not answer OPTIONS with a 2xx and a DAV header: not a WebDAV server, or --basic-auth-file is missing or wrong",
                target.base()
            )
        }
    }
}

/// A WebDAV client of the target, after the protocol check.
pub(super) async fn dav_client(target: &Target, conn: &ConnArgs) -> anyhow::Result<DavClient> {
    check_target_protocol(target, conn).await?;
    let auth = basic_auth(conn)?;
    Ok(DavClient::new(target.clone(), auth.as_ref()))
}

/// A CouchDB client of `--target http://HOST:PORT/DB` (the database in the URL's path).
pub(super) fn couch_client(conn: &ConnArgs) -> anyhow::Result<CouchClient> {
    let url = conn
        .target
        .as_deref()
        .context("--target is required (with --protocol couchdb: http://HOST:PORT/DB)")?;
    let auth = basic_auth(conn)?;
    Ok(CouchClient::from_url(
        url,
        auth.as_ref(),
        conn.allow_remote,
    )?)
}
