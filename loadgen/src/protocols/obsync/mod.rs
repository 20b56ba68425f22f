//! The signed obsync wire protocol v1 (`docs/src/protocol/obsync-v1.md`): enrolled devices that
//! sign every request (`client`, `enroll`; a load run's devices from its state file: [`devices`]), whole-vault operations (`sync`), the route
//! load over its routes (`route`), the server's own counters (`metrics`), crash points
//! inside a request body (`midbody`), and what only a signed protocol with a long-poll feed
//! has: many held devices ([`fanout`]), the generator as a Locust worker ([`locust`]) and the
//! comparison with wrk ([`mod@bench`]).

pub mod bench;
pub(crate) mod client;
pub mod devices;
pub(crate) mod enroll;
pub mod fanout;
pub mod faulthop;
pub mod held;
#[doc(hidden)]
pub mod internals;
pub mod locust;
pub(crate) mod metrics;
pub(crate) mod midbody;
pub(crate) mod route;
pub(crate) mod sync;

use crate::launch::{Ready, StatusMatch, TargetDef};

/// What the rest of the generator and the harness's registry know of this protocol.
pub const SPEC: crate::protocols::spec::Spec = crate::protocols::spec::Spec {
    name: contract::protocol::DEFAULT_NAME,
    aliases: &["obsync"],
    about: "the signed obsync wire protocol v1 (the reference server's)",
    ready,
    feed: Some(crate::feed::FeedBounds::DEFAULT),
    routes: || route::Route::ALL.iter().map(|r| r.name()).collect(),
    presets: &[],
    database: None,
    former_keys: &[],
};

/// The protocol's readiness route.
fn ready(_: &TargetDef) -> Ready {
    Ready::Http {
        method: "GET".into(),
        path: "/readyz".into(),
        status: StatusMatch::Code(200),
    }
}
