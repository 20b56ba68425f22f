//! AWS Signature Version 4 for S3, as a pure function: the canonical request, the string to
//! sign and the `Authorization` header of one request, from its method, encoded path, query,
//! headers, payload hash and time (the clock is the caller's). Every S3 request is signed
//! here and sent by the generator's own HTTP client, so its timing, its counts and the bounds
//! on what a server answers stay the generator's (an SDK would hide its own retries, pools
//! and buffering). Tested against the worked examples of AWS's "Signature Calculations for
//! the Authorization Header" guide for S3.

use hmac::{Hmac, KeyInit, Mac};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use sha2::{Digest, Sha256};

/// The payload hash of an empty body (SHA-256 of nothing).
pub const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// The region signed into every request's scope. Loopback servers accept any (MinIO, moto and
/// s3rver use the one the client signs with); the AWS SDKs' default is this one.
pub const REGION: &str = "us-east-1";

/// SigV4's URI encoding: everything but RFC 3986's unreserved characters, `/` included (a
/// query name or value); a path is encoded segment by segment with the same set.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// An access key pair.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key: String,
    pub secret_key: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .finish_non_exhaustive()
    }
}

/// `s` URI-encoded as SigV4 wants a query name or value.
pub fn encode(s: &str) -> String {
    utf8_percent_encode(s, UNRESERVED).to_string()
}

/// The canonical query string (and the one sent): names and values encoded, sorted by name
/// then value, `name=value` joined by `&` (a name without a value is `name=`).
pub fn canonical_query(query: &[(&str, &str)]) -> String {
    let mut pairs: Vec<(String, String)> =
        query.iter().map(|(k, v)| (encode(k), encode(v))).collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// `YYYYMMDDTHHMMSSZ` of whole seconds since the Unix epoch (UTC), as `x-amz-date` carries it.
pub fn amz_date(unix_secs: i64) -> String {
    contract::time::rfc3339_utc(unix_secs).replace(['-', ':'], "")
}

/// Lower-case hex SHA-256 of `body`: a payload hash.
pub fn sha256_hex(body: &[u8]) -> String {
    hex::encode(Sha256::digest(body))
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

/// One request to sign. Header names are lower case; values are trimmed and inner runs of
/// spaces folded here.
#[derive(Debug, Clone)]
pub struct ToSign<'a> {
    pub method: &'a str,
    /// The path as sent: each segment already encoded with [`encode`]'s set.
    pub path: &'a str,
    /// The canonical query (from [`canonical_query`]), as sent.
    pub query: &'a str,
    /// Every signed header, `host` and `x-amz-date` and `x-amz-content-sha256` included.
    pub headers: &'a [(&'a str, &'a str)],
    pub payload_sha256: &'a str,
    /// `x-amz-date`'s value ([`amz_date`]).
    pub amz_date: &'a str,
}

/// The canonical request, its hash's string to sign and the signature, for messages and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub canonical_request: String,
    pub string_to_sign: String,
    pub signed_headers: String,
    pub signature: String,
    /// The `Authorization` header's value.
    pub authorization: String,
}

