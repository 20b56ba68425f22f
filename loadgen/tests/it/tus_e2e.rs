//! The tus client against a real `@tus/server` with `@tus/file-store` (npm, `npm ci --prefix
//! tools/tus`, which `.ci/run` runs): a small vault with awkward names, an empty file and a
//! file larger than one chunk is imported, then read back byte-identical with its metadata;
//! an upload is terminated and then gone.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use loadgen::Target;
use loadgen::protocols::tus::client::Recorder;
use loadgen::protocols::tus::{ImportOpts, TusClient, TusRoute, import_vault, read_back};

/// The launcher `npm ci --prefix tools/tus` installs.
fn launcher() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/tus/node_modules/.bin/vaultbench-tus-node")
}

/// The server, killed and reaped when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the launcher on 127.0.0.1, port 0, with its data under `data`; reads the port it
/// bound from its first line (within 30 s: the thread reading it is dropped with the child).
fn start(data: &Path) -> Server {
    let l = launcher();
    assert!(
        l.is_file(),
        "{} is missing: run `npm ci --prefix tools/tus`",
        l.display()
    );
    let mut child = Command::new(&l)
        .args(["127.0.0.1", "0"])
        .arg(data)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(err).read_line(&mut line);
        let _ = tx.send(line);
    });
    let mut server = Server { child, port: 0 };
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the launcher names its port within 30 s");
    server.port = line
        .split(':')
        .nth(2)
        .and_then(|p| p.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    server
}

/// A small vault: awkward names, nested folders, an empty file and one of 2.5 chunks.
fn vault(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let big: Vec<u8> = (0..(2 * 65536 + 32768))
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    let files = vec![
        ("Wiki/Café crème.md".to_owned(), b"# Caf\xc3\xa9\n".to_vec()),
        ("a b/c+d/%20.md".to_owned(), b"percent".to_vec()),
        ("empty.md".to_owned(), Vec::new()),
        ("assets/big.bin".to_owned(), big),
    ];
    for (rel, body) in &files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    files
}

#[test]
#[ignore = "slow: real servers (@tus/server from tools/tus)"]
fn a_vault_imports_into_tus_node_and_reads_back_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let files = vault(&tmp.path().join("vault"));
    let server = start(&tmp.path().join("data"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let target = Target::parse(&format!("http://127.0.0.1:{}", server.port), false).unwrap();
        let mut client = TusClient::new(target, None, "/files/").with_chunk(65536);
        let rec = Recorder::new(false);
        let caps = client.discover(&rec).await.unwrap().clone();
        assert!(
            caps.has("creation-with-upload") && caps.has("termination"),
            "{caps:?}"
        );
        assert!(!caps.sha1(), "@tus/file-store has no checksum extension");
        let opts = ImportOpts {
            in_flight: 2,
            checkpoint_every: 2,
        };
        let (r, imported) = import_vault(&client, &tmp.path().join("vault"), opts)
            .await
            .unwrap();
        assert_eq!(r.files, 4);
        assert_eq!(imported.uploads.len(), 4);
        assert_eq!(imported.resumes, 0);
        // One creation-with-upload per file, plus two PATCHes for the 2.5-chunk file.
        assert_eq!(r.requests, 6, "{:?}", r.routes.keys());
        assert_eq!(r.routes[TusRoute::CreateWithUpload.name()].requests, 4);
        assert_eq!(r.routes[TusRoute::Patch.name()].requests, 2);
        assert_eq!(r.checkpoints.len(), 2);
        let out = tmp.path().join("back");
        let back = read_back(&client, &imported, &out).await.unwrap();
        assert_eq!(back.files, 4);
        for (rel, body) in &files {
            assert_eq!(&std::fs::read(out.join(rel)).unwrap(), body, "{rel}");
        }
        // Termination: the upload is gone afterwards.
        let url = imported.uploads["empty.md"].url.clone();
        client.terminate(&rec, &url).await.unwrap();
        let e = client.head(&rec, &url).await.unwrap_err().to_string();
        assert!(e.contains("404") || e.contains("410"), "{e}");
    });
    drop(server);
}

/// Resume under cuts: 20 uploads whose first `PATCH` body the seeded hop cuts mid-way all
/// resume (`HEAD`, then `PATCH` from the server's offset) to byte-identical uploads; the
/// bytes sent again are those the cuts kept from the server.
#[test]
#[ignore = "slow: real servers (@tus/server from tools/tus)"]
fn twenty_cut_uploads_resume_byte_identical() {
    use loadgen::protocols::tus::cut::CutHop;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vault");
    let mut files = Vec::new();
    for i in 0..20u32 {
        let body: Vec<u8> = (0..(8192 + i * 977))
            .map(|j| ((j * 31 + i) % 253) as u8)
            .collect();
        let rel = format!("Notes/n{i:02}.md");
        std::fs::create_dir_all(dir.join("Notes")).unwrap();
        std::fs::write(dir.join(&rel), &body).unwrap();
        files.push((rel, body));
    }
    let server = start(&tmp.path().join("data"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let direct: std::net::SocketAddr = format!("127.0.0.1:{}", server.port).parse().unwrap();
        let hop = CutHop::start(direct, 0x5eed, 20).await.unwrap();
        let via = Target::parse(&format!("http://{}", hop.addr()), false).unwrap();
        let mut client = TusClient::new(via, None, "/files/").without_creation_with_upload();
        let rec = Recorder::new(false);
        client.discover(&rec).await.unwrap();
        let opts = ImportOpts {
            in_flight: 1,
            checkpoint_every: 10,
        };
        let (_, imported) = import_vault(&client, &dir, opts).await.unwrap();
        assert_eq!(hop.cut(), 20);
        assert_eq!(imported.resumed_uploads, 20);
        assert_eq!(imported.resumes, 20);
        // What the cuts kept from the server is sent again; a server that dropped part of what
        // reached it before the cut makes it more.
        assert!(
            imported.resent_bytes >= hop.bytes_cut(),
            "{} < {}",
            imported.resent_bytes,
            hop.bytes_cut()
        );
        assert!(imported.resent_bytes > 0);
        eprintln!(
            "cut uploads {}, resumed {}, bytes the cuts kept from the server {}, bytes re-sent {}",
            hop.cut(),
            imported.resumed_uploads,
            hop.bytes_cut(),
            imported.resent_bytes
        );
        // Read back directly, not through the hop.
        let target = Target::parse(&format!("http://{direct}"), false).unwrap();
        let mut reader = TusClient::new(target, None, "/files/");
        reader.discover(&rec).await.unwrap();
        let out = tmp.path().join("back");
        read_back(&reader, &imported, &out).await.unwrap();
        for (rel, body) in &files {
            assert_eq!(&std::fs::read(out.join(rel)).unwrap(), body, "{rel}");
        }
    });
    drop(server);
}
