//! Error codes and their HTTP statuses, exactly as the protocol page lists them.
//!
//! Codes the page names keep its spelling and status; the few it leaves open
//! (`unknown_device`, `missing_headers`, `bad_json`, ...) are the reference server's choice,
//! documented here once.

use serde::{Deserialize, Serialize};

macro_rules! codes {
    ($($variant:ident = $name:literal => $status:literal,)*) => {
        /// Every error the protocol (or the reference server, where the page is silent) names.
        /// The body on the wire is `{"error":"<snake_case_code>","detail":"<text>"}`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum ErrorCode {
            $(#[serde(rename = $name)] $variant,)*
        }

        impl ErrorCode {
            /// Every code, for tests and documentation.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The HTTP status the protocol gives this error.
            pub fn status(self) -> u16 {
                match self { $(ErrorCode::$variant => $status,)* }
            }

            /// The snake_case code as it appears in the `error` field.
            pub fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $name,)* }
            }

            /// Parses the `error` field of a response.
            pub fn parse(s: &str) -> Option<ErrorCode> {
                match s { $($name => Some(ErrorCode::$variant),)* _ => None }
            }
        }
    };
}

codes! {
    BadSignature = "bad_signature" => 401,
    StaleTimestamp = "stale_timestamp" => 401,
    ReplayedNonce = "replayed_nonce" => 401,
    UnknownDevice = "unknown_device" => 401,
    MissingHeaders = "missing_headers" => 401,
    BadSetupToken = "bad_setup_token" => 401,
    BadEnrollToken = "bad_enroll_token" => 401,
    DeviceRevoked = "device_revoked" => 403,
    DevicePending = "device_pending" => 403,
    NotPairingCreator = "not_pairing_creator" => 403,
    UnknownChunk = "unknown_chunk" => 404,
    UnknownFile = "unknown_file" => 404,
    UnknownPairing = "unknown_pairing" => 404,
    NotFound = "not_found" => 404,
    MethodNotAllowed = "method_not_allowed" => 405,
    AlreadySetUp = "already_set_up" => 409,
    NotApproved = "not_approved" => 409,
    MissingChunks = "missing_chunks" => 409,
    DomainMismatch = "domain_mismatch" => 409,
    TooManyHeads = "too_many_heads" => 409,
    EnvelopeConsumed = "envelope_consumed" => 410,
    RequestTimeout = "request_timeout" => 408,
    LengthRequired = "length_required" => 411,
    BodyTooLarge = "body_too_large" => 413,
    RangeNotSatisfiable = "range_not_satisfiable" => 416,
    SeqAhead = "seq_ahead" => 416,
    BadJson = "bad_json" => 400,
    BadRequest = "bad_request" => 400,
    HeadersTooLarge = "headers_too_large" => 431,
    SidMismatch = "sid_mismatch" => 422,
    BadSid = "bad_sid" => 422,
    VersionIdMismatch = "version_id_mismatch" => 422,
    Internal = "internal" => 500,
    NonceCacheFull = "nonce_cache_full" => 503,
    NonceLogUnavailable = "nonce_log_unavailable" => 503,
    NotReady = "not_ready" => 503,
    VolumeFull = "volume_full" => 507,
}

/// The JSON error body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    #[serde(default)]
    pub detail: String,
}

impl ErrorBody {
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        ErrorBody {
            error: code.as_str().to_owned(),
            detail: detail.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_spelling_matches_as_str() {
        for &c in ErrorCode::ALL {
            let v = serde_json::to_value(c).unwrap();
            assert_eq!(v, serde_json::Value::String(c.as_str().to_owned()));
            assert_eq!(ErrorCode::parse(c.as_str()), Some(c));
        }
    }

    #[test]
    fn statuses_from_the_protocol_page() {
        assert_eq!(ErrorCode::ReplayedNonce.status(), 401);
        assert_eq!(ErrorCode::DevicePending.status(), 403);
        assert_eq!(ErrorCode::AlreadySetUp.status(), 409);
        assert_eq!(ErrorCode::EnvelopeConsumed.status(), 410);
        assert_eq!(ErrorCode::BodyTooLarge.status(), 413);
        assert_eq!(ErrorCode::SeqAhead.status(), 416);
        assert_eq!(ErrorCode::SidMismatch.status(), 422);
        assert_eq!(ErrorCode::VersionIdMismatch.status(), 422);
        assert_eq!(ErrorCode::NonceCacheFull.status(), 503);
        assert_eq!(ErrorCode::VolumeFull.status(), 507);
    }
}
