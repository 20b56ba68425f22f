//! Enrolment: `POST /v1/setup` and the pairing routes (create, claim, approve, envelope).

use base64::Engine as _;
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use protocol::wire::{
    ApproveRequest, ClaimRequest, ClaimResponse, EnvelopeResponse, PairingResponse, SetupRequest,
    SetupResponse,
};
use protocol::{ErrorCode, limits};

use super::auth::{auth_with_body, constant_time_eq, read_body};
use super::durable::enqueue_apply;
use super::reply::{ApiError, ApiResult, is_hex_lower, json, parse_json, status_only};
use crate::app::App;
use crate::state::Record;

/// How long a pairing's enroll token stays valid. The protocol page leaves it open; ten
/// minutes is the reference server's choice.
const PAIRING_TTL_MS: i64 = 10 * 60 * 1000;

pub(super) async fn setup(app: &App, req: Request<Incoming>) -> ApiResult {
    let (parts, body) = req.into_parts();
    let body = read_body(&parts, body, limits::MAX_JSON_BODY).await?;
    let r: SetupRequest = parse_json(&body)?;
    if !constant_time_eq(r.setup_token.trim().as_bytes(), app.setup_token.as_bytes()) {
        return Err(ApiError::new(ErrorCode::BadSetupToken, "wrong setup token"));
    }
    let account_id = app.random_hex(16);
    let device_id = app.random_hex(16);
    let secret = app.random_hex(32);
    let durable = {
        let st = app.lock_state();
        if st.account_id.is_some() {
            return Err(ApiError::new(
                ErrorCode::AlreadySetUp,
                "the server is already set up",
            ));
        }
        let rec = Record::Setup {
            account_id: account_id.clone(),
            account_name: r.account_name,
            device_id: device_id.clone(),
            secret: secret.clone(),
            name: r.device.name,
        };
        enqueue_apply(app, st, rec)?
    };
    durable.wait().await?;
    json(
        StatusCode::CREATED,
        &SetupResponse {
            account_id,
            device_id,
            device_secret: secret,
        },
    )
}

pub(super) async fn pairing_create(app: &App, req: Request<Incoming>) -> ApiResult {
    let (device, _, _) = auth_with_body(app, req, limits::MAX_JSON_BODY, false).await?;
    let pairing_id = app.random_hex(16);
    let enroll_token = app.random_hex(32);
    let expires = app.clock.now_ms() + PAIRING_TTL_MS;
    let durable = {
        let st = app.lock_state();
        let rec = Record::PairingCreated {
            pairing_id: pairing_id.clone(),
            enroll_token: enroll_token.clone(),
            creator: device,
            expires,
        };
        enqueue_apply(app, st, rec)?
    };
    durable.wait().await?;
    json(
        StatusCode::CREATED,
        &PairingResponse {
            pairing_id,
            enroll_token,
            expires,
        },
    )
}

pub(super) async fn pairing_claim(app: &App, req: Request<Incoming>, id: &str) -> ApiResult {
    let (parts, body) = req.into_parts();
    let body = read_body(&parts, body, limits::MAX_JSON_BODY).await?;
    let r: ClaimRequest = parse_json(&body)?;
    let now = app.clock.now_ms();
    let device_id = app.random_hex(16);
    let secret = app.random_hex(32);
    let durable = {
        let st = app.lock_state();
        let unknown = || ApiError::new(ErrorCode::UnknownPairing, format!("no pairing {id}"));
        let p = st.pairings.get(id).ok_or_else(unknown)?;
        if !constant_time_eq(r.enroll_token.as_bytes(), p.enroll_token.as_bytes()) {
            return Err(ApiError::new(
                ErrorCode::BadEnrollToken,
                "wrong enroll token",
            ));
        }
        if p.claimant.is_some() {
            return Err(ApiError::new(
                ErrorCode::BadEnrollToken,
                "the enroll token was already used",
            ));
        }
        if now > p.expires {
            return Err(ApiError::new(
                ErrorCode::UnknownPairing,
                format!("pairing {id} expired"),
            ));
        }
        let rec = Record::PairingClaimed {
            pairing_id: id.to_owned(),
            device_id: device_id.clone(),
            secret: secret.clone(),
            name: r.name,
        };
        enqueue_apply(app, st, rec)?
    };
    durable.wait().await?;
    json(
        StatusCode::CREATED,
        &ClaimResponse {
            device_id,
            device_secret: secret,
        },
    )
}

pub(super) async fn pairing_approve(app: &App, req: Request<Incoming>, id: &str) -> ApiResult {
    let (device, _, body) = auth_with_body(app, req, limits::MAX_JSON_BODY, false).await?;
    let r: ApproveRequest = parse_json(&body)?;
    if base64::engine::general_purpose::STANDARD
        .decode(&r.envelope)
        .is_err()
    {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            "envelope is not base64",
        ));
    }
    if !is_hex_lower(&r.nonce.to_ascii_lowercase(), 24) {
        return Err(ApiError::new(ErrorCode::BadRequest, "nonce is not 24 hex"));
    }
    let durable = {
        let st = app.lock_state();
        let p = st
            .pairings
            .get(id)
            .ok_or_else(|| ApiError::new(ErrorCode::UnknownPairing, format!("no pairing {id}")))?;
        if p.creator != device {
            return Err(ApiError::new(
                ErrorCode::NotPairingCreator,
                "only the device that created the pairing approves it",
            ));
        }
        if p.claimant.is_none() {
            return Err(ApiError::new(
                ErrorCode::BadRequest,
                "the pairing has not been claimed yet",
            ));
        }
        if p.approved.is_some() {
            return status_only(StatusCode::NO_CONTENT);
        }
        let rec = Record::PairingApproved {
            pairing_id: id.to_owned(),
            envelope: r.envelope,
            nonce: r.nonce,
        };
        enqueue_apply(app, st, rec)?
    };
    durable.wait().await?;
    status_only(StatusCode::NO_CONTENT)
}

pub(super) async fn pairing_envelope(app: &App, req: Request<Incoming>, id: &str) -> ApiResult {
    let (device, _, _) = auth_with_body(app, req, limits::MAX_JSON_BODY, true).await?;
    let (durable, envelope, nonce) = {
        let st = app.lock_state();
        let p = st
            .pairings
            .get(id)
            .filter(|p| p.claimant.as_deref() == Some(device.as_str()))
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::UnknownPairing,
                    format!("no pairing {id} claimed by this device"),
                )
            })?;
        let Some((envelope, nonce)) = p.approved.clone() else {
            return Err(ApiError::new(ErrorCode::NotApproved, "not approved yet"));
        };
        if p.envelope_consumed {
            return Err(ApiError::new(
                ErrorCode::EnvelopeConsumed,
                "the envelope was already fetched",
            ));
        }
        let rec = Record::EnvelopeConsumed {
            pairing_id: id.to_owned(),
        };
        (enqueue_apply(app, st, rec)?, envelope, nonce)
    };
    durable.wait().await?;
    json(StatusCode::OK, &EnvelopeResponse { envelope, nonce })
}
