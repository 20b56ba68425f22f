//! Device request signing: the canonical string and its HMAC-SHA-256.
//!
//! `sig = hex HMAC-SHA-256(key, "obsync/v1\n" METHOD "\n" path_and_query "\n" ts "\n" nonce "\n"
//! hex(SHA-256(body)))`, where the key is the 32 bytes the 64-hex `device_secret` encodes
//! (protocol page, "Device authentication"). Pure: the caller passes `ts` and `nonce`.

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// Hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// The string both sides sign.
pub fn canonical_string(
    method: &str,
    path_and_query: &str,
    ts: i64,
    nonce: &str,
    body_sha256_hex: &str,
) -> String {
    let mut buf = Vec::with_capacity(96 + path_and_query.len());
    write_canonical(
        &mut buf,
        method,
        path_and_query,
        ts,
        nonce.as_bytes(),
        body_sha256_hex.as_bytes(),
    );
    // Every piece is UTF-8 (`&str`, decimal digits, ASCII separators), so this never fails.
    String::from_utf8(buf).unwrap_or_default()
}

/// Appends the canonical string to `buf` (not cleared first) without allocating when `buf`
/// has room: the load generator's fast path signs from one reused buffer per worker.
/// `nonce` and `body_sha256_hex` are the hex digits as bytes. [`canonical_string`] is this
/// function into a fresh buffer, so the two signing paths cannot drift apart.
pub fn write_canonical(
    buf: &mut Vec<u8>,
    method: &str,
    path_and_query: &str,
    ts: i64,
    nonce: &[u8],
    body_sha256_hex: &[u8],
) {
    buf.extend_from_slice(b"obsync/v1\n");
    buf.extend_from_slice(method.as_bytes());
    buf.push(b'\n');
    buf.extend_from_slice(path_and_query.as_bytes());
    buf.push(b'\n');
    buf.extend_from_slice(itoa::Buffer::new().format(ts).as_bytes());
    buf.push(b'\n');
    buf.extend_from_slice(nonce);
    buf.push(b'\n');
    buf.extend_from_slice(body_sha256_hex);
}

/// A device's id and its 32-byte secret.
#[derive(Clone, PartialEq, Eq)]
pub struct DeviceCredentials {
    /// 32 lowercase hex.
    pub device_id: String,
    /// The decoded 64-hex `device_secret`.
    pub secret: [u8; 32],
}

impl std::fmt::Debug for DeviceCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceCredentials")
            .field("device_id", &self.device_id)
            .finish_non_exhaustive()
    }
}

impl DeviceCredentials {
    /// From the wire form: `device_secret` is 64 hex.
    pub fn from_hex(device_id: &str, device_secret_hex: &str) -> Option<Self> {
        let bytes = hex::decode(device_secret_hex).ok()?;
        let secret: [u8; 32] = bytes.try_into().ok()?;
        if device_id.len() != 32 || !device_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(DeviceCredentials {
            device_id: device_id.to_ascii_lowercase(),
            secret,
        })
    }

    pub fn secret_hex(&self) -> String {
        hex::encode(self.secret)
    }
}

