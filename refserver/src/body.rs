//! Response bodies: whole buffers, and a channel-fed stream for multipart chunk reads.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Frame;

/// Every response body the server sends.
pub type Body = BoxBody<Bytes, std::io::Error>;

pub fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).map_err(|never| match never {}).boxed()
}

pub fn empty() -> Body {
    full(Bytes::new())
}

/// A body fed by a task through a bounded channel, so a large multipart answer is never
/// held in memory whole.
#[derive(Debug)]
pub struct ChannelBody {
    rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
}

impl ChannelBody {
    pub fn channel(
        capacity: usize,
    ) -> (
        tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
        Body,
    ) {
        let (tx, rx) = tokio::sync::mpsc::channel(capacity);
        (tx, ChannelBody { rx }.boxed())
    }
}

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.rx.poll_recv(cx).map(|o| o.map(|r| r.map(Frame::data)))
    }
}
