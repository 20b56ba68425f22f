//! Captures real PROPFIND answers from the WebDAV presets for the parser's fixtures.
//!
//! `cargo run -p loadgen --example webdav_capture -- VAULT_DIR OUT_DIR [PRESET...]` starts
//! each preset (all three by default) in a temp dir with basic auth, uploads the vault
//! (MKCOL + PUT, one request at a time, every refusal noted instead of stopping) plus a few
//! names with URL- and XML-reserved characters, and writes under `OUT_DIR/<preset>/`:
//! - `<folder>.depth1.xml`: the raw body of a Depth 1 PROPFIND of each captured folder;
//! - `root.infinity.xml` or `root.infinity.refused.txt`: Depth infinity of the root, or the
//!   server's refusal (status line and body);
//! - `refused.txt`: every name the server did not store, with its answer ("none" if none);
//! - `server.txt`: the server's version line.
//!
//! Generate the vault with `vaultbench vault gen hazards --out VAULT_DIR`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use loadgen::Target;
use loadgen::http::{Request as DavRequest, method};
use loadgen::launch::TargetDef;
use loadgen::protocols::webdav::client::Depth;
use loadgen::protocols::webdav::{BasicAuth, DavClient, ServerCommand};
use loadgen::protocols::{preset, preset_names};

/// Names beside the hazards profile's that exercise href escaping: a literal `%`, a
/// literal `%20`, `#` and `?` (which would end the path if left unescaped), and the
/// characters XML must escape.
const EXTRA_FOLDER: &str = "vaultbench-extra";
const EXTRA_NAMES: &[&str] = &[
    "100% done.md",
    "a%20b literal.md",
    "hash # and ? mark.md",
    "amp & lt < gt > quote \" apos '.md",
    "plus+semi;colon:comma,eq=.md",
];

/// Folders whose Depth 1 listing is kept: the root, the hazards folders (NFC/NFD and case
/// pairs, emoji and spaces; the 255-byte name; an emoji folder name; non-Latin scripts)
/// and the extras.
const FOLDERS: &[(&str, &str)] = &[
    ("", "root"),
    ("Wiki", "wiki"),
    ("Clippings", "clippings"),
    ("\u{1f4da} Reading", "reading"),
    ("Metric", "metric"),
    (EXTRA_FOLDER, "extra"),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        return Err("usage: webdav_capture VAULT_DIR OUT_DIR [PRESET...]".into());
    }
    let (vault, out) = (PathBuf::from(&args[0]), PathBuf::from(&args[1]));
    let presets: Vec<TargetDef> = if args.len() > 2 {
        args[2..]
            .iter()
            .map(|a| preset(a).ok_or_else(|| format!("unknown preset {a:?}")))
            .collect::<Result<_, _>>()?
    } else {
        preset_names().into_iter().filter_map(preset).collect()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    for p in presets {
        let dir = out.join(&p.name);
        rt.block_on(capture(p, &vault, &dir))?;
    }
    Ok(())
}

async fn capture(
    mut preset: TargetDef,
    vault: &Path,
    out: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(out)?;
    let data = tempfile::tempdir()?;
    let auth = BasicAuth::new("vaultbench", "capture");
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    preset.auth = Some(auth.clone());
    let server = ServerCommand::prepare(&preset, data.path(), port)?.start()?;
    let version_argv = preset.version.clone().unwrap_or_default();
    let version = std::process::Command::new(&server.command.program)
        .args(version_argv.iter().skip(1))
        .output()?;
    let mut v = String::from_utf8_lossy(&version.stdout).into_owned();
    v.push_str(&String::from_utf8_lossy(&version.stderr));
    let first = v.lines().next().unwrap_or("").trim().to_owned();
    std::fs::write(out.join("server.txt"), format!("{first}\n"))?;
    eprintln!(
        "{}: {first}, ready in {:?}",
        preset.name, server.ready_after
    );

    let target = Target::parse(&format!("http://{port}"), false)?;
    let client = DavClient::new(target, Some(&auth));
    let rec = loadgen::protocols::webdav::client::Recorder::new(false);
    let mut refused = String::new();
    let (dirs, files) = tree(vault)?;
    let mut all_dirs = dirs;
    all_dirs.push(EXTRA_FOLDER.to_owned());
    all_dirs.sort();
    for d in &all_dirs {
        if let Err(e) = client.mkcol(&rec, d).await {
            writeln!(refused, "MKCOL {d:?}: {e}")?;
        }
    }
    let mut uploads: Vec<(String, Bytes)> = files
        .into_iter()
        .map(|(rel, abs)| std::fs::read(abs).map(|b| (rel, Bytes::from(b))))
        .collect::<Result<_, _>>()?;
    for n in EXTRA_NAMES {
        uploads.push((
            format!("{EXTRA_FOLDER}/{n}"),
            Bytes::from(format!("extra note {n}\n")),
        ));
    }
    for (rel, body) in uploads {
        if let Err(e) = client.put(&rec, &rel, body).await {
            writeln!(refused, "PUT {rel:?}: {e}")?;
        }
    }
    if refused.is_empty() {
        refused.push_str("none\n");
    }
    std::fs::write(out.join("refused.txt"), &refused)?;

    for (rel, name) in FOLDERS {
        let (status, body) = propfind(&client, &rec, rel, Depth::One).await?;
        if status != 207 {
            return Err(format!("{}: PROPFIND {rel:?} answered {status}", preset.name).into());
        }
        std::fs::write(out.join(format!("{name}.depth1.xml")), body)?;
    }
    let (status, body) = propfind(&client, &rec, "", Depth::Infinity).await?;
    if status == 207 {
        std::fs::write(out.join("root.infinity.xml"), body)?;
    } else {
        let mut text = format!("HTTP {status}\n");
        text.push_str(&String::from_utf8_lossy(&body));
        std::fs::write(out.join("root.infinity.refused.txt"), text)?;
    }
    let status = server.stop();
    eprintln!("{}: stopped ({status})", preset.name);
    if std::env::var_os("WEBDAV_CAPTURE_KEEP").is_some() {
        eprintln!(
            "{}: data dir kept at {}",
            preset.name,
            data.keep().display()
        );
    }
    Ok(())
}

async fn propfind(
    client: &DavClient,
    rec: &loadgen::protocols::webdav::client::Recorder,
    rel: &str,
    depth: Depth,
) -> Result<(u16, Bytes), Box<dyn std::error::Error>> {
    let href = DavClient::href(rel, true);
    let mut req = DavRequest::new(depth.route(), method("PROPFIND"), &href);
    req.headers.push(("accept", "text/plain".to_owned()));
    req.headers.push(("depth", depth.header().to_owned()));
    let a = client.send(rec, &req).await?;
    Ok((a.status, a.body))
}

/// Folders and files under `dir` as sorted vault paths.
#[allow(clippy::type_complexity)]
fn tree(dir: &Path) -> std::io::Result<(Vec<String>, Vec<(String, PathBuf)>)> {
    let (mut dirs, mut files) = (Vec::new(), Vec::new());
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((abs, rel)) = stack.pop() {
        for ent in std::fs::read_dir(&abs)? {
            let ent = ent?;
            let name = ent
                .file_name()
                .into_string()
                .map_err(|n| std::io::Error::other(format!("non-UTF-8 name {n:?}")))?;
            let r = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if ent.file_type()?.is_dir() {
                dirs.push(r.clone());
                stack.push((ent.path(), r));
            } else {
                files.push((r, ent.path()));
            }
        }
    }
    dirs.sort();
    files.sort();
    Ok((dirs, files))
}
