//! A crash point inside a request body: a [`MidBodyTrap`] armed on a device catches one large
//! chunk upload, sends its head and a seeded number of its body bytes on a connection of its
//! own, and then holds the rest back until released. Whoever armed it (the crash phase) sees
//! the trap held, kills the target, and releases it: the target died with the body half
//! received, and the client never got an answer.
//!
//! The trapped request bypasses the device's pooled client because the pool's body type sends
//! a body whole; here every byte written is counted when the kernel accepted it, so "bytes
//! sent" at the kill is exact.

use std::sync::Mutex;

use crate::lock::lock;

/// Where a trap is: waiting for its request, holding one, or done with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrapState {
    /// Armed: `skip` more large bodies go through untouched before one is caught.
    Armed { skip: usize },
    /// Head and `sent` of `len` body bytes are written; the rest waits for a release.
    Held(MidBodyCut),
    /// The caught request ended (the connection closed, or it was released).
    Done(MidBodyCut),
}

/// One caught upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MidBodyCut {
    /// The request target (`/v1/chunks/<sid>`).
    pub path: String,
    /// Body bytes the kernel accepted before the hold.
    pub sent: u64,
    /// The body's full length (announced in `Content-Length`).
    pub len: u64,
    /// Whether any byte of an answer arrived (a target must not answer a body it has not read).
    pub answered: bool,
}

/// A one-shot crash point inside a chunk upload's body. Arm it with
/// `Device::arm_mid_body`; poll [`MidBodyTrap::state`] from the thread that kills the
/// target, then call [`MidBodyTrap::release`].
#[derive(Debug)]
pub struct MidBodyTrap {
    /// Bodies shorter than this pass untouched (the trap is for large uploads).
    min_body: usize,
    /// A 64-bit draw that picks the cut: `1 + draw * (len - 1) / 2^64`, in `1..len`.
    pub(crate) draw: u64,
    pub(crate) state: Mutex<TrapState>,
    pub(crate) release: tokio::sync::Notify,
}

impl MidBodyTrap {
    /// A trap that lets `skip` large bodies (at least `min_body` bytes, at least 2) through,
    /// then catches the next and cuts it after a number of bytes picked by `draw` (a seeded
    /// 64-bit value).
    pub fn new(skip: usize, min_body: usize, draw: u64) -> MidBodyTrap {
        MidBodyTrap {
            min_body: min_body.max(2),
            draw,
            state: Mutex::new(TrapState::Armed { skip }),
            release: tokio::sync::Notify::new(),
        }
    }

    /// Where the trap is now.
    pub fn state(&self) -> TrapState {
        lock(&self.state).clone()
    }

    /// Lets a held request end (it fails: the rest of its body is never sent).
    pub fn release(&self) {
        self.release.notify_one();
    }

    /// The body bytes sent before the hold for a body of `len` bytes: in `1..len`.
    pub fn cut_of(draw: u64, len: u64) -> u64 {
        1 + ((u128::from(draw) * u128::from(len.saturating_sub(1))) >> 64) as u64
    }

    /// Whether this request is the one to catch (and if so, the trap is taken).
    pub(crate) fn catches(&self, body_len: usize) -> bool {
        if body_len < self.min_body {
            return false;
        }
        let mut st = lock(&self.state);
        match &mut *st {
            TrapState::Armed { skip } if *skip > 0 => {
                *skip -= 1;
                false
            }
            TrapState::Armed { .. } => {
                *st = TrapState::Held(MidBodyCut {
                    path: String::new(),
                    sent: 0,
                    len: body_len as u64,
                    answered: false,
                });
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use crate::error::LoadError;
    use crate::protocols::obsync::client::Outgoing;
    use crate::stats::Recorder;

    #[test]
    fn cuts_fall_strictly_inside_the_body() {
        for draw in [0, 1, u64::MAX / 3, u64::MAX] {
            for len in [2u64, 3, 1 << 20] {
                let c = MidBodyTrap::cut_of(draw, len);
                assert!(c >= 1 && c < len, "draw {draw} len {len}: {c}");
            }
        }
        assert_eq!(
            MidBodyTrap::cut_of(u64::MAX / 2, 1 << 20),
            1 + ((1 << 20) - 1) / 2
        );
    }

    #[test]
    fn small_bodies_and_skipped_ones_pass() {
        let t = MidBodyTrap::new(1, 100, 0);
        assert!(!t.catches(99));
        assert!(!t.catches(100), "the first large body is skipped");
        assert!(t.catches(100));
        assert!(!t.catches(100), "one shot");
    }

    /// A target that reads the head and whatever body arrives, counting the body bytes, and
    /// dies (drops the socket) when told to: the proof that the trap cuts mid-body.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_target_receives_exactly_the_cut_and_no_answer_is_seen() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (die_tx, die_rx) = std::sync::mpsc::channel::<()>();
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            let mut all = Vec::new();
            let mut buf = [0u8; 65536];
            let until = Instant::now() + Duration::from_secs(20);
            while Instant::now() < until && die_rx.try_recv().is_err() {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => all.extend_from_slice(&buf[..n]),
                    Err(_) => {}
                }
            }
            let head_end = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            let head = String::from_utf8_lossy(&all[..head_end]).into_owned();
            s.flush().ok();
            (head, (all.len() - head_end) as u64)
        });
        let target = crate::Target::parse(&format!("http://{addr}"), false).unwrap();
        let dev = crate::protocols::obsync::client::tests::test_device(target);
        let body = vec![7u8; 300_000];
        let sid = protocol::sha256_hex(&body);
        let trap = Arc::new(MidBodyTrap::new(0, 1000, u64::MAX / 3));
        dev.arm_mid_body(trap.clone());
        let rec = Recorder::new(false);
        let pq = format!("/v1/chunks/{sid}");
        let req = Outgoing {
            body: bytes::Bytes::from(body.clone()),
            body_sha256: Some(&sid),
            content_type: Some("application/octet-stream"),
            ..Outgoing::new(protocol::Route::PutChunk, &pq)
        };
        let (d2, t2) = (dev.clone(), trap.clone());
        let killer = std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(20);
            while Instant::now() < until {
                if let TrapState::Held(c) = t2.state()
                    && c.sent > 0
                {
                    // Let the server read what is on the wire, then "kill" it.
                    std::thread::sleep(Duration::from_millis(300));
                    die_tx.send(()).unwrap();
                    t2.release();
                    return c;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(d2);
            panic!("the trap never held");
        });
        let e = dev.send(&rec, req).await.unwrap_err();
        let held = killer.join().unwrap();
        let (head, received) = server.join().unwrap();
        let want = MidBodyTrap::cut_of(u64::MAX / 3, body.len() as u64);
        assert_eq!(held.sent, want);
        assert_eq!(received, want, "the target got exactly the cut");
        assert!(received > 0 && received < body.len() as u64);
        assert!(head.contains("content-length: 300000"), "{head}");
        assert!(head.contains("x-obsync-sig: "), "{head}");
        assert!(matches!(e, LoadError::Transport { .. }), "{e:?}");
        match trap.state() {
            TrapState::Done(c) => {
                assert!(!c.answered);
                assert_eq!(c.path, pq);
                assert_eq!((c.sent, c.len), (want, 300_000));
            }
            s => panic!("{s:?}"),
        }
        assert_eq!(rec.snapshot().requests(), 1);
        // A second large body goes through the pool: the trap is one-shot.
        assert!(
            dev.trap_for(&Outgoing::new(protocol::Route::PutChunk, &pq))
                .is_none()
        );
    }
}
