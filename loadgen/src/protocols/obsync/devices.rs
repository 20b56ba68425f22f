//! The devices of a load run: the state file's, enrolled (setup token, then pairing) where
//! missing, for one generator or for one shard of several. The state is saved before any load
//! request is sent; the caller's check that the target speaks the protocol runs before either.

use std::future::Future;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::client::Device;
use super::enroll::{StateFile, enroll, pair_sharing};
use crate::shard::Shard;
use crate::target::Target;

/// Where the devices are kept and how the first one is enrolled.
#[derive(Debug, Clone, Copy)]
pub struct Enrolment<'a> {
    pub target: &'a Target,
    /// The state file; default [`StateFile::default_path`].
    pub state: Option<&'a Path>,
    /// The file holding the server's setup token (needed only to enrol the first time).
    pub setup_token_file: Option<&'a Path>,
    /// The run seed, kept in a new state file.
    pub seed: u64,
}

impl Enrolment<'_> {
    fn path(&self) -> PathBuf {
        self.state
            .map_or_else(|| StateFile::default_path(self.target), Path::to_owned)
    }

    /// The setup token file enrolment needs when there is no state file at `path` yet.
    fn token_file(&self, path: &Path) -> anyhow::Result<&Path> {
        self.setup_token_file.with_context(|| {
            format!(
                "--setup-token-file is required to enrol devices on {} (no state file at {})",
                self.target.base(),
                path.display()
            )
        })
    }
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

/// Loads the state file's devices (a new session) or enrols them, pairing more as needed so
/// that at least `k` exist. `check` (that the target speaks the protocol) runs after the state
/// file is read and before any request.
pub async fn ensure_devices(
    e: &Enrolment<'_>,
    k: usize,
    check: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<Vec<Device>> {
    let target = e.target;
    let path = e.path();
    let mut devices;
    let mut state = match StateFile::begin_session(&path)? {
        Some(s) => {
            check.await?;
            devices = s.devices(target, &path)?;
            s
        }
        None => {
            let token_path = e.token_file(&path)?;
            check.await?;
            let token = setup_token(token_path)?;
            devices = enroll(target, &token, 1, e.seed).await?;
            for i in 1..k {
                let d = pair_sharing(&devices[0], i, e.seed, 0)
                    .await
                    .with_context(|| format!("pairing device {i} of {k}"))?;
                devices.push(d);
            }
            eprintln!(
                "vaultbench: enrolled {} device(s) on {}; state in {}",
                devices.len(),
                target.base(),
                path.display()
            );
            let s = StateFile::from_devices(target, e.seed, &devices);
            s.save(&path)?;
            s
        }
    };
    if devices.len() < k {
        let first = devices[0].clone();
        for i in devices.len()..k {
            let d = pair_sharing(&first, i, state.seed, state.session)
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

/// The devices of one shard (`shard.devices(per_shard)` of the state file). Under the state
/// file's lock from loading it to saving it: the first generator to get the lock sets the
/// account up (with the setup token) and pairs every device below its range's end; the
/// others find them there. Each gets its own session number and nonce streams tagged with
/// its index. `check` runs under the lock, before any request.
pub async fn ensure_shard_devices(
    e: &Enrolment<'_>,
    per_shard: usize,
    shard: Shard,
    check: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<Vec<Device>> {
    let target = e.target;
    let range = shard
        .devices(per_shard)
        .with_context(|| format!("--shard {shard} with --devices {per_shard}: too many devices"))?;
    let path = e.path();
    let lock = StateFile::lock(&path)?;
    check.await?;
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
            let token = setup_token(e.token_file(&path)?)?;
            let devices = enroll(target, &token, 1, e.seed).await?;
            (devices, e.seed, 0)
        }
    };
    let had = devices.len();
    for i in devices.len()..range.end {
        let d = pair_sharing(&devices[0], i, seed, session)
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
