//! A bound on how many JSON values a target's answer may hold, checked before the answer is
//! parsed into its typed form.
//!
//! The byte cap on an answer (32 MiB for the signed protocol) does not bound the memory its parse takes:
//! `["","",…]` is 3 bytes per element on the wire and a 24-byte `String` per element in a
//! `Vec<String>`, more while the vector doubles, so a 32 MiB feed page of empty version ids
//! would take several hundred MiB. A first pass counts the values (every array element,
//! object member and scalar) with serde_json's own lexer, allocating nothing but its recursion
//! (which serde_json stops at 128 levels), and refuses an answer over [`MAX_JSON_VALUES`].
//! The typed parse then allocates at most a small multiple of the body.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::cell::Cell;

/// The most values one answer may hold: 1,048,576. The largest honest answer is a feed page of
/// files with many chunks: 32 MiB of 64-hex chunk ids is about 500,000 values, and a full page
/// of 1,000 changes without chunks about 20,000. At 24 bytes of `String` or number per value
/// the parsed form stays within about 25 MiB beyond the bytes it holds.
pub const MAX_JSON_VALUES: u64 = 1 << 20;

/// Counts the values of `body` up to `max`: `Ok(count)`, or `Err` with a one-line reason when
/// there are more, or when the body is not JSON (the typed parse would say why at length; this
/// says it in a line).
pub fn check(body: &[u8], max: u64) -> Result<u64, String> {
    let left = Cell::new(max);
    let mut de = serde_json::Deserializer::from_slice(body);
    let walked =
        DeserializeSeed::deserialize(Counter { left: &left }, &mut de).and_then(|()| de.end());
    match walked {
        Ok(()) => Ok(max - left.get()),
        Err(e) if left.get() == 0 && e.to_string().starts_with(OVER) => {
            Err(format!("the answer holds more than {max} JSON values"))
        }
        Err(e) => Err(e.to_string()),
    }
}

const OVER: &str = "over the value budget";

/// Walks one value, taking one from `left` per value it meets.
#[derive(Clone, Copy)]
struct Counter<'a> {
    left: &'a Cell<u64>,
}

impl Counter<'_> {
    fn take<E: serde::de::Error>(&self) -> Result<(), E> {
        match self.left.get() {
            0 => Err(E::custom(OVER)),
            n => {
                self.left.set(n - 1);
                Ok(())
            }
        }
    }
}

impl<'de> DeserializeSeed<'de> for Counter<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Counter<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.take()
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.take()
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.take()
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.take()
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.take()
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.take()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.take()?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.take()?;
        // A member's key costs what its value does: the typed parse keeps neither for an
        // unknown member, but a `BTreeMap` member keeps both.
        while map.next_key::<IgnoredAny>()?.is_some() {
            self.take()?;
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_every_value_and_member() {
        assert_eq!(check(b"1", 10), Ok(1));
        assert_eq!(check(b"[]", 10), Ok(1));
        assert_eq!(check(br#"["a","b"]"#, 10), Ok(3));
        // The object, two keys, two values, the inner array and its element.
        assert_eq!(check(br#"{"a":1,"b":[null]}"#, 10), Ok(6));
        assert_eq!(check(br#"{"a":1,"b":[null]}"#, 6), Ok(6));
    }

    #[test]
    fn an_answer_over_the_budget_is_refused_in_one_line() {
        let many = format!("[{}\"\"]", "\"\",".repeat(99));
        assert_eq!(check(many.as_bytes(), 101), Ok(101));
        assert_eq!(
            check(many.as_bytes(), 100),
            Err("the answer holds more than 100 JSON values".to_owned())
        );
        // Not JSON: serde_json's own reason, one line.
        let e = check(b"{\"a\":", 10).unwrap_err();
        assert!(e.contains("EOF") && !e.contains('\n'), "{e}");
        // Deep nesting stops at serde_json's recursion limit, without a stack overflow.
        let deep = "[".repeat(100_000);
        let e = check(deep.as_bytes(), u64::MAX).unwrap_err();
        assert!(e.contains("recursion limit"), "{e}");
    }

    #[test]
    fn an_honest_feed_page_is_far_inside_the_budget() {
        // 1,000 changes of 14 members each, every one with a parent and a head.
        let change = r#"{"seq":1,"file_id":"f","domain_id":"d","version_id":"v","parents":["p"],"sids":[],"bytes":0,"manifest_ct":"","manifest_nonce":"","device_id":"","ts":0,"deleted":false,"heads":["v"],"conflicted":false}"#;
        let page = format!(
            r#"{{"seq":1000,"head_seq":1000,"changes":[{}]}}"#,
            vec![change; 1000].join(",")
        );
        let n = check(page.as_bytes(), MAX_JSON_VALUES).unwrap();
        assert!(n < 40_000, "{n}");
    }
}
