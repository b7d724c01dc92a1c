//! Captures every tracing event of the test process, at TRACE level for every target
//! (the operator, kube, hyper, reqwest through the `log` bridge, the simulator), into memory.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

/// The captured log lines.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Everything captured so far, as text.
    pub fn text(&self) -> String {
        let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// A writer appending to [`Captured`].
pub struct CaptureWriter(Captured);

impl Write for CaptureWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = (self.0).0.lock() {
            b.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

static CAPTURED: OnceLock<Captured> = OnceLock::new();

/// Installs the capturing subscriber as the process's global one (first call only; every test
/// of this binary calls it before anything logs) and returns the capture.
pub fn install() -> Captured {
    CAPTURED
        .get_or_init(|| {
            let captured = Captured::default();
            let writer = captured.clone();
            tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                .with_ansi(false)
                .with_writer(move || CaptureWriter(writer.clone()))
                .try_init()
                .expect("the capturing subscriber is the first one");
            captured
        })
        .clone()
}
