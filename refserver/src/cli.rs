//! `serve-ref` / `obsync-refserver`: parse the flags, start the server, print the address on
//! the first stdout line, and stop gracefully on SIGTERM or SIGINT.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;

use crate::config::ServerConfig;
use crate::server::Server;

/// Largest `--inject-delay-us`: one second per version post is already far beyond any
/// sensitivity test, and keeps a typo from wedging the server.
const MAX_INJECT_DELAY_US: u64 = 1_000_000;
/// Largest `--inject-work`: a kernel iteration is about ten instructions, so 100 million is
/// about a second of CPU per version post natively, far past any sensitivity test.
const MAX_INJECT_WORK: u64 = 100_000_000;

/// Largest `--unsafe-ack-before-write-ms`: a crash test needs a window of tens of
/// milliseconds; ten seconds keeps a typo from holding records for minutes.
const MAX_UNSAFE_ACK_MS: u64 = 10_000;

/// Run the reference obsync-v1 server.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port (printed on the first stdout line).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Data directory (created if missing): journal, nonce log, chunks, setup token.
    #[arg(long, required_unless_present = "version")]
    pub data: Option<PathBuf>,
    /// Share one fsync among concurrent journal (and nonce) records.
    #[arg(long)]
    pub group_commit: bool,
    /// Busy-wait this many microseconds in every request of `--inject-delay-route` (A/B
    /// sensitivity tests).
    #[arg(long, hide = true, default_value_t = 0)]
    pub inject_delay_us: u64,
    /// The route `--inject-delay-us` slows, by its label in the metric keys (`post-version`,
    /// `put-chunk`, `get-chunk`, `chunks-exists`, `chunks-get`, `changes`, ...).
    #[arg(long, hide = true, value_name = "ROUTE", default_value = "post-version", value_parser = route_label)]
    pub inject_delay_route: protocol::Route,
    /// Run this many iterations of a fixed hash kernel in every version post: deterministic
    /// work, the same instructions in every run (A/B tests of the instruction-count channel).
    #[arg(long, hide = true, default_value_t = 0)]
    pub inject_work: u64,
    /// A server made quadratic, for growth tests: on every version post, re-read every
    /// stored version (its chunks from disk) and write one line per version re-read on
    /// stdout (`reindex version=<id> file=<id>`), as a notes plugin that re-indexes the whole
    /// vault on every change does.
    #[arg(long, hide = true)]
    pub inject_reindex: bool,
    /// A deliberately broken build, for crash tests only: acknowledge every journal record
    /// at once and write it (with its fsync) this many milliseconds later. A crash in that
    /// window loses acknowledged versions; `vaultbench`'s crash phase must catch it.
    #[arg(long, hide = true, default_value_t = 0)]
    pub unsafe_ack_before_write_ms: u64,
    /// Allow listening on a non-loopback address.
    #[arg(long)]
    pub allow_remote: bool,
    // A flag of its own (not clap's automatic one) so that `vaultbench serve-ref --version`
    // answers too: the harness records it as the embedded target's build identity.
    /// Print the version (`vaultbench reference server <version>`) and exit.
    #[arg(long)]
    pub version: bool,
}

/// A route by its label in the metric keys (`post-version`).
fn route_label(s: &str) -> Result<protocol::Route, String> {
    protocol::Route::ALL
        .into_iter()
        .find(|r| r.label() == s)
        .ok_or_else(|| {
            let known: Vec<&str> = protocol::Route::ALL.iter().map(|r| r.label()).collect();
            format!("unknown route {s:?} (one of {})", known.join(", "))
        })
}

/// What `--version` prints.
pub fn version_line() -> String {
    // Named as the user knows it: vaultbench's own reference server (also built as the
    // standalone `obsync-refserver` binary), speaking obsync v1.
    format!(
        "vaultbench reference server {} (obsync-v1; `vaultbench serve-ref`, standalone `obsync-refserver`)",
        env!("CARGO_PKG_VERSION")
    )
}

impl ServeArgs {
    /// Validates the flags into a server configuration.
    pub fn config(&self) -> anyhow::Result<ServerConfig> {
        if self.inject_delay_us > MAX_INJECT_DELAY_US {
            anyhow::bail!(
                "--inject-delay-us {} is over the maximum {MAX_INJECT_DELAY_US}",
                self.inject_delay_us
            );
        }
        if self.inject_work > MAX_INJECT_WORK {
            anyhow::bail!(
                "--inject-work {} is over the maximum {MAX_INJECT_WORK}",
                self.inject_work
            );
        }
        let Some(data) = &self.data else {
            anyhow::bail!("--data DIR is required");
        };
        let mut cfg = ServerConfig::new(data);
        cfg.listen = self.listen;
        cfg.group_commit = self.group_commit;
        cfg.inject_delay_us = self.inject_delay_us;
        cfg.inject_delay_route = self.inject_delay_route;
        cfg.inject_work = self.inject_work;
        cfg.inject_reindex = self.inject_reindex;
        cfg.allow_remote = self.allow_remote;
        if self.unsafe_ack_before_write_ms > 0 {
            if self.unsafe_ack_before_write_ms > MAX_UNSAFE_ACK_MS {
                anyhow::bail!(
                    "--unsafe-ack-before-write-ms {} is over the maximum {MAX_UNSAFE_ACK_MS}",
                    self.unsafe_ack_before_write_ms
                );
            }
            cfg.unsafe_lazy_journal = Some(std::time::Duration::from_millis(
                self.unsafe_ack_before_write_ms,
            ));
        }
        Ok(cfg)
    }
}

/// Serves until SIGTERM or SIGINT; returns `contract::exit::OK` after a graceful stop.
pub fn run(args: ServeArgs) -> anyhow::Result<i32> {
    if args.version {
        println!("{}", version_line());
        return Ok(contract::exit::OK);
    }
    let cfg = args.config()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name(crate::threads::WORKER_THREAD)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    rt.block_on(async move {
        use tokio::signal::unix::{SignalKind, signal};
        // Install the handlers before announcing the address, so a supervisor that signals
        // right after reading the line is never met by the default (abrupt) action.
        let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
        let server = Server::bind(cfg).await?;
        {
            let mut out = std::io::stdout().lock();
            writeln!(out, "listening on http://{}", server.local_addr())
                .and_then(|()| out.flush())
                .context("writing the listening line to stdout")?;
        }
        let data = args.data.as_deref().unwrap_or(std::path::Path::new("?"));
        eprintln!(
            "obsync-refserver: serving {} (data {})",
            server.local_addr(),
            data.display()
        );
        // A client pairs its first device with this token (`vaultbench load --setup-token-file`).
        eprintln!(
            "obsync-refserver: setup token in {}",
            data.join(crate::app::SETUP_TOKEN_FILE).display()
        );
        server
            .serve(async move {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            })
            .await;
        eprintln!("obsync-refserver: stopped");
        Ok(contract::exit::OK)
    })
}
