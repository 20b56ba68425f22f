//! The names the server gives its threads, and the call that names one: in a file of their
//! own because the runtime builders (`server`, `cli`) and the log writers (`store::log`) name
//! threads, while the crate root re-exports them for the harness's per-thread CPU keys.

/// The name of the server's tokio worker (and blocking-pool) threads. Linux keeps 15 bytes of a
/// thread name (`TASK_COMM_LEN` is 16 with the NUL, see `prctl(2)` `PR_SET_NAME`): every name
/// the server gives fits, so per-thread CPU keys read `/proc` and get the name given here.
pub const WORKER_THREAD: &str = "refsrv-worker";
/// The names of the journal and nonce-log writer threads (each within the same 15 bytes).
pub const WRITER_THREADS: [&str; 2] = ["journal-writer", "nonce-writer"];
/// The main thread's name in the standalone `obsync-refserver` binary. Linux names a main
/// thread after the executable, and `obsync-refserver` is 16 bytes: it would show up cut to
/// `obsync-refserve`. (`vaultbench serve-ref` keeps its executable's name, `vaultbench`.)
pub const MAIN_THREAD: &str = "refsrv-main";

/// Names the calling thread (`prctl(PR_SET_NAME)`); `name` must fit in 15 bytes.
pub fn name_this_thread(name: &str) {
    debug_assert!(name.len() <= 15, "{name} is longer than 15 bytes");
    if let Ok(c) = std::ffi::CString::new(name) {
        // SAFETY: PR_SET_NAME reads a NUL-terminated string, which `c` is and outlives the call.
        unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr(), 0, 0, 0) };
    }
}

#[cfg(test)]
mod tests {
    /// Linux cuts a thread name at 15 bytes; a longer one would show up cut in `/proc`, in
    /// `top -H` and in the per-thread CPU keys.
    #[test]
    fn thread_names_fit_the_linux_comm_limit() {
        for name in [super::WORKER_THREAD, super::MAIN_THREAD]
            .into_iter()
            .chain(super::WRITER_THREADS)
        {
            assert!(name.len() <= 15, "{name} is {} bytes", name.len());
        }
    }
}
