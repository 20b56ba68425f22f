//! The journal step every write shares: append a record and apply it under the state lock,
//! then wait until it (or the newest version an answer shows) is durable.

use protocol::ErrorCode;

use super::reply::ApiError;
use crate::app::App;
use crate::state::{Record, State};

/// Appends a record to the journal and applies it, in that order, under the state lock (so
/// journal order is apply order). The receiver answers once the record is durable.
pub(super) fn enqueue_apply(
    app: &App,
    mut st: std::sync::MutexGuard<'_, State>,
    rec: Record,
) -> Result<Durable, ApiError> {
    let seq = match &rec {
        Record::Version(c) => Some(c.seq),
        _ => None,
    };
    let payload =
        serde_json::to_vec(&rec).map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?;
    let rx = app.journal.enqueue(&payload, seq).map_err(journal_error)?;
    st.apply(rec)
        .map_err(|e| ApiError::new(ErrorCode::Internal, e))?;
    Ok(Durable(rx))
}

/// A queued journal record; await [`Durable::wait`] before answering.
pub(super) struct Durable(
    tokio::sync::oneshot::Receiver<Result<(), crate::store::log::AppendError>>,
);

impl Durable {
    pub(super) async fn wait(self) -> Result<(), ApiError> {
        match self.0.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(journal_error(e)),
            Err(_) => Err(ApiError::new(
                ErrorCode::Internal,
                "the journal writer stopped",
            )),
        }
    }
}

pub(super) fn journal_error(e: crate::store::log::AppendError) -> ApiError {
    if matches!(
        e.kind,
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    ) {
        ApiError::new(ErrorCode::VolumeFull, e.to_string())
    } else {
        ApiError::new(ErrorCode::Internal, e.to_string())
    }
}

/// Waits until `seq` (the newest version an answer shows) is durable: a version is applied in
/// memory before its journal record is on disk, and no answer may show it before then.
pub(super) async fn until_durable(app: &App, seq: Option<u64>) {
    if let Some(seq) = seq {
        let mut rx = app.durable.clone();
        seq_after(&mut rx, seq.saturating_sub(1)).await;
    }
}

/// Waits until the durable seq passes `seq`; false if the journal writer is gone.
pub(super) async fn seq_after(rx: &mut tokio::sync::watch::Receiver<u64>, seq: u64) -> bool {
    rx.wait_for(|d| *d > seq).await.is_ok()
}
