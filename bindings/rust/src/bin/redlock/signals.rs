//! The signals that would end `redlock`, caught so that the lock is released and the
//! command it runs never outlives it.
//!
//! Every signal whose default action ends the process and that can be caught is
//! caught here (tokio's signal streams do not say who sent a signal, which matters for
//! the terminal's signals, so this installs its own `SA_SIGINFO` handler). The handler
//! only writes two bytes (the signal number, and whether the kernel sent it) to a
//! socket the async side reads. What cannot be caught (SIGKILL, and the faults a
//! process raises against itself) is covered by the parent-death signal the command is
//! started with: it gets SIGKILL the moment `redlock` is gone, since nothing extends
//! its lock any more.

use std::io;
use std::os::fd::IntoRawFd;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::sync::atomic::{AtomicI32, Ordering};

use tokio::io::AsyncReadExt;
use tokio::net::UnixStream;

/// Where the handler writes; -1 until [`Signals::install`] ran.
static WRITE_FD: AtomicI32 = AtomicI32::new(-1);

/// One caught signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caught {
    /// The signal number.
    pub signal: i32,
    /// True when the kernel sent it (`SI_KERNEL`): for SIGINT, SIGQUIT and SIGHUP that
    /// means the terminal, which sent it to the command (same process group) as well.
    pub from_kernel: bool,
}

impl Caught {
    /// Whether the command must be sent this signal: always, except a terminal's
    /// signal, which reached the command directly (forwarding it would deliver it twice).
    pub fn forward(self) -> bool {
        let terminal = [libc::SIGINT, libc::SIGQUIT, libc::SIGHUP].contains(&self.signal);
        !(terminal && self.from_kernel)
    }
}

/// Signals whose default action ends the process and that a handler may catch.
fn ending_signals() -> Vec<i32> {
    let mut signals = vec![
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGTERM,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGXCPU,
        libc::SIGXFSZ,
        libc::SIGIO,
    ];
    #[cfg(target_os = "linux")]
    {
        signals.extend([libc::SIGPWR, libc::SIGSTKFLT]);
        signals.extend(libc::SIGRTMIN()..=libc::SIGRTMAX());
    }
    signals
}

extern "C" fn on_signal(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // Only async-signal-safe calls here: read an atomic, write(2). errno is restored so
    // the interrupted code never sees ours.
    // SAFETY: the kernel passes a valid siginfo_t for an SA_SIGINFO handler; errno's
    // location is valid for the thread running the handler.
    unsafe {
        let errno = *libc::__errno_location();
        let from_kernel = !info.is_null() && (*info).si_code == libc::SI_KERNEL;
        let bytes = [signal as u8, u8::from(from_kernel)];
        let fd = WRITE_FD.load(Ordering::Relaxed);
        if fd >= 0 {
            libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        }
        *libc::__errno_location() = errno;
    }
}

/// The stream of caught signals.
pub struct Signals {
    reader: UnixStream,
}

impl Signals {
    /// Installs the handler for every signal in [`ending_signals`]. Call once, inside
    /// the runtime.
    pub fn install() -> io::Result<Signals> {
        let (reader, writer) = StdUnixStream::pair()?;
        reader.set_nonblocking(true)?;
        // A full socket drops the newest signal rather than blocking the handler.
        writer.set_nonblocking(true)?;
        WRITE_FD.store(writer.into_raw_fd(), Ordering::Relaxed);
        for signal in ending_signals() {
            // SAFETY: a zeroed sigaction is valid; the handler only does
            // async-signal-safe work; sigemptyset and sigaction get valid pointers.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal
                    as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                    as libc::sighandler_t;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        Ok(Signals {
            reader: UnixStream::from_std(reader)?,
        })
    }

    /// The next caught signal (pending forever if the socket fails, which it cannot
    /// while this process holds both ends).
    pub async fn recv(&mut self) -> Caught {
        let mut bytes = [0u8; 2];
        match self.reader.read_exact(&mut bytes).await {
            Ok(_) => Caught {
                signal: i32::from(bytes[0]),
                from_kernel: bytes[1] == 1,
            },
            Err(_) => std::future::pending().await,
        }
    }
}

/// Sends `signal` to the process `pid` (nothing if it is gone).
pub fn send(pid: Option<u32>, signal: i32) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) with a positive pid has no memory-safety requirements.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

/// Makes `command` die with SIGKILL when this process ends, however it ends (SIGKILL
/// included): without `redlock` nothing extends or releases the lock, so the command
/// must not go on believing it holds one.
pub fn kill_with_parent(command: &mut tokio::process::Command) {
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id();
        // SAFETY: the closure runs between fork and exec and only makes two system
        // calls (prctl and getppid), both async-signal-safe.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died before prctl: then the signal never comes.
                if libc::getppid() as u32 != parent {
                    return Err(io::Error::other(
                        "redlock exited before the command started",
                    ));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = command;
}
