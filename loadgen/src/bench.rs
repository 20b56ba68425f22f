//! `vaultbench load bench-peer`: vaultbench against wrk on the same endpoint (placeholder).
