//! Locust's master–worker messages: one msgpack array `[type, data, node_id]` per ZeroMQ
//! message (Locust's `locust/rpc/protocol.py`, `Message.serialize`: `msgpack.dumps((type,
//! data, node_id))`; the master reads with `strict_map_key=False`, so integer map keys are
//! fine). Decoding what a master sends is bounded and total: any byte string gives a message
//! or a one-line error, never a panic.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;

/// Largest message read from a master. A `spawn` carries the master's parsed options (a few
/// KiB); a megabyte is far above any real one.
pub const MAX_MESSAGE_BYTES: usize = 1024 * 1024;
/// Most users a master may ask one worker for: each is a request in flight with a connection
/// of its own, and a 2-core generator runs out of CPU long before (the measured limit is in
/// the book).
pub const MAX_USERS: u64 = 100_000;
/// Deepest msgpack nesting read (rmp-serde's own default is 1024; a real message nests 4).
const MAX_DEPTH: usize = 64;

/// A message from the master, as far as a worker acts on it.
#[derive(Debug, Clone, PartialEq)]
pub enum FromMaster {
    /// The answer to `client_ready`: the worker's index (masters before 2.10.3 send none).
    Ack { index: Option<u32> },
    /// Run this many users now (`user_classes_count` summed over the classes).
    Spawn {
        timestamp: f64,
        users: u64,
        user_classes_count: BTreeMap<String, u64>,
    },
    /// Stop the users and report ready again.
    Stop,
    /// Stop and exit.
    Quit,
    /// The master's answer to a heartbeat.
    Heartbeat,
    /// The master asks the worker to reset its connection.
    Reconnect,
    /// Any other type (`spawning_complete`, `update_user_class`, custom messages): ignored.
    Other(String),
}

/// Why a master's message could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    #[error("a {len}-byte message, over the {MAX_MESSAGE_BYTES}-byte cap")]
    TooLarge { len: usize },
    #[error("not a msgpack [type, data, node_id] array: {0}")]
    NotMessage(String),
    #[error("a {kind:?} message with malformed data: {detail}")]
    BadData { kind: String, detail: String },
    #[error("a spawn message asks for {users} users, more than {MAX_USERS}")]
    TooManyUsers { users: String },
}

#[derive(Deserialize)]
struct Head(String, IgnoredAny, IgnoredAny);

#[derive(Deserialize)]
struct Body<T>(IgnoredAny, T, IgnoredAny);

#[derive(Deserialize)]
struct AckData {
    index: Option<i64>,
}

#[derive(Deserialize)]
struct SpawnData {
    timestamp: f64,
    user_classes_count: BTreeMap<String, i64>,
}

fn from_slice<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, rmp_serde::decode::Error> {
    let mut de = rmp_serde::Deserializer::from_read_ref(bytes);
    de.set_max_depth(MAX_DEPTH);
    T::deserialize(&mut de)
}

/// Reads one message from the master.
pub fn decode(bytes: &[u8]) -> Result<FromMaster, MessageError> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(MessageError::TooLarge { len: bytes.len() });
    }
    let head: Head = from_slice(bytes).map_err(|e| MessageError::NotMessage(one_line(&e)))?;
    let kind = head.0;
    let bad = |e: rmp_serde::decode::Error| MessageError::BadData {
        kind: kind.clone(),
        detail: one_line(&e),
    };
    Ok(match kind.as_str() {
        "ack" => {
            let b: Body<Option<AckData>> = from_slice(bytes).map_err(bad)?;
            let index = match b.1.and_then(|d| d.index) {
                None => None,
                Some(i) => Some(u32::try_from(i).map_err(|_| MessageError::BadData {
                    kind: kind.clone(),
                    detail: format!("worker index {i} is not 0 to {}", u32::MAX),
                })?),
            };
            FromMaster::Ack { index }
        }
        "spawn" => {
            let b: Body<SpawnData> = from_slice(bytes).map_err(bad)?;
            let d = b.1;
            if !d.timestamp.is_finite() {
                return Err(MessageError::BadData {
                    kind,
                    detail: format!("timestamp {} is not a number", d.timestamp),
                });
            }
            let mut users: u64 = 0;
            let mut counts = BTreeMap::new();
            for (class, n) in d.user_classes_count {
                let n = u64::try_from(n).map_err(|_| MessageError::BadData {
                    kind: kind.clone(),
                    detail: format!("user class {class:?} has {n} users"),
                })?;
                users = users
                    .checked_add(n)
                    .filter(|&u| u <= MAX_USERS)
                    .ok_or_else(|| MessageError::TooManyUsers {
                        users: format!("at least {}", users.saturating_add(n)),
                    })?;
                counts.insert(class, n);
            }
            FromMaster::Spawn {
                timestamp: d.timestamp,
                users,
                user_classes_count: counts,
            }
        }
        "stop" => FromMaster::Stop,
        "quit" => FromMaster::Quit,
        "heartbeat" => FromMaster::Heartbeat,
        "reconnect" => FromMaster::Reconnect,
        _ => FromMaster::Other(kind.chars().take(64).collect()),
    })
}

