//! Failure injection for tests: under `cfg(test)`, [`point`] counts the filesystem and git
//! operations of the store on the current thread and fails the Nth one, so a test can sweep N
//! over a whole tick. In every other build [`point`] is an empty inline function.

use std::io;

#[cfg(test)]
mod hook {
    use std::cell::Cell;

    thread_local! {
        static FAIL_AT: Cell<Option<usize>> = const { Cell::new(None) };
        static COUNT: Cell<usize> = const { Cell::new(0) };
    }

    /// Makes the `n`th operation from now fail (1-based); `None` turns injection off.
    pub fn fail_at(n: Option<usize>) {
        FAIL_AT.with(|f| f.set(n));
        COUNT.with(|c| c.set(0));
    }

    /// Returns how many operations ran since the last `fail_at`.
    pub fn count() -> usize {
        COUNT.with(Cell::get)
    }

    pub(super) fn hit() -> bool {
        let n = COUNT.with(|c| {
            c.set(c.get() + 1);
            c.get()
        });
        FAIL_AT.with(|f| f.get() == Some(n))
    }
}

#[cfg(test)]
pub use hook::{count, fail_at};

/// Marks one filesystem or git operation; fails it when a test asked for this one.
#[cfg(test)]
pub fn point(what: &str) -> io::Result<()> {
    if hook::hit() {
        return Err(io::Error::other(format!("injected failure: {what}")));
    }
    Ok(())
}

/// Marks one filesystem or git operation (no-op outside tests).
#[cfg(not(test))]
#[inline(always)]
pub fn point(_what: &str) -> io::Result<()> {
    Ok(())
}
