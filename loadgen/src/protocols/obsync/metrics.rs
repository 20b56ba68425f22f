//! Scraping the target's Prometheus `/metrics` into `name{labels} -> value`.

use std::collections::BTreeMap;

use protocol::Route;

use crate::error::LoadError;
use crate::protocols::obsync::client::{Device, Outgoing, nonce_rng};
use crate::stats::Recorder;
use crate::target::Target;

/// Parses Prometheus text exposition: one `name{label="v",...} value [timestamp]` per line;
/// comments and blank lines skipped. The key is the series exactly as written (name plus
/// its label block). Lines that do not parse are errors naming the line number.
pub fn parse_metrics_text(text: &str) -> Result<BTreeMap<String, f64>, String> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // The value follows the label block (which may contain spaces inside quotes).
        let split_at = match line.rfind('}') {
            Some(close) => close + 1,
            None => line.find(char::is_whitespace).unwrap_or(line.len()),
        };
        let (key, rest) = line.split_at(split_at);
        let value = rest
            .split_whitespace()
            .next()
            .ok_or_else(|| format!("line {}: no value", i + 1))?;
        let v = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            v => v
                .parse::<f64>()
                .map_err(|_| format!("line {}: bad value {v:?}", i + 1))?,
        };
        out.insert(key.trim().to_owned(), v);
    }
    Ok(out)
}

/// `GET /metrics` (unauthenticated) and parse it.
pub async fn scrape_metrics(target: &Target) -> Result<BTreeMap<String, f64>, LoadError> {
    let d = Device::new(
        target.clone(),
        protocol::sign::DeviceCredentials {
            device_id: "0".repeat(32),
            secret: [0; 32],
        },
        0,
        String::new(),
        nonce_rng(0, 0, 0),
    );
    let rec = Recorder::new(false);
    let a = d
        .call(
            &rec,
            Outgoing::new(Route::Metrics, "/metrics").unsigned(),
            &[200],
        )
        .await?;
    let text = std::str::from_utf8(&a.body).map_err(|_| LoadError::BadAnswer {
        route: Route::Metrics.label().into(),
        detail: "not UTF-8".into(),
    })?;
    parse_metrics_text(text).map_err(|detail| LoadError::BadAnswer {
        route: Route::Metrics.label().into(),
        detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prometheus_text() {
        let text = "# HELP obsync_requests_total Requests.\n# TYPE obsync_requests_total counter\n\
            obsync_requests_total{route=\"put_chunk\",status=\"201\"} 12\n\
            obsync_head_seq 7 1700000000000\n\nobsync_x{a=\"b c\"} +Inf\n";
        let m = parse_metrics_text(text).unwrap();
        assert_eq!(
            m["obsync_requests_total{route=\"put_chunk\",status=\"201\"}"],
            12.0
        );
        assert_eq!(m["obsync_head_seq"], 7.0);
        assert!(m["obsync_x{a=\"b c\"}"].is_infinite());
        assert!(
            parse_metrics_text("x{a=\"b\"} abc")
                .unwrap_err()
                .contains("line 1")
        );
    }
}