/// An error's text on one line (rmp-serde's messages may quote input).
fn one_line(e: &dyn std::fmt::Display) -> String {
    let s = e.to_string();
    let s: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    s
}

/// Encodes a message to the master: `[type, data, node_id]`, maps with their field names.
pub fn encode<T: serde::Serialize>(kind: &str, data: &T, node_id: &str) -> Vec<u8> {
    // Serialising plain data (strings, numbers, maps with string or integer keys) into a
    // Vec cannot fail.
    rmp_serde::to_vec_named(&(kind, data, node_id)).expect("plain data serialises to msgpack")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize)]
    struct Spawn<'a> {
        timestamp: f64,
        user_classes_count: BTreeMap<&'a str, i64>,
        host: &'a str,
        stop_timeout: Option<f64>,
        parsed_options: BTreeMap<&'a str, Vec<u8>>,
    }

    #[test]
    fn reads_what_a_master_sends() {
        let ack = encode("ack", &BTreeMap::from([("index", 2)]), "w");
        assert_eq!(decode(&ack), Ok(FromMaster::Ack { index: Some(2) }));
        let old_ack = encode("ack", &None::<()>, "w");
        assert_eq!(decode(&old_ack), Ok(FromMaster::Ack { index: None }));
        let spawn = encode(
            "spawn",
            &Spawn {
                timestamp: 1.5,
                user_classes_count: BTreeMap::from([("A", 2), ("B", 3)]),
                host: "",
                stop_timeout: None,
                parsed_options: BTreeMap::from([("x", vec![1, 2])]),
            },
            "w",
        );
        let FromMaster::Spawn { users, .. } = decode(&spawn).unwrap() else {
            panic!("not a spawn");
        };
        assert_eq!(users, 5);
        for (k, want) in [
            ("quit", FromMaster::Quit),
            ("stop", FromMaster::Stop),
            ("heartbeat", FromMaster::Heartbeat),
            ("reconnect", FromMaster::Reconnect),
            (
                "update_user_class",
                FromMaster::Other("update_user_class".into()),
            ),
        ] {
            assert_eq!(decode(&encode(k, &None::<()>, "w")), Ok(want));
        }
    }

    #[test]
    fn refuses_hostile_messages_in_one_line() {
        let many = encode(
            "spawn",
            &Spawn {
                timestamp: 1.0,
                user_classes_count: BTreeMap::from([("A", i64::MAX), ("B", i64::MAX)]),
                host: "",
                stop_timeout: None,
                parsed_options: BTreeMap::new(),
            },
            "w",
        );
        assert!(matches!(
            decode(&many),
            Err(MessageError::TooManyUsers { .. })
        ));
        let neg = encode("ack", &BTreeMap::from([("index", -1)]), "w");
        assert!(matches!(decode(&neg), Err(MessageError::BadData { .. })));
        let wrong = encode("spawn", &"not a map", "w");
        let e = decode(&wrong).unwrap_err().to_string();
        assert!(
            e.starts_with("a \"spawn\" message with malformed data"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        for junk in [&b""[..], b"\x93", b"\xc1\xc1\xc1", &[0x91; 100_000]] {
            let e = decode(junk).unwrap_err().to_string();
            assert!(!e.contains('\n'), "{e}");
        }
        assert!(matches!(
            decode(&vec![0u8; MAX_MESSAGE_BYTES + 1]),
            Err(MessageError::TooLarge { .. })
        ));
    }
}