/// Hex HMAC-SHA-256 of `canonical` under `secret`.
pub fn signature(secret: &[u8; 32], canonical: &str) -> String {
    let mut mac =
        <HmacSha256 as KeyInit>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(canonical.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// Checks `sig_hex` in constant time.
pub fn verify(secret: &[u8; 32], canonical: &str, sig_hex: &str) -> bool {
    let Ok(sig) = hex::decode(sig_hex) else {
        return false;
    };
    let mut mac =
        <HmacSha256 as KeyInit>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(canonical.as_bytes());
    mac.verify_slice(&sig).is_ok()
}

/// The four authentication headers of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedHeaders {
    pub device: String,
    pub ts: String,
    pub nonce: String,
    pub sig: String,
}

/// Signs one request. `body_sha256_hex` lets a streaming client pass a hash it already has.
pub fn sign_request(
    creds: &DeviceCredentials,
    method: &str,
    path_and_query: &str,
    ts: i64,
    nonce: &str,
    body_sha256_hex: &str,
) -> SignedHeaders {
    let canonical = canonical_string(method, path_and_query, ts, nonce, body_sha256_hex);
    SignedHeaders {
        device: creds.device_id.clone(),
        ts: ts.to_string(),
        nonce: nonce.to_owned(),
        sig: signature(&creds.secret, &canonical),
    }
}

/// SHA-256 of the empty body, the hash every bodiless request signs.
pub const EMPTY_BODY_SHA256: &str =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

#[cfg(test)]
mod tests {
    use super::*;

    fn creds() -> DeviceCredentials {
        DeviceCredentials::from_hex(
            "00112233445566778899aabbccddeeff",
            "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
        )
        .unwrap()
    }

    #[test]
    fn empty_body_hash() {
        assert_eq!(sha256_hex(b""), EMPTY_BODY_SHA256);
    }

    #[test]
    fn canonical_string_layout() {
        let c = canonical_string(
            "GET",
            "/v1/changes?since=7",
            1_700_000_000,
            "ab",
            EMPTY_BODY_SHA256,
        );
        assert_eq!(
            c,
            format!("obsync/v1\nGET\n/v1/changes?since=7\n1700000000\nab\n{EMPTY_BODY_SHA256}")
        );
    }

    #[test]
    fn written_canonical_equals_the_formatted_one() {
        let mut buf = b"stale".to_vec();
        buf.clear();
        for ts in [0i64, -5, 1_700_000_000, i64::MIN, i64::MAX] {
            buf.clear();
            write_canonical(&mut buf, "PUT", "/v1/chunks/aa?x=1", ts, b"n0", b"h1");
            assert_eq!(
                buf,
                format!("obsync/v1\nPUT\n/v1/chunks/aa?x=1\n{ts}\nn0\nh1").into_bytes()
            );
            assert_eq!(
                buf,
                canonical_string("PUT", "/v1/chunks/aa?x=1", ts, "n0", "h1").into_bytes()
            );
        }
    }

    /// Fixed vectors. They were computed independently with Python's `hmac` module:
    /// `hmac.new(bytes(range(32)), canonical.encode(), 'sha256').hexdigest()`.
    #[test]
    fn signing_vectors() {
        let c = creds();
        let h = sign_request(
            &c,
            "GET",
            "/v1/changes?since=7",
            1_700_000_000,
            "0123456789abcdef0123456789abcdef",
            EMPTY_BODY_SHA256,
        );
        assert_eq!(h.sig, VECTOR_GET);
        let body = br#"{"sids":[]}"#;
        let h = sign_request(
            &c,
            "POST",
            "/v1/chunks/exists",
            1_700_000_123,
            "fedcba9876543210fedcba9876543210",
            &sha256_hex(body),
        );
        assert_eq!(h.sig, VECTOR_POST);
    }

    const VECTOR_GET: &str = "e44de5f66d070ec94a03539b1667896a8f615a31ab510a6082af6b3e1d925bad";
    const VECTOR_POST: &str = "deec065f0d5078b3539a2cbdc247ced7ce1d65f88d975fcb8c2cc1c65463bff5";

    #[test]
    fn verify_accepts_own_and_rejects_tampered() {
        let c = creds();
        let canonical = canonical_string("PUT", "/v1/chunks/aa", 5, "n", EMPTY_BODY_SHA256);
        let sig = signature(&c.secret, &canonical);
        assert!(verify(&c.secret, &canonical, &sig));
        let mut bad = sig.clone().into_bytes();
        bad[0] = if bad[0] == b'0' { b'1' } else { b'0' };
        assert!(!verify(
            &c.secret,
            &canonical,
            std::str::from_utf8(&bad).unwrap()
        ));
        assert!(!verify(&c.secret, &canonical, "zz"));
    }

    #[test]
    fn credentials_reject_bad_hex() {
        assert!(DeviceCredentials::from_hex("00", "00").is_none());
        assert!(DeviceCredentials::from_hex("00112233445566778899aabbccddeeff", "xx").is_none());
    }
}
