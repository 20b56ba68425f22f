//! What every protocol's client reads off an answer the same way: its declared length (to
//! refuse a body over the cap before reading it) and a transport error on one line.

/// The `Content-Length` an answer declares, when it declares one that parses.
pub(crate) fn declared_length(headers: &hyper::HeaderMap) -> Option<u64> {
    headers
        .get(hyper::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// An error and its sources on one line ("client error (Connect): Connection refused").
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        cur = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_declared_length_is_read_only_when_it_is_a_number() {
        let mut h = hyper::HeaderMap::new();
        assert_eq!(super::declared_length(&h), None);
        h.insert(hyper::header::CONTENT_LENGTH, " 42 ".parse().unwrap());
        assert_eq!(super::declared_length(&h), Some(42));
        h.insert(hyper::header::CONTENT_LENGTH, "1e18".parse().unwrap());
        assert_eq!(super::declared_length(&h), None);
    }
}
