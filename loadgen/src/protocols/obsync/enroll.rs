//! Enrolment (setup for the first device, pairing for the rest) and the state file that
//! keeps device secrets between separate CLI invocations.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use contract::state::{LoadState, StateDevice};
use protocol::Route;
use protocol::sign::DeviceCredentials;
use protocol::wire::{
    ApproveRequest, ClaimRequest, ClaimResponse, DeviceInfo, EnvelopeResponse, PairingResponse,
    ReadyResponse, SetupRequest, SetupResponse,
};
use sha2::{Digest, Sha256};

use crate::error::LoadError;
use crate::protocols::obsync::client::{
    Device, HttpClient, Outgoing, http_client, nonce_rng, session_nonce_rng,
};
use crate::stats::Recorder;
use crate::target::Target;

/// `domain_id` of an account: the first 16 bytes of SHA-256("vaultbench/domain\n" +
/// account_id), in hex. Fixed per state file, shared by every device of the account.
pub fn domain_id_for(account_id: &str) -> String {
    let d = Sha256::digest(format!("vaultbench/domain\n{account_id}").as_bytes());
    hex::encode(&d[..16])
}

fn device_info(index: usize) -> DeviceInfo {
    DeviceInfo {
        name: format!("vaultbench-{index}"),
        platform: "vaultbench".into(),
        app_version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// Checks that `target` answers `GET /readyz` the way an obsync-v1 server does.
pub async fn probe(target: &Target) -> Result<(), LoadError> {
    let rec = Recorder::counting();
    // A throwaway device-less client: readyz needs no credentials.
    let d = Device::new(
        target.clone(),
        DeviceCredentials {
            device_id: "0".repeat(32),
            secret: [0; 32],
        },
        0,
        String::new(),
        nonce_rng(0, 0, 0),
    );
    let url = target.base().to_owned();
    let a = d
        .send(
            &rec,
            Outgoing::new(Route::Readyz, "/readyz")
                .unsigned()
                .timeout(std::time::Duration::from_secs(5)),
        )
        .await
        .map_err(|e| LoadError::Unreachable {
            url: url.clone(),
            detail: match e {
                LoadError::Transport { detail, .. } => detail,
                other => other.to_string(),
            },
        })?;
    match a.status {
        200 => {
            let r: ReadyResponse =
                serde_json::from_slice(&a.body).map_err(|_| LoadError::NotTheProtocol {
                    protocol: contract::protocol::DEFAULT_NAME,
                    url: url.clone(),
                    detail: "GET /readyz did not answer {\"ready\":..,\"seq\":..}".into(),
                })?;
            if !r.ready {
                return Err(LoadError::NotTheProtocol {
                    protocol: contract::protocol::DEFAULT_NAME,
                    url,
                    detail: "GET /readyz says not ready".into(),
                });
            }
            Ok(())
        }
        503 if a.error_code().0 == "not_ready" => Err(LoadError::NotTheProtocol {
            protocol: contract::protocol::DEFAULT_NAME,
            url,
            detail: "server is not ready (503 not_ready)".into(),
        }),
        s => Err(LoadError::NotTheProtocol {
            protocol: contract::protocol::DEFAULT_NAME,
            url,
            detail: format!("GET /readyz answered {s}"),
        }),
    }
}

/// Enrols `n` devices: the first through `POST /v1/setup` with `setup_token`, the others
/// through pairing approved by the first. Nonces come from `seed` (session 0).
pub async fn enroll(
    target: &Target,
    setup_token: &str,
    n: usize,
    seed: u64,
) -> Result<Vec<Device>, LoadError> {
    if n == 0 {
        return Err(LoadError::Invalid {
            what: "devices".into(),
            reason: "must be at least 1".into(),
        });
    }
    probe(target).await?;
    let first = setup(target, setup_token, seed).await?;
    let mut devices = vec![first];
    for i in 1..n {
        let d = pair(&devices[0], i, seed, 0).await?;
        devices.push(d);
    }
    Ok(devices)
}

async fn setup(target: &Target, setup_token: &str, seed: u64) -> Result<Device, LoadError> {
    let rec = Recorder::counting();
    let anon = Device::new(
        target.clone(),
        DeviceCredentials {
            device_id: "0".repeat(32),
            secret: [0; 32],
        },
        0,
        String::new(),
        nonce_rng(seed, 0, 0),
    );
    let body = serde_json::to_vec(&SetupRequest {
        setup_token: setup_token.trim().to_owned(),
        account_name: "vaultbench".into(),
        device: device_info(0),
    })
    .expect("plain struct serialises");
    let url = target.base().to_owned();
    let a = anon
        .send(
            &rec,
            Outgoing::post_json(Route::Setup, "/v1/setup", body).unsigned(),
        )
        .await?;
    match (a.status, a.error_code().0.as_str()) {
        (201, _) => {}
        (401, "bad_setup_token") => return Err(LoadError::BadSetupToken { url }),
        (409, "already_set_up") => return Err(LoadError::AlreadySetUp { url }),
        (s, code) => {
            return Err(LoadError::NotTheProtocol {
                protocol: contract::protocol::DEFAULT_NAME,
                url,
                detail: format!("POST /v1/setup answered {s} {code}"),
            });
        }
    }
    let r: SetupResponse = a.json(Route::Setup)?;
    let creds = DeviceCredentials::from_hex(&r.device_id, &r.device_secret).ok_or_else(|| {
        LoadError::BadAnswer {
            route: Route::Setup.label().into(),
            detail: "device_id/device_secret are not 32/64 hex".into(),
        }
    })?;
    Ok(Device::new(
        target.clone(),
        creds,
        0,
        domain_id_for(&r.account_id),
        nonce_rng(seed, 0, 0),
    ))
}

/// Pairs one more device (`index`) using `creator`: create, claim, approve, fetch envelope.
/// The new device has an HTTP client of its own.
pub async fn pair(
    creator: &Device,
    index: usize,
    seed: u64,
    session: u64,
) -> Result<Device, LoadError> {
    pair_over(creator, index, seed, session, http_client()).await
}

/// [`pair`], the new device sharing `creator`'s HTTP client (its pool): pairing thousands
/// reuses one connection instead of leaving each device's idle one open.
pub async fn pair_sharing(
    creator: &Device,
    index: usize,
    seed: u64,
    session: u64,
) -> Result<Device, LoadError> {
    let client = creator.inner.client.clone();
    pair_over(creator, index, seed, session, client).await
}

async fn pair_over(
    creator: &Device,
    index: usize,
    seed: u64,
    session: u64,
    client: HttpClient,
) -> Result<Device, LoadError> {
    let rec = Recorder::counting();
    let a = creator
        .call(
            &rec,
            Outgoing::post_json(Route::PairingCreate, "/v1/pairing", b"{}".to_vec()),
            &[201],
        )
        .await?;
    let p: PairingResponse = a.json(Route::PairingCreate)?;
    // The id goes into three request paths: only URL-safe characters, of a sane length.
    let id_ok = !p.pairing_id.is_empty()
        && p.pairing_id.len() <= 128
        && p.pairing_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !id_ok {
        return Err(LoadError::BadAnswer {
            route: Route::PairingCreate.label().into(),
            detail: format!(
                "pairing_id {:?} is not 1 to 128 URL-safe characters",
                p.pairing_id.chars().take(80).collect::<String>()
            ),
        });
    }
    let claim_path = format!("/v1/pairing/{}/claim", p.pairing_id);
    let body = serde_json::to_vec(&ClaimRequest {
        enroll_token: p.enroll_token.clone(),
        name: format!("vaultbench-{index}"),
        platform: "vaultbench".into(),
        app_version: env!("CARGO_PKG_VERSION").into(),
    })
    .expect("plain struct serialises");
    let a = creator
        .send(
            &rec,
            Outgoing::post_json(Route::PairingClaim, &claim_path, body).unsigned(),
        )
        .await?;
    if a.status != 201 {
        return Err(a.into_error(Route::PairingClaim));
    }
    let c: ClaimResponse = a.json(Route::PairingClaim)?;
    let creds = DeviceCredentials::from_hex(&c.device_id, &c.device_secret).ok_or_else(|| {
        LoadError::BadAnswer {
            route: Route::PairingClaim.label().into(),
            detail: "device_id/device_secret are not 32/64 hex".into(),
        }
    })?;
    // The envelope is ciphertext on the real client; the server stores it opaque.
    let mut env = [0u8; 32];
    creator.fill_random(&mut env);
    let approve = serde_json::to_vec(&ApproveRequest {
        envelope: base64::engine::general_purpose::STANDARD.encode(env),
        nonce: creator.random_hex(12),
    })
    .expect("plain struct serialises");
    let approve_path = format!("/v1/pairing/{}/approve", p.pairing_id);
    creator
        .call(
            &rec,
            Outgoing::post_json(Route::PairingApprove, &approve_path, approve),
            &[204, 200],
        )
        .await?;
    let dev = Device::with_http(
        creator.target().clone(),
        creds,
        index,
        creator.domain_id().to_owned(),
        nonce_rng(seed, index, session),
        client,
    );
    let env_path = format!("/v1/pairing/{}/envelope", p.pairing_id);
    let a = dev
        .call(
            &rec,
            Outgoing::new(Route::PairingEnvelope, &env_path),
            &[200],
        )
        .await?;
    let _: EnvelopeResponse = a.json(Route::PairingEnvelope)?;
    Ok(dev)
}

/// The enrolment loaded for one session: the persisted document (the contract's
/// [`LoadState`], written 0600, atomically: temp + fsync + rename + dir fsync) and this
/// session's salt. Reads as the document (`state.seed`, `state.session`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateFile {
    pub doc: LoadState,
    /// 64 bits from the operating system, drawn anew by every load and never saved: with
    /// `seed` and `session` it keys this invocation's nonce streams (see `nonce_rng`).
    pub salt: u64,
    /// Which generator of several this invocation is (a `--shard` index or a Locust worker
    /// index; 0 alone): it selects the nonce streams' upper 32 bits, so generators sharing a
    /// key (a state file copied to every machine, same session number) still never share a
    /// stream. Never saved.
    pub stream_tag: u32,
}

impl std::ops::Deref for StateFile {
    type Target = LoadState;
    fn deref(&self) -> &LoadState {
        &self.doc
    }
}

impl std::ops::DerefMut for StateFile {
    fn deref_mut(&mut self) -> &mut LoadState {
        &mut self.doc
    }
}

impl StateFile {
    /// The default state file for a target: `$XDG_STATE_HOME/vaultbench/` (or
    /// `~/.local/state/vaultbench/`) + `load-<host>-<port>.json`.
    pub fn default_path(target: &Target) -> PathBuf {
        let dir = std::env::var_os("XDG_STATE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| PathBuf::from(h).join(".local/state"))
            })
            .unwrap_or_else(|| PathBuf::from("."));
        dir.join("vaultbench")
            .join(format!("load-{}.json", target.label()))
    }

    /// Captures enrolled devices (all of one account) for saving.
    pub fn from_devices(target: &Target, seed: u64, devices: &[Device]) -> StateFile {
        let doc = LoadState::new(
            target.base(),
            seed,
            devices.first().map(|d| d.domain_id()).unwrap_or_default(),
            devices
                .iter()
                .map(|d| StateDevice {
                    device_id: d.device_id().to_owned(),
                    device_secret: d.credentials().secret_hex(),
                })
                .collect(),
        );
        StateFile {
            doc,
            salt: 0,
            stream_tag: 0,
        }
    }

    /// Loads a state file; `Ok(None)` when it does not exist.
    pub fn load(path: &Path) -> Result<Option<StateFile>, LoadError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(LoadError::io(path, e)),
        };
        // The one kind/version check: a file from a newer build says "upgrade vaultbench".
        let doc = LoadState::from_json(&bytes).map_err(|e| LoadError::State {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        let salt = os_random_u64().map_err(|e| LoadError::io(Path::new("/dev/urandom"), e))?;
        Ok(Some(StateFile {
            doc,
            salt,
            stream_tag: 0,
        }))
    }

    /// Rebuilds the devices for `target` using nonce streams of the current session.
    pub fn devices(&self, target: &Target, path: &Path) -> Result<Vec<Device>, LoadError> {
        self.devices_in(target, path, 0..self.devices.len())
    }

    /// The enrolled devices `range` only (clamped to those enrolled), sharing one HTTP
    /// client (one pool: a held device costs its connection, not a client of its own).
    pub fn devices_in(
        &self,
        target: &Target,
        path: &Path,
        range: std::ops::Range<usize>,
    ) -> Result<Vec<Device>, LoadError> {
        if self.target != target.base() {
            return Err(LoadError::State {
                path: path.to_owned(),
                reason: format!(
                    "enrolled against {}, not {}; use another --state file",
                    self.target,
                    target.base()
                ),
            });
        }
        let end = range.end.min(self.devices.len());
        let start = range.start.min(end);
        let client = http_client();
        self.devices[start..end]
            .iter()
            .enumerate()
            .map(|(j, d)| (start + j, d))
            .map(|(i, d)| {
                let creds = DeviceCredentials::from_hex(&d.device_id, &d.device_secret)
                    .ok_or_else(|| LoadError::State {
                        path: path.to_owned(),
                        reason: format!("device {i} has a malformed id or secret"),
                    })?;
                Ok(Device::with_http(
                    target.clone(),
                    creds,
                    i,
                    self.domain_id.clone(),
                    session_nonce_rng(self.seed, i, self.session, self.salt, self.stream_tag),
                    client.clone(),
                ))
            })
            .collect()
    }

    /// Starts a session on the state file at `path`: under an exclusive lock on
    /// `<path>.lock` (so concurrent runs sharing one file each get their own session number),
    /// loads it, increments `session` and saves it. `Ok(None)` when there is no state file.
    pub fn begin_session(path: &Path) -> Result<Option<StateFile>, LoadError> {
        let lock = StateFile::lock(path)?;
        let s = StateFile::begin_session_locked(path)?;
        drop(lock);
        Ok(s)
    }

    /// [`StateFile::begin_session`] for a caller that already holds [`StateFile::lock`].
    pub fn begin_session_locked(path: &Path) -> Result<Option<StateFile>, LoadError> {
        let Some(mut s) = StateFile::load(path)? else {
            return Ok(None);
        };
        s.session += 1;
        s.save(path)?;
        Ok(Some(s))
    }

    /// Takes the exclusive lock on `<path>.lock`, waiting for it; held until the returned
    /// file is dropped. Several generators enrolling into one state file (shards, Locust
    /// workers on one machine) hold it from loading the file to saving their new devices.
    pub fn lock(path: &Path) -> Result<std::fs::File, LoadError> {
        let lock_path = lock_path_of(path);
        if let Some(dir) = lock_path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| LoadError::io(dir, e))?;
        }
        let lock = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|e| LoadError::io(&lock_path, e))?;
        lock.lock().map_err(|e| LoadError::io(&lock_path, e))?;
        Ok(lock)
    }

    /// Writes the file with mode 0600 via a temp file beside it, fsync and rename.
    pub fn save(&self, path: &Path) -> Result<(), LoadError> {
        write_private_atomic(path, &self.doc.to_json())
    }
}

