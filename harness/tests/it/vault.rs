//! `vaultbench vault` CLI tests.
