//! A small signed obsync-v1 client over hyper, for the integration tests and the fsync
//! measurement example (which includes this file by path).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Mutex;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{HeaderMap, Method, Request, StatusCode};
use hyper_util::client::legacy::{Client, connect::HttpConnector};
use hyper_util::rt::TokioExecutor;
use protocol::DeviceCredentials;
use protocol::wire::{
    ApproveRequest, ClaimRequest, ClaimResponse, DeviceInfo, PairingResponse, SetupRequest,
    SetupResponse, VersionPost, VersionPostResponse,
};
use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;

/// One answer.
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Resp {
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> T {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "{} body is not the expected JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The `error` code of an error answer.
    pub fn error(&self) -> String {
        let v: serde_json::Value = self.json();
        v["error"].as_str().unwrap_or("").to_owned()
    }
}

pub struct Api {
    base: String,
    http: Client<HttpConnector, Full<Bytes>>,
    rng: Mutex<ChaCha8Rng>,
    /// Seconds added to the system clock's time when signing (for stale-timestamp tests).
    pub ts_offset: i64,
}

pub fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl Api {
    pub fn new(base: &str, seed: u64) -> Api {
        Api {
            base: base.trim_end_matches('/').to_owned(),
            // No idle connection reuse: the server may close a connection after an answer it
            // gave without reading the body (507, 413), and a pooled client that sends the next
            // request on it races that close (`IncompleteMessage`).
            http: Client::builder(TokioExecutor::new())
                .pool_max_idle_per_host(0)
                .build_http(),
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
            ts_offset: 0,
        }
    }

    pub fn random_hex(&self, n: usize) -> String {
        let mut b = vec![0u8; n];
        self.rng.lock().unwrap().fill_bytes(&mut b);
        hex::encode(b)
    }

    /// An unsigned request.
    pub async fn raw(
        &self,
        method: Method,
        target: &str,
        headers: &[(&str, String)],
        body: impl Into<Bytes>,
    ) -> Resp {
        let mut b = Request::builder()
            .method(method)
            .uri(format!("{}{target}", self.base));
        for (k, v) in headers {
            b = b.header(*k, v);
        }
        let req = b.body(Full::new(body.into())).expect("request");
        let resp = self.http.request(req).await.expect("http request");
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.expect("response body").to_bytes();
        Resp {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }

    /// The four signed headers for a request, with a chosen ts and nonce.
    pub fn sign(
        dev: &DeviceCredentials,
        method: &Method,
        target: &str,
        body: &[u8],
        ts: i64,
        nonce: &str,
    ) -> Vec<(&'static str, String)> {
        let h = protocol::sign_request(
            dev,
            method.as_str(),
            target,
            ts,
            nonce,
            &protocol::sha256_hex(body),
        );
        vec![
            (protocol::H_DEVICE, h.device),
            (protocol::H_TS, h.ts),
            (protocol::H_NONCE, h.nonce),
            (protocol::H_SIG, h.sig),
        ]
    }

    /// A signed request with a fresh nonce and the current time.
    pub async fn signed(
        &self,
        dev: &DeviceCredentials,
        method: Method,
        target: &str,
        body: impl Into<Bytes>,
    ) -> Resp {
        let body = body.into();
        let nonce = self.random_hex(16);
        let headers = Self::sign(
            dev,
            &method,
            target,
            &body,
            now_s() + self.ts_offset,
            &nonce,
        );
        self.raw(method, target, &headers, body).await
    }

    pub async fn setup(&self, token: &str) -> DeviceCredentials {
        let req = SetupRequest {
            setup_token: token.to_owned(),
            account_name: "bench".into(),
            device: DeviceInfo {
                name: "device-a".into(),
                platform: "linux".into(),
                app_version: "test".into(),
            },
        };
        let r = self
            .raw(
                Method::POST,
                "/v1/setup",
                &[],
                serde_json::to_vec(&req).unwrap(),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
        let s: SetupResponse = r.json();
        DeviceCredentials::from_hex(&s.device_id, &s.device_secret).expect("credentials")
    }

    /// Pairs a new device through `a`: create, claim, approve, fetch the envelope.
    pub async fn pair(&self, a: &DeviceCredentials, name: &str) -> DeviceCredentials {
        let r = self.signed(a, Method::POST, "/v1/pairing", "").await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
        let p: PairingResponse = r.json();
        let claim = ClaimRequest {
            enroll_token: p.enroll_token.clone(),
            name: name.into(),
            platform: "linux".into(),
            app_version: "test".into(),
        };
        let r = self
            .raw(
                Method::POST,
                &format!("/v1/pairing/{}/claim", p.pairing_id),
                &[],
                serde_json::to_vec(&claim).unwrap(),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
        let c: ClaimResponse = r.json();
        let b = DeviceCredentials::from_hex(&c.device_id, &c.device_secret).expect("creds");
        let approve = ApproveRequest {
            envelope: base64::engine::general_purpose::STANDARD.encode(b"sealed vault key"),
            nonce: "00".repeat(12),
        };
        let r = self
            .signed(
                a,
                Method::POST,
                &format!("/v1/pairing/{}/approve", p.pairing_id),
                serde_json::to_vec(&approve).unwrap(),
            )
            .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{r:?}");
        let r = self
            .signed(
                &b,
                Method::GET,
                &format!("/v1/pairing/{}/envelope", p.pairing_id),
                "",
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        b
    }

    /// PUTs one chunk; returns the status and its sid.
    pub async fn put_chunk(&self, dev: &DeviceCredentials, data: &[u8]) -> (StatusCode, String) {
        let sid = protocol::sha256_hex(data);
        let r = self
            .signed(
                dev,
                Method::PUT,
                &format!("/v1/chunks/{sid}"),
                Bytes::copy_from_slice(data),
            )
            .await;
        (r.status, sid)
    }

    /// A version post for `file_id` with the given parents and sids.
    pub fn version(
        file_id: &str,
        parents: Vec<String>,
        sids: Vec<String>,
        bytes: u64,
        manifest: &[u8],
    ) -> VersionPost {
        let version_id = protocol::version_id(file_id, &parents, manifest, &sids).unwrap();
        VersionPost {
            version_id,
            parents,
            sids,
            bytes,
            domain_id: "00".repeat(16),
            manifest_ct: base64::engine::general_purpose::STANDARD.encode(manifest),
            manifest_nonce: "00".repeat(12),
            deleted: false,
        }
    }

    pub async fn post_version(
        &self,
        dev: &DeviceCredentials,
        file_id: &str,
        v: &VersionPost,
    ) -> Resp {
        self.signed(
            dev,
            Method::POST,
            &format!("/v1/files/{file_id}/versions"),
            serde_json::to_vec(v).unwrap(),
        )
        .await
    }

    /// A new note: one chunk PUT and one version post. Returns the post's answer.
    pub async fn new_note(
        &self,
        dev: &DeviceCredentials,
        file_id: &str,
        content: &[u8],
    ) -> VersionPostResponse {
        let (status, sid) = self.put_chunk(dev, content).await;
        assert!(
            status == StatusCode::CREATED || status == StatusCode::OK,
            "{status}"
        );
        let v = Self::version(
            file_id,
            vec![],
            vec![sid],
            content.len() as u64,
            b"manifest",
        );
        let r = self.post_version(dev, file_id, &v).await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
        r.json()
    }

    /// `/metrics` as `name{labels}` → value.
    pub async fn metrics(&self) -> BTreeMap<String, f64> {
        let r = self.raw(Method::GET, "/metrics", &[], "").await;
        assert_eq!(r.status, StatusCode::OK);
        String::from_utf8_lossy(&r.body)
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .filter_map(|l| {
                let (k, v) = l.rsplit_once(' ')?;
                Some((k.to_owned(), v.parse().ok()?))
            })
            .collect()
    }
}
