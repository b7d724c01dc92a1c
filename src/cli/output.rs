//! Writing the commands' output. Rust ignores `SIGPIPE`, so `print!` panics when the reader of
//! standard output has gone away (`… | head -1`). Here such a reader ends the output quietly,
//! as a Unix filter ends, and the command's exit code stands: the work is done either way. Any
//! other write failure (a full disk behind `>`) is an error.

use std::io::{ErrorKind, Write};

/// Writes `text` to standard output and flushes it; nothing when the reader is gone (`EPIPE`).
///
/// Errors: any other write failure.
pub fn stdout(text: &str) -> std::io::Result<()> {
    write(std::io::stdout().lock(), text)
}

/// Writes `text` to standard error (plans, notes, errors) and flushes it. A failure is dropped:
/// there is nowhere left to report it.
pub fn stderr(text: &str) {
    let _ = write(std::io::stderr().lock(), text);
}

fn write(mut to: impl Write, text: &str) -> std::io::Result<()> {
    match to.write_all(text.as_bytes()).and_then(|()| to.flush()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}