/// Signs `r` with `creds` in `region` for service `s3`.
pub fn sign(creds: &Credentials, region: &str, r: &ToSign<'_>) -> Signed {
    let mut headers: Vec<(String, String)> = r
        .headers
        .iter()
        .map(|(k, v)| {
            let folded = v.split_whitespace().collect::<Vec<_>>().join(" ");
            (k.to_ascii_lowercase(), folded)
        })
        .collect();
    headers.sort();
    let signed_headers = headers
        .iter()
        .map(|(k, _)| k.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let mut canonical_request = format!("{}\n{}\n{}\n", r.method, r.path, r.query);
    for (k, v) in &headers {
        canonical_request.push_str(k);
        canonical_request.push(':');
        canonical_request.push_str(v);
        canonical_request.push('\n');
    }
    canonical_request.push('\n');
    canonical_request.push_str(&signed_headers);
    canonical_request.push('\n');
    canonical_request.push_str(r.payload_sha256);
    let date = &r.amz_date[..r.amz_date.len().min(8)];
    let scope = format!("{date}/{region}/s3/aws4_request");
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{}\n{scope}\n{}",
        r.amz_date,
        sha256_hex(canonical_request.as_bytes())
    );
    let k_date = hmac(
        format!("AWS4{}", creds.secret_key).as_bytes(),
        date.as_bytes(),
    );
    let k_region = hmac(&k_date, region.as_bytes());
    let k_service = hmac(&k_region, b"s3");
    let k_signing = hmac(&k_service, b"aws4_request");
    let signature = hex::encode(hmac(&k_signing, string_to_sign.as_bytes()));
    let authorization = format!(
        "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
        creds.access_key
    );
    Signed {
        canonical_request,
        string_to_sign,
        signed_headers,
        signature,
        authorization,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example credentials of AWS's S3 SigV4 guide.
    fn example() -> Credentials {
        Credentials {
            access_key: "AKIAIOSFODNN7EXAMPLE".into(),
            secret_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
        }
    }

    const HOST: &str = "examplebucket.s3.amazonaws.com";
    const DATE: &str = "20130524T000000Z";

    /// "Example: GET Object" (a range read of `/test.txt`).
    #[test]
    fn get_object_example() {
        let s = sign(
            &example(),
            REGION,
            &ToSign {
                method: "GET",
                path: "/test.txt",
                query: "",
                headers: &[
                    ("host", HOST),
                    ("range", "bytes=0-9 "),
                    ("x-amz-content-sha256", EMPTY_SHA256),
                    ("x-amz-date", DATE),
                ],
                payload_sha256: EMPTY_SHA256,
                amz_date: DATE,
            },
        );
        assert_eq!(
            s.signature,
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
        assert_eq!(
            s.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    /// "Example: PUT Object" (`/test$file.text`, a body, a storage class and a Date header).
    #[test]
    fn put_object_example() {
        let body = b"Welcome to Amazon S3.";
        let hash = sha256_hex(body);
        assert_eq!(
            hash,
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"
        );
        let path = format!("/{}", encode("test$file.text"));
        let s = sign(
            &example(),
            REGION,
            &ToSign {
                method: "PUT",
                path: &path,
                query: "",
                headers: &[
                    ("date", "Fri, 24 May 2013 00:00:00 GMT"),
                    ("host", HOST),
                    ("x-amz-content-sha256", &hash),
                    ("x-amz-date", DATE),
                    ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
                ],
                payload_sha256: &hash,
                amz_date: DATE,
            },
        );
        assert_eq!(
            s.signature,
            "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"
        );
    }

    /// "Example: GET Bucket Lifecycle" (a sub-resource with no value) and "Example: Get Bucket
    /// (List Objects)" (a query sorted by name).
    #[test]
    fn query_examples() {
        let q = canonical_query(&[("lifecycle", "")]);
        assert_eq!(q, "lifecycle=");
        let s = sign(
            &example(),
            REGION,
            &ToSign {
                method: "GET",
                path: "/",
                query: &q,
                headers: &[
                    ("host", HOST),
                    ("x-amz-content-sha256", EMPTY_SHA256),
                    ("x-amz-date", DATE),
                ],
                payload_sha256: EMPTY_SHA256,
                amz_date: DATE,
            },
        );
        assert_eq!(
            s.signature,
            "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"
        );
        let q = canonical_query(&[("prefix", "J"), ("max-keys", "2")]);
        assert_eq!(q, "max-keys=2&prefix=J");
        let s = sign(
            &example(),
            REGION,
            &ToSign {
                method: "GET",
                path: "/",
                query: &q,
                headers: &[
                    ("host", HOST),
                    ("x-amz-content-sha256", EMPTY_SHA256),
                    ("x-amz-date", DATE),
                ],
                payload_sha256: EMPTY_SHA256,
                amz_date: DATE,
            },
        );
        assert_eq!(
            s.signature,
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
        );
    }

    /// A request as vaultbench sends one (a non-ASCII key, a `+`, signed metadata and
    /// Content-Type), against botocore's `S3SigV4Auth` (the AWS SDK for Python's S3 signer)
    /// on the same request: `Signature=d0328780…` for secret `sk/secret+key` at 11:34:28Z.
    #[test]
    fn matches_botocore_on_a_request_like_ours() {
        let body = b"hello note\n";
        let hash = sha256_hex(body);
        let path = format!("/vaultbench/Wiki/{}", encode("Caf\u{e9} a+b.md"));
        assert_eq!(path, "/vaultbench/Wiki/Caf%C3%A9%20a%2Bb.md");
        let date = "20261206T113428Z";
        let s = sign(
            &Credentials {
                access_key: "ak".into(),
                secret_key: "sk/secret+key".into(),
            },
            REGION,
            &ToSign {
                method: "PUT",
                path: &path,
                query: &canonical_query(&[("x-id", "PutObject")]),
                headers: &[
                    ("content-type", "text/markdown; charset=utf-8"),
                    ("host", "127.0.0.1:9000"),
                    ("x-amz-content-sha256", &hash),
                    ("x-amz-date", date),
                    ("x-amz-meta-mtime", "1700000000"),
                ],
                payload_sha256: &hash,
                amz_date: date,
            },
        );
        assert_eq!(
            s.authorization,
            "AWS4-HMAC-SHA256 Credential=ak/20261206/us-east-1/s3/aws4_request, SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-meta-mtime, Signature=d03287808799c4cc75aa3bdf97941535d3edbb950a0f6e4aebd266de56d583a2"
        );
    }

    #[test]
    fn dates_and_encoding() {
        assert_eq!(amz_date(1_369_353_600), DATE);
        assert_eq!(encode("a b/c~d"), "a%20b%2Fc~d");
        assert_eq!(
            canonical_query(&[("continuation-token", "1/2+3="), ("list-type", "2")]),
            "continuation-token=1%2F2%2B3%3D&list-type=2"
        );
        assert!(!format!("{:?}", example()).contains("EXAMPLEKEY"));
    }
}
