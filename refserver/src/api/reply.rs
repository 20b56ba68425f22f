//! Answers and their pieces shared by every route: [`ApiError`] (the protocol's error body
//! with its status), JSON and empty answers, query parameters and small syntax checks.

use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};
use protocol::ErrorCode;
use serde::Serialize;

use crate::body::{Body, empty, full};

/// An error answer: `{"error":"<code>","detail":"<text>"}` with the code's status.
#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub detail: String,
}

impl ApiError {
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> ApiError {
        ApiError {
            code,
            detail: detail.into(),
        }
    }

    pub(super) fn into_response(self) -> Response<Body> {
        let body = serde_json::to_vec(&protocol::error::ErrorBody::new(self.code, self.detail))
            .unwrap_or_default();
        let mut r = Response::new(full(body));
        *r.status_mut() =
            StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    }
}

pub(super) type ApiResult = Result<Response<Body>, ApiError>;

pub(super) fn json<T: Serialize>(status: StatusCode, v: &T) -> ApiResult {
    let b = serde_json::to_vec(v).map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
    let mut r = Response::new(full(b));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

pub(super) fn status_only(status: StatusCode) -> ApiResult {
    let mut r = Response::new(empty());
    *r.status_mut() = status;
    Ok(r)
}

pub(super) fn is_hex_lower(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

pub(super) fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::new(ErrorCode::BadJson, e.to_string()))
}

pub(super) fn query_params(parts: &hyper::http::request::Parts) -> Vec<(String, String)> {
    parts
        .uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (kv.to_owned(), String::new()),
        })
        .collect()
}

pub(super) fn num_param(q: &[(String, String)], name: &str) -> Result<Option<u64>, ApiError> {
    match q.iter().find(|(k, _)| k == name) {
        None => Ok(None),
        Some((_, v)) => v.parse::<u64>().map(Some).map_err(|_| {
            ApiError::new(
                ErrorCode::BadRequest,
                format!("{name}={v:?} is not a non-negative integer"),
            )
        }),
    }
}