/// The lock file beside a state file: `<name>.lock` (the state file itself is replaced by
/// rename on every save, so a lock on it would not be held by the next reader).
fn lock_path_of(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    path.with_file_name(name)
}

/// 8 bytes from the operating system.
fn os_random_u64() -> std::io::Result<u64> {
    use std::io::Read as _;
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// temp (0600) + write + fsync + rename + directory fsync: never a half-written secret file.
pub(crate) fn write_private_atomic(path: &Path, data: &[u8]) -> Result<(), LoadError> {
    durable::write_atomic(path, data, durable::PRIVATE).map_err(|e| LoadError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn state_round_trip_is_private_and_sessions_differ() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.json");
        let target = Target::parse("http://127.0.0.1:9", false).unwrap();
        let mut doc = LoadState::new(
            target.base(),
            5,
            &"ab".repeat(16),
            vec![StateDevice {
                device_id: "01".repeat(16),
                device_secret: "02".repeat(32),
            }],
        );
        doc.session = 3;
        let s = StateFile {
            doc,
            salt: 0,
            stream_tag: 0,
        };
        s.save(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let back = StateFile::load(&path).unwrap().unwrap();
        // Everything saved comes back; the salt is drawn anew by every load.
        assert_ne!(back.salt, 0);
        assert_eq!(
            StateFile {
                salt: 0,
                ..back.clone()
            },
            s
        );
        let devs = back.devices(&target, &path).unwrap();
        assert_eq!(devs[0].device_id(), "01".repeat(16));
        let other = Target::parse("http://127.0.0.1:10", false).unwrap();
        let err = back.devices(&other, &path).unwrap_err();
        assert!(err.to_string().contains("state.json"), "{err}");
        assert!(StateFile::load(&dir.path().join("none")).unwrap().is_none());
        std::fs::write(&path, b"{").unwrap();
        let err = StateFile::load(&path).unwrap_err();
        assert!(err.to_string().contains("state.json"), "{err}");
    }

    /// Concurrent sessions on one state file get distinct session numbers (the lock), and a
    /// restored older copy still gets fresh nonce streams (the salt).
    #[test]
    fn sessions_are_locked_and_salted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let target = Target::parse("http://127.0.0.1:9", false).unwrap();
        let doc = LoadState::new(
            target.base(),
            5,
            &"ab".repeat(16),
            vec![StateDevice {
                device_id: "01".repeat(16),
                device_secret: "02".repeat(32),
            }],
        );
        let s = StateFile {
            doc,
            salt: 0,
            stream_tag: 0,
        };
        s.save(&path).unwrap();
        let backup = std::fs::read(&path).unwrap();
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let p = path.clone();
                std::thread::spawn(move || StateFile::begin_session(&p).unwrap().unwrap().session)
            })
            .collect();
        let mut sessions: Vec<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        sessions.sort_unstable();
        assert_eq!(sessions, (1..=8).collect::<Vec<_>>());
        assert_eq!(StateFile::load(&path).unwrap().unwrap().session, 8);
        // Restore the old copy: the same session number comes back, the nonces do not.
        std::fs::write(&path, &backup).unwrap();
        let a = StateFile::begin_session(&path).unwrap().unwrap();
        std::fs::write(&path, &backup).unwrap();
        let b = StateFile::begin_session(&path).unwrap().unwrap();
        assert_eq!(a.session, b.session);
        let nonce = |s: &StateFile| {
            let mut r = session_nonce_rng(s.seed, 0, s.session, s.salt, 0);
            let mut n = [0u8; 16];
            rand::Rng::fill_bytes(&mut r, &mut n);
            n
        };
        assert_ne!(nonce(&a), nonce(&b));
    }

    #[test]
    fn domain_id_is_32_hex() {
        let d = domain_id_for("acct");
        assert_eq!(d.len(), 32);
        assert_eq!(d, domain_id_for("acct"));
        assert_ne!(d, domain_id_for("other"));
    }
}
