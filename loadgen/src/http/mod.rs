//! The plain HTTP client every protocol without request signing shares (see
//! [`crate::protocols`]): Basic credentials ([`auth`]), one request sent and counted ([`client`]), and
//! its error ([`HttpError`]). Signed protocols have their own client beside their folder.

pub mod auth;
pub mod client;
mod error;

pub use auth::BasicAuth;
pub use client::{
    ATTEMPTS, Answer, BodyReader, HttpClient, MAX_ANSWER_BYTES, REQUEST_TIMEOUT, Request,
    StreamError, method,
};
pub use error::HttpError;
pub(crate) use error::fmt_bytes;
